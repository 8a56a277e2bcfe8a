"""Reading a large transcript file as a stream, so memory stays bounded whatever the file's size.

JSON Lines are read line by line; a JSON document with ijson, item by item. What is held at once is one
message (a file that is one conversation: a message list, JSON Lines of messages, an object with
`messages`), or one record (a file of records, one session each). The chat formats (OpenAI Chat
Completions, Anthropic Messages) stream, and so do Claude Code logs written as JSON Lines: a first reading
keeps of each line only its place and a few ids, then each thread's session is made from its lines read
again by their offsets (sessions.ingest.importers.claude_code.StreamedLog). The others (SWE-agent trajectories,
ctxweb exports, Responses items) need the whole file to pair their entries, so `open_stream` answers None
and the runner reads them whole.

The format is recognised from the first SAMPLE entries, fewer when they pass CTXWEB_IMPORT_CHUNK_BYTES (a
file of large messages is held one chunk at a time here too), or, when they are none of a known format,
from the first Claude Code entry after them. A later entry of another format fails the file when it is read, with
the reason, like every other format mismatch.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import ijson
from django.conf import settings

from sessions.ingest.importers import claude_code
from sessions.ingest.importers.detect import (
    FORMATS,
    MESSAGE_LISTS,
    _is_message,
    chat_session,
    detect,
    record_conversation,
)
from sessions.wire import anthropic, openai
from sessions.wire.json_body import Nesting, too_deep
from sessions.wire.parsed import (
    ImportedSession,
    Source,
    StreamedConversation,
    TranscriptError,
    numbered_lines,
    text_of,
)

SAMPLE = 100
READ_SIZE = 64 * 1024  # what the depth check holds of a file at once
CHAT_FORMATS = (openai.FORMAT, anthropic.FORMAT)
STREAMED_FORMATS = (*CHAT_FORMATS, claude_code.FORMAT)


@dataclass
class StreamedFile:
    path: Path
    source: Source
    format: str
    jsonl: bool
    records: bool  # a file of records, one session each; otherwise one conversation
    list_name: str | None = None  # the object's message list, for a JSON object
    log: claude_code.StreamedLog | None = None  # a Claude Code log, once read through

    @property
    def skipped(self) -> int:
        """Entries that carry no message (of a Claude Code log, once its sessions were read)."""
        return self.log.skipped if self.log else 0

    def position(self, file: BinaryIO) -> int:
        """How far the reading is, in bytes: a Claude Code log is read thread by thread, not in order."""
        return self.log.position() if self.log else file.tell()

    def sessions(self, file: BinaryIO) -> Iterator[ImportedSession | StreamedConversation]:
        """The file's sessions, from its start: whole ImportedSessions for records, a StreamedConversation
        (read while its messages are iterated) for a file of one conversation or for each thread of a
        Claude Code log (which is read through once first)."""
        file.seek(0)
        if self.format == claude_code.FORMAT:
            if self.log is None:
                log = claude_code.StreamedLog(self.source)
                log.read(file)
                self.log = log
            yield from self.log.sessions(file)
            return
        values = _lines(file) if self.jsonl else ijson.items(file, "item", use_float=True)
        if self.records:
            for number, item in enumerate(values):
                conversation = record_conversation(item, number, self.jsonl)
                yield chat_session(self.format, conversation, self.source, number)
            return
        metadata, system, title = {}, None, None
        if self.list_name:
            metadata = _object_fields(file, (self.list_name,))
            system = metadata.pop("system", None)
            title = metadata["title"][:300] if isinstance(metadata.get("title"), str) else None
            file.seek(0)
            values = ijson.items(file, f"{self.list_name}.item", use_float=True)
        metadata["imported_from"] = self.source.provenance(self.format)
        streamed = StreamedConversation(self.source.key(), metadata, title, system=system)
        streamed.messages = self._messages(streamed, values)
        yield streamed

    def _messages(self, streamed: StreamedConversation, values) -> Iterator[dict]:
        source = self.source
        if self.format == anthropic.FORMAT:
            streamed.instructions = anthropic.system_text(streamed.system)
            if streamed.instructions:
                yield {"id": source.message_id(0, "system"), "role": "system", "content": streamed.instructions}
        for index, message in enumerate(values):
            where = f"line {index + 1}" if self.jsonl else f"record 0, message {index}"
            if self.jsonl and not _is_message(message):
                raise TranscriptError(f"{where} is not a message, though the lines before it are")
            if self.format == anthropic.FORMAT:
                yield from anthropic.convert_message(message, source.message_id(0, index), where)
                continue
            converted = openai.convert_message(message, source.message_id(0, index), where)
            if converted["role"] == "system" and streamed.instructions is None:
                streamed.instructions = text_of(converted["content"])
            yield converted


def message_bytes(value) -> int:
    """What a message (any JSON value) weighs, about its size as JSON: the UTF-8 length of its strings
    (text, tool arguments, image data), a few bytes for anything else, counted without serialising it."""
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode())
    if isinstance(value, dict):
        return sum(len(name) + message_bytes(item) for name, item in value.items())
    if isinstance(value, list | tuple):
        return sum(message_bytes(item) for item in value)
    return 8


def _first(values: Iterator) -> list:
    """The first SAMPLE values, fewer once they weigh CTXWEB_IMPORT_CHUNK_BYTES (one at least): a hundred
    one-megabyte messages are not held to recognise a format."""
    sample, weight = [], 0
    for value in values:
        sample.append(value)
        weight += message_bytes(value)
        if len(sample) >= SAMPLE or weight >= settings.CTXWEB_IMPORT_CHUNK_BYTES:
            break
    return sample


def _lines(file: BinaryIO) -> Iterator:
    for _, value in numbered_lines(file):
        yield value


def _check_nesting(file: BinaryIO) -> None:
    """The file read through once, a piece at a time, before any parser sees it: nested past the limit, it
    is refused (ijson builds, for each event, a path as long as the nesting: a 6 MB file of "[" took 16 GB)."""
    file.seek(0)
    nesting = Nesting()
    while piece := file.read(READ_SIZE):
        if nesting.over(piece):
            raise TranscriptError(too_deep("the file"))


def _is_jsonl(name: str, file: BinaryIO) -> bool:
    """JSON Lines by its name, or by holding more than one JSON value (read as a stream, so a large first
    value costs time, not memory)."""
    if name.lower().endswith((".jsonl", ".ndjson")):
        return True
    file.seek(0)
    depth, values = 0, 0
    try:
        for _, event, _ in ijson.parse(file, multiple_values=True):
            if event in ("start_map", "start_array"):
                depth += 1
            elif event in ("end_map", "end_array"):
                depth -= 1
            if depth == 0 and event != "map_key":
                values += 1
                if values > 1:
                    return True
    except ijson.JSONError:
        pass  # not JSON Lines either; reading it as JSON says what is wrong
    return False


def _first_char(file: BinaryIO) -> bytes:
    file.seek(0)
    while chunk := file.read(4096):
        stripped = chunk.lstrip(b"\xef\xbb\xbf \t\r\n")
        if stripped:
            return stripped[:1]
    return b""


def _object_fields(file: BinaryIO, skip: tuple[str, ...]) -> dict:
    """The top-level fields of a JSON object, except the lists named in `skip`, whose items are not built."""
    file.seek(0)
    fields, key, builder, depth, skipping = {}, None, None, 0, False
    for prefix, event, value in ijson.parse(file, use_float=True):
        if depth == 0 and event == "start_map" and prefix == "":
            depth = 1
            continue
        if depth == 1 and builder is None and not skipping:
            if event == "map_key":
                key = value
                continue
            if event == "end_map":
                break
            if key in skip and event == "start_array":
                skipping, depth = True, 2
                continue
            builder = ijson.ObjectBuilder()
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
        if skipping:
            skipping = depth > 1
            continue
        builder.event(event, value)
        if depth == 1:
            fields[key], builder = builder.value, None
    return fields


def _sample(file: BinaryIO, jsonl: bool, top: bytes) -> tuple[object, str | None]:
    """The first entries (_first) as a JSON value the format detection understands, and, for an object,
    the name of its message list."""
    file.seek(0)
    if jsonl:
        return _first(_lines(file)), None
    if top == b"[":
        return _first(ijson.items(file, "item", use_float=True)), None
    fields = _object_fields(file, MESSAGE_LISTS)
    for name in MESSAGE_LISTS:
        file.seek(0)
        items = _first(ijson.items(file, f"{name}.item", use_float=True))
        if items:
            return {**fields, name: items}, name
    raise TranscriptError("a JSON object needs a `messages` (or `traj`) list")


def _claude_code_later(file: BinaryIO) -> bool:
    """Whether a Claude Code entry comes after a first SAMPLE of other entries (file-history snapshots,
    queue operations), as reading the file whole would find."""
    file.seek(0)
    return any(claude_code.looks_like([entry]) for entry in _lines(file))


def open_stream(path: Path, file: BinaryIO, name: str, fmt: str = "auto", key_prefix: str = "") -> StreamedFile | None:
    """The file as a stream of sessions, or None when its format is read whole (see the module's doc)."""
    if fmt not in FORMATS:
        raise TranscriptError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt != "auto" and fmt not in STREAMED_FORMATS:
        return None
    _check_nesting(file)
    jsonl = _is_jsonl(name, file)
    if fmt == claude_code.FORMAT and not jsonl:
        return None  # a Claude Code log streams as JSON Lines only
    top = _first_char(file)
    if not jsonl and top not in (b"[", b"{"):
        raise TranscriptError("not valid JSON: expected a list or an object")
    try:
        sample, list_name = _sample(file, jsonl, top)
    except ijson.JSONError as exc:
        raise TranscriptError(f"not valid JSON: {exc}") from None
    except TranscriptError:
        if top == b"{" and not jsonl:
            return None  # an object without a message list (a SWE-agent trajectory, a Responses body)
        raise
    if not sample:
        raise TranscriptError("the file is empty")
    if fmt == "auto":
        try:
            fmt = detect(sample, jsonl)
        except TranscriptError:
            if not (jsonl and _claude_code_later(file)):
                raise
            fmt = claude_code.FORMAT
        if fmt not in STREAMED_FORMATS or (fmt == claude_code.FORMAT and not jsonl):
            return None
    records = fmt != claude_code.FORMAT and isinstance(sample, list) and not _is_message(sample[0])
    return StreamedFile(path, Source.for_file(name, key_prefix), fmt, jsonl, records, list_name)
