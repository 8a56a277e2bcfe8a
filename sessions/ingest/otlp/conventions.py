"""The two conventions of LLM spans, read into OpenAI Chat Completions message objects: OpenInference
(`llm.input_messages.{i}.message...` attributes) and OpenTelemetry GenAI (`gen_ai.input.messages` JSON
parts, `gen_ai.system_instructions`, or the older per-message span events)."""

import base64
import json
import math
import re
from datetime import UTC, datetime

from sessions.ingest.otlp.decode import (
    GENAI_CHAT_OPERATIONS,
    GENAI_MESSAGE_EVENTS,
    MAX_COUNT,
    ROLES,
    MalformedSpan,
    _list,
)
from sessions.wire.json_body import nested_too_deep, too_deep

# --- spans to requests ------------------------------------------------------------------------------


def any_value(value):
    """An OTLP AnyValue as plain Python: strings, numbers, lists and dicts."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: any_value(item.value) for item in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind)


def attributes(key_values) -> dict:
    return {item.key: any_value(item.value) for item in key_values}


def _time(nanos: int) -> datetime:
    return datetime.fromtimestamp(nanos / 1e9, tz=UTC)


def _int(value) -> int | None:
    """A token count, or None for anything that is not one (negative, infinite, too big)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        value = int(value) if math.isfinite(value) else -1
    elif isinstance(value, str):
        value = int(value) if value.isdigit() else -1
    if isinstance(value, int) and 0 <= value <= MAX_COUNT:
        return value
    return None


def _text(value, what: str) -> str:
    if not isinstance(value, str):
        raise MalformedSpan(f"{what} is not a string")
    return value


def _loads(text: str):
    """JSON an attribute holds as text: ValueError when it is not JSON, or when it nests past the limit
    (found before json.loads would recurse into it)."""
    if nested_too_deep(text):
        raise ValueError(too_deep("the text"))
    return json.loads(text)


def _json(value, what: str):
    if isinstance(value, str):
        if nested_too_deep(value):
            raise MalformedSpan(too_deep(what))
        try:
            return json.loads(value)
        except ValueError:
            raise MalformedSpan(f"{what} is not valid JSON") from None
    return value


def _message(role, content=None, name="", tool_calls=(), tool_call_id="") -> dict:
    """An OpenAI Chat Completions message, keys in one order. An assistant message that only calls
    tools has content null, as the OpenAI API itself returns it."""
    if not isinstance(role, str) or role not in ROLES:
        raise MalformedSpan(f"role {role!r} is not one of {sorted(ROLES)}")
    if content is None and not (role == "assistant" and tool_calls):
        content = ""
    message = {"role": role, "content": content}
    if name:
        message["name"] = name
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    if tool_call_id:
        message["tool_call_id"] = tool_call_id
    return message


def _tool_call(call_id, name, arguments) -> dict:
    if not isinstance(arguments, str):
        # GenAI instrumentations parse the arguments; json.dumps' defaults give back what a Python
        # client that wrote them with json.dumps sent.
        arguments = json.dumps(arguments) if arguments is not None else ""
    return {"id": _text(call_id or "", "a tool call id"), "type": "function",
            "function": {"name": _text(name or "", "a tool call name"), "arguments": arguments}}


def _no_nul(value, where: str) -> None:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str) and "\x00" in item:
            raise MalformedSpan(f"{where} contain a NUL character")
        if isinstance(item, dict):
            pending.extend(item.values())
            pending.extend(item.keys())
        elif isinstance(item, list):
            pending.extend(item)


# OpenInference -------------------------------------------------------------------------------------

OI_MESSAGE = re.compile(r"^(\d+)\.message\.(.+)$")
OI_CONTENT = re.compile(r"^contents\.(\d+)\.message_content\.(.+)$")
OI_TOOL_CALL = re.compile(r"^tool_calls\.(\d+)\.tool_call\.(.+)$")


def _indexed(found: dict, what: str) -> list:
    """The values of {index: value} in index order; the indexes must be 0..n-1."""
    if sorted(found) != list(range(len(found))):
        raise MalformedSpan(f"{what} indexes are not 0..{len(found) - 1}")
    return [found[i] for i in range(len(found))]


def openinference_messages(attrs: dict, prefix: str) -> list[dict]:
    raw: dict[int, dict] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        match = OI_MESSAGE.match(key[len(prefix):])
        if not match:
            continue
        fields = raw.setdefault(int(match.group(1)), {"contents": {}, "tool_calls": {}})
        rest = match.group(2)
        if part := OI_CONTENT.match(rest):
            fields["contents"].setdefault(int(part.group(1)), {})[part.group(2)] = value
        elif call := OI_TOOL_CALL.match(rest):
            fields["tool_calls"].setdefault(int(call.group(1)), {})[call.group(2)] = value
        else:
            fields[rest] = value
    messages = []
    for index, fields in enumerate(_indexed(raw, prefix.rstrip("."))):
        where = f"{prefix}{index}"
        content = fields.get("content")
        if content is not None:
            content = _text(content, f"{where}.message.content")
        if fields["contents"]:
            if content:
                raise MalformedSpan(f"{where} has both content and contents")
            content = [_openinference_part(part, f"{where}.message.contents")
                       for part in _indexed(fields["contents"], f"{where}.message.contents")]
        calls = [
            _tool_call(call.get("id"), call.get("function.name"), _text(call.get("function.arguments", ""),
                                                                        "tool call arguments"))
            for call in _indexed(fields["tool_calls"], f"{where}.message.tool_calls")
        ]
        messages.append(_message(
            fields.get("role"), content, name=_text(fields.get("name") or "", "name"), tool_calls=calls,
            tool_call_id=_text(fields.get("tool_call_id") or "", "tool_call_id"),
        ))
    return messages


def _openinference_part(part: dict, where: str) -> dict:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": _text(part.get("text", ""), f"{where} text")}
    if kind == "image":
        return {"type": "image_url", "image_url": {"url": _text(part.get("image.image.url"), f"{where} image url")}}
    raise MalformedSpan(f"{where}: content of type {kind!r} is not supported (text and image are)")


def openinference_request(attrs: dict) -> dict:
    messages = openinference_messages(attrs, "llm.input_messages.")
    parameters = {}
    invocation = attrs.get("llm.invocation_parameters")
    if isinstance(invocation, str):
        try:
            parsed = _loads(invocation)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            parameters = parsed
    tools = {}
    for key, value in attrs.items():
        if match := re.match(r"^llm\.tools\.(\d+)\.tool\.json_schema$", key):
            try:
                tools[int(match.group(1))] = _loads(value) if isinstance(value, str) else value
            except ValueError:
                pass
    if tools:
        parameters = {**parameters, "tools": [tools[i] for i in sorted(tools)]}
    return {
        "messages": messages,
        "response": openinference_messages(attrs, "llm.output_messages."),
        "model": attrs.get("llm.model_name") or parameters.get("model") or "",
        "provider": attrs.get("llm.provider") or attrs.get("llm.system") or "",
        "parameters": parameters,
        "usage_input_tokens": _int(attrs.get("llm.token_count.prompt")),
        "usage_output_tokens": _int(attrs.get("llm.token_count.completion")),
        "conversation": attrs.get("session.id"),
    }


# OpenTelemetry GenAI -------------------------------------------------------------------------------


def _part_text(part: dict) -> str:
    return _text(part.get("content", part.get("text", "")), "a text part")


def _media_part(part: dict, where: str) -> dict:
    kind = part.get("type")
    modality = part.get("modality", "image")
    if modality != "image":
        raise MalformedSpan(f"{where}: {modality} parts are not supported (images are)")
    if kind == "uri":
        url = part.get("uri")
    elif kind == "blob":
        url = f"data:{part.get('mime_type') or 'image/png'};base64,{_text(part.get('content'), 'blob content')}"
    else:  # file: a provider's file id, sent as a URL would be
        url = part.get("file_id") or part.get("uri")
    return {"type": "image_url", "image_url": {"url": _text(url, f"{where} url")}}


def genai_messages(items, where: str) -> list[dict]:
    """gen_ai.input.messages / gen_ai.output.messages (role, parts, name) as OpenAI messages. A message
    of tool_call_response parts becomes one tool message per response, as OpenAI wants them."""
    if not isinstance(items, list):
        raise MalformedSpan(f"{where} is not a list of messages")
    messages = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("parts", []), list):
            raise MalformedSpan(f"{at} is not a message with parts")
        role = item.get("role")
        content, calls, responses = [], [], []
        for part in item.get("parts", []):
            if not isinstance(part, dict):
                raise MalformedSpan(f"{at} has a part that is not an object")
            kind = part.get("type")
            if kind == "text":
                content.append({"type": "text", "text": _part_text(part)})
            elif kind in ("uri", "blob", "file"):
                content.append(_media_part(part, at))
            elif kind == "tool_call":
                calls.append(_tool_call(part.get("id"), part.get("name"), part.get("arguments")))
            elif kind == "tool_call_response":
                response = part.get("response", part.get("result"))
                text = response if isinstance(response, str) else json.dumps(response)
                responses.append(_message("tool", text, tool_call_id=_text(part.get("id") or "", "a tool call id")))
            elif kind == "reasoning":
                continue  # not part of what a Chat Completions request sends
            else:
                raise MalformedSpan(f"{at}: parts of type {kind!r} are not supported")
        if responses:
            if content or calls:
                raise MalformedSpan(f"{at} mixes tool responses with other parts")
            messages.extend(responses)
            continue
        messages.append(_message(role, _content(content, bool(calls)), name=_text(item.get("name") or "", "name"),
                                 tool_calls=calls))
    return messages


def _content(parts: list[dict], has_calls: bool):
    """One text part is a string (what a client sent as a string); anything else stays a list."""
    if not parts:
        return None if has_calls else ""
    if len(parts) == 1 and parts[0]["type"] == "text":
        return parts[0]["text"]
    return parts


def _event_message(name: str, attrs: dict) -> dict:
    """One of the older per-message span events, its body's fields given as attributes."""
    role = attrs.get("role") or GENAI_MESSAGE_EVENTS[name]
    content = attrs.get("content")
    if isinstance(content, dict):  # {"type": "text", ...} parts arrive as a kvlist
        content = [content]
    if isinstance(content, list):
        content = [_chat_part(part, name) for part in content]
    calls = []
    for call in _list(_json(attrs.get("tool_calls") or [], f"{name} tool_calls")):
        if not isinstance(call, dict):
            raise MalformedSpan(f"{name}: a tool call is not an object")
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        calls.append(_tool_call(call.get("id"), function.get("name"), function.get("arguments")))
    if content is not None and not isinstance(content, str | list):
        raise MalformedSpan(f"{name}: content is neither text nor parts")
    call_id = (attrs.get("id") or attrs.get("tool_call_id") or "") if role == "tool" else ""
    return _message(role, content, name=_text(attrs.get("name") or "", "name"), tool_calls=calls,
                    tool_call_id=_text(call_id, "tool message id"))


def _chat_part(part, where: str) -> dict:
    if not isinstance(part, dict):
        raise MalformedSpan(f"{where}: a content part is not an object")
    if part.get("type") == "text":
        return {"type": "text", "text": _text(part.get("text", ""), f"{where} text")}
    if part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
        return {"type": "image_url", "image_url": {"url": _text(part["image_url"].get("url"), f"{where} url")}}
    raise MalformedSpan(f"{where}: content parts of type {part.get('type')!r} are not supported")


def _choice_messages(attrs: dict) -> list[dict]:
    message = _json(attrs.get("message") or {}, "gen_ai.choice message")
    if not isinstance(message, dict):
        raise MalformedSpan("gen_ai.choice message is not an object")
    return [_event_message("gen_ai.assistant.message", {**message, "role": message.get("role") or "assistant"})]


def genai_request(attrs: dict, events) -> dict:
    if "gen_ai.input.messages" in attrs:
        messages = genai_messages(_json(attrs["gen_ai.input.messages"], "gen_ai.input.messages"),
                                  "gen_ai.input.messages")
        response = genai_messages(_json(attrs.get("gen_ai.output.messages") or "[]", "gen_ai.output.messages"),
                                  "gen_ai.output.messages")
    else:
        messages, response = [], []
        for event in events:
            event_attrs = attributes(event.attributes)
            if event.name in GENAI_MESSAGE_EVENTS:
                messages.append(_event_message(event.name, event_attrs))
            elif event.name == "gen_ai.choice":
                response.extend(_choice_messages(event_attrs))
    instructions = attrs.get("gen_ai.system_instructions")
    if instructions and not any(m["role"] in ("system", "developer") for m in messages):
        parts = _json(instructions, "gen_ai.system_instructions")
        if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
            raise MalformedSpan("gen_ai.system_instructions is not a list of parts")
        texts = [_part_text(p) for p in parts if p.get("type") == "text"]
        messages.insert(0, _message("system", "\n".join(texts)))
    parameters = {key.removeprefix("gen_ai.request."): value for key, value in attrs.items()
                  if key.startswith("gen_ai.request.") and key != "gen_ai.request.model"}
    return {
        "messages": messages,
        "response": response,
        "model": attrs.get("gen_ai.request.model") or attrs.get("gen_ai.response.model") or "",
        "provider": attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system") or "",
        "parameters": parameters,
        "usage_input_tokens": _int(attrs.get("gen_ai.usage.input_tokens", attrs.get("gen_ai.usage.prompt_tokens"))),
        "usage_output_tokens": _int(
            attrs.get("gen_ai.usage.output_tokens", attrs.get("gen_ai.usage.completion_tokens"))),
        "conversation": attrs.get("gen_ai.conversation.id") or attrs.get("session.id"),
    }


def convention(attrs: dict, events) -> str:
    """"openinference", "genai", or "" for a span that is not an LLM call."""
    if str(attrs.get("openinference.span.kind", "")).upper() == "LLM":
        return "openinference"
    operation = attrs.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation in GENAI_CHAT_OPERATIONS:
        return "genai"
    if operation is None and ("gen_ai.input.messages" in attrs
                              or any(event.name in GENAI_MESSAGE_EVENTS for event in events)):
        return "genai"
    return ""


