"""Salient literals: the facts a summary should not lose (order and ticket numbers, ids, hashes,
amounts and numbers with units, dates, e-mail addresses, URLs, file paths, quoted strings, capitalized
names). Found by regular expressions only, so the same text always gives the same facts, offline.

Used by the extractive summarizer (to keep them), by checkpoint creation (to store what a summary
lost, Checkpoint.lost_facts) and by the pages and the API that show it."""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

MONTHS = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
          r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
UNITS = (r"(?:%|percent|kg|g|mg|lbs?|km|cm|mm|m|mi|miles?|ms|sec(?:onds?)?|s|min(?:utes?)?|h|hours?|days?|"
         r"weeks?|months?|years?|[KMGT]i?B|bytes?|px|°[CF]|bags?|passengers?|nights?|seats?|tokens?)")
# Sentence openers and other capitalized words that do not make a name.
NOT_NAMES = {
    "The", "This", "That", "These", "Those", "It", "I", "A", "An", "If", "In", "On", "At", "To", "For", "And",
    "But", "Or", "So", "We", "You", "He", "She", "They", "My", "Your", "Our", "Yes", "No", "Please", "Thank",
    "Thanks", "Let", "Now", "Here", "There", "When", "What", "Which", "Who", "How", "Why", "Is", "Are", "Do",
    "Does", "Can", "Could", "Would", "Should", "Will", "Also", "Then", "Okay", "OK", "Sure", "Great", "Hi",
    "Hello", "Error", "None", "True", "False", "Note", "Summary", "User", "Assistant", "Tool",
}

# (kind, pattern) in order of precedence: a span taken by an earlier kind is not matched again.
PATTERNS: list[tuple[str, re.Pattern]] = [
    ("url", re.compile(r"\bhttps?://[^\s<>\"'`)\]]+")),
    ("email", re.compile(r"\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")),
    ("date", re.compile(
        r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"
        rf"|\b{MONTHS}\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?\b"
        rf"|\b\d{{1,2}} {MONTHS} \d{{4}}\b"
        r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b")),
    ("path", re.compile(r"(?<![\w/.])(?:~|\.{1,2})?/(?:[\w.-]+/)+[\w.-]*\w|\b[\w-]+(?:/[\w.-]+)+\.[A-Za-z]\w{0,5}\b")),
    ("amount", re.compile(r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?|\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|dollars|euros)\b")),
    ("uuid", re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")),
    ("hash", re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b")),
    ("identifier", re.compile(
        r"#\d{3,}\b"  # ticket and issue numbers
        r"|\b(?=[A-Z0-9_-]*\d)(?=[A-Z0-9_-]*[A-Z])[A-Z0-9][A-Z0-9_-]{2,}\b"  # W9609649, UA123, PROJ-42
        r"|\b[a-z]+(?:_[a-z]+)*_\d+\b"  # mia_li_3668
        r"|\b\d{5,}\b")),  # long numbers
    ("quantity", re.compile(rf"\b\d[\d,]*(?:\.\d+)?\s?{UNITS}(?![\w])")),
    ("quoted", re.compile(r"[\"“]([^\"“”\n]{3,80})[\"”](?!\s*:)")),
    ("name", re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+){1,3}\b")),
]
TRAILING = ".,;:!?)]}'\""
MAX_LITERAL = 120
MAX_SEQS = 20  # seqs remembered per fact


@dataclass
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


def _clean(kind: str, value: str) -> str:
    value = value.strip()
    if kind in ("url", "path", "email"):
        value = value.rstrip(TRAILING)
    return value[:MAX_LITERAL]


def _name_ok(value: str) -> bool:
    words = re.split(r"[ -]", value)
    return words[0] not in NOT_NAMES and not all(w in NOT_NAMES for w in words)


SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)$")


def _name_at(text: str, start: int, value: str) -> str:
    """A name of three or more words that opens a sentence starts with a capitalized verb or article
    ("Ask Omar Davis"): without it."""
    words = value.split(" ")
    if len(words) >= 3 and SENTENCE_START.search(text[max(0, start - 3):start]):
        return " ".join(words[1:])
    return value


def _quoted_ok(value: str) -> bool:
    """A quoted phrase of words, not the space between two quoted strings of JSON (`": 100, "`)."""
    return (len(value.split()) >= 2 and not any(c in value for c in "{}[]") and value[0] not in ":,"
            and value[-1] not in ":," and any(c.isalpha() for c in value))


def extract(text: str) -> list[Fact]:
    """The salient literals of `text`, in the order they appear, repeats included."""
    if not text:
        return []
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, Fact]] = []
    for kind, pattern in PATTERNS:
        for match in pattern.finditer(text):
            group = 1 if kind == "quoted" else 0
            start, end = match.span(group)
            if any(start < t_end and t_start < end for t_start, t_end in taken):
                continue
            value = _clean(kind, match.group(group))
            if kind == "quoted" and not _quoted_ok(value):
                continue
            if kind == "name":
                value = _name_at(text, start, value)
                if not _name_ok(value):
                    continue
            if len(value) < 3:
                continue
            taken.append(match.span())
            found.append((start, Fact(value, kind)))
    return [fact for _, fact in sorted(found, key=lambda item: item[0])]


def fact_text(message) -> str:
    """What of a message may hold facts: its text and its tool calls' names and arguments."""
    parts = [message.text or ""]
    for call in message.tool_calls or ():
        parts.append(f"{call.get('name', '')}({call.get('arguments', '')})")
    return "\n".join(part for part in parts if part)


def message_facts(message) -> list[Fact]:
    """The facts of `message`, extracted once per object: a compaction by the extractive summarizer
    tallies the messages it covers twice, for the summary and for the report of what the summary kept,
    and the extraction was a third of the compaction's time."""
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
    """Whether a summary (already folded with `fold`) carries `literal`."""
    return fold(literal) in summary_folded


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
