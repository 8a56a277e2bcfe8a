"""OpenAI Responses API input items (the `input` of a Responses request, the items an OpenAI Agents SDK
session keeps) as ctxweb messages: for appends and request builds in the `openai-responses` format
(sessions.wire.provider_messages), and for files that hold a list of items, or a request body with `input`
(sessions.ingest.importers.detect).

- `message` items (`type` may be left out, as the API allows): `user` and `assistant` keep their role,
  `system` and `developer` become a system message (which also gives the session its instructions).
  Content is a string or parts: `input_text`, `output_text` and `refusal` become text, `input_image` an
  image.
- `function_call` items become tool calls of one assistant message: the assistant message right before
  them (its text came in the same response), or a new one.
- `function_call_output` items become tool messages answering their `call_id`.
- `reasoning` items become the reasoning of the assistant message that follows them (shown, never part
  of the model input). Reasoning that no assistant output follows is kept on a hidden assistant message.

Every other item type (built-in tool calls, item references...) and content part (files, audio) is
refused, naming the item: ctxweb could not show what the model received. Fields that are not mapped
(item ids, status, phase...) are kept in the message's attributes.
"""

from collections.abc import Callable

from sessions.models import Role
from sessions.wire.parsed import ImportedSession, Parsed, Source, TranscriptError, text_of
from sessions.wire.parts import InputToRender, image_placeholder, provider_image
from sessions.wire.tokens import provider_role

FORMAT = "openai-responses"
ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning")
MESSAGE_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
TEXT_PARTS = ("input_text", "output_text")
NO_OUTPUT_AFTER = "a reasoning item that no assistant output followed"


class ItemError(TranscriptError):
    """An item that is not a Responses input item ctxweb can store; `index` is its place in the list."""

    def __init__(self, index: int, text: str):
        super().__init__(text)
        self.index = index


def _unmapped(item: dict, mapped: tuple[str, ...]) -> dict:
    """The item's other fields, without empty values (`annotations: []`, `status: null`)."""
    return {k: v for k, v in item.items() if k not in mapped and v not in (None, [], {}, "")}


def _parts(content: list, attributes: dict) -> list[dict]:
    parts = []
    for n, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in TEXT_PARTS and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
            mapped = ("type", "text")
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append({"type": "text", "text": part["refusal"]})
            mapped = ("type", "refusal")
        elif kind == "input_image":
            if not isinstance(part.get("image_url"), str):
                raise TranscriptError(f"content[{n}]: an input_image needs an image_url (a file_id cannot be shown)")
            image = {"type": "image", "url": part["image_url"]}
            if part.get("detail") is not None:
                image["detail"] = part["detail"]
            parts.append(image)
            mapped = ("type", "image_url", "detail")
        else:
            raise TranscriptError(
                f"content[{n}]: a part of type {kind!r} is not supported; use input_text, output_text, refusal "
                f"or input_image"
            )
        if extra := _unmapped(part, mapped):
            attributes.setdefault("part_fields", []).append({"index": n, **extra})
    return parts


def _content(content, attributes: dict, name: str = "content"):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return _parts(content, attributes)
    raise TranscriptError(f"{name} must be a string or a list of content parts")


def _string(item: dict, name: str) -> str:
    value = item.get(name)
    if not isinstance(value, str):
        raise TranscriptError(f"{name} must be a string")
    return value


def _reasoning_text(item: dict) -> str:
    """The reasoning's own text when the item carries it, else its summary."""
    for name in ("content", "summary"):
        value = item.get(name)
        if value is not None and not isinstance(value, list):
            raise TranscriptError(f"{name} must be a list of parts")
        text = text_of(value)
        if text:
            return text
    return ""


class Conversion:
    """Items converted one at a time (`item`), in order; `out` holds the messages made so far. `convert_items`
    converts a whole list; a reader whose items come among other records (sessions.ingest.importers.codex) feeds
    them itself, calling `close` where something else comes between them."""

    def __init__(self, message_id: Callable[[int], str | None]):
        self.message_id = message_id
        self.out: list[tuple[int, dict]] = []  # (index of the item it came from, ctxweb message)
        self.open_assistant: dict | None = None  # the assistant message function calls may join
        self.reasoning: list[tuple[int, str, dict]] = []  # reasoning waiting for its output: index, text, fields

    def add(self, index: int, message: dict) -> dict:
        if message["role"] == "assistant" and self.reasoning:
            texts = [text for _, text, _ in self.reasoning if text]
            if texts:
                message["reasoning"] = "\n\n".join(texts)
            fields = [extra for _, _, extra in self.reasoning]
            if any(fields):
                message.setdefault("attributes", {})["reasoning_items"] = fields
            self.reasoning = []
        self.flush_reasoning()
        if self.message_id(index) is not None:
            message["id"] = self.message_id(index)
        self.out.append((index, message))
        return message

    def close(self) -> int:
        """End what is open: reasoning still waiting for its output, the assistant message function calls
        may join. The number of messages made so far."""
        self.flush_reasoning()
        self.open_assistant = None
        return len(self.out)

    def flush_reasoning(self) -> None:
        """Reasoning that no assistant output followed: on a hidden assistant message of its own."""
        if self.reasoning:
            hidden = {"role": "assistant", "content": "", "include_in_messages": False,
                      "attributes": {"not_sent": NO_OUTPUT_AFTER}}
            self.add(self.reasoning[0][0], hidden)

    def item(self, index: int, item) -> None:
        if not isinstance(item, dict):
            raise TranscriptError("an item must be an object")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "reasoning":
            self.open_assistant = None
            self.reasoning.append((index, _reasoning_text(item), _unmapped(item, ("type", "summary", "content"))))
            return
        if kind == "function_call":
            call = {"id": _string(item, "call_id"), "name": _string(item, "name"), "arguments": _string(item, "arguments")}
            fields = _unmapped(item, ("type", "call_id", "name", "arguments"))
            message = self.open_assistant
            if message is None:
                message = self.add(index, {"role": "assistant", "content": None, "tool_calls": []})
                self.open_assistant = message
            message.setdefault("tool_calls", []).append(call)
            if fields:
                message.setdefault("attributes", {}).setdefault("function_call_fields", []).append(
                    {"call_id": call["id"], **fields}
                )
            return
        self.open_assistant = None
        if kind == "function_call_output":
            attributes = _unmapped(item, ("type", "call_id", "output"))
            message = {"role": "tool", "tool_call_id": _string(item, "call_id"),
                       "content": _content(item.get("output"), attributes, "output")}
        elif kind == "message":
            role = MESSAGE_ROLES.get(item.get("role"))
            if role is None:
                raise TranscriptError(f"role {item.get('role')!r} is not a message role (user, assistant, system, developer)")
            attributes = _unmapped(item, ("type", "role", "content"))
            if role != item["role"]:
                attributes["original_role"] = item["role"]
            message = {"role": role, "content": _content(item.get("content"), attributes)}
        else:
            raise TranscriptError(
                f"an item of type {kind!r} is not supported; ctxweb takes {', '.join(ITEM_TYPES)} items"
            )
        if attributes:
            message["attributes"] = attributes
        self.add(index, message)
        if message["role"] == "assistant":
            self.open_assistant = message


def convert_items(items: list, where: Callable[[int], str], message_id: Callable[[int], str | None] = lambda i: None
                  ) -> list[tuple[int, dict]]:
    """Responses input items as ctxweb messages, each with the index of the item it came from (the first
    one, for an assistant message joined from several). Raises ItemError naming the item."""
    conversion = Conversion(message_id)
    for index, item in enumerate(items):
        try:
            conversion.item(index, item)
        except TranscriptError as exc:
            raise ItemError(index, f"{where(index)}: {exc}") from None
    conversion.flush_reasoning()
    return conversion.out


def instructions_of(messages: list[dict]) -> str | None:
    """The text of the first system (or developer) message."""
    return next((text_of(m["content"]) for m in messages if m["role"] == "system"), None)


def looks_like(value) -> bool:
    """A list of Responses input items (at least one with a `type` of its own), or a request body with
    `input`."""
    if isinstance(value, dict):
        return isinstance(value.get("input"), list | str) and not {"messages", "traj"} & value.keys()
    if not isinstance(value, list) or not value or not all(_looks_like_item(item) for item in value):
        return False
    return any(item.get("type") in ITEM_TYPES for item in value)


def _looks_like_item(item) -> bool:
    """A message (with or without `type`) or an item of another type; not a record holding messages."""
    if not isinstance(item, dict) or {"messages", "traj"} & item.keys():
        return False
    if item.get("type", "message") == "message":
        return "role" in item and "content" in item
    return isinstance(item["type"], str)


def parse(value, source: Source) -> Parsed:
    """One session from a list of items, or from a request body (`instructions`, `input` and the other
    fields, which become the session's metadata)."""
    metadata, instructions = {}, None
    if isinstance(value, dict):
        metadata = {k: v for k, v in value.items() if k not in ("input", "instructions")}
        instructions = value.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise TranscriptError("instructions must be a string")
        items = value.get("input")
        if not isinstance(items, list | str):
            raise TranscriptError("a Responses request body needs `input`: a list of input items or a string "
                                  f"({'it has none' if 'input' not in value else 'not ' + type(items).__name__})")
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
    elif isinstance(value, list):
        items = value
    else:
        raise TranscriptError("expected a list of Responses input items or a request body with `input`")
    converted = convert_items(items, lambda i: f"item {i}", lambda i: source.message_id(0, i))
    messages = [message for _, message in converted]
    if instructions:
        messages.insert(0, {"id": source.message_id(0, "instructions"), "role": "system", "content": instructions})
    session = ImportedSession(
        key=source.key(),
        messages=messages,
        metadata={**metadata, "imported_from": source.provenance(FORMAT)},
        instructions=instructions or instructions_of(messages),
    )
    return Parsed(FORMAT, [session])


# --- rendering: the model input in this format --------------------------------------------------


def _responses_text(content) -> str:
    """Content as one string, for assistant messages: the Responses API takes output parts in them only
    with the id and status of the response that produced them, so the text is sent on its own."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] if part["type"] == "text" else image_placeholder(part["url"]) for part in content)


def _responses_parts(content, image_detail: bool):
    """Content as Responses input parts (`input_text`, `input_image`); a string stays a string.
    `image_detail`: message images must say their detail, tool output images may."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part["type"] == "text":
            parts.append({"type": "input_text", "text": part["text"]})
        elif not provider_image(part["url"]):
            parts.append({"type": "input_text", "text": image_placeholder(part["url"])})
        else:
            image = {"type": "input_image", "image_url": part["url"]}
            if part.get("detail") or image_detail:
                image["detail"] = part.get("detail") or "auto"
            parts.append(image)
    return parts or ""


def to_openai_responses(model_input: InputToRender) -> list[dict]:
    """The `input` items of an OpenAI Responses API request: the instructions as a `developer` message,
    user and assistant messages as `message` items, an assistant message's tool calls as `function_call`
    items after it, tool results as `function_call_output` items. Reasoning is not part of the model
    input, so no `reasoning` item is sent; a message's `name` has no place in an item."""
    items = []
    for entry in model_input.entries:
        role = provider_role(entry.role)
        if entry.kind == "instructions":
            items.append({"type": "message", "role": "developer", "content": entry.content})
        elif role == Role.TOOL:
            items.append({"type": "function_call_output", "call_id": entry.tool_call_id,
                          "output": _responses_parts(entry.content, image_detail=False)})
        elif role == Role.ASSISTANT:
            text = _responses_text(entry.content)
            if text or not entry.tool_calls:
                items.append({"type": "message", "role": "assistant", "content": text})
            items += [
                {"type": "function_call", "call_id": c["id"], "name": c["name"], "arguments": c["arguments"]}
                for c in entry.tool_calls
            ]
        else:
            items.append({"type": "message", "role": "user", "content": _responses_parts(entry.content, image_detail=True)})
    return items
