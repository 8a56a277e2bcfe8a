"""Compaction runs: the one owner of whether a session's compaction is under way.

Every compaction is a CompactionRun row, and at most one per session is queued or running (a partial
unique constraint). Most are done on the task queue (django-tasks): enqueued after writes and on
request, done by a worker, kept alive by a lease, retried with backoff, and swept back into the queue
when the worker doing one dies. `compact` does one here and now, in this process (`manage.py compact`,
the demo data), as a run of its own that holds the same lease and is swept the same way, never retried.

A queued run's task only carries the row's id. The task claims the row (queued ->
running) and renews `lease_expires_at` from a heartbeat thread while compact() works. A worker killed
mid-run stops renewing: `sweep_compaction_runs` (at worker start and periodically, see the
`compaction_worker` command) closes the attempt's open COMPACTION_STARTED with COMPACTION_FAILED, so
every STARTED still gets exactly one terminal event, and puts the run back in the queue.
"""

import math
import threading
import time
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django_tasks import task

from sessions.context.compaction import (
    AUTO,
    REQUEST,
    Outcome,
    Plan,
    close_interrupted,
    needs_auto_compaction,
    requested_settings,
    run_attempt,
    run_closed,
)
from sessions.errors import Conflict, DomainError
from sessions.models import Checkpoint, CompactionRun, CompactionSettings, Event, Role, Session
from sessions.store import leases

State = CompactionRun.State
FINISHED = (State.COMPLETED, State.SKIPPED, State.FAILED)


def after_commit(function) -> None:
    """Run `function` once the current transaction commits (at once outside one): a worker must find
    the run row the task names. Tests whose worker is instant replace this (tests/conftest.py)."""
    transaction.on_commit(function)


# --- enqueueing -----------------------------------------------------------------------------------


def active_run(session: Session) -> CompactionRun | None:
    """The session's queued or running run, if any (there is at most one)."""
    return CompactionRun.objects.filter(session=session, state__in=CompactionRun.ACTIVE).first()


def enqueue_compaction(session: Session, *, trigger: str, actor: str, options: dict) -> tuple[CompactionRun, bool]:
    """A new run of `session`, enqueued when the current transaction commits, and True; or, when the
    session already has a queued or running run, that one and False (a burst of appends enqueues one
    run: the partial unique constraint one_active_compaction_run_per_session decides)."""
    for _ in range(3):
        try:
            with transaction.atomic():
                run = CompactionRun.objects.create(session=session, trigger=trigger, actor=actor, options=options)
        except IntegrityError:
            existing = active_run(session)
            if existing is not None:
                return existing, False
            continue  # it finished in between: try again
        after_commit(partial(enqueue_task, run.pk))
        return run, True
    raise DomainError("the session's compaction runs keep changing; try again", code="compaction_busy")


def enqueue_task(run_id: int, run_after: datetime | None = None) -> None:
    """Hand run `run_id` to the task queue (not before `run_after`, when the backend can defer)."""
    task_ = run_compaction
    if run_after is not None:
        if not task_.get_backend().supports_defer:
            return  # sweep_compaction_runs enqueues it when run_after has passed
        task_ = task_.using(run_after=run_after)
    result = task_.enqueue(run_id)
    CompactionRun.objects.filter(pk=run_id).update(task_id=str(result.id)[:64])


def latest_auto_run_to_keep(session: Session, extra_starts_turn: bool = False) -> CompactionRun | None:
    """The session's latest run when a new automatic run should not be enqueued after it: it failed for
    good less than CTXWEB_COMPACTION_RETRY_MAX_DELAY ago (the backoff goes on; POST .../compact can
    still force one), or it found nothing to compact in the current turn (see same_oversized_turn)."""
    latest = CompactionRun.objects.filter(session=session).order_by("-pk").first()
    if latest is None or latest.trigger != AUTO:
        return None
    if latest.state == State.FAILED:
        calm_until = latest.finished_at + timedelta(seconds=settings.CTXWEB_COMPACTION_RETRY_MAX_DELAY)
        return latest if timezone.now() < calm_until else None
    if not extra_starts_turn and same_oversized_turn(session, latest):
        return latest
    return None


def same_oversized_turn(session: Session, latest: CompactionRun) -> bool:
    """Whether the session's latest run was automatic and found nothing to compact, with today's
    settings, and no user message has started a new turn since it was enqueued: another run would find
    the same (SPEC §4.2: said once per turn). One small indexed query."""
    if latest.state != State.SKIPPED:
        return False
    outcome, compaction = latest.outcome, session.compaction_settings()
    if outcome.get("reason") != "nothing_to_compact" or "at_seq" not in latest.options:
        return False
    if (outcome.get("max_tokens"), outcome.get("keep_recent_tokens"), outcome.get("summarizer")) != (
        compaction.max_tokens, compaction.keep_recent_tokens, compaction.summarizer
    ):
        return False
    # The (session, role, seq) index answers this directly.
    return not session.messages.filter(role=Role.USER, seq__gt=latest.options["at_seq"]).exists()


# A requested run's options key when it works a backlog off: {"run": n, "of_about": m}, the n-th run of a
# backlog estimated at m runs when that run was enqueued.
BACKLOG = "backlog"


def backlog_runs(session: Session, max_tokens: int) -> int:
    """About how many runs bring the session's input under `max_tokens`: what is over it, a run's
    budget (CTXWEB_COMPACTION_RUN_MAX_TOKENS) at a time; at least one."""
    over = max(0, session.input_tokens - max_tokens)
    return max(1, math.ceil(over / max(1, settings.CTXWEB_COMPACTION_RUN_MAX_TOKENS)))


def request_compaction(session: Session, actor: str, backlog: bool = False, **options) -> CompactionRun:
    """A compaction asked for by a client (POST .../compact, the dashboard), its options checked here
    so bad ones are refused before anything is stored. 409 when the session already has a run queued
    or running: a request carries its own settings, so it cannot join it. With `backlog`, each run that
    completes with the input still over max_tokens and its budget reached enqueues the next, on the
    worker, until the input is under max_tokens (as `manage.py compact` works it off in one process)."""
    compaction = requested_settings(session, options.get("max_tokens"), options.get("keep_recent_tokens"),
                                    options.get("summarizer"), options.get("summary"))
    if backlog:
        options = {**options, BACKLOG: {"run": 1, "of_about": backlog_runs(session, compaction.max_tokens)}}
    run, created = enqueue_compaction(session, trigger="request", actor=actor, options=options)
    if not created:
        raise Conflict(
            f"compaction run {run.pk} of this session is {run.state}; ask again when it has finished",
            code="compaction_in_progress",
        )
    return run


def wait_for(run: CompactionRun, seconds: float | None = None) -> CompactionRun:
    """The run, re-read until it has finished or `seconds` (CTXWEB_COMPACTION_WAIT_SECONDS) have
    passed. A run waiting out a retry's backoff counts as unfinished."""
    seconds = settings.CTXWEB_COMPACTION_WAIT_SECONDS if seconds is None else seconds
    deadline = time.monotonic() + seconds
    latest = timezone.now() + timedelta(seconds=seconds)
    pause = 0.02
    while True:
        run.refresh_from_db()
        if run.state in FINISHED or time.monotonic() >= deadline:
            return run
        if run.state == State.QUEUED and run.run_after and run.run_after > latest:
            return run  # backing off after a failure: it will not finish within the bound
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.25)


# --- the task -------------------------------------------------------------------------------------


def backoff(attempts: int) -> timedelta:
    """How long a failed run waits before its next attempt: doubling from CTXWEB_COMPACTION_RETRY_DELAY."""
    delay = settings.CTXWEB_COMPACTION_RETRY_DELAY * 2 ** max(0, attempts - 1)
    return timedelta(seconds=min(delay, settings.CTXWEB_COMPACTION_RETRY_MAX_DELAY))


def lease() -> timedelta:
    return timedelta(seconds=settings.CTXWEB_COMPACTION_LEASE_SECONDS)


def claim(run_id: int) -> CompactionRun | None:
    """Move a due queued run to running, as a new attempt; None when it is not this task's to do
    (finished, running elsewhere, deleted, or a duplicate task arriving before its retry time)."""
    now = timezone.now()
    with transaction.atomic():
        run = CompactionRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.state != State.QUEUED or (run.run_after and run.run_after > now + timedelta(seconds=1)):
            return None
        run.state, run.attempts, run.started_at = State.RUNNING, run.attempts + 1, now
        run.lease_expires_at, run.started_event = now + lease(), None
        run.save(update_fields=["state", "attempts", "started_at", "lease_expires_at", "started_event"])
    return run


class Heartbeat:
    """Renews a running attempt's lease (CTXWEB_COMPACTION_LEASE_SECONDS) while the work goes on, twice
    over: from a thread of its own, and from the work itself, which calls `pulse()` between its steps
    (what a step costs is bounded: facts are found in linear time, a run covers a bounded budget, an
    import stores a bounded chunk). So the lease does not depend on the thread getting the interpreter:
    a long call that holds it (as a backtracking regex once did) no longer gets a live attempt declared
    dead. `running` selects the attempt's row while it is still this worker's. Used by compaction runs
    and by import jobs (sessions/ingest/import_jobs.py)."""

    def __init__(self, running: QuerySet, name: str):
        self.running = running
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.beat, name=name, daemon=True)
        self.renewed = time.monotonic()
        self.token = None

    def renew(self) -> None:
        self.renewed = time.monotonic()
        self.running.update(lease_expires_at=timezone.now() + lease())

    def due(self) -> bool:
        return time.monotonic() - self.renewed >= settings.CTXWEB_COMPACTION_LEASE_SECONDS / 3

    def beat(self):
        try:
            while not self.stopped.wait(settings.CTXWEB_COMPACTION_LEASE_SECONDS / 3):
                self.renew()
        finally:
            connection.close()

    def __enter__(self):
        self.token = leases.CURRENT.set(self)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        leases.CURRENT.reset(self.token)
        self.stopped.set()
        self.thread.join()


@task()
def run_compaction(run_id: int) -> str:
    """Do one attempt of compaction run `run_id`; returns the run's state afterwards."""
    run = claim(run_id)
    if run is None:
        return "not claimed"

    def link(started: Event) -> None:
        CompactionRun.objects.filter(pk=run.pk).update(started_event=started)
        run.started_event = started

    options = {k: v for k, v in run.options.items() if k in COMPACT_OPTIONS}
    try:
        this_attempt = CompactionRun.objects.filter(pk=run.pk, state=State.RUNNING, attempts=run.attempts)
        with Heartbeat(this_attempt, f"compaction-run-{run.pk}"):
            outcome = run_attempt(run, run.session, trigger=run.trigger, actor=run.actor, on_started=link, **options)
    except DomainError as exc:  # the run's settings no longer fit the session: retrying cannot help
        return finish(run, error=str(exc), retry=False)
    except Exception as exc:  # a database error, a bug: the attempt is closed and retried
        return finish(run, error=f"{type(exc).__name__}: {exc}", retry=True)
    state = finish(run, outcome=outcome)
    if state == State.COMPLETED and run.trigger == AUTO and outcome.plan is not None and outcome.plan.budget_reached:
        # A backlog larger than one run's budget: the next run is enqueued now that this one is done,
        # until the input is under max_tokens (compact_if_needed enqueues only while it is over).
        compact_if_needed(Session.objects.get(pk=run.session_id), run.actor)
    elif state == State.COMPLETED and run.options.get(BACKLOG) and outcome.plan is not None and outcome.plan.budget_reached \
            and outcome.tokens_after > outcome.plan.settings.max_tokens:
        continue_backlog(run, outcome)
    return state


def continue_backlog(run: CompactionRun, outcome: Outcome) -> CompactionRun | None:
    """The next run of a requested backlog, with the same options, once this one has completed with the
    input still over max_tokens; None when the session has another run queued or running already."""
    session = Session.objects.get(pk=run.session_id)
    step = run.options[BACKLOG]["run"] + 1
    about = max(step, step - 1 + backlog_runs(session, outcome.plan.settings.max_tokens))
    options = {**run.options, BACKLOG: {"run": step, "of_about": about}}
    following, created = enqueue_compaction(session, trigger="request", actor=run.actor, options=options)
    return following if created else None


COMPACT_OPTIONS = ("force", "max_tokens", "keep_recent_tokens", "summary", "summarizer", "extra_tokens", "extra_starts_turn")


def finish(run: CompactionRun, outcome: Outcome | None = None, error: str = "", retry: bool = True) -> str:
    """Record how an attempt ended. A failed automatic run goes back to the queue after a backoff
    until CTXWEB_COMPACTION_MAX_ATTEMPTS; a requested run reports its failure to the caller."""
    with transaction.atomic():
        Session.objects.select_for_update().filter(pk=run.session_id).first()
        current = CompactionRun.objects.select_for_update().filter(pk=run.pk).first()
        if current is None or current.state != State.RUNNING or current.attempts != run.attempts:
            return "taken over"  # the sweep judged this attempt dead and closed it already
        if outcome is None:
            close_attempt(current, error)
        elif outcome.status == "failed":
            error = outcome.error
        if outcome is not None:
            current.outcome = stored_outcome(outcome)
        current.lease_expires_at = None
        failed = outcome is None or outcome.status == "failed"
        if failed and retry and current.trigger == AUTO and current.attempts < settings.CTXWEB_COMPACTION_MAX_ATTEMPTS:
            current.last_error = error
            requeue_after_backoff(current)
            return current.state
        current.state = State.FAILED if failed else State(outcome.status if outcome.ran else State.SKIPPED)
        current.last_error = error
        current.finished_at = timezone.now()
        current.save()
        return current.state


def stored_outcome(outcome: Outcome) -> dict:
    """What a run keeps of an attempt's outcome: its figures and the ids of the events it recorded."""
    figures = outcome.figures()
    if outcome.plan is not None:
        figures["summarizer"] = outcome.plan.settings.summarizer
    if outcome.summary_tokens is not None:
        figures["summary_tokens"] = outcome.summary_tokens
    figures["event_ids"] = [event.pk for event in outcome.events]
    return figures


def close_attempt(run: CompactionRun, error: str) -> bool:
    """Close the attempt's COMPACTION_STARTED with COMPACTION_FAILED unless a terminal event closes it
    already. Call under the session's row lock. True when it recorded one."""
    started = run.started_event
    if started is None:
        return False
    if run_closed(run.session_id, started):
        return False
    close_interrupted(run.session, "system", started, error)
    return True


# --- liveness -------------------------------------------------------------------------------------


def sweep_compaction_runs() -> int:
    """Put runs whose worker is gone back in the queue, and hand lost queued runs to the queue again.

    A running run whose lease has passed was cut off (its worker was killed or lost the database):
    its attempt is closed with COMPACTION_FAILED, and the run is retried after a backoff, or fails
    for good after CTXWEB_COMPACTION_MAX_ATTEMPTS. A queued run that is due and whose task is not
    waiting in the queue (enqueueing never happened, or the task ended without claiming it) is
    enqueued again; a duplicate task is harmless, since only one can claim the run. Returns how many
    runs it acted on."""
    now = timezone.now()
    acted = 0
    for run_id in CompactionRun.objects.filter(state=State.RUNNING, lease_expires_at__lt=now).values_list("pk", flat=True):
        acted += requeue_expired(run_id)
    grace = now - lease()
    due = CompactionRun.objects.filter(state=State.QUEUED).filter(
        Q(run_after__lte=now) | Q(run_after__isnull=True, created_at__lt=grace)
    )
    for run in due.only("pk", "task_id"):
        if not task_waiting(run.task_id):
            enqueue_task(run.pk)
            acted += 1
    return acted


def requeue_expired(run_id: int) -> int:
    with transaction.atomic():
        run = CompactionRun.objects.select_related("started_event").filter(pk=run_id).first()
        if run is None:
            return 0
        Session.objects.select_for_update().filter(pk=run.session_id).first()
        run = CompactionRun.objects.select_for_update(of=("self",)).select_related("started_event", "session").get(pk=run_id)
        if run.state != State.RUNNING or run.lease_expires_at is None or run.lease_expires_at >= timezone.now():
            return 0
        who = "the process doing it" if run.in_process else "the worker"
        error = f"interrupted: {who} stopped during attempt {run.attempts} (its lease expired); nothing changed"
        close_attempt(run, error)
        run.last_error, run.lease_expires_at = error, None
        if not run.in_process and run.attempts < settings.CTXWEB_COMPACTION_MAX_ATTEMPTS:
            requeue_after_backoff(run)
        else:
            run.state, run.finished_at = State.FAILED, timezone.now()
            run.save()
    return 1


def requeue_after_backoff(run: CompactionRun) -> None:
    """Put a run whose attempt failed back in the queue, due after the backoff of its attempts so far,
    and hand it to the task queue once this transaction commits. Saves the run."""
    run.state, run.run_after = State.QUEUED, timezone.now() + backoff(run.attempts)
    run.save()
    after_commit(partial(enqueue_task, run.pk, run.run_after))


def task_waiting(task_id: str) -> bool:
    """Whether the queue still holds task `task_id` ready to run (False when unknown or ended)."""
    if not task_id or not run_compaction.get_backend().supports_get_result:
        return False
    try:
        result = run_compaction.get_result(task_id)
    except Exception:  # TaskResultDoesNotExist, or a result the backend can no longer read
        return False
    return result.status == "READY"


# --- a run in this process ------------------------------------------------------------------------


def compact(session: Session, *, trigger: str = REQUEST, actor: str = "system", **options) -> Outcome:
    """Compact `session` here and now, as a run of its own done in this process: a CompactionRun,
    running from the start, that holds the session's one active slot and a lease its Heartbeat renews.
    `options` are run_attempt's (force, max_tokens, keep_recent_tokens, summary, summarizer,
    extra_tokens, extra_starts_turn, on_started).

    While the session has another run queued or running, an automatic run is not run (that run's
    checkpoint will bring the input down) and a requested one is refused with 409; a running run whose
    lease has passed was cut off (its process was killed) and is closed first, as the sweep would."""
    run = claim_in_process(session, trigger, actor, options)
    if run is None:
        if trigger == AUTO:
            return Outcome("not_run")
        busy = active_run(session)
        raise Conflict(
            f"compaction run {busy.pk if busy else ''} of this session is {busy.state if busy else 'active'}; "
            "ask again when it has finished",
            code="compaction_in_progress",
        )
    on_started = options.pop("on_started", None)

    def link(started: Event) -> None:
        CompactionRun.objects.filter(pk=run.pk).update(started_event=started)
        run.started_event = started
        if on_started is not None:
            on_started(started)

    try:
        this_attempt = CompactionRun.objects.filter(pk=run.pk, state=State.RUNNING, attempts=run.attempts)
        with Heartbeat(this_attempt, f"compaction-run-{run.pk}"):
            outcome = run_attempt(run, session, trigger=trigger, actor=actor, on_started=link, **options)
    except BaseException as exc:
        finish(run, error=f"{type(exc).__name__}: {exc}", retry=False)
        raise
    finish(run, outcome=outcome, retry=False)
    return outcome


def claim_in_process(session: Session, trigger: str, actor: str, options: dict) -> CompactionRun | None:
    """A new run of `session`, running in this process from the start; None when the session has another
    run queued or running (one whose lease has passed is closed first)."""
    stale = CompactionRun.objects.filter(session=session, state=State.RUNNING, lease_expires_at__lt=timezone.now())
    for run_id in stale.values_list("pk", flat=True):
        requeue_expired(run_id)
    stored = {k: v for k, v in options.items() if k in COMPACT_OPTIONS}
    now = timezone.now()
    try:
        with transaction.atomic():
            return CompactionRun.objects.create(
                session=session, trigger=trigger, actor=actor, options=stored, in_process=True,
                state=State.RUNNING, attempts=1, started_at=now, lease_expires_at=now + lease(),
            )
    except IntegrityError:
        return None


def work_off_backlog(session: Session, *, max_runs: int | None = None, **options) -> list[Outcome]:
    """Compact `session` run after run, each within the run budget and each its own checkpoint and
    events, until the model input is no longer over max_tokens, a run covered all it could (its budget
    was not reached), or a run did not complete (skipped, failed or not run). `options` are compact()'s;
    `force` makes the first run go ahead under the threshold. Returns the outcomes in order."""
    outcomes: list[Outcome] = []
    while max_runs is None or len(outcomes) < max_runs:
        outcome = compact(session, **options)
        outcomes.append(outcome)
        if (
            outcome.status != "completed"
            or outcome.tokens_after <= outcome.plan.settings.max_tokens
            or not outcome.plan.budget_reached
        ):
            break
    return outcomes


# --- reading a run back ---------------------------------------------------------------------------


def run_outcome(run: CompactionRun) -> Outcome | None:
    """The outcome of the run's last attempt, rebuilt from what the run stored, for responses."""
    data = run.outcome
    if not data or data.get("status") not in ("completed", "skipped", "failed"):
        return None
    compaction = CompactionSettings(data["max_tokens"], data["keep_recent_tokens"], True, data.get("summarizer", ""))
    plan = Plan(compaction, data["tokens_before"], None, budget_reached=data.get("budget_reached", False))
    checkpoint = Checkpoint.objects.filter(pk=data["checkpoint_id"]).first() if data.get("checkpoint_id") else None
    events = list(Event.objects.filter(session_id=run.session_id, pk__in=data.get("event_ids", [])).order_by("pk"))
    return Outcome(
        data["status"], plan, reason=data.get("reason", ""), error=data.get("error", ""), checkpoint=checkpoint,
        summary_tokens=data.get("summary_tokens"), tokens_after=data.get("tokens_after"), events=events,
    )


def compact_if_needed(session: Session, actor: str = "system", extra_tokens: int = 0, extra_starts_turn: bool = False):
    """Automatic compaction after appends and request builds, when the session has it on and its
    model input is over max_tokens: enqueued for a worker of the task queue, never run here. Returns
    the session's queued or running CompactionRun (one per session), or None when none is needed."""
    if not needs_auto_compaction(session, extra_tokens):
        return None
    if (latest := latest_auto_run_to_keep(session, extra_starts_turn)) is not None:
        return latest
    run, _ = enqueue_compaction(session, trigger=AUTO, actor=actor, options={
        "extra_tokens": extra_tokens, "extra_starts_turn": extra_starts_turn, "at_seq": session.message_count,
    })
    return run
