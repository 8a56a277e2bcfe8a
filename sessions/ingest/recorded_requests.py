"""Sessions rebuilt from recorded requests: what an application sent its model, one request at a time
(OpenTelemetry spans of LLM calls, request-log lines, a trajectory's steps), and what it dropped, edited
or replaced between two requests.

Every source (sessions.ingest.otlp, the request-log and SWE-agent importers) turns what it reads into
CapturedRequest objects and hands them to record_requests, which stores each once and rebuilds the
session's raw log from the sequence of requests:

- Threads. A request that does not continue the previous requests of its conversation starts a thread of
  its own: a session keyed `<key>:2`, `<key>:3`..., linked to the first both ways (`metadata.thread_of`,
  `metadata.threads`). A request continues a thread when it carries one of the assistant or tool
  messages the thread's latest request sent or received (an application that trims its history, or
  whose system prompt changes, still sends its recent turns); or, with the same system prompt, when it
  is not a conversation's opening request (one message besides the system prompt) or opens with the same
  first user message (a retry). So another system prompt (a second agent), or an opening request with
  another first question (a second task), starts a thread, while an application that replaced its whole
  history with a summary of its own goes on in the same one.
- Matching. A request's messages are matched to the raw log by position first: the longest run that
  repeats the previous request of the thread (and then its response) is the same raw messages. A message
  at such a position with the same role and tool ids but other content, confirmed by a later position
  that repeats exactly, is the application's edit of that raw message (`edited`: a trimmed tool output,
  an elided observation). The rest is matched by content, in order (never to a raw message before one
  already matched), so a message sent again after others is a new raw message where it was sent. What
  still matches nothing is new (after the last matched message: appended to the raw log) or the
  application's own (before it: a summary or rewrite, listed in `unmatched`).
- The model input of such a session is what was sent (sessions.context.recorded_input): the request in force,
  its response and what was stored after it. `at_seq` says when each request was sent, in raw seqs.
"""

import bisect
import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction

from sessions.access.masking import mask_value
from sessions.access.masking_policy import capture_masking
from sessions.db.messages import digests_between, digests_of
from sessions.db.recorded_requests import latest_request, stored_external_ids
from sessions.db.rows import insert_all, update_fields
from sessions.errors import DomainError
from sessions.ingest.append import Batch, append_messages, compact_after_write, parse_batch
from sessions.ingest.session_store import check_key, get_or_create_locked, update_session
from sessions.models import Project, RecordedRequest, Role, Session
from sessions.wire.tokens import REPLY_PRIMING
from sessions.wire.validation import NewMessage

MAX_KEY = 200


@dataclass
class CapturedRequest:
    """One request as a source read it, before it is stored."""

    conversation: str  # the session key: session.id / gen_ai.conversation.id, else the trace id, else the file
    external_id: str  # span id (hex), or a digest of the request-log file and line
    source: str  # "otlp" | "request_log" | "trajectory"
    started_at: datetime
    messages: list[dict]  # exactly as sent, as OpenAI Chat Completions message objects
    response: list[dict] = field(default_factory=list)  # the response's messages, same shape
    model: str = ""
    provider: str = ""
    parameters: dict = field(default_factory=dict)
    usage_input_tokens: int | None = None
    usage_output_tokens: int | None = None
    trace_id: str = ""
    ended_at: datetime | None = None
    # Messages of the conversation stored after the response that no request sent (a trajectory's last
    # observation), same shape.
    after: list[dict] = field(default_factory=list)
    derived_from: str = ""  # RecordedRequest.derived_from


@dataclass
class RecordResult:
    stored: int = 0  # requests stored
    duplicates: int = 0  # already stored (a retried export): nothing stored twice
    rejected: list[str] = field(default_factory=list)  # one plain sentence per request refused
    sessions: list[str] = field(default_factory=list)  # keys of the sessions touched, in order (threads too)


@dataclass
class _Parsed:
    captured: CapturedRequest
    messages: list[NewMessage]  # what was sent, as ctxweb messages (system messages included)
    response: list[NewMessage]
    instructions: str | None
    after: list[NewMessage] = field(default_factory=list)

    @property
    def system(self) -> str:
        """A digest of its system messages, in order (empty without any)."""
        return _system_digest(self.messages)

    @property
    def first_user(self) -> str | None:
        return next((m.digest for m in self.messages if m.role == Role.USER), None)

    @property
    def own_turns(self) -> set[str]:
        """Digests of the assistant and tool messages it sent."""
        return {m.digest for m in self.messages if m.role in (Role.ASSISTANT, Role.TOOL)}


def _system_digest(messages: list[NewMessage]) -> str:
    texts = [m.digest for m in messages if m.role == Role.SYSTEM]
    return hashlib.sha256("\n".join(texts).encode()).hexdigest() if texts else ""


def record_requests(project: Project, captured: list[CapturedRequest], actor: str = "system", *,
                    import_source: str | None = None, max_messages: int | None | bool = False) -> RecordResult:
    """Store `captured` (any sessions, any order) and rebuild each touched session.

    A request whose messages are not valid OpenAI messages is refused (a sentence in `rejected`) and
    stores nothing; the others are stored. Requests already stored (same session and external_id) are
    counted in `duplicates` and change nothing. Each conversation is rebuilt in its own transaction. An
    import names its source file (`import_source`): it may create sessions and resume those it created,
    never write into the application's (session_store.check_import_target).

    One call records at most `max_messages` messages (CTXWEB_MAX_CAPTURE_MESSAGES unless given; None: no
    bound): what an export carries past it is refused, request by request, so one capture holds a
    session's lock (all the database's, on SQLite) for a bounded time. Recording is linear in what the
    requests carry, so the bound on messages bounds the time.
    """
    if max_messages is False:
        max_messages = settings.CTXWEB_MAX_CAPTURE_MESSAGES
    if (patterns := capture_masking(project)) is not None:  # the project keeps no personal data
        for request in captured:
            request.messages, request.response, request.after = (
                mask_value(request.messages, patterns), mask_value(request.response, patterns),
                mask_value(request.after, patterns))
    result = RecordResult()
    by_conversation: dict[str, list[CapturedRequest]] = {}
    carried = 0
    for request in captured:
        carried += message_count(request)
        if max_messages is not None and carried > max_messages:
            result.rejected.append(
                f"request {request.external_id}: its conversation carries more than {max_messages} messages "
                f"in one export (CTXWEB_MAX_CAPTURE_MESSAGES); the requests past it are refused: export "
                f"smaller batches")
            continue
        by_conversation.setdefault(request.conversation, []).append(request)
    for key, requests in by_conversation.items():
        try:
            check_key(key)
        except DomainError as exc:
            result.rejected.extend(f"request {r.external_id}: {exc}" for r in requests)
            continue
        parsed = []
        for request in sorted(requests, key=lambda r: (r.started_at, r.external_id)):
            try:
                parsed.append(parse_captured(request))
            except DomainError as exc:
                result.rejected.append(f"request {request.external_id}: {exc}")
        if parsed:
            _record_conversation(project, key, parsed, actor, result, import_source)
    return result


def message_count(request: CapturedRequest) -> int:
    """Messages a captured request carries (sent, received, stored after)."""
    return sum(len(m) if isinstance(m, list) else 0 for m in (request.messages, request.response, request.after))


def parse_captured(request: CapturedRequest) -> _Parsed:
    """A captured request read as ctxweb messages (DomainError when it is not valid OpenAI messages)."""
    if not isinstance(request.messages, list) or not request.messages:
        raise DomainError("a request must carry at least one message", code="invalid_batch")
    sent = _parse_openai(request.messages)
    response = _parse_openai(request.response) if request.response else Batch([])
    after = _parse_openai(request.after) if request.after else Batch([])
    return _Parsed(request, sent.messages, response.messages, sent.instructions, after.messages)


def _parse_openai(messages: list) -> Batch:
    """OpenAI messages as ctxweb messages. A request may hold more messages than an append batch, so
    they are validated in batches of the append limit; each message is checked on its own anyway."""
    limit = settings.CTXWEB_MAX_BATCH_MESSAGES
    parts = [parse_batch(messages[i:i + limit], "openai") for i in range(0, len(messages), limit)]
    instructions = [p.instructions for p in parts if p.instructions is not None]
    return Batch([m for p in parts for m in p.messages], instructions[-1] if instructions else None)


# --- threads -------------------------------------------------------------------------------------


@dataclass
class _Signature:
    """What a thread's latest request says of the conversation it belongs to."""

    system: str
    first_user: str | None
    turns: set[str]  # digests of the assistant and tool messages it sent, and of its response

    @classmethod
    def of(cls, item: _Parsed) -> "_Signature":
        return cls(item.system, item.first_user, item.own_turns | {m.digest for m in item.response})

    def carried_by(self, item: _Parsed) -> bool:
        """Whether the request carries one of the thread's turns: the thread certainly goes on in it."""
        return bool(item.own_turns & self.turns)

    def continued_by(self, item: _Parsed) -> bool:
        if self.carried_by(item):
            return True
        if item.system != self.system:
            return False
        # The same system prompt: a conversation's opening request (its one message besides the system
        # prompt) with another first question is another conversation; a longer request that carries
        # none of the thread's turns has replaced them (by a summary of its own, say), and goes on.
        opening = sum(1 for m in item.messages if m.role != Role.SYSTEM) == 1
        return not opening or item.first_user == self.first_user


@dataclass
class _Thread:
    key: str
    latest: _Signature | None  # None: a session with no request yet, which takes the first
    items: list[_Parsed] = field(default_factory=list)
    # As stored before this capture: its latest request (None: none, or not read; `read` says which), and
    # for the conversation's first thread its session, which the capture holds locked.
    stored: RecordedRequest | None = None
    read: bool = False
    locked: Session | None = None


def thread_key(key: str, number: int) -> str:
    suffix = f":{number}"
    return key[: MAX_KEY - len(suffix)] + suffix


def _stored_threads(project: Project, base: Session) -> list[_Thread]:
    """The conversation's threads stored so far, the first (`base`, the conversation's session, which the
    caller holds locked) first, each with its latest request and that request's signature."""
    others = [k for k in (base.metadata or {}).get("threads", []) if isinstance(k, str) and k != base.key]
    sessions = {base.key: base}
    if others:
        sessions.update((s.key, s) for s in Session.objects.filter(project=project, key__in=others))
    threads = []
    for k in [base.key, *others]:
        if k not in sessions:
            continue
        latest = latest_request(sessions[k])
        threads.append(_Thread(k, None if latest is None else _Signature.of(_stored_parsed(latest)),
                               stored=latest, read=True, locked=base if k == base.key else None))
    return threads


@dataclass
class _Key:
    """A message as matching reads it: its role, digest and tool ids (RecordedRequest.message_keys)."""

    role: str
    digest: str
    call_ids: list
    tool_call_id: str

    @classmethod
    def of(cls, message: NewMessage) -> "_Key":
        return cls(message.role, message.digest, list(message.call_ids), message.tool_call_id)

    def stored(self) -> list:
        return [self.role, self.digest, self.call_ids, self.tool_call_id]


def _keys(messages: list[NewMessage]) -> list[list]:
    return [_Key.of(m).stored() for m in messages]


def _stored_parsed(recorded: RecordedRequest) -> _Parsed:
    """A stored request as it was parsed when recorded: from its keys (its messages are not read), or,
    recorded before they were kept, its messages parsed again (they were valid then)."""
    if recorded.message_keys and len(recorded.message_keys) == len(recorded.message_seqs or ()):
        return _Parsed(None, [_Key(*k) for k in recorded.message_keys], [_Key(*k) for k in recorded.response_keys],
                       None)
    sent = _parse_openai(recorded.messages)
    response = _parse_openai(recorded.response) if recorded.response else Batch([])
    return _Parsed(None, sent.messages, response.messages, sent.instructions)


def _threads(project: Project, base: Session, parsed: list[_Parsed]) -> list[_Thread]:
    """Each request (in time order) given to the thread it continues (one whose turns it carries, else one
    it goes on from by its system prompt and first question; the most recent first), or to a new thread."""
    key = base.key
    threads = _stored_threads(project, base)
    recent: list[_Thread] = list(reversed(threads))  # most recently given a request first
    for item in parsed:
        thread = next((t for t in recent if t.latest is not None and t.latest.carried_by(item)), None) or next(
            (t for t in recent if t.latest is None or t.latest.continued_by(item)), None)
        if thread is None:
            thread = _Thread(key if not threads else thread_key(key, len(threads) + 1), None)
            threads.append(thread)
        else:
            recent.remove(thread)
        recent.insert(0, thread)
        thread.items.append(item)
        thread.latest = _Signature.of(item)
    return threads


def _record_conversation(project: Project, key: str, parsed: list[_Parsed], actor: str, result: RecordResult,
                         import_source: str | None) -> None:
    with transaction.atomic():
        # The conversation's first session, locked first, so that two captures of one conversation
        # assign their requests to threads one after the other.
        base, _ = get_or_create_locked(project, key, actor, import_source=import_source)
        threads = _threads(project, base, parsed)
        for thread in threads:
            if thread.items:
                _record_session(project, thread, actor, result, import_source)
        if len(threads) > 1:
            _link_threads(project, [t.key for t in threads], actor, import_source)


def _link_threads(project: Project, keys: list[str], actor: str, import_source: str | None) -> None:
    """The first session lists the others (`metadata.threads`); each names the first (`metadata.thread_of`).
    Written only when it changes."""
    first, others = keys[0], keys[1:]
    sessions = {s.key: s for s in Session.objects.filter(project=project, key__in=keys)}

    def link(key, name, value):
        metadata = dict(sessions[key].metadata or {})
        if metadata.get(name) != value:
            metadata[name] = value
            update_session(project, key, {"metadata": metadata}, actor, import_source=import_source)

    link(first, "threads", others)
    for key in others:
        link(key, "thread_of", first)


# --- matching ------------------------------------------------------------------------------------


def _record_session(project: Project, thread: _Thread, actor: str, result: RecordResult,
                    import_source: str | None) -> None:
    """Record a thread's requests in its session, within the conversation's transaction (a failure rolls
    all of it back, so no savepoint of its own: on PostgreSQL each is two more round trips)."""
    from sessions.context.figures import refresh_recorded_figures  # it reads what this module stores

    key, parsed = thread.key, thread.items
    with transaction.atomic(savepoint=False):
        # The first thread's session is the conversation's, locked already; another's is locked here.
        session = thread.locked or get_or_create_locked(project, key, actor, import_source=import_source)[0]
        known = stored_external_ids(session, [p.captured.external_id for p in parsed])
        fresh, seen = [], set(known)
        for item in parsed:
            if item.captured.external_id in seen:
                result.duplicates += 1
            else:
                seen.add(item.captured.external_id)
                fresh.append(item)
        if not fresh:
            return
        raw = _RawLog(session)
        first = fresh[0].captured.started_at
        # Requests arriving in order (the usual case) are numbered on from the last, and what each dropped
        # is worked out from the one before; one arriving before a stored request renumbers them all. The
        # session's latest request, read with its thread, answers both when it started no later than the
        # first of these.
        latest = thread.stored if thread.read else latest_request(session)
        if latest is None or latest.started_at <= first:
            stored_before, in_order = latest, True
        else:
            stored_before, in_order = latest_request(session, started_by=first), False
        previous = _Reference.stored(stored_before) if stored_before is not None else None
        number = session.request_count
        rows, before = [], stored_before
        for item in fresh:
            row = _match(project, key, session, item, raw, actor, previous, import_source)
            if in_order:
                number += 1
                row.number, row.dropped_seqs = number, dropped_between(before, row) if before is not None else []
            rows.append(row)
            previous, before = _Reference.recorded(item, row), row
        insert_all(rows)
        if not in_order:
            _renumber(session)
        # The newest request's messages: the last recorded here when they came in order.
        sent = fresh[-1].captured.messages if in_order else RecordedRequest.objects.filter(
            session=session).order_by("-number").values_list("messages", flat=True).first()
        instructions = _instructions_of(sent)
        count = number if in_order else RecordedRequest.objects.filter(session=session).count()
        if instructions is not None and instructions != session.instructions:
            update_fields(session, request_count=count)
            update_session(project, key, {"instructions": instructions}, actor, import_source=import_source)
            session.refresh_from_db()  # written through a session of its own
        # Otherwise `session` is as stored: each append above wrote through it. The request count is
        # written with the figures, in one UPDATE; the figures are those of the latest request, when they
        # came in order.
        refresh_recorded_figures(session, rows[-1] if in_order else None, request_count=count)
        compact_after_write(session, actor)  # the rule of every write: never runs here, the application compacts
        result.stored += len(rows)
        result.sessions.append(key)


class _RawLog:
    """The session's raw messages by digest, read as matching needs them: those after a seq, once (a request
    that repeats the one before matches by position, so it reads only what was stored since), and kept up
    to date as requests append to it."""

    def __init__(self, session: Session):
        self.session = session
        self.by_digest: dict[str, list[int]] = {}  # seqs in increasing order
        self.digests: dict[int, str] = {}
        self.tokens: dict[int, int] = {}  # stored token counts of the raw messages read
        self.last_seq = session.message_count
        self.read_after = session.message_count  # every raw message after this seq is known

    def _read(self, after: int) -> None:
        """Know every raw message after `after` too."""
        if after >= self.read_after:
            return
        older = {}
        for seq, digest, tokens in digests_between(self.session, after, self.read_after):
            older.setdefault(digest, []).append(seq)
            self.digests[seq] = digest
            self.tokens[seq] = tokens
        for digest, seqs in older.items():
            self.by_digest[digest] = seqs + self.by_digest.get(digest, [])
        self.read_after = after

    def digest_of(self, seqs) -> None:
        """Know the digests of these raw messages (a reference's edited ones)."""
        wanted = [seq for seq in seqs if seq not in self.digests and seq <= self.read_after]
        self._read_rows(wanted)

    def _read_rows(self, seqs: list[int]) -> None:
        for seq, digest, tokens in digests_of(self.session, seqs):
            self.digests[seq], self.tokens[seq] = digest, tokens

    def sent_tokens(self, messages: list[NewMessage], seqs: list[int | None]) -> list[int]:
        """Each sent message's tokens. One the raw log holds as it was sent (its seq, the same digest: the
        digest covers all that is counted) has its count stored, read in one query with the others not read
        yet; only the rest (new, edited, system messages) are counted."""
        self._read_rows([seq for seq in seqs if seq is not None and seq not in self.tokens and seq <= self.read_after])
        return [self.tokens[seq] if seq is not None and seq in self.tokens and self.digests.get(seq) == m.digest
                else m.tokens for m, seq in zip(messages, seqs, strict=True)]

    def find(self, digest: str, after: int, used: set[int]) -> int | None:
        """The first raw message with this digest after seq `after` not used yet."""
        self._read(after)
        seqs = self.by_digest.get(digest)
        if not seqs:
            return None
        for i in range(bisect.bisect_right(seqs, after), len(seqs)):
            if seqs[i] not in used:
                return seqs[i]
        return None

    def add(self, digest: str, seq: int, tokens: int) -> None:
        self.by_digest.setdefault(digest, []).append(seq)
        self.digests[seq] = digest
        self.tokens[seq] = tokens
        self.last_seq = max(self.last_seq, seq)


@dataclass
class _Sent:
    """One non-system message a request sent (or received as its response), as matching compares it."""

    seq: int | None  # the raw message it is (None: the application's own)
    digest: str  # of what was sent
    role: str
    ids: tuple
    edited: bool = False


def _ids(message) -> tuple:
    return tuple(message.call_ids), message.tool_call_id


@dataclass
class _Reference:
    """The previous request of the session, as the next one is aligned with it: its non-system messages,
    then its response."""

    items: list[_Sent]

    @classmethod
    def recorded(cls, item: _Parsed, row: RecordedRequest) -> "_Reference":
        edited = set(row.edited)
        sent = [_Sent(seq, m.digest, m.role, _ids(m), i in edited)
                for i, (m, seq) in enumerate(zip(item.messages, row.message_seqs, strict=True)) if m.role != Role.SYSTEM]
        answered = [_Sent(seq, m.digest, m.role, _ids(m)) for m, seq in zip(item.response, row.response_seqs,
                                                                             strict=False)]
        return cls(sent + answered)

    @classmethod
    def stored(cls, recorded: RecordedRequest) -> "_Reference | None":
        """A stored request as the next one is aligned with (None when it cannot be read back)."""
        try:
            item = _stored_parsed(recorded)
        except DomainError:  # stored requests were valid when recorded; for safety, align with nothing
            return None
        if len(item.messages) != len(recorded.message_seqs or ()):
            return None
        return cls.recorded(item, recorded)


def _align(messages: list[NewMessage], nonsys: list[int], previous: _Reference, raw: _RawLog
           ) -> tuple[int, dict[int, int], list[int]]:
    """How many of the request's non-system messages repeat the previous request position by position;
    the raw seq of each of them (by index into `messages`) and which of them are the application's edits.

    An edit (same role and tool ids, other content that the raw log does not hold later on) counts only
    when a later position repeats exactly: an edit followed by nothing that lines up is not one (a summary
    in place of the first turns, say), and is left to content matching."""
    raw.digest_of(ref.seq for ref in previous.items if ref.edited and ref.seq is not None)
    seqs: dict[int, int | None] = {}
    edited: list[int] = []
    pending: list[tuple[int, int]] = []  # edits waiting for an exact repeat after them
    aligned = 0  # non-system messages aligned, up to the last exact repeat
    used: set[int] = set()
    last = 0
    for k, ref in enumerate(previous.items):
        if k >= len(nonsys):
            break
        i = nonsys[k]
        message = messages[i]
        # What the raw message holds: what the previous request sent, unless that was its edit.
        raw_digest = (raw.digests.get(ref.seq) if ref.edited else ref.digest) if ref.seq is not None else None
        if ref.seq is not None and ref.seq in used:
            break
        if message.digest == ref.digest or (raw_digest is not None and message.digest == raw_digest):
            for j, seq in pending:
                seqs[j] = seq
                edited.append(j)
                used.add(seq)
            pending = []
            seqs[i] = ref.seq
            if ref.seq is not None:
                used.add(ref.seq)
                last = max(last, ref.seq)
                if message.digest != raw_digest:
                    edited.append(i)
            aligned = k + 1
            continue
        if (ref.seq is not None and message.role == ref.role and _ids(message) == ref.ids
                and raw.find(message.digest, last, used) is None):
            pending.append((i, ref.seq))
            continue
        break
    return aligned, {i: s for i, s in seqs.items()}, edited


def _match(project, key, session, item: _Parsed, raw: _RawLog, actor: str, previous: _Reference | None,
           import_source: str | None) -> RecordedRequest:
    """Match the messages sent to raw messages, append the new ones and the response."""
    messages = item.messages
    seqs: list[int | None] = [None] * len(messages)
    nonsys = [i for i, m in enumerate(messages) if m.role != Role.SYSTEM]
    aligned, by_position, edited = _align(messages, nonsys, previous, raw) if previous else (0, {}, [])
    for i, seq in by_position.items():
        seqs[i] = seq
    used = {s for s in seqs if s is not None}
    last = max(used, default=0)
    for i in nonsys[aligned:]:
        if i in by_position:
            continue
        seq = raw.find(messages[i].digest, last, used)
        if seq is not None:
            seqs[i] = seq
            used.add(seq)
            last = seq
    # What matches no raw message is new when it comes after the last message that matched (the turn
    # being sent); before it, it is the application's own summary or rewrite. A request matching nothing
    # in a session that has messages sends its new turn from its last user message on.
    matched_at = [i for i, seq in enumerate(seqs) if seq is not None]
    if matched_at:
        new_from = matched_at[-1] + 1
    elif raw.last_seq:
        users = [i for i, m in enumerate(messages) if m.role == Role.USER]
        new_from = users[-1] if users else len(messages)
    else:
        new_from = 0
    new = [i for i in range(new_from, len(messages)) if seqs[i] is None and messages[i].role != Role.SYSTEM]
    unmatched = [i for i in nonsys if seqs[i] is None and i not in new]
    sent_at, answered_at = item.captured.started_at, item.captured.ended_at or item.captured.started_at
    sent = [(messages[i], sent_at) for i in new]
    later = [(m, answered_at) for m in item.after]
    if sent:
        # Nothing stored comes after a new message, so the response (and what the application stored after
        # it) is new as well: one append for the turn, the response and the rest.
        stored = _append(project, key, session, sent + [(m, answered_at) for m in item.response] + later, raw,
                         actor, import_source)
        for i, seq in zip(new, stored, strict=False):
            seqs[i] = seq
        at_seq = stored[len(sent) - 1]
        response_seqs = stored[len(sent):len(sent) + len(item.response)]
    else:
        at_seq = raw.last_seq
        # The response follows the request; a later request that arrived first may have stored it already.
        response_seqs = []
        after = max([s for s in seqs if s is not None], default=0)
        used = {s for s in seqs if s is not None}
        to_append = []
        for message in item.response:
            seq = None if to_append else raw.find(message.digest, after, used)
            if seq is not None:
                response_seqs.append(seq)
                used.add(seq)
                after = seq
            else:
                to_append.append((message, answered_at))
        response_seqs.extend(_append(project, key, session, to_append + later, raw, actor,
                                     import_source)[:len(to_append)])
    captured = item.captured
    tokens = raw.sent_tokens(messages, seqs)
    return RecordedRequest(
        session=session, external_id=captured.external_id, source=captured.source,
        trace_id=captured.trace_id, started_at=captured.started_at, ended_at=captured.ended_at,
        model=captured.model, provider=captured.provider, parameters=captured.parameters,
        messages=captured.messages, response=captured.response, tokens=sum(tokens) + REPLY_PRIMING,
        usage_input_tokens=captured.usage_input_tokens, usage_output_tokens=captured.usage_output_tokens,
        message_seqs=seqs, unmatched=unmatched, response_seqs=response_seqs, edited=sorted(edited),
        message_tokens=tokens, at_seq=at_seq, derived_from=captured.derived_from[:300],
        message_keys=_keys(messages), response_keys=_keys(item.response),
    )


def _append(project, key, session: Session, stamped: list[tuple[NewMessage, object]], raw: _RawLog, actor: str,
            import_source: str | None) -> list[int]:
    """Append messages first seen in a request or its response, each with its time (the request's start,
    or its end for what it received), to `session`, which the caller holds locked."""
    if not stamped:
        return []
    messages = [message for message, _ in stamped]
    for message, at in stamped:
        message.client_id = ""  # the server names them; a request carries no ids of ours
        message.created_at = at
    appended = append_messages(project, key, None, actor, parsed=Batch(messages), import_source=import_source,
                               recording=True, locked=session)
    seqs = [m.seq for m in appended.messages]
    for message, seq in zip(messages, seqs, strict=True):
        raw.add(message.digest, seq, message.tokens)  # counted when it was stored
    return seqs


def _renumber(session: Session) -> None:
    """Number the session's requests by start time and work out what each dropped from the one before."""
    requests = list(RecordedRequest.objects.filter(session=session).order_by("started_at", "external_id").only(
        "number", "message_seqs", "response_seqs", "dropped_seqs"))
    changed = []
    previous = None
    for number, request in enumerate(requests, start=1):
        dropped = dropped_between(previous, request) if previous is not None else []
        if request.number != number or request.dropped_seqs != dropped:
            request.number, request.dropped_seqs = number, dropped
            changed.append(request)
        previous = request
    RecordedRequest.objects.bulk_update(changed, ["number", "dropped_seqs"])


def dropped_between(previous: RecordedRequest, request: RecordedRequest) -> list[int]:
    """Raw seqs the previous request carried (its messages and its response), or that were appended after
    them and before this request's newest message, which this request no longer carries."""
    carried = {s for s in previous.message_seqs if s is not None} | set(previous.response_seqs)
    sent = {s for s in request.message_seqs if s is not None}
    top = max(carried, default=0)
    newest = max(sent, default=0)
    expected = carried | set(range(top + 1, newest))
    return sorted(expected - sent)


def _instructions_of(messages) -> str | None:
    """The instructions a request's system messages set (the last one's text), or None without any."""
    # The importers' package imports the request-log parser, which imports this module: imported here.
    from sessions.wire.parsed import text_of

    texts = [text_of(m.get("content")) for m in messages or () if isinstance(m, dict)
             and m.get("role") in ("system", "developer")]
    return texts[-1] if texts else None
