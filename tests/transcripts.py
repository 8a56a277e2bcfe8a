"""Real transcripts (tests/data/transcripts, see its README for sources and licences) turned into
ctxweb messages, for tests. The full importers live in the app; this is the small loader tests need."""

import json
from pathlib import Path

DATA = Path(__file__).parent / "data" / "transcripts"
OPENAI_FIELDS = {"role", "content", "tool_calls", "tool_call_id", "name"}


def openai_conversations() -> list[tuple[str, list[dict]]]:
    """(label, OpenAI-format message list) for every conversation in the openai-chat files."""
    out = []
    for path in sorted((DATA / "openai-chat").glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict):
            out.append((path.stem, data["messages"]))
        else:
            for i, record in enumerate(data):
                out.append((f"{path.stem}-{i}", record["traj"]))
    return out


def to_ctxweb(message: dict) -> dict:
    """One OpenAI Chat Completions message as a ctxweb message; extra fields go to attributes."""
    role = message["role"]
    out = {}
    attributes = {k: v for k, v in message.items() if k not in OPENAI_FIELDS | {"reasoning_content"}}
    if role not in ("system", "user", "assistant", "tool", "agent"):
        attributes["original_role"] = role
        role = "agent"
    out["role"] = role
    out["content"] = message.get("content")
    if role == "agent" and out["content"] is None:
        out["content"] = ""
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in message["tool_calls"]
        ]
    if message.get("reasoning_content"):
        out["reasoning"] = message["reasoning_content"]
    if role == "tool":
        out["tool_call_id"] = message["tool_call_id"]
    if message.get("name"):
        out["name"] = message["name"]
    if attributes:
        out["attributes"] = attributes
    return out
