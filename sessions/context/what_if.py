"""What-if compaction: what a compaction of a session would do with given settings, stored nothing.

The same plan as a real run (sessions.context.compaction.plan_compaction, with the same run budget), made
without the session's row lock and without recording anything: no event, no run, no checkpoint. The
extractive summarizer is offline and free, so its summary is produced and counted; an LLM summarizer
is never called here, its summary is estimated at the budget a run would give it. Used by the API's
dry run (POST .../compact with dry_run) and the session page's "What if…" panel.
"""

from dataclasses import dataclass, field

from sessions.context.compaction import (
    Plan,
    RunBudget,
    plan_compaction,
    read_covered,
    requested_settings,
    summarize,
    summary_budget,
)
from sessions.context.model_input import Layout, layout_model_input, split_turns, summary_message_tokens
from sessions.context.summarizers import SummarizerError
from sessions.models import CompactionSettings, Session
from sessions.wire.tokens import REPLY_PRIMING

# Summarizers that cost nothing and run offline: a preview may run them.
FREE_SUMMARIZERS = ("extractive", "supplied")


@dataclass
class KeptMessages:
    """The stored messages a model input would still carry after the cut."""

    count: int = 0
    tokens: int = 0
    first_seq: int | None = None
    last_seq: int | None = None


@dataclass
class Preview:
    """What a compaction with `settings` would do now (sessions.http.schemas.CompactionPreviewOut)."""

    settings: CompactionSettings
    force: bool
    tokens_before: int
    instructions_tokens: int
    would_compact: bool = False
    reason: str | None = None  # "under_threshold" | "nothing_to_compact" | "not_smaller"
    explanation: str = ""
    first_seq: int | None = None
    last_seq: int | None = None
    covered_turns: int = 0
    covered_tokens: int = 0
    replaced_tokens: int = 0
    summary: str | None = None  # the projected summary, when the summarizer may run in a preview
    summary_tokens: int | None = None
    summary_estimated: bool = False
    summary_error: str | None = None
    tokens_after: int = 0
    budget_reached: bool = False
    kept: KeptMessages = field(default_factory=KeptMessages)
    base_summary_tokens: int = 0  # the latest checkpoint's summary, which a new checkpoint replaces
    base_last_seq: int | None = None

    @property
    def max_tokens(self) -> int:
        return self.settings.max_tokens

    @property
    def keep_recent_tokens(self) -> int:
        return self.settings.keep_recent_tokens

    @property
    def summarizer(self) -> str:
        return self.settings.summarizer

    @property
    def reply_priming(self) -> int:
        """What every model input costs on top of its messages (sessions.wire.tokens)."""
        return REPLY_PRIMING


def number(value: int) -> str:
    return f"{value:,}"


def preview_compaction(
    session: Session,
    *,
    max_tokens: int | None = None,
    keep_recent_tokens: int | None = None,
    summarizer: str | None = None,
    summary: str | None = None,
    force: bool = False,
) -> Preview:
    """What `compact(session, ...)` asked for by a client would do with these settings; records nothing.
    Bad settings raise DomainError (invalid_settings), as a real run would."""
    compaction = requested_settings(session, max_tokens, keep_recent_tokens, summarizer, summary)
    layout = layout_model_input(session)
    budget = RunBudget.from_settings() if summary is None else None
    plan = plan_compaction(session, compaction, None, budget, layout=layout)
    preview = Preview(compaction, force, plan.tokens_before, session.instructions_tokens,
                      base_summary_tokens=plan.base.summary_tokens if plan.base else 0,
                      base_last_seq=plan.base.last_seq if plan.base else None)
    if not force and not plan.over_threshold:
        preview.reason = "under_threshold"
    elif plan.last_seq is None:
        preview.reason = "nothing_to_compact"
    else:
        _project_summary(session, plan, preview, summary)
    _project_input(layout, plan, preview)
    preview.explanation = explain(preview, plan)
    return preview


def why_skipped(session: Session, reason: str, *, force: bool = False, **overrides) -> str | None:
    """The plain sentence for a run skipped as under_threshold or nothing_to_compact, with the settings it
    ran with (as the session is now); None for other outcomes."""
    if reason not in ("under_threshold", "nothing_to_compact"):
        return None
    return preview_compaction(session, force=force, **overrides).explanation


def _project_summary(session: Session, plan: Plan, preview: Preview, summary: str | None) -> None:
    preview.first_seq, preview.last_seq = plan.first_seq, plan.last_seq
    preview.covered_tokens, preview.replaced_tokens = plan.covered_tokens, plan.replaced_tokens
    preview.budget_reached = plan.budget_reached
    name = plan.settings.summarizer
    if summary is None and name in FREE_SUMMARIZERS:
        previous = plan.base.summary if plan.base else ""
        try:
            summary = summarize(name, previous, read_covered(session, plan), summary_budget(plan)).strip()
        except SummarizerError as exc:
            preview.summary_error = str(exc)
    if summary is not None and not preview.summary_error:
        preview.summary = summary
        preview.summary_tokens = summary_message_tokens(summary, plan.last_seq)
    else:
        # Never called in a preview (it may cost money, or it just failed): a run lets it use at most its
        # budget, which is what the projection assumes.
        preview.summary_tokens = summary_message_tokens("", plan.last_seq) + summary_budget(plan)
        preview.summary_estimated = True
    if preview.summary_tokens >= plan.replaced_tokens:
        preview.reason = "not_smaller"
    else:
        preview.would_compact = True


def _project_input(layout: Layout, plan: Plan, preview: Preview) -> None:
    """The model input's figures after the projected checkpoint (the input as it is when none would be made)."""
    after = preview.last_seq if preview.would_compact else 0
    kept = preview.kept
    for row in layout.rows:
        tokens = layout.kept_tokens[row.seq]
        if row.seq <= after or tokens == 0:
            continue
        kept.count += 1
        kept.tokens += tokens
        kept.first_seq = row.seq if kept.first_seq is None else kept.first_seq
        kept.last_seq = row.seq
    if preview.would_compact:
        preview.covered_turns = _turns_covered(layout, plan)
        preview.tokens_after = plan.tokens_before - plan.replaced_tokens + preview.summary_tokens
    else:
        preview.tokens_after = plan.tokens_before


def _turns_covered(layout: Layout, plan: Plan) -> int:
    return sum(1 for turn in split_turns(layout.rows) if turn and turn[0].seq <= plan.last_seq)


def explain(preview: Preview, plan: Plan) -> str:
    """The plain sentence that says what a compaction would do, or why it would cover nothing."""
    settings = plan.settings
    before = number(plan.tokens_before)
    if preview.reason == "under_threshold":
        head = (f"The model input is {before} tokens, not over max_tokens {number(settings.max_tokens)}, so a "
                "compaction asked for now is skipped (under_threshold) unless it is forced (even under max_tokens).")
        if plan.last_seq is None:
            return f"{head} Forced, it would cover nothing either: {_nothing(plan)}"
        return (f"{head} Forced, it would cover messages #{plan.first_seq}–#{plan.last_seq} "
                f"({number(plan.covered_tokens)} tokens).")
    if preview.reason == "nothing_to_compact":
        return _nothing(plan)
    summary = _summary_words(preview)
    if preview.reason == "not_smaller":
        return (f"Messages #{preview.first_seq}–#{preview.last_seq} would be covered, but {summary} is not smaller "
                f"than the {number(preview.replaced_tokens)} tokens it would replace, so no checkpoint would be made "
                "(not_smaller).")
    sentence = (f"Compaction would cover messages #{preview.first_seq}–#{preview.last_seq} "
                f"({preview.covered_turns} turn{'s' if preview.covered_turns != 1 else ''}, "
                f"{number(preview.covered_tokens)} tokens) and replace them with {summary}: the model input would go "
                f"from {before} to {number(preview.tokens_after)} tokens.")
    if preview.budget_reached:
        sentence += (" One run covers at most its budget, so this run would stop there and leave older turns the "
                     "rules would cover to another run.")
    if preview.tokens_after > settings.max_tokens:
        sentence += f" It would still be over max_tokens {number(settings.max_tokens)}."
    return sentence


def _summary_words(preview: Preview) -> str:
    tokens = number(preview.summary_tokens)
    if preview.summary_error:
        return (f"a summary estimated at {tokens} tokens at most (the {preview.summarizer} summarizer failed in the "
                f"preview: {preview.summary_error})")
    if preview.summary_estimated:
        return (f"a summary estimated at {tokens} tokens at most (the {preview.summarizer} summarizer is not called "
                "in a preview)")
    return f"a {tokens}-token summary ({preview.summarizer})"


def _nothing(plan: Plan) -> str:
    """Why a plan covers nothing although compaction would run."""
    where = "after the latest checkpoint" if plan.base else "in this session"
    if plan.turns == 0:
        return f"There are no messages {where} the model would see, so there is nothing to cover (nothing_to_compact)."
    if plan.turns == 1:
        return (f"The messages {where} are one turn, the current one (from message #{plan.turn_seq}), which "
                "compaction always keeps whole: nothing can be covered until a user message starts a new turn "
                "(nothing_to_compact).")
    keep = number(plan.settings.keep_recent_tokens)
    kept = number(plan.kept_tokens)
    since = " after the latest checkpoint" if plan.base else ""
    return (f"keep_recent_tokens {keep} keeps every turn of this {number(plan.tokens_before)}-token session: its "
            f"{plan.turns} turns{since} add up to {kept} tokens, so nothing would be covered "
            f"(nothing_to_compact). Lower keep_recent_tokens below {kept} to cover the oldest turns.")
