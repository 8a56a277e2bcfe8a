"""Masking measured: precision and recall of sessions.access.masking on the labelled corpus
(tests/pii/corpus.jsonl), and the message texts of tests/data's real transcripts to time it on.
Used by tests/test_masking.py and tools/masking_report.py."""

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sessions.access.masking import find_personal_data

DATA = Path(__file__).resolve().parent / "data"
CORPUS = Path(__file__).resolve().parent / "pii" / "corpus.jsonl"
KINDS = ("email", "phone", "card", "iban", "secret", "ip")


def corpus() -> list[dict]:
    with CORPUS.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@dataclass
class Score:
    labelled: Counter = field(default_factory=Counter)
    recalled: Counter = field(default_factory=Counter)  # labelled spans overlapped by a found span of its kind
    found: Counter = field(default_factory=Counter)
    right: Counter = field(default_factory=Counter)  # found spans overlapping a labelled span of its kind
    missed: list = field(default_factory=list)  # (text, labelled span)
    wrong: list = field(default_factory=list)  # (text, found span)

    def recall(self, kind: str | None = None) -> float:
        labelled = self.labelled[kind] if kind else self.labelled.total()
        recalled = self.recalled[kind] if kind else self.recalled.total()
        return recalled / labelled if labelled else 1.0

    def precision(self, kind: str | None = None) -> float:
        found = self.found[kind] if kind else self.found.total()
        right = self.right[kind] if kind else self.right.total()
        return right / found if found else 1.0

    def table(self) -> str:
        rows = [f"{'kind':<8} {'labelled':>8} {'found':>6} {'precision':>9} {'recall':>7}"]
        for kind in (*KINDS, None):
            rows.append(f"{kind or 'overall':<8} {self.labelled[kind] if kind else self.labelled.total():>8} "
                        f"{self.found[kind] if kind else self.found.total():>6} {self.precision(kind):>9.3f} "
                        f"{self.recall(kind):>7.3f}")
        return "\n".join(rows)


def overlaps(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    return a_start < b_end and b_start < a_end


def score(records: list[dict]) -> Score:
    """A labelled span counts as found when a found span of the same kind overlaps it; a found span is
    right when it overlaps a labelled span of its kind."""
    result = Score()
    for record in records:
        text, spans = record["text"], record["spans"]
        found = find_personal_data(text)
        for span in spans:
            result.labelled[span["kind"]] += 1
            if any(f.kind == span["kind"] and overlaps(f.start, f.end, span["start"], span["end"]) for f in found):
                result.recalled[span["kind"]] += 1
            else:
                result.missed.append((text, span))
        for f in found:
            result.found[f.kind] += 1
            if any(f.kind == s["kind"] and overlaps(f.start, f.end, s["start"], s["end"]) for s in spans):
                result.right[f.kind] += 1
            else:
                result.wrong.append((text, f))
    return result


def _strings(value, out: list[str]):
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def tau_bench_messages() -> list[str]:
    """The texts of tau-bench's airline conversations, message by message: each content, and each tool
    call's arguments (a JSON string), in order."""
    conversations = json.loads((DATA / "transcripts/openai-chat/tau-bench-gpt-4o-airline.json").read_text())
    texts = []
    for conversation in conversations:
        for message in conversation["traj"]:
            if message.get("content"):
                texts.append(message["content"])
            for call in message.get("tool_calls") or ():
                texts.append(call["function"]["arguments"])
    return texts


def transcript_texts() -> dict[str, list[str]]:
    """Every string of every transcript and request log of tests/data (message texts, tool arguments
    and results, and the ids, timestamps and metadata around them), by file."""
    texts = {}
    for path in sorted([*DATA.glob("transcripts/*/*"), *DATA.glob("request-logs/*")]):
        if path.suffix == ".jsonl":
            values = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        else:
            values = json.loads(path.read_text())
        strings: list[str] = []
        _strings(values, strings)
        texts[str(path.relative_to(DATA))] = strings
    return texts
