"""Salient literals: the facts a summary should not lose (order and ticket numbers, ids, hashes,
amounts and numbers with units, dates, e-mail addresses, URLs, file paths, quoted strings, capitalized
names, and bare numbers of four digits or with two decimals: a card's last four, a price in a tool's
JSON). Found by regular expressions only, so the same text always gives the same facts, offline.

The one extractor, and the one rule for whether a summary carries a literal (`carries`): used by the
extractive summarizer (to keep them), by checkpoint creation (to store what a summary lost,
Checkpoint.lost_facts, which the lost-facts badge and filter read), by the diff page and the API that
show it, and by Trace (sessions/context/trace.py), whose verdict on a checkpoint's summary is this one.

No text may cost more than its size (issue 37): the patterns run on RE2, whose time is linear in the
text, not on Python's backtracking `re` (which took 9 s on 16,000 characters of "1,1,1,…"); the
overlaps between kinds are found by one sweep over sorted spans; and a text is read up to
MAX_CHARS_READ characters.

RE2 has no lookaround, and its \\b, \\w, \\d and \\s are ASCII. So the patterns read the text as bytes,
one per character (its offsets are the text's): ASCII as it is, a non-ASCII letter or digit as an ASCII
word character that the pattern reading it names in no class (see VIEWS), other characters as bytes
that are neither word nor space characters (€ £ ¥ ° “ ”, which patterns name, as bytes of their own),
and \\s spelt out as Python's. RE2's \\b is then Python's Unicode \\b. A lookbehind became a consumed
character before the match, a lookahead a consumed character after it or a check in Python on each
match. The facts found are those the `re` patterns this replaced found (tests/test_facts_cost.py
compares them on every text of tests/data and on random hostile texts)."""

import heapq
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter

import re2

# Characters of a text read for facts (of a message: its text, then its tool calls, as fact_text joins
# them); the facts past them are not found, so neither the summaries' facts line nor
# Checkpoint.lost_facts has them. A text of literals only ("$1,$1,…", 33,000 amounts) takes about 0.1 s.
MAX_CHARS_READ = 100_000

MONTHS = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
          r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
UNITS = (r"(?:%|percent|kg|g|mg|lbs?|km|cm|mm|m|mi|miles?|ms|sec(?:onds?)?|s|min(?:utes?)?|h|hours?|days?|"
         r"weeks?|months?|years?|[KMGT]i?B|bytes?|px|\xb0[CF]|bags?|passengers?|nights?|seats?|tokens?)")
# Sentence openers and other capitalized words that do not make a name.
NOT_NAMES = {
    "The", "This", "That", "These", "Those", "It", "I", "A", "An", "If", "In", "On", "At", "To", "For", "And",
    "But", "Or", "So", "We", "You", "He", "She", "They", "My", "Your", "Our", "Yes", "No", "Please", "Thank",
    "Thanks", "Let", "Now", "Here", "There", "When", "What", "Which", "Who", "How", "Why", "Is", "Are", "Do",
    "Does", "Can", "Could", "Would", "Should", "Will", "Also", "Then", "Okay", "OK", "Sure", "Great", "Hi",
    "Hello", "Error", "None", "True", "False", "Note", "Summary", "User", "Assistant", "Tool",
}
TRAILING = ".,;:!?)]}'\""
MAX_LITERAL = 120
MAX_SEQS = 20  # seqs remembered per fact

# --- the text as the patterns read it ------------------------------------------------------------

SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x83"  # Python's \s; \x83 is any non-ASCII white space
_NAMED = {"€": "\x80", "“": "\x81", "”": "\x82", "£": "\xa3", "¥": "\xa5", "°": "\xb0"}
_ASCII = {**{code: code for code in range(128)}, **{ord(char): byte for char, byte in _NAMED.items()}}
OTHER_LETTER, OTHER_DIGIT = 0x85, 0x86  # a non-ASCII word character, a non-ASCII decimal digit


class _Latin1(dict):
    """str.translate's table from a character to the byte the patterns read for it."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        if char.isdecimal():
            byte = chr(OTHER_DIGIT)
        elif char.isalnum():
            byte = chr(OTHER_LETTER)
        elif char.isspace():
            byte = "\x83"
        else:
            byte = "\x84"
        self[code] = byte
        return byte


def _as(letter: bytes, digit: bytes, plain: bytes = b"", instead: bytes = b"") -> bytes:
    """A bytes.translate table: non-ASCII letters and digits read as `letter` and `digit`, and `plain` (a
    letter the patterns reading it do not name) as `instead`, so that `digit` means a digit only."""
    return bytes.maketrans(bytes([OTHER_LETTER, OTHER_DIGIT]) + plain, letter + digit + instead)


# Each view of the text is read by the patterns that name none of its stand-ins: `word` by those whose
# only digit is in [0-9a-fA-F] or in none, `number` by those that read \d as [0-9Q] (and no Q), `code`
# by IDENTIFIER ([0-9r] for \d, no small letter named) and `snake` by SNAKE_ID ([0-9R], no capital).
VIEWS = {"word": _as(b"_", b"_"), "number": _as(b"_", b"Q", b"Q", b"Z"), "code": _as(b"q", b"r", b"r", b"q"),
         "snake": _as(b"Q", b"R", b"R", b"Q")}


class _Read:
    """The text as the patterns read it: one byte per character between two newlines (so that every
    match has a character before and after it to consume), in each of the VIEWS."""

    word: bytes
    number: bytes
    code: bytes
    snake: bytes

    def __init__(self, text: str):
        if text.isascii():
            data = b"\n" + text.encode("ascii") + b"\n"
        else:
            data = b"\n" + text.translate(_Latin1(_ASCII)).encode("latin-1") + b"\n"
        for view, table in VIEWS.items():
            setattr(self, view, data.translate(table))


def _re2(pattern: str):
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    compiled = re2.compile(pattern.encode("ascii"), options)
    # RE2's own matcher, under the module's search(), which builds a generator and a match object for
    # every match: three quarters of the time on a text of many short facts.
    return compiled._regexp


# Each pattern consumes the character before the literal (the first byte read stands for the text's
# start), so that a lookbehind is a character class; it has no group, so RE2 only finds where a match
# starts and ends. Those that read the `number` view spell \d [0-9Q].
ANY = "(?s:.)"
DIGITS = "0-9Q"
D = f"[{DIGITS}]"
URL = _re2(rf"{ANY}\bhttps?://[^{SPACE}<>\"'`)\]]+")
EMAIL = _re2(rf"{ANY}\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")
DATE = _re2(
    rf"{ANY}(?:\b{D}{{4}}-{D}{{2}}-{D}{{2}}(?:[T ]{D}{{2}}:{D}{{2}}(?::{D}{{2}})?)?\b"
    rf"|\b{MONTHS}\.? {D}{{1,2}}(?:st|nd|rd|th)?(?:,? {D}{{4}})?\b"
    rf"|\b{D}{{1,2}} {MONTHS} {D}{{4}}\b"
    rf"|\b{D}{{1,2}}/{D}{{1,2}}/{D}{{2,4}}\b)")
# `~/x/y`, `./x/`, `/srv/app/config.yaml` (not after a word character, `/` or `.`), or `sessions/models.py`.
PATH = _re2(rf"[^\w/.](?:~|\.{{1,2}})?/(?:[\w.-]+/)+[\w.-]*\w|{ANY}\b[\w-]+(?:/[\w.-]+)+\.[A-Za-z]\w{{0,5}}\b")
AMOUNT = _re2(rf"{ANY}(?:[$\x80\xa3\xa5][{SPACE}]?{D}[{DIGITS},]*(?:\.{D}+)?"
              rf"|\b{D}[{DIGITS},]*(?:\.{D}+)?[{SPACE}]?(?:USD|EUR|GBP|dollars|euros)\b)")
UUID = _re2(rf"{ANY}\b[0-9a-fA-F]{{8}}-[0-9a-fA-F]{{4}}-[0-9a-fA-F]{{4}}-[0-9a-fA-F]{{4}}-[0-9a-fA-F]{{12}}\b")
# Seven to 64 hex digits, a word of its own, with a letter and a digit among them (checked in Python).
HASH = _re2(rf"{ANY}\b[0-9a-f]{{7,64}}\b")
# Ticket numbers (#48213); codes of capitals and digits (W9609649, UA123, PROJ-42) whose run of
# [A-Z0-9_-] holds a capital and a digit (checked in Python); long numbers. On the `code` view.
IDENTIFIER = _re2(rf"{ANY}(?:#[0-9r]{{3,}}\b|\b[A-Z0-9][A-Z0-9_-]{{2,}}\b|\b[0-9r]{{5,}}\b)")
LONG_NUMBER = _re2(rf"{ANY}\b[0-9r]{{5,}}\b")
# Ids like mia_li_3668, on the `snake` view: one word with a small letter, which no other identifier
# has, so their matches and IDENTIFIER's never overlap and merged are those of one alternation.
SNAKE_ID = _re2(rf"{ANY}\b[a-z]+(?:_[a-z]+)*_[0-9R]+\b")
# A number and its unit, and then a character that is not a word character (consumed).
QUANTITY = _re2(rf"{ANY}\b{D}[{DIGITS},]*(?:\.{D}+)?[{SPACE}]?{UNITS}\W")
# Three to 80 characters between quotes; not a JSON key (a colon after it: checked in Python).
QUOTED = _re2(rf"{ANY}[\"\x81][^\"\x81\x82\n]{{3,80}}[\"\x82]")
NAME = _re2(rf"{ANY}\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+){{1,3}}\b")
# A bare number of four digits, or with two decimals (a price without its currency); not part of a
# longer dotted number (checked in Python). Last in precedence: what another kind took stays its own.
NUMBER = _re2(rf"{ANY}\b(?:{D}[{DIGITS},]*\.{D}{{2}}|{D}{{4}})\b")
DOTTED_AFTER = re.compile(r"\.\d")
DOTTED_BEFORE = re.compile(r"\d\.$")

CODE_RUN = re.compile(rb"[A-Z0-9_-]*")
DIGITS_RUN = re.compile(rb"[0-9r]*")
DIGIT = re.compile(rb"[0-9]")
CAPITAL = re.compile(rb"[A-Z]")
HEX_LETTER = re.compile(rb"[a-f]")
COLON_AFTER = re.compile(r"\s*:")
UNANCHORED = re2._Anchor.UNANCHORED

Span = tuple[int, int, int, int]  # (start, end) of the match, (start, end) of the literal


def _first(pattern, data: bytes, pos: int, endpos: int | None = None) -> tuple[int, int] | None:
    """Where, in `data`, the first match of `pattern` from `pos` starts and ends."""
    start, end = pattern.Match(UNANCHORED, data, pos, len(data) if endpos is None else endpos)[0]
    return None if start < 0 else (start, end)


def _spans(pattern, data: bytes, pos: int = 0, endpos: int | None = None,
           suffix: int = 0) -> Iterator[tuple[int, int]]:
    """Where `pattern` matches in `data` from `pos`, one match after another as re.finditer gives them,
    as spans of the text: a match's first byte is the character before it (its position in `data` is
    the text's position of the match, since what is read starts with a newline), and `suffix`
    characters after it are consumed too. The next match may consume the last character of this one."""
    while (match := _first(pattern, data, pos, endpos)) is not None:
        pos = match[1] - 1 - suffix
        yield match[0], pos


def _plain(pattern, view: str = "word", suffix: int = 0):
    """The matches of a pattern with nothing to check."""

    def matches(text: str, read: _Read) -> Iterator[Span]:
        for start, end in _spans(pattern, getattr(read, view), suffix=suffix):
            yield start, end, start, end

    return matches


def _hashes(text: str, read: _Read) -> Iterator[Span]:
    data = read.word
    for start, end in _spans(HASH, data):
        word = data[start + 1:end + 1]
        # A word of hex digits only: no other match starts inside it, so a refused one is skipped whole.
        if HEX_LETTER.search(word) and DIGIT.search(word):
            yield start, end, start, end


def _codes(text: str, read: _Read) -> Iterator[Span]:
    data = read.code
    pos = 0
    while (match := _first(IDENTIFIER, data, pos)) is not None:
        start = match[0]
        pos = end = match[1] - 1
        if data[start + 1] in b"#r":  # a ticket, or a long number of non-ASCII digits
            yield start, end, start, end
            continue
        # A code (or a long number: where one matches, so does a code), if the run of [A-Z0-9_-] it
        # starts holds a capital, and a digit or a non-ASCII digit just after it (as re's lookaheads).
        run_end = CODE_RUN.match(data, start + 1).end()  # in `data`
        if (CAPITAL.search(data, start + 1, run_end)
                and (DIGIT.search(data, start + 1, run_end) or data[run_end] == ord("r"))):
            yield start, end, start, end
            continue
        # Then no code starts in this run: every later start in it sees a part of it. A long number
        # may (the only other identifier with characters in the run), going on in non-ASCII digits.
        pos = start
        for number_start, pos in _spans(LONG_NUMBER, data, start, DIGITS_RUN.match(data, run_end).end()):
            yield number_start, pos, number_start, pos
        pos = max(pos, run_end - 1)


def _identifiers(text: str, read: _Read) -> Iterator[Span]:
    return heapq.merge(_codes(text, read), _plain(SNAKE_ID, "snake")(text, read))


def _quoted(text: str, read: _Read) -> Iterator[Span]:
    data = read.word
    pos = 0
    while (match := _first(QUOTED, data, pos)) is not None:
        start, end = match[0], match[1] - 1
        # The closing quote is the first quote after the opening one: a refused match has no shorter
        # one, and the next may open at its closing quote.
        if COLON_AFTER.match(text, end):
            pos = start + 1
            continue
        yield start, end, start + 1, end - 1
        pos = end


def _numbers(text: str, read: _Read) -> Iterator[Span]:
    for start, end in _spans(NUMBER, read.number):
        # 1.25.3, 2024.01.05: a version or a date, not a number.
        if not DOTTED_AFTER.match(text, end) and not DOTTED_BEFORE.search(text, max(0, start - 2), start):
            yield start, end, start, end


# (kind, matches) in order of precedence: a span taken by an earlier kind is not matched again.
KINDS = [
    ("url", _plain(URL)),
    ("email", _plain(EMAIL)),
    ("date", _plain(DATE, "number")),
    ("path", _plain(PATH)),
    ("amount", _plain(AMOUNT, "number")),
    ("uuid", _plain(UUID)),
    ("hash", _hashes),
    ("identifier", _identifiers),
    ("quantity", _plain(QUANTITY, "number", suffix=1)),
    ("quoted", _quoted),
    ("name", _plain(NAME)),
    ("number", _numbers),
]


@dataclass(slots=True)
class Fact:
    """One salient literal of a text, as written there."""

    text: str
    kind: str


@dataclass
class Tally:
    """A salient literal across messages: how often it occurs, and in which messages (the first few)."""

    text: str
    kind: str
    count: int = 0
    seqs: list[int] = field(default_factory=list)
    last_seq: int = 0

    def as_dict(self) -> dict:
        return {"text": self.text, "kind": self.kind, "count": self.count, "seqs": self.seqs}


def _name_ok(value: str) -> bool:
    """Whether capitalized words make a name: the first (up to a space or a hyphen) opens no sentence
    (is not one of NOT_NAMES), so that not all of them do either."""
    return value.partition(" ")[0].partition("-")[0] not in NOT_NAMES


SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)$")


def _name_at(text: str, start: int, value: str) -> str:
    """A name of three or more words that opens a sentence starts with a capitalized verb or article
    ("Ask Omar Davis"): without it."""
    if value.count(" ") >= 2 and SENTENCE_START.search(text[max(0, start - 3):start]):
        return value.partition(" ")[2]
    return value


def _quoted_ok(value: str) -> bool:
    """A quoted phrase of words, not the space between two quoted strings of JSON (`": 100, "`)."""
    return (len(value.split()) >= 2 and not any(c in value for c in "{}[]") and value[0] not in ":,"
            and value[-1] not in ":," and any(c.isalpha() for c in value))


def extract(text: str, limit: int | None = MAX_CHARS_READ) -> list[Fact]:
    """The salient literals of `text`, in the order they appear, repeats included: of its first `limit`
    characters (cut at the last white space among their last MAX_LITERAL, so that no literal is read
    in part), or of all of it with `limit` None. Its time is linear in the characters read."""
    if not text:
        return []
    if limit is not None and len(text) > limit:
        cut = max(text.rfind(space, limit - MAX_LITERAL, limit) for space in " \n\t")
        text = text[:cut if cut > 0 else limit]
    read = _Read(text)
    taken: list[tuple[int, int]] = []  # spans earlier kinds took, by start (they may overlap)
    found: list[tuple[int, str, str]] = []  # (start, literal, kind): ints and strings, which the GC skips
    for kind, matches in KINDS:
        spans: list[tuple[int, int]] = []
        count, index = len(taken), 0
        trailing = kind in ("url", "path", "email")
        # A kind's matches come in order and do not overlap one another: one sweep along `taken`, past
        # the spans that end before the match (they end before every later match too).
        for start, end, value_start, value_end in matches(text, read):
            while index < count and taken[index][1] <= value_start:
                index += 1
            if index < count and taken[index][0] < value_end:
                continue
            value = text[value_start:value_end].strip()
            if trailing:
                value = value.rstrip(TRAILING)
            value = value[:MAX_LITERAL]
            if kind == "quoted" and not _quoted_ok(value):
                continue
            if kind == "name":
                value = _name_at(text, value_start, value)
                if not _name_ok(value):
                    continue
            if len(value) < 3:
                continue
            spans.append((start, end))
            found.append((value_start, value, kind))
        if spans:
            taken += spans
            taken.sort()  # two sorted runs: merged in one pass
    found.sort(key=itemgetter(0))
    return [Fact(value, kind) for _, value, kind in found]


def fact_text(message) -> str:
    """What of a message may hold facts: its text and its tool calls' names and arguments."""
    parts = [message.text or ""]
    for call in message.tool_calls or ():
        parts.append(f"{call.get('name', '')}({call.get('arguments', '')})")
    return "\n".join(part for part in parts if part)


def message_facts(message) -> list[Fact]:
    """The facts of `message` (of its first MAX_CHARS_READ characters), extracted once per object: a
    compaction by the extractive summarizer tallies the messages it covers twice, for the summary and
    for the report of what the summary kept, and the extraction was a third of the compaction's time."""
    facts = getattr(message, "_facts", None)
    if facts is None:
        facts = extract(fact_text(message))
        try:
            message._facts = facts
        except AttributeError:  # an object that takes no new attribute
            pass
    return facts


def tally(messages: Iterable) -> dict[str, Tally]:
    """The facts of `messages` (stored messages, in seq order), keyed by their folded text."""
    tallies: dict[str, Tally] = {}
    for message in messages:
        for fact in message_facts(message):
            key = fold(fact.text)
            entry = tallies.get(key)
            if entry is None:
                entry = tallies[key] = Tally(fact.text, fact.kind)
            entry.count += 1
            if message.seq is not None and message.seq not in entry.seqs:
                if len(entry.seqs) < MAX_SEQS:
                    entry.seqs.append(message.seq)
                entry.last_seq = max(entry.last_seq, message.seq)
    return tallies


def ranked(tallies: Iterable[Tally]) -> list[Tally]:
    """Most repeated first; among as often repeated, the most recent first."""
    return sorted(tallies, key=lambda t: (-t.count, -t.last_seq, t.text))


def fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def carries(summary_folded: str, literal: str) -> bool:
    """Whether a summary (already folded with `fold`) carries `literal`: the one rule, for checkpoint
    figures and for Trace alike."""
    return fold(literal) in summary_folded


def fact_kind(literal: str, contexts: Iterable[str] = ()) -> str | None:
    """The kind of fact `literal` is when the extractor finds it whole (so checkpoints count it among the
    facts their summaries kept or lost), else None. A phrase is a fact of kind "quoted" where it stands
    between quotes: `contexts` are texts around where it was found."""
    folded = fold(literal)
    found = extract(literal, limit=None)
    # Quotes inside JSON text (a tool call's arguments as stored) are written \".
    contexts = [fold(text.replace('\\"', '"')) for text in contexts]
    if any(f'"{folded}"' in text or f"“{folded}”" in text for text in contexts):
        found += extract(f'"{literal}"', limit=None)
    return next((f.kind for f in found if fold(f.text) == folded), None)


@dataclass
class FactReport:
    """What a summary kept and lost of the facts of the messages it replaced."""

    kept: int
    lost: list[Tally]

    @property
    def lost_count(self) -> int:
        return len(self.lost)


MAX_STORED = 200  # lost facts stored per checkpoint; the count is always whole


def report(summary: str, messages: Iterable) -> FactReport:
    tallies = ranked(tally(messages).values())
    folded = fold(summary)
    lost = [t for t in tallies if not carries(folded, t.text)]
    return FactReport(len(tallies) - len(lost), lost)


def checkpoint_fields(facts: FactReport) -> dict:
    """The Checkpoint fields that store a FactReport."""
    return {
        "facts_kept": facts.kept,
        "facts_lost": facts.lost_count,
        "lost_facts": [t.as_dict() for t in facts.lost[:MAX_STORED]],
    }


def not_in_summary(checkpoints: list, current) -> list[dict]:
    """The facts the checkpoints of a chain lost (stored when each was made) that the `current`
    checkpoint's summary does not carry either: what the model no longer sees. No message is read."""
    if current is None:
        return []
    folded = fold(current.summary)
    seen: dict[str, dict] = {}
    for checkpoint in sorted(checkpoints, key=lambda c: c.last_seq):
        if checkpoint.last_seq > current.last_seq:
            continue
        for item in checkpoint.lost_facts or ():
            key = fold(item["text"])
            if key in seen or carries(folded, item["text"]):
                continue
            seen[key] = {**item, "checkpoint_id": checkpoint.pk, "checkpoint_number": checkpoint.number}
    return list(seen.values())
