"""Brute-force protection of API keys: after CTXWEB_AUTH_FAILURE_LIMIT failed keys from one address, or
with one key prefix, within CTXWEB_AUTH_FAILURE_WINDOW seconds, every API request from that address or
with that prefix is answered 429 (`too_many_auth_failures`, with Retry-After) before its key is looked
at, until the window passes."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

import ctxweb.settings as defaults
from sessions.access import throttle
from sessions.access.api_keys import PREFIX_LENGTH, create_api_key
from sessions.models import ApiKey, AuthFailure
from tests.api.conftest import HOST, UNKNOWN_SECRET, Api, assert_error
from tests.conftest import AUTH_FAILURE_LIMIT, AUTH_FAILURE_WINDOW

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("low_auth_failure_limit")]
LIMIT, WINDOW = AUTH_FAILURE_LIMIT, AUTH_FAILURE_WINDOW


def api_from(secret, **meta) -> Api:
    """An Api client whose requests come from REMOTE_ADDR / X-Forwarded-For as given."""
    api = Api(secret)
    api.client = Client(HTTP_HOST=HOST, **meta)
    return api


def fail(api: Api, times: int) -> None:
    for _ in range(times):
        assert_error(api.get("/sessions", secret=UNKNOWN_SECRET), 401, "invalid_api_key")


def assert_blocked(response) -> int:
    body = assert_error(response, 429, "too_many_auth_failures")
    assert "try again" in body["detail"]
    retry_after = int(response["Retry-After"])
    assert 0 < retry_after <= WINDOW
    return retry_after


def by_address():
    return AuthFailure.objects.filter(scope=AuthFailure.Scope.API_KEY)


def age_failures(seconds: int) -> None:
    AuthFailure.objects.update(created_at=timezone.now() - timedelta(seconds=seconds))


def test_the_limit_of_failed_keys_then_429_with_retry_after(api):
    fail(api, LIMIT)

    assert_blocked(api.get("/sessions", secret=UNKNOWN_SECRET))


def test_the_default_limit_is_ten_failures_in_five_minutes(api, settings):
    assert (defaults.CTXWEB_AUTH_FAILURE_LIMIT, defaults.CTXWEB_AUTH_FAILURE_WINDOW) == (10, 300)
    assert defaults.CTXWEB_TRUSTED_PROXY_COUNT == 0
    settings.CTXWEB_AUTH_FAILURE_LIMIT = defaults.CTXWEB_AUTH_FAILURE_LIMIT
    settings.CTXWEB_AUTH_FAILURE_WINDOW = defaults.CTXWEB_AUTH_FAILURE_WINDOW
    fail(api, 9)
    assert api.get("/sessions").status_code == 200
    fail(api, 1)

    assert_blocked(api.get("/sessions", secret=UNKNOWN_SECRET))


def test_a_correct_key_is_refused_too_while_the_address_is_blocked_and_is_not_even_looked_at(api, project):
    fail(api, LIMIT)
    ApiKey.objects.update(last_used_at=None)

    assert_blocked(api.get("/sessions"))
    assert_blocked(api.put("/sessions/new", {"title": "not stored"}))
    assert not project.sessions.filter(key="new").exists()
    assert ApiKey.objects.filter(last_used_at__isnull=False).count() == 0


def test_requests_refused_while_blocked_are_not_counted_so_the_block_ends_on_time(api):
    fail(api, LIMIT)
    for _ in range(5):
        assert_blocked(api.get("/sessions", secret=UNKNOWN_SECRET))

    assert by_address().count() == LIMIT


def test_revoked_keys_count_as_failures(api, revoked_key):
    for _ in range(LIMIT):
        assert_error(api.get("/sessions", secret=revoked_key), 401, "revoked_api_key")

    assert_blocked(api.get("/sessions"))


def test_a_missing_or_malformed_authorization_header_is_not_counted(api):
    for _ in range(LIMIT + 2):
        assert_error(api.get("/sessions", secret=None), 401, "missing_api_key")
        assert_error(api.get("/sessions", authorization="Token abc"), 401, "malformed_authorization")

    assert api.get("/sessions").status_code == 200
    assert AuthFailure.objects.count() == 0


def test_successful_requests_are_not_counted(api):
    for _ in range(LIMIT * 5):
        assert api.get("/sessions").status_code == 200
    fail(api, LIMIT - 1)

    assert api.get("/sessions").status_code == 200
    assert by_address().count() == LIMIT - 1


def test_a_different_address_is_unaffected(api_key):
    fail(api_from(api_key, REMOTE_ADDR="198.51.100.7"), LIMIT)
    assert_blocked(api_from(api_key, REMOTE_ADDR="198.51.100.7").get("/sessions"))

    assert api_from(api_key, REMOTE_ADDR="198.51.100.8").get("/sessions").status_code == 200


def test_when_the_window_passes_the_address_is_unblocked(api):
    fail(api, LIMIT)
    assert_blocked(api.get("/sessions"))

    age_failures(WINDOW - 30)
    assert 0 < assert_blocked(api.get("/sessions")) <= 30

    age_failures(WINDOW + 1)
    assert api.get("/sessions").status_code == 200


def test_retry_after_counts_from_the_failure_that_reached_the_limit(api):
    fail(api, LIMIT)
    oldest = [failure.created_at for failure in AuthFailure.objects.order_by("created_at")[:2]]
    AuthFailure.objects.filter(created_at__in=oldest).update(created_at=timezone.now() - timedelta(seconds=WINDOW - 10))

    # The oldest failure leaves the window in 10 seconds and the count drops under the limit.
    assert assert_blocked(api.get("/sessions")) <= 10


def test_failures_older_than_the_window_are_pruned(api):
    fail(api, LIMIT - 1)
    age_failures(WINDOW + 1)

    fail(api, 1)

    assert by_address().count() == 1


def test_x_forwarded_for_is_ignored_by_default(api_key):
    for n in range(LIMIT):
        client = api_from(api_key, REMOTE_ADDR="192.0.2.10", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
        fail(client, 1)

    spoofing = api_from(api_key, REMOTE_ADDR="192.0.2.10", HTTP_X_FORWARDED_FOR="203.0.113.99")
    assert_blocked(spoofing.get("/sessions"))
    assert set(by_address().values_list("subject", flat=True)) == {"192.0.2.10"}


def test_behind_a_trusted_proxy_the_right_most_forwarded_address_is_the_client(api_key, settings):
    settings.CTXWEB_TRUSTED_PROXIES = ["10.0.0.1"]
    for n in range(LIMIT):
        # Whatever the client writes in front, the proxy appends the address it saw.
        fail(api_from(api_key, REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=f"1.2.3.{n}, 203.0.113.5"), 1)

    assert_blocked(api_from(api_key, REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.5").get("/sessions"))
    other = api_from(api_key, REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.5, 203.0.113.6")
    assert other.get("/sessions").status_code == 200
    assert set(by_address().values_list("subject", flat=True)) == {"203.0.113.5"}


def test_api_key_failures_do_not_block_the_login_page(api, db):
    fail(api, LIMIT)

    response = Client(HTTP_HOST=HOST).post("/login/", {"username": "nobody", "password": "wrong"})
    assert response.status_code == 200


def test_every_operation_declares_the_429_in_the_openapi_schema(api):
    schema = api.client.get("/api/v1/openapi.json").json()
    operations = [op for path in schema["paths"].values() for op in path.values()]
    assert operations
    for operation in operations:
        assert "429" in operation["responses"], operation["operationId"]


def test_a_forged_x_forwarded_for_from_a_client_that_is_no_trusted_proxy_is_not_believed(api_key, settings):
    # CTXWEB_TRUSTED_PROXY_COUNT alone trusts a proxy on this machine only; this client reached the
    # server directly (gunicorn bound to 0.0.0.0) and writes a new X-Forwarded-For for every guess.
    settings.CTXWEB_TRUSTED_PROXY_COUNT = 1
    for n in range(LIMIT):
        fail(api_from(api_key, REMOTE_ADDR="198.51.100.20", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}"), 1)

    assert_blocked(api_from(api_key, REMOTE_ADDR="198.51.100.20", HTTP_X_FORWARDED_FOR="203.0.113.99").get("/sessions"))
    assert set(by_address().values_list("subject", flat=True)) == {"198.51.100.20"}


def test_with_the_proxy_count_alone_a_proxy_on_this_machine_is_still_believed(api_key, settings):
    settings.CTXWEB_TRUSTED_PROXY_COUNT = 1
    for n in range(LIMIT):
        fail(api_from(api_key, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}"), 1)

    assert api_from(api_key, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.99").get("/sessions").status_code == 200
    assert by_address().values("subject").distinct().count() == LIMIT


def test_one_proxy_address_shared_by_every_client_blocks_only_the_guessing_one(api_key, settings):
    """The TLS proxy of docs/deployment.md on this machine, with CTXWEB_TRUSTED_PROXIES naming it."""
    settings.CTXWEB_TRUSTED_PROXIES = ["127.0.0.1"]
    fail(api_from(api_key, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.66"), LIMIT)

    assert_blocked(api_from(api_key, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.66").get("/sessions"))
    assert api_from(api_key, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.67").get("/sessions").status_code == 200


@pytest.mark.parametrize(("trusted", "remote", "forwarded", "client"), [
    # Leftwards past every trusted hop; what the client wrote further left is not read.
    (["10.0.0.0/8"], "10.0.0.1", "6.6.6.6, 203.0.113.5, 10.0.0.2", "203.0.113.5"),
    (["10.0.0.1", "2001:db8::/32"], "2001:db8::1", "203.0.113.5", "203.0.113.5"),
    # A connection from anywhere else: the header is not read at all.
    (["10.0.0.0/8"], "192.0.2.1", "203.0.113.5", "192.0.2.1"),
    # Only trusted proxies in the header: the left-most of them.
    (["10.0.0.0/8"], "10.0.0.1", "10.0.0.3, 10.0.0.2", "10.0.0.3"),
    # Garbage in the header is a client address of its own, never a trusted proxy.
    (["10.0.0.0/8"], "10.0.0.1", "6.6.6.6, not-an-address", "not-an-address"),
    ([], "10.0.0.1", "203.0.113.5", "10.0.0.1"),
])
def test_the_client_address_behind_trusted_proxies(settings, rf, trusted, remote, forwarded, client):
    settings.CTXWEB_TRUSTED_PROXIES = trusted
    request = rf.get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)

    assert throttle.client_address(request) == client


def test_the_proxy_count_bounds_how_many_forwarded_entries_are_read(settings, rf):
    settings.CTXWEB_TRUSTED_PROXIES = ["10.0.0.0/8"]
    settings.CTXWEB_TRUSTED_PROXY_COUNT = 1
    request = rf.get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.5, 10.0.0.2")

    assert throttle.client_address(request) == "10.0.0.2"


def test_guesses_at_one_key_prefix_from_many_addresses_are_limited(api_key):
    guess = api_key[:PREFIX_LENGTH] + "x" * (len(api_key) - PREFIX_LENGTH)
    for n in range(LIMIT):
        assert_error(api_from(guess, REMOTE_ADDR=f"198.51.100.{n}").get("/sessions"), 401, "invalid_api_key")

    # From an address with no failures: the guessed key's prefix is blocked, the right key included.
    fresh = api_from(api_key, REMOTE_ADDR="198.51.100.200")
    assert_blocked(fresh.get("/sessions", secret=guess))
    assert_blocked(fresh.get("/sessions"))
    assert by_address().values("subject").distinct().count() == LIMIT
    assert AuthFailure.objects.filter(scope=AuthFailure.Scope.KEY_PREFIX).count() == LIMIT


def test_other_keys_are_unaffected_by_a_blocked_prefix(api_key, project):
    guess = api_key[:PREFIX_LENGTH] + "x" * (len(api_key) - PREFIX_LENGTH)
    for n in range(LIMIT):
        assert_error(api_from(guess, REMOTE_ADDR=f"198.51.100.{n}").get("/sessions"), 401, "invalid_api_key")
    other = create_api_key(project, "other app")[1]

    assert api_from(other, REMOTE_ADDR="198.51.100.200").get("/sessions").status_code == 200


def test_the_failure_that_would_pass_the_limit_is_answered_429_and_not_recorded(api, rf):
    """What parallel requests meet: each checked the count before any had recorded its failure. The
    last one to record finds the limit reached and gets 429 instead of its 401."""
    request = rf.get("/", REMOTE_ADDR="127.0.0.1")
    for _ in range(LIMIT):
        throttle.record_failure(request, throttle.Scope.API_KEY, UNKNOWN_SECRET[:PREFIX_LENGTH])

    with pytest.raises(throttle.TooManyAuthFailures):
        throttle.record_failure(request, throttle.Scope.API_KEY, "ctx_another")
    assert by_address().count() == LIMIT
