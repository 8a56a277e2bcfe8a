"""Compaction: replace older turns with one checkpoint summary.

The plan (what to cover) is made under the session's row lock from stored token figures only; a run
covers at most a budget of tokens and bytes (RunBudget), oldest turns first, so a backlog is worked
off by successive runs (compaction_runs.work_off_backlog) and only what a run covers is ever read. The summarizer runs
outside any transaction, so appends are never blocked by it; the checkpoint is created
in a second short transaction, where the one-to-one link to the checkpoint it extends makes sure two
runs from the same base cannot both succeed. Raw messages are never changed.
"""

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Min, Q, Sum, TextField
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from sessions.context.checkpoints import covered_facts, covered_message_texts, store_checkpoint
from sessions.context.facts import fact_text, report
from sessions.context.model_input import (
    Layout,
    layout_model_input,
    split_turns,
    summary_message_tokens,
    visible_messages,
)
from sessions.context.pinned import line_tokens, missing_from, pinned_line, pinned_literals, pinned_of
from sessions.context.pinned_status import refresh_pinned
from sessions.context.summarizers import SUMMARIZERS, SummarizerError, get_summarizer
from sessions.db.messages import StoredBytes
from sessions.errors import DomainError
from sessions.models import (
    Checkpoint,
    CompactionRun,
    CompactionSettings,
    Event,
    EventType,
    Message,
    Role,
    Session,
)
from sessions.store.event_types import (
    CompactionCompleted,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    PinnedAdded,
)
from sessions.store.events import event_data, record
from sessions.store.leases import pulse
from sessions.wire.validation import check_text

SUMMARY_MIN_TOKENS = 48
TERMINAL = (EventType.COMPACTION_COMPLETED, EventType.COMPACTION_SKIPPED, EventType.COMPACTION_FAILED)
AUTO = "auto"
REQUEST = "request"
COVERED_CHUNK = 500  # covered messages fetched per round trip while a run reads them


@dataclass(frozen=True)
class RunBudget:
    """What one run may summarize: the covered messages' tokens (what they add to the model input) and
    their stored size in bytes (content, text and tool calls: what the run reads into memory)."""

    tokens: int
    bytes: int

    @classmethod
    def from_settings(cls) -> "RunBudget":
        return cls(settings.CTXWEB_COMPACTION_RUN_MAX_TOKENS, settings.CTXWEB_COMPACTION_RUN_MAX_BYTES)


def message_bytes():
    """What a covered message weighs when a run reads it: its content, text and tool calls as stored."""
    content, text, calls = (Coalesce(StoredBytes(Cast(name, TextField())), 0) for name in ("content", "text", "tool_calls"))
    return content + text + calls


@dataclass
class Plan:
    """What a compaction would do, from stored figures only (no tokenizing, no content)."""

    settings: CompactionSettings
    tokens_before: int
    base: Checkpoint | None
    turns: int = 0
    first_seq: int | None = None  # first seq newly covered
    last_seq: int | None = None  # the cut: last seq of the last covered turn, hidden messages included
    covered_seqs: list[int] = field(default_factory=list)  # covered messages the model would have seen
    covered_tokens: int = 0
    kept_tokens: int = 0
    turn_seq: int | None = None  # first seq of the current turn; None when it is a request's unstored turn
    covered_bytes: int | None = None  # measured only when a budget applies
    budget_reached: bool = False  # the budget stopped the cut before turns the rules would have covered

    @property
    def replaced_tokens(self) -> int:
        return self.covered_tokens + (self.base.summary_tokens if self.base else 0)

    @property
    def over_threshold(self) -> bool:
        return self.tokens_before > self.settings.max_tokens


@dataclass
class Outcome:
    status: str  # "completed" | "skipped" | "failed" | "not_run"
    plan: Plan | None = None
    reason: str = ""
    error: str = ""
    checkpoint: Checkpoint | None = None
    summary_tokens: int | None = None
    tokens_after: int | None = None
    events: list[Event] = field(default_factory=list)
    explanation: str = ""  # why it was skipped, in plain words, when a response says so (sessions.context.what_if)

    @property
    def ran(self) -> bool:
        return self.status != "not_run"

    def figures(self) -> dict:
        plan = self.plan
        data = {"status": self.status}
        if plan is not None:
            data.update(
                max_tokens=plan.settings.max_tokens,
                keep_recent_tokens=plan.settings.keep_recent_tokens,
                tokens_before=plan.tokens_before,
            )
        if self.reason:
            data["reason"] = self.reason
        if self.error:
            data["error"] = self.error
        if self.checkpoint is not None:
            data.update(
                checkpoint_id=self.checkpoint.pk,
                covered_seq_range=[self.checkpoint.first_seq, self.checkpoint.last_seq],
                replaced_tokens=self.checkpoint.replaced_tokens,
                summary_tokens=self.checkpoint.summary_tokens,
                tokens_after=self.tokens_after,
                still_over_threshold=self.tokens_after > plan.settings.max_tokens,
                budget_reached=plan.budget_reached,
            )
        return data


def resolve_settings(session: Session, max_tokens=None, keep_recent_tokens=None, summarizer=None) -> CompactionSettings:
    base = session.compaction_settings()
    for name, value in (("max_tokens", max_tokens), ("keep_recent_tokens", keep_recent_tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise DomainError(f"{name} must be a non-negative whole number", code="invalid_settings")
    if summarizer is not None and summarizer not in SUMMARIZERS:
        raise DomainError(f"summarizer must be one of {', '.join(SUMMARIZERS)}", code="invalid_settings")
    return replace(
        base,
        max_tokens=base.max_tokens if max_tokens is None else max_tokens,
        keep_recent_tokens=base.keep_recent_tokens if keep_recent_tokens is None else keep_recent_tokens,
        summarizer=summarizer or base.summarizer,
    )


def requested_settings(session: Session, max_tokens=None, keep_recent_tokens=None, summarizer=None,
                       summary=None) -> CompactionSettings:
    """The settings of a compaction asked for with these overrides; a supplied `summary` (checked here)
    stands for the summarizer."""
    compaction = resolve_settings(session, max_tokens, keep_recent_tokens, summarizer)
    if summary is None:
        return compaction
    if not isinstance(summary, str):
        raise DomainError("summary must be a string", code="invalid_summary")
    check_text(summary, None, "summary")
    return replace(compaction, summarizer="supplied")


@dataclass
class CurrentTurn:
    """The newest turn of a model input, which compaction always keeps whole."""

    first_seq: int
    tokens: int  # what its messages add to the model input


def current_turn(layout) -> CurrentTurn | None:
    """The current turn of a model input laid out by sessions.context.model_input (a Layout, or the StoredLayout
    of the input as built now). From a StoredLayout it costs two or three small queries and reads no
    row of the turn but those the input leaves calls out of: the turn is summed in the database."""
    if isinstance(layout, Layout):
        turns = split_turns(layout.rows)
        if not turns:
            return None
        return CurrentTurn(turns[-1][0].seq, sum(layout.kept_tokens[row.seq] for row in turns[-1]))
    after = layout.checkpoint.last_seq if layout.checkpoint else 0
    visible = visible_messages(layout.session, after)
    # The (session, role, seq) index finds the newest user message directly.
    start = visible.filter(role=Role.USER).order_by("-seq").values_list("seq", flat=True).first() or after + 1
    left_out = [seq for seq in layout.left_out if seq >= start]
    figures = visible.filter(seq__gte=start).aggregate(
        first_seq=Min("seq"), tokens=Sum("tokens", filter=~Q(seq__in=left_out) if left_out else None, default=0),
    )
    if figures["first_seq"] is None:
        return None
    tokens = figures["tokens"]
    # Calls the input leaves out: without a result (dropped), or still awaiting theirs (pending).
    dropped = {seq: ids for seq, ids in layout.dropped.items() if seq >= start and seq not in left_out}
    for seq, ids in layout.pending.items():
        if seq >= start and seq not in left_out:
            dropped[seq] = dropped.get(seq, []) + ids
    if dropped:
        for seq, call_ids, call_tokens in visible.filter(seq__in=dropped).values_list("seq", "call_ids", "tool_call_tokens"):
            tokens -= sum(t for cid, t in zip(call_ids, call_tokens, strict=False) if cid in dropped[seq])
    return CurrentTurn(figures["first_seq"], tokens)


def oversized_turn(layout, compaction: CompactionSettings) -> CurrentTurn | None:
    """The current turn when it alone is over max_tokens: no compaction can bring the model input under
    the threshold until a user message starts a new turn (the current turn is never split)."""
    if layout.tokens <= compaction.max_tokens:
        return None
    turn = current_turn(layout)
    return turn if turn is not None and turn.tokens > compaction.max_tokens else None


def plan_compaction(
    session: Session,
    compaction: CompactionSettings,
    pending_turn_tokens: int | None = None,
    budget: RunBudget | None = None,
    layout: Layout | None = None,
) -> Plan:
    """Split the visible messages after the latest checkpoint into turns and choose what to cover.

    The current turn is always kept; older turns are kept whole, newest first, while the kept total
    stays within keep_recent_tokens; the first that does not fit and everything before it may be
    covered. With a `budget`, the run covers only the oldest of those turns that fit it (at least one:
    a turn larger than the budget is covered alone, or a backlog holding one could never be worked
    off), and the plan says the budget was reached. No message content is read: tokens are stored
    figures, bytes are measured by the database, for the turns within the token budget only.
    `pending_turn_tokens`: a request's unpersisted messages start a new turn of that size, which is
    then the current turn (every stored turn is older). `layout`: the model input as laid out now, when
    the caller has it already.
    """
    measure = layout or layout_model_input(session)
    plan = Plan(compaction, measure.tokens, measure.checkpoint)
    turns = split_turns(measure.rows)
    if turns:
        plan.turn_seq = turns[-1][0].seq
    if pending_turn_tokens is not None:
        turns.append([])  # the request's own turn: nothing stored in it
        plan.turn_seq = None
    plan.turns = len(turns)
    if len(turns) < 2:
        return plan
    kept = measure.kept_tokens

    def cost(turn):
        if not turn:
            return pending_turn_tokens or 0
        return sum(kept[row.seq] for row in turn)

    first_kept = len(turns) - 1
    total = cost(turns[first_kept])
    for index in range(len(turns) - 2, -1, -1):
        turn_cost = cost(turns[index])
        if total + turn_cost > compaction.keep_recent_tokens:
            break
        total += turn_cost
        first_kept = index
    plan.kept_tokens = total
    if first_kept == 0:
        return plan
    cut = first_kept  # turns[:cut] are covered
    if budget is not None:
        cut, plan.covered_bytes = _oldest_turns_within(session, turns[:first_kept], kept, budget)
        plan.budget_reached = cut < first_kept
    covered = [row for turn in turns[:cut] for row in turn]
    plan.first_seq = (plan.base.last_seq if plan.base else 0) + 1
    plan.last_seq = turns[cut][0].seq - 1 if turns[cut] else session.message_count
    plan.covered_seqs = [row.seq for row in covered if kept[row.seq] > 0]
    plan.covered_tokens = sum(kept[row.seq] for row in covered)
    return plan


def _oldest_turns_within(session: Session, turns: list, kept: dict[int, int], budget: RunBudget) -> tuple[int, int]:
    """How many of `turns` (stored, oldest first, each a list of rows) one run covers within `budget`,
    at least one; and their bytes. Tokens come from the layout's figures; bytes from one database query
    over the turns within the token budget, so what is measured is bounded by the budget too."""
    count = tokens = 0
    for turn in turns:
        cost = sum(kept[row.seq] for row in turn)
        if count and tokens + cost > budget.tokens:
            break
        tokens += cost
        count += 1
    sizes = dict(
        visible_messages(session, turns[0][0].seq - 1, as_of=turns[count - 1][-1].seq)
        .annotate(size=message_bytes())
        .values_list("seq", "size")
    )
    fitting = covered_bytes = 0
    for turn in turns[:count]:
        # Messages the input leaves out (kept 0) are not read by the run, so they weigh nothing.
        turn_bytes = sum(sizes.get(row.seq, 0) for row in turn if kept[row.seq] > 0)
        if fitting and covered_bytes + turn_bytes > budget.bytes:
            break
        covered_bytes += turn_bytes
        fitting += 1
    return fitting, covered_bytes


def summary_budget(plan: Plan) -> int:
    """Tokens a summarizer may use: half of what the summary replaces, within the configured cap, so a
    summary that fits its budget is always smaller than what it replaces."""
    return max(SUMMARY_MIN_TOKENS, min(settings.CTXWEB_SUMMARY_MAX_TOKENS, plan.replaced_tokens // 2))


def _figures(trigger: str, plan: Plan) -> dict:
    """The fields every COMPACTION_* event of a run carries (event_types.CompactionFigures)."""
    return {
        "trigger": trigger,
        "max_tokens": plan.settings.max_tokens,
        "keep_recent_tokens": plan.settings.keep_recent_tokens,
        "tokens_before": plan.tokens_before,
        "summarizer": plan.settings.summarizer,
    }


def summarize(name: str, previous: str, covered: list[Message], budget: int) -> str:
    """Run summarizer `name` with a deadline of CTXWEB_SUMMARIZER_TIMEOUT seconds and check its answer.

    It runs on a thread of its own: a summarizer that hangs is abandoned there (its answer, if it ever
    comes, is dropped) and the compaction fails; no database lock is held meanwhile. Any exception and
    any answer that is not storable text becomes a SummarizerError.
    """
    function = get_summarizer(name)
    answer: dict = {}

    def run():
        try:
            answer["text"] = function(previous, covered, budget)
        except BaseException as exc:  # reported to the caller below
            answer["error"] = exc

    thread = threading.Thread(target=run, name=f"summarizer-{name}", daemon=True)
    thread.start()
    thread.join(settings.CTXWEB_SUMMARIZER_TIMEOUT)
    if thread.is_alive():
        raise SummarizerError(f"the summarizer did not answer within {settings.CTXWEB_SUMMARIZER_TIMEOUT:g}s")
    if "error" in answer:
        exc = answer["error"]
        if isinstance(exc, SummarizerError):
            raise exc
        raise SummarizerError(f"{type(exc).__name__}: {exc}") from exc
    text = answer.get("text")
    if not isinstance(text, str):
        raise SummarizerError(f"the summarizer returned {type(text).__name__}, not text")
    try:
        check_text(text, None, "summary")
    except DomainError as exc:
        raise SummarizerError(f"the summarizer returned text that cannot be stored: {exc}") from None
    return text


def close_interrupted(session: Session, actor: str, started: Event, error: str) -> Event:
    """Close the run that `started` began, cut off before its end, with COMPACTION_FAILED carrying the
    run's own figures, and count the failure. Call under the session's row lock."""
    event = record(session, actor, CompactionFailed(**event_data(started).model_dump(), run=started.pk, error=error))
    Session.objects.filter(pk=session.pk).update(failed_compactions=F("failed_compactions") + 1)
    return event


def _skipped_for_this_turn(session: Session, plan: Plan) -> bool:
    """Whether the session's latest compaction run was skipped as nothing_to_compact for the same
    current turn, with the same settings: the once-per-turn rule for oversized turns (SPEC §4.2). A
    new turn, other settings or any run in between (a forced one) make the next skip recorded again."""
    if plan.turn_seq is None:
        return False
    latest = Event.objects.filter(session=session, type__in=TERMINAL).order_by("-pk").only("type", "data").first()
    if latest is None or latest.type != EventType.COMPACTION_SKIPPED:
        return False
    data = event_data(latest)
    return (
        data.reason == "nothing_to_compact"
        and data.turn_seq == plan.turn_seq
        and (data.max_tokens, data.keep_recent_tokens, data.summarizer)
        == (plan.settings.max_tokens, plan.settings.keep_recent_tokens, plan.settings.summarizer)
    )


def covered_texts(session: Session, plan: Plan, covered: list[Message]):
    """What of the covered messages may hold pinned literals (facts.fact_text: text, tool calls), from
    `covered` when they were read, else from the database chunk by chunk (a supplied summary reads nothing else)."""
    if covered:
        return [fact_text(message) for message in covered]
    return covered_message_texts(session, plan.first_seq, plan.last_seq)


def read_covered(session: Session, plan: Plan) -> list[Message]:
    """The covered messages the model would have seen, with what a summarizer reads of them. Fetched in
    chunks over the planned range only, so a run holds no more than its budget of content."""
    wanted = set(plan.covered_seqs)
    rows = (
        visible_messages(session, plan.first_seq - 1, as_of=plan.last_seq)
        # session_id too: the related manager sets each message's session from it, which would
        # otherwise cost one query per message.
        .only("session_id", "seq", "role", "content", "text", "tool_calls", "tool_call_id", "call_seq")
        .iterator(chunk_size=COVERED_CHUNK)
    )
    return [message for message in rows if message.seq in wanted]


def run_closed(session_id: int, started: Event) -> bool:
    """Whether the attempt that `started` began has its terminal event already."""
    return Event.objects.filter(session_id=session_id, type__in=TERMINAL, pk__gt=started.pk, data__run=started.pk).exists()


def closed_meanwhile(run: CompactionRun, started: Event, plan: Plan) -> Outcome | None:
    """When the attempt of `run` that `started` began is no longer the run's current one (the queue's
    sweep judged its worker dead and closed it while it worked), the outcome that records nothing more:
    every COMPACTION_STARTED keeps exactly one terminal event. Call under the session's row lock."""
    if CompactionRun.objects.filter(pk=run.pk, state=CompactionRun.State.RUNNING, attempts=run.attempts).exists():
        return None
    return Outcome("failed", plan, error="this run was closed as interrupted while it worked; nothing changed",
                   events=[started])


def _finish_failed(run, actor, trigger, plan, started, error) -> Outcome:
    """Record COMPACTION_FAILED after `started`; nothing else changes."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=run.session_id)
        if (fenced := closed_meanwhile(run, started, plan)) is not None:
            return fenced
        event = record(session, actor, CompactionFailed(**_figures(trigger, plan), error=error, run=started.pk))
        Session.objects.filter(pk=session.pk).update(failed_compactions=F("failed_compactions") + 1)
    return Outcome("failed", plan, error=error, events=[started, event])


def run_attempt(
    run: CompactionRun,
    session: Session,
    *,
    trigger: str = REQUEST,
    force: bool = False,
    max_tokens: int | None = None,
    keep_recent_tokens: int | None = None,
    summary: str | None = None,
    summarizer: str | None = None,
    actor: str = "system",
    extra_tokens: int = 0,
    extra_starts_turn: bool = False,
    on_started: Callable[[Event], None] | None = None,
) -> Outcome:
    """Do one attempt of compaction `run` on `session`. Automatic runs below the threshold record nothing.

    `run` is the session's one active CompactionRun, claimed as running by the caller
    (sessions/context/compaction_runs.py: a worker's task, or `compact` in this process); it alone says
    whether a run is under way, so no second one can start from the same base. The events record the
    attempt (COMPACTION_STARTED and exactly one terminal event naming it); they never track it.

    `extra_tokens` are the tokens of a request's unpersisted messages, which count towards the
    threshold of that request but are never covered; when they hold a user message
    (`extra_starts_turn`) they are the current turn, so every stored turn may be covered.

    A run covers at most the budget of CTXWEB_COMPACTION_RUN_MAX_TOKENS and _BYTES, oldest turns
    first, and reads only the messages it covers; `outcome.plan.budget_reached` says that more is left
    for another run (compaction_runs.work_off_backlog runs them). A supplied `summary` is not held to the budget: it
    stands for everything the rules would cover, and no message is read to make it.

    `on_started` is called with the COMPACTION_STARTED event in the transaction that records it (a
    queued run links its attempt to it there, so a killed run can be closed).
    """
    compaction = requested_settings(session, max_tokens, keep_recent_tokens, summarizer, summary)

    # 1. Plan under the row lock, and record the start.
    with transaction.atomic():
        session = Session.objects.select_related("project").select_for_update(of=("self",)).get(pk=session.pk)
        budget = RunBudget.from_settings() if summary is None else None
        plan = plan_compaction(session, compaction, extra_tokens if extra_starts_turn else None, budget)
        plan.tokens_before += extra_tokens
        if trigger == AUTO and not plan.over_threshold:
            return Outcome("not_run", plan)
        if trigger == AUTO and plan.last_seq is None and _skipped_for_this_turn(session, plan):
            # Said once for this turn and these settings; every append of a long agent turn would
            # otherwise record the same pair again.
            return Outcome("not_run", plan, reason="nothing_to_compact")
        started = record(session, actor, CompactionStarted(**_figures(trigger, plan)))
        if on_started is not None:
            on_started(started)
        skip = None
        if trigger != AUTO and not force and not plan.over_threshold:
            skip = "under_threshold"
        elif plan.last_seq is None:
            skip = "nothing_to_compact"
        if skip:
            turn_seq = plan.turn_seq if skip == "nothing_to_compact" else None
            event = record(session, actor, CompactionSkipped(
                **_figures(trigger, plan), reason=skip, turn_seq=turn_seq, run=started.pk,
            ))
            return Outcome("skipped", plan, reason=skip, events=[started, event])
        covered = [] if summary is not None else read_covered(session, plan)
        pins = pinned_of(session)

    # 2. Summarize, outside any transaction (each step renews the run's lease when due: leases.pulse).
    pulse()
    previous = plan.base.summary if plan.base else ""
    # The pinned literals of what the checkpoint covers (the previous summary carries those before it):
    # their Pinned: line's tokens are set aside from the summarizer's budget (sessions/context/pinned.py).
    pinned = pinned_literals(pins, [previous, *covered_texts(session, plan, covered)]) if pins else []
    set_aside = line_tokens(pinned)
    if summary is None:
        budget = summary_budget(plan)
        if set_aside > budget:
            return _finish_failed(run, actor, trigger, plan, started, (
                f"the {len(pinned)} pinned value{'s' if len(pinned) != 1 else ''} of the messages this run would cover "
                f"({set_aside} tokens) do not fit the summary's limit of {budget} tokens; nothing was dropped "
                f"(sessions/context/pinned.py: pin fewer values, or let a run cover more)"))
        try:
            summary = summarize(compaction.summarizer, previous, covered, budget - set_aside)
        except SummarizerError as exc:
            return _finish_failed(run, actor, trigger, plan, started, str(exc))
    if not summary.strip():
        return _finish_failed(run, actor, trigger, plan, started, "the summarizer returned no text")
    summary = summary.strip()
    added = missing_from(summary, pinned)
    if added:  # what the summary does not carry of the pinned values is added back
        summary = summary + "\n" + pinned_line(added)
    summary_tokens = summary_message_tokens(summary, plan.last_seq)
    # What the summary keeps of the covered messages' facts, found outside any lock; a supplied summary
    # read none of them, so they are read here, chunk by chunk.
    pulse()
    if covered:
        facts = report(summary, covered)
    else:
        facts = covered_facts(session, plan.first_seq, plan.last_seq, summary)
    pulse()

    # 3. Create the checkpoint, unless the summary is not smaller than what it replaces.
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session.pk)
        if (fenced := closed_meanwhile(run, started, plan)) is not None:
            return fenced
        if summary_tokens >= plan.replaced_tokens:
            event = record(session, actor, CompactionSkipped(
                **_figures(trigger, plan), reason="not_smaller", summary_tokens=summary_tokens,
                replaced_tokens=plan.replaced_tokens, run=started.pk,
            ))
            return Outcome("skipped", plan, reason="not_smaller", summary_tokens=summary_tokens, events=[started, event])
        try:
            checkpoint, tokens_after = store_checkpoint(
                session,
                extra_tokens=extra_tokens,
                previous=plan.base,
                summary=summary,
                first_seq=plan.first_seq,
                last_seq=plan.last_seq,
                created_at_seq=session.message_count,
                summary_tokens=summary_tokens,
                replaced_tokens=plan.replaced_tokens,
                tokens_before=plan.tokens_before,
                summarizer=compaction.summarizer,
                trigger=trigger,
                created_at=timezone.now(),
                facts=facts,
            )
        except IntegrityError:
            error = "another compaction extended the same checkpoint first; nothing changed"
            return _finish_failed(run, actor, trigger, plan, started, error)
        outcome = Outcome("completed", plan, checkpoint=checkpoint, summary_tokens=summary_tokens, tokens_after=tokens_after)
        figures = outcome.figures()
        event = record(session, actor, CompactionCompleted(
            **_figures(trigger, plan),
            checkpoint_id=checkpoint.pk,
            at_seq=checkpoint.created_at_seq,
            covered_seq_range=figures["covered_seq_range"],
            replaced_tokens=plan.replaced_tokens,
            summary_tokens=summary_tokens,
            tokens_after=tokens_after,
            still_over_threshold=figures["still_over_threshold"],
            budget_reached=plan.budget_reached,
            run=started.pk,
            lost_count=checkpoint.facts_lost,
            pinned_added=PinnedAdded(values=[literal for _, literal in added], tokens=line_tokens(added))
            if added else None,
        ))
        outcome.events = [started, event]
    if pins:  # where the pinned facts stand in the new model input (the sessions list reads it)
        refresh_pinned(session)
    return outcome


def needs_auto_compaction(session: Session, extra_tokens: int = 0) -> bool:
    """Whether automatic compaction is on for `session` and its model input (plus a request's
    unpersisted tokens) is over max_tokens. From stored figures only. Never for a session rebuilt from
    recorded requests: its application builds its own context, and ctxweb's summaries would not reach its
    model (a compaction asked for still runs, on the input ctxweb would build from the raw log)."""
    if session.request_count:
        return False
    compaction = session.compaction_settings()
    return compaction.auto and session.input_tokens + extra_tokens > compaction.max_tokens


