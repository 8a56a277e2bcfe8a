"""Rate limits per API key: two token buckets, each holding a minute's worth and refilled continuously,
one of requests (CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE) and one of bytes of request bodies
(CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE), which is what token counting and storing cost grows with. A
request takes one from the first and its body's size from the second (a compressed body, what it unpacks
to: admit_unpacked); when either has too little, it is refused with 429 and Retry-After, and takes nothing.

Each bucket is stored on the key's row as the moment it is full again (the generic cell rate algorithm),
so admitting a request is one conditional UPDATE of that row, in every web process alike: the database
applies concurrent UPDATEs of a row one after the other and re-evaluates the condition for each, so
parallel requests cannot overshoot. The same UPDATE keeps the figures the API keys page shows."""

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import Case, F, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from sessions.db import api_keys as key_sql
from sessions.errors import DomainError
from sessions.models import ApiKey

MINUTE = 60.0


class RateLimited(DomainError):
    status = 429
    code = "rate_limited"

    def __init__(self, detail: str, retry_after: int, quota: "Quota | None" = None):
        super().__init__(detail)
        self.retry_after = retry_after
        self.quota = quota  # where the requests bucket stood: the RateLimit-* headers of the 429


@dataclass(frozen=True)
class Bucket:
    field: str  # the ApiKey field holding the moment the bucket is full again
    setting: str
    unit: str

    @property
    def per_minute(self) -> int:
        """0: no limit."""
        return getattr(settings, self.setting)

    def interval(self) -> float:
        """Seconds it takes to refill one unit."""
        return MINUTE / self.per_minute

    def cost(self, amount: int) -> float:
        """Seconds of refill `amount` takes; more than the bucket holds is charged as a full bucket."""
        return min(amount, self.per_minute) * self.interval()


def buckets() -> list[Bucket]:
    return [
        Bucket("requests_refilled_at", "CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE", "requests"),
        Bucket("bytes_refilled_at", "CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE", "bytes of request bodies"),
    ]


def _window(now: float, **counted) -> dict:
    """The dashboard's figures: added to, or started anew when the window is more than a minute old."""
    stale = {"usage_since__lte": now - MINUTE}
    out = {"usage_since": Case(When(**stale, then=Value(now)), default=F("usage_since"))}
    for name, amount in counted.items():
        out[name] = Case(When(**stale, then=Value(amount)), default=F(name) + amount)
    return out


@contextmanager
def unflushed():
    """On SQLite, the statements inside commit without waiting for the disk. The settings make every
    commit wait for it (SQLite's synchronous=FULL, PostgreSQL's synchronous_commit=on), which is right for
    what the application stored but was most of the cost of a read: each request's UPDATE of its key's
    buckets and figures waited for a flush too. A crash may lose that UPDATE (a moment's counts); the
    next flushed commit writes it with its own, and the database stays consistent either way (SQLite's
    WAL, PostgreSQL's asynchronous commit). Inside a transaction, nothing changes: its commit is the
    caller's. The pragma is set on the driver's connection: not a query of the request. PostgreSQL's
    admission statement turns the flush off for its own commit instead (sessions.db.api_keys.admission_sql)."""
    if connection.in_atomic_block or connection.vendor != "sqlite":
        yield
        return
    connection.ensure_connection()
    database = connection.connection
    level = key_sql.synchronous(database)
    key_sql.set_synchronous(database, "NORMAL")
    try:
        yield
    finally:
        key_sql.set_synchronous(database, int(level))


@dataclass(frozen=True)
class Quota:
    """Where a key's requests bucket stands after a request, as the RateLimit-* headers say it
    (draft-ietf-httpapi-ratelimit-headers): how many it holds full, how many it holds now, and in how
    many seconds it is full again."""

    limit: int
    remaining: int
    reset: int

    @classmethod
    def of(cls, bucket: "Bucket", refilled_at: float, now: float) -> "Quota":
        left = max(0.0, now + MINUTE - refilled_at)  # seconds of refill still in the bucket
        return cls(bucket.per_minute, min(bucket.per_minute, int(left / bucket.interval() + 1e-9)),
                   max(0, math.ceil(refilled_at - now)))

    def headers(self) -> dict[str, str]:
        return {"RateLimit-Limit": str(self.limit), "RateLimit-Remaining": str(self.remaining),
                "RateLimit-Reset": str(self.reset), "RateLimit-Policy": f"{self.limit};w=60"}


def admit(key: ApiKey, body_bytes: int) -> Quota | None:
    """Takes one request and `body_bytes` from the key's buckets, or raises RateLimited (with the quota it
    was refused under). Returns where the requests bucket stands now (None when it is not limited)."""
    with unflushed():  # the refusal is raised after it: its counts are committed
        quota, refusal = _admit(key, body_bytes)
    if refusal is not None:
        raise refusal
    return quota


def _admit(key: ApiKey, body_bytes: int) -> tuple[Quota | None, DomainError | None]:
    now = time.time()
    amounts = {"requests_refilled_at": 1, "bytes_refilled_at": body_bytes}
    limited = [b for b in buckets() if b.per_minute > 0]
    costs = {b.field: b.cost(amounts[b.field]) for b in limited}
    stale_after = now - MINUTE
    # In the order of the statement's placeholders (sessions.db.api_keys.admission_sql).
    params = [value for b in limited for value in (now, costs[b.field])]
    params += [stale_after, now, stale_after, stale_after, body_bytes, body_bytes, stale_after]
    last_used = ApiKey._meta.get_field("last_used_at").get_db_prep_save(timezone.now(), connection)
    params += [last_used, key.pk]
    params += [value for b in limited for value in (now, now + MINUTE - costs[b.field])]
    admitted, refilled_at = key_sql.admit(connection, tuple(b.field for b in limited), params)
    if admitted:
        requests = next((b for b in limited if b.field == "requests_refilled_at"), None)
        return (Quota.of(requests, refilled_at, now) if requests and refilled_at is not None else None), None
    return None, _refused(key, now, costs)


def admit_unpacked(key: ApiKey, sent: int, unpacked: int) -> None:
    """A body sent compressed (an OTLP export with a Content-Encoding) costs what it unpacks to: once that
    is known, the bytes beyond the `sent` ones `admit` took are taken from the key's bytes bucket the same
    way, so that the request has taken what `admit` would have taken for its unpacked size; or RateLimited
    (429, Retry-After) before anything is stored."""
    if unpacked <= sent:
        return
    with unflushed():
        refusal = _admit_unpacked(key, sent, unpacked)
    if refusal is not None:
        raise refusal


def _admit_unpacked(key: ApiKey, sent: int, unpacked: int) -> DomainError | None:
    now = time.time()
    bucket = next(b for b in buckets() if b.field == "bytes_refilled_at")
    counted = _window(now, usage_bytes=unpacked - sent)
    if bucket.per_minute <= 0:
        ApiKey.objects.filter(pk=key.pk).update(**counted)
        return None
    cost = bucket.cost(unpacked) - bucket.cost(sent)
    # As in sessions.db.api_keys.admission_sql: room when the bucket, moved on by the cost, is full again within a minute.
    admitted = ApiKey.objects.filter(pk=key.pk, bytes_refilled_at__lte=now + MINUTE - cost).update(
        bytes_refilled_at=Greatest(F("bytes_refilled_at"), Value(now)) + cost, **counted,
    )
    if admitted:
        return None
    return _refused(key, now, {bucket.field: cost})


def _refused(key: ApiKey, now: float, costs: dict[str, float]) -> DomainError | None:
    """A request refused for want of room in the buckets of `costs` (each field's seconds of refill it
    needs), counted in the key's figures: RateLimited, with how long until every one of them has room."""
    ApiKey.objects.filter(pk=key.pk).update(
        **_window(now, usage_requests=0, usage_bytes=0, usage_throttled=1), throttled_total=F("throttled_total") + 1,
    )
    state = ApiKey.objects.filter(pk=key.pk).values(*(b.field for b in buckets())).first()
    if state is None:  # deleted since it was authenticated
        return DomainError("The API key is not valid.", code="invalid_api_key", status=401)
    waits = [(max(state[b.field], now) + costs[b.field] - MINUTE - now, b)
             for b in buckets() if b.per_minute > 0 and b.field in costs]
    if not waits:  # the limits were turned off meanwhile
        return None
    wait, bucket = max(waits, key=lambda pair: pair[0])
    seconds = max(1, math.ceil(wait))
    quota = None
    if (requests := next((b for b in buckets() if b.field == "requests_refilled_at" and b.per_minute > 0), None)):
        quota = Quota.of(requests, state["requests_refilled_at"], now)
    return RateLimited(
        f"Rate limit of this API key reached: {bucket.per_minute} {bucket.unit} per minute ({bucket.setting}); "
        f"try again in {seconds} seconds.",
        seconds, quota,
    )


@dataclass(frozen=True)
class Usage:
    requests: int
    bytes: int
    throttled: int
    throttled_total: int


def usage(key: ApiKey, now: float | None = None) -> Usage:
    """The key's figures of the last minute's counting window (nothing when it is older), from its row."""
    now = time.time() if now is None else now
    if key.usage_since <= now - MINUTE:
        return Usage(0, 0, 0, key.throttled_total)
    return Usage(key.usage_requests, key.usage_bytes, key.usage_throttled, key.throttled_total)
