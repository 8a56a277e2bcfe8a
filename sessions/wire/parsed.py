"""What every transcript parser produces: sessions of ctxweb messages, ready for the import runner.

Parsers only translate shapes. Whether a message is valid is decided by sessions.wire.validation when the
runner appends it, so the rules live in one place.
"""

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from sessions.models import Role
from sessions.wire.json_body import nested_too_deep, too_deep

KEY_CHARS = re.compile(r"[^A-Za-z0-9._:@-]+")
MAX_KEY = 200
MAX_STEM = 120
ROLES = set(Role.values)


class TranscriptError(Exception):
    """The file is not a transcript this importer understands; the message says why and where."""


@dataclass
class ImportedCheckpoint:
    """A compaction found in the source: it covers the session's first `last` messages and was made
    when `at` messages existed (counted in the imported session's message list, from 1)."""

    last: int
    summary: str
    at: int | None = None
    summarizer: str = "import"
    trigger: str = "import"
    created_at: str | None = None


@dataclass
class ImportedSession:
    key: str
    messages: list[dict] = field(default_factory=list)  # ctxweb messages, each with a stable "id"
    title: str | None = None
    metadata: dict | None = None
    instructions: str | None = None
    compaction: dict | None = None
    created_at: str | None = None
    checkpoints: list[ImportedCheckpoint] = field(default_factory=list)
    # A metadata path and value shared by a conversation's sessions across files (a parent and its
    # sub-agents, told apart by metadata.sidechain): sessions.ingest.importers.links links them both ways.
    family: tuple[str, str] | None = None


@dataclass
class StreamedConversation:
    """A conversation read as a stream: its session's fields, and its messages read as they are iterated.
    `instructions` is known once the messages have been read (OpenAI's first system message). Between the
    messages may come an ImportedCheckpoint: a compaction covering every message before it, made there."""

    key: str
    metadata: dict
    title: str | None = None
    instructions: str | None = None
    system: object = None
    messages: Iterator = field(default_factory=lambda: iter(()))
    family: tuple[str, str] | None = None  # as ImportedSession.family


@dataclass
class Parsed:
    """A whole file: its format, its sessions, and how many source entries carried no message."""

    format: str
    sessions: list[ImportedSession]
    skipped: int = 0
    # A request log: the requests it records (sessions.ingest.recorded_requests.CapturedRequest), stored by
    # record_requests, which rebuilds their sessions; `sessions` is then empty.
    requests: list | None = None
    request_lines: list[int] | None = None  # the line each request was read from, for errors
    request_metadata: dict | None = None  # conversation key -> metadata of the sessions its requests rebuild


@dataclass(frozen=True)
class Source:
    """Where a transcript comes from: names for keys and ids are derived from it, so importing the
    same file again gives the same keys and ids (and stores nothing twice)."""

    name: str  # the file name, for messages and metadata
    stem: str  # the file name without .json/.jsonl, made safe for keys and ids
    key_prefix: str = ""

    @classmethod
    def for_file(cls, name: str, key_prefix: str = "") -> "Source":
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        stem = re.sub(r"\.(jsonl|json|ndjson|traj)$", "", base, flags=re.IGNORECASE) or "transcript"
        return cls(base, shorten(safe_key(stem), MAX_STEM), KEY_CHARS.sub("-", key_prefix)[:100])

    def key(self, *suffixes) -> str:
        """A session key: the prefix, the file stem and the suffixes, within the 200 characters allowed."""
        tail = "".join(f":{s}" for s in suffixes)
        return shorten(self.key_prefix + self.stem, MAX_KEY - len(tail)) + tail

    def message_id(self, record: int, index) -> str:
        return f"{self.stem}:{record}:{index}"

    def provenance(self, fmt: str, record: int | None = None) -> dict:
        origin = {"file": self.name, "format": fmt}
        if record is not None:
            origin["record"] = record
        return origin


def safe_key(text: str) -> str:
    key = KEY_CHARS.sub("-", text).strip("-")
    return key if key not in ("", ".", "..") else "transcript"


def shorten(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, ending in a digest of the whole so cut names stay distinct. Only
    key characters are added, so a cut key is still a valid key."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    return text[: max(1, limit - 11)] + "-" + digest


def text_of(content) -> str:
    """The text of a content value in any of the shapes transcripts use (string, list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts)
    return ""


def finish_content(parts: list[dict]):
    """A message's content from its parts: one text part is stored as plain text."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        return parts[0]["text"]
    if not parts:
        return ""
    return parts


def json_line(line: bytes, number: int, first: bool):
    """One line of JSON Lines as its value; `number` names the line in an error, the `first` may start
    with a byte order mark. A line nested too deep is refused before it is parsed."""
    if nested_too_deep(line):
        raise TranscriptError(too_deep(f"line {number}"))
    try:
        return json.loads(line.decode("utf-8-sig" if first else "utf-8"))
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"line {number} is not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise TranscriptError(f"line {number} is not valid JSON: {exc.msg} (column {exc.colno})") from None


def numbered_lines(file: BinaryIO) -> Iterator[tuple[int, object]]:
    """(byte offset, value) of each line of JSON Lines that is not blank, from where the file is, one line
    in memory at a time (`json_line` at an offset reads that line again)."""
    offset = file.tell()
    for number, line in enumerate(file, start=1):
        start, offset = offset, offset + len(line)
        if line.strip():
            yield start, json_line(line, number, start == 0)


def one_line(text: str, width: int = 300) -> str:
    """A text as a session's title: its whitespace runs made one space, cut to `width` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"
