"""Waiting for a compaction run, one request of a client at a time.

POST /compact (with `wait`), POST /requests and the dashboard's "Compact now" wait for the run they need
up to CTXWEB_COMPACTION_WAIT_SECONDS, and a synchronous web worker waits with them. So that one client
cannot hold every worker of a deployment waiting, each holder (an API key, a dashboard user) has one wait
slot (models.WaitSlot): the request that takes it waits; the holder's other requests meanwhile answer at
once, as a wait that ran out would (202 with the run's id; the current input, saying a compaction is in
progress; the run's state on the page). The slot is taken by one conditional UPDATE, so every web process
agrees, and it ends by itself at its deadline even if the process holding it dies.
"""

import time
from contextlib import contextmanager

from django.conf import settings

from sessions.context.compaction import Outcome
from sessions.context.compaction_runs import request_compaction, run_outcome, wait_for
from sessions.context.what_if import why_skipped
from sessions.models import CompactionRun, Session, WaitSlot


def key_holder(api_key) -> str:
    return f"key:{api_key.pk}"


def user_holder(user) -> str:
    return f"user:{user.pk}"


@contextmanager
def wait_slot(holder: str, seconds: float):
    """Whether this request may wait (True: the holder's slot is its own for at most `seconds`)."""
    if seconds <= 0:
        yield False
        return
    now = time.time()
    until = now + seconds + 1  # a second's grace for the last read of the run
    # Two statements, the same two every time: the holder's row (made once), then the slot taken.
    WaitSlot.objects.bulk_create([WaitSlot(holder=holder)], ignore_conflicts=True)
    taken = WaitSlot.objects.filter(holder=holder, until__lt=now).update(until=until)
    try:
        yield bool(taken)
    finally:
        if taken:
            WaitSlot.objects.filter(holder=holder, until=until).update(until=0)


def wait_once(run: CompactionRun, holder: str) -> CompactionRun:
    """The run, waited for up to CTXWEB_COMPACTION_WAIT_SECONDS if the holder is not waiting already;
    otherwise as it is now."""
    with wait_slot(holder, settings.CTXWEB_COMPACTION_WAIT_SECONDS) as may_wait:
        if may_wait:
            return wait_for(run)
    run.refresh_from_db()
    return run


def compact_and_wait(session: Session, actor: str, holder: str, wait: bool = True, backlog: bool = False,
                     **options) -> tuple[CompactionRun, Outcome | None]:
    """Compaction asked for by a client (POST /compact, the dashboard's "Compact now"): the run enqueued,
    waited for when `wait` and the holder is not waiting already, and its outcome once it has one (None
    while it is queued or running); a skip is explained in plain words (Outcome.explanation). With
    `backlog` the worker goes on run after run (compaction_runs.request_compaction); the first run is
    the one waited for."""
    run = request_compaction(session, actor, backlog=backlog, **options)
    if wait:
        run = wait_once(run, holder)
    else:
        run.refresh_from_db()
    if run.state in CompactionRun.ACTIVE:
        return run, None
    outcome = run_outcome(run)
    if outcome is not None and outcome.status == "skipped":
        outcome.explanation = why_skipped(session, outcome.reason, **options) or ""
    return run, outcome
