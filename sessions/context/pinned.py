"""Pinned facts: literals a summary must never lose (an order id, an account number, a constraint the user
stated). A project and a session declare them (`pinned_facts`: `{"name", "pattern"}`, an RE2 regular
expression, or `{"name", "value"}`, a literal); every literal of a covered message that matches one must
be carried by the checkpoint that covers it.

Compaction (sessions/context/compaction.py) sets the tokens of a `Pinned:` line of every pinned literal
aside from the summarizer's budget, and appends that line with the ones the summary does not carry (the
extractive summarizer's digest, an LLM's summary, a summary supplied with the request): what a summary lost
is added back, and COMPACTION_COMPLETED records it (`pinned_added`). When the line alone does not fit the
summary's limit (summary_budget: half of what it replaces, within CTXWEB_SUMMARY_MAX_TOKENS), the run fails
with COMPACTION_FAILED saying so, rather than dropping a pinned value. A supplied summary is not held to a
limit, so it always gets its line.

A pattern is compiled by RE2: linear in the text, whatever the pattern, so a pinned fact cannot make a
compaction slow; it may not match the empty string, and its matches are read at most MAX_MATCHES times a
message."""

import functools
from dataclasses import dataclass

import re2

from sessions.context.facts import carries, fold
from sessions.errors import DomainError
from sessions.wire.tokens import count_text

MAX_FACTS = 20
MAX_NAME = 50
MAX_TEXT = 200  # of a pattern or a value
MAX_MATCHES = 50  # literals read from one text for one fact
PINNED_HEAD = "Pinned: "
PINNED_JOIN = " · "


@dataclass(frozen=True)
class PinnedFact:
    name: str
    pattern: str = ""
    value: str = ""

    def literals(self, text: str) -> list[str]:
        """The literals of `text` this fact pins: the value where it stands, or each match of the pattern."""
        if not text:
            return []
        if self.value:
            return [self.value] if self.value in text else []
        found = []
        for match in _compiled(self.pattern).finditer(text):
            if match.group(0) and match.group(0) not in found:
                found.append(match.group(0))
                if len(found) >= MAX_MATCHES:
                    break
        return found


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str):
    return re2.compile(pattern)


def clean_pinned(items) -> list[dict]:
    """`pinned_facts` as sent, checked: a list of at most MAX_FACTS `{"name", "pattern"}` or
    `{"name", "value"}`; a DomainError (`invalid_pinned_facts`) otherwise."""
    if not isinstance(items, list):
        raise DomainError("pinned_facts is a list of {\"name\", \"pattern\"} or {\"name\", \"value\"}",
                          code="invalid_pinned_facts")
    if len(items) > MAX_FACTS:
        raise DomainError(f"at most {MAX_FACTS} pinned facts", code="invalid_pinned_facts")
    cleaned, names = [], set()
    for index, item in enumerate(items):
        where = f"pinned_facts[{index}]"
        if not isinstance(item, dict) or set(item) not in ({"name", "pattern"}, {"name", "value"}):
            raise DomainError(f"{where} is {{\"name\", \"pattern\"}} or {{\"name\", \"value\"}}",
                              code="invalid_pinned_facts")
        name = item["name"]
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
            raise DomainError(f"{where}.name is 1-{MAX_NAME} characters", code="invalid_pinned_facts")
        if name.strip() in names:
            raise DomainError(f"{where}.name {name.strip()!r} is given twice", code="invalid_pinned_facts")
        names.add(name.strip())
        kind = "pattern" if "pattern" in item else "value"
        text = item[kind]
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
            raise DomainError(f"{where}.{kind} is 1-{MAX_TEXT} characters", code="invalid_pinned_facts")
        if kind == "pattern":
            try:
                compiled = _compiled(text)
            except re2.error as exc:
                raise DomainError(f"{where}.pattern is not a regular expression RE2 reads ({exc}); RE2 has no "
                                  "lookaround and no backreferences", code="invalid_pinned_facts") from None
            if compiled.fullmatch("") is not None:
                raise DomainError(f"{where}.pattern matches the empty text", code="invalid_pinned_facts")
        cleaned.append({"name": name.strip(), kind: text})
    return cleaned


def facts_of(*declared: list[dict]) -> list[PinnedFact]:
    """The pinned facts of a project's and a session's declarations (as stored: already checked)."""
    return [PinnedFact(item["name"], item.get("pattern", ""), item.get("value", ""))
            for items in declared for item in (items or ())]


def pinned_of(session) -> list[PinnedFact]:
    """A session's pinned facts: its project's, then its own."""
    return facts_of(session.project.pinned_facts, session.pinned_facts)


def pinned_literals(facts: list[PinnedFact], texts) -> list[tuple[str, str]]:
    """(name, literal) of every literal the facts pin in `texts`, each once, in the order they appear."""
    found: dict[str, str] = {}
    for text in texts:
        for fact in facts:
            for literal in fact.literals(text):
                found.setdefault(literal, fact.name)
    return [(name, literal) for literal, name in found.items()]


def missing_from(summary: str, literals: list[tuple[str, str]]) -> list[tuple[str, str]]:
    folded = fold(summary)
    return [(name, literal) for name, literal in literals if not carries(folded, literal)]


def pinned_line(literals: list[tuple[str, str]]) -> str:
    return PINNED_HEAD + PINNED_JOIN.join(literal for _, literal in literals)


def line_tokens(literals: list[tuple[str, str]]) -> int:
    """The tokens a Pinned: line of these literals adds to a summary (with its newline); 0 for none."""
    return count_text("\n" + pinned_line(literals)) if literals else 0
