"""The one validation path of messages and other client values: the pydantic
schemas of sessions.http.schemas own types, lengths and shapes; this module turns their errors into plain
words with the API's error codes, and keeps the semantic rules (which role may carry which field)
before anything touches the database. The API, the importers, the dashboard and the management
commands all validate here."""

import hashlib
import json
from functools import cache, cached_property
from types import SimpleNamespace

from django.conf import settings
from pydantic import TypeAdapter
from pydantic import ValidationError as SchemaError

from sessions.errors import DomainError, TooLarge
from sessions.models import MODEL_FIELDS, Role
from sessions.wire import ctxweb as schemas
from sessions.wire.grams import search_grams
from sessions.wire.openai import stored_openai_message
from sessions.wire.tokens import REPLY_PRIMING, MessageTokens, count_message

MESSAGE_FIELDS = set(schemas.MessageIn.model_fields)


class NewMessage(SimpleNamespace):
    """A message that passed MessageIn and the semantic rules, normalised, with its token figures (counted
    once, when first needed). It holds every field of MessageIn: those new_message normalises or derives
    (below), and the others as the client sent them (role, is_error, include_in_messages, persist,
    created_at...), so a field added to MessageIn reaches insert_messages, which reads the model's columns
    by name, without a line here. A namespace, not a pydantic model: one is built for every message
    appended, cheaply."""

    content: str | list  # None as "", OpenAI image parts as ours
    text: str  # the text parts, joined
    reasoning: str
    tool_calls: list  # [{"id", "name", "arguments"}], arguments as a string
    tool_call_id: str
    name: str
    attributes: dict
    client_id: str  # the `id` sent; "" until the message is stored, when the server makes one
    digest: str
    seq: int | None = None  # set once stored
    call_seq: int | None = None  # for a tool result: the seq of the call it answers, set once stored

    @cached_property
    def figures(self) -> MessageTokens:
        """Its token figures, counted when first asked for, then kept: a message that a recorded request
        sends again is matched to the raw log by its digest and never counted again."""
        return count_message(self.role, self.content, self.name, self.tool_calls, self.reasoning)

    @property
    def tokens(self) -> int:
        return self.figures.total

    @property
    def tool_call_tokens(self) -> list[int]:
        return self.figures.tool_calls

    @property
    def reasoning_tokens(self) -> int:
        return self.figures.reasoning

    @property
    def call_ids(self) -> list[str]:
        return [call["id"] for call in self.tool_calls]

    @property
    def openai_message(self) -> str | None:
        """As the `openai` model input sends it whole (Message.openai_message)."""
        return stored_openai_message(self)

    @property
    def has_content(self) -> bool:
        return bool(self.text.strip()) or (isinstance(self.content, list) and len(self.content) > 0)


def fail(index: int | None, detail: str, code: str) -> DomainError:
    where = f"messages[{index}]: " if index is not None else ""
    extra = {"index": index} if index is not None else {}
    return DomainError(where + detail, code=code, **extra)


# --- schema errors in plain words ----------------------------------------------------------------

# Error types raised by the schemas' own validators that are the API's codes as they are.
OWN_CODES = {"text_too_long", "json_too_deep", "image_too_large", "invalid_content", "invalid_tool_calls",
             "invalid_field"}
FIELD_CODES = {"role": "invalid_role", "content": "invalid_content", "tool_calls": "invalid_tool_calls"}


def field_path(loc) -> str:
    """A pydantic location as a client reads it: `content[1].url`, without union branch names."""
    path = ""
    for part in loc:
        if part in schemas.UNION_TAGS:
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


PLAIN = {
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "missing": "is required",
    "extra_forbidden": "is not a known field",
    "union_tag_invalid": "has an unknown type",
    "datetime_type": "must be an ISO 8601 date-time string",
}


def plain_message(error: dict) -> str:
    """A schema error as a clause that follows the field's name: `must be an object`."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in PLAIN:
        return PLAIN[kind]
    if kind == "literal_error":
        return f"must be {ctx['expected']}"
    if kind in ("greater_than_equal", "greater_than"):
        return f"must be a whole number of at least {ctx.get('ge', ctx.get('gt'))}"
    if kind in ("less_than_equal", "less_than"):
        return f"must be a whole number of at most {ctx.get('le', ctx.get('lt'))}"
    if kind == "string_too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else f"must be at least {ctx['min_length']} characters"
    if kind == "string_too_long":
        return f"must be at most {ctx['max_length']} characters"
    if kind == "too_short":
        return f"must hold at least {ctx.get('min_length')} item(s)"
    message = error["msg"]
    if kind not in OWN_CODES and kind != "not_storable":
        message = message[:1].lower() + message[1:]  # pydantic's own sentences, as a clause
    return message


def error_code(error: dict, field: str) -> str:
    kind = error["type"]
    if kind in OWN_CODES:
        return kind
    if kind == "extra_forbidden" and "." not in field and "[" not in field:
        return "unknown_field"
    return FIELD_CODES.get(field.split(".")[0].split("[")[0], "invalid_field")


def schema_error(exc: SchemaError, *, batch: bool = False, name: str = "") -> DomainError:
    """The first error of a schema, as the DomainError a client gets: the field named in plain words,
    the API's code (413 for an image over the limit)."""
    errors = exc.errors(include_url=False)
    error = errors[0]
    loc = list(error["loc"])
    index = loc.pop(0) if batch and loc and isinstance(loc[0], int) else None
    if error["type"] == "extra_forbidden" and len(loc) == 1:
        unknown = sorted({str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden"
                          and len(e["loc"]) == len(error["loc"]) and e["loc"][:-1] == error["loc"][:-1]})
        if batch:
            detail = f"unknown field(s) {', '.join(unknown)}; application data belongs in attributes"
            return fail(index, detail, "unknown_field")
        return DomainError(f"unknown field(s) {', '.join(unknown)}", code="invalid_field")
    if batch and not loc and error["type"] in ("model_type", "dict_type", "model_attributes_type"):
        return fail(index, "a message must be an object", "invalid_message")
    path = ".".join(filter(None, (name, field_path(loc))))
    code = error_code(error, field_path(loc))
    detail = f"{path} {plain_message(error)}" if path else plain_message(error)
    if code == "image_too_large":
        where = f"messages[{index}]: " if index is not None else ""
        return TooLarge(where + detail, code=code, **({"index": index} if index is not None else {}))
    return fail(index, detail, code)


@cache
def adapter(schema) -> TypeAdapter:
    return TypeAdapter(schema)


def validated(schema, value, name: str = ""):
    """`value` validated by `schema` (a pydantic model or type), or a DomainError in plain words."""
    try:
        return adapter(schema).validate_python(value)
    except SchemaError as exc:
        raise schema_error(exc, name=name) from None


def check_text(value: str, index, name, code="invalid_field") -> str:
    """Text a client sends: at most CTXWEB_MAX_TEXT_CHARS characters, and storable."""
    try:
        return adapter(schemas.Text).validate_python(value)
    except SchemaError as exc:
        error = exc.errors(include_url=False)[0]
        kind = "text_too_long" if error["type"] == "text_too_long" else code
        raise fail(index, f"{name} {plain_message(error)}", kind) from None


def check_json(value, index, name):
    """Free-form JSON from a client (attributes, metadata), storable and not nested too deep."""
    try:
        return adapter(schemas.JsonObject).validate_python(value)
    except SchemaError as exc:
        error = exc.errors(include_url=False)[0]
        raise fail(index, f"{name} {plain_message(error)}", error_code(error, name)) from None


def content_text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part["type"] == "text")


def image_parts(content) -> int:
    """How many image parts a message's content holds (stored or as a client sends it)."""
    if not isinstance(content, list):
        return 0
    return sum(1 for part in content if isinstance(part, dict) and part.get("type") in ("image", "image_url"))


def check_image_parts(messages: list[NewMessage], start: int | None = 0) -> None:
    """The caps on image parts per message and per batch (each costs hundreds of tokens for a few bytes
    of URL): 422 too_many_images past either."""
    per_message = settings.CTXWEB_MAX_IMAGE_PARTS_PER_MESSAGE
    total = 0
    for index, message in enumerate(messages):
        count = image_parts(message.content)
        if count > per_message:
            detail = f"a message may hold at most {per_message} image parts; this one holds {count}"
            raise fail(None if start is None else start + index, detail, "too_many_images")
        total += count
    per_request = settings.CTXWEB_MAX_IMAGE_PARTS_PER_REQUEST
    if total > per_request:
        raise DomainError(f"a request may hold at most {per_request} image parts; this one holds {total}",
                          code="too_many_images")


def _content(content) -> str | list:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, schemas.ImageUrlPart):
            part = part.as_image()
        parts.append(part.model_dump(exclude_none=True))
    return parts


def _tool_call(call: schemas.ToolCallIn) -> dict:
    arguments = call.arguments
    if arguments is None:
        arguments = ""
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
        check_text(arguments, None, "tool call arguments", "invalid_tool_calls")
    return {"id": call.id, "name": call.name, "arguments": arguments}


# MODEL_FIELDS hashed as they are, always: those the fingerprint held from the start.
DIGEST_ALWAYS = ("name",)


def message_digest(role, content, reasoning, tool_calls, tool_call_id, fields: dict) -> str:
    """A fingerprint of what the model sees of a message, to tell a retried message from a conflicting
    one; `fields` are its MODEL_FIELDS. Its parts are normalised already (parts and tool calls built with
    a fixed key order), so plain text is hashed as it is and only structured parts go through JSON. A
    field added to MODEL_FIELDS later adds parts only when the message holds more than its default (a
    boolean its name, any other value its name and the value), so messages stored before the field
    existed still match their retries: is_error, which Anthropic sends, was the first."""
    digest = hashlib.sha256()
    parts = [role, content, reasoning, tool_calls, tool_call_id, *(fields[name] for name in DIGEST_ALWAYS)]
    for name, default in MODEL_FIELDS.items():
        value = fields[name]
        if name not in DIGEST_ALWAYS and value != default:
            parts += [name] if isinstance(default, bool) else [name, value]
    for part in parts:
        if isinstance(part, str):
            digest.update(b"s")
            digest.update(part.encode())
        else:
            digest.update(b"j")
            digest.update(json.dumps(part, ensure_ascii=False, separators=(",", ":")).encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def new_message(message: schemas.MessageIn, index: int | None = None) -> NewMessage:
    """A message that passed the schema, checked against the semantic rules (which role may carry
    which field) and normalised, with its token figures."""
    role = message.role
    given = message.model_fields_set
    tool_calls = [_tool_call(call) for call in message.tool_calls or ()]
    if tool_calls and role != Role.ASSISTANT:
        raise fail(index, "tool_calls are only allowed on assistant messages", "field_not_allowed")
    ids = [call["id"] for call in tool_calls]
    if len(set(ids)) != len(ids):
        raise fail(index, "tool call ids must be unique within a message", "invalid_tool_calls")
    reasoning = message.reasoning or ""
    if reasoning and role != Role.ASSISTANT:
        raise fail(index, "reasoning is only allowed on assistant messages", "field_not_allowed")
    tool_call_id = message.tool_call_id or ""
    if role == Role.TOOL and not tool_call_id:
        raise fail(index, "a tool message needs the tool_call_id of the call it answers", "missing_tool_call_id")
    if role != Role.TOOL and tool_call_id:
        raise fail(index, "tool_call_id is only allowed on tool messages", "field_not_allowed")
    if role != Role.TOOL and message.is_error:
        raise fail(index, "is_error is only allowed on tool messages", "field_not_allowed")
    may_be_empty = role == Role.ASSISTANT and bool(tool_calls)
    if "content" not in given and not may_be_empty:
        raise fail(index, "content is required", "invalid_content")
    if "content" in given and message.content is None and not may_be_empty:
        raise fail(index, "content may be null only on an assistant message with tool calls", "invalid_content")
    content = _content(message.content)
    text = content_text(content)
    sent = {name: getattr(message, name) or default for name, default in MODEL_FIELDS.items()}  # never null
    fields = vars(message).copy()  # every field as sent; the normalised ones are replaced below
    fields["client_id"] = fields.pop("id") or ""
    fields.update(
        content=content,
        text=text,
        reasoning=reasoning,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        attributes=message.attributes or {},
        search_grams=search_grams(text),
        digest=message_digest(role, content, reasoning, tool_calls, tool_call_id, sent),
        **sent,
    )
    return NewMessage(**fields)


def parse_message(data, index: int | None = None) -> NewMessage:
    """Validate one message a client sent (the ctxweb format) and return it normalised."""
    try:
        message = adapter(schemas.MessageIn).validate_python(data)
    except SchemaError as exc:
        if index is None:
            raise schema_error(exc) from None
        raise schema_error(SchemaErrorAt(exc, index), batch=True) from None
    parsed = new_message(message, index)
    check_image_parts([parsed], index)
    return parsed


class SchemaErrorAt:
    """A message's schema errors seen as those of a batch, at the message's index."""

    def __init__(self, exc: SchemaError, index: int):
        self.exc, self.index = exc, index

    def errors(self, include_url=False):
        return [{**e, "loc": (self.index, *e["loc"])} for e in self.exc.errors(include_url=include_url)]


def parse_messages(raw_messages) -> list[NewMessage]:
    """A batch in the ctxweb format, validated whole: the first error refuses it."""
    if not isinstance(raw_messages, list):
        raise DomainError("messages must be a list", code="invalid_batch")
    if not raw_messages:
        raise DomainError("messages must hold at least one message", code="empty_batch")
    limit = settings.CTXWEB_MAX_BATCH_MESSAGES
    if len(raw_messages) > limit:
        raise DomainError(f"at most {limit} messages per batch", code="batch_too_large")
    try:
        batch = adapter(list[schemas.MessageIn]).validate_python(raw_messages)
    except SchemaError as exc:
        raise schema_error(exc, batch=True) from None
    messages = [new_message(message, index) for index, message in enumerate(batch)]
    check_image_parts(messages)
    return messages


def text_chars(value) -> int:
    """Characters in every string of a JSON value, keys included: a bound on what tokenizing it reads."""
    total, pending = 0, [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            total += sum(len(k) for k in item if isinstance(k, str))
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return total


def count_openai_messages(messages) -> tuple[int, list[int]]:
    """Token count of an OpenAI-format message list: the total with reply priming, and
    each message's figure. Fields that do not reach the model's context are ignored. All their text
    together may not exceed CTXWEB_MAX_TOKEN_COUNT_CHARS characters (413, before any is tokenized)."""
    if not isinstance(messages, list) or not messages:
        raise DomainError("messages must be a non-empty list", code="invalid_batch")
    chars, most = text_chars(messages), settings.CTXWEB_MAX_TOKEN_COUNT_CHARS
    if chars > most:
        raise TooLarge(
            f"messages hold {chars:,} characters of text; one token count takes at most {most:,} "
            "(CTXWEB_MAX_TOKEN_COUNT_CHARS). Count them in smaller parts.",
            code="too_much_text",
        )
    per_message = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise fail(index, "a message must be an object", "invalid_message")
        role = "system" if message.get("role") == "developer" else message.get("role")
        shape = {"role": role, "content": message.get("content"), "tool_calls": message.get("tool_calls") or None,
                 "name": message.get("name")}
        try:
            parsed = adapter(schemas.MessageIn).validate_python({k: v for k, v in shape.items() if v is not None})
        except SchemaError as exc:
            raise schema_error(SchemaErrorAt(exc, index), batch=True) from None
        content = _content(parsed.content)
        calls = [_tool_call(call) for call in parsed.tool_calls or ()]
        per_message.append(count_message(parsed.role, content, parsed.name or "", calls).total)
    return REPLY_PRIMING + sum(per_message), per_message
