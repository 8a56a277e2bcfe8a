"""Every wire shape of the HTTP API v1, declared once: request bodies (pydantic models that own types,
lengths and shapes, also used by the importers, the dashboard and the commands through
sessions.validation) and responses (ninja Schemas filled from model objects, reused by the exports)."""

import base64
import binascii
import math
import re
from datetime import datetime
from typing import Annotated, Any, Literal, Union

from django.conf import settings
from django.utils.dateparse import parse_datetime
from ninja import Field, Schema
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    StrictBool,
    StrictInt,
    StrictStr,
    Tag,
    TypeAdapter,
    create_model,
    field_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .event_types import EVENT_DATA, EventData

RoleName = Literal["system", "user", "assistant", "tool", "agent"]
FormatName = Literal["ctxweb", "openai", "anthropic", "openai-responses"]
BasisName = Literal["recorded_request", "raw_log"]
# The shapes messages may be sent in: ours, or a provider's own (sessions.provider_messages).
MessageFormatName = Literal["ctxweb", "openai", "anthropic", "openai-responses"]
BasisName = Literal["recorded_request", "raw_log"]
SummarizerName = Literal["extractive", "openai"]
SessionSource = Literal["requests", "import", "api"]
MAX_ID_LENGTH = 200
MAX_DIMENSION = 100_000
DATA_URL_RE = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?((?:;[\w.+-]+=[\w.+-]+)*)(;base64)?,", re.IGNORECASE)
# Names of the branches of unions below. They show up in pydantic's error locations, where
# sessions.validation drops them so a client reads field names only.
UNION_TAGS = {"<string>", "<parts>", "<object>", "<text part>", "<image part>", "<image_url part>"}


# --- field types with the storage rules of every text and JSON value a client sends -------------


def storable(value: str) -> str:
    """Strings the databases can store: no NUL characters, no lone surrogates."""
    if "\x00" in value:
        raise PydanticCustomError("not_storable", "must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError("not_storable", "is not valid Unicode text") from None
    return value


def bounded_text(value: str) -> str:
    """At most CTXWEB_MAX_TEXT_CHARS characters, and storable."""
    limit = settings.CTXWEB_MAX_TEXT_CHARS
    if len(value) > limit:
        raise PydanticCustomError("text_too_long", "is longer than {limit} characters", {"limit": limit})
    return storable(value)


def free_json(value, level: int = 1):
    """Free-form JSON (attributes, metadata, tool call arguments) every database can store as it is,
    nested at most CTXWEB_MAX_JSON_DEPTH levels (an object or list at the top is level 1)."""
    if isinstance(value, str):
        bounded_text(value)
    elif isinstance(value, dict | list):
        limit = settings.CTXWEB_MAX_JSON_DEPTH
        if level > limit:
            raise PydanticCustomError("json_too_deep", "is nested more than {limit} levels deep", {"limit": limit})
        if isinstance(value, dict):
            for key in value:
                if not isinstance(key, str):
                    raise PydanticCustomError("invalid_field", "keys must be strings")
                bounded_text(key)
        for item in value.values() if isinstance(value, dict) else value:
            free_json(item, level + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("invalid_field", "must not contain NaN or infinity")
    elif value is not None and not isinstance(value, bool | int | float):
        raise PydanticCustomError("invalid_field", "must be JSON")
    return value


def utc_datetime(value):
    """An ISO 8601 date-time string as an aware UTC datetime every database can store."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = parse_datetime(value)
        except ValueError:
            parsed = None
        if parsed is None:
            raise PydanticCustomError("invalid_field", "must be an ISO 8601 date-time string")
    else:
        raise PydanticCustomError("invalid_field", "must be an ISO 8601 date-time string")
    from datetime import UTC

    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        parsed = parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        raise PydanticCustomError("invalid_field", "is out of range") from None
    if not 1 <= parsed.year <= 9998:
        raise PydanticCustomError("invalid_field", "is out of range")
    return parsed


Text = Annotated[StrictStr, AfterValidator(bounded_text)]
JsonObject = Annotated[dict[str, Any], AfterValidator(free_json)]
Identifier = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID_LENGTH), AfterValidator(bounded_text)]
ShortText = Annotated[StrictStr, Field(max_length=MAX_ID_LENGTH), AfterValidator(bounded_text)]
UtcDateTime = Annotated[datetime, BeforeValidator(utc_datetime)]


class Strict(BaseModel):
    """Request bodies: plain pydantic models (ninja.Schema's Django-object getter is only needed for
    responses built from model instances, and costs a lot on batches of messages); unknown fields are
    refused, and no value is coerced (`true` is not 1, `"5"` is not 5), whatever a field's type."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ErrorOut(BaseModel):
    detail: str
    code: str
    index: int | None = Field(None, description="which message of a batch the error is about")
    seq: int | None = Field(None, description="the stored message a conflict is about")
    errors: list[dict] | None = Field(None, description="field errors of an invalid request body")


# --- messages in -----------------------------------------------------------------------------------


def is_data_url(url: str) -> bool:
    """A data: URL, whatever the case of its scheme (URL schemes are case-insensitive) and spaces around:
    what the exports check before they write a URL into Markdown."""
    return url.strip()[:5].lower() == "data:"


def image_url(url: str) -> str:
    storable(url)  # bounded below, not as text
    if url.startswith(("http://", "https://")):
        if len(url) > 8192:
            raise PydanticCustomError("invalid_content", "is too long")
        return url
    if url[:5].lower() != "data:":  # no spaces before the scheme here: DATA_URL_RE reads from the start
        raise PydanticCustomError("invalid_content", "must be an http(s) or data: URL")
    match = DATA_URL_RE.match(url)
    if not match:
        raise PydanticCustomError("invalid_content", "is a malformed data: URL")
    if not (match.group(1) or "").lower().startswith("image/"):
        raise PydanticCustomError("invalid_content", "must have an image/* media type")
    payload = url[match.end():]
    size = len(payload) * 3 // 4 if match.group(3) else len(payload)
    limit = settings.CTXWEB_MAX_IMAGE_BYTES
    if size > limit:
        raise PydanticCustomError("image_too_large", "is an image larger than {limit} bytes", {"limit": limit})
    if match.group(3):
        try:
            base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise PydanticCustomError("invalid_content", "is not valid base64") from None
    return url


ImageUrl = Annotated[StrictStr, Field(min_length=1), AfterValidator(image_url)]
Dimension = Annotated[StrictInt, Field(ge=1, le=MAX_DIMENSION)]
Detail = Literal["low", "high", "auto"]


class TextPart(Strict):
    type: Literal["text"]
    text: Text


class ImagePart(Strict):
    type: Literal["image"]
    url: ImageUrl = Field(description="http(s) URL or data: URL")
    media_type: ShortText | None = None
    width: Dimension | None = None
    height: Dimension | None = None
    detail: Detail | None = None


class ImageRef(Strict):
    url: ImageUrl
    detail: Detail | None = None


class ImageUrlPart(Strict):
    """OpenAI's image part, accepted and stored as ours."""

    type: Literal["image_url"]
    image_url: ImageRef | ImageUrl

    def as_image(self) -> ImagePart:
        ref = self.image_url
        if isinstance(ref, str):
            return ImagePart(type="image", url=ref)
        return ImagePart(type="image", url=ref.url, detail=ref.detail)


def _part_kind(value) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return f"<{kind} part>" if kind in ("text", "image", "image_url") else None


Part = Annotated[
    Annotated[TextPart, Tag("<text part>")] | Annotated[ImagePart, Tag("<image part>")]
    | Annotated[ImageUrlPart, Tag("<image_url part>")],
    Discriminator(_part_kind, custom_error_type="invalid_content",
                  custom_error_message="must be a part of type text or image"),
]


def _content_kind(value) -> str | None:
    if isinstance(value, str):
        return "<string>"
    return "<parts>" if isinstance(value, list) else None


Content = Annotated[
    Annotated[Text, Tag("<string>")] | Annotated[list[Part], Tag("<parts>")],
    Discriminator(_content_kind, custom_error_type="invalid_content",
                  custom_error_message="must be a string or a list of parts"),
]


def _arguments_kind(value) -> str | None:
    if isinstance(value, str):
        return "<string>"
    return "<object>" if isinstance(value, dict | list) else None


Arguments = Annotated[
    Annotated[Text, Tag("<string>")] | Annotated[Any, AfterValidator(free_json), Tag("<object>")],
    Discriminator(_arguments_kind, custom_error_type="invalid_tool_calls",
                  custom_error_message="must be a string or a JSON object"),
]


class ToolCallIn(Strict):
    """A tool call as ctxweb stores it, or in OpenAI's shape ({"id", "type": "function", "function":
    {"name", "arguments"}}), which is accepted and stored as ours."""

    id: Identifier
    name: Annotated[Identifier, Field(max_length=200)]
    arguments: Arguments | None = Field("", description="the raw string the model produced, or a JSON object")

    @model_validator(mode="before")
    @classmethod
    def _openai_shape(cls, data):
        if isinstance(data, dict) and "function" in data:
            function = data["function"]
            if not isinstance(function, dict) or set(data) - {"id", "type", "function", "index"}:
                raise PydanticCustomError("invalid_tool_calls", "a tool call's function must be an object")
            if data.get("type", "function") != "function":
                raise PydanticCustomError("invalid_tool_calls", "only function tool calls are supported")
            return {"id": data.get("id"), "name": function.get("name"), "arguments": function.get("arguments", "")}
        if isinstance(data, dict) and data.get("type") not in (None, "function"):
            raise PydanticCustomError("invalid_tool_calls", "only function tool calls are supported")
        if isinstance(data, dict) and "type" in data:
            return {k: v for k, v in data.items() if k != "type"}
        return data


class MessageIn(Strict):
    """A message as a client sends it in the ctxweb format. Which role may carry which field is a rule
    of the domain (sessions.validation), not of the shape."""

    role: RoleName
    content: Content | None = None
    reasoning: Text | None = Field(None, description="assistant only")
    tool_calls: list[ToolCallIn] | None = Field(None, description="assistant only")
    tool_call_id: ShortText | None = Field(None, description="tool only, required there")
    name: ShortText | None = None
    is_error: StrictBool = Field(False, description="tool only: the tool reported a failure")
    attributes: JsonObject | None = Field(None, description="application data, never sent to the model")
    include_in_messages: StrictBool = True
    persist: StrictBool = Field(True, description="false: do not store (requests only)")
    id: Identifier | None = Field(None, description="client id, unique in the session")
    created_at: UtcDateTime | None = Field(None, description="when importing history; server time otherwise")


MessagesIn = Annotated[
    list[dict[str, Any]],
    Field(min_length=1, description="ctxweb format: MessageIn objects; openai and anthropic: the "
                                    "provider's own message objects"),
]


class AppendIn(Strict):
    format: MessageFormatName = Field("ctxweb", description="the shape of `messages`")
    system: str | list[dict[str, Any]] | None = Field(
        None, description="anthropic format: the system prompt, which becomes the session's instructions"
    )
    messages: MessagesIn


class MessagePatchIn(Strict):
    include_in_messages: StrictBool | None = None
    attributes: JsonObject | None = None


# --- sessions in ---------------------------------------------------------------------------------

Threshold = Annotated[StrictInt, Field(ge=1, le=100_000_000)]


class CompactionSettingsIn(Strict):
    max_tokens: Threshold | None = Field(None, description="compact when the model input is over this")
    keep_recent_tokens: Threshold | None = Field(None, description="recent turns kept whole")
    auto: StrictBool | None = Field(None, description="compact automatically after appends and request builds")
    summarizer: SummarizerName | None = None


class SessionIn(Strict):
    title: Annotated[Text, Field(max_length=300)] | None = None
    metadata: JsonObject | None = None
    instructions: Text | None = Field(None, description="the current system prompt, rebuilt for every request")
    compaction: CompactionSettingsIn | None = None


class CompactIn(Strict):
    max_tokens: Annotated[StrictInt, Field(ge=0, le=100_000_000)] | None = None
    keep_recent_tokens: Annotated[StrictInt, Field(ge=0, le=100_000_000)] | None = None
    force: StrictBool = False
    summary: Text | None = Field(None, description="use this summary text instead of a summarizer")
    summarizer: SummarizerName | None = None
    wait: StrictBool = Field(True, description=(
        "wait for the run to finish, at most CTXWEB_COMPACTION_WAIT_SECONDS (default 20); when it has not "
        "finished by then, or with wait=false, the answer is 202 with the run, readable at its url"))
    dry_run: StrictBool = Field(False, description=(
        "only say what a compaction with these settings would do (a CompactionPreviewOut): nothing is stored, "
        "no run, event or checkpoint; an LLM summarizer is not called (its summary is estimated)"))


class TokensIn(BaseModel):
    messages: list[dict[str, Any]] = Field(min_length=1, description="OpenAI Chat Completions messages")


class RequestIn(Strict):
    instructions: Text | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    format: FormatName = Field("openai", description="the format of the returned model input")
    message_format: MessageFormatName = Field("ctxweb", description="the shape of `messages`")


# --- responses: filled from model objects ---------------------------------------------------------


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


class SessionRecord(Schema):
    """A session in an export, in the shape PUT /sessions/{key} takes (its own compaction settings
    only, not the defaults it inherits), so an import re-creates it."""

    key: str
    title: str
    metadata: dict[str, Any]
    instructions: str
    compaction: dict[str, Any]
    created_at: datetime

    @staticmethod
    def resolve_compaction(session) -> dict:
        own = {"max_tokens": session.max_tokens, "keep_recent_tokens": session.keep_recent_tokens,
               "auto": session.auto_compact, "summarizer": session.summarizer or None}
        return {name: value for name, value in own.items() if value is not None}

    @field_serializer("created_at", when_used="json")
    def _iso(self, value: datetime) -> str:
        return value.isoformat()


class SessionListOut(Schema):
    items: list[SessionOut]
    next_cursor: str | None = Field(None, description="pass as cursor to get the next page")


class ToolCallOut(Schema):
    id: str
    name: str
    arguments: str


# How a stored message returns the fields of MessageIn (MessageRecord). Left out: what a client may send
# that is not stored (INPUT_ONLY). Declared here (STORED_AS): the client's id, first, which the server
# makes when none was sent; the fields stored normalised (sessions.validation.new_message), never null;
# the time, always set once stored. Every other field of MessageIn is returned as MessageIn declares it
# (its type without the checks of input, its default and description): a field added there is
# stored, returned and exported without a line here.
INPUT_ONLY = ("persist",)
STORED_AS = {
    "id": (str, Field(alias="client_id", description="the client's id, or one the server made")),
    "content": (str | list[dict[str, Any]], ...),
    "reasoning": (str, ""),
    "tool_calls": (list[ToolCallOut], Field(default_factory=list)),
    "tool_call_id": (str, ""),
    "name": (str, ""),
    "attributes": (dict[str, Any], Field(default_factory=dict)),
    "created_at": (datetime, ...),
}


def record_field(name: str) -> tuple:
    """How MessageRecord declares the field `name` of MessageIn."""
    if name in STORED_AS:
        return STORED_AS[name]
    sent = MessageIn.model_fields[name]
    return sent.annotation, Field(sent.default, default_factory=sent.default_factory, description=sent.description)


class MessageRecordBase(Schema):
    @field_serializer("created_at", when_used="json", check_fields=False)
    def _iso(self, value: datetime) -> str:
        return value.isoformat()  # exports keep Python's form (+00:00), as they always did


MessageRecord = create_model(
    "MessageRecord", __base__=MessageRecordBase,
    __doc__="A stored message in the shape the append endpoint takes (exports use it, so they re-import as they are).",
    id=STORED_AS["id"],
    **{name: record_field(name) for name in MessageIn.model_fields if name != "id" and name not in INPUT_ONLY},
)


class ExplainOut(Schema):
    """sessions.explain.Explanation: where a stored message is in the model input, or why not."""

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
    explain: ExplainOut = Field(description="where it is in the model input, or why not (sessions.explain)")

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


class CheckpointRecord(Schema):
    """A checkpoint in an export: where it sits in the raw log, and its summary."""

    number: int = Field(description="its number in the session: 1, 2, 3 in creation order")
    first_seq: int
    last_seq: int
    created_at_seq: int
    summary: str
    summarizer: str
    trigger: str
    created_at: datetime

    @field_serializer("created_at", when_used="json")
    def _iso(self, value: datetime) -> str:
        return value.isoformat()


class NoteRecord(Schema):
    """A note in an export: on the session (seq null) or on one of its messages, with who wrote it."""

    seq: int | None
    author: str
    text: str
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_author(note) -> str:
        return note.author.get_username() if note.author_id else ""

    @field_serializer("created_at", "updated_at", when_used="json")
    def _iso(self, value: datetime) -> str:
        return value.isoformat()


class CheckpointListOut(Schema):
    items: list[CheckpointOut]


def event_out_schema(data_model: type[EventData]) -> type[BaseModel]:
    """An event of one type, its data described by that type's model (event_types.py)."""
    return create_model(
        f"{data_model.__name__}Event", __base__=Schema,
        id=int, type=Literal[data_model.type.value], actor=str, data=data_model, created_at=datetime,
    )


# One schema per event type, told apart by `type`: a oneOf with a discriminator in the OpenAPI schema.
# (Union[...] takes the generated models as one tuple, which `|` cannot.)
EventOut = Annotated[Union[tuple(event_out_schema(m) for m in EVENT_DATA.values())], Field(discriminator="type")]  # noqa: UP007


EVENT_OUT = TypeAdapter(EventOut)


class EventListOut(Schema):
    items: list[EventOut]
    next_after: int | None = None


class CompactionOut(Schema):
    """The outcome of a compaction run (sessions.compaction.Outcome)."""

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
    (sessions.what_if.Preview)."""

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
        from .compaction_runs import run_outcome

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


class TraceMessageOut(Schema):
    """A sessions.trace.TraceRow."""

    seq: int
    role: str
    excerpt: str = Field(description="HTML: the text around the match, escaped, the match in <mark>")
    in_model_input: bool = Field(alias="in_input")
    reason: str = Field(description="the explain code: in_input, covered_by_checkpoint, excluded_flag, ...")
    why: str = Field(description="the explain sentence")
    checkpoints: list[TraceCheckpointOut] = Field(
        alias="coverage",
        description="the checkpoints whose summaries stand for this message (their range 1..last_seq holds it)")

    @staticmethod
    def resolve_excerpt(row) -> str:
        return str(row.excerpt)


class TraceRequestOut(Schema):
    """A REQUEST_BUILT event."""

    event_id: int = Field(alias="pk")
    checkpoint_id: int | None
    created_at: datetime

    @staticmethod
    def resolve_checkpoint_id(event) -> int | None:
        return event.data.get("checkpoint_id")


class TraceOut(Schema):
    """A sessions.trace.Trace."""

    query: str
    answer: str = Field(alias="sentence", description="one sentence: where the string is, and where the model lost it")
    messages: list[TraceMessageOut] = Field(alias="rows", description="the messages that hold it, in seq order (at most 50)")
    truncated: bool = Field(description="more messages hold it than are listed")
    lost_at_checkpoint_id: int | None = Field(
        description="the first checkpoint after its last mention whose summary does not carry it")
    first_request: TraceRequestOut | None = Field(
        description="the first recorded request (REQUEST_BUILT) built on a summary that does not carry it")
