"""Claude Code session logs (JSON Lines, one entry per line).

- One API message is split over several `assistant` lines sharing `message.id` (one content block per
  line); they are joined back into one assistant message, whose id is that message id.
- Each `tool_result` block comes back on a `user` line and becomes a `tool` message.
- Sub-agent threads (`isSidechain: true`, each starting at a root line) are sessions of their own,
  linked both ways in metadata (`parent_session`, `sidechains`); when a thread answers a `Task` call of
  the main thread, `parent_tool_call_id` names that call. A sub-agent written to a file of its own
  carries the parent's `sessionId`, by which sessions.importers.links finds the parent.
- A `summary` line gives the session's title when its `leafUuid` is a line of this file (Claude Code
  also writes summaries of other sessions); otherwise the title is the first prompt the user typed.
- A compaction (`compact_boundary` system line, then the `isCompactSummary` user line with the summary)
  becomes a checkpoint covering everything before the boundary; the summary line itself stays in the
  raw log, hidden from the model input (the checkpoint already gives the model that text).
- `isMeta` user lines (slash-command expansions, the "Caveat: ... DO NOT respond" line) are hidden in
  Claude Code's own transcript view but sent to the model: they stay in the model input, marked with
  attributes.hidden_in_source_ui. Other system lines are kept as stored system messages (never part of a
  model input).
- Entries of other types (file-history snapshots, queue operations) are skipped; a line without a
  type, or a message that is not an Anthropic one, fails the file.
"""

import json
import re

from .anthropic import AssistantMessage, user_messages
from .base import ImportedCheckpoint, ImportedSession, Parsed, Source, TranscriptError, safe_key, text_of

FORMAT = "claude-code"
ENTRY_TYPES = {"user", "assistant", "system"}
SUMMARIZER = "claude-code"
# Fields every line repeats: kept once in the session's metadata, and on a message only where they differ.
SESSION_FIELDS = ("sessionId", "cwd", "gitBranch", "version")
REPEATED = (*SESSION_FIELDS, "userType", "isSidechain")
SUMMARY_NOT_SENT = "the model gets this summary from the checkpoint made of this compaction"
FAMILY = "claude_code__sessionId"  # the metadata path of the sessionId a parent and its sub-agents share
COMMAND = re.compile(r"<command-name>(.*?)</command-name>", re.DOTALL)
COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
# User lines Claude Code writes that are not prompts: a local command's output, an interruption.
NOT_PROMPTS = ("<local-command-stdout>", "<local-command-stderr>", "[Request interrupted")


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
        if message.get("role") != kind:
            raise TranscriptError(f"line {line}: a {kind} entry holds a message of role {message.get('role')!r}")
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
        if entry.get("isMeta"):
            attributes["hidden_in_source_ui"] = True
        for item in user_messages(message.get("content", ""), uuid, attributes):
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
            message["attributes"]["not_sent_reason"] = SUMMARY_NOT_SENT
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

    def first_prompt(self) -> str | None:
        """The first prompt the user typed, or else the first slash command with its arguments."""
        commands = []
        for message in self.messages:
            if isinstance(message, AssistantMessage) or message["role"] != "user":
                continue
            attributes = message.get("attributes") or {}
            text = text_of(message["content"]).strip()
            if attributes.get("isMeta") or attributes.get("isCompactSummary") or text.startswith(NOT_PROMPTS):
                continue
            if command := COMMAND.search(text):
                arguments = COMMAND_ARGS.search(text)
                commands.append(" ".join(part.group(1).strip() for part in (command, arguments) if part))
            elif text:
                return _one_line(text)
        return _one_line(commands[0]) if commands else None


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:299] + "…"


def _summary(summaries: list[dict], uuids: set[str]) -> str | None:
    """The newest summary of a conversation in this file (a summary's leaf may be in another file)."""
    own = [s for s in summaries if isinstance(s.get("summary"), str) and isinstance(s.get("leafUuid"), str)
           and s["leafUuid"] in uuids]
    text = own[-1]["summary"].strip() if own else ""
    return text[:300] or None


def parse(records: list, source: Source) -> Parsed:
    main = Thread(None)
    sidechains: dict[str, Thread] = {}
    thread_of: dict[str, Thread] = {}
    summaries, skipped = [], 0
    for line, entry in enumerate(records, start=1):
        if not isinstance(entry, dict):
            raise TranscriptError(f"line {line}: an entry must be a JSON object")
        kind = entry.get("type")
        if not isinstance(kind, str):
            raise TranscriptError(f"line {line}: not a Claude Code entry (it has no type)")
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
        try:
            thread.add(entry, line)
        except TranscriptError as exc:
            raise TranscriptError(str(exc) if str(exc).startswith("line ") else f"line {line}: {exc}") from None

    if not thread_of and not main.messages and not sidechains:
        if not summaries:
            raise TranscriptError("no Claude Code entries (user, assistant, system or summary lines) found")
        return Parsed(FORMAT, [], skipped + len(summaries))  # an index of summaries, no conversation
    first = main.first or next((t.first for t in sidechains.values()), None) or {}
    claude = {k: first[k] for k in SESSION_FIELDS if k in first}
    repeated = {k: first[k] for k in REPEATED if k in first}
    title = _summary(summaries, set(thread_of)) or main.first_prompt()
    sessions = []
    main_key = source.key()
    tasks = _task_calls(main)
    family = (FAMILY, claude["sessionId"]) if isinstance(claude.get("sessionId"), str) else None
    if main.messages:
        main_messages = main.finish()
        sessions.append(ImportedSession(
            key=main_key, messages=main_messages, title=title, checkpoints=main.checkpoints,
            metadata={"imported_from": source.provenance(FORMAT), "claude_code": claude}, family=family,
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
        about = task["description"] if task and task.get("description") else thread.first_prompt()
        sessions.append(ImportedSession(
            key=main_key if alone else source.key(f"agent-{root}"),
            messages=thread.finish(),
            title=f"Sub-agent: {about}"[:300] if about else None,
            checkpoints=thread.checkpoints,
            metadata=metadata,
            family=family,
        ))
    if main.messages and sidechains:
        sessions[0].metadata["sidechains"] = sorted(s.key for s in sessions[1:])
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
