"""Token accounting, the way OpenAI documents it for its chat models.

Every message costs MESSAGE_OVERHEAD tokens plus the tokens of its role and its text; a `name` costs
its tokens plus NAME_OVERHEAD, counted as OpenAI is sent it (openai_name) and not at all on a tool
message, whose name no provider format sends; a whole model input costs REPLY_PRIMING more. Tool calls count their
name and their arguments. Images count by OpenAI's published tile formula when width and height are
known and IMAGE_FLAT_ESTIMATE otherwise. Reasoning is counted on its own and never into the input.
"""

import functools
import math
import re
from dataclasses import dataclass, field

import tiktoken
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Characters OpenAI refuses in a message's name (and Anthropic in a tool id).
NOT_NAME_CHARACTER = re.compile(r"[^a-zA-Z0-9_-]")
MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
REPLY_PRIMING = 3

IMAGE_LOW_DETAIL = 85
IMAGE_BASE = 85
IMAGE_PER_TILE = 170
# A 1024x1024 image at high detail: 4 tiles of 512 px (4 * 170 + 85). Used when the size is unknown.
IMAGE_FLAT_ESTIMATE = 765


@functools.cache
def load_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding called `name`, preferring a copy bundled for offline use."""
    available = tiktoken.list_encoding_names()
    offline = f"{name}_offline"
    try:
        if offline in available:
            return tiktoken.get_encoding(offline)
        return tiktoken.get_encoding(name)
    except Exception as exc:  # tiktoken raises ValueError, network or file errors
        raise ImproperlyConfigured(
            f"The token encoding {name!r} cannot be loaded ({exc}). Set CTXWEB_TOKEN_ENCODING to one of "
            f"the encodings available offline, such as 'cl100k_base'."
        ) from exc


def encoding() -> tiktoken.Encoding:
    return load_encoding(settings.CTXWEB_TOKEN_ENCODING)


def count_text(text: str) -> int:
    if not text:
        return 0
    # Ordinary encoding: text that happens to contain "<|endoftext|>" is text here, not a special token.
    return len(encoding().encode_ordinary(text))


@functools.lru_cache(maxsize=4096)
def count_label(text: str) -> int:
    """count_text for the short strings every message repeats (roles, names): counted once each."""
    return count_text(text)


def count_image(width: int | None, height: int | None, detail: str | None = None) -> int:
    if detail == "low":
        return IMAGE_LOW_DETAIL
    if not width or not height or width <= 0 or height <= 0:
        return IMAGE_FLAT_ESTIMATE
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return IMAGE_BASE + IMAGE_PER_TILE * tiles


def count_content(content) -> int:
    """Tokens of a message's content: a string or a list of normalised text/image parts."""
    if content is None:
        return 0
    if isinstance(content, str):
        return count_text(content)
    total = 0
    for part in content:
        if part.get("type") == "text":
            total += count_text(part.get("text", ""))
        elif part.get("type") == "image":
            total += count_image(part.get("width"), part.get("height"), part.get("detail"))
    return total


def count_tool_call(name: str, arguments: str) -> int:
    return (count_label(name) if len(name) <= 64 else count_text(name)) + count_text(arguments)


@dataclass
class MessageTokens:
    total: int
    tool_calls: list[int] = field(default_factory=list)
    reasoning: int = 0


def provider_role(role: str) -> str:
    """The role a provider sees: `agent` continuations are user input."""
    return "user" if role == "agent" else role


def openai_name(name: str) -> str:
    """A message's name as the `openai` format sends it (`Bob Smith` as `Bob_Smith`)."""
    return NOT_NAME_CHARACTER.sub("_", name)[:64]


def count_message(role: str, content=None, name: str = "", tool_calls=(), reasoning: str = "") -> MessageTokens:
    """Token figures of one normalised message (tool_calls as [{"id","name","arguments"}]): what the
    `openai` format sends of it, so the totals of a model input are a recount of that payload."""
    total = MESSAGE_OVERHEAD + count_label(provider_role(role)) + count_content(content)
    if name and role != "tool":
        total += count_label(openai_name(name)) + NAME_OVERHEAD
    per_call = [count_tool_call(call["name"], call["arguments"]) for call in tool_calls or ()]
    total += sum(per_call)
    return MessageTokens(total=total, tool_calls=per_call, reasoning=count_text(reasoning))
