"""Guesses and requests sent at the same moment cannot overshoot a limit: exactly
CTXWEB_AUTH_FAILURE_LIMIT wrong API keys or passwords are evaluated, and exactly the rate limit's
requests are admitted, however many run at once."""

import threading

import pytest
from django.db import connection
from django.test import Client

from sessions.access.api_keys import create_api_key
from sessions.models import AuthFailure, Membership
from tests.api.conftest import HOST, UNKNOWN_SECRET
from tests.conftest import AUTH_FAILURE_LIMIT
from tests.dashboard.conftest import PASSWORD, create_user

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("low_auth_failure_limit")]

THREADS = 12


def at_once(call) -> list[int]:
    """call() on THREADS threads released together; the status codes they got."""
    start = threading.Barrier(THREADS)
    statuses, errors = [], []

    def run():
        try:
            client = Client(HTTP_HOST=HOST, REMOTE_ADDR="198.51.100.9")
            start.wait()
            statuses.append(call(client).status_code)
        except Exception as exc:  # reported below; a thread's exception would otherwise vanish
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a request is still waiting"
    assert errors == []
    return sorted(statuses)


def test_parallel_wrong_api_keys_get_exactly_the_limit_of_401s():
    statuses = at_once(lambda client: client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {UNKNOWN_SECRET}"}))

    assert statuses == [401] * AUTH_FAILURE_LIMIT + [429] * (THREADS - AUTH_FAILURE_LIMIT)
    assert AuthFailure.objects.filter(scope=AuthFailure.Scope.API_KEY).count() == AUTH_FAILURE_LIMIT


def test_parallel_wrong_passwords_get_exactly_the_limit_of_password_checks(project, password_checks):
    create_user("viewer", project=project, role=Membership.Role.VIEWER)

    statuses = at_once(lambda client: client.post("/login/", {"username": "viewer", "password": "wrong " + PASSWORD}))

    assert statuses == [200] * AUTH_FAILURE_LIMIT + [429] * (THREADS - AUTH_FAILURE_LIMIT)
    assert len(password_checks) == AUTH_FAILURE_LIMIT


def test_parallel_requests_of_one_key_are_admitted_exactly_up_to_its_rate_limit(project, settings):
    settings.CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE = 5
    secret = create_api_key(project, "busy app")[1]

    statuses = at_once(lambda client: client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {secret}"}))

    assert statuses == [200] * 5 + [429] * (THREADS - 5)
