"""Rate limits per API key (sessions/access/rate_limits.py): a bucket of requests and a bucket of request body
bytes, each holding a minute's worth. Past either, 429 `rate_limited` with Retry-After, and the request
does nothing. The buckets live on the key's row, so every web process shares them."""

import json
import time

import pytest

import ctxweb.settings as defaults
from sessions.models import ApiKey
from tests.api.conftest import Api, assert_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def limits(settings):
    """Sets the per-minute limits: limits(requests=..., bytes=...)."""

    def _set(requests=0, bytes=0):
        settings.CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE = requests
        settings.CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE = bytes

    return _set


def assert_limited(response, limit_name: str) -> int:
    body = assert_error(response, 429, "rate_limited")
    assert limit_name in body["detail"] and "try again in" in body["detail"]
    return int(response["Retry-After"])


def count_body(chars: int) -> dict:
    return {"messages": [{"role": "user", "content": "x" * chars}]}


def test_the_defaults_are_on_and_far_above_what_an_application_sends():
    assert defaults.CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE == 12_000
    assert defaults.CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE == 120_000_000


def test_the_defaults_carry_an_agent_driven_at_full_speed_for_minutes(project, settings, monkeypatch):
    """One agent conversation at full speed: an append (a 2 kB body) then a model-input read, 50 turns a
    second, i.e. 100 requests a second, for 150 seconds on a clock the test moves; far past the minute the
    buckets hold, so a limit under 100 a second would have refused some (the old 1,200 a minute did after
    12 seconds). At 1,000 a second the burst (a minute's worth) runs dry, 800 a second faster than it
    refills: after about 15 seconds."""
    from sessions.access import rate_limits
    from sessions.access.api_keys import create_api_key

    settings.CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE = defaults.CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE
    settings.CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE = defaults.CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE
    key = create_api_key(project, "agent")[0]
    clock = [1_000_000.0]
    monkeypatch.setattr(rate_limits.time, "time", lambda: clock[0])
    quota = None
    for _ in range(50 * 150):
        clock[0] += 0.02
        rate_limits.admit(key, 2_000)  # raises RateLimited when refused
        quota = rate_limits.admit(key, 0)
    assert quota.limit == 12_000 and quota.remaining > 11_000, quota

    refused_after = retry_after = None
    for n in range(20_000):
        clock[0] += 0.001
        try:
            rate_limits.admit(key, 0)
        except rate_limits.RateLimited as exc:
            refused_after, retry_after = n, exc.retry_after
            break
    assert refused_after is not None and 14_000 <= refused_after <= 15_500 and retry_after == 1, refused_after


def test_every_answer_says_where_the_requests_bucket_stands(api, limits):
    limits(requests=10)
    first = api.get("/sessions")
    assert (first["RateLimit-Limit"], first["RateLimit-Remaining"], first["RateLimit-Policy"]) == ("10", "9", "10;w=60")
    assert 1 <= int(first["RateLimit-Reset"]) <= 7  # one request refills in 6 seconds
    missing = api.get("/sessions/no-such-session")
    assert missing.status_code == 404 and missing["RateLimit-Remaining"] == "8"
    for _ in range(8):
        last = api.get("/sessions")
    assert last["RateLimit-Remaining"] == "0" and 55 <= int(last["RateLimit-Reset"]) <= 61
    refused = api.get("/sessions")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert (refused["RateLimit-Limit"], refused["RateLimit-Remaining"]) == ("10", "0")
    assert "RateLimit-Limit" not in api.with_key(None).get("/sessions")  # no key, no bucket


def test_past_the_requests_per_minute_the_key_gets_429_with_retry_after(api, limits):
    limits(requests=3)
    for _ in range(3):
        assert api.get("/sessions").status_code == 200

    retry_after = assert_limited(api.get("/sessions"), "3 requests per minute")
    # One request comes back every 20 seconds.
    assert 1 <= retry_after <= 20


def test_a_refused_request_does_nothing(api, limits, project):
    limits(requests=1)
    assert api.get("/sessions").status_code == 200

    assert_limited(api.put("/sessions/refused", {"title": "not stored"}), "requests per minute")
    assert not project.sessions.exists()


def test_past_the_bytes_per_minute_the_key_gets_429(api, limits):
    limits(bytes=1000)
    body = count_body(550)
    assert api.post("/tokens", body).status_code == 200

    response = api.post("/tokens", body)
    retry_after = assert_limited(response, "1000 bytes of request bodies per minute")
    assert 1 <= retry_after <= 60
    # A request without a body still fits.
    assert api.get("/sessions").status_code == 200


def test_a_body_larger_than_the_bucket_needs_a_full_bucket(api, limits):
    limits(bytes=100)
    assert api.post("/tokens", count_body(500)).status_code == 200

    assert_limited(api.post("/tokens", count_body(500)), "100 bytes")


def test_once_the_bucket_refills_the_key_is_admitted_again(api, limits):
    limits(requests=2)
    api.get("/sessions")
    api.get("/sessions")
    assert_limited(api.get("/sessions"), "2 requests")

    # As if 30 seconds had passed: one of the two requests has come back.
    ApiKey.objects.update(requests_refilled_at=time.time() + 30)
    assert api.get("/sessions").status_code == 200
    assert_limited(api.get("/sessions"), "2 requests")


def test_each_key_has_its_own_buckets(api, other_api, limits):
    limits(requests=1)
    assert api.get("/sessions").status_code == 200
    assert_limited(api.get("/sessions"), "1 requests")

    assert other_api.get("/sessions").status_code == 200


def test_zero_turns_the_limits_off(api, limits):
    limits(requests=0, bytes=0)
    for _ in range(30):
        assert api.post("/tokens", count_body(1000)).status_code == 200


def test_the_key_row_keeps_the_last_minutes_figures(api, limits):
    limits(requests=3)
    payload = json.dumps(count_body(100))
    for _ in range(3):
        assert api.post("/tokens", data=payload).status_code == 200
    assert_limited(api.get("/sessions"), "3 requests")

    key = ApiKey.objects.get()
    assert (key.usage_requests, key.usage_bytes, key.usage_throttled, key.throttled_total) == (3, 3 * len(payload), 1, 1)
    assert key.last_used_at is not None

    # A request more than a minute after the window began starts a new one; the total stays.
    ApiKey.objects.update(usage_since=time.time() - 61, requests_refilled_at=0)
    assert api.get("/sessions").status_code == 200
    key.refresh_from_db()
    assert (key.usage_requests, key.usage_bytes, key.usage_throttled, key.throttled_total) == (1, 0, 0, 1)



def test_a_key_deleted_while_its_request_was_authenticated_gets_401(api_key, limits, monkeypatch):
    from sessions.access import api_keys

    limits(requests=1)
    real = api_keys.authenticate

    def authenticate_then_delete(secret, candidates=None):
        key = real(secret, candidates)
        ApiKey.objects.filter(pk=key.pk).delete()
        return key

    monkeypatch.setattr("ctxweb.api.authenticate", authenticate_then_delete)

    assert_error(Api(api_key).get("/sessions"), 401, "invalid_api_key")


@pytest.mark.django_db(transaction=True)
def test_on_sqlite_the_buckets_update_commits_without_waiting_for_the_disk(api, monkeypatch):
    """The key's UPDATE is worth no flush (a power cut may lose a moment's counts); everything else
    still commits with synchronous=FULL."""
    from django.db import connection

    from sessions.access import rate_limits

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's synchronous pragma")
    levels = []
    admit = rate_limits._admit

    def watching(*args, **kwargs):
        levels.append(connection.connection.execute("PRAGMA synchronous").fetchone()[0])
        return admit(*args, **kwargs)

    monkeypatch.setattr(rate_limits, "_admit", watching)
    assert api.put("/sessions/flush", {"title": "t"}).status_code == 201

    assert levels == [1]  # NORMAL
    assert connection.connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL again


@pytest.mark.django_db(transaction=True)
def test_on_postgresql_the_buckets_update_commits_without_waiting_for_the_disk_in_one_statement(api):
    """The same on PostgreSQL: the admitting UPDATE, in autocommit its own transaction, turns
    synchronous_commit off for that transaction alone, in the same statement (one round trip); inside a
    caller's transaction it leaves the caller's commit as it is."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from sessions.db.api_keys import admission_sql

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's synchronous_commit")

    def setting() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    with CaptureQueriesContext(connection) as queries:
        assert api.put("/sessions/flush", {"title": "t"}).status_code == 201
    admissions = [q["sql"] for q in queries if q["sql"].lstrip().startswith(("UPDATE", "WITH")) and "api" in q["sql"]]
    assert len(admissions) == 1 and "set_config('synchronous_commit', 'off', true)" in admissions[0], admissions
    assert setting() == "on"  # local to the statement's own transaction
    key = ApiKey.objects.get()
    assert key.usage_requests == 1 and key.last_used_at is not None
    # The statement sets it before it updates the row: inside a transaction of the test's, it is seen after.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(admission_sql("postgresql", (), unflushed=True),
                           [0.0, 0.0, 0.0, 0.0, 0, 0, 0.0, key.last_used_at, key.pk])
            assert cursor.rowcount == 1
        assert setting() == "off"
        transaction.set_rollback(True)
    assert setting() == "on"
    with transaction.atomic():  # inside a caller's transaction the plain UPDATE: the caller's commit flushes
        with CaptureQueriesContext(connection) as inside:
            from sessions.access.rate_limits import admit

            admit(key, 10)
        assert "set_config" not in inside[0]["sql"] and setting() == "on"


def orm_admission(key: ApiKey, body_bytes: int, now: float, used_at) -> int:
    """The admitting UPDATE as the ORM built it before it was written as SQL (sessions.access.rate_limits)."""
    from django.db.models import F, Value
    from django.db.models.functions import Greatest
    from django.db.models.lookups import LessThanOrEqual

    from sessions.access.rate_limits import MINUTE, _window, buckets

    amounts = {"requests_refilled_at": 1, "bytes_refilled_at": body_bytes}
    limited = [b for b in buckets() if b.per_minute > 0]
    updates = {b.field: Greatest(F(b.field), Value(now)) + b.cost(amounts[b.field]) for b in limited}
    room = [LessThanOrEqual(Greatest(F(b.field), Value(now)), Value(now + MINUTE - b.cost(amounts[b.field])))
            for b in limited]
    return ApiKey.objects.filter(*room, pk=key.pk).update(
        **updates, **_window(now, usage_requests=1, usage_bytes=body_bytes, usage_throttled=0), last_used_at=used_at)


FIGURES = ("requests_refilled_at", "bytes_refilled_at", "usage_since", "usage_requests", "usage_bytes",
           "usage_throttled", "throttled_total", "last_used_at")


@pytest.mark.parametrize("requests, bytes", [(0, 0), (5, 0), (0, 3_000), (5, 3_000)])
def test_the_admission_sql_updates_the_key_as_the_orm_did(project, limits, monkeypatch, requests, bytes):
    """Two keys in the same state, one admitted by the SQL and one by the ORM's UPDATE, at the same
    moments: the same rows, admitted and refused alike, through a full bucket, a stale window and a refill."""
    from datetime import UTC, datetime

    from django.db.models import F

    from sessions.access import rate_limits
    from sessions.access.api_keys import create_api_key

    limits(requests=requests, bytes=bytes)
    sql_key, orm_key = (create_api_key(project, name)[0] for name in ("sql", "orm"))
    ApiKey.objects.filter(pk__in=[sql_key.pk, orm_key.pk]).update(usage_since=1_000.0, usage_requests=7,
                                                                    usage_bytes=70, usage_throttled=2)
    start = 1_000_000.0
    outcomes = []
    for step, (seconds, body) in enumerate([(0, 10), (1, 900), (1.5, 2_000), (2, 10), (2, 10), (2, 10), (2, 10),
                                            (2, 10), (2, 5_000), (30, 10), (70, 400), (70.5, 400), (200, 1)]):
        now = start + seconds
        used_at = datetime.fromtimestamp(now, UTC)
        monkeypatch.setattr(rate_limits.time, "time", lambda now=now: now)
        monkeypatch.setattr(rate_limits.timezone, "now", lambda used_at=used_at: used_at)
        _, refused = rate_limits._admit(ApiKey.objects.get(pk=sql_key.pk), body)
        admitted = orm_admission(orm_key, body, now, used_at)
        rows = [ApiKey.objects.filter(pk=k.pk).values(*FIGURES).get() for k in (sql_key, orm_key)]
        if not admitted:  # the ORM side's refusal bookkeeping, as _admit does it after a refused UPDATE
            ApiKey.objects.filter(pk=orm_key.pk).update(
                **rate_limits._window(now, usage_requests=0, usage_bytes=0, usage_throttled=1),
                throttled_total=F("throttled_total") + 1)
            rows[1] = ApiKey.objects.filter(pk=orm_key.pk).values(*FIGURES).get()
        assert (refused is None) == bool(admitted), step
        assert rows[0] == rows[1], step
        outcomes.append(bool(admitted))
    if requests or bytes:
        assert not all(outcomes) and any(outcomes), outcomes  # both admitted and refused requests compared
