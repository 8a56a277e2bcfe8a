"""Request and response schemas of the HTTP API v1 (SPEC §5), with their fields listed explicitly."""

from datetime import datetime
from typing import Annotated, Any, Literal, Union

from ninja import Field
from pydantic import BaseModel, ConfigDict, StrictBool, create_model

from .event_types import EVENT_DATA, EventData

RoleName = Literal["system", "user", "assistant", "tool", "agent"]
FormatName = Literal["ctxweb", "openai", "anthropic"]
SummarizerName = Literal["extractive", "openai"]


class Strict(BaseModel):
    """Request bodies: plain pydantic models (ninja.Schema's Django-object getter is only needed for
    responses built from model instances, and costs a lot on batches of messages); unknown fields are
    refused."""

    model_config = ConfigDict(extra="forbid")


class ErrorOut(BaseModel):
    detail: str
    code: str
    index: int | None = Field(None, description="which message of a batch the error is about")
    seq: int | None = Field(None, description="the stored message a conflict is about")
    errors: list[dict] | None = Field(None, description="field errors of an invalid request body")


# --- sessions ------------------------------------------------------------------------------------


class CompactionSettingsIn(Strict):
    max_tokens: int | None = Field(None, ge=1, le=100_000_000, description="compact when the model input is over this")
    keep_recent_tokens: int | None = Field(None, ge=1, le=100_000_000, description="recent turns kept whole")
    auto: StrictBool | None = Field(None, description="compact automatically after appends and request builds")
    summarizer: SummarizerName | None = None


class SessionIn(Strict):
    title: str | None = Field(None, max_length=300)
    metadata: dict[str, Any] | None = None
    instructions: str | None = Field(None, description="the current system prompt, rebuilt for every request")
    compaction: CompactionSettingsIn | None = None


class CompactionSettingsOut(BaseModel):
    max_tokens: int
    keep_recent_tokens: int
    auto: bool
    summarizer: str


class SessionOut(BaseModel):
    key: str
    title: str
    metadata: dict[str, Any]
    instructions: str
    instructions_tokens: int
    compaction: CompactionSettingsOut
    message_count: int
    raw_tokens: int = Field(description="tokens of every stored message")
    model_input_tokens: int = Field(description="tokens of the model input as built now")
    checkpoint_count: int
    created_at: datetime
    updated_at: datetime
    last_activity_at: datetime


class SessionListOut(BaseModel):
    items: list[SessionOut]
    next_cursor: str | None = Field(None, description="pass as cursor to get the next page")


# --- messages ------------------------------------------------------------------------------------


class TextPart(Strict):
    type: Literal["text"]
    text: str


class ImagePart(Strict):
    type: Literal["image"]
    url: str = Field(description="http(s) URL or data: URL")
    media_type: str | None = Field(None, max_length=100)
    width: int | None = Field(None, ge=1, le=100_000)
    height: int | None = Field(None, ge=1, le=100_000)
    detail: Literal["low", "high", "auto"] | None = None


class ToolCallIn(Strict):
    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    arguments: str | dict[str, Any] = Field("", description="the raw string the model produced, or a JSON object")


class ToolCallOut(BaseModel):
    id: str
    name: str
    arguments: str


class MessageIn(Strict):
    role: RoleName
    content: str | list[TextPart | ImagePart] | None = None
    reasoning: str | None = Field(None, description="assistant only")
    tool_calls: list[ToolCallIn] | None = Field(None, description="assistant only")
    tool_call_id: str | None = Field(None, max_length=200, description="tool only, required there")
    name: str | None = Field(None, max_length=200)
    attributes: dict[str, Any] | None = Field(None, description="application data, never sent to the model")
    include_in_messages: StrictBool = True
    persist: StrictBool = Field(True, description="false: do not store (requests only)")
    id: str | None = Field(None, min_length=1, max_length=200, description="client id, unique in the session")
    created_at: datetime | None = Field(None, description="when importing history; server time otherwise")


class AppendIn(Strict):
    messages: list[MessageIn] = Field(min_length=1)


class CheckpointOut(BaseModel):
    id: int
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


def event_out_schema(data_model: type[EventData]) -> type[BaseModel]:
    """An event of one type, its data described by that type's model (event_types.py)."""
    return create_model(
        f"{data_model.__name__}Event",
        id=int, type=Literal[data_model.type.value], actor=str, data=data_model, created_at=datetime,
    )


# One schema per event type, told apart by `type`: a oneOf with a discriminator in the OpenAPI schema.
# (Union[...] takes the generated models as one tuple, which `|` cannot.)
EventOut = Annotated[Union[tuple(event_out_schema(m) for m in EVENT_DATA.values())], Field(discriminator="type")]  # noqa: UP007


class CompactionOut(BaseModel):
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
    checkpoint: CheckpointOut | None = None
    events: list[EventOut]


class AppendedOut(BaseModel):
    index: int
    seq: int | None
    id: str
    tokens: int
    stored: bool
    duplicate: bool


class AppendOut(BaseModel):
    session: str
    session_created: bool
    messages: list[AppendedOut]
    compaction: CompactionOut | None = Field(None, description="automatic compaction run after the append")


class MessageOut(BaseModel):
    seq: int
    id: str
    role: str
    content: str | list[dict[str, Any]]
    reasoning: str
    tool_calls: list[ToolCallOut]
    tool_call_id: str
    name: str
    attributes: dict[str, Any]
    include_in_messages: bool
    created_at: datetime
    tokens: int
    reasoning_tokens: int


class MessagePageOut(BaseModel):
    items: list[MessageOut]
    next_after: int | None = Field(None, description="pass as after to get the next page")


class MessagePatchIn(Strict):
    include_in_messages: StrictBool | None = None
    attributes: dict[str, Any] | None = None


# --- model input ---------------------------------------------------------------------------------


class OmittedOut(BaseModel):
    seq: int | None
    reason: str
    tool_call_id: str | None = None
    request_index: int | None = None
    whole_message: bool


class TokenTotalsOut(BaseModel):
    total: int = Field(description="everything, with the reply priming")
    instructions: int
    summary: int
    messages: int
    request: int = Field(description="the request's unpersisted messages")


class ModelInputOut(BaseModel):
    format: FormatName
    session: str
    as_of: int | None
    checkpoint: CheckpointOut | None
    tokens: TokenTotalsOut
    system: str | None = Field(None, description="anthropic format: the instructions")
    messages: list[dict[str, Any]]
    omitted: list[OmittedOut]


class CompactIn(Strict):
    max_tokens: int | None = Field(None, ge=0, le=100_000_000)
    keep_recent_tokens: int | None = Field(None, ge=0, le=100_000_000)
    force: StrictBool = False
    summary: str | None = Field(None, description="use this summary text instead of a summarizer")
    summarizer: SummarizerName | None = None


class TokensIn(BaseModel):
    messages: list[dict[str, Any]] = Field(min_length=1, description="OpenAI Chat Completions messages")


class TokensOut(BaseModel):
    total: int
    messages: list[int]


class RequestIn(Strict):
    instructions: str | None = None
    messages: list[MessageIn] = Field(default_factory=list)
    format: FormatName = "openai"


class RequestOut(BaseModel):
    model_input: ModelInputOut
    stored: list[AppendedOut]
    compaction: CompactionOut | None = None
    event_id: int


class CheckpointListOut(BaseModel):
    items: list[CheckpointOut]


class EventListOut(BaseModel):
    items: list[EventOut]
    next_after: int | None = None
