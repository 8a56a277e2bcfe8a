"""Read replicas for the dashboard (issue 20.6), switched on by DATABASE_REPLICA_URL (ctxweb/settings.py).

The rule: only the dashboard's read-only requests read from the `replica` alias, everything else uses
`default`:
- every write goes to `default` (db_for_write), and so does every read inside a transaction on it;
- the API always reads from `default`: an application appends and then fetches the model input, and
  must see its own append (read-after-write), which a lagging replica would not give it;
- a dashboard request reads from the replica when its method is GET or HEAD, and the browser made no
  write within the last CTXWEB_REPLICA_PIN_SECONDS (a cookie set on every unsafe request pins it to
  `default` for that long), so the page that follows a compaction, a tag or a log-in shows it.

ReplicaReadsMiddleware decides per request and holds the choice in a context variable, which the router
reads; with no replica configured neither is installed.
"""

import time
from contextvars import ContextVar

from django.conf import settings
from django.db import connections

REPLICA = "replica"
PIN_COOKIE = "ctxweb_primary_until"
SAFE_METHODS = ("GET", "HEAD")

_read_from: ContextVar[str] = ContextVar("ctxweb_read_from", default="default")


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES


class ReplicaRouter:
    def db_for_read(self, model, **hints):
        alias = _read_from.get()
        if alias != "default" and connections["default"].in_atomic_block:
            return "default"  # a read inside a write transaction sees that transaction's writes
        return alias

    def db_for_write(self, model, **hints):
        return "default"

    def allow_relation(self, obj1, obj2, **hints):
        return True  # the replica holds the same rows as the primary

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db == "default"  # the replica follows the primary's schema by replication


def reads_from_replica(request) -> bool:
    if request.method not in SAFE_METHODS or request.path.startswith("/api/"):
        return False
    try:
        pinned_until = float(request.COOKIES.get(PIN_COOKIE, "0"))
    except ValueError:
        pinned_until = 0
    return pinned_until < time.time()


class ReplicaReadsMiddleware:
    """Chooses the alias the request's reads use (before the session and the user are read) and pins a
    browser to the primary for a few seconds after any write it makes."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not replica_configured():
            return self.get_response(request)
        alias = REPLICA if reads_from_replica(request) else "default"
        token = _read_from.set(alias)
        try:
            response = self.get_response(request)
        finally:
            _read_from.reset(token)
        if request.method not in SAFE_METHODS and not request.path.startswith("/api/"):
            seconds = settings.CTXWEB_REPLICA_PIN_SECONDS
            response.set_cookie(PIN_COOKIE, f"{time.time() + seconds:.0f}", max_age=seconds, httponly=True,
                                samesite="Lax", secure=settings.SESSION_COOKIE_SECURE)
        return response
