"""Trace a fact: every stored message of a session that holds a string, whether each is in the model
input now (and why not), which checkpoints cover it and whether their summaries carry the string, and
the first request that no longer carried it; answered in one sentence on top.

The messages are found by the database (a bounded, case-insensitive match on the stored text and tool
calls), never by loading the log into Python."""

import re
from dataclasses import dataclass, field

from django.db.models import Q, TextField
from django.db.models.functions import Cast

from .errors import DomainError
from .explain import Explanation, explain_messages
from .facts import fact_text
from .inspection import checkpoints_of, page_layout
from .model_input import Reason
from .models import Checkpoint, Event, EventType, Message, Role, Session
from .search import highlight, terms_of

MAX_QUERY = 200
MAX_ROWS = 50


@dataclass
class Pattern:
    """A literal string, or one with `*` standing for any run of non-space characters; any case."""

    text: str
    regex: re.Pattern
    wildcard: bool

    def matches(self, text: str) -> bool:
        return bool(self.regex.search(text or ""))

    def db_filter(self) -> Q:
        if not self.wildcard:
            return Q(text__icontains=self.text) | Q(calls_text__icontains=self.text)
        return Q(text__iregex=self.regex.pattern) | Q(calls_text__iregex=self.regex.pattern)


def parse_pattern(query) -> Pattern:
    if not isinstance(query, str):
        raise DomainError("q must be a string", code="invalid_query", status=400)
    text = " ".join(query.split())
    if len(text) > MAX_QUERY:
        raise DomainError(f"q may be at most {MAX_QUERY} characters", code="invalid_query", status=400)
    if "\x00" in text:
        raise DomainError("q must not contain NUL characters", code="invalid_query", status=400)
    literal = text.replace("*", "")
    if len(literal.strip()) < 2:
        raise DomainError("q needs at least 2 characters other than *", code="invalid_query", status=400)
    wildcard = "*" in text
    pattern = r"\S*".join(re.escape(part) for part in re.sub(r"\*+", "*", text).split("*"))
    return Pattern(text, re.compile(pattern, re.IGNORECASE), wildcard)


@dataclass
class Coverage:
    """A checkpoint whose summary stands for a message, and whether that summary carries the string."""

    checkpoint: Checkpoint
    carries: bool

    @property
    def id(self) -> int:
        return self.checkpoint.pk

    @property
    def number(self) -> int:
        return self.checkpoint.number

    @property
    def last_seq(self) -> int:
        return self.checkpoint.last_seq

    @property
    def created_at_seq(self) -> int:
        return self.checkpoint.created_at_seq


@dataclass
class TraceRow:
    message: Message
    excerpt: str  # HTML, escaped, with the match in <mark>
    explanation: Explanation
    coverage: list[Coverage] = field(default_factory=list)

    @property
    def seq(self) -> int:
        return self.message.seq

    @property
    def role(self) -> str:
        return self.message.role

    @property
    def in_input(self) -> bool:
        return self.explanation.code == Reason.IN_INPUT

    @property
    def reason(self) -> str:
        return self.explanation.code

    @property
    def why(self) -> str:
        return self.explanation.sentence

    @property
    def sent(self) -> bool:
        """Whether the message can reach the model at all (not hidden, not a stored system message)."""
        return self.message.include_in_messages and self.message.role != Role.SYSTEM


@dataclass
class Trace:
    query: str
    rows: list[TraceRow]
    truncated: bool  # more messages match than are shown
    sentence: str
    lost_at: Checkpoint | None = None  # the first checkpoint after the last mention whose summary lacks it
    first_request: Event | None = None  # the first REQUEST_BUILT built on such a checkpoint
    current: Checkpoint | None = None  # the checkpoint the model input is built on now

    @property
    def lost_at_checkpoint_id(self) -> int | None:
        return self.lost_at.pk if self.lost_at else None


def _seq_list(seqs: list[int], truncated: bool) -> str:
    if truncated:
        return f"at least {len(seqs)} messages, #{seqs[0]}–#{seqs[-1]}"
    if len(seqs) == 1:
        return f"#{seqs[0]}"
    if len(seqs) <= 3:
        return ", ".join(f"#{s}" for s in seqs[:-1]) + f" and #{seqs[-1]}"
    return f"{len(seqs)} messages, #{seqs[0]}–#{seqs[-1]}"


def _excerpt(message: Message, pattern: Pattern) -> str:
    text = message.text if pattern.matches(message.text) else fact_text(message)
    query = pattern.text.replace("*", " ")
    return highlight(text, query, terms_of(query))


def trace(session: Session, query: str, limit: int = MAX_ROWS) -> Trace:
    pattern = parse_pattern(query)
    found = list(
        session.messages.annotate(calls_text=Cast("tool_calls", TextField()))
        .filter(pattern.db_filter())
        .order_by("seq")[: limit + 1]
    )
    truncated = len(found) > limit
    messages = found[:limit]
    checkpoints = checkpoints_of(session)
    layout = page_layout(session, checkpoints)
    current = layout.checkpoint
    carried = {c.pk: pattern.matches(c.summary) for c in checkpoints}
    explanations = explain_messages(messages, layout, checkpoints)
    rows = [
        TraceRow(m, _excerpt(m, pattern), explanations[m.seq],
                 [Coverage(c, carried[c.pk]) for c in checkpoints if c.last_seq >= m.seq])
        for m in messages
    ]
    result = Trace(pattern.text, rows, truncated, "", current=current)
    result.sentence = _answer(pattern.text, rows, truncated, checkpoints, carried, current, result)
    return result


def _answer(text, rows, truncated, checkpoints, carried, current, result: Trace) -> str:
    quoted = f"“{text}”"
    if not rows:
        return f"{quoted} appears in no message of this session."
    seqs = [row.message.seq for row in rows]
    head = f"{quoted} appears in {_seq_list(seqs, truncated)}"
    sent = [row for row in rows if row.sent]
    if not sent:
        return f"{head}, which never reached the model: hidden from the model input, or stored system messages."
    in_input = [row.message.seq for row in sent if row.in_input]
    if in_input:
        where = _seq_list(in_input, False)
        verb = "is" if len(in_input) == 1 else "are"
        return f"{head}; {where} {verb} in the model input now, so the model sees it."
    last = max(row.message.seq for row in sent)
    if current is None or last > current.last_seq:
        latest = next(row for row in reversed(sent))
        return f"{head}; none is in the model input now: {latest.explanation.sentence}"
    after = [c for c in checkpoints if c.last_seq >= last]
    covering = after[0]
    they = "it was" if len(sent) == 1 else "they were"
    head = f"{head}; {they} covered by checkpoint {covering.number} at #{covering.created_at_seq}"
    if carried[current.pk]:
        if current.pk == covering.pk:
            return f"{head}, whose summary carries it, so the model still sees it in the summary."
        return (f"{head}; the current summary (checkpoint {current.number}) still carries it, so the model sees it "
                f"in the summary.")
    lost_at = next(c for c in after if not carried[c.pk] and c.last_seq <= current.last_seq)
    result.lost_at = lost_at
    candidates = [c.pk for c in after if not carried[c.pk]]
    result.first_request = (
        Event.objects.filter(session_id=covering.session_id, type=EventType.REQUEST_BUILT,
                             data__checkpoint_id__in=candidates)
        .order_by("pk").only("pk", "created_at", "data").first()
    )
    if lost_at.pk == covering.pk:
        head += ", whose summary does not mention it"
    else:
        head += f", whose summary carries it, but checkpoint {lost_at.number} at #{lost_at.created_at_seq} does not"
    sentence = f"{head}, so no request after #{lost_at.created_at_seq} carried it."
    if result.first_request is not None:
        sentence = sentence[:-1] + f" (the first without it: request {result.first_request.pk})."
    return sentence
