"""The data of each event type: one model per type, with its fields typed and no others
allowed. Every writer builds one (`events.record`) and every reader parses stored data through it
(`events.event_data`), so the shape of an event is written down once, here (the way Zulip's
lib/event_types.py does it).

The stored JSON is the model's `model_dump(mode="json")`. An optional figure is left out when it has
no value rather than stored as null, so rows written before these models parse and dump unchanged.
"""

import hashlib
import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, with_config
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from sessions.models import EventType


def _none(value) -> bool:
    return value is None


# An optional figure is None in Python and absent, never null, in the stored JSON and the API:
# `run: int | Absent = absent_when_none("…")`.
Absent = SkipJsonSchema[None]


def _no_default(schema: dict) -> None:
    schema.pop("default", None)


def absent_when_none(description: str):
    return Field(None, exclude_if=_none, description=description, json_schema_extra=_no_default)


class EventData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: ClassVar[EventType]


# --- sessions and messages -----------------------------------------------------------------------


class SessionCreated(EventData):
    type = EventType.SESSION_CREATED

    key: str


SessionField = Literal["title", "metadata", "instructions", "max_tokens", "keep_recent_tokens", "auto_compact", "summarizer",
                       "pinned_facts"]


class SessionUpdated(EventData):
    type = EventType.SESSION_UPDATED

    fields: list[SessionField] = Field(description="the session fields the update changed")


class MessagesAppended(EventData):
    type = EventType.MESSAGES_APPENDED

    input_tokens: int = Field(description="the model input's size after the append")
    count: int = Field(description="messages stored (duplicates not counted)")
    first_seq: int
    last_seq: int
    tokens: int = Field(description="tokens of the stored messages")
    duplicates: int = Field(description="messages of the batch already stored, not stored again")


# A change is {"from": old, "to": new}; `from` is a Python keyword, hence the functional TypedDict.
FlagChange = with_config(ConfigDict(extra="forbid"))(TypedDict("FlagChange", {"from": bool, "to": bool}))

# An event never copies user-sized data whole. Every bound below is in bytes of the event's JSON as
# stored (`stored_size`: json.dumps with its ASCII escapes, what SQLite keeps; PostgreSQL's jsonb and
# the API's UTF-8 are never larger), so no choice of characters makes an event bigger: a value is kept
# only while its JSON is at most EVENT_VALUE_BYTES, otherwise summarised by its size and digest; the
# changed keys are named while their list fits EVENT_KEYS_BYTES (at most EVENT_KEYS_SHOWN, each cut to
# EVENT_KEY_BYTES), the rest counted; the message's client id is cut to EVENT_ID_BYTES. So a
# MESSAGE_UPDATED event stays under EVENT_MAX_BYTES whatever a PATCH sends (tests/api/test_patch_message.py),
# and 40 edits of 4 MB of attributes store 40 rows of under 2 kB, not 320 MB of event history. Fixed
# here, not settings: the stored shape must not vary.
EVENT_VALUE_BYTES = 200
EVENT_KEYS_SHOWN = 20
EVENT_KEY_BYTES = 100
EVENT_KEYS_BYTES = 500
EVENT_ID_BYTES = 200
EVENT_MAX_BYTES = 2_000
ELLIPSIS = "…"


def canonical_json(value) -> str:
    """The JSON a summary measures and digests: sorted keys, no spaces, UTF-8 as is."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def stored_size(value) -> int:
    """Bytes of `value`'s JSON as an event stores it (Django's JSONField: ASCII escapes, `, ` and `: `)."""
    return len(json.dumps(value))


def cut_to_size(text: str, size: int) -> str:
    """`text`, or its longest prefix followed by an ellipsis, whose JSON string (quotes included) is at
    most `size` bytes as stored. Reads no further into `text` than the cut."""
    if len(text) + 2 <= size and stored_size(text) <= size:  # a character takes at least one byte
        return text
    room, kept = size - stored_size(ELLIPSIS), 0
    for ch in text:
        room -= stored_size(ch) - 2
        if room < 0:
            break
        kept += 1
    return text[:kept] + ELLIPSIS


class ValueSummary(EventData):
    bytes: int = Field(description="UTF-8 bytes of the value's canonical JSON (sorted keys, no spaces)")
    sha256: str = Field(description="hex digest of that JSON")
    value: dict[str, Any] | Absent = absent_when_none(
        f"the value itself, when its JSON as stored is at most {EVENT_VALUE_BYTES} bytes"
    )

    @classmethod
    def of(cls, value: dict) -> "ValueSummary":
        data = canonical_json(value).encode()
        # The canonical JSON is the shorter one: only a value that may fit is written out again to measure it.
        small = len(data) <= EVENT_VALUE_BYTES and stored_size(value) <= EVENT_VALUE_BYTES
        return cls(bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), value=value if small else None)


def shown_keys(changed: list[str]) -> list[str]:
    """The first of the sorted changed keys, each cut to EVENT_KEY_BYTES, while their list's JSON stays
    within EVENT_KEYS_BYTES and they are at most EVENT_KEYS_SHOWN."""
    shown, size = [], stored_size([])
    for key in changed[:EVENT_KEYS_SHOWN]:
        key = cut_to_size(key, EVENT_KEY_BYTES)
        size += stored_size(key) + (2 if shown else 0)  # ", " between items
        if size > EVENT_KEYS_BYTES:
            break
        shown.append(key)
    return shown


class AttributesChange(EventData):
    keys: list[str] = Field(description=(
        f"the keys added, removed or changed, sorted: the first ones (at most {EVENT_KEYS_SHOWN}) while their "
        f"list's JSON fits in {EVENT_KEYS_BYTES} bytes, each cut to {EVENT_KEY_BYTES} bytes of JSON with an "
        "ellipsis; keys_changed minus their number were left out"))
    keys_changed: int = Field(description="how many keys were added, removed or changed")
    before: ValueSummary
    after: ValueSummary

    @classmethod
    def between(cls, before: dict, after: dict) -> "AttributesChange":
        changed = sorted(k for k in before.keys() | after.keys() if k not in before or k not in after
                         or before[k] != after[k])
        return cls(keys=shown_keys(changed), keys_changed=len(changed),
                   before=ValueSummary.of(before), after=ValueSummary.of(after))


class MessageChanges(EventData):
    include_in_messages: FlagChange | Absent = absent_when_none("when the flag changed")
    attributes: AttributesChange | Absent = absent_when_none(
        "when the attributes changed: a bounded summary (sizes, digests, small values), never the whole attributes"
    )


class MessageUpdated(EventData):
    type = EventType.MESSAGE_UPDATED

    seq: int
    id: str = Field(description=f"the message's client id, cut to {EVENT_ID_BYTES} bytes of JSON with an ellipsis")
    changes: MessageChanges
    input_tokens: int = Field(description="the model input's size after the change")
    at_seq: int = Field(description="the session's last seq when it changed")

    @field_validator("id")
    @classmethod
    def _cut(cls, id: str) -> str:
        return cut_to_size(id, EVENT_ID_BYTES)


# --- compaction ----------------------------------------------------------------------------------

Trigger = Literal["auto", "request", "import"]


class CompactionFigures(EventData):
    """What every COMPACTION_* event carries: the run's settings and the input it started from."""

    trigger: Trigger
    max_tokens: int
    keep_recent_tokens: int
    tokens_before: int
    summarizer: str


class CompactionStarted(CompactionFigures):
    type = EventType.COMPACTION_STARTED


class PinnedAdded(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    values: list[str] = Field(description="the pinned values the summary did not carry, added on its Pinned: line")
    tokens: int = Field(description="the tokens that line added to the summary")


class CompactionCompleted(CompactionFigures):
    type = EventType.COMPACTION_COMPLETED

    checkpoint_id: int
    at_seq: int = Field(description="the session's last seq when the checkpoint was made")
    covered_seq_range: tuple[int, int]
    replaced_tokens: int
    summary_tokens: int
    tokens_after: int
    still_over_threshold: bool
    budget_reached: bool | Absent = absent_when_none(
        "true when the run stopped at its budget (CTXWEB_COMPACTION_RUN_MAX_TOKENS, _BYTES) and left turns "
        "it would have covered to the next run; none for an imported checkpoint"
    )
    run: int | Absent = absent_when_none("the COMPACTION_STARTED event's id; none for an imported checkpoint")
    lost_count: int | Absent = absent_when_none(
        "salient literals (ids, amounts, dates, names, ...) of the covered messages that the summary does not "
        "carry (sessions/context/facts.py); none in events recorded before it was counted"
    )
    pinned_added: PinnedAdded | Absent = absent_when_none(
        "the pinned values (sessions/context/pinned.py) the summary did not carry, added back on a Pinned: line; "
        "none when it carried them all or nothing was pinned"
    )


class CompactionSkipped(CompactionFigures):
    type = EventType.COMPACTION_SKIPPED

    reason: Literal["under_threshold", "nothing_to_compact", "not_smaller"]
    turn_seq: int | Absent = absent_when_none(
        "nothing_to_compact: the first seq of the current turn, which is kept whole; automatic compaction "
        "records this once per turn and settings"
    )
    summary_tokens: int | Absent = absent_when_none("not_smaller: the summary's tokens")
    replaced_tokens: int | Absent = absent_when_none("not_smaller: the tokens it would have replaced")
    run: int = Field(description="the COMPACTION_STARTED event's id")


# A summarizer's error may quote what it was sent; an event keeps its first EVENT_ERROR_CHARS characters.
EVENT_ERROR_CHARS = 2_000


class CompactionFailed(CompactionFigures):
    type = EventType.COMPACTION_FAILED

    error: str = Field(description=f"the error, cut to {EVENT_ERROR_CHARS} characters")

    @field_validator("error")
    @classmethod
    def _cut(cls, error: str) -> str:
        return error if len(error) <= EVENT_ERROR_CHARS else error[: EVENT_ERROR_CHARS - 1] + "…"
    run: int = Field(description="the COMPACTION_STARTED event's id")


# --- requests ------------------------------------------------------------------------------------


class UnpersistedMessages(EventData):
    count: int
    tokens: int


class OmittedMessage(EventData):
    """model_input.Omission.as_dict(): what the request left out to stay valid."""

    seq: int | None
    reason: str
    tool_call_id: str | Absent = absent_when_none("the tool call left out")
    request_index: int | Absent = absent_when_none("for an unpersisted message of the request")
    whole_message: bool


class RequestBuilt(EventData):
    type = EventType.REQUEST_BUILT

    format: Literal["ctxweb", "openai", "anthropic", "openai-responses"]
    checkpoint_id: int | None
    seq_range: tuple[int, int] | None = Field(description="the stored messages sent, first and last seq")
    stored_messages: int
    tokens: int
    instructions_tokens: int
    summary_tokens: int
    unpersisted: UnpersistedMessages = Field(description="messages sent but not stored: by count and tokens")
    omitted: list[OmittedMessage]
    compaction: Literal["queued", "running", "completed", "skipped", "failed", "not_run"] | None = Field(
        description="the state of the automatic compaction the request waited for, if any (not_run: before runs were queued)"
    )


# --- notes and tags ------------------------------------------------------------------------------


class NoteAdded(EventData):
    type = EventType.NOTE_ADDED

    note_id: int
    seq: int | None = Field(description="the message the note is on; none for the session")
    text: str = Field(description="the note's first 200 characters")


class NoteEdited(NoteAdded):
    type = EventType.NOTE_EDITED


class NoteDeleted(EventData):
    type = EventType.NOTE_DELETED

    note_id: int
    seq: int | None


class TagsChanged(EventData):
    type = EventType.TAGS_CHANGED

    before: list[str]
    after: list[str]
    added: list[str]
    removed: list[str]


# --- reviews -------------------------------------------------------------------------------------


class ReviewAdded(EventData):
    type = EventType.REVIEW_ADDED

    review_id: int
    queue_id: int | None = Field(description="the review queue it was made in; none outside a queue")
    verdict: Literal["ok", "problem", "unsure"]
    labels: list[str]
    score: int | None = Field(description="1-5; none when not given")
    seqs: list[int] = Field(description="the messages it is about")
    comment: str = Field(description="the comment's first 200 characters")


# --- masking -------------------------------------------------------------------------------------


class MaskingRevealed(EventData):
    type = EventType.MASKING_REVEALED

    viewer: str = Field(description="the viewer the session's personal data is shown unmasked to")


EVENT_DATA: dict[str, type[EventData]] = {
    model.type: model
    for model in (
        SessionCreated, SessionUpdated, MessagesAppended, MessageUpdated,
        CompactionStarted, CompactionCompleted, CompactionSkipped, CompactionFailed,
        RequestBuilt, NoteAdded, NoteEdited, NoteDeleted, TagsChanged, ReviewAdded, MaskingRevealed,
    )
}
