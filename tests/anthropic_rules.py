"""Why the Anthropic Messages API would refuse a request body as sessions.wire.anthropic.to_anthropic returns it
({"system"?: str, "messages": [...]}): the request types of the official `anthropic` package, checked
with pydantic, then the API's rules on how messages fit together, which no type says."""

import re
from collections.abc import Iterator
from typing import get_args, get_type_hints

from anthropic.types import ContentBlockParam, MessageParam, TextBlockParam
from pydantic import ConfigDict, TypeAdapter, ValidationError

# extra="forbid" reaches every TypedDict of the package without a pydantic config of its own; the one
# with a config, Base64ImageSourceParam, keeps taking unknown keys, so the image rule checks its keys.
# MessageParam's content also admits the response models (TextBlock...), which take any key: each block
# is checked against the request block type its `type` names instead, as a list of one block (pydantic
# takes no config for a lone TypedDict, which could have its own).
FORBID = ConfigDict(extra="forbid", strict=True)
MESSAGE = TypeAdapter(MessageParam, config=FORBID)
SYSTEM_BLOCKS = TypeAdapter(list[TextBlockParam], config=FORBID)
BLOCKS = {
    get_args(get_type_hints(param)["type"])[0]: TypeAdapter(list[param], config=FORBID)
    for param in get_args(ContentBlockParam)
}
TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
BASE64_SOURCE_KEYS = {"type", "media_type", "data"}


def anthropic_request_problems(body: dict) -> list[str]:
    """Each reason the Messages API would refuse `body`, as a sentence naming where; [] when it takes it."""
    problems = [f"the request has a field {key!r} that to_anthropic never writes"
                for key in body if key not in ("system", "messages")]
    system = body.get("system", "")
    if isinstance(system, list):
        problems += [f"system.{_where(loc)}: {why}" for loc, why in _type_errors(SYSTEM_BLOCKS, system)]
        problems += [f"system.{i}: {why}" for i, block in enumerate(system) if isinstance(block, dict)
                     for why in _text_problems(block)]
    elif not isinstance(system, str):
        problems.append(f"system is {type(system).__name__}, neither a string nor a list of text blocks")
    messages = body.get("messages")
    if not isinstance(messages, list):
        return [*problems, "messages is not a list"]
    for i, message in enumerate(messages):
        problems += [f"messages[{i}]: {why}" for why in _message_type_problems(message)]
    return problems + _rule_problems([m if isinstance(m, dict) else {} for m in messages])


# --- the types ------------------------------------------------------------------------------------


def _message_type_problems(message) -> list[str]:
    """The message against MessageParam (keys, role, content a string or blocks), then each block against
    the request type of its `type`."""
    problems = [f"{_where(loc)}: {why}" for loc, why in _type_errors(MESSAGE, message, iterate=False)]
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        for j, block in enumerate(content):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in BLOCKS:
                problems.append(f"content.{j}: {kind!r} is no content block type of a request")
                continue
            errors = _type_errors(BLOCKS[kind], [block])  # located in the list of one: [0, ...]
            problems += [f"{_where(('content', j, *loc[1:]))}: {why}" for loc, why in errors]
    return problems


class _Lazy(Exception):
    """A ValidationError raised while iterating an Iterable field, with where that field is."""

    def __init__(self, path: tuple, error: ValidationError):
        self.path, self.error = path, error


def _type_errors(adapter: TypeAdapter, value, iterate: bool = True) -> list[tuple[tuple, str]]:
    """(location, message) of what `adapter` finds wrong in `value`; `iterate`: check the items of its
    Iterable fields too."""
    try:
        validated = adapter.validate_python(value)
        if iterate:
            _iterate_all(validated)
    except ValidationError as error:
        return _fitting_errors((), error)
    except _Lazy as lazy:
        return _fitting_errors(lazy.path, lazy.error)
    return []


def _iterate_all(value, path: tuple = ()) -> None:
    """pydantic checks the items of an Iterable field (most lists of the package's types) only as they
    are iterated: iterate every one."""
    if isinstance(value, dict):
        for key, item in value.items():
            _iterate_all(item, (*path, key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _iterate_all(item, (*path, i))
    elif isinstance(value, Iterator):
        try:
            items = list(value)
        except ValidationError as error:
            raise _Lazy(path, error) from None
        for i, item in enumerate(items):
            _iterate_all(item, (*path, i))


def _fitting_errors(path: tuple, error: ValidationError) -> list[tuple[tuple, str]]:
    """The errors of the union members whose `type` (or `role`) fits the value: pydantic tries every
    member of a union and reports each failure, naming the member by its class in the location."""
    errors = error.errors()
    misfits = [
        e["loc"][:-1] for e in errors
        if e["type"] == "literal_error" and len(e["loc"]) > 1 and e["loc"][-1] in ("type", "role")
        and str(e["loc"][-2])[:1].isupper()  # a member's class name, not a field
    ]
    kept = [e for e in errors if not any(e["loc"][: len(m)] == m for m in misfits)]
    if not kept:  # no member has that type: say it once
        first = errors[0]
        where = (*path, *first["loc"][:-2], first["loc"][-1])
        return [(where, f"{first['input']!r} is not a value allowed here")]
    return list(dict.fromkeys(((*path, *e["loc"]), e["msg"]) for e in kept))  # a union may repeat one


def _where(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "(the value)"


# --- the rules --------------------------------------------------------------------------------------


def _blocks(content) -> list[dict]:
    """A message's content blocks; a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def _text_problems(block: dict) -> list[str]:
    text = block.get("text")
    if block.get("type") == "text" and isinstance(text, str) and not text.strip():
        return [f"a text block has {'empty' if not text else 'whitespace-only'} text ({text!r})"]
    return []


def _image_problems(block: dict) -> list[str]:
    if block.get("type") != "image":
        return []
    source = block.get("source")
    source = source if isinstance(source, dict) else {}
    if source.get("type") == "url":
        url = source.get("url")
        return [] if isinstance(url, str) and url.startswith(("http://", "https://")) else [
            f"an image's url source {url!r} is not an http(s) URL"]
    if source.get("type") != "base64":
        return [f"an image has a {source.get('type')!r} source, neither base64 nor url"]
    problems = []
    if set(source) != BASE64_SOURCE_KEYS:
        problems.append(f"an image's base64 source has the keys {sorted(source)}, "
                        f"not {sorted(BASE64_SOURCE_KEYS)}")
    if source.get("media_type") not in IMAGE_TYPES:
        problems.append(f"an image's media type {source.get('media_type')!r} is none of {sorted(IMAGE_TYPES)}")
    if not isinstance(source.get("data"), str) or not BASE64.fullmatch(source["data"]):
        problems.append("an image's base64 data is not base64")
    return problems


def _leading_results(blocks: list[dict]) -> int:
    """How many tool_result blocks open the content."""
    return next((n for n, block in enumerate(blocks) if block.get("type") != "tool_result"), len(blocks))


def _tool_uses(message: dict) -> list:
    return [block.get("id") for block in _blocks(message.get("content")) if block.get("type") == "tool_use"]


def _rule_problems(messages: list[dict]) -> list[str]:
    if not messages:
        return ["the request has no message; the API needs at least one"]
    problems = []
    if messages[0].get("role") != "user":
        problems.append(f"messages[0]: the first message has role {messages[0].get('role')!r}; it must be user")
    used: dict = {}  # tool_use id -> the index of its message
    for i, message in enumerate(messages):
        before = messages[i - 1] if i else {}
        after = messages[i + 1] if i + 1 < len(messages) else {}
        problems += [f"messages[{i}]: {why}" for why in (
            _order_problems(message, before) + _content_problems(message)
            + _tool_use_problems(message, after, used, i) + _tool_result_problems(message, before)
        )]
    problems += [f"messages[{len(messages) - 1}]: {why}" for why in _final_problems(messages[-1])]
    return problems


def _order_problems(message: dict, before: dict) -> list[str]:
    role = message.get("role")
    if role not in ("user", "assistant"):
        return [f"role {role!r}; messages are user or assistant"]
    if role == before.get("role"):
        return [f"a {role} message right after another; roles must alternate user/assistant"]
    return []


def _content_problems(message: dict) -> list[str]:
    """Empty content; in each block, and in the blocks of a tool_result, text and images."""
    content = message.get("content")
    problems = ["the message has empty content"] if content == "" or content == [] else []
    for block in _blocks(content):
        inner = _blocks(block.get("content")) if block.get("type") == "tool_result" else []
        for part in (block, *inner):
            problems += _text_problems(part) + _image_problems(part)
    return problems


def _tool_use_problems(message: dict, after: dict, used: dict, i: int) -> list[str]:
    """The ids of the message's tool_use blocks, and the message after it opening with their results."""
    problems = []
    calls = _tool_uses(message)
    for call_id in calls:
        if call_id in used:
            problems.append(f"tool_use id {call_id!r} is already the id of a tool_use in messages[{used[call_id]}]")
        used.setdefault(call_id, i)
        if not isinstance(call_id, str) or not TOOL_ID.fullmatch(call_id):
            problems.append(f"tool_use id {call_id!r} does not match {TOOL_ID.pattern}")
    if not calls or message.get("role") != "assistant":
        return problems
    if after.get("role") != "user":
        return [*problems, f"tool_use {calls} is not followed by a user message with their tool_result blocks"]
    blocks = _blocks(after.get("content"))
    answers = [block.get("tool_use_id") for block in blocks[: _leading_results(blocks)]]
    return problems + [
        f"the next message opens with {answers.count(call_id)} tool_result blocks for tool_use {call_id!r}; "
        "it must open with exactly one"
        for call_id in calls if answers.count(call_id) != 1
    ]


def _tool_result_problems(message: dict, before: dict) -> list[str]:
    """tool_result blocks come first, each answering a tool_use of the message before."""
    blocks = _blocks(message.get("content"))
    problems = []
    if any(block.get("type") == "tool_result" for block in blocks[_leading_results(blocks):]):
        problems.append("a tool_result block comes after another kind of block; tool_result blocks must come first")
    calls_before = set(_tool_uses(before))
    return problems + [
        f"tool_result for {block.get('tool_use_id')!r} answers no tool_use of the message before it"
        for block in blocks if block.get("type") == "tool_result" and block.get("tool_use_id") not in calls_before
    ]


def _final_problems(last: dict) -> list[str]:
    """The API refuses a final assistant message (which the model would continue) ending in whitespace."""
    if last.get("role") != "assistant":
        return []
    texts = [block.get("text") for block in _blocks(last.get("content")) if block.get("type") == "text"]
    texts = [text for text in texts if isinstance(text, str)]
    if texts and texts[-1] != texts[-1].rstrip():
        return [f"the final assistant message ends in whitespace ({texts[-1][-20:]!r})"]
    return []
