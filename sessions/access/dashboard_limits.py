"""Rate limits of the dashboard, per user, like the API keys' (sessions/access/rate_limits.py): two token buckets,
each holding a minute's worth and refilled continuously, one of requests
(CTXWEB_DASHBOARD_REQUESTS_PER_MINUTE: every page, fragment and form a logged-in user asks for) and one of
CPU-heavy actions (CTXWEB_DASHBOARD_HEAVY_PER_MINUTE: What if… previews, traces, exports, searches and
imports, marked by the `heavy` decorator). A request either bucket cannot cover is answered 429 with
Retry-After and a page saying when to come back (a fragment's target gets the sentence), and takes nothing.

Each bucket is kept on the user's DashboardBudget row as the moment it is full again (the generic cell
rate algorithm), so taking from it is one conditional UPDATE, in every web process alike."""

import functools
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.http import HttpResponse
from django.shortcuts import render

from sessions.models import DashboardBudget

MINUTE = 60.0
# Paths whose requests are counted by the API keys' limits, or not by anyone's (static files).
NOT_DASHBOARD = ("/api/", "/v1/", "/static/", "/healthz")


@dataclass(frozen=True)
class Bucket:
    field: str
    setting: str
    what: str  # what it counts, for the 429 page

    @property
    def per_minute(self) -> int:
        return getattr(settings, self.setting)


REQUESTS = Bucket("requests_refilled_at", "CTXWEB_DASHBOARD_REQUESTS_PER_MINUTE", "dashboard requests")
HEAVY = Bucket("heavy_refilled_at", "CTXWEB_DASHBOARD_HEAVY_PER_MINUTE",
               "previews, traces, exports, searches and imports")


def take(user, bucket: Bucket) -> int | None:
    """Take one from the user's bucket; None when it could, else the seconds until it can."""
    if not bucket.per_minute:
        return None
    interval = MINUTE / bucket.per_minute
    now = time.time()
    rows = DashboardBudget.objects.filter(user=user, **{f"{bucket.field}__lte": now + MINUTE - interval})
    if rows.update(**{bucket.field: Greatest(F(bucket.field), Value(now)) + interval}):
        return None
    budget = DashboardBudget.objects.filter(user=user).first()
    if budget is None:  # the user's first request: its row, then take again
        try:
            with transaction.atomic():
                DashboardBudget.objects.create(user=user)
        except IntegrityError:  # made meanwhile by another request of the user
            pass
        return take(user, bucket)
    DashboardBudget.objects.filter(pk=budget.pk).update(throttled_total=F("throttled_total") + 1)
    return max(1, math.ceil(getattr(budget, bucket.field) + interval - MINUTE - now))


def too_many(request, bucket: Bucket, retry_after: int) -> HttpResponse:
    context = {"what": bucket.what, "retry_after": retry_after}
    if getattr(request, "htmx", False):  # the fragment's target shows the sentence
        response = HttpResponse(
            f'<p class="notice bad" role="alert">Too many {bucket.what} this minute: try again in {retry_after} '
            f'second{"s" if retry_after != 1 else ""}.</p>', status=429)
    else:
        response = render(request, "429.html", context, status=429)
    response["Retry-After"] = str(retry_after)
    return response


class DashboardRateLimits:
    """Every request of a logged-in user to the dashboard (not the API, the OTLP receiver or static files)
    takes one from the user's requests bucket."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and not request.path.startswith(NOT_DASHBOARD):
            if (retry_after := take(user, REQUESTS)) is not None:
                return too_many(request, REQUESTS, retry_after)
        return self.get_response(request)


def heavy(view=None, *, when: str | None = None):
    """A view whose work grows with what it is asked (a preview, a trace, an export, a search, an
    import): it takes one from the user's heavy bucket too; `when` names a query parameter without which
    it is light (a page that traces only when asked to)."""
    if view is None:
        return functools.partial(heavy, when=when)

    @functools.wraps(view)
    def limited(request, *args, **kwargs):
        asked = when is None or request.GET.get(when) not in (None, "")
        if asked and request.user.is_authenticated and (retry_after := take(request.user, HEAVY)) is not None:
            return too_many(request, HEAVY, retry_after)
        return view(request, *args, **kwargs)

    return limited
