"""The model input of a session rebuilt from recorded requests: what the application sent.

A session's model input has a basis (SPEC §10):
- `raw_log`: ctxweb builds it by its own rules (sessions.context.model_input: instructions, the latest checkpoint,
  the visible messages after it). The basis of every session written through the API or imported as a
  transcript.
- `recorded_request`: the application builds it (sessions rebuilt from OpenTelemetry spans, request logs,
  trajectories that record what was sent: Session.request_count > 0). The model input is the request in
  force, exactly as sent, then its response and every visible message stored after it. As of message N,
  the request in force is the latest one sent by then (RecordedRequest.at_seq <= N). What ctxweb would
  build from the raw log by its own rules stays available (basis=raw_log), labelled as such.

The request's messages are never checked again: they are what the model received. The validity rules of
the provider formats apply to what follows them (a response's tool call awaiting its result is pending),
so every format stays a request its provider takes.
"""

from dataclasses import dataclass

from sessions.context.model_input import (
    Entry,
    ModelInput,
    build_model_input,
    check_as_of,
    check_validity,
    kept_tokens,
    model_fields_of,
    model_fields_sent,
    stored_messages,
)
from sessions.errors import DomainError
from sessions.models import RecordedRequest, Role, Session
from sessions.wire.parsed import text_of
from sessions.wire.provider_messages import to_ctxweb
from sessions.wire.tokens import count_message

RAW_LOG = "raw_log"
RECORDED_REQUEST = "recorded_request"
BASES = (RECORDED_REQUEST, RAW_LOG)


def basis_of(session: Session) -> str:
    """The basis of the session's model input unless another is asked for."""
    return RECORDED_REQUEST if session.request_count else RAW_LOG


def check_basis(session: Session, basis: str | None) -> str:
    """The basis asked for (None: the session's own), refused when the session cannot answer it."""
    if basis is None or basis == "":
        return basis_of(session)
    if basis not in BASES:
        raise DomainError(f"basis must be one of {', '.join(BASES)}", code="invalid_basis")
    if basis == RECORDED_REQUEST and not session.request_count:
        raise DomainError(f"session {session.key!r} has no recorded requests: its model input is built from the "
                          f"raw log (basis raw_log)", code="no_recorded_requests")
    return basis


def request_in_force(session: Session, as_of: int | None = None) -> RecordedRequest | None:
    """The latest request sent by message `as_of` (now, when None), or None before the first."""
    requests = RecordedRequest.objects.filter(session=session)
    if as_of is not None:
        requests = requests.filter(at_seq__lte=as_of)
    return requests.order_by("-number").first()


def sent_entries(recorded: RecordedRequest) -> list[Entry]:
    """The messages the request sent as entries of a model input: system messages as instructions where
    they stood, the others as messages carrying the raw seq each is (None: the application's own), each
    with the tokens counted when it was recorded (counted here only for requests recorded before that)."""
    try:
        translated = to_ctxweb("openai", recorded.messages)
    except DomainError as exc:  # stored requests were checked when recorded; this is for safety
        raise DomainError(f"request {recorded.number} cannot be shown in this format: {exc.detail}",
                          code="invalid_message") from exc
    seqs = recorded.message_seqs or []
    counted = recorded.message_tokens or []
    edited = set(recorded.edited or ())
    entries = []
    for message, origin in zip(translated.messages, translated.origin, strict=True):
        role = message["role"]
        content = message.get("content")
        content = "" if content is None else content
        calls = message.get("tool_calls") or []
        name = message.get("name") or ""
        if origin < len(counted):
            tokens = counted[origin]
        else:
            tokens = count_message(role, content, name, calls).total
        if role == Role.SYSTEM:
            entries.append(Entry("instructions", Role.SYSTEM, text_of(content), tokens))
            continue
        seq = seqs[origin] if origin < len(seqs) else None
        entries.append(Entry("message", role, content, tokens, seq=seq, tool_calls=calls,
                             tool_call_id=message.get("tool_call_id") or "", **model_fields_sent(message),
                             edited=origin in edited and seq is not None,
                             own=seq is None))
    return entries


@dataclass(slots=True)
class _SentItem:
    """A message of the request as the validity rules read it."""

    role: str
    seq: int | None
    call_ids: list
    tool_call_tokens: list
    tool_call_id: str
    has_content: bool
    call_seq: None = None

    @classmethod
    def of(cls, entry: Entry) -> "_SentItem":
        ids = [call["id"] for call in entry.tool_calls]
        return cls(entry.role, entry.seq, ids, [0] * len(ids), entry.tool_call_id, bool(entry.content))


def build_recorded_input(session: Session, *, as_of: int | None = None,
                         in_force: RecordedRequest | None = None) -> ModelInput:
    """What the application sent (now, or as of message `as_of`): the request in force, its response and
    what was stored after it, as a ModelInput with basis recorded_request. `in_force`: that request, when
    the caller holds it already (a capture, which has just stored it)."""
    check_as_of(session, as_of)
    recorded = in_force if in_force is not None else request_in_force(session, as_of)
    sent = sent_entries(recorded) if recorded is not None else []
    carried = {e.seq for e in sent if e.seq is not None}
    after = recorded.at_seq if recorded is not None else 0
    # Its response, and what was stored after it was sent (a retried request's response may be the one
    # stored for the request it retried, before it).
    answered = set(recorded.response_seqs or ()) - carried if recorded is not None else set()
    start = min([after, *(seq - 1 for seq in answered)])
    tail = [m for m in stored_messages(session, start, as_of)
            if m.seq not in carried and (m.seq > after or m.seq in answered)]
    messages = [e for e in sent if e.kind == "message"]
    items = [_SentItem.of(e) for e in messages] + tail
    verdict = check_validity(items)
    first = len(messages)  # the first item after the request
    entries: list = list(sent)
    awaiting = None
    for i in range(first, len(items)):
        item = items[i]
        dropped, pending = verdict.dropped.get(i), verdict.pending.get(i)
        if not verdict.keep[i] and not pending:
            continue
        if not dropped and not pending:
            entries.append(item)
            continue
        left_out = (dropped or []) + (pending or [])
        entry = Entry("message", item.role, item.content, kept_tokens(item, left_out) if verdict.keep[i] else 0,
                      seq=item.seq, client_id=item.client_id,
                      tool_calls=[c for c in item.tool_calls if c["id"] not in left_out],
                      tool_call_id=item.tool_call_id, **model_fields_of(item),
                      dropped_calls=dropped or [],
                      pending_calls=[c for c in item.tool_calls if c["id"] in (pending or ())])
        if verdict.keep[i]:
            entries.append(entry)
        else:
            awaiting = entry
    omitted = [omission for i, omission in verdict.omitted if i >= first]
    model_input = ModelInput(session, None, as_of, entries, omitted, awaiting)
    model_input.basis = RECORDED_REQUEST
    model_input.request = recorded
    model_input.sent_messages = list(recorded.messages) if recorded is not None else []
    return model_input


def build_input(session: Session, *, as_of: int | None = None, basis: str | None = None) -> ModelInput:
    """The model input of `session` on its basis (or on `basis`), now or as of message `as_of`: what the
    API answers and the pages show."""
    if check_basis(session, basis) == RECORDED_REQUEST:
        return build_recorded_input(session, as_of=as_of)
    return build_model_input(session, as_of=as_of)


def recorded_figures(session: Session, in_force: RecordedRequest | None = None) -> dict:
    """The session's stored model-input figures (Session.input_tokens, input_messages, input_left_out) for
    what the application sent now (`in_force`: its latest request, when the caller holds it)."""
    model_input = build_recorded_input(session, in_force=in_force)
    return {
        "input_tokens": model_input.tokens,
        "input_messages": sum(1 for e in model_input.entries if e.kind == "message" and e.seq is not None),
        "input_left_out": [o.as_dict() for o in model_input.omitted],
    }


