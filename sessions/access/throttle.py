"""Brute-force protection: failed log-ins and failed API keys are counted in the database, so every web
process sees the same count, against each of their subjects: the client address, and the username tried
(log-ins) or the key prefix tried (API keys), so that spreading guesses over many addresses does not
help. Once a subject has CTXWEB_AUTH_FAILURE_LIMIT failures within CTXWEB_AUTH_FAILURE_WINDOW seconds,
every attempt with it is refused (a correct one too) until enough of those failures are older than the
window. Nothing new is recorded while refused, so the block ends on time. Successful attempts are never
counted.

Failures are recorded under a lock, after a fresh count, so parallel guesses cannot overshoot the limit:
a log-in takes its place before its password is checked (and gives it back when the password was right);
an API key, which is cheap to check, records its failure afterwards and is answered 429 instead of 401
when the limit was reached meanwhile."""

import ipaddress
import math
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.db import connection, transaction
from django.db.models import Q
from django.dispatch import receiver
from django.utils import timezone

from sessions.db import auth_failures as failure_sql
from sessions.errors import DomainError
from sessions.models import AuthFailure

Scope = AuthFailure.Scope
# What a failure counts against, besides the client address: the username, or the API key's prefix.
ACCOUNT_SCOPE = {Scope.LOGIN: Scope.ACCOUNT, Scope.API_KEY: Scope.KEY_PREFIX}
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
SUBJECT_LENGTH = AuthFailure._meta.get_field("subject").max_length


class TooManyAuthFailures(DomainError):
    status = 429
    code = "too_many_auth_failures"

    def __init__(self, retry_after: int):
        super().__init__(
            f"Too many failed API keys from your address or with this key; try again in {retry_after} seconds.",
        )
        self.retry_after = retry_after


@lru_cache(maxsize=8)
def parse_networks(entries: tuple[str, ...]) -> tuple[list, list[str]]:
    """The networks among `entries` (addresses or CIDR networks), and the entries that are neither."""
    networks, invalid = [], []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            invalid.append(entry)
    return networks, invalid


def trusted_proxies() -> tuple:
    networks, _ = parse_networks(tuple(settings.CTXWEB_TRUSTED_PROXIES))
    if not networks and settings.CTXWEB_TRUSTED_PROXY_COUNT > 0:
        return LOOPBACK  # the older setting alone: a proxy on this machine
    return tuple(networks)


def _ip(address: str):
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return None
    return ip.ipv4_mapped or ip if ip.version == 6 else ip


def _is_trusted(address: str, networks) -> bool:
    ip = _ip(address)
    return ip is not None and any(ip.version == net.version and ip in net for net in networks)


def client_address(request) -> str:
    """REMOTE_ADDR, unless the connection comes from a trusted proxy (CTXWEB_TRUSTED_PROXIES): then the
    right-most X-Forwarded-For entry, the address that proxy saw, and leftwards past further trusted
    proxies, at most CTXWEB_TRUSTED_PROXY_COUNT entries when that is set. Entries further left are
    whatever the client wrote, and a client that reaches the server directly cannot be believed at all.
    IPv6 addresses count per /64, the block one host usually owns."""
    address = request.META.get("REMOTE_ADDR") or ""
    networks = trusted_proxies()
    if networks:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        forwarded = [part for part in forwarded if part]
        hops = settings.CTXWEB_TRUSTED_PROXY_COUNT or len(forwarded)
        while forwarded and hops > 0 and _is_trusted(address, networks):
            address = forwarded.pop()
            hops -= 1
    ip = _ip(address)
    if ip is None:
        return address[:64] or "unknown"
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def subjects(request, scope: str, account: str = "") -> list[tuple[str, str]]:
    """(scope, subject) pairs an attempt counts against: its address, and its username or key prefix."""
    pairs = [(scope, client_address(request))]
    account = account.strip().casefold()[:SUBJECT_LENGTH]
    if account:
        pairs.append((ACCOUNT_SCOPE[scope], account))
    return pairs


def _matching(pairs, since):
    which = Q()
    for scope, subject in pairs:
        which |= Q(scope=scope, subject=subject)
    return AuthFailure.objects.filter(which, created_at__gt=since)


def recent_failures(pairs, since) -> list[int]:
    """How many failures each (scope, subject) of `pairs` has had since `since`: one query, the usual path
    of every API request, written as SQL (sessions.db.auth_failures.recent_counts, which says why)."""
    return list(failure_sql.recent_counts(connection, pairs, since))


def window_start():
    """Failures after this moment count against their subjects."""
    return timezone.now() - timedelta(seconds=settings.CTXWEB_AUTH_FAILURE_WINDOW)


def over_limit(counts: list[int]) -> bool:
    """Whether a subject with these counts of recent failures is refused."""
    return any(count >= settings.CTXWEB_AUTH_FAILURE_LIMIT for count in counts)


def _retry_after(pairs) -> int:
    limit = settings.CTXWEB_AUTH_FAILURE_LIMIT
    window = timedelta(seconds=settings.CTXWEB_AUTH_FAILURE_WINDOW)
    now = timezone.now()
    counts = recent_failures(pairs, now - window)
    seconds = 0
    for i, (scope, subject) in enumerate(pairs):
        if counts[i] < limit:
            continue
        # The limit-th newest failure in the window: while it is in the window, the subject is over the limit.
        nth = list(_matching([(scope, subject)], now - window).order_by("-created_at")
                   .values_list("created_at", flat=True)[limit - 1 : limit])
        if nth:
            seconds = max(seconds, 1, math.ceil((nth[0] + window - now).total_seconds()))
    return seconds


def retry_after(request, scope: str, account: str = "") -> int:
    """Seconds until this client may try `scope` again with this username or key prefix; 0 when it may now."""
    return _retry_after(subjects(request, scope, account))


def check(request, scope: str, account: str = "") -> None:
    seconds = retry_after(request, scope, account)
    if seconds:
        raise TooManyAuthFailures(seconds)


@dataclass
class Attempt:
    """Failures recorded ahead of a log-in's password check; given back when it turns out right."""

    pks: list[int] = field(default_factory=list)
    failed: bool = False

    def release(self) -> None:
        if self.pks:
            AuthFailure.objects.filter(pk__in=self.pks).delete()
            self.pks = []


def record_failure(request, scope: str, account: str = "") -> Attempt:
    """Counts a failure against each subject, or raises TooManyAuthFailures when one of them reached the
    limit meanwhile. The count and the insert are one step under a lock, so no more than the limit are
    ever recorded, however many attempts run at once."""
    pairs = subjects(request, scope, account)
    now = timezone.now()
    with transaction.atomic():
        failure_sql.lock_recording(connection)  # PostgreSQL's advisory lock; SQLite needs none
        seconds = _retry_after(pairs)
        if seconds:
            raise TooManyAuthFailures(seconds)
        rows = AuthFailure.objects.bulk_create(
            [AuthFailure(scope=scope, subject=subject, created_at=now) for scope, subject in pairs]
        )
    AuthFailure.objects.filter(created_at__lt=now - timedelta(seconds=settings.CTXWEB_AUTH_FAILURE_WINDOW)).delete()
    return Attempt(pks=[row.pk for row in rows])


def posted_username(request) -> str:
    return request.POST.get("username", "") if request.method == "POST" else ""


@receiver(user_login_failed)
def count_failed_login(sender, credentials, request=None, **kwargs):
    """Every form that checks a password through django.contrib.auth (the dashboard's log-in page and
    the admin's) sends this signal with the request; calls without a request are not from a client. The
    log-in pages (sessions.dashboard.login_views) recorded the failure before the check: it is only kept here."""
    if request is None:
        return
    attempt = getattr(request, "login_attempt", None)
    if attempt is not None:
        attempt.failed = True
        return
    try:
        record_failure(request, Scope.LOGIN, credentials.get("username") or "")
    except TooManyAuthFailures:
        pass  # already at the limit: the count stays where it is
