"""Reading a transcript file and recognising its format.

A file is JSON, or JSON Lines (one JSON value per line). Claude Code logs, Codex CLI rollouts, SWE-agent
trajectories and ctxweb exports are recognised by their entries (a Codex rollout by its lines' types with
an object `payload`, or, written before that shape, by its first line, the session meta); anything else
is a set of conversations, found in any of the containers real logs use (a message list; an object with
`messages`; records holding a message list under `messages` or `traj`; JSON Lines of any of these), and
is Anthropic Messages when its content blocks say so (tool_use, tool_result, thinking, image sources),
otherwise OpenAI Chat Completions. A list of OpenAI Responses input items (or a Responses request body,
with `input`) is recognised by its items' `type`. A request log (sessions.ingest.importers.request_log: one
request body and its response per line) is recognised by its records holding a request (`type` request,
a `response`, or `request` / `request_params`).
"""

import json
from dataclasses import dataclass, field

from sessions.ingest.importers import claude_code, codex, ctxweb_export, request_log, swe_agent
from sessions.wire import anthropic, openai, openai_responses
from sessions.wire.json_body import nested_too_deep, too_deep
from sessions.wire.parsed import Parsed, Source, TranscriptError, one_line, text_of

FORMATS = (
    "auto", "openai", "anthropic", "claude-code", "codex", "swe-agent", "ctxweb", "openai-responses", "request-log",
)
MESSAGE_LISTS = ("messages", "traj")
ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking"}


@dataclass
class Conversation:
    messages: list
    metadata: dict = field(default_factory=dict)  # the record's other fields
    system: object = None  # Anthropic's top-level system prompt
    title: str | None = None


def load(name: str, data: bytes) -> tuple[object, bool]:
    """The file's JSON value, or its list of lines' values for JSON Lines; and whether it was JSON Lines."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        raise TranscriptError("the file is empty")
    if nested_too_deep(data):
        raise TranscriptError(too_deep("the file"))
    json_error = None
    if not name.lower().endswith((".jsonl", ".ndjson")):
        try:
            return json.loads(text), False
        except json.JSONDecodeError as exc:
            json_error = TranscriptError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
    values = []
    # Lines end at "\n" only: a JSON string may hold U+2028 or U+0085 unescaped (Node's JSON.stringify
    # writes them so), which str.splitlines would take for line ends.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if json_error is not None and not values:
                raise json_error from None
            raise TranscriptError(f"line {number} is not valid JSON: {exc.msg} (column {exc.colno})") from None
    return values, True


def _is_message(value) -> bool:
    return isinstance(value, dict) and "role" in value


def _record_messages(record: dict):
    for name in MESSAGE_LISTS:
        if isinstance(record.get(name), list):
            return name
    return None


def _conversation(record: dict, list_name: str) -> Conversation:
    metadata = {k: v for k, v in record.items() if k not in (list_name, "system")}
    title = record["title"][:300] if isinstance(record.get("title"), str) else None
    return Conversation(record[list_name], metadata, record.get("system"), title)


def conversations(value, jsonl: bool) -> tuple[list[Conversation], bool]:
    """The conversations in a file, and whether the file is a list of records (one session each)."""
    if isinstance(value, dict):
        name = _record_messages(value)
        if name is None:
            raise TranscriptError("a JSON object needs a `messages` (or `traj`) list")
        return [_conversation(value, name)], False
    if not isinstance(value, list) or not value:
        raise TranscriptError("expected a message list, an object with messages, or a list of records")
    if all(_is_message(item) for item in value):
        return [Conversation(value)], False
    return [record_conversation(item, number, jsonl) for number, item in enumerate(value)], True


def record_conversation(item, number: int, jsonl: bool) -> Conversation:
    """One record of a list of records (or one line of JSON Lines) as a conversation."""
    if isinstance(item, list) and all(_is_message(m) for m in item):
        return Conversation(item)
    name = _record_messages(item) if isinstance(item, dict) else None
    if name is None:
        where = f"line {number + 1}" if jsonl else f"record {number}"
        raise TranscriptError(f"{where} is neither a message nor a record with a `messages` or `traj` list")
    return _conversation(item, name)


def _anthropic_markers(conversation: Conversation) -> bool:
    for message in conversation.messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") in ANTHROPIC_BLOCKS or (block.get("type") == "image" and "source" in block):
                return True
    return False


def _openai_markers(conversation: Conversation) -> bool:
    return any(
        isinstance(m, dict) and (m.get("role") in ("system", "tool", "developer") or m.get("tool_calls"))
        for m in conversation.messages
    )


def chat_format(found: list[Conversation]) -> str:
    if any(_anthropic_markers(c) for c in found):
        return anthropic.FORMAT
    if any(c.system is not None for c in found) and not any(_openai_markers(c) for c in found):
        return anthropic.FORMAT
    return openai.FORMAT


def detect(value, jsonl: bool) -> str:
    if ctxweb_export.looks_like(value):
        return ctxweb_export.FORMAT
    if isinstance(value, list) and claude_code.looks_like(value):
        return claude_code.FORMAT
    if codex.looks_like(value):
        return codex.FORMAT
    if request_log.looks_like(value):
        return request_log.FORMAT
    if swe_agent.looks_like(value):
        return swe_agent.FORMAT
    if openai_responses.looks_like(value):
        return openai_responses.FORMAT
    return chat_format(conversations(value, jsonl)[0])


def parse_transcript(name: str, data: bytes, fmt: str = "auto", key_prefix: str = "") -> Parsed:
    """Every session a transcript file holds, as ctxweb messages (nothing is stored here)."""
    if fmt not in FORMATS:
        raise TranscriptError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    source = Source.for_file(name, key_prefix)
    value, jsonl = load(name, data)
    if fmt == "auto":
        return _parse(value, jsonl, name, data, detect(value, jsonl), source)
    try:
        return _parse(value, jsonl, name, data, fmt, source)
    except TranscriptError as exc:
        raise TranscriptError(f"{exc}{_looks_like(value, jsonl, fmt)}") from exc


def _looks_like(value, jsonl: bool, asked: str) -> str:
    """For a file that is not a transcript of the format asked: what detection would read it as, when
    that is another format (said so the person can choose it), else nothing."""
    try:
        found = detect(value, jsonl)
    except (TranscriptError, ValueError, TypeError, KeyError, AttributeError):
        return ""
    if found == asked:
        return ""
    return f" (the file looks like {found}: import it as {found}, or let the format be detected with auto)"


def _parse(value, jsonl: bool, name: str, data: bytes, fmt: str, source: Source) -> Parsed:
    if fmt == ctxweb_export.FORMAT:
        if not isinstance(value, dict | list):
            raise TranscriptError("a ctxweb export is a JSON object (or its JSON Lines form)")
        return ctxweb_export.parse(value, source)
    if fmt == request_log.FORMAT:
        requests, lines = request_log.parse(name, data, source)
        return Parsed(fmt, [], requests=requests, request_lines=lines)
    if fmt == claude_code.FORMAT:
        if not isinstance(value, list):
            raise TranscriptError("a Claude Code log is JSON Lines: one entry per line")
        return claude_code.parse(value, source)
    if fmt == codex.FORMAT:
        return codex.parse(value, source)
    if fmt == swe_agent.FORMAT:
        return swe_agent.parse(value, source)
    if fmt == openai_responses.FORMAT:
        return openai_responses.parse(value, source)
    found, records = conversations(value, jsonl)
    sessions = [chat_session(fmt, conversation, source, number if records else None)
                for number, conversation in enumerate(found)]
    return Parsed(fmt, sessions)


def chat_session(fmt: str, conversation: Conversation, source: Source, record: int | None):
    """A conversation of a chat format (openai, anthropic) as an imported session; `record` is its number
    in a file of several (None for a file of one)."""
    module = anthropic if fmt == anthropic.FORMAT else openai
    key = source.key() if record is None else source.key(record)
    imported = module.to_session(conversation, source, key, record)
    if not imported.title:
        imported.title = _task_instruction(conversation.metadata) or _first_user_text(imported.messages)
    return imported


# A title made from a conversation's text: a line a person reads at a glance in the sessions list.
TITLE_WIDTH = 120


def _task_instruction(metadata: dict | None) -> str | None:
    """The task a benchmark run records (tau-bench: info.task.instruction), which says what the
    conversation is about better than its first line."""
    info = (metadata or {}).get("info")
    task = info.get("task") if isinstance(info, dict) else None
    instruction = task.get("instruction") if isinstance(task, dict) else None
    return one_line(instruction, TITLE_WIDTH) if isinstance(instruction, str) and instruction.strip() else None


def _first_user_text(messages: list[dict]) -> str | None:
    """A session's title when its file gives none: its first user message, on one line."""
    for message in messages:
        if message.get("role") == "user" and (text := text_of(message.get("content")).strip()):
            return one_line(text, TITLE_WIDTH)
    return None

