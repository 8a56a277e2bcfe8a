"""Trace a fact: every stored message of a session that holds a string, whether each is in the model
input now (and why not), which checkpoints cover it and whether their summaries carry the string, and
the first request that no longer carried it; answered in one sentence on top.

The messages are found by the database (a bounded, case-insensitive match on the stored text and tool
calls), never by loading the log into Python; of each, only a window around the match is read. Of a long
session, only the blocks of messages whose trigrams can hold the string are read
(sessions/store/trace_blocks.py).

What a member types costs time in proportion to the text it is matched against (issue 37). A string
is found by a substring search (instr on SQLite, strpos on PostgreSQL, in the upper-cased text as
icontains did): LIKE '%…%' tries the whole query again at every character, 0.4 s for 200 characters
over a megabyte on SQLite. A `*` is matched by RE2 in Python (the summaries) and on SQLite
(ctxweb_glob_at, registered on the connection by the trace), not by Django's REGEXP, which runs
Python's backtracking `re` (a*a*a*b took 15 s over 400 characters); on PostgreSQL by its own regular
expressions (a*a*a*a*a*a*a*a*b over a million characters: 18 ms). A query holds at most MAX_QUERY
characters and MAX_WILDCARDS stars."""

import functools
import json
import re
from bisect import bisect_left
from dataclasses import dataclass, field

import re2
from django.db import connections
from django.db.models import Case, F, Func, IntegerField, Q, TextField, Value, When
from django.db.models.functions import Cast, Coalesce, Greatest, Length, StrIndex, Substr, Upper
from django.db.models.lookups import LessThanOrEqual

from sessions.context.explain import Explanation, explain_messages, page_layout
from sessions.context.facts import carries, fact_kind, fact_text, fold
from sessions.context.model_input import Reason
from sessions.context.pinned_status import added_back, pinned_name
from sessions.db.message_sizes import FIELD_SHOWN, PAGE_DEFERRED
from sessions.errors import DomainError
from sessions.models import Event, EventType, Message, Role, Session
from sessions.store.search import SNIPPET, Snippet, snippet, terms_of
from sessions.store.trace_blocks import query_grams, scan_ranges

MAX_QUERY = 200
MAX_WILDCARDS = 8
MAX_ROWS = 50
SEQS_AT_ONCE = 4096  # well under SQLite's 32,766 parameters a statement
# Python's white space (str.isspace), which `*` does not cross, as an RE2 class.
SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
GLOB_AT = "ctxweb_glob_at"


def _re2_literal(part: str) -> str:
    return "".join(char if char.isascii() and char.isalnum() else f"\\x{{{ord(char):x}}}" for char in part)


@functools.lru_cache(maxsize=32)
def _compiled(pattern: str):
    return re2.compile(pattern)


def _glob_at(pattern: str, text) -> int:
    """ctxweb_glob_at(pattern, text) on SQLite: where (from 1) the RE2 `pattern` first matches `text`, or 0."""
    match = _compiled(pattern).search(text) if isinstance(text, str) else None
    return match.start() + 1 if match else 0


# Between two words of the string, any run of white space; in the JSON text of tool calls, a newline,
# tab or carriage return of the arguments is written \n, \t, \r.
RE2_GAP, RE2_JSON_GAP = f"[{SPACE}]+", rf"(?:[{SPACE}]|\\[nrt])+"
PG_GAP, PG_JSON_GAP = r"\s+", r"(?:\s|\\[nrt])+"


def json_escaped(part: str, vendor: str) -> str:
    """`part` as it is written inside a JSON string of the stored tool calls: SQLite keeps the JSON text
    Python wrote (non-ASCII escaped), PostgreSQL writes jsonb out with non-ASCII as it is."""
    return json.dumps(part, ensure_ascii=vendor == "sqlite")[1:-1]


@dataclass
class Pattern:
    """A literal string, or one with `*` standing for any run of non-space characters; any case. A
    space stands for any run of white space (what Trace is given is written with single spaces, a fact
    as its message wrote it)."""

    text: str
    parts: list[str]  # the literal parts between the stars

    @property
    def wildcard(self) -> bool:
        return len(self.parts) > 1

    @property
    def plain(self) -> bool:
        """Neither a star nor a space: a substring search finds it."""
        return not self.wildcard and " " not in self.text

    def re2_of(self, words=_re2_literal, gap: str = RE2_GAP) -> str:
        return "(?i)" + f"[^{SPACE}]*".join(gap.join(words(word) for word in part.split(" ")) for part in self.parts)

    def postgres_of(self, words=re.escape, gap: str = PG_GAP) -> str:
        return r"\S*".join(gap.join(words(word) for word in part.split(" ")) for part in self.parts)

    @property
    def re2_pattern(self) -> str:
        return self.re2_of()

    @property
    def python_pattern(self) -> str:
        """The string as a Python regular expression (no case given), to mark it in an excerpt: read only
        on an excerpt's few hundred characters."""
        return r"\S*".join(r"\s+".join(re.escape(word) for word in part.split(" ")) for part in self.parts)

    def matches(self, text: str) -> bool:
        return _compiled(self.re2_pattern).search(text or "") is not None

    def carried_by(self, summary: str) -> bool:
        """Whether a checkpoint's summary carries the string, by the rule of its figures
        (sessions.context.facts.carries: white space folded, any case); with `*`, the pattern matches
        the summary so folded."""
        if not self.wildcard:
            # Its longest run without white space first, in the summary merely case-folded: white space
            # is folded only in the few that hold it (the same answer; a tenth of the time).
            if max(fold(self.text).split(" "), key=len) not in (summary or "").casefold():
                return False
            return carries(fold(summary or ""), self.text)
        return self.matches(fold(summary or ""))

    def position(self, field: str, vendor: str, json_text: bool = False) -> Func:
        """Where (from 1) the string first matches `field`, found by the database; 0 where it does not.
        `json_text`: the field is JSON text (the tool calls), where the string is written escaped."""
        escaped = functools.partial(json_escaped, vendor=vendor)
        if self.plain:
            return StrIndex(Upper(field), Upper(Value(escaped(self.text) if json_text else self.text)))
        if vendor == "sqlite":
            pattern = (self.re2_of(lambda word: _re2_literal(escaped(word)), RE2_JSON_GAP) if json_text
                       else self.re2_pattern)
            return Func(Value(pattern), field, function=GLOB_AT, output_field=IntegerField())
        # PostgreSQL: the first match is the first occurrence of the text it matched (no anchors).
        pattern = (self.postgres_of(lambda word: re.escape(escaped(word)), PG_JSON_GAP) if json_text
                   else self.postgres_of())
        matched = Func(field, Value("(?i)" + pattern), function="substring", output_field=TextField())
        return Coalesce(StrIndex(field, matched), 0)

    def db_filter(self, vendor: str) -> Q:
        if not self.plain and vendor != "sqlite":
            calls = self.postgres_of(lambda word: re.escape(json_escaped(word, vendor)), PG_JSON_GAP)
            return Q(text__iregex=self.postgres_of()) | Q(calls_text__iregex=calls)
        return Q(text_at__gt=0) | Q(calls_at__gt=0)


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
        raise DomainError("Trace needs at least 2 characters other than *", code="invalid_query", status=400)
    parts = re.sub(r"\*+", "*", text).split("*")
    if len(parts) - 1 > MAX_WILDCARDS:
        raise DomainError(f"q may hold at most {MAX_WILDCARDS} wildcards (*)", code="invalid_query", status=400)
    return Pattern(text, parts)


@dataclass(frozen=True, slots=True)
class CheckpointMark:
    """What Trace keeps of a checkpoint it read: its place, and how its summary stands for the string
    (the summary itself is read, judged and let go: a million-message session has 1,481 checkpoints)."""

    pk: int
    number: int
    first_seq: int
    last_seq: int
    created_at_seq: int
    carries: bool  # its summary carries the string
    added_back: bool  # carried on the Pinned: line compaction appended (a pinned fact's value)

    @property
    def id(self) -> int:
        return self.pk


@dataclass
class Coverage:
    """A checkpoint whose summary stands for a message, and whether that summary carries the string."""

    checkpoint: CheckpointMark

    @property
    def carries(self) -> bool:
        return self.checkpoint.carries

    @property
    def added_back(self) -> bool:
        return self.checkpoint.added_back

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


@dataclass(frozen=True)
class CoverageRun:
    """Consecutive checkpoints covering a message whose summaries stand for the string alike (what the
    page shows: a message of a long session is covered by every checkpoint made after it)."""

    first: CheckpointMark  # how it stands for the string is the run's
    last: CheckpointMark
    count: int


@dataclass
class TraceRow:
    message: Message
    excerpt: Snippet  # plain text around the match, with where the match is in it
    explanation: Explanation
    covering: list[CheckpointMark] = field(default_factory=list)  # the checkpoints covering it, in order

    @property
    def coverage(self) -> list[Coverage]:
        return [Coverage(c) for c in self.covering]

    @property
    def coverage_runs(self) -> list[CoverageRun]:
        runs: list[CoverageRun] = []
        for mark in self.covering:
            if runs and (runs[-1].first.carries, runs[-1].first.added_back) == (mark.carries, mark.added_back):
                runs[-1] = CoverageRun(runs[-1].first, mark, runs[-1].count + 1)
            else:
                runs.append(CoverageRun(mark, mark, 1))
        return runs

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
    lost_at: CheckpointMark | None = None  # the first checkpoint after the last mention whose summary lacks it
    first_request: Event | None = None  # the first REQUEST_BUILT built on such a checkpoint
    current: CheckpointMark | None = None  # the checkpoint the model input is built on now
    fact_kind: str | None = None  # the kind of fact checkpoints count it as; None when they do not
    pinned: str | None = None  # the name of the pinned fact it is a value of (sessions/context/pinned_status.py)

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


def _window(field: str, at: str) -> Substr:
    """3 × SNIPPET characters of `field` from SNIPPET before where the string matched (`at`)."""
    return Substr(field, Greatest(F(at) - SNIPPET, Value(1)), 3 * SNIPPET)


def _found(session: Session, pattern: Pattern, limit: int) -> list[Message]:
    """The first `limit` messages that hold the string, with windows of their text and tool calls around
    it (the messages' own fields are not read: 50 hits in messages of a megabyte read 50 windows)."""
    scan = scan_ranges(session, query_grams(word for part in pattern.parts for word in part.split(" ")))
    connection = connections[session.messages.all().db]
    if connection.vendor == "sqlite" and not pattern.plain:
        connection.ensure_connection()
        connection.connection.create_function(GLOB_AT, 2, _glob_at, deterministic=True)
    position = functools.partial(pattern.position, vendor=connection.vendor)

    def first(qs, count):
        return list(
            qs.defer(*PAGE_DEFERRED)
            .alias(calls_text=Cast("tool_calls", TextField()))
            .annotate(text_at=position("text"), calls_at=position("calls_text", json_text=True),
                      text_chars=Length("text"), calls_chars=Length("calls_text"))
            .filter(pattern.db_filter(connection.vendor))
            .annotate(text_window=_window("text", "text_at"), calls_window=_window("calls_text", "calls_at"),
                      window_from=Greatest(F("text_at") - SNIPPET, Value(1)),
                      calls_from=Greatest(F("calls_at") - SNIPPET, Value(1)),
                      shown_calls=Case(When(LessThanOrEqual(F("calls_chars"), FIELD_SHOWN), then=F("tool_calls")),
                                       default=Value(None)))
            .order_by("seq")[:count]
        )

    if scan.ranges is None:
        return first(session.messages.all(), limit)
    # The seqs the blocks leave, named (ranges ORed in one WHERE made SQLite read the whole session
    # through its (session, seq) index), SEQS_AT_ONCE at a time until `limit` are found.
    found = []
    for seqs in scan.seqs(SEQS_AT_ONCE):
        found += first(session.messages.filter(seq__in=seqs), limit - len(found))
        if len(found) >= limit:
            break
    return found


def _excerpt(message: Message, pattern: Pattern) -> Snippet:
    query = pattern.text.replace("*", " ")
    terms = terms_of(query)
    if message.text_at or not message.calls_at:  # in the text (or found where the database did not say)
        window, start, chars = message.text_window or "", message.window_from, message.text_chars or 0
    elif message.shown_calls is not None:  # in the tool calls, short enough to show as fact_text does
        return snippet(fact_text(_Calls(message.shown_calls)), query, terms, marked=pattern.python_pattern)
    else:
        window, start, chars = message.calls_window or "", message.calls_from, message.calls_chars or 0
    return snippet(window, query, terms, more_before=start > 1, more_after=start - 1 + len(window) < chars,
                   marked=pattern.python_pattern)


def _around(message: Message, pattern: Pattern) -> str:
    """The text just around where the database found the string in `message` (its quotes, if any)."""
    if message.text_at:
        window, at, start = message.text_window or "", message.text_at, message.window_from
    else:
        window, at, start = message.calls_window or "", message.calls_at or 0, message.calls_from
    offset = max(0, at - start - 1)
    return window[offset:offset + 2 * len(pattern.text) + 4]


@dataclass
class _Calls:
    """A message's tool calls alone, for fact_text."""

    tool_calls: list
    text: str = ""


# What Trace reads of a checkpoint: not its lost facts.
CHECKPOINT_FIELDS = ("id", "number", "first_seq", "last_seq", "created_at_seq", "summary")
CHECKPOINTS_AT_ONCE = 256


def _mark(row: tuple, pattern: Pattern, pinned: str | None) -> CheckpointMark:
    """A checkpoint's CHECKPOINT_FIELDS judged: whether its summary carries the string."""
    pk, number, first, last, made_at, summary = row
    return CheckpointMark(pk, number, first, last, made_at, pattern.carried_by(summary),
                          bool(pinned) and pattern.text in added_back(summary))


def _covering(session: Session, first_seq: int | None, pattern: Pattern, pinned: str | None) -> list[CheckpointMark]:
    """The checkpoints that cover a message from `first_seq` on (the first message found), in order; with
    none found or none covering, the latest alone (the model input is laid out on it). Those before
    cover no message found: a session of a million messages has 1,481 checkpoints. Their summaries are
    read CHECKPOINTS_AT_ONCE at a time, judged, and not kept."""

    def marks(rows) -> list[CheckpointMark]:
        return [_mark(row, pattern, pinned) for row in rows]

    checkpoints = session.checkpoints.order_by("last_seq").values_list(*CHECKPOINT_FIELDS)
    if first_seq is not None:
        rows = checkpoints.filter(last_seq__gte=first_seq).iterator(chunk_size=CHECKPOINTS_AT_ONCE)
        if covering := marks(rows):
            return covering
    return marks(checkpoints.reverse()[:1])


def trace(session: Session, query: str, limit: int = MAX_ROWS) -> Trace:
    pattern = parse_pattern(query)
    found = _found(session, pattern, limit + 1)
    truncated = len(found) > limit
    messages = found[:limit]
    pinned = None if pattern.wildcard else pinned_name(session, pattern.text)
    checkpoints = _covering(session, messages[0].seq if messages else None, pattern, pinned)
    layout = page_layout(session, checkpoints)
    current = layout.checkpoint
    if current is not None:  # the model input's own checkpoint: one of those read, or (a recorded request's) read
        current = next((c for c in checkpoints if c.pk == current.pk), None) or _mark(
            tuple(getattr(current, name) for name in CHECKPOINT_FIELDS), pattern, pinned)
    explanations = explain_messages(messages, layout, checkpoints)
    last_seqs = [c.last_seq for c in checkpoints]
    rows = [TraceRow(m, _excerpt(m, pattern), explanations[m.seq], checkpoints[bisect_left(last_seqs, m.seq):])
            for m in messages]
    kind = None if pattern.wildcard else fact_kind(pattern.text, [_around(m, pattern) for m in messages])
    result = Trace(pattern.text, rows, truncated, "", current=current, fact_kind=kind, pinned=pinned)
    result.sentence = _answer(session, pattern.text, rows, truncated, checkpoints, current, result)
    return result


def _answer(session, text, rows, truncated, checkpoints, current, result: Trace) -> str:
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
    head = f"{head}; {they} covered by checkpoint {covering.number} (made after #{covering.created_at_seq})"
    if current.carries:
        if current.pk == covering.pk:
            return f"{head}, whose summary carries it, so the model still sees it in the summary."
        return (f"{head}; the current summary (checkpoint {current.number}) still carries it, so the model sees it "
                f"in the summary.")
    lost_at = next(c for c in after if not c.carries and c.last_seq <= current.last_seq)
    result.lost_at = lost_at
    result.first_request = _first_request(session, after)
    if lost_at.pk == covering.pk:
        head += ", whose summary does not mention it"
    else:
        head += f", whose summary carries it, but checkpoint {lost_at.number} (made after #{lost_at.created_at_seq}) does not"
    sentence = f"{head}, so no request after #{lost_at.created_at_seq} carried it."
    if result.first_request is not None:
        sentence = sentence[:-1] + f" (the first without it: request {result.first_request.pk})."
    return sentence


def _first_request(session: Session, after: list[CheckpointMark]) -> Event | None:
    """The first REQUEST_BUILT built on a checkpoint of `after` whose summary does not carry the string.
    Asked by runs of such checkpoints' ids (a run of 740 is one BETWEEN, not 740 parameters); an event
    in a run's range but on no such checkpoint (one since deleted) is passed over."""
    runs: list[list[int]] = []
    for previous, mark in zip([None, *after], after, strict=False):
        if not mark.carries:
            if previous is not None and not previous.carries and runs:
                runs[-1][1] = mark.pk
            else:
                runs.append([mark.pk, mark.pk])
    if not runs:
        return None
    wanted = {c.pk for c in after if not c.carries}
    within = Q()
    for low, high in runs:
        within |= Q(data__checkpoint_id__gte=low, data__checkpoint_id__lte=high)
    events = (Event.objects.filter(within, session_id=session.pk, type=EventType.REQUEST_BUILT)
              .order_by("pk").only("pk", "created_at", "data"))
    return next((e for e in events.iterator(chunk_size=100) if e.data.get("checkpoint_id") in wanted), None)
