"""The model input: the latest checkpoint plus the raw messages after it.

Built from one indexed range query over the raw log, never the whole log. The validity rules that keep
provider requests well formed (a tool result needs its call right before it; a tool call without a
result is left out: dropped, or pending while it belongs to the newest assistant message) are applied
here, once, so every format and every explanation agree on what the model sees.
"""

import hashlib
import json
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

import orjson
from django.db import connections, router
from django.db.models import TextField
from django.db.models.functions import Cast

from sessions.db.message_sizes import for_page
from sessions.db.messages import RECENT_ROWS, recent_visible_row_values, stored_message_rows
from sessions.db.rows import first, select
from sessions.errors import DomainError
from sessions.models import MODEL_FIELDS, Checkpoint, Message, Role, Session
from sessions.wire.ctxweb import StoredText
from sessions.wire.tokens import REPLY_PRIMING, count_message

SUMMARY_PREFIX = "Summary of the earlier conversation, covering messages {first}–{last}:\n\n"


class Reason:
    """Where a stored message is in the model input, or why it is not."""

    IN_INPUT = "in_input"
    COVERED = "covered_by_checkpoint"
    EXCLUDED = "excluded_flag"
    INSTRUCTIONS_ROLE = "instructions_role"
    ORPHAN = "orphan_tool_result"
    DROPPED = "dropped_tool_call"
    AWAITING = "awaiting_tool_result"
    AFTER_AS_OF = "after_as_of"
    # Sessions rebuilt from recorded requests (sessions.ingest.recorded_requests): the application itself left
    # the message out of its latest request, or put its own summary or rewrite in its place.
    DROPPED_BY_APPLICATION = "dropped_by_application"
    REPLACED_BY_APPLICATION_SUMMARY = "replaced_by_application_summary"


def summary_message_text(summary: str, last_seq: int) -> str:
    """The text of a checkpoint's summary as the model receives it (a user message)."""
    return SUMMARY_PREFIX.format(first=1, last=last_seq) + summary


def summary_message_tokens(summary: str, last_seq: int) -> int:
    return count_message(Role.USER, summary_message_text(summary, last_seq)).total


def with_model_fields(cls):
    """`cls` with an attribute for each of MODEL_FIELDS, defaulting to what a message without it holds
    (applied before @dataclass, which makes them fields)."""
    for name, default in MODEL_FIELDS.items():
        cls.__annotations__[name] = type(default)
        setattr(cls, name, default)
    return cls


def model_fields_of(source) -> dict:
    """MODEL_FIELDS as `source` (a stored message, a new one, an entry) holds them."""
    return {name: getattr(source, name) for name in MODEL_FIELDS}


def model_fields_sent(message: dict) -> dict:
    """MODEL_FIELDS as a recorded request's message (a dict in the ctxweb shape) sends them; absent or
    null ones as a message without them holds."""
    return {name: type(default)(message.get(name) or default) for name, default in MODEL_FIELDS.items()}


@dataclass(slots=True)
@with_model_fields
class Entry:
    """One message of the model input (and an attribute for each of MODEL_FIELDS: with_model_fields)."""

    kind: str  # "instructions" | "summary" | "message" | "request"
    role: str
    content: object
    tokens: int
    seq: int | None = None
    client_id: str = ""
    tool_calls: list = field(default_factory=list)  # the calls sent to the model
    tool_call_id: str = ""
    dropped_calls: list = field(default_factory=list)  # ids of calls left out: no result in the input
    # Calls of the newest assistant message still awaiting their results: left out of the request
    # (no provider takes a call without its result) until the results are appended.
    pending_calls: list = field(default_factory=list)
    request_index: int | None = None  # for an unpersisted message of the request
    checkpoint: Checkpoint | None = None
    # Sessions rebuilt from recorded requests (sessions.context.recorded_input): a message the application sent in
    # a form of its own (`edited`: the raw message `seq`, changed), or that matches no stored message (`own`:
    # its summary or rewrite, with no seq).
    edited: bool = False
    own: bool = False


@dataclass
class Omission:
    """Something stored (or sent with the request) that the input leaves out to stay valid."""

    reason: str
    seq: int | None = None
    tool_call_id: str = ""
    request_index: int | None = None  # for an unpersisted message of the request
    whole_message: bool = True

    @classmethod
    def from_dict(cls, data: dict) -> "Omission":
        return cls(data["reason"], data.get("seq"), data.get("tool_call_id", ""), data.get("request_index"),
                   data.get("whole_message", True))

    def as_dict(self) -> dict:
        data = {"seq": self.seq, "reason": self.reason}
        if self.tool_call_id:
            data["tool_call_id"] = self.tool_call_id
        if self.request_index is not None:
            data["request_index"] = self.request_index
        data["whole_message"] = self.whole_message
        return data


def omissions_by_seq(omitted: list[Omission]) -> dict[int, list[Omission]]:
    """seq -> what is left out of that stored message (a request's own messages have no seq)."""
    by_seq = defaultdict(list)
    for omission in omitted:
        if omission.seq is not None:
            by_seq[omission.seq].append(omission)
    return by_seq


class ModelInputShape(ABC):
    """What every form of the model input tells about the stored messages, whichever way it was made:
    built in full with content (ModelInput), laid out from the figures of the visible rows (Layout), or
    read from the figures stored on the session (StoredLayout). Explain and the session page read only
    this, so they never ask which form they were given."""

    session: Session
    checkpoint: Checkpoint | None
    as_of: int | None
    omitted: list[Omission]  # what the input leaves out to stay valid
    tokens: int
    message_count: int  # stored messages in the input
    basis = "raw_log"  # built by ctxweb's rules; sessions.context.recorded_input builds the other basis

    @property
    def head_count(self) -> int:
        """Entries before the stored messages: the instructions and the summary."""
        return int(bool(self.session.instructions_tokens)) + int(self.checkpoint is not None)

    @property
    def entry_count(self) -> int:
        return self.head_count + self.message_count

    @cached_property
    def omitted_by_seq(self) -> dict[int, list[Omission]]:
        return omissions_by_seq(self.omitted)

    @cached_property
    def left_out(self) -> set[int]:
        """Seqs of stored messages left out of the input entirely."""
        return {o.seq for o in self.omitted if o.whole_message and o.seq is not None}

    def _calls_left_out(self, reason: str) -> dict[int, list[str]]:
        calls = defaultdict(list)
        for o in self.omitted:
            if o.reason == reason and o.seq is not None:
                calls[o.seq] += o.tool_call_id.split(", ")
        return dict(calls)

    @cached_property
    def dropped(self) -> dict[int, list[str]]:
        """seq -> tool call ids left out of that stored message (the whole message, or only those
        calls): they have no result in the input."""
        return self._calls_left_out(Reason.DROPPED)

    @cached_property
    def pending(self) -> dict[int, list[str]]:
        """seq -> tool call ids of the newest assistant message left out until their results come."""
        return self._calls_left_out(Reason.AWAITING)

    @abstractmethod
    def positions(self, messages) -> dict[int, int]:
        """seq -> 1-based position in the model input, for those of `messages` (a window of the raw
        log, in seq order) that are in it."""

    @abstractmethod
    def stored_tail(self, before_seq: int | None, limit: int) -> list[Message]:
        """The newest `limit` stored messages of the input (before `before_seq`), in seq order."""


class _Placed(ModelInputShape):
    """A form of the model input that read every stored message it holds, so it knows where each is."""

    @property
    @abstractmethod
    def every_position(self) -> dict[int, int]:
        """seq -> position, for every stored message in the input, in input order."""

    def positions(self, messages) -> dict[int, int]:
        every = self.every_position
        return {m.seq: every[m.seq] for m in messages if m.seq in every}

    def stored_tail(self, before_seq: int | None, limit: int) -> list[Message]:
        kept = [seq for seq in self.every_position if before_seq is None or seq < before_seq]
        shown = kept[-limit:]
        return list(for_page(self.session.messages.filter(seq__in=shown)).order_by("seq")) if shown else []


@dataclass
class ModelInput(_Placed):
    session: Session
    checkpoint: Checkpoint | None
    as_of: int | None
    entries: list  # what a provider is sent, in order: Entry, or a StoredMessage sent whole
    omitted: list[Omission]
    # The newest assistant message when nothing of it can be sent yet (no content, every call awaiting
    # its result): not an entry, since no provider would take it; the ctxweb format shows it as pending.
    awaiting: Entry | None = None
    # Where it comes from (sessions.context.recorded_input): "raw_log", built by ctxweb's rules, or
    # "recorded_request", what the application sent: `request` (the request in force, None before the
    # first), whose messages are the first `len(sent_messages)` entries, sent as `sent_messages` (OpenAI
    # Chat Completions messages, exactly as the application sent them).
    basis: str = "raw_log"
    request: object = None
    sent_messages: list | None = None

    @property
    def pending_tool_calls(self) -> list[dict]:
        """The calls awaiting their results, with the message they belong to."""
        holders = [e for e in self.entries if e.pending_calls] + ([self.awaiting] if self.awaiting else [])
        return [{"seq": e.seq, "request_index": e.request_index, **call} for e in holders for call in e.pending_calls]

    @property
    def tokens(self) -> int:
        return REPLY_PRIMING + sum(entry.tokens for entry in self.entries)

    @property
    def message_entries(self) -> list[Entry]:
        return [e for e in self.entries if e.kind == "message"]

    @property
    def seq_range(self) -> tuple[int, int] | None:
        seqs = [e.seq for e in self.entries if e.seq is not None]
        return (min(seqs), max(seqs)) if seqs else None

    @cached_property
    def every_position(self) -> dict[int, int]:
        return {entry.seq: i for i, entry in enumerate(self.entries, start=1) if entry.seq is not None}

    @property
    def head_count(self) -> int:
        # The request may bring its own instructions, so the head is counted, not derived.
        return sum(1 for e in self.entries if e.kind in ("instructions", "summary"))

    @property
    def message_count(self) -> int:
        return len(self.message_entries)

    @property
    def entry_count(self) -> int:
        return len(self.entries)  # the request's unpersisted messages included


# --- validity ------------------------------------------------------------------------------------


@dataclass
class _Verdict:
    keep: list[bool]
    dropped: dict[int, list[str]]  # item index -> call ids left out: no result in the input
    pending: dict[int, list[str]]  # item index -> call ids left out until their results come
    omitted: list[tuple[int, Omission]]

    def left_out_calls(self, i: int) -> list[str]:
        return self.dropped.get(i, []) + self.pending.get(i, [])


def check_validity(items) -> _Verdict:
    """Apply the provider validity rules to items in input order.

    Each item has role, seq (None when not stored), call_ids, tool_call_tokens, tool_call_id,
    call_seq (the assistant seq a stored result answers, None when unknown) and has_content.
    """
    n = len(items)
    keep = [True] * n
    omitted: list[tuple[int, Omission]] = []
    answered: dict[int, set] = defaultdict(set)
    # The roles as plain strings, looked up once (as in formats.to_openai): an input can hold thousands
    # of items, and each lookup of an enum member costs more than the comparison.
    assistant, tool = str(Role.ASSISTANT), str(Role.TOOL)
    open_call = None  # the assistant item whose results may still follow
    for i, item in enumerate(items):
        if item.role == assistant:
            open_call = i if item.call_ids else None
        elif item.role == tool:
            a = open_call
            ok = (
                a is not None
                and item.tool_call_id in items[a].call_ids
                and item.tool_call_id not in answered[a]
                and (item.call_seq is None or items[a].seq is None or item.call_seq == items[a].seq)
            )
            if ok:
                answered[a].add(item.tool_call_id)
            else:
                keep[i] = False
                omitted.append((i, Omission(Reason.ORPHAN, item.seq, item.tool_call_id)))
        else:
            open_call = None

    # The newest assistant message's calls may still be answered (by results the application is about
    # to append) when nothing but results follows it: pending, not dropped. Either way no provider takes
    # a call without its result, so both are left out of the request.
    newest = next((i for i in range(n - 1, -1, -1) if items[i].role == assistant), None)
    pending_allowed = newest is not None and all(items[j].role == tool for j in range(newest + 1, n))
    dropped: dict[int, list[str]] = {}
    pending: dict[int, list[str]] = {}
    for i, item in enumerate(items):
        if not item.call_ids or item.role != assistant:
            continue
        missing = [cid for cid in item.call_ids if cid not in answered[i]]
        if not missing:
            continue
        awaiting = i == newest and pending_allowed
        reason = Reason.AWAITING if awaiting else Reason.DROPPED
        (pending if awaiting else dropped)[i] = missing
        if len(missing) == len(item.call_ids) and not item.has_content:
            keep[i] = False
            omitted.append((i, Omission(reason, item.seq, ", ".join(missing))))
        else:
            for cid in missing:
                omitted.append((i, Omission(reason, item.seq, cid, whole_message=False)))
    omitted.sort(key=lambda pair: pair[0])
    return _Verdict(keep, dropped, pending, omitted)


def kept_tokens(item, left_out_ids) -> int:
    """What a message adds to the input: its stored tokens less those of its calls left out."""
    if not left_out_ids:
        return item.tokens
    removed = sum(t for cid, t in zip(item.call_ids, item.tool_call_tokens, strict=False) if cid in left_out_ids)
    return item.tokens - removed


# --- building ------------------------------------------------------------------------------------


def latest_checkpoint(session: Session, as_of: int | None = None) -> Checkpoint | None:
    """The checkpoint the model input starts from (as of message `as_of`): of every fetch after a
    compaction. Written as SQL: through the ORM (a related manager, a filter, `first`) it took 0.39 ms
    against about a third of that; tests/test_hot_path_sql.py compares the two."""
    up_to = "" if as_of is None else ' AND "created_at_seq" <= %s'
    checkpoint = first(Checkpoint, f'{select(Checkpoint)} WHERE "session_id" = %s{up_to} ORDER BY "last_seq" DESC LIMIT 1',
                       [session.pk, *([] if as_of is None else [as_of])],
                       connections[router.db_for_read(Checkpoint, instance=session)])
    if checkpoint is not None:
        checkpoint.session = session  # as the related manager gives it
    return checkpoint


def check_as_of(session: Session, as_of: int | None) -> None:
    if as_of is None:
        return
    if isinstance(as_of, bool) or not isinstance(as_of, int) or as_of < 0 or as_of > session.message_count:
        raise DomainError(
            f"as_of must be a seq between 0 and {session.message_count}", code="invalid_as_of"
        )


def split_turns(items: list) -> list[list]:
    """Messages (or rows) in seq order as turns: a user message starts one; `agent` and every other
    role continue it; what comes before the first user message is turn 0."""
    turns: list[list] = []
    for item in items:
        if item.role == Role.USER or not turns:
            turns.append([])
        turns[-1].append(item)
    return turns


def visible_messages(session: Session, after_seq: int, as_of: int | None = None):
    """Stored messages that may reach the model: after the checkpoint, included, not system (VISIBLE_SQL
    below says the same for the reads written as SQL).

    A range scan over the (session, seq) unique index.
    """
    qs = session.messages.filter(seq__gt=after_seq, include_in_messages=True).exclude(role=Role.SYSTEM)
    if as_of is not None:
        qs = qs.filter(seq__lte=as_of)
    return qs.order_by("seq")


class _Unstored:
    """An unpersisted request message seen through the same attributes as a stored one."""

    seq = None
    call_seq = None

    def __init__(self, new, index):
        self.new = new
        self.index = index
        self.role = new.role
        self.call_ids = new.call_ids
        self.tool_call_tokens = new.tool_call_tokens
        self.tool_call_id = new.tool_call_id
        self.has_content = new.has_content
        self.tokens = new.tokens


EMPTY_JSON_LIST = ("[]", "")


def json_list(text: str | None) -> list:
    # Most messages have no tool calls: their empty lists are not decoded.
    return [] if text is None or text in EMPTY_JSON_LIST else _json_values(text)


class StoredMessage:
    """A stored message of the model input, read as plain values: the fields the input sends, each JSON
    field decoded once (empty lists not at all), no model instance and no date. Building from these
    instead of Message instances made a 700-message input several times cheaper.

    A stored message sent whole, as most are, is its own Entry: it has an Entry's attributes, and making
    an Entry of each was a sixth of a long input's build."""

    __slots__ = ("seq", "role", "content", "tokens", "client_id", "tool_calls", "call_ids", "tool_call_tokens",
                 "tool_call_id", "call_seq", "has_content", *MODEL_FIELDS)
    # The rest of an Entry's attributes, the same for every stored message sent whole.
    kind = "message"
    dropped_calls = pending_calls = ()
    request_index = checkpoint = None
    edited = own = False

    def __init__(self, row, content, tool_calls: list, tool_call_tokens: list):
        (self.seq, self.role, _, _, self.tokens, self.client_id, _, _, self.tool_call_id, self.call_seq) = row[:10]
        for (name, default), value in zip(MODEL_FIELDS.items(), row[10:-1], strict=True):
            # Booleans are read as 0 and 1 (stored_messages_sql).
            setattr(self, name, (None if value is None else value == 1) if isinstance(default, bool) else value)
        self.content = content
        self.has_content = row[-1] == 1
        self.tool_calls = tool_calls
        self.call_ids = [call["id"] for call in tool_calls] if tool_calls else []  # what Message.call_ids holds
        self.tool_call_tokens = tool_call_tokens


def as_text(field: str) -> Cast:
    """A JSON column as its text, so the database adapter and Django's converters leave it alone and it
    is decoded once, here, only when needed."""
    return Cast(field, TextField())


def _json_values(text: str) -> list:
    """Stored JSON columns decoded by orjson, a quarter faster than the standard library here. They hold
    strings, lists, objects and token counts (validation made them so: text and image parts, a call's
    arguments as a string), where orjson and the standard library agree (orjson would read an integer
    past 64 bits as a float). What orjson refuses (an escaped lone surrogate, which SQLite can hold)
    goes to the standard library."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


# The formats whose renderers send a string content unchanged, so that it may stay StoredText
# (sessions/context/provider_input.py: to_ctxweb, to_openai).
TEXT_AS_STORED_FORMATS = ("ctxweb", "openai")


def stored_messages(session: Session, after_seq: int, as_of: int | None = None, *,
                    text_as_stored: bool = False) -> list[StoredMessage]:
    """The visible messages after `after_seq` (up to `as_of`) as the model input sends them; with
    `text_as_stored`, on SQLite, each string content (but the empty one) as StoredText."""
    vendor, rows = stored_message_rows(session, after_seq, as_of, text_as_stored)
    # Each JSON column decoded in one parse of an array of its values: per row, json.loads' own overhead
    # was half of the decoding. A content read as its own text is not decoded.
    decoded = iter(_json_values("[" + ",".join("null" if row[3] is None else row[3] for row in rows if not row[2]) + "]"))
    if text_as_stored and vendor == "sqlite":  # row[2]: a string's JSON text (CONTENT_AS_STORED_SQL)
        contents = [StoredText(row[3]) if row[2] else next(decoded) for row in rows]
    else:  # row[2]: a string's own text (PostgreSQL)
        contents = [row[3] if row[2] else next(decoded) for row in rows]
    tool_calls, call_tokens = (
        _json_values("[" + ",".join("[]" if row[column] is None else row[column] for row in rows) + "]")
        for column in (6, 7)
    )
    return [StoredMessage(*values) for values in zip(rows, contents, tool_calls, call_tokens, strict=True)]


def head_entries(session: Session, checkpoint: Checkpoint | None, instructions: str | None = None) -> list[Entry]:
    """The entries before the stored messages: the instructions (the session's, or `instructions` for
    this request) and the checkpoint's summary."""
    entries = []
    if instructions is None:
        if session.instructions:
            entries.append(Entry("instructions", Role.SYSTEM, session.instructions, session.instructions_tokens))
    elif instructions:
        entries.append(Entry("instructions", Role.SYSTEM, instructions, count_message(Role.SYSTEM, instructions).total))
    if checkpoint:
        entries.append(Entry("summary", Role.USER, summary_message_text(checkpoint.summary, checkpoint.last_seq),
                             checkpoint.summary_tokens, checkpoint=checkpoint))
    return entries


def build_model_input(
    session: Session,
    *,
    as_of: int | None = None,
    instructions: str | None = None,
    extra_messages=(),
    checkpoint: Checkpoint | None | bool = False,
    text_as_stored: bool = False,
) -> ModelInput:
    """The model input of `session` now, or as it was right after message `as_of`.

    `instructions` replaces the session's for this request; `extra_messages` are the request's own
    unpersisted messages (validated NewMessage objects), appended at the end. `text_as_stored`: string
    contents may be StoredText (for a response in one of TEXT_AS_STORED_FORMATS).
    """
    check_as_of(session, as_of)
    if checkpoint is False:
        checkpoint = latest_checkpoint(session, as_of)
    after = checkpoint.last_seq if checkpoint else 0
    stored = stored_messages(session, after, as_of, text_as_stored=text_as_stored)
    items = stored + [_Unstored(new, i) for i, new in enumerate(extra_messages)]
    verdict = check_validity(items)

    entries: list = head_entries(session, checkpoint, instructions)
    awaiting = None
    keep, all_dropped, all_pending = verdict.keep, verdict.dropped, verdict.pending
    for i, item in enumerate(items):
        pending = all_pending.get(i)
        if not keep[i] and not pending:
            continue
        dropped = all_dropped.get(i)
        if not dropped and not pending and type(item) is StoredMessage:
            entries.append(item)  # a stored message sent whole is its own entry
            continue
        unstored = isinstance(item, _Unstored)
        source = item.new if unstored else item
        tool_calls = source.tool_calls
        left_out = (dropped or []) + (pending or [])
        entry = Entry(
            "request" if unstored else "message",
            source.role,
            source.content,
            kept_tokens(item, left_out) if keep[i] else 0,
            seq=item.seq,
            client_id=source.client_id,
            tool_calls=[call for call in tool_calls if call["id"] not in left_out] if left_out else tool_calls,
            tool_call_id=source.tool_call_id,
            **model_fields_of(source),
            dropped_calls=dropped or [],
            pending_calls=[call for call in tool_calls if call["id"] in pending] if pending else [],
            request_index=item.index if unstored else None,
        )
        if keep[i]:
            entries.append(entry)
        else:
            awaiting = entry
    omitted = []
    for i, omission in verdict.omitted:
        if isinstance(items[i], _Unstored):
            omission.request_index = items[i].index
        omitted.append(omission)
    return ModelInput(session, checkpoint or None, as_of, entries, omitted, awaiting)


# Part of every model-input tag: change it whenever the input or a format is rendered differently for
# the same stored state, so a tag given out by an older release never matches.
TAG_VERSION = "3"


def model_input_tag(session: Session, fmt: str, as_of: int | None, basis: str = "raw_log") -> str:
    """The ETag of the model input of `session` in `fmt` (as of `as_of`), from the session's row alone:
    the input is a function of what is recorded here, and every change to it moves one of these.
    Appends move message_count; a checkpoint moves checkpoint_count and checkpoint_last_seq; new
    instructions, compaction settings and a message's include_in_messages flag move updated_at
    (message_edits.update_message); the figures kept of the input (tokens, messages, what it leaves
    out) come along too. Nothing else can change what the model input holds: messages and checkpoints
    are never edited or deleted. A session rebuilt from recorded requests also moves request_count with
    every request recorded (its input is the request in force, of `basis` recorded_request)."""
    settings = session.compaction_settings()
    state = [
        TAG_VERSION, session.pk, session.key, fmt, as_of, basis, session.request_count,
        session.message_count, session.checkpoint_count, session.checkpoint_last_seq,
        session.updated_at.isoformat(),
        session.instructions_tokens, hashlib.blake2b(session.instructions.encode(), digest_size=16).hexdigest(),
        session.input_tokens, session.input_messages, session.input_left_out,
        settings.max_tokens, settings.keep_recent_tokens, settings.auto, settings.summarizer,
    ]
    digest = hashlib.blake2b(json.dumps(state, separators=(",", ":")).encode(), digest_size=16).hexdigest()
    return f'"{digest}"'


_ROW_FIELDS = ("seq", "role", "tokens", "call_ids", "tool_call_tokens", "tool_call_id", "call_seq", "has_content")


class _Row:
    __slots__ = _ROW_FIELDS

    def __init__(self, row):
        (self.seq, self.role, self.tokens, call_ids, call_tokens, self.tool_call_id, self.call_seq,
         self.has_content) = row
        # The two lists arrive as JSON text and are decoded only when they hold something: most
        # messages have no tool calls, and decoding every row was most of the cost of a layout.
        self.call_ids = json_list(call_ids)
        self.tool_call_tokens = json_list(call_tokens)


def _row_values(qs):
    return qs.annotate(call_ids_json=as_text("call_ids"), call_tokens_json=as_text("tool_call_tokens")).values_list("seq", "role", "tokens", "call_ids_json", "call_tokens_json", "tool_call_id", "call_seq", "has_content")


def visible_rows(session: Session, after_seq: int, as_of: int | None = None) -> list[_Row]:
    """The figures of the visible messages after `after_seq`, without their content."""
    return [_Row(row) for row in _row_values(visible_messages(session, after_seq, as_of))]


@dataclass
class Layout(_Placed):
    """The shape of the model input (which stored messages are in it, where, with how many tokens)
    from stored figures only: no content is read and nothing is tokenized."""

    session: Session
    checkpoint: Checkpoint | None
    as_of: int | None
    rows: list  # the visible messages after the checkpoint (and up to as_of)
    kept_tokens: dict[int, int]  # seq -> tokens that message adds to the input (0 when left out)
    omitted: list[Omission]
    tokens: int

    @cached_property
    def every_position(self) -> dict[int, int]:
        left_out = self.left_out
        kept = [row.seq for row in self.rows if row.seq not in left_out]
        return {seq: self.head_count + i for i, seq in enumerate(kept, start=1)}

    @property
    def message_count(self) -> int:
        return len(self.rows) - len(self.left_out)


def layout_model_input(
    session: Session, as_of: int | None = None, checkpoint: Checkpoint | None | bool = False
) -> Layout:
    if checkpoint is False:
        check_as_of(session, as_of)
        checkpoint = latest_checkpoint(session, as_of)
    rows = visible_rows(session, checkpoint.last_seq if checkpoint else 0, as_of)
    verdict = check_validity(rows)
    kept = {
        row.seq: (kept_tokens(row, verdict.left_out_calls(i)) if verdict.keep[i] else 0)
        for i, row in enumerate(rows)
    }
    total = REPLY_PRIMING + session.instructions_tokens + sum(kept.values())
    if checkpoint:
        total += checkpoint.summary_tokens
    return Layout(session, checkpoint or None, as_of, rows, kept, [o for _, o in verdict.omitted], total)


@dataclass
class StoredLayout(ModelInputShape):
    """The model input as built now, read from the figures stored on the session (input_tokens,
    input_messages, input_left_out), which every change keeps up to date. Positions cost at most one
    COUNT; nothing else is read, so a page of a 100,000-message session lays out like a small one."""

    session: Session
    checkpoint: Checkpoint | None
    as_of = None

    @property
    def tokens(self) -> int:
        return self.session.input_tokens

    @cached_property
    def omitted(self) -> list[Omission]:
        return [Omission.from_dict(o) for o in self.session.input_left_out]

    @property
    def message_count(self) -> int:
        return self.session.input_messages

    @property
    def _after(self) -> int:
        return self.checkpoint.last_seq if self.checkpoint else 0

    def in_input(self, message) -> bool:
        return (message.seq > self._after and message.include_in_messages and message.role != Role.SYSTEM
                and message.seq not in self.left_out)

    def kept_after(self, seq: int) -> int:
        """How many stored messages of the input come after `seq` (an indexed COUNT)."""
        left_out = sum(1 for s in self.left_out if s > seq)
        return visible_messages(self.session, max(seq, self._after)).count() - left_out

    def positions(self, messages) -> dict[int, int]:
        """Counted back from the end of the input."""
        if not messages:
            return {}
        kept = [m.seq for m in messages if self.in_input(m)]
        if not kept:
            return {}
        # Always one COUNT (an empty range when the window ends the log), so a page's query count does
        # not depend on where its window is.
        later = self.kept_after(messages[-1].seq)
        last = self.entry_count - later
        return {seq: last - i for i, seq in enumerate(reversed(kept))}

    def stored_tail(self, before_seq: int | None, limit: int) -> list[Message]:
        """The newest visible rows, less those left out: one bounded read from the end of the log."""
        qs = for_page(visible_messages(self.session, self._after))
        if before_seq is not None:
            qs = qs.filter(seq__lt=before_seq)
        left_out = self.left_out
        newest = [m for m in qs.order_by("-seq")[: limit + len(left_out)] if m.seq not in left_out]
        return newest[:limit][::-1]


def stored_layout(session: Session, checkpoint: Checkpoint | None | bool = False) -> StoredLayout:
    if checkpoint is False:
        checkpoint = latest_checkpoint(session)
    return StoredLayout(session, checkpoint or None)


def recent_visible_rows(session: Session, before_seq: int) -> list[_Row]:
    """The last RECENT_ROWS visible messages before `before_seq` (after the checkpoint), newest first."""
    return [_Row(row) for row in recent_visible_row_values(session, before_seq)]


def input_figures_after_append(session: Session, first_new_seq: int, new_rows: list) -> dict:
    """The session's model-input figures (input_tokens, input_messages, input_left_out) after the
    visible messages `new_rows` (stored objects, seq from `first_new_seq` on) were stored, from its
    figures before them. Returns the changed figures; the caller saves them with its own UPDATE.

    Validity verdicts before the newest assistant message are final: that message starts the last
    block whose tool calls may still be answered (or dropped once it is no longer the newest), and
    every earlier block is already closed. So only the stored rows from that message on are read and
    laid out again, once without and once with the new ones: appends stay O(batch), not O(log).
    """
    # The newest assistant message is nearly always among the last few visible rows: one read of
    # those, newest first, finds it. Only when it is further back, two plain index range reads find
    # it and the rows from it on (SQLite will not use the (session, seq) index for a bound that comes
    # from a subquery).
    recent = recent_visible_rows(session, first_new_seq)
    at = next((i for i, row in enumerate(recent) if row.role == Role.ASSISTANT), None)
    if at is not None:
        old = recent[: at + 1][::-1]
    elif len(recent) < RECENT_ROWS:
        old = []  # no assistant message since the checkpoint
    else:
        before = visible_messages(session, session.checkpoint_last_seq).filter(seq__lt=first_new_seq)
        anchor = before.filter(role=Role.ASSISTANT).order_by("-seq").values_list("seq", flat=True).first()
        old = [] if anchor is None else [_Row(row) for row in _row_values(before.filter(seq__gte=anchor))]
    rows = old + list(new_rows)
    if not rows:
        return {}

    def figures(items):
        verdict = check_validity(items)
        kept = [i for i in range(len(items)) if verdict.keep[i]]
        tokens = sum(kept_tokens(items[i], verdict.left_out_calls(i)) for i in kept)
        return tokens, len(kept), [o.as_dict() for _, o in verdict.omitted]

    old_tokens, old_count, _ = figures(old)
    new_tokens, new_count, new_left_out = figures(rows)
    start = rows[0].seq
    return {
        "input_tokens": session.input_tokens - old_tokens + new_tokens,
        "input_messages": session.input_messages - old_count + new_count,
        "input_left_out": [o for o in session.input_left_out if o["seq"] < start] + new_left_out,
    }
