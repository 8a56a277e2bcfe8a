"""Every response shape of the HTTP API v1 (ninja Schemas filled from model objects), beside the request
bodies and field types it takes from ctxweb's own wire shape (sessions.wire.ctxweb), named here too so the
API's modules find every shape of the API in one place. Event shapes come from sessions.store.events."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import BaseModel, StrictInt, StrictStr

from sessions.store import review_queues, reviews
from sessions.store.events import EventOut
from sessions.wire.ctxweb import (  # noqa: F401  (re-exported: the API's request bodies and field types)
    DATA_URL_RE,
    INPUT_ONLY,
    MAX_DIMENSION,
    MAX_ID_LENGTH,
    STORED_AS,
    UNION_TAGS,
    AppendIn,
    Arguments,
    BasisName,
    CheckpointRecord,
    CompactIn,
    CompactionSettingsIn,
    Content,
    Detail,
    Dimension,
    ErrorOut,
    FormatName,
    Identifier,
    ImagePart,
    ImageRef,
    ImageUrl,
    ImageUrlPart,
    JsonObject,
    MessageFormatName,
    MessageIn,
    MessagePatchIn,
    MessageRecord,
    MessageRecordBase,
    MessagesIn,
    NoteRecord,
    Part,
    RequestIn,
    RoleName,
    SessionIn,
    SessionRecord,
    SessionSource,
    ShortText,
    Strict,
    SummarizerName,
    Text,
    TextPart,
    Threshold,
    TokensIn,
    ToolCallIn,
    ToolCallOut,
    UtcDateTime,
    bounded_text,
    free_json,
    image_url,
    is_data_url,
    record_field,
    storable,
    utc_datetime,
)


class CompactionSettingsOut(Schema):
    max_tokens: int
    keep_recent_tokens: int
    auto: bool
    summarizer: str


class SessionOut(Schema):
    key: str
    title: str
    metadata: dict[str, Any]
    instructions: str
    instructions_tokens: int
    compaction: CompactionSettingsOut
    pinned_facts: list[dict[str, str]] = Field(description="its own pinned facts (the project's apply too)")
    message_count: int
    raw_tokens: int = Field(description="tokens of every stored message")
    model_input_tokens: int = Field(alias="input_tokens", description="tokens of the model input as built now")
    checkpoint_count: int
    source: SessionSource = Field(description=(
        "where its raw log comes from: requests (rebuilt from recorded requests: OpenTelemetry spans, request "
        "logs), import (imported transcripts), api (written through this API)"))
    request_count: int = Field(description="recorded requests it was rebuilt from (GET /sessions/{key}/requests)")
    created_at: datetime
    updated_at: datetime
    last_activity_at: datetime

    @staticmethod
    def resolve_source(session) -> str:
        if session.request_count:
            return "requests"
        return "import" if session.import_source else "api"

    @staticmethod
    def resolve_compaction(session) -> CompactionSettingsOut:
        return CompactionSettingsOut.model_validate(session.compaction_settings(), from_attributes=True)


class SessionListOut(Schema):
    items: list[SessionOut]
    next_cursor: str | None = Field(None, description="pass as cursor to get the next page")


class ExplainOut(Schema):
    """sessions.context.explain.Explanation: where a stored message is in the model input, or why not."""

    code: str = Field(description=(
        "in_input, covered_by_checkpoint, excluded_flag, instructions_role, orphan_tool_result, dropped_tool_call, "
        "awaiting_tool_result, after_as_of; for sessions rebuilt from recorded requests also "
        "dropped_by_application and replaced_by_application_summary"))
    sentence: str = Field(description="the same, in one plain sentence")
    position: int | None = Field(None, description="in_input: its 1-based position in the model input")
    checkpoint_id: int | None = Field(None, description="covered_by_checkpoint: the checkpoint that first covered it")
    checkpoint_number: int | None = None
    dropped_tool_calls: list[str] = Field(default_factory=list, description="its tool calls left out: no result in the input")
    pending_tool_calls: list[str] = Field(default_factory=list, description="its tool calls awaiting their results")
    request: int | None = Field(None, description=(
        "in_input, rebuilt from requests: the request in force, which sent it (or which it answered, or after "
        "which it was stored)"))
    request_position: int | None = Field(None, description="its 1-based position among that request's messages, "
                                                           "when the request sent it")
    last_sent_request: int | None = Field(
        None, description="dropped/replaced by the application: the last request that sent it (null: never sent)")
    first_missing_request: int | None = Field(
        None, description="dropped/replaced by the application: the first request without it")
    replacements: list[int] = Field(default_factory=list, description=(
        "replaced_by_application_summary: 1-based positions, in first_missing_request, of the messages that match "
        "no stored message (the application's summary or rewrite)"))
    edited_by_application: bool = Field(False, description=(
        "in_input, rebuilt from requests: the application sent it in a form of its own (a trimmed tool output, an "
        "elided observation); the raw log keeps what the user saw"))


class MessageOut(MessageRecord):
    seq: int
    tokens: int
    reasoning_tokens: int
    explain: ExplainOut = Field(description="where it is in the model input, or why not (sessions.context.explain)")

    @staticmethod
    def resolve_explain(message) -> dict:
        return message.explanation.as_dict()


class MessagePageOut(Schema):
    items: list[MessageOut]
    next_after: int | None = Field(None, description="pass as after to get the next page")


# A plain pydantic model, not a ninja Schema: it is read from stored JSON (a checkpoint's lost_facts),
# never from model attributes, and ninja's per-object attribute reader made validating a checkpoint's 200
# facts 1.2 ms of every model-input fetch after a compaction (0.17 ms this way). (A comment, not a
# docstring: a docstring would be the schema's description in the API docs.)
class LostFactOut(BaseModel):
    text: str = Field(description="the literal, as first written in the covered messages")
    kind: str = Field(description="identifier, hash, uuid, amount, quantity, date, email, url, path, quoted or name")
    count: int = Field(description="how often it occurs in the covered messages")
    seqs: list[int] = Field(description="the covered messages it occurs in (the first 20)")


class FactCountsOut(Schema):
    kept: int = Field(description="salient literals of the covered messages the summary carries")
    lost: int = Field(description="salient literals of the covered messages the summary does not carry")


class CheckpointOut(Schema):
    id: int
    number: int = Field(description="its number in the session: 1, 2, 3 in creation order (what the dashboard shows)")
    previous_id: int | None
    first_seq: int
    last_seq: int
    created_at_seq: int
    summary: str
    summary_tokens: int
    replaced_tokens: int
    tokens_before: int
    tokens_after: int
    summarizer: str
    trigger: str
    created_at: datetime
    facts: FactCountsOut = Field(description="what the summary kept and lost of the covered messages' salient literals")
    lost: list[LostFactOut] = Field(alias="lost_facts", description=(
        "the salient literals of the messages it newly covers that its summary does not carry, most repeated "
        "first (at most 200; facts.lost is the whole count)"))

    @staticmethod
    def resolve_facts(checkpoint) -> FactCountsOut:
        return FactCountsOut(kept=checkpoint.facts_kept, lost=checkpoint.facts_lost)


class CheckpointListOut(Schema):
    items: list[CheckpointOut]


class EventListOut(Schema):
    items: list[EventOut]
    next_after: int | None = None


class CompactionOut(Schema):
    """The outcome of a compaction run (sessions.context.compaction.Outcome)."""

    status: Literal["completed", "skipped", "failed"]
    reason: str | None = None
    error: str | None = None
    max_tokens: int
    keep_recent_tokens: int
    tokens_before: int
    tokens_after: int | None = None
    replaced_tokens: int | None = None
    summary_tokens: int | None = None
    still_over_threshold: bool | None = None
    budget_reached: bool | None = Field(
        None,
        description="completed: the run stopped at its budget (CTXWEB_COMPACTION_RUN_MAX_TOKENS, _BYTES) and left "
        "turns it would have covered to another run",
    )
    checkpoint: CheckpointOut | None = None
    events: list[EventOut]
    explanation: str | None = Field(None, description=(
        "skipped as under_threshold or nothing_to_compact, answered to POST .../compact: why, in plain words "
        "(the dry run's sentence)"))

    @staticmethod
    def resolve_reason(outcome) -> str | None:
        return outcome.reason or None

    @staticmethod
    def resolve_explanation(outcome) -> str | None:
        return outcome.explanation or None

    @staticmethod
    def resolve_error(outcome) -> str | None:
        return outcome.error or None

    @staticmethod
    def resolve_max_tokens(outcome) -> int:
        return outcome.plan.settings.max_tokens

    @staticmethod
    def resolve_keep_recent_tokens(outcome) -> int:
        return outcome.plan.settings.keep_recent_tokens

    @staticmethod
    def resolve_tokens_before(outcome) -> int:
        return outcome.plan.tokens_before

    @staticmethod
    def resolve_tokens_after(outcome) -> int | None:
        return outcome.tokens_after if outcome.checkpoint is not None else None

    @staticmethod
    def resolve_replaced_tokens(outcome) -> int | None:
        return outcome.checkpoint.replaced_tokens if outcome.checkpoint is not None else None

    @staticmethod
    def resolve_still_over_threshold(outcome) -> bool | None:
        if outcome.checkpoint is None:
            return None
        return outcome.tokens_after > outcome.plan.settings.max_tokens

    @staticmethod
    def resolve_budget_reached(outcome) -> bool | None:
        return outcome.plan.budget_reached if outcome.checkpoint is not None else None


class CompactionPreviewSettingsOut(Schema):
    max_tokens: int
    keep_recent_tokens: int
    summarizer: str


class CompactionPreviewOut(Schema):
    """What a compaction would do now with the settings given (dry_run: true); nothing was stored
    (sessions.context.what_if.Preview)."""

    dry_run: Literal[True] = True
    would_compact: bool = Field(description="a run asked for now with these settings would create a checkpoint")
    reason: Literal["under_threshold", "nothing_to_compact", "not_smaller"] | None = Field(
        None, description="why it would not, as a run would record it in COMPACTION_SKIPPED")
    explanation: str = Field(description="in plain words: what would be covered, or why nothing would be")
    first_seq: int | None = Field(None, description="first message the new checkpoint would cover")
    last_seq: int | None = Field(None, description="last message it would cover (the cut)")
    covered_turns: int
    covered_tokens: int = Field(description="what the covered messages add to the model input now")
    replaced_tokens: int = Field(description="covered tokens plus the latest checkpoint's summary, which the new one replaces")
    tokens_before: int = Field(description="the model input now")
    tokens_after: int = Field(description="the model input projected after the compaction (tokens_before when none)")
    summary_tokens: int | None = Field(None, description="the new summary message, projected")
    summary_estimated: bool = Field(description=(
        "summary_tokens is an estimate (the most the summarizer may use): an LLM summarizer is never called "
        "by a dry run"))
    summary: str | None = Field(None, description="the projected summary, when the summarizer is the offline extractive one")
    budget_reached: bool = Field(description="one run would stop at its budget and leave older turns to another run")
    force: bool
    settings: CompactionPreviewSettingsOut = Field(description="the settings used: the session's, overridden by the request")


class CompactionRunOut(Schema):
    """A compaction run on the task queue (sessions.models.CompactionRun): done by a background worker."""

    id: int
    status: Literal["queued", "running", "completed", "skipped", "failed"] = Field(alias="state")
    trigger: Literal["auto", "request"]
    attempts: int = Field(description=(
        "attempts started so far. A failed automatic run is retried after a backoff; any run whose worker was "
        "lost (killed) is retried"))
    max_attempts: int
    last_error: str | None = Field(None, description="why the last attempt failed or was cut off")
    run_after: datetime | None = Field(None, description="a queued retry waits until then")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    url: str = Field(description="GET it for the run's state")
    outcome: CompactionOut | None = Field(None, description="the last attempt's outcome, once it has one")

    @staticmethod
    def resolve_last_error(run) -> str | None:
        return run.last_error or None

    @staticmethod
    def resolve_url(run) -> str:
        return f"/api/v1/sessions/{run.session.key}/compactions/{run.pk}"

    @staticmethod
    def resolve_outcome(run):
        from sessions.context.compaction_runs import run_outcome

        return run_outcome(run)


class AppendedOut(Schema):
    index: int
    seq: int | None
    id: str = Field(alias="client_id")
    tokens: int
    stored: bool
    duplicate: bool


class AppendOut(Schema):
    session: str
    session_created: bool
    messages: list[AppendedOut]
    compaction: CompactionRunOut | None = Field(None, description=(
        "the session's automatic compaction run, enqueued (or already queued) because the model input is over "
        "max_tokens; null when none is needed. The append does not wait for it"))


class OmittedOut(Schema):
    seq: int | None
    reason: str
    tool_call_id: str | None = None
    request_index: int | None = None
    whole_message: bool

    @staticmethod
    def resolve_tool_call_id(omission) -> str | None:
        return omission.tool_call_id or None


class PendingToolCallOut(Schema):
    """A tool call of the newest assistant message awaiting its result: left out of the provider
    formats (which take no call without its result) until the result is appended."""

    seq: int | None = Field(description="the stored assistant message that made the call")
    request_index: int | None = Field(None, description="for a call in the request's own unpersisted messages")
    id: str
    name: str
    arguments: str


class TokenTotalsOut(Schema):
    total: int = Field(description="everything, with the reply priming")
    instructions: int
    summary: int
    messages: int
    request: int = Field(description="the request's unpersisted messages")


class ModelInputOut(Schema):
    format: FormatName
    session: str
    as_of: int | None
    basis: BasisName = Field(description=(
        "where it comes from: recorded_request, what the application sent (sessions rebuilt from recorded "
        "requests: the request in force, exactly as sent, its response and the messages stored after it); "
        "raw_log, built by ctxweb from the raw log (instructions, latest checkpoint, visible messages after it)"))
    request: int | None = Field(None, description=(
        "basis recorded_request: the number of the request in force (GET /sessions/{key}/requests/{number}); "
        "null before the application's first request"))
    derived_from: str | None = Field(None, description=(
        "basis recorded_request: when the request was not captured but worked out from the source's declared "
        "configuration (a SWE-agent trajectory's history processors), how"))
    checkpoint: CheckpointOut | None
    tokens: TokenTotalsOut
    system: str | None = Field(None, description="anthropic format: the instructions")
    messages: list[dict[str, Any]]
    omitted: list[OmittedOut]
    pending_tool_calls: list[PendingToolCallOut] = Field(
        default_factory=list, description="tool calls awaiting their results, left out until they come"
    )


class PingOut(Schema):
    project: str = Field(description="the name of the project the API key belongs to")
    key: str = Field(description="the API key's name")
    key_prefix: str = Field(description="the key's first characters, as the dashboard's API keys page shows them")


# --- the project ---------------------------------------------------------------------------------


class MaskingPatternIn(Strict):
    name: Annotated[StrictStr, Field(min_length=1, max_length=50)] = Field(description="its label: [name]")
    pattern: Annotated[StrictStr, Field(min_length=1, max_length=500)] = Field(
        description="a regular expression in RE2's syntax (no lookaround, no backreferences)")


class MaskingIn(Strict):
    enabled: bool | None = Field(None, description="viewers and masked API keys see personal data masked")
    patterns: list[MaskingPatternIn] | None = Field(None, max_length=20, description=(
        "the project's own kinds of personal data, masked as [name] besides e-mail addresses, phone numbers, "
        "card numbers, IBANs, secrets and IP addresses"))
    at_capture: bool | None = Field(None, description=(
        "also mask what is captured before it is stored (appends, imports, OTLP spans, request logs, session "
        "fields): the project keeps no personal data; irreversible, token figures are the masked text's"))


class ProjectPatchIn(Strict):
    masking: MaskingIn | None = None
    pinned_facts: list[dict[str, StrictStr]] | None = Field(None, max_length=20, description=(
        "literals no summary of the project's sessions may lose: each {\"name\", \"pattern\"} (RE2) or "
        "{\"name\", \"value\"}; replaces the list"))


class MaskingOut(Schema):
    enabled: bool = False
    patterns: list[dict[str, str]] = Field(default_factory=list)
    at_capture: bool = False


class ProjectOut(Schema):
    name: str
    title: str
    masking: MaskingOut = Field(description="personal data shown masked to viewers and masked API keys")
    key_masked: bool = Field(description="this API key's answers are masked when masking is enabled")
    pinned_facts: list[dict[str, str]] = Field(description="literals no summary of the project's sessions may lose")


# --- context checks --------------------------------------------------------------------------------


class ContextCheckIn(Strict):
    messages: list[dict[str, Any]] | None = Field(None, max_length=5000, description=(
        "the conversation, in `format`; or name an existing session with `session`"))
    format: Literal["ctxweb", "openai", "anthropic", "openai-responses"] = "ctxweb"
    system: Any = Field(None, description="anthropic format: the instructions")
    session: Annotated[StrictStr, Field(min_length=1, max_length=200)] | None = Field(
        None, description="check this session of the key's project instead of `messages`")
    pinned_facts: list[dict[str, StrictStr]] | None = Field(None, max_length=20, description=(
        "{\"name\", \"pattern\"} (RE2) or {\"name\", \"value\"}, as on PUT /sessions/{key}"))
    expect: list[Annotated[StrictStr, Field(min_length=1, max_length=200)]] | None = Field(
        None, max_length=100, description="literals that must survive")
    max_tokens: Annotated[StrictInt, Field(ge=1, le=100_000_000)] | None = None
    keep_recent_tokens: Annotated[StrictInt, Field(ge=0, le=100_000_000)] | None = None
    summarizer: Literal["extractive", "openai"] | None = None


class ContextCheckFactOut(Schema):
    name: str = Field(description="the pinned fact's name, or the expected literal")
    literal: str
    first_seq: int | None = Field(description="the first message holding it; null: no message does (a failure)")
    passed: bool
    lost_count: int = Field(description="model inputs after its first message that do not carry it")
    lost_at: list[int] = Field(description="the first 50 of them, by the message they are as of")
    lost_by: list[int] = Field(description="the checkpoints (numbers) whose summaries lost it")


class ContextCheckOut(Schema):
    conversation: str
    passed: bool = Field(description="every named fact survived")
    messages: int = Field(description="messages replayed")
    checkpoints: int = Field(description="checkpoints the replay made")
    failed_runs: list[str] = Field(description="compactions of the replay that failed, with why")
    facts: list[ContextCheckFactOut]
    seconds: float


class TokensOut(Schema):
    total: int
    messages: list[int]


class RequestOut(Schema):
    model_input: ModelInputOut
    stored: list[AppendedOut]
    compaction: CompactionRunOut | None = Field(None, description=(
        "the automatic compaction this request needed, waited for up to CTXWEB_COMPACTION_WAIT_SECONDS"))
    compaction_in_progress: bool = Field(False, description=(
        "a compaction of the session had not finished when the request was built: the model input is the "
        "current one, not yet compacted"))
    event_id: int


# --- reviews -------------------------------------------------------------------------------------

VerdictName = Literal["ok", "problem", "unsure"]
Label = Annotated[StrictStr, Field(min_length=1, max_length=reviews.MAX_LABEL)]


class ReviewIn(Strict):
    verdict: VerdictName
    labels: list[Label] = Field(default_factory=list, max_length=reviews.MAX_LABELS, description=(
        "in a queue, each one of the queue's labels"))
    score: Annotated[StrictInt, Field(ge=1, le=5)] | None = Field(None, description="1 (bad) to 5 (good)")
    comment: Annotated[StrictStr, Field(max_length=reviews.MAX_COMMENT)] = ""
    seqs: list[Annotated[StrictInt, Field(ge=1, le=2_000_000_000)]] = Field(
        default_factory=list, max_length=reviews.MAX_SEQS, description="the messages it is about, by seq")
    queue_id: Annotated[StrictInt, Field(ge=1, le=9_000_000_000_000_000_000)] | None = Field(None, description=(
        "the review queue it is made in (POST /queues/{queue_id}/next handed the session out): its labels "
        "apply, and the key's claim on the session ends"))


class ReviewOut(Schema):
    id: int
    session: str = Field(description="the session's key")
    queue_id: int | None = Field(description="the review queue it was made in; null outside a queue")
    verdict: VerdictName
    labels: list[str]
    score: int | None
    comment: str
    seqs: list[int] = Field(description="the messages it is about")
    reviewer: str = Field(description="user:<username> for a person, api:<key name> for an API key")
    created_at: datetime

    @staticmethod
    def resolve_session(review) -> str:
        return review.session.key


class ReviewListOut(Schema):
    items: list[ReviewOut] = Field(description="oldest first")


class QueueIn(Strict):
    name: Annotated[StrictStr, Field(min_length=1, max_length=review_queues.MAX_NAME)]
    filter: Annotated[StrictStr, Field(max_length=review_queues.MAX_FILTER)] = Field("", description=(
        "the dashboard sessions list's query string: q, tag, has_checkpoints, failed, lost_facts, from, to, "
        "source (requests, import, api), reviewed (yes, no), verdict (the latest review's), meta (key, "
        "key:value, or key<number with <, <=, >, >=), e.g. meta=reward<1&reviewed=no; empty: every session"))
    labels: list[Label] = Field(default_factory=list, max_length=review_queues.MAX_QUEUE_LABELS,
                                description="the labels its reviews may carry")


class QueueOut(Schema):
    id: int
    name: str
    filter: str = Field(description="the sessions list's query string whose sessions it holds")
    labels: list[str]
    created_by: str | None = Field(description="the username of the person who made it; null when made with an API key")
    created_at: datetime

    @staticmethod
    def resolve_created_by(queue) -> str | None:
        return queue.created_by.get_username() if queue.created_by_id else None


class QueueListOut(Schema):
    items: list[QueueOut] = Field(description="by name")


class VerdictCountsOut(Schema):
    ok: int
    problem: int
    unsure: int


class ReviewerCountOut(Schema):
    reviewer: str
    reviews: int


class QueueProgressOut(Schema):
    """sessions.store.review_queues.QueueProgress."""

    matching: int = Field(description="sessions its filter matches now")
    reviewed: int = Field(description="of those, sessions with a review from the queue")
    remaining: int = Field(description="matching sessions without a review from the queue")
    claimed: int = Field(description="of the remaining, sessions a reviewer holds now")
    reviews: int = Field(description="reviews made in the queue")
    by_verdict: VerdictCountsOut = Field(description="the queue's reviews by verdict")
    by_reviewer: list[ReviewerCountOut] = Field(description="the queue's reviews by reviewer, most first")

    @staticmethod
    def resolve_by_reviewer(progress) -> list[dict]:
        return [{"reviewer": name, "reviews": count} for name, count in progress.by_reviewer]


class QueueDetailOut(QueueOut):
    progress: QueueProgressOut

    @staticmethod
    def resolve_progress(queue):
        return review_queues.queue_progress(queue)


class QueueNextOut(Schema):
    queue_id: int
    session: SessionOut | None = Field(description=(
        "the session to review next, claimed for this API key until claimed_until (another key or person "
        "asking meanwhile gets another); null when every matching session has a review from the queue or is "
        "held by someone else"))
    claimed_until: datetime | None = Field(description="when the claim ends unless a review from this key ends it first")


# --- recorded requests ---------------------------------------------------------------------------


class RecordedRequestSummaryOut(Schema):
    """A request the application sent its model, captured from outside (sessions.models.RecordedRequest)."""

    number: int = Field(description="1, 2, 3 in start-time order within the session")
    started_at: datetime
    ended_at: datetime | None
    source: str = Field(description="otlp or request_log")
    model: str
    provider: str
    tokens: int = Field(description="ours: the messages sent, counted like a model input")
    usage_input_tokens: int | None = Field(description="the provider's input tokens, when it reported them")
    usage_output_tokens: int | None = Field(description="the provider's output tokens, when it reported them")
    message_count: int = Field(description="messages sent")
    dropped_seqs: list[int] = Field(description=(
        "raw seqs the previous request carried, or that were stored since, which this one no longer sends: what "
        "the application itself dropped"))
    unmatched_count: int = Field(description=(
        "messages sent that match no stored message: the application's own summaries or rewrites"))

    @staticmethod
    def resolve_message_count(request) -> int:
        return len(request.message_seqs or ())

    @staticmethod
    def resolve_unmatched_count(request) -> int:
        return len(request.unmatched or ())


class RecordedRequestListOut(Schema):
    items: list[RecordedRequestSummaryOut]
    next_after: int | None = Field(None, description="pass as after to get the next page")


class RecordedRequestOut(RecordedRequestSummaryOut):
    format: FormatName
    system: str | None = Field(None, description="anthropic format: the system messages sent")
    messages: list[dict[str, Any]] = Field(description=(
        "the messages sent, in the format asked for; openai: exactly as the application sent them"))
    message_seqs: list[int | None] = Field(description=(
        "for each message sent, in the order sent (the openai format's), the raw seq it matched; null for a "
        "system message (the instructions) and for a message matching none (listed in unmatched)"))
    unmatched: list[int] = Field(description="0-based indexes of the messages sent that match no stored message")
    response: list[dict[str, Any]] = Field(description="the response's messages, as OpenAI messages")
    response_seqs: list[int] = Field(description="the raw seqs the response was stored as")
    parameters: dict[str, Any] = Field(description="the rest of the request body: model, temperature, tools...")
    external_id: str = Field(description="the span id, or a digest of the request-log file and line")
    trace_id: str

    @staticmethod
    def resolve_messages(request) -> list:
        return request.rendered_messages

    @staticmethod
    def resolve_system(request) -> str | None:
        return request.rendered_system


# --- trace ---------------------------------------------------------------------------------------


class TraceCheckpointOut(Schema):
    id: int
    number: int = Field(description="its number in the session: 1, 2, 3 in creation order")
    last_seq: int
    created_at_seq: int
    carries: bool = Field(description="whether its summary carries the string")
    added_back: bool = Field(description="whether it carries it only because compaction added it back on the "
                             "summary's Pinned: line (the string is a pinned fact's value)")


class TraceMessageOut(Schema):
    """A sessions.context.trace.TraceRow."""

    seq: int
    role: str
    excerpt: str = Field(description="plain text: the text around the match (… where it was cut)")
    matches: list[tuple[int, int]] = Field(description=(
        "where the matched words are in excerpt: [start, end) offsets in characters (Unicode code points)"))
    in_model_input: bool = Field(alias="in_input")
    reason: str = Field(description="the explain code: in_input, covered_by_checkpoint, excluded_flag, ...")
    why: str = Field(description="the explain sentence")
    checkpoints: list[TraceCheckpointOut] = Field(
        alias="coverage",
        description="the checkpoints whose summaries stand for this message (their range 1..last_seq holds it)")

    @staticmethod
    def resolve_excerpt(row) -> str:
        return row.excerpt.text

    @staticmethod
    def resolve_matches(row) -> list[tuple[int, int]]:
        return row.excerpt.marks


class TraceRequestOut(Schema):
    """A REQUEST_BUILT event."""

    event_id: int = Field(alias="pk")
    checkpoint_id: int | None
    created_at: datetime

    @staticmethod
    def resolve_checkpoint_id(event) -> int | None:
        return event.data.get("checkpoint_id")


class TraceOut(Schema):
    """A sessions.context.trace.Trace."""

    query: str
    answer: str = Field(alias="sentence", description="one sentence: where the string is, and where the model lost it")
    messages: list[TraceMessageOut] = Field(alias="rows", description="the messages that hold it, in seq order (at most 50)")
    truncated: bool = Field(description="more messages hold it than are listed")
    lost_at_checkpoint_id: int | None = Field(
        description="the first checkpoint after its last mention whose summary does not carry it")
    fact_kind: str | None = Field(description=(
        "the kind of salient literal (number, identifier, amount, date...) checkpoints count the string as, "
        "among the facts their summaries kept or lost; null when they do not count it"))
    first_request: TraceRequestOut | None = Field(
        description="the first recorded request (REQUEST_BUILT) built on a summary that does not carry it")
    pinned: str | None = Field(description=(
        "the name of the pinned fact (project's or session's pinned_facts) the string is a value of; null when none"))


# --- compare -------------------------------------------------------------------------------------


class CompareMessageOut(Schema):
    """A message of one side of a comparison row."""

    seq: int | None = Field(description="the raw log's message it is; null for instructions, a checkpoint's summary, "
                                        "or a message of the application's own in a recorded request")
    kind: str = Field(description="message, instructions (a system prompt) or summary (a checkpoint's, in a model input)")
    role: str
    text: str = Field(description="its text parts, joined")
    tool_calls: list[ToolCallOut] = Field(default_factory=list)
    tool_call_id: str = ""


class CompareSideOut(Schema):
    """One side of a comparison, with what its header shows."""

    key: str = Field(description="the session's key")
    title: str
    what: str = Field(description="what of the session this side is: raw log, request N, model input as of message N")
    request: int | None = Field(description="the recorded request's number when the side is one")
    as_of: int | None = Field(description="the message the side's model input is as of, when it is one")
    messages: int = Field(description="how many of its messages were compared")
    truncated: bool = Field(description="it has more messages than were compared (the first 2,000 are)")
    tokens: int = Field(description="its tokens: the raw log's, the request's as sent, or the model input's")
    tool_calls: int = Field(description="the tool calls of its compared messages")
    metadata: dict[str, Any] = Field(description="its metadata, where a run's outcome is (a reward, a status)")

    @staticmethod
    def resolve_key(side) -> str:
        return side.session.key

    @staticmethod
    def resolve_title(side) -> str:
        return side.session.title

    @staticmethod
    def resolve_messages(side) -> int:
        return len(side.messages)

    @staticmethod
    def resolve_request(side) -> int | None:
        return None if side.request is None else side.request.number


class CompareRowOut(Schema):
    a: CompareMessageOut | None = Field(description="side a's message on this row, or null where only b has one")
    b: CompareMessageOut | None
    same: bool = Field(description="the two messages are the same (role, text, tool calls); false where one is missing")
    a_changed: list[tuple[int, int]] = Field(alias="a_marks", description=(
        "where a's shown text (its text, then its tool calls as name(arguments), one a line) differs from b's: "
        "[start, end) character offsets"))
    b_changed: list[tuple[int, int]] = Field(alias="b_marks")


class CompareOut(Schema):
    """Two conversations aligned turn by turn (sessions.context.compare)."""

    a: CompareSideOut
    b: CompareSideOut
    rows: list[CompareRowOut]
    diverged_at: int | None = Field(description="the index in rows of the first row that is not the same; null: none")
