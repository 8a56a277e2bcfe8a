"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`), read as the openai/codex
source writes them: codex-rs/protocol/src/protocol.rs (RolloutLine, RolloutItem, SessionMetaLine,
TurnContextItem, CompactedItem, EventMsg), codex-rs/protocol/src/models.rs (ResponseItem), and codex-rs/core
(the rollout recorder and its policy, compact.rs, the history rebuilt from a rollout on resume).

A line is `{"timestamp", "type", "payload"}`: a RolloutItem tagged `type` (session_meta, response_item,
compacted, turn_context, event_msg) with its `payload`, beside the line's timestamp. Rollouts written before
that wrapper start with the session meta itself (`id`, `timestamp`, `instructions`), then hold one Responses
item a line and `{"record_type": "state"}` lines; they are read too.

- `session_meta` (the first; a fork repeats its parent's): the session's fields (id, cwd, originator,
  cli_version, source, model_provider, git...) go to metadata.codex. `base_instructions.text` is the
  `instructions` Codex sends with every request: it becomes the session's instructions and a system message
  first in the raw log. The `instructions` of older metas held the user's AGENTS.md text, which Codex also
  sends as a user message: it stays in metadata.
- `response_item`: what Codex sends to the model, converted as openai-responses items are
  (sessions.wire.openai_responses): `message` (developer and system ones become system messages),
  `function_call`, `function_call_output` (a string or input_text / input_image items), `reasoning` (the
  reasoning of the assistant message that follows it). A `local_shell_call` becomes a `local_shell` tool
  call whose arguments are its action as JSON, a `custom_tool_call` a tool call whose arguments are its
  free-form `input` as the model wrote it (an apply_patch body, not JSON), a `custom_tool_call_output` a tool
  result. The context Codex injects (`<environment_context>`, `<user_instructions>`, AGENTS.md, permissions)
  stays among the messages, since the model got it; it only never gives the title.
  Codex never sends `ghost_snapshot` items nor item types it does not know (they read as `Other`): they are
  skipped. It does send `web_search_call`, `image_generation_call` and `compaction` items, which ctxweb
  cannot show: a file holding one is refused, naming its line.
- `turn_context`: the latest turn's settings (model, cwd, approval and sandbox policies, effort...) go to
  metadata.codex_turn_context, without the instruction texts it repeats (they are messages already).
- `event_msg`: `token_count` keeps its latest usage figures in metadata.codex_token_usage;
  `thread_rolled_back` drops the last user turns from what Codex sends, as its history does (their messages
  stay in the raw log, excluded from the model input); the other events repeat the items for the UI and
  are skipped.
- `compacted`: a compaction Codex made becomes a checkpoint (summarizer "codex") covering every message
  before it. Its summary is `message`, or when that is empty the summary message of `replacement_history`
  (the user message that starts with Codex's summary preface).
  After a compaction Codex sends `replacement_history` (the recent real user messages it keeps, the summary
  as a user message, and for a compaction mid-turn the initial context), then the later items. So the items
  of `replacement_history` other than the summary are stored again after the checkpoint, marked
  attributes.codex_replacement_history: the model input is the checkpoint's summary, those items, then what
  followed. The order differs in one place: ctxweb puts a checkpoint's summary first, Codex after the user
  messages it keeps. A compaction without `replacement_history` (older Codex) had Codex rebuild the same from
  the real user messages it held: those are stored again, as text (Codex keeps the newest within about
  20,000 tokens; the import keeps them all). A compaction whose summary is nowhere (an empty message, and
  an encrypted `compaction` item or nothing in `replacement_history`) fails the file.

Lines counted as skipped: event_msg lines other than token_count and thread_rolled_back, skipped items,
state lines, a second session_meta and lines of other types. A line that is not a rollout line, or whose
payload is not an object, fails the file with a sentence naming the line.
"""

import json

from sessions.wire.openai_responses import Conversion, instructions_of
from sessions.wire.parsed import (
    ImportedCheckpoint,
    ImportedSession,
    Parsed,
    Source,
    TranscriptError,
    one_line,
    text_of,
)

FORMAT = "codex"
SUMMARIZER = "codex"
LINE_TYPES = ("session_meta", "response_item", "compacted", "turn_context", "event_msg")
CONVERTED = ("message", "function_call", "function_call_output", "reasoning")  # openai-responses items
CODEX_TOOL_ITEMS = ("local_shell_call", "custom_tool_call", "custom_tool_call_output")
NOT_SHOWN = ("web_search_call", "image_generation_call", "compaction", "compaction_summary")
LEGACY_ITEMS = (*CONVERTED, "local_shell_call")  # what rollouts before the line wrapper hold
# How the text Codex puts before a compaction's summary begins (codex-rs/core/templates/compact).
SUMMARY_START = "Another language model started to solve this problem and produced a summary"
# User messages Codex writes itself, carrying context rather than a prompt (case-insensitive).
CONTEXT_MARKERS = ("<environment_context>", "<user_instructions>", "# agents.md instructions", "<skill>",
                   "<user_shell_command>", "<turn_aborted>", "<subagent_notification>", "<context_update>")
INSTRUCTION_TEXTS = ("base_instructions", "user_instructions", "developer_instructions")
REPLAYED = "codex_replacement_history"
ROLLED_BACK = "Codex dropped this turn from its history (thread rollback) and did not send it again"


def looks_like(value) -> bool:
    """JSON Lines of rollout lines (a RolloutItem `type` with an object `payload`), or a rollout written
    before that wrapper: the session meta (`id`, `timestamp`, no `type`), then Responses items."""
    if not isinstance(value, list) or not value:
        return False
    if any(_rollout_line(record) for record in value):
        return True
    return _legacy_meta(value[0]) and any(isinstance(r, dict) and r.get("type") in LEGACY_ITEMS for r in value[1:])


def _rollout_line(record) -> bool:
    return isinstance(record, dict) and record.get("type") in LINE_TYPES and isinstance(record.get("payload"), dict)


def _legacy_meta(record) -> bool:
    return (isinstance(record, dict) and not {"type", "role", "payload", "messages", "traj", "history"} & record.keys()
            and isinstance(record.get("id"), str) and isinstance(record.get("timestamp"), str))


def _lines(records: list):
    """(line number, type, payload, timestamp) of each line, in either shape."""
    legacy = _legacy_meta(records[0])
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise TranscriptError(f"line {number} is not a Codex rollout line: it is not a JSON object")
        if legacy:
            if number == 1:
                yield number, "session_meta", record, record.get("timestamp")
            elif record.get("record_type") == "state":
                yield number, "state", record, None
            elif isinstance(record.get("type"), str):
                yield number, "response_item", record, None
            else:
                raise TranscriptError(f"line {number} is not a Codex rollout line: it has no `type`")
            continue
        kind = record.get("type")
        if not isinstance(kind, str) or "payload" not in record:
            raise TranscriptError(f"line {number} is not a Codex rollout line: it needs a `type` and a `payload`")
        if not isinstance(record["payload"], dict):
            raise TranscriptError(f"line {number}: the payload of a {kind} line must be a JSON object")
        yield number, kind, record["payload"], record.get("timestamp")


def is_prompt(text: str) -> bool:
    """Whether a user message's text is a real prompt: not context Codex injects, not a compaction summary."""
    text = text.lstrip()
    return bool(text) and not text.lower().startswith(CONTEXT_MARKERS) and not text.startswith(SUMMARY_START)


def _is_summary(item, message: str) -> bool:
    """Whether a replacement_history item is the user message carrying the compaction's summary."""
    if not isinstance(item, dict) or item.get("type", "message") != "message" or item.get("role") != "user":
        return False
    text = text_of(item.get("content")).strip()
    return bool(text) and (text == message.strip() or text.startswith(SUMMARY_START))


def _as_responses_item(item: dict) -> dict:
    """Codex's own tool items as the function call items they stand for (their type kept as codex_type)."""
    kind = item.get("type")
    if kind == "local_shell_call":
        call_id = item.get("call_id") or item.get("id")  # `id` when Codex used Chat Completions
        if not isinstance(call_id, str):
            raise TranscriptError("a local_shell_call needs a call_id")
        rest = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "action")}
        return {"type": "function_call", "call_id": call_id, "name": "local_shell",
                "arguments": json.dumps(item.get("action"), ensure_ascii=False), "codex_type": kind, **rest}
    if kind == "custom_tool_call":
        if not isinstance(item.get("input"), str):
            raise TranscriptError("a custom_tool_call's input must be a string")
        rest = {k: v for k, v in item.items() if k not in ("type", "input")}
        return {**rest, "type": "function_call", "arguments": item["input"], "codex_type": kind}
    if kind == "custom_tool_call_output":
        return {**item, "type": "function_call_output", "codex_type": kind}
    return item


class Rollout:
    """A rollout read line by line into one session."""

    def __init__(self, source: Source):
        self.source = source
        self.places: list[tuple[int, int]] = []  # each converted item's (line, place in that line)
        self.conversion = Conversion(lambda index: source.message_id(*self.places[index]))
        self.stamps: dict[int, str] = {}
        self.meta: dict | None = None
        self.turn_context: dict | None = None
        self.token_usage: dict | None = None
        self.checkpoints: list[ImportedCheckpoint] = []
        self.covered = 0  # messages the latest checkpoint covers
        self.skipped = 0

    def read(self, number: int, kind: str, payload: dict, stamp) -> None:
        if isinstance(stamp, str):
            self.stamps[number] = stamp
        if kind == "session_meta" and self.meta is None:
            self._session_meta(number, payload)
        elif kind == "response_item":
            self._response_item(number, payload)
        elif kind == "compacted":
            self._compacted(number, payload, stamp)
        elif kind == "turn_context":
            self.turn_context = payload
        elif kind == "event_msg" and payload.get("type") == "token_count":
            if isinstance(payload.get("info"), dict):
                self.token_usage = payload["info"]
        elif kind == "event_msg" and payload.get("type") == "thread_rolled_back":
            self._roll_back(number, payload.get("num_turns"))
        else:
            self.skipped += 1

    def _feed(self, number: int, place: int, item: dict, where: str) -> list[dict]:
        """Convert one item; the messages it made."""
        self.places.append((number, place))
        before = len(self.conversion.out)
        try:
            self.conversion.item(len(self.places) - 1, item)
        except TranscriptError as exc:
            raise TranscriptError(f"{where}: {exc}") from None
        return [message for _, message in self.conversion.out[before:]]

    def _session_meta(self, number: int, meta: dict) -> None:
        self.meta = meta
        base = meta.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else base
        if isinstance(text, str) and text.strip():
            system = {"type": "message", "role": "system", "content": text}
            for message in self._feed(number, 0, system, f"line {number}"):
                message["attributes"] = {"codex_source": "session_meta.base_instructions"}

    def _item(self, number: int, place: int, item, where: str) -> list[dict]:
        """One Responses item: converted, skipped (Codex never sends it: an empty list) or refused."""
        if not isinstance(item, dict):
            raise TranscriptError(f"{where}: a response item must be an object")
        kind = item.get("type", "message" if "role" in item else None)
        if kind in NOT_SHOWN:
            raise TranscriptError(f"{where}: Codex sent the model a {kind} item, which ctxweb cannot show (it takes "
                                  f"{', '.join(CONVERTED + CODEX_TOOL_ITEMS)} items)")
        if kind not in CONVERTED + CODEX_TOOL_ITEMS:
            return []
        try:
            converted = _as_responses_item(item)
        except TranscriptError as exc:
            raise TranscriptError(f"{where}: {exc}") from None
        return self._feed(number, place, converted, where)

    def _response_item(self, number: int, item: dict) -> None:
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in NOT_SHOWN + CONVERTED + CODEX_TOOL_ITEMS:
            self.skipped += 1  # ghost snapshots, and types Codex reads as Other: never sent
            return
        self._item(number, 0, item, f"line {number}")

    def _summary(self, number: int, message: str, history: list | None) -> str:
        if message.strip():
            return message
        found = [item for item in history or () if _is_summary(item, message)]
        if found:
            return text_of(found[-1]["content"])
        encrypted = any(isinstance(i, dict) and i.get("type") in ("compaction", "compaction_summary")
                        for i in history or ())
        held = ("an encrypted compaction item (a summary made by the server, which ctxweb cannot show)"
                if encrypted else "no summary message")
        raise TranscriptError(f"line {number}: the compaction has no summary: its message is empty and its "
                              f"replacement_history holds {held}")

    def _compacted(self, number: int, payload: dict, stamp) -> None:
        message, history = payload.get("message", ""), payload.get("replacement_history")
        if not isinstance(message, str):
            raise TranscriptError(f"line {number}: a compaction's message must be a string")
        if history is not None and not isinstance(history, list):
            raise TranscriptError(f"line {number}: a compaction's replacement_history must be a list of items")
        summary = self._summary(number, message, history)
        count = self.conversion.close()
        if count <= self.covered:  # nothing to cover: the model got the summary as a user message
            user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary}]}
            self._feed(number, 0, user, f"line {number}")
        else:
            self.checkpoints.append(ImportedCheckpoint(last=count, at=count, summary=summary, summarizer=SUMMARIZER,
                                                       created_at=stamp if isinstance(stamp, str) else None))
        since, self.covered = self.covered, max(count, self.covered)
        if history is None:
            replayed = self._user_texts(number, [m for _, m in self.conversion.out[since:count]])
        else:
            replayed = []
            for place, item in enumerate(history, start=1):
                if not _is_summary(item, message):
                    replayed += self._item(number, place, item, f"line {number}, replacement_history[{place - 1}]")
        for replay in replayed:
            replay.setdefault("attributes", {})[REPLAYED] = True
        self.conversion.close()

    def _user_texts(self, number: int, messages: list[dict]) -> list[dict]:
        """The real user messages Codex rebuilds its history from after a compaction without
        replacement_history, as text."""
        made = []
        texts = [text_of(m["content"]) for m in messages if m["role"] == "user" and m.get("include_in_messages", True)]
        for place, text in enumerate((t for t in texts if is_prompt(t)), start=1):
            user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
            made += self._feed(number, place, user, f"line {number}")
        return made

    def _roll_back(self, number: int, turns) -> None:
        """Codex drops its last `turns` user turns: from the latest real user messages on, nothing is sent."""
        if isinstance(turns, bool) or not isinstance(turns, int) or turns < 0:
            raise TranscriptError(f"line {number}: a thread_rolled_back event needs num_turns, a whole number")
        self.conversion.close()
        live = [m for _, m in self.conversion.out[self.covered:] if m.get("include_in_messages", True)]
        starts = [i for i, m in enumerate(live) if m["role"] == "user" and is_prompt(text_of(m["content"]))]
        if not turns or not starts:
            return
        for message in live[starts[max(len(starts) - turns, 0)]:]:
            message["include_in_messages"] = False
            message.setdefault("attributes", {})["not_sent_reason"] = ROLLED_BACK

    def title(self, messages: list[dict]) -> str | None:
        for message in messages:
            text = text_of(message["content"])
            if message["role"] == "user" and is_prompt(text) and REPLAYED not in (message.get("attributes") or {}):
                return one_line(text)
        return None

    def session(self) -> ImportedSession:
        self.conversion.close()
        if not self.conversion.out:
            raise TranscriptError("the rollout holds no messages (no response_item lines)")
        for index, message in self.conversion.out:
            stamp = self.stamps.get(self.places[index][0])
            if stamp:
                message.setdefault("created_at", stamp)
        messages = [message for _, message in self.conversion.out]
        meta = {k: v for k, v in (self.meta or {}).items() if k != "base_instructions"}
        metadata = {"imported_from": self.source.provenance(FORMAT), "codex": meta}
        if self.turn_context is not None:
            metadata["codex_turn_context"] = {k: v for k, v in self.turn_context.items() if k not in INSTRUCTION_TEXTS}
        if self.token_usage is not None:
            metadata["codex_token_usage"] = self.token_usage
        started = meta.get("timestamp") if isinstance(meta.get("timestamp"), str) else None
        return ImportedSession(
            key=self.source.key(),
            messages=messages,
            title=self.title(messages),
            metadata=metadata,
            instructions=instructions_of(messages),
            created_at=started or next(iter(self.stamps.values()), None),
            checkpoints=self.checkpoints,
        )


def parse(value, source: Source) -> Parsed:
    if not isinstance(value, list) or not value:
        raise TranscriptError("a Codex rollout is JSON Lines: one line per record")
    rollout = Rollout(source)
    for number, kind, payload, stamp in _lines(value):
        rollout.read(number, kind, payload, stamp)
    return Parsed(FORMAT, [rollout.session()], rollout.skipped)
