"""Brute-force protection: failed log-ins and failed API keys are counted per client address and scope
in the database, so every web process sees the same count. Once an address has
CTXWEB_AUTH_FAILURE_LIMIT failures of a scope within CTXWEB_AUTH_FAILURE_WINDOW seconds, every
attempt of that scope from it is refused, before any password or key is checked (a correct one too),
until enough of those failures are older than the window. Nothing new is recorded while refused, so
the block ends on time. Successful attempts are never counted."""

import ipaddress
import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.utils import timezone

from .errors import DomainError
from .models import AuthFailure

Scope = AuthFailure.Scope


class TooManyAuthFailures(DomainError):
    status = 429
    code = "too_many_auth_failures"

    def __init__(self, retry_after: int):
        super().__init__(
            f"Too many failed API keys from your address; try again in {retry_after} seconds.",
        )
        self.retry_after = retry_after


def client_address(request) -> str:
    """REMOTE_ADDR, or, when CTXWEB_TRUSTED_PROXY_COUNT proxies are in front, the address the outermost
    of them saw: that many entries from the right of X-Forwarded-For (entries further left are whatever
    the client wrote). IPv6 addresses count per /64, the block one host usually owns."""
    address = request.META.get("REMOTE_ADDR") or ""
    proxies = settings.CTXWEB_TRUSTED_PROXY_COUNT
    if proxies > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        forwarded = [part for part in forwarded if part]
        if len(forwarded) >= proxies:
            address = forwarded[-proxies]
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64] or "unknown"
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def retry_after(request, scope: str) -> int:
    """Seconds until this client may try `scope` again; 0 when it may now."""
    limit = settings.CTXWEB_AUTH_FAILURE_LIMIT
    window = timedelta(seconds=settings.CTXWEB_AUTH_FAILURE_WINDOW)
    now = timezone.now()
    # The limit-th newest failure in the window: while it is in the window, the address is over the limit.
    nth = list(
        AuthFailure.objects.filter(address=client_address(request), scope=scope, created_at__gt=now - window)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[limit - 1 : limit]
    )
    if not nth:
        return 0
    return max(1, math.ceil((nth[0] + window - now).total_seconds()))


def check(request, scope: str) -> None:
    seconds = retry_after(request, scope)
    if seconds:
        raise TooManyAuthFailures(seconds)


def record_failure(request, scope: str) -> None:
    now = timezone.now()
    AuthFailure.objects.create(address=client_address(request), scope=scope, created_at=now)
    AuthFailure.objects.filter(created_at__lt=now - timedelta(seconds=settings.CTXWEB_AUTH_FAILURE_WINDOW)).delete()


@receiver(user_login_failed)
def count_failed_login(sender, credentials, request=None, **kwargs):
    """Every form that checks a password through django.contrib.auth (the dashboard's log-in page and
    the admin's) sends this signal with the request; calls without a request are not from a client."""
    if request is not None:
        record_failure(request, Scope.LOGIN)
