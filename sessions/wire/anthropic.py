"""Anthropic Messages transcripts: `system` plus messages made of content blocks.

A user message holding `tool_result` blocks becomes one `tool` message per result, followed by a user
message with its other blocks (if any); an assistant message keeps its text, its `tool_use` blocks
become tool calls (the input as JSON text) and its `thinking` becomes reasoning. Claude Code logs use
the same blocks (sessions.ingest.importers.claude_code reuses these functions).

Only Anthropic's roles (user, assistant) and block types are read; anything else (an OpenAI system or
tool message, `tool_calls`, an `image_url` part) fails the file, so a file in another format is never
stored as garbage. Anthropic blocks ctxweb does not model (documents, server tool results) are kept in
attributes.unsupported_blocks.
"""

import json

from sessions.models import Role
from sessions.wire.parsed import ImportedSession, Source, TranscriptError, finish_content, text_of
from sessions.wire.parts import (
    DATA_URL_RE,
    InputToRender,
    arguments_object,
    image_placeholder,
    provider_image,
)
from sessions.wire.tokens import NOT_NAME_CHARACTER, provider_role

FORMAT = "anthropic"
ROLES = ("user", "assistant")
# Every content block type of the Messages API, ctxweb's or not (those are kept in attributes).
BLOCK_TYPES = {
    "text", "image", "document", "search_result", "tool_use", "tool_result", "thinking", "redacted_thinking",
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "tool_search_tool_result",
    "mcp_tool_use", "mcp_tool_result", "container_upload", "tool_reference",
}
# Fields of OpenAI Chat Completions messages: a message carrying one is not an Anthropic message.
OPENAI_FIELDS = ("tool_calls", "tool_call_id", "function_call", "reasoning_content")


def check_blocks(blocks: list) -> None:
    """Refuse content that is not made of Anthropic blocks."""
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(kind, str):
            raise TranscriptError("a content block must be an object with a type")
        if kind not in BLOCK_TYPES:
            raise TranscriptError(f"content block type {kind!r} is not an Anthropic Messages block")


def image_part(block: dict) -> dict | None:
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    if source.get("type") == "base64":
        media_type = source.get("media_type") or "image/png"
        return {"type": "image", "url": f"data:{media_type};base64,{source.get('data', '')}", "media_type": media_type}
    if source.get("type") == "url":
        return {"type": "image", "url": source.get("url")}
    return None


def content_parts(blocks, attributes: dict) -> list[dict]:
    """Text and image blocks as ctxweb parts; other blocks are kept in attributes."""
    if isinstance(blocks, str):
        return [{"type": "text", "text": blocks}] if blocks else []
    check_blocks(blocks or [])
    parts, other = [], []
    for block in blocks or ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image" and (image := image_part(block)) is not None:
            parts.append(image)
        else:
            other.append(block)
    if other:
        attributes.setdefault("unsupported_blocks", []).extend(other)
    return parts


def tool_result_message(block: dict, message_id: str | None, attributes: dict) -> dict:
    attributes = dict(attributes)
    content = block.get("content")
    if isinstance(content, list):
        content = content_parts(content, attributes)
        if not content:
            content = ""
    elif content is None:
        content = ""
    elif not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False)
    message = {"id": message_id, "role": "tool", "tool_call_id": block.get("tool_use_id"), "content": content}
    if block.get("is_error") is not None:
        message["is_error"] = block["is_error"]  # validated as a boolean with the message: 1 is not true
    if attributes:
        message["attributes"] = attributes
    return message


def user_messages(content, message_id: str | None, attributes: dict) -> list[dict]:
    """A user message: its tool results first (one tool message each), then the rest as one message."""
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = content
    else:
        raise TranscriptError("message content must be a string or a list of blocks")
    check_blocks(blocks)
    results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    rest = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "tool_result")]
    outputs = []
    for block in results:
        outputs.append(("tool", block))
    if rest or not results:
        outputs.append(("user", rest))
    messages = []
    for k, (kind, value) in enumerate(outputs):
        this_id = message_id if len(outputs) == 1 or message_id is None else f"{message_id}:{k}"
        if kind == "tool":
            messages.append(tool_result_message(value, this_id, attributes))
        else:
            own = dict(attributes)
            parts = content_parts(value, own)
            message = {"id": this_id, "role": "user", "content": finish_content(parts)}
            if own:
                message["attributes"] = own
            messages.append(message)
    return messages


class AssistantMessage:
    """An assistant message built from content blocks, possibly delivered over several entries (Claude
    Code logs one block per line)."""

    def __init__(self, message_id: str, attributes: dict):
        self.id = message_id
        self.parts: list[dict] = []
        self.reasoning: list[str] = []
        self.tool_calls: list[dict] = []
        self.attributes = dict(attributes)
        self.created_at: str | None = None

    def add(self, content) -> None:
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise TranscriptError("message content must be a string or a list of blocks")
        check_blocks(content)
        other = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use":
                if any(call["id"] == block.get("id") for call in self.tool_calls):
                    continue  # the same block logged twice
                arguments = block.get("input", {})
                self.tool_calls.append({
                    "id": block.get("id"),
                    "name": block.get("name"),
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False),
                })
            elif kind == "thinking":
                if isinstance(block.get("thinking"), str) and block["thinking"]:
                    self.reasoning.append(block["thinking"])
                if block.get("signature"):
                    self.attributes.setdefault("thinking_signatures", []).append(block["signature"])
            elif kind == "redacted_thinking":
                self.attributes.setdefault("redacted_thinking", []).append(block.get("data"))
            else:
                other.append(block)
        self.parts.extend(content_parts(other, self.attributes))

    def message(self) -> dict:
        content = finish_content(self.parts)
        message = {"id": self.id, "role": "assistant", "content": content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
            if content == "":
                message["content"] = None
        if self.reasoning:
            message["reasoning"] = "\n\n".join(self.reasoning)
        if self.attributes:
            message["attributes"] = self.attributes
        if self.created_at:
            message["created_at"] = self.created_at
        return message


def convert_message(message, message_id: str | None, where: str) -> list[dict]:
    """One Messages API message as ctxweb messages (without ids when `message_id` is None)."""
    if not isinstance(message, dict):
        raise TranscriptError(f"{where}: a message must be an object")
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise TranscriptError(f"{where}: role {role!r} is not an Anthropic Messages role; Anthropic's are user "
                              "and assistant (the system prompt is the separate `system`)")
    foreign = [name for name in OPENAI_FIELDS if name in message]
    if foreign:
        raise TranscriptError(f"{where}: `{foreign[0]}` is a field of OpenAI Chat Completions messages, "
                              "not of Anthropic Messages")
    attributes = {k: v for k, v in message.items() if k not in ("role", "content")}
    try:
        if role == "assistant":
            assistant = AssistantMessage(message_id, attributes)
            assistant.add(message.get("content", ""))
            return [assistant.message()]
        return user_messages(message.get("content", ""), message_id, attributes)
    except TranscriptError as exc:
        raise TranscriptError(f"{where}: {exc}") from None


def system_text(system) -> str | None:
    if system is None:
        return None
    if isinstance(system, str | list):
        return text_of(system)
    raise TranscriptError("system must be a string or a list of text blocks")


def to_session(conversation, source: Source, key: str, record: int | None) -> ImportedSession:
    """One conversation (a Conversation from sessions.ingest.importers.detect) as an imported session. The
    `system` prompt becomes the session's instructions and is also kept as a stored system message."""
    number = record or 0
    messages = []
    instructions = system_text(conversation.system)
    if instructions:
        messages.append({"id": source.message_id(number, "system"), "role": "system", "content": instructions})
    for index, message in enumerate(conversation.messages):
        messages += convert_message(message, source.message_id(number, index), f"record {number}, message {index}")
    metadata = {**conversation.metadata, "imported_from": source.provenance(FORMAT, record)}
    return ImportedSession(key=key, messages=messages, title=conversation.title, metadata=metadata,
                           instructions=instructions)


# --- rendering: the model input in this format --------------------------------------------------


# An Anthropic request must open with a user message.
ANTHROPIC_OPENING = "(The conversation begins with an assistant message.)"


def _anthropic_blocks(content, images: bool = True) -> list[dict]:
    """Content blocks; `images` is false where Anthropic takes none (assistant messages)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks = []
    for part in content:
        if part["type"] == "text":
            if part["text"].strip():
                blocks.append({"type": "text", "text": part["text"]})
            continue
        url = part["url"]
        match = DATA_URL_RE.match(url)
        if not images or not provider_image(url) or (match and not match.group(2)):  # no bytes: no image
            blocks.append({"type": "text", "text": image_placeholder(url)})
        elif match:
            media_type = match.group(1).lower()  # the type of the bytes themselves
            blocks.append(
                {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": match.group(2)}}
            )
        else:
            blocks.append({"type": "image", "source": {"type": "url", "url": url}})
    return blocks


class _AnthropicToolIds:
    """Anthropic takes tool ids of letters, digits, _ and - only, each tool_use id once per request;
    stored ids may be other providers' (functions.search:0) or reused. Each call of the input gets a
    valid id not used before in the request, and the results that follow it the same id."""

    def __init__(self):
        self.used: set[str] = set()
        self.open: dict[str, str] = {}  # ids of the calls whose results may follow

    def calls(self, ids: list[str]) -> list[str]:
        self.open = {}
        for call_id in ids:
            base = NOT_NAME_CHARACTER.sub("_", call_id)
            new, n = base, 1
            while new in self.used:
                n += 1
                new = f"{base}_{n}"
            self.used.add(new)
            self.open[call_id] = new
        return [self.open[call_id] for call_id in ids]

    def result(self, call_id: str) -> str:
        return self.open.get(call_id) or NOT_NAME_CHARACTER.sub("_", call_id)


def to_anthropic(model_input: InputToRender) -> dict:
    """Anthropic Messages: instructions in `system`; tool calls and results as tool_use/tool_result
    blocks; consecutive messages of one role merged, so roles alternate, opening with a user message."""
    system_parts = []
    messages: list[dict] = []
    tool_ids = _AnthropicToolIds()
    for entry in model_input.entries:
        if entry.kind == "instructions":
            system_parts.append(entry.content)
            continue
        role = provider_role(entry.role)
        if role == Role.TOOL:
            result = {"type": "tool_result", "tool_use_id": tool_ids.result(entry.tool_call_id)}
            content = _anthropic_blocks(entry.content) if isinstance(entry.content, list) else entry.content
            if content and (not isinstance(content, str) or content.strip()):  # no content: an empty result
                result["content"] = content
            if entry.is_error:
                result["is_error"] = True
            role, blocks = "user", [result]
        elif role == Role.ASSISTANT:
            blocks = _anthropic_blocks(entry.content, images=False)
            ids = tool_ids.calls([c["id"] for c in entry.tool_calls])
            blocks += [
                {"type": "tool_use", "id": new_id, "name": c["name"], "input": arguments_object(c["arguments"])}
                for c, new_id in zip(entry.tool_calls, ids, strict=True)
            ]
        else:
            role, blocks = "user", _anthropic_blocks(entry.content)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            # Validity already placed every tool result right after its call, so merging keeps the
            # results first in the user message that follows a tool_use.
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    _end_without_whitespace(messages)
    if messages and messages[0]["role"] == "assistant":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": ANTHROPIC_OPENING}]})
    result = {"messages": messages}
    system_parts = [part for part in system_parts if part.strip()]  # Anthropic refuses blank text
    if system_parts:
        result["system"] = "\n\n".join(system_parts)
    return result


def _end_without_whitespace(messages: list[dict]) -> None:
    """Anthropic refuses a final assistant message that ends in whitespace (the model would continue it:
    "Let me look that up.\n\n" before a call awaiting its result): its text loses its trailing
    whitespace; a text block left empty goes, and the message too when nothing is left of it."""
    if not messages or messages[-1]["role"] != "assistant":
        return
    content = messages[-1]["content"]
    while content and content[-1]["type"] == "text":
        text = content[-1]["text"].rstrip()
        if text:
            content[-1] = {"type": "text", "text": text}
            return
        content.pop()
    if not content:
        messages.pop()
