"""Sessions rebuilt from recorded requests: what an application sent its model, one request at a time
(OpenTelemetry spans of LLM calls, request-log lines), and what it dropped between two requests.

Every source (sessions.otlp, the request-log importer) turns what it reads into CapturedRequest objects
and hands them to record_requests, which stores each once and rebuilds the session's raw log from the
sequence of requests.
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction

from .append import Batch, append_messages, parse_batch
from .errors import DomainError
from .models import Message, Project, RecordedRequest, Role, Session
from .session_store import check_key, get_or_create_locked, update_session
from .tokens import REPLY_PRIMING
from .validation import NewMessage


@dataclass
class CapturedRequest:
    """One request as a source read it, before it is stored."""

    conversation: str  # the session key: session.id / gen_ai.conversation.id, else the trace id, else the file
    external_id: str  # span id (hex), or a digest of the request-log file and line
    source: str  # "otlp" | "request_log"
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


@dataclass
class RecordResult:
    stored: int = 0  # requests stored
    duplicates: int = 0  # already stored (a retried export): nothing stored twice
    rejected: list[str] = field(default_factory=list)  # one plain sentence per request refused
    sessions: list[str] = field(default_factory=list)  # keys of the sessions touched, in order


@dataclass
class _Parsed:
    captured: CapturedRequest
    messages: list[NewMessage]  # what was sent, as ctxweb messages (system messages included)
    response: list[NewMessage]
    instructions: str | None


def record_requests(project: Project, captured: list[CapturedRequest], actor: str = "system") -> RecordResult:
    """Store `captured` (any sessions, any order) and rebuild each touched session.

    A request whose messages are not valid OpenAI messages is refused (a sentence in `rejected`) and
    stores nothing; the others are stored. Requests already stored (same session and external_id) are
    counted in `duplicates` and change nothing. Each session is rebuilt in its own transaction.
    """
    result = RecordResult()
    by_session: dict[str, list[CapturedRequest]] = {}
    for request in captured:
        by_session.setdefault(request.conversation, []).append(request)
    for key, requests in by_session.items():
        try:
            check_key(key)
        except DomainError as exc:
            result.rejected.extend(f"request {r.external_id}: {exc}" for r in requests)
            continue
        parsed = []
        for request in sorted(requests, key=lambda r: (r.started_at, r.external_id)):
            try:
                parsed.append(_parse(request))
            except DomainError as exc:
                result.rejected.append(f"request {request.external_id}: {exc}")
        if parsed:
            _record_session(project, key, parsed, actor, result)
    return result


def _parse(request: CapturedRequest) -> _Parsed:
    if not isinstance(request.messages, list) or not request.messages:
        raise DomainError("a request must carry at least one message", code="invalid_batch")
    sent = _parse_openai(request.messages)
    response = _parse_openai(request.response) if request.response else Batch([])
    return _Parsed(request, sent.messages, response.messages, sent.instructions)


def _parse_openai(messages: list) -> Batch:
    """OpenAI messages as ctxweb messages. A request may hold more messages than an append batch, so
    they are validated in batches of the append limit; each message is checked on its own anyway."""
    limit = settings.CTXWEB_MAX_BATCH_MESSAGES
    parts = [parse_batch(messages[i:i + limit], "openai") for i in range(0, len(messages), limit)]
    instructions = [p.instructions for p in parts if p.instructions is not None]
    return Batch([m for p in parts for m in p.messages], instructions[-1] if instructions else None)


def _record_session(project: Project, key: str, parsed: list[_Parsed], actor: str, result: RecordResult) -> None:
    with transaction.atomic():
        session, _ = get_or_create_locked(project, key, actor)
        known = set(RecordedRequest.objects.filter(
            session=session, external_id__in=[p.captured.external_id for p in parsed]
        ).values_list("external_id", flat=True))
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
        rows = []
        for item in fresh:
            row = _match(project, key, session, item, raw, actor)
            rows.append(row)
        RecordedRequest.objects.bulk_create(rows)
        _renumber(session)
        latest = RecordedRequest.objects.filter(session=session).order_by("-number").values_list(
            "messages", flat=True).first()
        instructions = _instructions_of(latest)
        if instructions is not None and instructions != session.instructions:
            update_session(project, key, {"instructions": instructions}, actor)
        Session.objects.filter(pk=session.pk).update(
            request_count=RecordedRequest.objects.filter(session=session).count())
        result.stored += len(rows)
        result.sessions.append(key)


class _RawLog:
    """The session's raw messages by digest, kept up to date as requests append to it."""

    def __init__(self, session: Session):
        self.by_digest: dict[str, list[int]] = {}
        self.tokens: dict[int, int] = {}  # seq -> its stored token count
        self.last_seq = session.message_count
        for seq, digest, tokens in Message.objects.filter(session=session).order_by("seq").values_list(
                "seq", "digest", "tokens"):
            self.by_digest.setdefault(digest, []).append(seq)
            self.tokens[seq] = tokens

    def find(self, digest: str, after: int, used: set[int]) -> int | None:
        """The raw message with this digest: the first after `after`, else the first not yet used."""
        candidates = [seq for seq in self.by_digest.get(digest, ()) if seq not in used]
        later = [seq for seq in candidates if seq > after]
        return (later or candidates or [None])[0]

    def add(self, digest: str, seq: int, tokens: int) -> None:
        self.by_digest.setdefault(digest, []).append(seq)
        self.tokens[seq] = tokens
        self.last_seq = max(self.last_seq, seq)


def _match(project, key, session, item: _Parsed, raw: _RawLog, actor: str) -> RecordedRequest:
    """Match the messages sent to raw messages, append the new ones and the response."""
    seqs: list[int | None] = []
    used: set[int] = set()
    last = 0
    for message in item.messages:
        if message.role == Role.SYSTEM:
            seqs.append(None)
            continue
        seq = raw.find(message.digest, last, used)
        seqs.append(seq)
        if seq is not None:
            used.add(seq)
            last = max(last, seq)
    # What matches no raw message is new when it comes after the last message that matched (the turn
    # being sent); before it, it is the application's own summary or rewrite. A request matching nothing
    # in a session that has messages sends its new turn from its last user message on.
    matched_at = [i for i, seq in enumerate(seqs) if seq is not None]
    if matched_at:
        new_from = matched_at[-1] + 1
    elif raw.last_seq:
        users = [i for i, m in enumerate(item.messages) if m.role == Role.USER]
        new_from = users[-1] if users else len(item.messages)
    else:
        new_from = 0
    new = [i for i in range(new_from, len(item.messages))
           if seqs[i] is None and item.messages[i].role != Role.SYSTEM]
    unmatched = [i for i in range(len(item.messages))
                 if seqs[i] is None and item.messages[i].role != Role.SYSTEM and i not in new]
    sent_at = item.captured.started_at
    for i, seq in zip(new, _append(project, key, [item.messages[i] for i in new], raw, actor, sent_at),
                      strict=True):
        seqs[i] = seq
    # The response follows the request; a later request that arrived first may have stored it already.
    response_seqs = []
    after = max([s for s in seqs if s is not None], default=0)
    to_append = []
    for message in item.response:
        seq = raw.find(message.digest, after, used)
        if seq is not None and seq > after and not to_append:
            response_seqs.append(seq)
            used.add(seq)
            after = seq
        else:
            to_append.append(message)
    answered_at = item.captured.ended_at or item.captured.started_at
    response_seqs.extend(_append(project, key, to_append, raw, actor, answered_at))
    captured = item.captured
    return RecordedRequest(
        session=session, external_id=captured.external_id, source=captured.source,
        trace_id=captured.trace_id, started_at=captured.started_at, ended_at=captured.ended_at,
        model=captured.model, provider=captured.provider, parameters=captured.parameters,
        messages=captured.messages, response=captured.response, tokens=_tokens_sent(item.messages, seqs, raw),
        usage_input_tokens=captured.usage_input_tokens, usage_output_tokens=captured.usage_output_tokens,
        message_seqs=seqs, unmatched=unmatched, response_seqs=response_seqs,
    )


def _tokens_sent(messages: list[NewMessage], seqs: list[int | None], raw: _RawLog) -> int:
    """The request's tokens: a message matched to the raw log counts as stored (the same digest, so the
    same count), and only the others are counted."""
    counts = (raw.tokens[seq] if seq is not None else message.tokens for message, seq in zip(messages, seqs, strict=True))
    return sum(counts) + REPLY_PRIMING


def _append(project, key, messages: list[NewMessage], raw: _RawLog, actor: str, at) -> list[int]:
    """Append messages first seen in a request (sent at `at`) or its response (received at `at`)."""
    if not messages:
        return []
    for message in messages:
        message.client_id = ""  # the server names them; a request carries no ids of ours
        message.created_at = at
    appended = append_messages(project, key, None, actor, parsed=Batch(messages))
    seqs = [m.seq for m in appended.messages]
    for message, seq in zip(messages, seqs, strict=True):
        raw.add(message.digest, seq, message.tokens)
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
    from .importers.base import text_of

    texts = [text_of(m.get("content")) for m in messages or () if isinstance(m, dict)
             and m.get("role") in ("system", "developer")]
    return texts[-1] if texts else None
