"""Brute-force protection of the log-in pages: after CTXWEB_AUTH_FAILURE_LIMIT failed log-ins from one
address within CTXWEB_AUTH_FAILURE_WINDOW seconds, a log-in from that address is answered 429 with a
message in the page, and its password is not checked, until the window passes. The dashboard's and
the admin's log-in pages share the count."""

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions.access import throttle
from sessions.access.api_keys import create_api_key
from sessions.models import AuthFailure
from tests.conftest import AUTH_FAILURE_LIMIT, AUTH_FAILURE_WINDOW

from .conftest import PASSWORD, make_client
from .dom import parse

pytestmark = pytest.mark.usefixtures("low_auth_failure_limit")
LIMIT, WINDOW = AUTH_FAILURE_LIMIT, AUTH_FAILURE_WINDOW


def log_in(client, username="viewer", password=PASSWORD, url="/login/", **extra):
    return client.post(url, {"username": username, "password": password, **extra})


def fail(client, times, url="/login/"):
    for _ in range(times):
        response = log_in(client, password="wrong password", url=url)
        assert response.status_code == 200, response.status_code


def assert_blocked(response) -> None:
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= WINDOW
    alert = parse(response).one(cls="error")
    assert "Too many failed log-ins" in alert.text()
    assert "try again in 5 minutes" in alert.text()


def by_address():
    return AuthFailure.objects.filter(scope=AuthFailure.Scope.LOGIN)


def logged_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_the_limit_of_failed_log_ins_then_429_with_a_message(viewer_user):
    client = make_client()
    fail(client, LIMIT)

    assert_blocked(log_in(client, password="another guess"))


def test_a_correct_password_is_refused_too_and_not_even_checked(viewer_user, password_checks):
    client = make_client()
    fail(client, LIMIT)
    checked = len(password_checks)

    assert_blocked(log_in(client))
    assert not logged_in(client)
    assert len(password_checks) == checked
    assert by_address().count() == LIMIT


def test_the_page_itself_still_opens_while_blocked(viewer_user):
    client = make_client()
    fail(client, LIMIT)

    assert client.get("/login/").status_code == 200


def test_the_blocked_page_keeps_a_safe_next_and_drops_another_site(viewer_user):
    client = make_client()
    fail(client, LIMIT)

    page = parse(log_in(client, next="/search/?q=taxi"))
    assert page.one("input", name="next").get("value") == "/search/?q=taxi"
    page = parse(log_in(client, next="https://evil.example/"))
    assert page.one("input", name="next").get("value") == ""


def test_successful_log_ins_are_not_counted(viewer_user):
    client = make_client()
    for _ in range(LIMIT * 3):
        assert log_in(client).status_code == 302
        client.post("/logout/")
    fail(client, LIMIT - 1)

    assert log_in(client).status_code == 302
    assert by_address().count() == LIMIT - 1


def test_a_different_address_is_unaffected(viewer_user):
    for n in range(LIMIT):
        assert log_in(make_client(REMOTE_ADDR="198.51.100.7"), username=f"someone{n}").status_code == 200
    assert_blocked(log_in(make_client(REMOTE_ADDR="198.51.100.7")))

    other = make_client(REMOTE_ADDR="198.51.100.8")
    assert log_in(other).status_code == 302
    assert logged_in(other)


def test_when_the_window_passes_the_address_can_log_in_again(viewer_user):
    client = make_client()
    fail(client, LIMIT)
    assert_blocked(log_in(client))

    AuthFailure.objects.update(created_at=timezone.now() - timedelta(seconds=WINDOW + 1))

    assert log_in(client).status_code == 302
    assert logged_in(client)


def test_x_forwarded_for_is_ignored_by_default(viewer_user):
    for n in range(LIMIT):
        fail(make_client(HTTP_X_FORWARDED_FOR=f"203.0.113.{n}"), 1)

    assert_blocked(log_in(make_client(HTTP_X_FORWARDED_FOR="203.0.113.99")))
    assert set(by_address().values_list("subject", flat=True)) == {"127.0.0.1"}


def test_the_admin_log_in_page_counts_and_is_refused_alike(viewer_user, password_checks):
    client = make_client()
    fail(client, LIMIT - 1, url="/admin/login/")
    fail(client, 1)

    checked = len(password_checks)
    assert_blocked(log_in(client, url="/admin/login/"))
    assert_blocked(log_in(client))
    assert len(password_checks) == checked


def test_failed_log_ins_do_not_block_the_api(viewer_user, project):
    client = make_client()
    fail(client, LIMIT)
    secret = create_api_key(project, "app")[1]

    response = client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 200


def test_an_unknown_user_counts_like_a_wrong_password(db):
    client = make_client()
    for n in range(LIMIT):
        assert log_in(client, username=f"nobody{n}").status_code == 200

    assert_blocked(log_in(client, username="nobody"))


def test_guesses_at_one_account_from_many_addresses_are_limited(viewer_user, admin_user, password_checks):
    for n in range(LIMIT):
        assert log_in(make_client(REMOTE_ADDR=f"198.51.100.{n}"), password="wrong password").status_code == 200

    fresh = make_client(REMOTE_ADDR="198.51.100.200")
    checked = len(password_checks)
    assert_blocked(log_in(fresh))
    assert_blocked(log_in(fresh, username="VIEWER "))  # the same account, written otherwise
    assert len(password_checks) == checked
    assert not logged_in(fresh)
    # Another account from the same address is not blocked.
    assert log_in(fresh, username="admin").status_code == 302


def test_a_log_in_without_a_password_check_is_not_counted(viewer_user, password_checks):
    client = make_client()
    for _ in range(LIMIT + 2):
        assert client.post("/login/", {"username": "viewer"}).status_code == 200

    assert password_checks == []
    assert not AuthFailure.objects.exists()
    assert log_in(client).status_code == 302


def test_the_failure_that_would_pass_the_limit_is_refused_before_its_password_is_checked(viewer_user, rf):
    """What parallel log-ins meet: the places were taken by others between this one's page load and its
    POST. The count and the new failure are one step, so the (limit+1)-th is refused."""
    request = rf.post("/login/", {"username": "viewer"}, REMOTE_ADDR="127.0.0.1")
    for _ in range(LIMIT):
        throttle.record_failure(request, throttle.Scope.LOGIN, "viewer")

    with pytest.raises(throttle.TooManyAuthFailures):
        throttle.record_failure(request, throttle.Scope.LOGIN, "someone else")
    assert by_address().count() == LIMIT
