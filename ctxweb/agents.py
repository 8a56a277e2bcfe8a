"""An OpenAI Agents SDK session (the `agents.memory.Session` protocol) kept in ctxweb.

    from agents import Agent, Runner
    from ctxweb.agents import CtxwebSession
    from ctxweb_client import Client

    session = CtxwebSession("support-42", Client("http://127.0.0.1:8000", "ctx_..."))
    result = await Runner.run(agent, "Hello", session=session)

Each item the SDK saves becomes one ctxweb message, readable in the dashboard: message items keep
their role and text, a `function_call` is an assistant message with that tool call, a
`function_call_output` is a tool message answering it, anything else an `agent` message with a short
description. The item itself is kept in the message's attributes (`agents_item`), so `get_items`
returns exactly what was saved.

Nothing is deleted: `pop_item` and `clear_session` hide messages (include_in_messages false, recorded as
MESSAGE_UPDATED events); `get_items` returns only visible items. The client is synchronous, so every
call runs in a worker thread (asyncio.to_thread). This module needs the `openai-agents` package only
to be used with it, not to be imported.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .client import Client, Message, NotFoundError

ITEM = "agents_item"
MESSAGE_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
SHORT = 200


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part.get("refusal"), str):
                texts.append(part["refusal"])
            elif part.get("type"):
                texts.append(f"[{part['type']}]")
    return "\n".join(texts)


def _short(item: dict) -> str:
    kind = item.get("type") or "item"
    detail = _text(item.get("summary")) or _text(item.get("content")) or _text(item.get("output"))
    if not detail and item.get("name"):
        detail = str(item["name"])
    text = f"[{kind}] {detail}".strip()
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"


def item_to_message(item: dict) -> dict:
    """One Agents SDK input item as a ctxweb message, with the item kept in its attributes."""
    kind = item.get("type")
    attributes = {ITEM: item}
    if kind in (None, "message") and item.get("role") in MESSAGE_ROLES:
        return {"role": MESSAGE_ROLES[item["role"]], "content": _text(item.get("content")), "attributes": attributes}
    if kind == "function_call":
        call = {"id": item.get("call_id"), "name": item.get("name"), "arguments": item.get("arguments") or ""}
        return {"role": "assistant", "content": None, "tool_calls": [call], "attributes": attributes}
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else _text(output) or json.dumps(output, ensure_ascii=False)
        return {"role": "tool", "tool_call_id": item.get("call_id"), "content": text, "attributes": attributes}
    return {"role": "agent", "content": _short(item), "attributes": attributes}


class CtxwebSession:
    """Conversation history of an Agents SDK run, stored as the ctxweb session `session_id`."""

    def __init__(self, session_id: str, client: Client, *, session_settings=None, batch_size: int = 100):
        self.session_id = session_id
        self.client = client
        self.session_settings = session_settings  # an agents.memory.SessionSettings; its limit applies
        self.batch_size = batch_size

    # --- synchronous work, run in a thread ------------------------------------------------------

    def _visible(self) -> list[Message]:
        try:
            return [m for m in self.client.raw_log(self.session_id) if m.include_in_messages and ITEM in m.attributes]
        except NotFoundError:
            return []

    def _add(self, items: list) -> None:
        messages = [item_to_message(dict(item)) for item in items]
        for start in range(0, len(messages), self.batch_size):
            self.client.append(self.session_id, messages[start : start + self.batch_size])

    def _hide(self, messages: list[Message]) -> None:
        for message in messages:
            self.client.update_message(self.session_id, message.seq, include_in_messages=False)

    def _pop(self) -> dict | None:
        visible = self._visible()
        if not visible:
            return None
        self._hide(visible[-1:])
        return visible[-1].attributes[ITEM]

    # --- the Session protocol -------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[dict]:
        """The visible items, oldest first; with a limit, the latest `limit` of them."""
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        items = [m.attributes[ITEM] for m in await asyncio.to_thread(self._visible)]
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: list) -> None:
        if items:
            await asyncio.to_thread(self._add, list(items))

    async def pop_item(self) -> dict | None:
        """Hide the newest visible item and return it (it stays in ctxweb's raw log)."""
        return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        """Hide every item (the raw log keeps them, marked as excluded)."""
        await asyncio.to_thread(lambda: self._hide(self._visible()))
