"""Compare two conversations turn by turn: two sessions (two runs of one benchmark task, a failing
conversation beside a good one), aligned so that the same user message, the same tool call with the same
arguments and the same tool result line up, what only one of them has stands alone, and a message that
changed is marked word by word. Where they first differ is the point of divergence.

A side is a session's raw log (every stored message), one of its recorded requests (the messages the
application sent, exactly), or its model input as of a message (what the model was given by then, on the
session's basis: instructions, the latest checkpoint's summary, the messages after it). So two requests of
one session, not only consecutive ones, or the input before and after a compaction, compare the same way.

The alignment is difflib's SequenceMatcher over each message's signature (its role, its text with white
space folded, its tool calls' names and arguments): the longest common runs first, then recursively the
rest, so a run that took one more tool call still lines up everywhere else. A changed pair (a replaced
block of one message on each side) is shown on one row with its words marked; a replaced block of unequal
lengths pairs its first messages by position and leaves the rest alone. At most MAX_MESSAGES messages of
each side are read (the first ones), so a comparison costs what two session pages cost."""

import difflib
import re
from dataclasses import dataclass, field

from sessions.context.recorded_input import build_input, sent_entries
from sessions.errors import DomainError
from sessions.models import RecordedRequest, Session
from sessions.wire.parsed import text_of

MAX_MESSAGES = 2000
WORDS = re.compile(r"\s+|[^\s\w]|\w+")


@dataclass(slots=True)
class Item:
    """A message of one side as the comparison reads it: a stored message, a message a request sent, or an
    entry of a model input (its instructions and a checkpoint's summary are items too, with no seq)."""

    role: str
    text: str
    tool_calls: list
    seq: int | None = None  # the raw log's message it is; None: instructions, a summary, the application's own
    tool_call_id: str = ""
    kind: str = "message"  # "message" | "instructions" | "summary"


@dataclass
class Side:
    """One side of the comparison, with the figures its header shows: `what` it is of its session (the raw
    log, request N, the model input as of message N)."""

    session: Session
    messages: list[Item]
    truncated: bool  # more messages than MAX_MESSAGES: only the first are compared
    tokens: int
    request: RecordedRequest | None = None
    as_of: int | None = None

    @property
    def what(self) -> str:
        if self.request is not None:
            return f"request {self.request.number}"
        if self.as_of is not None:
            return f"model input as of message {self.as_of}"
        return "raw log"

    @property
    def tool_calls(self) -> int:
        return sum(len(m.tool_calls or ()) for m in self.messages)

    @property
    def metadata(self) -> dict:
        return self.session.metadata or {}


@dataclass
class Row:
    """One row of the comparison: a message of each side, or of one side only (the other None)."""

    a: Item | None
    b: Item | None
    same: bool
    a_marks: list[tuple[int, int]] = field(default_factory=list)  # changed words of a's text: [start, end)
    b_marks: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class Comparison:
    a: Side
    b: Side
    rows: list[Row]

    @property
    def diverged_at(self) -> int | None:
        """The index of the first row where the two conversations differ; None when they do not."""
        return next((i for i, row in enumerate(self.rows) if not row.same), None)

    @property
    def same_count(self) -> int:
        return sum(1 for row in self.rows if row.same)


def calls_text(message: Item) -> str:
    return "\n".join(f"{call.get('name', '')}({call.get('arguments', '')})" for call in message.tool_calls or ())


def signature(message: Item) -> tuple:
    """What makes two messages the same here: role, text (white space folded), tool calls."""
    calls = tuple((call.get("name", ""), " ".join(str(call.get("arguments", "")).split()))
                  for call in message.tool_calls or ())
    return message.role, " ".join((message.text or "").split()), calls


def shown_text(message: Item) -> str:
    """The text a row shows and marks: the message's text, then its tool calls."""
    return "\n".join(part for part in (message.text or "", calls_text(message)) if part)


def word_marks(a: str, b: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Where the words of `a` and of `b` differ: spans of each text, in characters."""
    a_words, b_words = WORDS.findall(a), WORDS.findall(b)
    a_starts, b_starts = _starts(a_words), _starts(b_words)
    a_marks, b_marks = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a_words, b_words, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if i2 > i1:
            a_marks.append((a_starts[i1], a_starts[i2]))
        if j2 > j1:
            b_marks.append((b_starts[j1], b_starts[j2]))
    return _joined(a, a_marks), _joined(b, b_marks)


def _joined(text: str, marks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Marks with nothing but unchanged punctuation between them made one (09:00 against 13:30)."""
    joined: list[tuple[int, int]] = []
    for start, end in marks:
        while start < end and text[start].isspace():  # the white space around a changed word is not marked
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start == end:
            continue
        if joined and not any(char.isspace() for char in text[joined[-1][1]:start]):
            joined[-1] = (joined[-1][0], end)
        else:
            joined.append((start, end))
    return joined


def _starts(words: list[str]) -> list[int]:
    starts, at = [], 0
    for word in words:
        starts.append(at)
        at += len(word)
    return [*starts, at]


def read_side(session: Session) -> Side:
    """The session's raw log: every stored message, in order (the first MAX_MESSAGES)."""
    messages = list(session.messages.order_by("seq")
                    .only("session_id", "seq", "role", "text", "tool_calls", "tool_call_id")[:MAX_MESSAGES + 1])
    items = [Item(m.role, m.text or "", m.tool_calls or [], m.seq, m.tool_call_id) for m in messages]
    return Side(session, items[:MAX_MESSAGES], len(items) > MAX_MESSAGES, session.raw_tokens)


def request_side(session: Session, number: int) -> Side:
    """Recorded request `number` of the session: the messages the application sent, exactly."""
    recorded = RecordedRequest.objects.filter(session=session, number=number).first()
    if recorded is None:
        raise DomainError(f"session {session.key!r} has no recorded request {number} (it has {session.request_count})",
                          code="request_not_found", status=404)
    entries = sent_entries(recorded)
    return _side_of_entries(session, entries, sum(e.tokens for e in entries), request=recorded)


def as_of_side(session: Session, as_of: int) -> Side:
    """The session's model input as of message `as_of`, on its own basis: what the model was given then."""
    model_input = build_input(session, as_of=as_of)
    return _side_of_entries(session, model_input.entries, model_input.tokens, as_of=as_of)


def _side_of_entries(session: Session, entries: list, tokens: int, **what) -> Side:
    items = [Item(e.role, text_of(e.content), list(e.tool_calls or ()), e.seq, e.tool_call_id or "", e.kind)
             for e in entries[:MAX_MESSAGES]]
    return Side(session, items, len(entries) > MAX_MESSAGES, tokens, **what)


def side_of(session: Session, request: int | None = None, as_of: int | None = None) -> Side:
    """One side: recorded request `request`, the model input as of message `as_of`, or (neither) the raw log."""
    if request is not None and as_of is not None:
        raise DomainError("a side is a recorded request or the model input as of a message, not both: "
                          "give request or as_of", code="invalid_comparison")
    if request is not None:
        return request_side(session, request)
    if as_of is not None:
        return as_of_side(session, as_of)
    return read_side(session)


def compare_sessions(a: Session, b: Session) -> Comparison:
    return compare_sides(read_side(a), read_side(b))


def compare_sides(left: Side, right: Side) -> Comparison:
    return Comparison(left, right, align(left.messages, right.messages))


def align(a: list[Item], b: list[Item]) -> list[Row]:
    rows: list[Row] = []
    matcher = difflib.SequenceMatcher(None, [signature(m) for m in a], [signature(m) for m in b], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            rows += [Row(a[i], b[j], True) for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
            continue
        paired = min(i2 - i1, j2 - j1) if op == "replace" else 0
        for k in range(paired):
            left, right = a[i1 + k], b[j1 + k]
            if left.role == right.role:
                a_marks, b_marks = word_marks(shown_text(left), shown_text(right))
                rows.append(Row(left, right, False, a_marks, b_marks))
            else:  # different kinds of message: each stands alone
                rows += [Row(left, None, False), Row(None, right, False)]
        rows += [Row(a[i], None, False) for i in range(i1 + paired, i2)]
        rows += [Row(None, b[j], False) for j in range(j1 + paired, j2)]
    return rows
