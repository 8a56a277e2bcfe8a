"""Claude Code session logs (JSON Lines, one entry per line).

- One API message is split over several `assistant` lines sharing `message.id` (one content block per
  line); they are joined back into one assistant message, whose id is that message id.
- Each `tool_result` block comes back on a `user` line and becomes a `tool` message.
- Sub-agent threads (`isSidechain: true`, each starting at a root line) are sessions of their own,
  linked both ways in metadata (`parent_session`, `sidechains`); when a thread answers a `Task` call of
  the main thread, `parent_tool_call_id` names that call. A sub-agent written to a file of its own
  carries the parent's `sessionId`, by which sessions.ingest.importers.links finds the parent.
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

`parse` reads a log whole. A log above CTXWEB_IMPORT_STREAM_ABOVE bytes is read as a stream (StreamedLog),
giving the same sessions, messages and checkpoints: a first reading checks every line and keeps of each
only its byte offset, its uuid and its API message id (to find threads and join split messages), never
its content; each thread's messages are then made from its lines read again, with each checkpoint among
them at the place the compaction happened.
"""

import copy
import hashlib
import json
import re
from array import array
from collections.abc import Iterator
from dataclasses import replace
from typing import BinaryIO

from sessions.wire.anthropic import AssistantMessage, user_messages
from sessions.wire.json_body import nested_too_deep
from sessions.wire.parsed import (
    ImportedCheckpoint,
    ImportedSession,
    Parsed,
    Source,
    StreamedConversation,
    TranscriptError,
    json_line,
    numbered_lines,
    one_line,
    safe_key,
    text_of,
)

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


def _command_line(command: re.Match, arguments: re.Match | None) -> str:
    """A slash command as the user typed it: its name and its arguments."""
    return " ".join(part.group(1).strip() for part in (command, arguments) if part and part.group(1).strip())


def _has_arguments(typed: str) -> bool:
    return len(typed.split(None, 1)) > 1


# User lines Claude Code writes that are not prompts: a local command's output, an interruption.
NOT_PROMPTS = ("<local-command-stdout>", "<local-command-stderr>", "[Request interrupted")


def looks_like(records: list) -> bool:
    return any(
        isinstance(r, dict) and r.get("type") in ENTRY_TYPES and "uuid" in r and ("message" in r or "subtype" in r)
        for r in records
    ) or any(isinstance(r, dict) and r.get("type") == "summary" and "leafUuid" in r for r in records)


def entry_message(entry: dict, kind: str, line: int) -> dict:
    """The message object of a user or assistant entry, whose role must be the entry's type."""
    message = entry.get("message")
    if not isinstance(message, dict):
        raise TranscriptError(f"line {line}: a {kind} entry needs a message object")
    if message.get("role") != kind:
        raise TranscriptError(f"line {line}: a {kind} entry holds a message of role {message.get('role')!r}")
    return message


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
        message = entry_message(entry, kind, line)
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
        """The first prompt the user typed, a slash command with its arguments counting as one (`/review
        the login flow`); a bare slash command (`/clear`) only when there is nothing else."""
        commands = []
        for message in self.messages:
            if isinstance(message, AssistantMessage) or message["role"] != "user":
                continue
            attributes = message.get("attributes") or {}
            text = text_of(message["content"]).strip()
            if attributes.get("isMeta") or attributes.get("isCompactSummary") or text.startswith(NOT_PROMPTS):
                continue
            if command := COMMAND.search(text):
                typed = _command_line(command, COMMAND_ARGS.search(text))
                if _has_arguments(typed):
                    return one_line(typed)
                commands.append(typed)
            elif text:
                return one_line(text)
        return one_line(commands[0]) if commands else None


def _summary(summaries: list[dict], uuids: set[str]) -> str | None:
    """The newest summary of a conversation in this file (a summary's leaf may be in another file)."""
    own = [s for s in summaries if isinstance(s.get("summary"), str) and isinstance(s.get("leafUuid"), str)
           and s["leafUuid"] in uuids]
    text = own[-1]["summary"].strip() if own else ""
    return text[:300] or None


def entry_kind(entry, line: int) -> str:
    """The `type` of a log line, which every line must have (parse and the streamed reading alike)."""
    if not isinstance(entry, dict):
        raise TranscriptError(f"line {line}: an entry must be a JSON object")
    kind = entry.get("type")
    if not isinstance(kind, str):
        raise TranscriptError(f"line {line}: not a Claude Code entry (it has no type)")
    return kind


def thread_for(entry: dict, line: int, main, sidechains: dict, thread_of: dict, new_thread):
    """The thread a message line belongs to: the main one, or the sub-agent thread its parent line is
    in; a sidechain line whose parent is not in one starts a thread (made by `new_thread(root)`)."""
    if entry.get("isSidechain"):
        thread = thread_of.get(entry.get("parentUuid"))
        if thread is None or thread is main:
            root = entry.get("uuid") or f"line-{line}"
            thread = sidechains[root] = new_thread(root)
    else:
        thread = main
    if entry.get("uuid"):
        thread_of[entry["uuid"]] = thread
    return thread


def at_line(exc: TranscriptError, line: int) -> TranscriptError:
    """The error, naming the line it is about unless it does already."""
    return TranscriptError(str(exc) if str(exc).startswith("line ") else f"line {line}: {exc}")


def parse(records: list, source: Source) -> Parsed:
    main = Thread(None)
    sidechains: dict[str, Thread] = {}
    thread_of: dict[str, Thread] = {}
    summaries, skipped = [], 0
    for line, entry in enumerate(records, start=1):
        kind = entry_kind(entry, line)
        if kind == "summary":
            summaries.append(entry)
            continue
        if kind not in ENTRY_TYPES:
            skipped += 1  # file-history snapshots, queue operations, ...
            continue
        thread = thread_for(entry, line, main, sidechains, thread_of, Thread)
        try:
            thread.add(entry, line)
        except TranscriptError as exc:
            raise at_line(exc, line) from None

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
    else:
        parent = _parent_of_sub_agents_alone(source, claude)
    alone = not main.messages and len(sidechains) == 1
    for root, thread in sidechains.items():
        task = tasks.get(thread.prompt())
        metadata, title = _sub_agent(source, claude, parent, task, thread.first_prompt())
        sessions.append(ImportedSession(
            key=main_key if alone else source.key(f"agent-{root}"),
            messages=thread.finish(),
            title=title,
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


def _parent_of_sub_agents_alone(source, claude: dict) -> str | None:
    """A file holding only sub-agent threads (newer Claude Code writes one file per sub-agent): the key of
    the main conversation's session, named by its sessionId, unless that is this file's own name."""
    session_id = claude.get("sessionId")
    if session_id and safe_key(session_id) != source.stem:
        return source.key_prefix + safe_key(session_id)
    return None


def _sub_agent(source, claude: dict, parent: str | None, task: dict | None, first_prompt: str | None):
    """A sub-agent thread's session metadata (its parent session, and the Task call that started it) and
    title (the task's description, or the thread's first prompt)."""
    metadata = {"imported_from": source.provenance(FORMAT), "claude_code": claude, "sidechain": True}
    if parent:
        metadata["parent_session"] = parent
    if task:
        metadata["parent_tool_call_id"] = task["id"]
    about = task["description"] if task and task.get("description") else first_prompt
    return metadata, (f"Sub-agent: {about}"[:300] if about else None)


def _task_calls(main: Thread) -> dict[str, dict]:
    """prompt -> the main thread's Task tool call that started a sub-agent with it."""
    calls = {}
    for message in main.assistants.values():
        for call in message.tool_calls:
            if found := _task_call(call):
                calls.setdefault(*found)
    return calls


# Reading a large log as a stream (sessions.ingest.importers.stream): the same sessions as `parse`, holding one
# line's entry at a time. A first reading keeps, for each thread, its lines' numbers and the few facts its
# session needs from the whole file (never a message's content); each thread's messages are then made by
# reading its lines again, by their byte offsets.

DIGEST_BYTES = 16


def _digest(text: str) -> bytes:
    """A prompt stands for itself by its digest: a Task call's prompt is matched with a thread's first text."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=DIGEST_BYTES).digest()


def _task_call(call: dict) -> tuple[str, dict] | None:
    """A tool call that starts a sub-agent (its arguments hold a `prompt`): the prompt, and the call."""
    try:
        if nested_too_deep(call["arguments"]):  # not a prompt, and json.loads would recurse into it
            return None
        arguments = json.loads(call["arguments"])
    except (TypeError, ValueError):
        return None
    if isinstance(arguments, dict) and isinstance(arguments.get("prompt"), str):
        return arguments["prompt"], {"id": call["id"], "description": arguments.get("description")}
    return None


class ThreadPlan:
    """One thread as the first reading of a log finds it: which lines are its, and its session's facts."""

    def __init__(self, root: str | None):
        self.root = root
        self.lines = array("q")  # the numbers of its lines (counted as `parse` counts them, from 1)
        self.first: dict | None = None  # the REPEATED fields of its first line
        self.has_messages = False
        self.assistants: dict = {}  # message id -> the number of its first line, or of all its lines
        self.call_ids: dict = {}  # the main thread's message id -> the ids of its tool calls so far
        self.pending: int | None = None  # a compact_boundary line waiting for its summary line
        self.boundaries: dict[int, int] = {}  # compact_boundary line -> the summary line that answered it
        self.prompted = False
        self.prompt: bytes | None = None  # the digest of the thread's first text (Thread.prompt)
        self.first_text: str | None = None  # Thread.first_prompt: the first prompt typed...
        self.first_command: str | None = None  # ...or else the first slash command

    def first_prompt(self) -> str | None:
        if self.first_text is not None:
            return self.first_text
        return one_line(self.first_command) if self.first_command is not None else None

    def note(self, messages: list[dict], entry: dict) -> None:
        """The messages a non-assistant line makes (not yet kept): the thread's first text, its first prompt."""
        if not self.prompted:
            self.prompted = True
            content = messages[0].get("content")
            self.prompt = _digest(content) if isinstance(content, str) else None
        if self.first_text is not None or entry.get("isMeta") or entry.get("isCompactSummary"):
            return
        for message in messages:
            if message["role"] != "user":
                continue
            text = text_of(message["content"]).strip()
            if text.startswith(NOT_PROMPTS):
                continue
            if command := COMMAND.search(text):
                typed = _command_line(command, COMMAND_ARGS.search(text))
                if _has_arguments(typed):  # a slash command with arguments is a prompt too
                    self.first_text = one_line(typed)
                    return
                if self.first_command is None:
                    self.first_command = typed
            elif text:
                self.first_text = one_line(text)
                return


class StreamedLog:
    """A Claude Code log read as a stream: `read` reads it once through (failing it as `parse` would), then
    `sessions` gives the sessions `parse` gives, each made while its messages are iterated."""

    def __init__(self, source: Source):
        self.source = source
        self.offsets = array("q")  # each line's byte offset, by its number
        self.skipped = 0
        self.plans: list[tuple[StreamedConversation, ThreadPlan]] = []
        self.repeated: dict = {}
        self.size = 0  # the file's size
        self.total = 0  # the bytes of the lines of its sessions' threads
        self.done = 0  # of which read again since `sessions` began

    def position(self) -> int:
        """How far `sessions` has read, in bytes, as if it read the file in order."""
        return self.size * self.done // self.total if self.total else self.size

    def _length(self, line: int) -> int:
        return (self.offsets[line] if line < len(self.offsets) else self.size) - self.offsets[line - 1]

    def read(self, file: BinaryIO) -> None:
        file.seek(0)
        main = ThreadPlan(None)
        sidechains: dict[str, ThreadPlan] = {}
        thread_of: dict[str, ThreadPlan] = {}
        summaries, summary_lines, skipped = [], 0, 0
        tasks: dict[bytes, tuple] = {}  # prompt digest -> (where the call is, the call), the first kept
        for line, (offset, entry) in enumerate(numbered_lines(file), start=1):
            self.offsets.append(offset)
            kind = entry_kind(entry, line)
            if kind == "summary":
                summary_lines += 1
                if isinstance(entry.get("summary"), str) and isinstance(entry.get("leafUuid"), str):
                    summaries.append((entry["leafUuid"], entry["summary"].strip()[:300]))
                continue
            if kind not in ENTRY_TYPES:
                skipped += 1
                continue
            thread = thread_for(entry, line, main, sidechains, thread_of, ThreadPlan)
            try:
                self._scan(thread, entry, line, tasks if thread is main else None)
            except TranscriptError as exc:
                raise at_line(exc, line) from None

        self.size, self.skipped = file.tell(), skipped
        main.call_ids = {}  # needed no more
        if not thread_of and not main.has_messages and not sidechains:
            if not summary_lines:
                raise TranscriptError("no Claude Code entries (user, assistant, system or summary lines) found")
            self.skipped = skipped + summary_lines
            return
        first = main.first if main.first is not None else next((t.first for t in sidechains.values()), None) or {}
        claude = {k: first[k] for k in SESSION_FIELDS if k in first}
        self.repeated = {k: first[k] for k in REPEATED if k in first}
        own = [text for leaf, text in summaries if leaf in thread_of]
        title = (own[-1] if own else None) or main.first_prompt()
        del thread_of, summaries
        source, main_key = self.source, self.source.key()
        family = (FAMILY, claude["sessionId"]) if isinstance(claude.get("sessionId"), str) else None
        if main.has_messages:
            metadata = {"imported_from": source.provenance(FORMAT), "claude_code": claude}
            self.plans.append((StreamedConversation(main_key, metadata, title, family=family), main))
            parent = main_key
        else:
            parent = _parent_of_sub_agents_alone(source, claude)
        alone = not main.has_messages and len(sidechains) == 1
        for root, thread in sidechains.items():
            task = tasks.get(thread.prompt, (None, None))[1] if thread.prompt is not None else None
            metadata, title = _sub_agent(source, claude, parent, task, thread.first_prompt())
            key = main_key if alone else source.key(f"agent-{root}")
            self.plans.append((StreamedConversation(key, metadata, title, family=family), thread))
        if main.has_messages and sidechains:
            self.plans[0][0].metadata["sidechains"] = sorted(session.key for session, _ in self.plans[1:])
        self.total = sum(self._length(line) for _, thread in self.plans for line in thread.lines)

    def _scan(self, thread: ThreadPlan, entry: dict, line: int, tasks: dict | None) -> None:
        """Check one line as Thread.add would, keeping only what the thread's session needs."""
        thread.lines.append(line)
        if thread.first is None:
            thread.first = {k: entry[k] for k in REPEATED if k in entry}
        kind = entry["type"]
        uuid = entry.get("uuid") or f"line-{line}"
        if kind == "system":
            if entry.get("subtype") == "compact_boundary":
                thread.pending = line
                return
            thread.has_messages = True
            thread.note([{"role": "system", "content": text_of(entry.get("content"))}], entry)
            return
        message = entry_message(entry, kind, line)
        thread.has_messages = True
        if kind == "assistant":
            message_id = message.get("id") or uuid
            lines = thread.assistants.get(message_id)
            if lines is None:
                thread.assistants[message_id] = lines = line
            elif isinstance(lines, int):
                thread.assistants[message_id] = array("q", (lines, line))
            else:
                lines.append(line)
            probe = AssistantMessage(message_id, {})
            probe.add(message.get("content", ""))
            if tasks is not None and probe.tool_calls:
                self._task_calls(thread, message_id, probe.tool_calls, line, tasks)
            return
        if entry.get("isCompactSummary"):
            if thread.pending is not None:
                thread.boundaries[thread.pending] = line
                thread.pending = None
            thread.note([{"role": "user", "content": text_of(message.get("content"))}], entry)
            return
        thread.note(user_messages(message.get("content", ""), uuid, {}), entry)

    @staticmethod
    def _task_calls(main: ThreadPlan, message_id, calls: list[dict], line: int, tasks: dict) -> None:
        """The Task calls of a main-thread line, kept by prompt as `_task_calls` keeps them: the first in
        the order of the joined messages (a message's place is its first line's)."""
        lines = main.assistants[message_id]
        first = lines if isinstance(lines, int) else lines[0]
        known = main.call_ids.setdefault(message_id, [])
        for index, call in enumerate(calls):
            if any(seen == call["id"] for seen in known):
                continue  # the same block logged twice
            known.append(call["id"])
            found = _task_call(call)
            if found is None:
                continue
            digest, where = _digest(found[0]), (first, line, index)
            if digest not in tasks or where < tasks[digest][0]:
                tasks[digest] = (where, found[1])

    def sessions(self, file: BinaryIO) -> Iterator[StreamedConversation]:
        self.done = 0
        for streamed, thread in self.plans:
            conversation = replace(streamed, metadata=copy.deepcopy(streamed.metadata))
            conversation.messages = self._messages(file, thread)
            yield conversation

    def _entry(self, file: BinaryIO, line: int) -> dict:
        offset = self.offsets[line - 1]
        file.seek(offset)
        return json_line(file.readline(), line, offset == 0)

    def _messages(self, file: BinaryIO, thread: ThreadPlan) -> Iterator[dict | ImportedCheckpoint]:
        """The thread's messages as Thread makes them, with each checkpoint where store_session makes it:
        after the last message it covers."""
        count, covered = 0, 0
        answered: dict[int, tuple] = {}  # summary line -> (its boundary's compactMetadata, checkpoint made)
        for line in thread.lines:
            entry = self._entry(file, line)
            self.done += self._length(line)
            kind, uuid, stamp = entry["type"], entry.get("uuid") or f"line-{line}", entry.get("timestamp")
            if kind == "system" and entry.get("subtype") == "compact_boundary":
                summary = None
                if line in thread.boundaries:
                    answer = thread.boundaries[line]
                    summary = text_of(self._entry(file, answer)["message"].get("content"))
                    made = count > covered and bool(summary.strip())
                    answered[answer] = (entry.get("compactMetadata"), made)
                elif line == thread.pending:  # never answered: Thread.finish makes its checkpoint
                    made = count > covered
                    summary = text_of(entry.get("content")) or "Conversation compacted (no summary was logged)."
                else:
                    made = False  # another boundary came before its summary line
                if made:
                    covered = count
                    yield ImportedCheckpoint(last=count, at=count, summary=summary, summarizer=SUMMARIZER,
                                             created_at=stamp)
                continue
            attributes = _attributes(entry)
            if kind == "system":
                messages = [{"id": uuid, "role": "system", "content": text_of(entry.get("content")),
                             "attributes": attributes}]
            elif kind == "assistant":
                message = entry["message"]
                message_id = message.get("id") or uuid
                lines = thread.assistants[message_id]
                if line != (lines if isinstance(lines, int) else lines[0]):
                    continue  # joined into the message of its first line
                assistant = AssistantMessage(message_id, attributes)
                assistant.add(message.get("content", ""))
                for later in () if isinstance(lines, int) else lines[1:]:
                    other = self._entry(file, later)
                    assistant.attributes.setdefault("merged_uuids", []).append(other.get("uuid") or f"line-{later}")
                    assistant.add(other["message"].get("content", ""))
                if stamp:
                    assistant.created_at = stamp
                messages = [assistant.message()]
            elif entry.get("isCompactSummary"):
                summary = text_of(entry["message"].get("content"))
                message = {"id": uuid, "role": "user", "content": summary, "attributes": attributes}
                if line in answered:
                    metadata, made = answered.pop(line)
                    message["attributes"]["compactMetadata"] = metadata
                else:
                    made = count > covered and bool(summary.strip())
                    if made:
                        covered = count
                        yield ImportedCheckpoint(last=count, at=count, summary=summary, summarizer=SUMMARIZER,
                                                 created_at=stamp)
                if made:
                    message["include_in_messages"] = False
                    message["attributes"]["not_sent_reason"] = SUMMARY_NOT_SENT
                messages = [message]
            else:
                if entry.get("isMeta"):
                    attributes["hidden_in_source_ui"] = True
                messages = user_messages(entry["message"].get("content", ""), uuid, attributes)
            for message in messages:
                if stamp and kind != "assistant":
                    message["created_at"] = stamp
                attributes = message.get("attributes") or {}
                for name, value in self.repeated.items():
                    if name in attributes and attributes[name] == value:
                        del attributes[name]
                count += 1
                yield message
