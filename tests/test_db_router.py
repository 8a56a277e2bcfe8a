"""Read replicas (issue 20.6, ctxweb/db_router.py): with DATABASE_REPLICA_URL set, the dashboard's
read-only requests read from the `replica` alias; writes, the API, and a browser's requests right after
a write use `default`.

The router's choices are checked in this process. The pages are checked with two real aliases: a child
pytest runs the tests marked `needs_replica` with DATABASE_REPLICA_URL set, where the replica is the test
database itself (TEST MIRROR), so a dashboard page really reads through the second alias."""

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connections
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from ctxweb import db_router
from ctxweb.db_router import PIN_COOKIE, REPLICA, ReplicaRouter, reads_from_replica
from sessions.models import Message, Session

ROOT = Path(__file__).resolve().parent.parent
needs_replica = pytest.mark.skipif(REPLICA not in settings.DATABASES,
                                   reason="runs in the child pytest of test_pages_with_two_database_aliases")


def request(method: str, path: str, **cookies):
    made = getattr(RequestFactory(), method.lower())(path)
    made.COOKIES.update(cookies)
    return made


def test_only_a_dashboard_read_without_a_recent_write_reads_from_the_replica():
    assert reads_from_replica(request("GET", "/"))
    assert reads_from_replica(request("HEAD", "/p/default/s/abc/"))
    assert not reads_from_replica(request("POST", "/p/default/s/abc/compact"))
    assert not reads_from_replica(request("GET", "/api/v1/sessions/abc/model-input"))  # read-after-write
    assert not reads_from_replica(request("GET", "/", **{PIN_COOKIE: f"{time.time() + 5:.0f}"}))
    assert reads_from_replica(request("GET", "/", **{PIN_COOKIE: f"{time.time() - 1:.0f}"}))
    assert reads_from_replica(request("GET", "/", **{PIN_COOKIE: "not a number"}))


def test_the_router_writes_to_default_and_reads_where_the_request_says(monkeypatch):
    router = ReplicaRouter()
    assert router.db_for_write(Message) == "default"
    assert router.db_for_read(Message) == "default"  # outside a dashboard request
    token = db_router._read_from.set(REPLICA)
    try:
        monkeypatch.setattr(connections["default"], "in_atomic_block", False)
        assert router.db_for_read(Session) == REPLICA
        assert router.db_for_write(Session) == "default"
        monkeypatch.setattr(connections["default"], "in_atomic_block", True)
        assert router.db_for_read(Session) == "default"  # inside a write transaction: see its writes
    finally:
        db_router._read_from.reset(token)
    assert router.allow_migrate("default", "ctx_sessions") and not router.allow_migrate(REPLICA, "ctx_sessions")


def test_pages_with_two_database_aliases():
    """Runs this file's `needs_replica` tests in a child pytest with a replica alias configured."""
    if REPLICA in settings.DATABASES:
        pytest.skip("this is the child run")
    url = os.environ.get("DATABASE_URL") or f"sqlite:///{ROOT / 'db.sqlite3'}"
    if url.startswith(("postgres:", "postgresql:")):
        # A test database of its own (test_<name>_replica), not this run's, which is open here.
        parts = urlsplit(url)
        url = urlunsplit(parts._replace(path=(parts.path.rstrip("/") or "/postgres") + "_replica"))
    env = {**os.environ, "DATABASE_URL": url, "DATABASE_REPLICA_URL": url, "DEBUG": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider", "-k", "replica_alias",
         str(Path(__file__).relative_to(ROOT))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    tail = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, tail
    assert "2 passed" in done.stdout, tail


@needs_replica
@pytest.mark.django_db(transaction=True, databases=["default", REPLICA])
def test_replica_alias_serves_the_dashboard_pages(project):
    from sessions.ingest.append import append_messages
    from tests.dashboard.conftest import create_user, make_client

    append_messages(project, "replicated", [{"role": "user", "content": "hello from the primary"}])
    client = make_client(create_user("reader", project=project, role="viewer"))
    session = Session.objects.get(key="replicated")
    for url in (reverse("sessions"), reverse("session", args=[project.name, session.key])):
        with CaptureQueriesContext(connections[REPLICA]) as replica, \
                CaptureQueriesContext(connections["default"]) as primary:
            response = client.get(url)
        assert response.status_code == 200, url
        assert b"replicated" in response.content
        assert len(replica) > 0, url
        assert not [q for q in primary if q["sql"].startswith("SELECT")], [q["sql"] for q in primary]


@needs_replica
@pytest.mark.django_db(transaction=True, databases=["default", REPLICA])
def test_replica_alias_is_never_read_by_the_api_or_after_a_write(project):
    from sessions.access.api_keys import create_api_key
    from tests.api.conftest import Api

    api = Api(create_api_key(project, "app")[1])
    with CaptureQueriesContext(connections[REPLICA]) as replica:
        assert api.post("/sessions/rw/messages", {"messages": [{"role": "user", "content": "hi"}]}).status_code == 200
        response = api.get("/sessions/rw/model-input")
        assert response.status_code == 200 and response.json()["messages"][-1]["content"] == "hi"
    assert len(replica) == 0, [q["sql"] for q in replica]

    from tests.dashboard.conftest import create_user, make_client

    client = make_client(create_user("tagger", project=project, role="editor"))
    posted = client.post(reverse("sessions"), {})  # any dashboard POST pins the browser to the primary
    assert PIN_COOKIE in posted.cookies
    with CaptureQueriesContext(connections[REPLICA]) as replica:
        assert client.get(reverse("sessions")).status_code == 200
    assert len(replica) == 0, [q["sql"] for q in replica]
