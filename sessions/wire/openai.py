"""OpenAI Chat Completions transcripts: a message list, an object with `messages`, or records holding
a message list under `messages` or `traj` (one session per record).

Quirks of real logs are kept rather than dropped: `content: null` beside tool calls, `reasoning_content`
(becomes reasoning), extra fields (kept in attributes). The first system message also becomes the
session's instructions, so the model input has them.

Only OpenAI's roles and content parts are read; anything else (an Anthropic block, a role no one
documents) fails the file, so a file in another format is never stored as garbage. The one other role
read is mini-swe-agent's `exit`: a record the framework writes after the run, stored with
include_in_messages false and the reason in attributes.not_sent_reason.
"""

import json

import orjson

from sessions.models import Role
from sessions.wire.ctxweb import StoredText
from sessions.wire.parsed import ImportedSession, Source, TranscriptError, text_of
from sessions.wire.parts import InputToRender, image_placeholder, provider_image
from sessions.wire.tokens import openai_name, provider_role

FORMAT = "openai"
MAPPED = {"role", "content", "tool_calls", "tool_call_id", "name"}
TEXT_PARTS = {"text", "input_text", "output_text"}
IMAGE_PARTS = {"image_url", "image"}
# Parts OpenAI accepts that ctxweb does not model: kept in attributes.unsupported_parts.
OTHER_PARTS = {"input_audio", "file", "refusal"}
ROLE_ALIASES = {"developer": "system"}
STANDARD_ROLES = {"system", "user", "assistant", "tool"}
# Records that agent frameworks write among the messages but never send to a model: role -> why.
NOT_SENT = {
    "exit": "written by mini-swe-agent after the run (its exit status and submission, or the error that "
            "ended it); never sent to the model",
}
# Roles kept as `agent` with attributes.original_role: OpenAI's deprecated `function` results.
OTHER_ROLES = {"function"}
KNOWN_ROLES = STANDARD_ROLES | set(ROLE_ALIASES) | OTHER_ROLES | set(NOT_SENT)


def _part_type(part, where: str) -> str:
    kind = part.get("type") if isinstance(part, dict) else None
    if not isinstance(kind, str):
        kind = None
    elif kind in TEXT_PARTS | OTHER_PARTS or (kind in IMAGE_PARTS and "source" not in part):
        return kind
    what = "a content part without a type" if kind is None else f"content part type {kind!r}"
    raise TranscriptError(f"{where}: {what} is not an OpenAI Chat Completions part; OpenAI's are text, "
                          f"image_url, input_audio, file and refusal")


def _parts(content: list, attributes: dict, where: str) -> list[dict]:
    parts, unsupported = [], []
    for part in content:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
            continue
        kind = _part_type(part, where)
        if kind in TEXT_PARTS and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind in IMAGE_PARTS:
            image = part.get("image_url", part) if kind == "image_url" else part
            if isinstance(image, str):
                image = {"url": image}
            if not isinstance(image, dict):
                unsupported.append(part)
                continue
            out = {"type": "image", "url": image.get("url")}
            for key in ("detail", "media_type", "width", "height"):
                if image.get(key) is not None:
                    out[key] = image[key]
            parts.append(out)
        else:
            unsupported.append(part)
    if unsupported:
        attributes["unsupported_parts"] = unsupported
    return parts


def _tool_call(call, where: str) -> dict:
    if not isinstance(call, dict):
        raise TranscriptError(f"{where}: a tool call is not an object")
    if isinstance(call.get("function"), dict):
        function = call["function"]
        name, arguments = function.get("name"), function.get("arguments", "")
    elif isinstance(call.get("custom"), dict):  # custom (free-form) tools
        name, arguments = call["custom"].get("name"), call["custom"].get("input", "")
    else:
        name, arguments = call.get("name"), call.get("arguments", "")
    if isinstance(arguments, dict | list):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": call.get("id"), "name": name, "arguments": "" if arguments is None else arguments}


def convert_message(message, message_id: str | None, where: str) -> dict:
    """One Chat Completions message as a ctxweb message (without an id when `message_id` is None)."""
    if not isinstance(message, dict):
        raise TranscriptError(f"{where}: a message must be an object")
    original_role = message.get("role")
    if not isinstance(original_role, str) or original_role not in KNOWN_ROLES:
        raise TranscriptError(
            f"{where}: role {original_role!r} is not an OpenAI Chat Completions role; OpenAI's are system, "
            f"developer, user, assistant, tool and function (and mini-swe-agent logs add exit)"
        )
    role = ROLE_ALIASES.get(original_role, original_role)
    attributes = {k: v for k, v in message.items() if k not in MAPPED}
    if role not in STANDARD_ROLES:
        role = "agent"
    if role != original_role:
        attributes["original_role"] = original_role
    out = {"id": message_id, "role": role}
    if original_role in NOT_SENT:
        out["include_in_messages"] = False
        attributes["not_sent_reason"] = NOT_SENT[original_role]

    calls = message.get("tool_calls")
    if calls and role == "assistant":
        if not isinstance(calls, list):
            raise TranscriptError(f"{where}: tool_calls must be a list")
        out["tool_calls"] = [_tool_call(call, where) for call in calls]
    elif calls:
        attributes["tool_calls"] = calls

    content = message.get("content")
    if isinstance(content, list):
        content = _parts(content, attributes, where) or ""  # a list stays a list: that is what the model got
    elif content is None:
        content = None if out.get("tool_calls") else ""
    elif not isinstance(content, str):
        raise TranscriptError(f"{where}: content must be a string, a list of parts or null")
    out["content"] = content

    reasoning = message.get("reasoning_content")
    if reasoning is None and isinstance(message.get("reasoning"), str):
        reasoning = message["reasoning"]
        attributes.pop("reasoning", None)
    if reasoning and role == "assistant" and isinstance(reasoning, str):
        out["reasoning"] = reasoning
        attributes.pop("reasoning_content", None)

    if role == "tool":
        out["tool_call_id"] = message.get("tool_call_id")
    elif message.get("tool_call_id") is not None:
        attributes["tool_call_id"] = message["tool_call_id"]
    name = message.get("name")
    if isinstance(name, str) and name:
        out["name"] = name
    elif name is not None:
        attributes["name"] = name
    if attributes:
        out["attributes"] = attributes
    return out


def convert_conversation(messages: list, source: Source, record: int) -> tuple[list[dict], str | None]:
    """The ctxweb messages of one conversation, and the instructions (its first system message)."""
    out = []
    instructions = None
    for index, message in enumerate(messages):
        where = f"record {record}, message {index}"
        converted = convert_message(message, source.message_id(record, index), where)
        if converted["role"] == "system" and instructions is None:
            instructions = text_of(converted["content"])
        out.append(converted)
    return out, instructions


def to_session(conversation, source: Source, key: str, record: int | None) -> ImportedSession:
    """One conversation (a Conversation from sessions.ingest.importers.detect) as an imported session."""
    messages, instructions = convert_conversation(conversation.messages, source, record or 0)
    metadata = {**conversation.metadata, "imported_from": source.provenance(FORMAT, record)}
    return ImportedSession(
        key=key, messages=messages, title=conversation.title, metadata=metadata, instructions=instructions
    )


# --- rendering: the model input in this format --------------------------------------------------


def _openai_content(content, role: str):
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part["type"] == "text":
            parts.append({"type": "text", "text": part["text"]})
        elif role != Role.USER or not provider_image(part["url"]):  # only user messages carry images
            parts.append({"type": "text", "text": image_placeholder(part["url"])})
        else:
            image = {"url": part["url"]}
            if part.get("detail"):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
    return parts or ""  # an empty list of parts is not content to OpenAI


def to_openai(model_input: InputToRender) -> list[dict]:
    """What the application sent (a recorded request) goes out exactly as it was sent; the rest is rendered."""
    sent = model_input.sent_messages or []
    return list(sent) + [openai_message(e) for e in model_input.entries[len(sent):]]


# The roles as plain strings, looked up once: an input can hold thousands of entries.
_ASSISTANT, _TOOL = str(Role.ASSISTANT), str(Role.TOOL)


def openai_message(message) -> dict:
    """One entry of the model input as the `openai` format sends it: `message` is anything with a
    message's role, content, tool calls, tool_call_id and MODEL_FIELDS (an Entry, a stored or a new
    message); this format carries `name` of those. A stored message sent whole is rendered so once,
    when it is stored (stored_openai_message)."""
    role, content, tool_calls = provider_role(message.role), message.content, message.tool_calls
    if type(content) is not str and type(content) is not StoredText:  # a string as stored is sent as it is
        content = _openai_content(content, role)
    if role == _ASSISTANT and tool_calls:
        rendered = {"role": role, "content": content if content else None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in tool_calls
        ]}
    else:
        rendered = {"role": role, "content": content}
    if role == _TOOL:
        rendered["tool_call_id"] = message.tool_call_id
    elif message.name:
        rendered["name"] = openai_name(message.name)
    return rendered


def stored_openai_message(message) -> str | None:
    """What Message.openai_message stores: the message as the `openai` format sends it whole, as JSON
    text; None for a system message (never in the model input) and for what orjson refuses to write
    (a lone surrogate), which a fetch then renders as before.

    Stored renderings outlive the code that wrote them: a change to how a stored message is rendered (a
    key, a placeholder) must come with a migration that renders every stored message again, or sets the
    column to NULL (a NULL is rendered when the input is fetched). tests/test_stored_openai.py pins the
    rendering of each kind of message, so that such a change cannot pass unnoticed."""
    if message.role == Role.SYSTEM:
        return None
    try:
        return orjson.dumps(openai_message(message)).decode()
    except orjson.JSONEncodeError:
        return None
