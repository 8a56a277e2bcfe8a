"""The lease of the work a task worker is doing (a compaction run, an import job), renewed from the work
itself: `pulse()` between two of its steps renews it when a third of it has passed since it last was
(sessions.context.compaction_runs.Heartbeat renews it from a thread too). The work's steps are bounded, so the
lease does not depend on the heartbeat thread getting the interpreter while a long step holds it."""

from contextvars import ContextVar

from django.db import connection

CURRENT: ContextVar = ContextVar("lease", default=None)  # the Heartbeat of the work under way, if any


def pulse() -> None:
    """Renew the current work's lease if it is due. Nothing outside a run or an import, nor inside a
    transaction (the renewal would wait for its end to be seen, and could wait on a lock it holds)."""
    heartbeat = CURRENT.get()
    if heartbeat is not None and not connection.in_atomic_block and heartbeat.due():
        heartbeat.renew()
