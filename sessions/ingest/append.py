"""Appending a batch of messages to the raw log: all or nothing, gapless seqs."""

import uuid
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from sessions.access.masking import mask_value
from sessions.access.masking_policy import capture_masking
from sessions.context.compaction_runs import compact_if_needed
from sessions.context.model_input import input_figures_after_append, json_list
from sessions.db.messages import (
    CALL_SCAN_CHUNK,
    CALL_SCAN_FIRST,
    assistant_call_ids_before,
    insert_messages,
    stored_with_ids,
)
from sessions.db.rows import update_fields
from sessions.errors import Conflict, DomainError
from sessions.ingest.session_store import get_or_create_locked, update_session
from sessions.models import CompactionRun, Project, Role, Session
from sessions.store.event_types import MessagesAppended
from sessions.store.events import record
from sessions.store.trace_blocks import index_after_append
from sessions.wire.provider_messages import to_ctxweb
from sessions.wire.validation import NewMessage, parse_messages


@dataclass
class AppendedMessage:
    index: int
    seq: int | None
    client_id: str
    tokens: int
    status: str  # "stored" | "duplicate" | "not_persisted"

    @property
    def stored(self) -> bool:
        return self.status == "stored"

    @property
    def duplicate(self) -> bool:
        return self.status == "duplicate"


@dataclass
class AppendResult:
    session: Session
    session_created: bool
    messages: list[AppendedMessage] = field(default_factory=list)
    compaction: CompactionRun | None = None  # the automatic run the append enqueued (or found queued)

    @property
    def stored_count(self) -> int:
        return sum(1 for m in self.messages if m.stored)


@dataclass
class Batch:
    """A batch of messages validated whole, and the instructions its system messages set (provider
    formats only)."""

    messages: list[NewMessage]
    instructions: str | None = None
    origin: list[int] | None = None  # provider formats: the index of the message each came from


def parse_batch(raw_messages, fmt: str = "ctxweb", system=None) -> Batch:
    """Validate a batch sent in `fmt` (ctxweb, openai, anthropic): nothing is stored unless every
    message is valid. Errors name the message as the client sent it."""
    translated = to_ctxweb(fmt, raw_messages, system)
    origin = None if fmt == "ctxweb" else translated.origin
    try:
        messages = parse_messages(translated.messages)
    except DomainError as exc:
        _name_the_message_sent(exc, origin)
        raise
    return Batch(messages, translated.instructions, origin)


def _name_the_message_sent(exc: DomainError, origin: list[int] | None) -> None:
    """Make an error about a translated message name the message the client sent (provider formats)."""
    index = exc.extra.get("index")
    if origin is None or index is None:
        return
    sent = origin[index]
    exc.extra["index"] = sent
    exc.detail = exc.detail.replace(f"messages[{index}]", f"messages[{sent}]", 1)
    exc.args = (exc.detail,)


def new_client_id() -> str:
    return "msg_" + uuid.uuid4().hex


def append_messages(
    project: Project, key: str, raw_messages, actor: str = "system", *, parsed: Batch | None = None,
    fmt: str = "ctxweb", system=None, import_source: str | None = None, recording: bool = False,
    compact_after: bool = True, locked: Session | None = None,
) -> AppendResult:
    """Validate and store a batch. Nothing is stored unless every message is valid. An import names its
    source file (`import_source`, see session_store.get_or_create_locked); other appends are the
    application's. `recording`: sessions.ingest.recorded_requests is rebuilding the session from its requests,
    and stores the figures of its model input once it has stored them all.

    Once the batch is stored, the rule of every write path runs (compact_after_write): a session with
    automatic compaction on whose input is now over max_tokens gets a run on the task queue. A caller that
    writes a session in pieces (an import, a request built with messages not stored) passes
    `compact_after=False` and applies the rule itself once the session is whole.

    `locked`: the session `key`, which the caller holds locked in the transaction this runs in and rolls
    back whole on an error (a recording): it is written as it is, with no savepoint of its own."""
    if parsed is None and (patterns := capture_masking(project)) is not None:
        # The project keeps no personal data: masked before it is parsed, so its tokens are the masked text's.
        raw_messages, system = mask_value(raw_messages, patterns), mask_value(system, patterns)
    batch = parsed if parsed is not None else parse_batch(raw_messages, fmt, system)
    try:
        with transaction.atomic(savepoint=locked is None):
            if batch.instructions is not None:
                session, created = update_session(project, key, {"instructions": batch.instructions}, actor,
                                                  import_source=import_source)
            elif locked is not None:
                session, created = locked, False
            else:
                session, created = get_or_create_locked(project, key, actor, import_source=import_source)
            result = AppendResult(session, created)
            _store(session, batch.messages, result, actor, by_application=import_source is None,
                   recording=recording)
    except DomainError as exc:
        _name_the_message_sent(exc, batch.origin)
        raise
    if batch.origin is not None:
        for message in result.messages:
            message.index = batch.origin[message.index]
    if compact_after and not recording and result.stored_count:  # a recording applies it once it is whole
        result.compaction = compact_after_write(result.session, actor)
    return result


def compact_after_write(session: Session, actor: str) -> CompactionRun | None:
    """The rule after every write to a session's raw log (an API append, an import once its session is
    whole, an OpenTelemetry capture or request log, a request built): automatic compaction when it is on
    and the model input is over max_tokens, enqueued for the task queue's worker (compact_if_needed).
    Never for a session rebuilt from recorded requests: its application builds its own context. Returns
    the run, read again (a worker may have taken it on already), or None."""
    run = compact_if_needed(session, actor)
    if run is not None:
        run.refresh_from_db()
    return run


def _store(session: Session, batch: list[NewMessage], result: AppendResult, actor: str, *,
           by_application: bool = True, recording: bool = False) -> None:
    given_ids = [m.client_id for m in batch if m.client_id]
    existing = stored_with_ids(session, given_ids) if given_ids else {}

    # Tool results must answer the nearest preceding call of their id; calls made earlier in this batch
    # are found as the loop goes, the others in the stored assistant messages.
    calls = _stored_calls(session, _ids_answered_from_before(batch), session.message_count + 1)

    now = timezone.now()
    next_seq = session.message_count + 1
    to_create: list[NewMessage] = []
    in_batch: dict[str, NewMessage] = {}
    for index, new in enumerate(batch):
        if not new.persist:
            result.messages.append(AppendedMessage(index, None, new.client_id, new.tokens, "not_persisted"))
            continue
        if new.client_id:
            seen = existing.get(new.client_id)
            if seen is None and new.client_id in in_batch:
                first = in_batch[new.client_id]
                seen = {"seq": first.seq, "digest": first.digest, "tokens": first.tokens}
            if seen is not None:
                if seen["digest"] != new.digest:
                    raise Conflict(
                        f"messages[{index}]: id {new.client_id!r} is already stored as message "
                        f"#{seen['seq']} with different content",
                        code="id_conflict",
                        index=index,
                        seq=seen["seq"],
                    )
                result.messages.append(AppendedMessage(index, seen["seq"], new.client_id, seen["tokens"], "duplicate"))
                continue
        else:
            new.client_id = new_client_id()

        call_seq = None
        if new.role == Role.TOOL:
            call_seq = calls.get(new.tool_call_id)
            if call_seq is None:
                raise DomainError(
                    f"messages[{index}]: tool_call_id {new.tool_call_id!r} does not match a tool call of an "
                    f"earlier assistant message",
                    code="unknown_tool_call_id",
                    index=index,
                )
        seq = next_seq
        next_seq += 1
        new.seq = seq
        in_batch[new.client_id] = new
        new.call_seq = call_seq
        new.created_at = new.created_at or now
        to_create.append(new)
        for call_id in new.call_ids:
            calls[call_id] = seq
        result.messages.append(AppendedMessage(index, seq, new.client_id, new.tokens, "stored"))

    if not to_create:
        return
    insert_messages(session, to_create)
    index_after_append(session.pk, to_create[0].seq, to_create[-1].seq)
    added_tokens = sum(m.tokens for m in to_create)
    visible = [m for m in to_create if m.include_in_messages and m.role != Role.SYSTEM]
    figures = input_figures_after_append(session, to_create[0].seq, visible)
    if by_application and session.import_source and not session.written_by_application:
        figures["written_by_application"] = True  # an import never changes it again
    # One UPDATE for every figure the batch changed (written as SQL: through QuerySet.update the statement
    # took 0.36 ms of CPU to build against a few hundredths to run).
    update_fields(session, message_count=to_create[-1].seq, raw_tokens=session.raw_tokens + added_tokens,
                  last_activity_at=now, **figures)
    if session.request_count and not recording:
        # What the application sends is the model input of a session rebuilt from its requests: the
        # figures above are those of ctxweb's own rules (sessions.context.recorded_input).
        from sessions.context.figures import refresh_recorded_figures

        refresh_recorded_figures(session)
    record(session, actor, MessagesAppended(
        input_tokens=session.input_tokens,
        count=len(to_create),
        first_seq=to_create[0].seq,
        last_seq=to_create[-1].seq,
        tokens=added_tokens,
        duplicates=sum(1 for m in result.messages if m.duplicate),
    ))


def _ids_answered_from_before(batch: list[NewMessage]) -> set[str]:
    """The tool_call_ids of the batch's results whose call is not made earlier in the batch."""
    made, needed = set(), set()
    for new in batch:
        if new.role == Role.TOOL and new.tool_call_id not in made:
            needed.add(new.tool_call_id)
        made.update(new.call_ids)
    return needed


def _stored_calls(session: Session, call_ids: set[str], before_seq: int) -> dict[str, int]:
    """call id -> seq of the nearest stored assistant message before `before_seq` that made that call.

    Results nearly always answer a recent call, so this is one small read.
    """
    found: dict[str, int] = {}
    remaining = set(call_ids)
    upper, chunk_size = before_seq, CALL_SCAN_FIRST
    while remaining:
        chunk = assistant_call_ids_before(session, upper, chunk_size)
        for seq, ids in chunk:
            for call_id in remaining.intersection(json_list(ids)):
                found[call_id] = seq
            remaining.difference_update(found)
        if len(chunk) < chunk_size:
            break
        upper, chunk_size = chunk[-1][0], CALL_SCAN_CHUNK
    return found


