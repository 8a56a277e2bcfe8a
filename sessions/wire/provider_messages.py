"""Messages sent in a provider's own shape (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses
input items) read as ctxweb messages, by the same parsers as the importers (sessions.ingest.importers), for
appends and request builds.

System messages (OpenAI's `system`/`developer` messages and items, Anthropic's separate `system`) become
the session's instructions as well, so a model input fetched in a format and appended back in that format
gives the same model input.
"""

from dataclasses import dataclass

from sessions.errors import DomainError
from sessions.wire import anthropic, openai, openai_responses
from sessions.wire.parsed import TranscriptError, text_of

FORMATS = ("ctxweb", "openai", "anthropic", "openai-responses")


@dataclass
class Translated:
    messages: list  # ctxweb messages
    origin: list[int]  # for each, the index of the message it came from in what the client sent
    instructions: str | None = None


def _without_id(message: dict) -> dict:
    if message.get("id") is None:
        message.pop("id", None)
    return message


def to_ctxweb(fmt: str, messages, system=None) -> Translated:
    if fmt not in FORMATS:
        raise DomainError(f"format must be one of {', '.join(FORMATS)}", code="invalid_format")
    if system is not None and fmt != "anthropic":
        raise DomainError("system is given separately only in the anthropic format; send a system message",
                          code="invalid_field")
    if fmt == "ctxweb" or not isinstance(messages, list):
        return Translated(messages, list(range(len(messages))) if isinstance(messages, list) else [])
    if fmt == "openai-responses":
        return _from_responses_items(messages)
    out, origin, instructions = [], [], None
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        try:
            if fmt == "openai":
                converted = [openai.convert_message(message, None, where)]
            else:
                converted = anthropic.convert_message(message, None, where)
        except TranscriptError as exc:
            raise DomainError(str(exc), code="invalid_message", index=index) from None
        for item in converted:
            out.append(_without_id(item))
            origin.append(index)
            if fmt == "openai" and item["role"] == "system":
                instructions = text_of(item.get("content"))
    if fmt == "anthropic" and system is not None:
        try:
            instructions = anthropic.system_text(system)
        except TranscriptError as exc:
            raise DomainError(f"system: {exc}", code="invalid_field") from None
    return Translated(out, origin, instructions)


def _from_responses_items(items: list) -> Translated:
    """Responses input items: several may make one message (an assistant message and its function calls)."""
    try:
        converted = openai_responses.convert_items(items, lambda index: f"messages[{index}]")
    except openai_responses.ItemError as exc:
        raise DomainError(str(exc), code="invalid_message", index=exc.index) from None
    instructions = None
    for _, message in converted:
        if message["role"] == "system":
            instructions = text_of(message["content"])
    return Translated([m for _, m in converted], [index for index, _ in converted], instructions)
