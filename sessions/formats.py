"""The model input rendered for a provider: ctxweb's own shape, OpenAI Chat Completions, Anthropic Messages."""

import json
import re

import orjson
from django.db import connections, router

from .errors import Conflict
from .model_input import VISIBLE_SQL, ModelInput, Omission, Reason, StoredText, head_entries
from .models import Checkpoint, Message, Role, Session
from .tokens import NOT_NAME_CHARACTER, REPLY_PRIMING, openai_name, provider_role

DATA_URL_RE = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?(?:;[\w=.+-]+)*;base64,(.*)$", re.IGNORECASE | re.DOTALL)
FORMATS = ("ctxweb", "openai", "anthropic", "openai-responses")
# The image types both providers document for base64 images. An image a provider does not take where
# it stands (another type, a data: URL without base64, an image in an assistant message) reaches the
# model as a text placeholder, so the request stays valid and the model still knows it was there.
PROVIDER_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
# An Anthropic request must open with a user message.
ANTHROPIC_OPENING = "(The conversation begins with an assistant message.)"


# Entry fields of the ctxweb format that are left out when empty: (key, entry attribute).
CTXWEB_OPTIONAL_FIELDS = (
    ("id", "client_id"), ("tool_calls", "tool_calls"), ("pending_tool_calls", "pending_calls"),
    ("dropped_tool_calls", "dropped_calls"), ("tool_call_id", "tool_call_id"), ("name", "name"),
    ("is_error", "is_error"), ("edited_by_application", "edited"), ("application_message", "own"),
)


def to_ctxweb(model_input: ModelInput) -> list[dict]:
    """The entries as ctxweb messages with where they sit; the newest assistant message's calls that
    await their results are shown as `pending_tool_calls` (that message last, with 0 tokens, when
    nothing of it is sent yet)."""
    out = []
    awaiting = [model_input.awaiting] if model_input.awaiting else []
    for entry in model_input.entries + awaiting:
        item = {"kind": entry.kind, "role": entry.role, "content": entry.content, "tokens": entry.tokens}
        if entry.seq is not None:
            item["seq"] = entry.seq
        for key, attribute in CTXWEB_OPTIONAL_FIELDS:
            if value := getattr(entry, attribute):
                item[key] = value
        if entry.checkpoint is not None:
            item["checkpoint_id"] = entry.checkpoint.pk
        out.append(item)
    return out


def _openai_content(content, role: str):
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part["type"] == "text":
            parts.append({"type": "text", "text": part["text"]})
        elif role != Role.USER or not _provider_image(part["url"]):  # only user messages carry images
            parts.append({"type": "text", "text": _image_placeholder(part["url"])})
        else:
            image = {"url": part["url"]}
            if part.get("detail"):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
    return parts or ""  # an empty list of parts is not content to OpenAI


def _provider_image(url: str) -> bool:
    """An image URL both providers fetch (http, https) or decode (a base64 data: URL of a type they take)."""
    if url.startswith(("http://", "https://")):
        return True
    match = DATA_URL_RE.match(url)
    return bool(match) and (match.group(1) or "").lower() in PROVIDER_IMAGE_TYPES


def _image_placeholder(url: str) -> str:
    return f"[image: {_short_url(url)}]"


def _short_url(url: str) -> str:
    return url if len(url) <= 80 else url[:77] + "..."


def to_openai(model_input: ModelInput) -> list[dict]:
    """What the application sent (a recorded request) goes out exactly as it was sent; the rest is rendered."""
    sent = model_input.sent_messages or []
    return list(sent) + [openai_message(e.role, e.content, e.tool_calls, e.tool_call_id, e.name)
                         for e in model_input.entries[len(sent):]]


# The roles as plain strings, looked up once: an input can hold thousands of entries.
_ASSISTANT, _TOOL = str(Role.ASSISTANT), str(Role.TOOL)


def openai_message(role: str, content, tool_calls: list, tool_call_id: str, name: str) -> dict:
    """One entry of the model input as the `openai` format sends it. A stored message sent whole is
    rendered so once, when it is stored (stored_openai_message)."""
    role = provider_role(role)
    if type(content) is not str and type(content) is not StoredText:  # a string as stored is sent as it is
        content = _openai_content(content, role)
    if role == _ASSISTANT and tool_calls:
        message = {"role": role, "content": content if content else None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in tool_calls
        ]}
    else:
        message = {"role": role, "content": content}
    if role == _TOOL:
        message["tool_call_id"] = tool_call_id
    elif name:
        message["name"] = openai_name(name)
    return message


def stored_openai_message(role: str, content, tool_calls: list, tool_call_id: str, name: str) -> str | None:
    """What Message.openai_message stores: the message as the `openai` format sends it whole, as JSON
    text; None for a system message (never in the model input) and for what orjson refuses to write
    (a lone surrogate), which a fetch then renders as before.

    Stored renderings outlive the code that wrote them: a change to how a stored message is rendered (a
    key, a placeholder) must come with a migration that renders every stored message again, or sets the
    column to NULL (a NULL is rendered when the input is fetched). tests/test_stored_openai.py pins the
    rendering of each kind of message, so that such a change cannot pass unnoticed."""
    if role == Role.SYSTEM:
        return None
    try:
        return orjson.dumps(openai_message(role, content, tool_calls, tool_call_id, name)).decode()
    except orjson.JSONEncodeError:
        return None


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
        if not images or not _provider_image(url) or (match and not match.group(2)):  # no bytes: no image
            blocks.append({"type": "text", "text": _image_placeholder(url)})
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


def _arguments_object(arguments: str):
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def pretty_arguments(arguments: str) -> str:
    """Tool call arguments for people to read: indented when they are JSON, else as the model wrote them."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments


def to_anthropic(model_input: ModelInput) -> dict:
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
                {"type": "tool_use", "id": new_id, "name": c["name"], "input": _arguments_object(c["arguments"])}
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


def render_model_input(model_input: ModelInput, fmt: str):
    """The model input in one of FORMATS."""
    if fmt == "openai":
        return to_openai(model_input)
    if fmt == "anthropic":
        return to_anthropic(model_input)
    if fmt == "openai-responses":
        return to_openai_responses(model_input)
    return to_ctxweb(model_input)


class NothingToSend(Conflict):
    code = "nothing_to_send"


NOTHING_TO_SEND = {
    "openai": "Nothing to send: the model input is empty (no instructions and no message), and OpenAI Chat "
              "Completions needs at least one message. Set instructions or append a message first.",
    "anthropic": "Nothing to send: the model input holds no message besides the instructions, and Anthropic "
                 "Messages needs at least one. Append a user message first.",
}


def check_something_to_send(model_input: ModelInput, fmt: str, rendered=None) -> None:
    """A provider format with no message in it is not a request its provider takes: NothingToSend (409)."""
    if fmt not in NOTHING_TO_SEND:
        return
    rendered = render_model_input(model_input, fmt) if rendered is None else rendered
    if not (rendered["messages"] if fmt == "anthropic" else rendered):
        raise NothingToSend(NOTHING_TO_SEND[fmt])


def model_input_response(model_input: ModelInput, fmt: str) -> dict:
    """The model input in `fmt` with its figures, in the shape of schemas.ModelInputOut."""
    rendered = render_model_input(model_input, fmt)
    check_something_to_send(model_input, fmt, rendered)
    totals = {"instructions": 0, "summary": 0, "messages": 0, "request": 0}
    for entry in model_input.entries:
        totals["messages" if entry.kind == "message" else entry.kind] += entry.tokens
    request = model_input.request
    return {
        "format": fmt,
        "session": model_input.session.key,
        "as_of": model_input.as_of,
        "basis": model_input.basis,
        "request": request.number if request is not None else None,
        "derived_from": (request.derived_from or None) if request is not None else None,
        "checkpoint": model_input.checkpoint,
        "tokens": {"total": model_input.tokens, **totals},
        "system": rendered.get("system") if fmt == "anthropic" else None,
        "messages": rendered["messages"] if fmt == "anthropic" else rendered,
        "omitted": model_input.omitted,
        "pending_tool_calls": model_input.pending_tool_calls,
    }


# --- the `openai` input from the stored renderings ----------------------------------------------

# The omissions that leave a stored message out whole, which the stored figures say in full: any other
# (a call awaiting its result, a message sent without some of its calls) needs the message's fields.
WHOLE_OMISSIONS = (Reason.ORPHAN, Reason.DROPPED)
# At most this many stored messages left out are skipped in the read itself; past it (a log of orphaned
# results) the input is built in full.
MAX_SKIPPED = 500

# The stored renderings of the visible messages after the checkpoint, in seq order, and whether the session
# row is still as the request read it (UNCHANGED_SQL): the figures the response is written from come from
# that row, and one statement reads from one state of the database, so the two agree. Parameters:
# UNCHANGED_SQL's, VISIBLE_SQL's, then the seqs to skip.
#
# On SQLite the renderings are joined by commas in the database, with how many messages there are and
# how many have a rendering (a NULL is not joined): joining 700 renderings in Python took longer than
# reading them (a 766-message input: read 0.31 ms, joined 0.40; joined in the read, 0.16 in all). SQLite
# 3.40 takes no ORDER BY in an aggregate: the rows come in order from a subquery, which SQLite does not
# flatten into an aggregate that it feeds (its flattening rule 16). The text comes as bytes, as the
# response is written. On PostgreSQL the rows are read and joined here: string_agg, ordered or fed by an
# ordered subquery, took 1.9-2.5 ms for 726 messages where reading the rows and joining them took 1.1-1.5.
UNCHANGED_SQL = (f'(SELECT count(*) FROM "{Session._meta.db_table}" WHERE "id" = %s AND "message_count" = %s '
                 'AND "checkpoint_count" = %s AND "updated_at" = %s)')
STORED_OPENAI_SQL = {
    "sqlite": f'SELECT {UNCHANGED_SQL}, count(*), count("openai_message"), '
              'CAST(group_concat("openai_message", \',\') AS BLOB) '
              f'FROM (SELECT "openai_message" {VISIBLE_SQL}{{skip}} ORDER BY "seq")',
    "postgresql": f'SELECT {UNCHANGED_SQL}, "openai_message" {VISIBLE_SQL}{{skip}} ORDER BY "seq"',
}


def _stored_renderings(db, session: Session, after_seq: int, skipped: list[int]) -> tuple[int, bytes] | None:
    """How many stored messages the input sends, and their renderings joined by commas. None when one of
    them has no rendering, or the session changed since it was read (an append, a checkpoint, a flag, its
    instructions or settings: each moves one of UNCHANGED_SQL's columns)."""
    skip = f' AND "seq" NOT IN ({", ".join(["%s"] * len(skipped))})' if skipped else ""
    as_read = [session.pk, session.message_count, session.checkpoint_count,
               db.ops.adapt_datetimefield_value(session.updated_at)]
    with db.cursor() as cursor:
        cursor.execute(STORED_OPENAI_SQL[db.vendor].format(skip=skip),
                       [*as_read, session.pk, after_seq, Role.SYSTEM, *skipped])
        if db.vendor == "sqlite":
            unchanged, count, rendered, joined = cursor.fetchone()
            return (count, joined or b"") if unchanged and rendered == count else None
        rows = cursor.fetchall()
        if not rows:  # no message to send: whether the session changed is asked on its own
            cursor.execute(f"SELECT {UNCHANGED_SQL}", as_read)
            return (0, b"") if cursor.fetchone()[0] else None
    if not rows[0][0]:
        return None
    renderings = [text for _, text in rows]
    if None in renderings:
        return None
    return len(renderings), ",".join(renderings).encode()


def stored_openai_response(session: Session, checkpoint: Checkpoint | None) -> dict | None:
    """The `openai` model input of `session` now, as model_input_response gives it, from what was stored
    when each part of it was: every message's rendering (Message.openai_message), written with the
    message, and the session's figures of its input (input_tokens, input_left_out), which every change
    to the input updates in its own transaction (the session page lays the input out from them too).
    One read of the renderings (STORED_OPENAI_SQL): no field is decoded, checked or rendered again, and
    the messages go into the response as the JSON text they are. The same JSON as built in full
    (tests/test_stored_openai.py compares the two on every transcript).

    None where the stored parts cannot say it all, for build_model_input to build it: a call awaiting
    its result or a message sent without some of its calls (either is sent otherwise than stored), a
    message stored without its rendering, a session changed since the request read it (its figures
    would not be those of the messages read), a database of another kind; and a session rebuilt from
    recorded requests, whose stored figures are those of what its application sent."""
    if session.request_count:
        return None
    left_out = session.input_left_out
    if len(left_out) > MAX_SKIPPED or any(
        o["reason"] not in WHOLE_OMISSIONS or not o.get("whole_message", True) for o in left_out
    ):
        return None
    db = connections[router.db_for_read(Message, instance=session)]
    if db.vendor not in STORED_OPENAI_SQL:
        return None
    stored = _stored_renderings(db, session, checkpoint.last_seq if checkpoint else 0, [o["seq"] for o in left_out])
    if stored is None:
        return None
    count, joined = stored
    entries = head_entries(session, checkpoint)
    head = [orjson.dumps(openai_message(e.role, e.content, e.tool_calls, e.tool_call_id, e.name)) for e in entries]
    totals = {"instructions": 0, "summary": 0, "request": 0, **{e.kind: e.tokens for e in entries}}
    if not head and not count:
        raise NothingToSend(NOTHING_TO_SEND["openai"])
    if count:
        head.append(joined)
    totals["messages"] = session.input_tokens - REPLY_PRIMING - session.instructions_tokens - totals["summary"]
    return {
        "format": "openai",
        "session": session.key,
        "as_of": None,
        "basis": "raw_log",
        "request": None,
        "derived_from": None,
        "checkpoint": checkpoint,
        "tokens": {"total": session.input_tokens, **totals},
        "system": None,
        "messages": orjson.Fragment(b"[" + b",".join(head) + b"]"),
        "omitted": [Omission.from_dict(o) for o in left_out],
        "pending_tool_calls": [],
    }


# --- OpenAI Responses API ------------------------------------------------------------------------


def _responses_text(content) -> str:
    """Content as one string, for assistant messages: the Responses API takes output parts in them only
    with the id and status of the response that produced them, so the text is sent on its own."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] if part["type"] == "text" else _image_placeholder(part["url"]) for part in content)


def _responses_parts(content, image_detail: bool):
    """Content as Responses input parts (`input_text`, `input_image`); a string stays a string.
    `image_detail`: message images must say their detail, tool output images may."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part["type"] == "text":
            parts.append({"type": "input_text", "text": part["text"]})
        elif not _provider_image(part["url"]):
            parts.append({"type": "input_text", "text": _image_placeholder(part["url"])})
        else:
            image = {"type": "input_image", "image_url": part["url"]}
            if part.get("detail") or image_detail:
                image["detail"] = part.get("detail") or "auto"
            parts.append(image)
    return parts or ""


def to_openai_responses(model_input: ModelInput) -> list[dict]:
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
