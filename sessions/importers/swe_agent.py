"""SWE-agent trajectories (`.traj`): a JSON object whose `history` lists the run's messages.

Each history item is what SWE-agent sends to its model (through litellm, in Chat Completions shape):
`role` and `content` (a string or a list of parts), an assistant's `tool_calls`, and a tool result's
`tool_call_ids` (SWE-agent sends the first as the result's `tool_call_id`, one call per observation).
Its other fields (`message_type`, `thought` and `action` parsed out of the reply, `is_demo`) go to
attributes; `thinking_blocks` become reasoning. The first system message is also the session's
instructions.

An agent sends its model only the history items of its own `agent` name, so a trajectory with several
agents becomes one session per agent. The file's other fields (`info` with the exit status and
submission, `environment`, ...) become session metadata; `trajectory` repeats the history step by step
(thought, action, observation) and is not imported.
"""

from . import openai
from .base import ImportedSession, Parsed, Source, TranscriptError, safe_key, text_of

FORMAT = "swe-agent"
ROLES = ("system", "user", "assistant", "tool")
SWE_AGENT_FIELDS = {"agent", "message_type", "tool_call_ids", "thought", "action"}
NOT_METADATA = ("history", "trajectory")


def looks_like(value) -> bool:
    history = value.get("history") if isinstance(value, dict) else None
    return isinstance(history, list) and any(
        isinstance(item, dict) and "role" in item and SWE_AGENT_FIELDS & set(item) for item in history
    )


def _thinking(blocks, out: dict, attributes: dict) -> None:
    """An assistant's thinking blocks (Anthropic models through litellm) as reasoning."""
    texts = [b["thinking"] for b in blocks if isinstance(b, dict) and isinstance(b.get("thinking"), str)]
    signatures = [b["signature"] for b in blocks if isinstance(b, dict) and b.get("signature")]
    if texts:
        out["reasoning"] = "\n\n".join(texts)
    if signatures:
        attributes["thinking_signatures"] = signatures
    redacted = [b for b in blocks if isinstance(b, dict) and b.get("type") == "redacted_thinking"]
    if redacted:
        attributes["redacted_thinking"] = redacted


def convert_item(item, message_id: str, where: str) -> dict:
    """One history item as a ctxweb message: the Chat Completions message SWE-agent sends for it."""
    if not isinstance(item, dict):
        raise TranscriptError(f"{where}: a history item must be an object")
    role = item.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise TranscriptError(f"{where}: role {role!r} is not a SWE-agent history role; SWE-agent's are "
                              f"{', '.join(ROLES[:-1])} and {ROLES[-1]}")
    # `agent` is the session's (metadata.agent); the rest of the item is the message or its attributes.
    message = {k: v for k, v in item.items() if k not in ("agent", "tool_call_ids", "thinking_blocks")}
    ids = item.get("tool_call_ids")
    if role == "tool":
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise TranscriptError(f"{where}: a tool item needs tool_call_ids, a list of the call ids it answers")
        message["tool_call_id"] = ids[0]
        if len(ids) > 1:
            message["tool_call_ids"] = ids  # kept in attributes; SWE-agent sends only the first
    elif ids:
        message["tool_call_ids"] = ids
    calls = item.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise TranscriptError(f"{where}: tool_calls must be a list")
    if calls == []:
        del message["tool_calls"]  # function-calling runs write [] on replies without a call
    out = openai.convert_message(message, message_id, where)
    blocks = item.get("thinking_blocks")
    if role == "assistant" and isinstance(blocks, list) and blocks:
        _thinking(blocks, out, out.setdefault("attributes", {}))
    return out


def parse(value, source: Source) -> Parsed:
    if not isinstance(value, dict) or not isinstance(value.get("history"), list):
        raise TranscriptError("a SWE-agent trajectory is a JSON object with a `history` list")
    by_agent: dict[str, list[dict]] = {}
    for index, item in enumerate(value["history"]):
        message = convert_item(item, source.message_id(0, index), f"history item {index}")
        agent = item.get("agent") if isinstance(item.get("agent"), str) else ""
        by_agent.setdefault(agent, []).append(message)
    if not by_agent:
        raise TranscriptError("the trajectory's history is empty")
    metadata = {k: v for k, v in value.items() if k not in NOT_METADATA}
    metadata["imported_from"] = source.provenance(FORMAT)
    sessions = []
    for agent, messages in by_agent.items():
        system = next((m for m in messages if m["role"] == "system"), None)
        sessions.append(ImportedSession(
            key=source.key() if len(by_agent) == 1 else source.key(safe_key(agent or "no-agent")),
            messages=messages,
            metadata={**metadata, "agent": agent} if agent else metadata,
            instructions=text_of(system["content"]) if system else None,
        ))
    return Parsed(FORMAT, sessions)
