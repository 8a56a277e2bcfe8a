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
(thought, action, observation).

What the model saw. SWE-agent does not send its history as it is: its history processors change it first
(`last_n_observations` replaces all but the last n observations by "Old environment output: (N lines
omitted)"). So:
- a trajectory that records, per step, the messages sent (`trajectory[n].query`, SWE-agent's
  StepOutput.query; `messages` is taken too) is imported as recorded requests, one per step
  (sessions.ingest.recorded_requests): the raw log is rebuilt from them, and what a processor changed shows as the
  application's edit of the message, beside its raw text;
- a trajectory that records no per-step messages but declares its history processors (`replay_config`'s
  `agent.history_processors`, or `agent.history_processor` in older versions) has them applied here to its
  history, step by step (SWE-agent's own rules, sweagent/agent/history_processors.py), and each step
  becomes a request worked out from the declared configuration (RecordedRequest.derived_from says so);
- otherwise (no processor, or only ones that change no text) the history is what was sent, and is
  imported as a transcript. A processor ctxweb does not apply is named in the session's metadata
  (`history_processors_not_applied`).
"""

import copy
import hashlib
import json
import re
from datetime import timedelta

from django.utils import timezone

from sessions.ingest.recorded_requests import CapturedRequest
from sessions.wire import openai
from sessions.wire.json_body import nested_too_deep, too_deep
from sessions.wire.parsed import ImportedSession, Parsed, Source, TranscriptError, safe_key, text_of

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
    items_by_agent: dict[str, list[dict]] = {}
    for index, item in enumerate(value["history"]):
        message = convert_item(item, source.message_id(0, index), f"history item {index}")
        agent = item.get("agent") if isinstance(item.get("agent"), str) else ""
        by_agent.setdefault(agent, []).append(message)
        items_by_agent.setdefault(agent, []).append(item)
    if not by_agent:
        raise TranscriptError("the trajectory's history is empty")
    metadata = {k: v for k, v in value.items() if k not in NOT_METADATA}
    keys = {agent: source.key() if len(by_agent) == 1 else source.key(safe_key(agent or "no-agent"))
            for agent in by_agent}
    processors = declared_processors(value)
    unknown = [p.get("type") for p in processors if p.get("type") not in PROCESSORS]
    steps = queried_steps(value)
    if steps or (processors and not unknown and any(p.get("type") not in NO_TEXT_CHANGE for p in processors)):
        if steps:
            requests = _recorded_steps(steps, items_by_agent, keys, source)
        else:
            requests = _derived_steps(processors, items_by_agent, keys, source)
        if requests:
            return Parsed(FORMAT, [], requests=requests,
                          request_metadata={keys[agent]: {**metadata, "agent": agent} if agent else metadata
                                            for agent in by_agent})
    if unknown:
        metadata["history_processors_not_applied"] = unknown
    metadata["imported_from"] = source.provenance(FORMAT)
    sessions = []
    for agent, messages in by_agent.items():
        system = next((m for m in messages if m["role"] == "system"), None)
        sessions.append(ImportedSession(
            key=keys[agent],
            messages=messages,
            metadata={**metadata, "agent": agent} if agent else metadata,
            instructions=text_of(system["content"]) if system else None,
        ))
    return Parsed(FORMAT, sessions)


# --- what was sent: per-step queries, or the declared history processors -----------------------------


def queried_steps(value: dict) -> list[list]:
    """Each step's messages as sent (`query`, or `messages`), when the trajectory records them for every
    step; else []."""
    steps = value.get("trajectory")
    if not isinstance(steps, list) or not steps:
        return []
    queries = []
    for step in steps:
        query = step.get("query", step.get("messages")) if isinstance(step, dict) else None
        if not isinstance(query, list) or not query or not all(isinstance(item, dict) and item for item in query):
            return []
        queries.append(query)
    return queries


def declared_processors(value: dict) -> list[dict]:
    """The history processors the trajectory's replay_config declares (a JSON text or an object)."""
    config = value.get("replay_config")
    if isinstance(config, str):
        if nested_too_deep(config):
            raise TranscriptError(too_deep("replay_config"))
        try:
            config = json.loads(config)
        except ValueError:
            return []
    agent = config.get("agent") if isinstance(config, dict) else None
    if not isinstance(agent, dict):
        return []
    declared = agent.get("history_processors", agent.get("history_processor"))
    if isinstance(declared, dict):
        declared = [declared]
    if not isinstance(declared, list):
        return []
    return [p for p in declared if isinstance(p, dict)]


def _sent(item: dict) -> dict:
    """A history item as SWE-agent hands it to its model: its fields, without the agent's name, and a tool
    result's first call id as its tool_call_id."""
    message = {k: v for k, v in item.items() if k not in ("agent", "thinking_blocks")}
    ids = item.get("tool_call_ids")
    if item.get("role") == "tool" and isinstance(ids, list) and ids and isinstance(ids[0], str):
        message.setdefault("tool_call_id", ids[0])
    if message.get("tool_calls") == []:
        del message["tool_calls"]
    return message


def _step_id(source: Source, agent: str, step: int, messages: list) -> str:
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{source.stem[:100]}:{agent[:40]}:step{step}:{digest}"


def _captured(key: str, external_id: str, step: int, messages: list[dict], response: list[dict], after: list[dict],
              derived_from: str, started) -> CapturedRequest:
    return CapturedRequest(conversation=key, external_id=external_id, source="trajectory",
                           started_at=started + timedelta(seconds=step), messages=messages, response=response,
                           after=after, derived_from=derived_from)


def _recorded_steps(steps: list[list], items_by_agent: dict, keys: dict, source: Source) -> list[CapturedRequest]:
    """One request per step, exactly as the trajectory recorded it. A step's query is the agent's history
    up to its answer (processed), so its response is the history item after that many; what the history
    holds after the last step's answer (its observation) is stored after it."""
    started = timezone.now()
    out = []
    last_of = {}
    for number, query in enumerate(steps, start=1):
        agent = next((i.get("agent") for i in query if isinstance(i.get("agent"), str)), "")
        agent = agent if agent in keys else next(iter(keys))
        history = items_by_agent.get(agent, [])
        messages = [_sent(item) for item in query]
        answer = history[len(query)] if len(query) < len(history) else None
        response = [_sent(answer)] if answer is not None and answer.get("role") == "assistant" else []
        out.append(_captured(keys[agent], _step_id(source, agent, number, messages), number, messages, response, [],
                             "", started))
        last_of[agent] = (len(out) - 1, len(query) + len(response))
    for agent, (index, sent) in last_of.items():
        history = items_by_agent.get(agent, [])
        out[index].after = [_sent(item) for item in history[min(sent, len(history)):]]
    return out


def _derived_steps(processors: list[dict], items_by_agent: dict, keys: dict, source: Source) -> list[CapturedRequest]:
    """One request per step, worked out as SWE-agent made it: the declared processors applied to the
    agent's history before each of its answers (the step's response), the last answer's observation after."""
    named = ", ".join(_describe(p) for p in processors)
    derived_from = (f"SWE-agent's history processors declared in the trajectory's replay_config ({named}), "
                    "applied to its history: the trajectory records no per-step messages")[:300]
    started = timezone.now()
    out = []
    for agent, history in items_by_agent.items():
        answers = [j for j, item in enumerate(history) if item.get("role") == "assistant" and j > 0]
        for step, j in enumerate(answers, start=1):
            messages = [_sent(item) for item in apply_processors(processors, history[:j])]
            after = [_sent(item) for item in history[j + 1:]] if step == len(answers) else []
            out.append(_captured(keys[agent], _step_id(source, agent, step, messages), step, messages,
                                 [_sent(history[j])], after, derived_from, started))
    return out


def _describe(processor: dict) -> str:
    options = " ".join(f"{k}={v}" for k, v in processor.items() if k != "type" and not isinstance(v, dict | list))
    return f"{processor.get('type')}{' ' + options if options else ''}"


def apply_processors(processors: list[dict], history: list[dict]) -> list[dict]:
    """The history as SWE-agent sends it after its processors, in order (a copy; `history` is unchanged)."""
    history = copy.deepcopy(history)
    for processor in processors:
        history = PROCESSORS[processor["type"]](processor, history)
    return history


def _content_stats(entry: dict) -> tuple[int, int]:
    content = entry.get("content")
    if isinstance(content, str):
        return len(content.splitlines()), 0
    items = content if isinstance(content, list) else []
    lines = sum(len(i.get("text", "").splitlines()) for i in items if isinstance(i, dict) and i.get("type") == "text")
    return lines, sum(1 for i in items if isinstance(i, dict) and i.get("type") == "image_url")


def _last_n_observations(processor: dict, history: list[dict]) -> list[dict]:
    """All but the last n observations (never the first, the task) replaced by a line saying how many lines
    were left out; `polling` keeps between n and n + polling; tags force an observation out or in."""
    n, polling = _positive(processor.get("n"), "n"), _positive(processor.get("polling", 1), "polling")
    remove = set(processor.get("always_remove_output_for_tags") or {"remove_output"})
    keep = set(processor.get("always_keep_output_for_tags") or {"keep_output"})
    observations = [i for i, e in enumerate(history) if e.get("message_type") == "observation" and not e.get("is_demo")]
    last_removed = max(0, (len(observations) // polling) * polling - n)
    omitted = set(observations[1:last_removed])
    out = []
    for index, entry in enumerate(history):
        tags = set(entry.get("tags") or ())
        if ((index not in omitted or tags & keep) and not tags & remove) or entry.get("message_type") != "observation":
            out.append(entry)
            continue
        lines, images = _content_stats(entry)
        text = f"Old environment output: ({lines} lines omitted)" + (f" ({images} images omitted)" if images else "")
        out.append({**entry, "content": text})
    return out


WINDOW_LINE = re.compile(r"^(\d+)\:.*?(\n|$)", re.MULTILINE)
WINDOW_FILE = re.compile(r"\[File:\s+(.*)\s+\(\d+\s+lines\ total\)\]")


def _closed_window(processor: dict, history: list[dict]) -> list[dict]:
    """Every file window but the last one shown of each file replaced by the number of its lines."""
    out, windows = [], set()
    for entry in reversed(history):
        if entry.get("role") != "user" or entry.get("is_demo") or not isinstance(entry.get("content"), str):
            out.append(entry)
            continue
        content = entry["content"]
        matches = list(WINDOW_LINE.finditer(content))
        found = WINDOW_FILE.search(content) if matches else None
        if found:
            if found.group(1) in windows:
                content = (content[:matches[0].start()] + f"Outdated window with {len(matches)} lines omitted...\n"
                           + content[matches[-1].end():])
                entry = {**entry, "content": content}
            windows.add(found.group(1))
        out.append(entry)
    return out[::-1]


def _tag_tool_call_observations(processor: dict, history: list[dict]) -> list[dict]:
    tags, names = set(processor.get("tags") or {"keep_output"}), set(processor.get("function_names") or ())
    for entry in history:
        calls = entry.get("tool_calls") or []
        called = {c.get("function", {}).get("name") for c in calls if isinstance(c, dict)}
        if entry.get("message_type") == "action" and called & names:
            entry["tags"] = sorted(set(entry.get("tags") or ()) | tags)
    return history


def _unchanged(processor: dict, history: list[dict]) -> list[dict]:
    return history


def _positive(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TranscriptError(f"replay_config: the history processor's {name} must be a positive whole number, "
                              f"not {value!r}")
    return value


# The processors ctxweb applies as SWE-agent does; `cache_control` only marks messages for a provider's
# cache, and `default` changes nothing. `remove_regex` (patterns from the file) and `image_parsing` are not
# applied: the session says so.
PROCESSORS = {
    "last_n_observations": _last_n_observations,
    "closed_window": _closed_window,
    "tag_tool_call_observations": _tag_tool_call_observations,
    "cache_control": _unchanged,
    "default": _unchanged,
}
NO_TEXT_CHANGE = {"cache_control", "default", "tag_tool_call_observations"}
