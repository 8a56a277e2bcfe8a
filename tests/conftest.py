import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.contrib.auth import forms as auth_forms
from django.core.management import call_command
from django.db import connection
from django.utils.text import slugify

from sessions.ingest.append import append_messages
from sessions.ingest.importers import import_file
from sessions.models import Project
from tests.openai_stub import OpenAIStub

SHARED_MEMORY = Path("/dev/shm")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory, request):
    """On SQLite the test database is a file, not memory, so that a worker process forked by the queue
    tests (tests/workers.py) opens the same database. The file goes to shared memory where there is some
    (/dev/shm): every commit syncs the WAL (synchronous=FULL, as in production), and on a disk each of
    the transactional tests' commits waits for it; in memory the sync costs nothing."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        folder = tmp_path_factory.mktemp("database")
        if SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK):
            folder = Path(tempfile.mkdtemp(prefix="ctxweb-test-", dir=SHARED_MEMORY))
            request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
        database.setdefault("TEST", {})["NAME"] = str(folder / "test_ctxweb.sqlite3")


@pytest.fixture(autouse=True, scope="session")
def import_dir_for_the_run(tmp_path_factory):
    """Uploaded transcripts wait for the worker in a temporary folder, not in the checkout's var/."""
    from django.conf import settings

    settings.CTXWEB_IMPORT_DIR = tmp_path_factory.mktemp("imports")


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True, scope="session")
def no_dashboard_limits():
    """The dashboard's per-user rate limits off for the run, module-scoped data included: a test (a browser
    walking every page) asks faster than a person; tests/dashboard/test_rate_limits.py turns them on."""
    from django.conf import settings

    settings.CTXWEB_DASHBOARD_REQUESTS_PER_MINUTE = 0
    settings.CTXWEB_DASHBOARD_HEAVY_PER_MINUTE = 0


IMMEDIATE_TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
DATABASE_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


@pytest.fixture(autouse=True)
def instant_worker(request, settings, monkeypatch):
    """Background tasks run at once, as if the worker were instantly fast: django-tasks' immediate
    backend, and the enqueue that waits for the commit made at once (a test's transaction never
    commits). So an append that needs compaction answers with its run already finished, as most tests
    expect. Tests of the queue itself are marked `real_queue`: the database backend and a real worker
    (tests/test_compaction_queue.py)."""
    if request.node.get_closest_marker("real_queue"):
        settings.TASKS = DATABASE_TASKS
        return
    settings.TASKS = IMMEDIATE_TASKS
    monkeypatch.setattr("sessions.context.compaction_runs.after_commit", lambda function: function())


# A brute-force limit low enough for tests to reach (sessions/access/throttle.py).
AUTH_FAILURE_LIMIT = 3
AUTH_FAILURE_WINDOW = 300


@pytest.fixture
def low_auth_failure_limit(settings):
    settings.CTXWEB_AUTH_FAILURE_LIMIT = AUTH_FAILURE_LIMIT
    settings.CTXWEB_AUTH_FAILURE_WINDOW = AUTH_FAILURE_WINDOW


@pytest.fixture
def password_checks(monkeypatch):
    """How many times a log-in form asked django.contrib.auth to check a password."""
    calls = []
    real = auth_forms.authenticate

    def counting(*args, **kwargs):
        calls.append(kwargs.get("username"))
        return real(*args, **kwargs)

    monkeypatch.setattr(auth_forms, "authenticate", counting)
    return calls


@pytest.fixture
def project(db):
    return Project.objects.get_or_create(name="default")[0]


@pytest.fixture
def other_project(db):
    return Project.objects.get_or_create(name="other")[0]


@pytest.fixture
def append(project):
    """append("key", [messages]) through the domain function; returns the AppendResult."""

    def _append(key, messages, actor="test"):
        return append_messages(project, key, messages, actor)

    return _append


@contextmanager
def seeded_for_module(django_db_blocker):
    """Data stored once for a test module and committed, so that each test (in a transaction rolled
    back after it, the `db` fixture) starts from it; every table is emptied after the module, as
    pytest-django does after a transactional test. For data that costs seconds to build and that the
    module's tests only read or change inside their own transaction."""
    with django_db_blocker.unblock():
        try:
            yield
        finally:
            call_command("flush", interactive=False, verbosity=0)


TRANSCRIPTS = Path(__file__).resolve().parent / "data" / "transcripts"
TRANSCRIPT_FILES = sorted(p for p in TRANSCRIPTS.rglob("*") if p.suffix in (".json", ".jsonl", ".traj"))


@pytest.fixture(scope="module")
def imported_files(django_db_setup, django_db_blocker) -> dict[Path, tuple]:
    """Every transcript file in tests/data/transcripts imported once for the module by the real importers,
    each into a project of its own: path -> (project, import report). tau-bench's 200 runs take seconds
    to import; the tests read what was imported, or change it inside their own (rolled back) transaction."""
    with seeded_for_module(django_db_blocker):
        imported = {}
        for path in TRANSCRIPT_FILES:
            project = Project.objects.create(name=slugify(path.name)[:100])
            imported[path] = (project, import_file(project, path))
        yield imported


def on_postgresql() -> bool:
    return connection.vendor == "postgresql"


# The longest test files, started first: `make test` gives each process a file at a time (pytest-xdist
# --dist loadfile), in this order, so no core is left waiting alone for a long file at the end.
LONGEST_FIRST = (
    "tests/browser/test_accessibility.py",
    "tests/browser/test_xss_corpus.py",
    "tests/api/test_stateful.py",
    "tests/dashboard/test_xss_corpus.py",
    "tests/formats/test_provider_round_trip.py",
    "tests/browser/",
    "tests/formats/",
    "tests/importers/test_transcript_files.py",
    "tests/test_every_model_input.py",
    "tests/dashboard/test_write_access.py",
    "tests/test_projection_properties.py",
    "tests/test_compaction",
    "tests/api/test_fuzz.py",
)


def start_order(item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return next((n for n, prefix in enumerate(LONGEST_FIRST) if path.startswith(prefix)), len(LONGEST_FIRST))


@pytest.hookimpl(trylast=True)  # after pytest-django's own ordering, which puts transactional tests last
def pytest_collection_modifyitems(config, items):
    items.sort(key=start_order)  # stable: the order within a file is kept
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL=postgres://... (SQLite has no row locks)")
    for item in items:
        if "postgres_only" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def openai_stub(settings):
    """An OpenAI-compatible endpoint on 127.0.0.1 that the `openai` summarizer is pointed at."""
    stub = OpenAIStub()
    stub.start()
    settings.CTXWEB_OPENAI_BASE_URL = stub.base_url
    settings.CTXWEB_OPENAI_API_KEY = "sk-test"
    settings.CTXWEB_OPENAI_MODEL = "stub-model"
    settings.CTXWEB_OPENAI_TIMEOUT = 5.0
    yield stub
    stub.stop()
