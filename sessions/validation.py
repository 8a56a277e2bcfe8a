"""Shape rules for messages a client sends (SPEC §1, §5.3), before anything touches the database."""

import base64
import binascii
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.utils.dateparse import parse_datetime

from .errors import DomainError, TooLarge
from .models import Role
from .tokens import REPLY_PRIMING, count_message

MESSAGE_FIELDS = {
    "role", "content", "reasoning", "tool_calls", "tool_call_id", "name", "attributes",
    "include_in_messages", "persist", "id", "created_at",
}
ROLES = set(Role.values)
MAX_ID_LENGTH = 200
DATA_URL_RE = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?((?:;[\w.+-]+=[\w.+-]+)*)(;base64)?,", re.IGNORECASE)


@dataclass
class NewMessage:
    """A validated message, normalised, with its token figures computed once."""

    role: str
    content: str | list
    text: str
    reasoning: str = ""
    tool_calls: list = field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""
    attributes: dict = field(default_factory=dict)
    include_in_messages: bool = True
    persist: bool = True
    client_id: str = ""
    created_at: datetime | None = None
    tokens: int = 0
    tool_call_tokens: list = field(default_factory=list)
    reasoning_tokens: int = 0
    digest: str = ""
    seq: int | None = None  # set once stored
    call_seq: int | None = None  # for a tool result: the seq of the call it answers, set once stored

    @property
    def call_ids(self) -> list[str]:
        return [call["id"] for call in self.tool_calls]

    @property
    def has_content(self) -> bool:
        return bool(self.text.strip()) or (isinstance(self.content, list) and len(self.content) > 0)


def fail(index: int | None, detail: str, code: str) -> DomainError:
    where = f"messages[{index}]: " if index is not None else ""
    extra = {"index": index} if index is not None else {}
    return DomainError(where + detail, code=code, **extra)


def _check_str(value, index, name, *, max_length=None, allow_empty=True, code="invalid_field") -> str:
    if not isinstance(value, str):
        raise fail(index, f"{name} must be a string", code)
    if not allow_empty and not value:
        raise fail(index, f"{name} must not be empty", code)
    if max_length is not None and len(value) > max_length:
        raise fail(index, f"{name} is longer than {max_length} characters", code)
    check_text(value, index, name, code)
    return value


def check_text(value: str, index, name, code="invalid_field"):
    """Text a client sends: at most CTXWEB_MAX_TEXT_CHARS characters, and storable."""
    limit = settings.CTXWEB_MAX_TEXT_CHARS
    if len(value) > limit:
        raise fail(index, f"{name} is longer than {limit} characters", "text_too_long")
    check_storable(value, index, name, code)


def check_storable(value: str, index, name, code="invalid_field"):
    """Strings the databases can store: no NUL characters, no lone surrogates."""
    if "\x00" in value:
        raise fail(index, f"{name} must not contain NUL characters", code)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise fail(index, f"{name} is not valid Unicode text", code) from None


def check_json(value, index, name, level: int = 1):
    """A JSON value from a client (attributes, metadata, tool call arguments) that every database can
    store as it is, nested at most CTXWEB_MAX_JSON_DEPTH levels (an object or list at the top is
    level 1)."""
    if isinstance(value, str):
        check_text(value, index, name)
    elif isinstance(value, dict | list):
        limit = settings.CTXWEB_MAX_JSON_DEPTH
        if level > limit:
            raise fail(index, f"{name} is nested more than {limit} levels deep", "json_too_deep")
        if isinstance(value, dict):
            for key in value:
                if not isinstance(key, str):
                    raise fail(index, f"{name} keys must be strings", "invalid_field")
                check_text(key, index, name)
            value = value.values()
        for item in value:
            check_json(item, index, name, level + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise fail(index, f"{name} must not contain NaN or infinity", "invalid_field")


# A request body wraps the free-form JSON it carries in a few levels of its own (body, messages,
# message, tool_calls, call, function, arguments), so it may be this much deeper than
# CTXWEB_MAX_JSON_DEPTH.
BODY_LEVELS = 8


class InvalidBody(DomainError):
    status = 400
    code = "invalid_json"


class InvalidNumber(DomainError):
    """A number in a request body that no field can hold (NaN, infinity, beyond a double's range, or
    more digits than Python reads); some JSON encoders write them."""

    status = 422
    code = "invalid_number"


def _object(pairs: list) -> dict:
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        shown = twice if len(twice) <= 60 else twice[:57] + "..."
        raise InvalidBody(f"The request body has the key {shown!r} twice in one object.")
    return obj


def _constant(name: str):
    raise InvalidNumber(f"The request body holds {name}, which is not a JSON number.")


def _float(text: str) -> float:
    # 1e999 would become infinity, which pydantic writes back as null: refused here instead.
    value = float(text)
    if not math.isfinite(value):
        raise InvalidNumber(f"The request body holds the number {text[:40]}, too large to store.")
    return value


def _too_deep() -> DomainError:
    limit = settings.CTXWEB_MAX_JSON_DEPTH + BODY_LEVELS
    return DomainError(f"The request body is nested more than {limit} levels deep.", code="json_too_deep")


def json_depth(value) -> int:
    """Levels of nesting of a parsed JSON value: 0 for a scalar, 1 for a flat object or list."""
    level = 0
    containers = (dict, list)
    frontier = [value] if isinstance(value, containers) else []
    while frontier:  # one level at a time, without recursion
        level += 1
        frontier = [
            child
            for item in frontier
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, containers)
        ]
    return level


def load_json_body(raw: bytes):
    """A request body as JSON text (RFC 8259): UTF-8 without a byte order mark, no key twice in an
    object, and not nested deeper than free-form JSON may be plus BODY_LEVELS (400 invalid_json, 422
    json_too_deep); no NaN, Infinity or number beyond a double's range (422 invalid_number). Never an
    unexpected error."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidBody("The request body is not UTF-8 text.") from None
    if text.startswith("\ufeff"):
        raise InvalidBody("The request body starts with a byte order mark; send UTF-8 JSON without one.")
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_constant=_constant, parse_float=_float)
    except RecursionError:
        raise _too_deep() from None
    except json.JSONDecodeError as exc:
        raise InvalidBody(f"The request body is not valid JSON: {exc}") from None
    except ValueError:  # an integer of more digits than Python converts
        raise InvalidNumber("The request body holds an integer of too many digits to read.") from None
    if json_depth(value) > settings.CTXWEB_MAX_JSON_DEPTH + BODY_LEVELS:
        raise _too_deep()
    return value


def _check_dimension(value, index, name):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value > 100_000:
        raise fail(index, f"image {name} must be a positive integer", "invalid_content")
    return value


def _image_part(part: dict, index) -> dict:
    url = part.get("url")
    if not isinstance(url, str) or not url:
        raise fail(index, "an image part needs a url (http(s) or data: URL)", "invalid_content")
    check_storable(url, index, "image url", "invalid_content")  # bounded below, not as text
    if url.startswith(("http://", "https://")):
        if len(url) > 8192:
            raise fail(index, "image url is too long", "invalid_content")
    elif url[:5].lower() == "data:":
        match = DATA_URL_RE.match(url)
        if not match:
            raise fail(index, "image data: URL is malformed", "invalid_content")
        if not (match.group(1) or "").lower().startswith("image/"):
            raise fail(index, "an image data: URL must have an image/* media type", "invalid_content")
        payload = url[match.end():]
        size = len(payload) * 3 // 4 if match.group(3) else len(payload)
        if size > settings.CTXWEB_MAX_IMAGE_BYTES:
            raise TooLarge(
                f"messages[{index}]: image is larger than {settings.CTXWEB_MAX_IMAGE_BYTES} bytes",
                code="image_too_large",
                index=index,
            )
        if match.group(3):
            try:
                base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                raise fail(index, "image data: URL is not valid base64", "invalid_content") from None
    else:
        raise fail(index, "image url must be an http(s) or data: URL", "invalid_content")
    image = {"type": "image", "url": url}
    for key in ("media_type", "detail"):
        if part.get(key) is not None:
            image[key] = _check_str(part[key], index, f"image {key}", max_length=100, code="invalid_content")
    if image.get("detail") not in (None, "low", "high", "auto"):
        raise fail(index, "image detail must be low, high or auto", "invalid_content")
    for key in ("width", "height"):
        value = _check_dimension(part.get(key), index, key)
        if value is not None:
            image[key] = value
    unknown = set(part) - {"type", "url", "media_type", "detail", "width", "height"}
    if unknown:
        raise fail(index, f"unknown image part field(s): {', '.join(sorted(unknown))}", "invalid_content")
    return image


def normalise_content(content, index) -> str | list:
    if content is None:
        return ""
    if isinstance(content, str):
        return _check_str(content, index, "content")
    if not isinstance(content, list):
        raise fail(index, "content must be a string or a list of parts", "invalid_content")
    parts = []
    for part in content:
        if not isinstance(part, dict):
            raise fail(index, "each content part must be an object", "invalid_content")
        kind = part.get("type")
        if kind == "text":
            if set(part) - {"type", "text"}:
                raise fail(index, "a text part has only type and text", "invalid_content")
            parts.append({"type": "text", "text": _check_str(part.get("text"), index, "text part", code="invalid_content")})
        elif kind == "image":
            parts.append(_image_part(part, index))
        elif kind == "image_url":  # OpenAI's shape, accepted and stored as ours
            inner = part.get("image_url")
            if isinstance(inner, str):
                inner = {"url": inner}
            if not isinstance(inner, dict) or set(part) - {"type", "image_url"}:
                raise fail(index, "an image_url part needs an image_url object", "invalid_content")
            parts.append(_image_part(inner, index))
        else:
            raise fail(index, f"unknown content part type {kind!r} (text or image)", "invalid_content")
    return parts


def content_text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part["type"] == "text")


def tool_call(call, index) -> dict:
    if not isinstance(call, dict):
        raise fail(index, "each tool call must be an object", "invalid_tool_calls")
    if "function" in call:  # OpenAI's shape: {"id", "type": "function", "function": {"name", "arguments"}}
        function = call["function"]
        if not isinstance(function, dict) or set(call) - {"id", "type", "function", "index"}:
            raise fail(index, "a tool call's function must be an object", "invalid_tool_calls")
        if call.get("type", "function") != "function":
            raise fail(index, "only function tool calls are supported", "invalid_tool_calls")
        name, arguments = function.get("name"), function.get("arguments", "")
    else:
        unknown = set(call) - {"id", "name", "arguments", "type"}
        if unknown:
            raise fail(index, f"unknown tool call field(s): {', '.join(sorted(unknown))}", "invalid_tool_calls")
        name, arguments = call.get("name"), call.get("arguments", "")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id or len(call_id) > MAX_ID_LENGTH:
        raise fail(index, "each tool call needs an id (1-200 characters)", "invalid_tool_calls")
    if not isinstance(name, str) or not name or len(name) > 200:
        raise fail(index, "each tool call needs a name (1-200 characters)", "invalid_tool_calls")
    check_text(call_id, index, "tool call id", "invalid_tool_calls")
    check_text(name, index, "tool call name", "invalid_tool_calls")
    if arguments is None:
        arguments = ""
    if isinstance(arguments, dict | list):
        check_json(arguments, index, "tool call arguments")
        arguments = json.dumps(arguments, ensure_ascii=False)
    if not isinstance(arguments, str):
        raise fail(index, "tool call arguments must be a string or a JSON object", "invalid_tool_calls")
    _check_str(arguments, index, "tool call arguments", code="invalid_tool_calls")
    return {"id": call_id, "name": name, "arguments": arguments}


def _created_at(value, index) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise fail(index, "created_at must be an ISO 8601 date-time string", "invalid_field")
    try:
        parsed = parse_datetime(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise fail(index, "created_at must be an ISO 8601 date-time string", "invalid_field")
    return to_utc(parsed, index, "created_at")


def to_utc(value: datetime, index, name) -> datetime:
    """An aware UTC datetime every database can store, or a 422."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        value = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise fail(index, f"{name} is out of range", "invalid_field") from None
    if not 1 <= value.year <= 9998:
        raise fail(index, f"{name} is out of range", "invalid_field")
    return value


def message_digest(role, content, reasoning, tool_calls, tool_call_id, name) -> str:
    """A fingerprint of what the model sees of a message, to tell a retried message from a conflicting
    one. Its parts are normalised already (parts and tool calls built with a fixed key order), so
    plain text is hashed as it is and only structured parts go through JSON."""
    digest = hashlib.sha256()
    for part in (role, content, reasoning, tool_calls, tool_call_id, name):
        if isinstance(part, str):
            digest.update(b"s")
            digest.update(part.encode())
        else:
            digest.update(b"j")
            digest.update(json.dumps(part, ensure_ascii=False, separators=(",", ":")).encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def parse_message(data, index: int | None = None) -> NewMessage:
    """Validate one message a client sent and return it normalised, with its token figures."""
    if not isinstance(data, dict):
        raise fail(index, "a message must be an object", "invalid_message")
    unknown = set(data) - MESSAGE_FIELDS
    if unknown:
        raise fail(
            index,
            f"unknown field(s) {', '.join(sorted(unknown))}; application data belongs in attributes",
            "unknown_field",
        )
    role = data.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise fail(index, f"role must be one of {', '.join(Role.values)}", "invalid_role")

    tool_calls_in = data.get("tool_calls")
    if tool_calls_in is not None and not isinstance(tool_calls_in, list):
        raise fail(index, "tool_calls must be a list", "invalid_tool_calls")
    if tool_calls_in and role != Role.ASSISTANT:
        raise fail(index, "tool_calls are only allowed on assistant messages", "field_not_allowed")
    tool_calls = [tool_call(call, index) for call in tool_calls_in or ()]
    ids = [call["id"] for call in tool_calls]
    if len(set(ids)) != len(ids):
        raise fail(index, "tool call ids must be unique within a message", "invalid_tool_calls")

    reasoning = data.get("reasoning")
    if reasoning not in (None, "") and role != Role.ASSISTANT:
        raise fail(index, "reasoning is only allowed on assistant messages", "field_not_allowed")
    reasoning = _check_str(reasoning or "", index, "reasoning")

    tool_call_id = data.get("tool_call_id")
    if role == Role.TOOL:
        if tool_call_id in (None, ""):
            raise fail(index, "a tool message needs the tool_call_id of the call it answers", "missing_tool_call_id")
        tool_call_id = _check_str(tool_call_id, index, "tool_call_id", max_length=MAX_ID_LENGTH)
    elif tool_call_id not in (None, ""):
        raise fail(index, "tool_call_id is only allowed on tool messages", "field_not_allowed")
    else:
        tool_call_id = ""

    if "content" not in data and not (role == Role.ASSISTANT and tool_calls):
        raise fail(index, "content is required", "invalid_content")
    if data.get("content") is None and not (role == Role.ASSISTANT and tool_calls) and "content" in data:
        raise fail(index, "content may be null only on an assistant message with tool calls", "invalid_content")
    content = normalise_content(data.get("content"), index)

    name = _check_str(data.get("name") or "", index, "name", max_length=200)
    attributes = data.get("attributes")
    if attributes is None:
        attributes = {}
    if not isinstance(attributes, dict):
        raise fail(index, "attributes must be an object", "invalid_field")
    check_json(attributes, index, "attributes")
    include = data.get("include_in_messages", True)
    persist = data.get("persist", True)
    if not isinstance(include, bool) or not isinstance(persist, bool):
        raise fail(index, "include_in_messages and persist must be true or false", "invalid_field")
    client_id = data.get("id")
    if client_id is not None:
        client_id = _check_str(client_id, index, "id", max_length=MAX_ID_LENGTH, allow_empty=False)
    created_at = _created_at(data.get("created_at"), index)

    figures = count_message(role, content, name, tool_calls, reasoning)
    return NewMessage(
        role=role,
        content=content,
        text=content_text(content),
        reasoning=reasoning,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        name=name,
        attributes=attributes,
        include_in_messages=include,
        persist=persist,
        client_id=client_id or "",
        created_at=created_at,
        tokens=figures.total,
        tool_call_tokens=figures.tool_calls,
        reasoning_tokens=figures.reasoning,
        digest=message_digest(role, content, reasoning, tool_calls, tool_call_id, name),
    )


def count_openai_messages(messages) -> tuple[int, list[int]]:
    """Token count of an OpenAI-format message list (SPEC §5.8): the total with reply priming, and
    each message's figure. Fields that do not reach the model's context are ignored."""
    if not isinstance(messages, list) or not messages:
        raise DomainError("messages must be a non-empty list", code="invalid_batch")
    per_message = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise fail(index, "a message must be an object", "invalid_message")
        role = "system" if message.get("role") == "developer" else message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise fail(index, f"role must be one of {', '.join(Role.values)} (or developer)", "invalid_role")
        content = normalise_content(message.get("content"), index)
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise fail(index, "tool_calls must be a list", "invalid_tool_calls")
        calls = [tool_call(call, index) for call in calls]
        name = _check_str(message.get("name") or "", index, "name", max_length=200)
        per_message.append(count_message(role, content, name, calls).total)
    return REPLY_PRIMING + sum(per_message), per_message
