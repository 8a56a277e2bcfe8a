"""ctxweb's own shape of what clients send and what exports write: the field types with the storage rules
of every text and JSON value a client sends, a message and its parts and tool calls, the session fields a
client sets, the request bodies of the HTTP API, and the records of an export (a session, its messages,
checkpoints, notes and reviews in the shape the append endpoint takes back). Parsed through
sessions.wire.validation by the API, the importers, the dashboard and the commands; sessions.http.schemas
adds the responses."""

import base64
import binascii
import math
import re
from datetime import datetime
from typing import Annotated, Any, Literal

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
    create_model,
    field_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from sessions.models import MODEL_FIELDS
from sessions.wire.parts import InputToRender

RoleName = Literal["system", "user", "assistant", "tool", "agent"]
FormatName = Literal["ctxweb", "openai", "anthropic", "openai-responses"]
BasisName = Literal["recorded_request", "raw_log"]
# The shapes messages may be sent in: ours, or a provider's own (sessions.wire.provider_messages).
MessageFormatName = Literal["ctxweb", "openai", "anthropic", "openai-responses"]
BasisName = Literal["recorded_request", "raw_log"]
SummarizerName = Literal["extractive", "openai"]
SessionSource = Literal["requests", "import", "api"]
MAX_ID_LENGTH = 200
MAX_DIMENSION = 100_000
DATA_URL_RE = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?((?:;[\w.+-]+=[\w.+-]+)*)(;base64)?,", re.IGNORECASE)
# Names of the branches of unions below. They show up in pydantic's error locations, where
# sessions.wire.validation drops them so a client reads field names only.
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
    of the domain (sessions.wire.validation), not of the shape."""

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
    pinned_facts: list[dict[str, StrictStr]] | None = Field(None, max_length=20, description=(
        "literals no summary of this session may lose, besides the project's: each {\"name\", \"pattern\"} (an RE2 "
        "regular expression) or {\"name\", \"value\"} (a literal); a checkpoint whose summary lacks one gets a "
        "Pinned: line with it (sessions/context/pinned.py)"))


class CompactIn(Strict):
    max_tokens: Annotated[StrictInt, Field(ge=0, le=100_000_000)] | None = None
    keep_recent_tokens: Annotated[StrictInt, Field(ge=0, le=100_000_000)] | None = None
    force: StrictBool = False
    summary: Text | None = Field(None, description="use this summary text instead of a summarizer")
    summarizer: SummarizerName | None = None
    backlog: StrictBool = Field(False, description=(
        "work the backlog off: when this run completes with the input still over max_tokens because a run "
        "covers at most CTXWEB_COMPACTION_RUN_MAX_TOKENS, the worker runs the next with the same settings, "
        "run after run, until it is under (each run's options.backlog: its number, and about how many)"))
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


class ToolCallOut(Schema):
    id: str
    name: str
    arguments: str


# How a stored message returns the fields of MessageIn (MessageRecord). Left out: what a client may send
# that is not stored (INPUT_ONLY). Declared here (STORED_AS): the client's id, first, which the server
# makes when none was sent; the fields stored normalised (sessions.wire.validation.new_message), never null;
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


class ReviewRecord(Schema):
    """A review in an export: its verdict, labels, score, comment and the messages it is about, who made
    it and in which review queue (its name; null outside a queue)."""

    verdict: str
    labels: list[str]
    score: int | None
    comment: str
    seqs: list[int]
    reviewer: str
    queue: str | None
    created_at: datetime

    @staticmethod
    def resolve_queue(review) -> str | None:
        return review.queue.name if review.queue_id else None

    @field_serializer("created_at", when_used="json")
    def _iso(self, value: datetime) -> str:
        return value.isoformat()


# --- rendering: the model input in this format --------------------------------------------------


# Entry fields of the ctxweb format that are left out when empty: (key, entry attribute). Every one of
# MODEL_FIELDS is one, under its own name.
CTXWEB_OPTIONAL_FIELDS = (
    ("id", "client_id"), ("tool_calls", "tool_calls"), ("pending_tool_calls", "pending_calls"),
    ("dropped_tool_calls", "dropped_calls"), ("tool_call_id", "tool_call_id"),
    *((name, name) for name in MODEL_FIELDS),
    ("edited_by_application", "edited"), ("application_message", "own"),
)


def to_ctxweb(model_input: InputToRender) -> list[dict]:
    """The entries as ctxweb messages with where they sit; the newest assistant message's calls that
    await their results are shown as `pending_tool_calls` (that message last, with 0 tokens, when
    nothing of it is sent yet)."""
    out = []
    awaiting = [model_input.awaiting] if model_input.awaiting else []
    for entry in model_input.entries + awaiting:
        item = {"kind": entry.kind, "role": entry.role, "content": entry.content, "tokens": entry.tokens}
        if entry.seq is not None:
            item["seq"] = entry.seq
        for key, attribute in CTXWEB_OPTIONAL_FIELDS:
            if value := getattr(entry, attribute):
                item[key] = value
        if entry.checkpoint is not None:
            item["checkpoint_id"] = entry.checkpoint.pk
        out.append(item)
    return out


class StoredText:
    """A string content as SQLite stores it, as JSON text, to be written into a response as it is
    (sessions.http.model_input.messages_json) rather than decoded here and encoded again there. For an input of 700
    messages the decoding was 0.4-0.7 of the 3.1-3.7 ms its read took. Only the API's model input in
    the formats that send a string content unchanged (TEXT_AS_STORED_FORMATS) asks for it; every other
    reader gets the string."""

    __slots__ = ("json",)

    def __init__(self, json_text: str):
        self.json = json_text

    def __repr__(self) -> str:
        return f"StoredText({self.json[:40]!r})"
