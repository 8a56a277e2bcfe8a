"""The model input (SPEC §2): the latest checkpoint plus the raw messages after it.

Built from one indexed range query over the raw log, never the whole log. The validity rules that keep
provider requests well formed (a tool result needs its call right before it; an unanswered tool call
is dropped unless it belongs to the newest assistant message) are applied here, once, so every format
and every explanation agree on what the model sees.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from .errors import DomainError
from .models import Checkpoint, Message, Role, Session
from .tokens import REPLY_PRIMING, count_message

SUMMARY_PREFIX = "Summary of the earlier conversation, covering messages {first}–{last}:\n\n"


class Reason:
    """Where a stored message is in the model input, or why it is not."""

    IN_INPUT = "in_input"
    COVERED = "covered_by_checkpoint"
    EXCLUDED = "excluded_flag"
    INSTRUCTIONS_ROLE = "instructions_role"
    ORPHAN = "orphan_tool_result"
    DROPPED = "dropped_tool_call"
    AFTER_AS_OF = "after_as_of"


def summary_message_text(summary: str, last_seq: int) -> str:
    """The text of a checkpoint's summary as the model receives it (a user message)."""
    return SUMMARY_PREFIX.format(first=1, last=last_seq) + summary


def summary_message_tokens(summary: str, last_seq: int) -> int:
    return count_message(Role.USER, summary_message_text(summary, last_seq)).total


@dataclass
class Entry:
    """One message of the model input."""

    kind: str  # "instructions" | "summary" | "message" | "request"
    role: str
    content: object
    tokens: int
    seq: int | None = None
    client_id: str = ""
    tool_calls: list = field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""
    dropped_calls: list = field(default_factory=list)
    message: Message | None = None
    checkpoint: Checkpoint | None = None


@dataclass
class Omission:
    """Something stored (or sent with the request) that the input leaves out to stay valid."""

    reason: str
    seq: int | None = None
    tool_call_id: str = ""
    request_index: int | None = None  # for an unpersisted message of the request
    whole_message: bool = True

    def as_dict(self) -> dict:
        data = {"seq": self.seq, "reason": self.reason}
        if self.tool_call_id:
            data["tool_call_id"] = self.tool_call_id
        if self.request_index is not None:
            data["request_index"] = self.request_index
        data["whole_message"] = self.whole_message
        return data


@dataclass
class ModelInput:
    session: Session
    checkpoint: Checkpoint | None
    as_of: int | None
    entries: list[Entry]
    omitted: list[Omission]

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

    def omission_for(self) -> dict[int, list[Omission]]:
        by_seq = defaultdict(list)
        for omission in self.omitted:
            if omission.seq is not None:
                by_seq[omission.seq].append(omission)
        return by_seq

    def positions(self) -> dict[int, int]:
        return {entry.seq: i for i, entry in enumerate(self.entries, start=1) if entry.seq is not None}

    @property
    def dropped(self) -> dict[int, list[str]]:
        return {e.seq: e.dropped_calls for e in self.entries if e.seq is not None and e.dropped_calls}

    @property
    def entry_count(self) -> int:
        return len(self.entries)


# --- validity ------------------------------------------------------------------------------------


@dataclass
class _Verdict:
    keep: list[bool]
    dropped: dict[int, list[str]]  # item index -> call ids left out
    omitted: list[tuple[int, Omission]]


def check_validity(items) -> _Verdict:
    """Apply the provider validity rules to items in input order.

    Each item has role, seq (None when not stored), call_ids, tool_call_tokens, tool_call_id,
    call_seq (the assistant seq a stored result answers, None when unknown) and has_content.
    """
    n = len(items)
    keep = [True] * n
    omitted: list[tuple[int, Omission]] = []
    answered: dict[int, set] = defaultdict(set)
    open_call = None  # the assistant item whose results may still follow
    for i, item in enumerate(items):
        if item.role == Role.ASSISTANT:
            open_call = i if item.call_ids else None
        elif item.role == Role.TOOL:
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

    newest = next((i for i in range(n - 1, -1, -1) if items[i].role == Role.ASSISTANT), None)
    pending_allowed = newest is not None and all(items[j].role == Role.TOOL for j in range(newest + 1, n))
    dropped: dict[int, list[str]] = {}
    for i, item in enumerate(items):
        if item.role != Role.ASSISTANT or not item.call_ids:
            continue
        if i == newest and pending_allowed:
            continue
        missing = [cid for cid in item.call_ids if cid not in answered[i]]
        if not missing:
            continue
        dropped[i] = missing
        if len(missing) == len(item.call_ids) and not item.has_content:
            keep[i] = False
            omitted.append((i, Omission(Reason.DROPPED, item.seq, ", ".join(missing))))
        else:
            for cid in missing:
                omitted.append((i, Omission(Reason.DROPPED, item.seq, cid, whole_message=False)))
    omitted.sort(key=lambda pair: pair[0])
    return _Verdict(keep, dropped, omitted)


def _kept_tokens(item, dropped_ids) -> int:
    if not dropped_ids:
        return item.tokens
    removed = sum(t for cid, t in zip(item.call_ids, item.tool_call_tokens, strict=False) if cid in dropped_ids)
    return item.tokens - removed


# --- building ------------------------------------------------------------------------------------


def latest_checkpoint(session: Session, as_of: int | None = None) -> Checkpoint | None:
    checkpoints = session.checkpoints.all()
    if as_of is not None:
        checkpoints = checkpoints.filter(created_at_seq__lte=as_of)
    return checkpoints.order_by("-last_seq").first()


def check_as_of(session: Session, as_of: int | None) -> None:
    if as_of is None:
        return
    if isinstance(as_of, bool) or not isinstance(as_of, int) or as_of < 0 or as_of > session.message_count:
        raise DomainError(
            f"as_of must be a seq between 0 and {session.message_count}", code="invalid_as_of"
        )


def visible_messages(session: Session, after_seq: int, as_of: int | None = None):
    """Stored messages that may reach the model: after the checkpoint, included, not system.

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


def build_model_input(
    session: Session,
    *,
    as_of: int | None = None,
    instructions: str | None = None,
    extra_messages=(),
    checkpoint: Checkpoint | None | bool = False,
) -> ModelInput:
    """The model input of `session` now, or as it was right after message `as_of`.

    `instructions` replaces the session's for this request; `extra_messages` are the request's own
    unpersisted messages (validated NewMessage objects), appended at the end.
    """
    check_as_of(session, as_of)
    if checkpoint is False:
        checkpoint = latest_checkpoint(session, as_of)
    after = checkpoint.last_seq if checkpoint else 0
    stored = list(visible_messages(session, after, as_of).defer("text", "attributes", "digest"))
    items = stored + [_Unstored(new, i) for i, new in enumerate(extra_messages)]
    verdict = check_validity(items)

    entries: list[Entry] = []
    if instructions is None:
        if session.instructions:
            entries.append(Entry("instructions", Role.SYSTEM, session.instructions, session.instructions_tokens))
    elif instructions:
        entries.append(Entry("instructions", Role.SYSTEM, instructions, count_message(Role.SYSTEM, instructions).total))
    if checkpoint:
        entries.append(
            Entry(
                "summary",
                Role.USER,
                summary_message_text(checkpoint.summary, checkpoint.last_seq),
                checkpoint.summary_tokens,
                checkpoint=checkpoint,
            )
        )
    for i, item in enumerate(items):
        if not verdict.keep[i]:
            continue
        dropped = verdict.dropped.get(i, [])
        source = item.new if isinstance(item, _Unstored) else item
        calls = [call for call in source.tool_calls if call["id"] not in dropped]
        entries.append(
            Entry(
                "request" if isinstance(item, _Unstored) else "message",
                source.role,
                source.content,
                _kept_tokens(item, dropped),
                seq=item.seq,
                client_id=source.client_id,
                tool_calls=calls,
                tool_call_id=source.tool_call_id,
                name=source.name,
                dropped_calls=dropped,
                message=None if isinstance(item, _Unstored) else item,
            )
        )
    omitted = []
    for i, omission in verdict.omitted:
        if isinstance(items[i], _Unstored):
            omission.request_index = items[i].index
        omitted.append(omission)
    return ModelInput(session, checkpoint or None, as_of, entries, omitted)


class _Row:
    __slots__ = ("seq", "role", "tokens", "call_ids", "tool_call_tokens", "tool_call_id", "call_seq", "has_content")

    def __init__(self, row):
        (self.seq, self.role, self.tokens, self.call_ids, self.tool_call_tokens,
         self.tool_call_id, self.call_seq, self.has_content) = row


def visible_rows(session: Session, after_seq: int, as_of: int | None = None) -> list[_Row]:
    """The figures of the visible messages after `after_seq`, without their content."""
    rows = visible_messages(session, after_seq, as_of).values_list(*_Row.__slots__)
    return [_Row(row) for row in rows]


@dataclass
class Layout:
    """The shape of the model input (which stored messages are in it, where, with how many tokens)
    from stored figures only: no content is read and nothing is tokenized."""

    session: Session
    checkpoint: Checkpoint | None
    as_of: int | None
    rows: list  # the visible messages after the checkpoint (and up to as_of)
    kept_tokens: dict[int, int]  # seq -> tokens that message adds to the input (0 when left out)
    dropped: dict[int, list[str]]  # seq -> tool call ids left out of that message
    omitted: list[Omission]
    tokens: int

    @property
    def head_count(self) -> int:
        """Entries before the stored messages: the instructions and the summary."""
        return int(bool(self.session.instructions_tokens)) + int(self.checkpoint is not None)

    @property
    def _left_out(self) -> set[int]:
        return {o.seq for o in self.omitted if o.whole_message}

    def positions(self) -> dict[int, int]:
        """seq -> 1-based position in the model input, for the stored messages in it."""
        start = self.head_count
        left_out = self._left_out
        kept = [row.seq for row in self.rows if row.seq not in left_out]
        return {seq: start + i for i, seq in enumerate(kept, start=1)}

    @property
    def entry_count(self) -> int:
        return self.head_count + len(self.rows) - len(self._left_out)

    def omission_for(self) -> dict[int, list[Omission]]:
        by_seq = defaultdict(list)
        for omission in self.omitted:
            by_seq[omission.seq].append(omission)
        return by_seq


def layout_model_input(
    session: Session, as_of: int | None = None, checkpoint: Checkpoint | None | bool = False
) -> Layout:
    if checkpoint is False:
        check_as_of(session, as_of)
        checkpoint = latest_checkpoint(session, as_of)
    rows = visible_rows(session, checkpoint.last_seq if checkpoint else 0, as_of)
    verdict = check_validity(rows)
    kept = {
        row.seq: (_kept_tokens(row, verdict.dropped.get(i)) if verdict.keep[i] else 0)
        for i, row in enumerate(rows)
    }
    total = REPLY_PRIMING + session.instructions_tokens + sum(kept.values())
    if checkpoint:
        total += checkpoint.summary_tokens
    dropped = {rows[i].seq: ids for i, ids in verdict.dropped.items()}
    return Layout(session, checkpoint or None, as_of, rows, kept, dropped, [o for _, o in verdict.omitted], total)


measure_model_input = layout_model_input


def refresh_input_tokens(session: Session, checkpoint: Checkpoint | None | bool = False) -> int:
    """Recompute the session's stored model-input size; call inside the transaction that changed it."""
    tokens = layout_model_input(session, checkpoint=checkpoint).tokens
    if session.input_tokens != tokens:
        session.input_tokens = tokens
        Session.objects.filter(pk=session.pk).update(input_tokens=tokens)
    return tokens


def input_tokens_after_append(session: Session, first_new_seq: int) -> int:
    """The session's model-input size after messages from `first_new_seq` on were stored, from its
    stored size before them, reading only the tail that new messages can affect.

    Validity verdicts before the newest assistant message are final: that message starts the last
    block whose tool calls may still be answered (or dropped once it is no longer the newest), and
    every earlier block is already closed. So only the rows from that message on are laid out again,
    once without and once with the new ones. Keeps appends O(batch), not O(log).
    """
    checkpoint = latest_checkpoint(session)
    after = checkpoint.last_seq if checkpoint else 0
    anchor = (
        visible_messages(session, after)
        .filter(role=Role.ASSISTANT, seq__lt=first_new_seq)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    start = anchor if anchor is not None else first_new_seq
    rows = visible_rows(session, start - 1)
    old = [row for row in rows if row.seq < first_new_seq]

    def kept_total(items):
        verdict = check_validity(items)
        return sum(_kept_tokens(row, verdict.dropped.get(i)) for i, row in enumerate(items) if verdict.keep[i])

    tokens = session.input_tokens - kept_total(old) + kept_total(rows)
    if session.input_tokens != tokens:
        session.input_tokens = tokens
        Session.objects.filter(pk=session.pk).update(input_tokens=tokens)
    return tokens
