"""Claude Code session logs (JSON Lines, one entry per line).

- One API message is split over several `assistant` lines sharing `message.id` (one content block per
  line); they are joined back into one assistant message, whose id is that message id.
- Each `tool_result` block comes back on a `user` line and becomes a `tool` message.
- Sub-agent threads (`isSidechain: true`, each starting at a root line) are sessions of their own,
  linked both ways in metadata (`parent_session`, `sidechains`); when a thread answers a `Task` call of
  the main thread, `parent_tool_call_id` names that call.
- `summary` lines give the session's title.
- A compaction (`compact_boundary` system line, then the `isCompactSummary` user line with the summary)
  becomes a checkpoint covering everything before the boundary; the summary line itself stays in the
  raw log, hidden from the model input (the checkpoint already gives the model that text).
- `isMeta` lines (slash-command expansions) are kept with include_in_messages false and the flag in
  attributes. Other system lines are kept as stored system messages (never part of a model input).
"""

import json

from .anthropic import AssistantMessage, user_messages
from .base import ImportedCheckpoint, ImportedSession, Parsed, Source, TranscriptError, safe_key, text_of

FORMAT = "claude-code"
ENTRY_TYPES = {"user", "assistant", "system"}
SUMMARIZER = "claude-code"
# Fields every line repeats: kept once in the session's metadata, and on a message only where they differ.
SESSION_FIELDS = ("sessionId", "cwd", "gitBranch", "version")
REPEATED = (*SESSION_FIELDS, "userType", "isSidechain")


def looks_like(records: list) -> bool:
    return any(
        isinstance(r, dict) and r.get("type") in ENTRY_TYPES and "uuid" in r and ("message" in r or "subtype" in r)
        for r in records
    ) or any(isinstance(r, dict) and r.get("type") == "summary" and "leafUuid" in r for r in records)


def _attributes(entry: dict) -> dict:
    attributes = {k: v for k, v in entry.items() if k not in ("message", "type", "content")}
    message = entry.get("message")
    if isinstance(message, dict):
        extra = {k: v for k, v in message.items() if k not in ("role", "content")}
        if extra:
            attributes["message"] = extra
    return attributes


class Thread:
    """The messages of one conversation thread (the main one or a sub-agent's)."""

    def __init__(self, root: str | None):
        self.root = root
        self.messages: list[dict] = []
        self.assistants: dict[str, AssistantMessage] = {}
        self.checkpoints: list[ImportedCheckpoint] = []
        self.boundary: dict | None = None  # a compact_boundary waiting for its summary line
        self.first: dict | None = None

    def _append(self, message, entry: dict) -> None:
        if entry.get("timestamp"):
            if isinstance(message, AssistantMessage):
                message.created_at = entry["timestamp"]
            else:
                message["created_at"] = entry["timestamp"]
        self.messages.append(message)

    def add(self, entry: dict, line: int) -> None:
        self.first = self.first or entry
        kind = entry["type"]
        uuid = entry.get("uuid") or f"line-{line}"
        if kind == "system":
            if entry.get("subtype") == "compact_boundary":
                self.boundary = {"position": len(self.messages), "entry": entry}
                return
            message = {"id": uuid, "role": "system", "content": text_of(entry.get("content")),
                       "attributes": _attributes(entry)}
            self._append(message, entry)
            return
        message = entry.get("message")
        if not isinstance(message, dict):
            raise TranscriptError(f"line {line}: a {kind} entry needs a message object")
        attributes = _attributes(entry)
        if kind == "assistant":
            message_id = message.get("id") or uuid
            assistant = self.assistants.get(message_id)
            if assistant is None:
                assistant = self.assistants[message_id] = AssistantMessage(message_id, attributes)
                self._append(assistant, entry)  # made into a message dict when the thread is done
            else:
                assistant.attributes.setdefault("merged_uuids", []).append(uuid)
            assistant.add(message.get("content", ""))
            return
        if entry.get("isCompactSummary"):
            self._compaction(entry, uuid, attributes)
            return
        hidden = bool(entry.get("isMeta"))
        for item in user_messages(message.get("content", ""), uuid, attributes):
            if hidden:
                item["include_in_messages"] = False
            self._append(item, entry)

    def _compaction(self, entry: dict, uuid: str, attributes: dict) -> None:
        summary = text_of(entry["message"].get("content"))
        boundary, self.boundary = self.boundary, None
        position = boundary["position"] if boundary else len(self.messages)
        covered = self.checkpoints[-1].last if self.checkpoints else 0
        message = {"id": uuid, "role": "user", "content": summary, "attributes": attributes}
        if boundary:
            message["attributes"]["compactMetadata"] = boundary["entry"].get("compactMetadata")
        if position > covered and summary.strip():
            self.checkpoints.append(ImportedCheckpoint(
                last=position, at=position, summary=summary, summarizer=SUMMARIZER,
                created_at=(boundary or {"entry": entry})["entry"].get("timestamp"),
            ))
            message["include_in_messages"] = False
        self._append(message, entry)

    def finish(self) -> list[dict]:
        if self.boundary and self.boundary["position"] > (self.checkpoints[-1].last if self.checkpoints else 0):
            entry = self.boundary["entry"]
            self.checkpoints.append(ImportedCheckpoint(
                last=self.boundary["position"], at=self.boundary["position"],
                summary=text_of(entry.get("content")) or "Conversation compacted (no summary was logged).",
                summarizer=SUMMARIZER, created_at=entry.get("timestamp"),
            ))
        return [m.message() if isinstance(m, AssistantMessage) else m for m in self.messages]

    def prompt(self) -> str | None:
        """The text that started a sub-agent thread (the prompt of the Task call it answers)."""
        first = next((m for m in self.messages if not isinstance(m, AssistantMessage)), None)
        return first["content"] if first and isinstance(first.get("content"), str) else None


def _title(summaries: list[dict], uuids: set[str]) -> str | None:
    own = [s for s in summaries if s.get("leafUuid") in uuids]
    chosen = (own or summaries)[-1:] if summaries else []
    text = chosen[0].get("summary") if chosen else None
    return text[:300] if isinstance(text, str) and text.strip() else None


def parse(records: list, source: Source) -> Parsed:
    main = Thread(None)
    sidechains: dict[str, Thread] = {}
    thread_of: dict[str, Thread] = {}
    summaries, skipped = [], 0
    for line, entry in enumerate(records, start=1):
        if not isinstance(entry, dict):
            raise TranscriptError(f"line {line}: an entry must be a JSON object")
        kind = entry.get("type")
        if kind == "summary":
            summaries.append(entry)
            continue
        if kind not in ENTRY_TYPES:
            skipped += 1  # file-history snapshots, queue operations, ...
            continue
        if entry.get("isSidechain"):
            thread = thread_of.get(entry.get("parentUuid"))
            if thread is None or thread is main:
                root = entry.get("uuid") or f"line-{line}"
                thread = sidechains[root] = Thread(root)
        else:
            thread = main
        if entry.get("uuid"):
            thread_of[entry["uuid"]] = thread
        thread.add(entry, line)

    if not thread_of and not main.messages and not sidechains:
        if not summaries:
            raise TranscriptError("no Claude Code entries (user, assistant, system or summary lines) found")
        return Parsed(FORMAT, [], skipped + len(summaries))  # an index of summaries, no conversation
    first = main.first or next((t.first for t in sidechains.values()), None) or {}
    claude = {k: first[k] for k in SESSION_FIELDS if k in first}
    repeated = {k: first[k] for k in REPEATED if k in first}
    title = _title(summaries, set(thread_of))
    sessions = []
    main_key = source.key()
    tasks = _task_calls(main)
    if main.messages:
        main_messages = main.finish()
        sessions.append(ImportedSession(
            key=main_key, messages=main_messages, title=title, checkpoints=main.checkpoints,
            metadata={"imported_from": source.provenance(FORMAT), "claude_code": claude},
        ))
        parent = main_key
    else:  # a file holding only sub-agent threads (newer Claude Code writes one file per sub-agent)
        session_id = claude.get("sessionId")
        parent = source.key_prefix + safe_key(session_id) if session_id and safe_key(session_id) != source.stem else None
    alone = not main.messages and len(sidechains) == 1
    for root, thread in sidechains.items():
        metadata = {"imported_from": source.provenance(FORMAT), "claude_code": claude, "sidechain": True}
        if parent:
            metadata["parent_session"] = parent
        task = tasks.get(thread.prompt())
        if task:
            metadata["parent_tool_call_id"] = task["id"]
        sessions.append(ImportedSession(
            key=main_key if alone else source.key(f"agent-{root}"),
            messages=thread.finish(),
            title=f"Sub-agent: {task['description']}"[:300] if task and task.get("description") else None,
            checkpoints=thread.checkpoints,
            metadata=metadata,
        ))
    if main.messages and sidechains:
        sessions[0].metadata["sidechains"] = [s.key for s in sessions[1:]]
    for session in sessions:
        for message in session.messages:
            attributes = message.get("attributes") or {}
            for name, value in repeated.items():
                if name in attributes and attributes[name] == value:
                    del attributes[name]
    return Parsed(FORMAT, sessions, skipped)


def _task_calls(main: Thread) -> dict[str, dict]:
    """prompt -> the main thread's Task tool call that started a sub-agent with it."""
    calls = {}
    for message in main.assistants.values():
        for call in message.tool_calls:
            try:
                arguments = json.loads(call["arguments"])
            except (TypeError, ValueError):
                continue
            if isinstance(arguments, dict) and isinstance(arguments.get("prompt"), str):
                calls.setdefault(arguments["prompt"], {"id": call["id"], "description": arguments.get("description")})
    return calls
