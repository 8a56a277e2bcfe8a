"""Appending a batch of messages to the raw log (SPEC §5.3): all or nothing, gapless seqs."""

import uuid
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from .errors import Conflict, DomainError
from .event_types import MessagesAppended
from .events import record
from .model_input import input_figures_after_append
from .models import Message, Project, Role, Session
from .store import get_or_create_locked
from .validation import NewMessage, parse_message


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

    @property
    def stored_count(self) -> int:
        return sum(1 for m in self.messages if m.stored)


def parse_batch(raw_messages) -> list[NewMessage]:
    if not isinstance(raw_messages, list):
        raise DomainError("messages must be a list", code="invalid_batch")
    if not raw_messages:
        raise DomainError("messages must hold at least one message", code="empty_batch")
    limit = settings.CTXWEB_MAX_BATCH_MESSAGES
    if len(raw_messages) > limit:
        raise DomainError(f"at most {limit} messages per batch", code="batch_too_large")
    return [parse_message(data, index) for index, data in enumerate(raw_messages)]


def new_client_id() -> str:
    return "msg_" + uuid.uuid4().hex


def append_messages(
    project: Project, key: str, raw_messages, actor: str = "system", *, parsed: list[NewMessage] | None = None
) -> AppendResult:
    """Validate and store a batch. Nothing is stored unless every message is valid."""
    batch = parsed if parsed is not None else parse_batch(raw_messages)
    with transaction.atomic():
        session, created = get_or_create_locked(project, key, actor)
        result = AppendResult(session, created)
        _store(session, batch, result, actor)
    return result


def _store(session: Session, batch: list[NewMessage], result: AppendResult, actor: str) -> None:
    given_ids = [m.client_id for m in batch if m.client_id]
    existing = {
        row["client_id"]: row
        for row in Message.objects.filter(session=session, client_id__in=given_ids).values(
            "client_id", "seq", "digest", "tokens"
        )
    } if given_ids else {}

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
    added_tokens = sum(m.tokens for m in to_create)
    visible = [m for m in to_create if m.include_in_messages and m.role != Role.SYSTEM]
    figures = input_figures_after_append(session, to_create[0].seq, visible)
    # One UPDATE for every figure the batch changed.
    Session.objects.filter(pk=session.pk).update(
        message_count=to_create[-1].seq,
        raw_tokens=session.raw_tokens + added_tokens,
        last_activity_at=now,
        **figures,
    )
    session.message_count = to_create[-1].seq
    session.raw_tokens += added_tokens
    session.last_activity_at = now
    for name, value in figures.items():
        setattr(session, name, value)
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


CALL_SCAN_CHUNK = 200


def _stored_calls(session: Session, call_ids: set[str], before_seq: int) -> dict[str, int]:
    """call id -> seq of the nearest stored assistant message before `before_seq` that made that call.

    Reads assistant messages newest first, a chunk at a time, through the (session, role, seq) index;
    results nearly always answer a recent call, so this is one small read.
    """
    found: dict[str, int] = {}
    remaining = set(call_ids)
    upper = before_seq
    while remaining:
        chunk = list(
            Message.objects.filter(session=session, role=Role.ASSISTANT, seq__lt=upper)
            .order_by("-seq")
            .values_list("seq", "call_ids")[:CALL_SCAN_CHUNK]
        )
        for seq, ids in chunk:
            for call_id in remaining.intersection(ids):
                found[call_id] = seq
            remaining.difference_update(found)
        if len(chunk) < CALL_SCAN_CHUNK:
            break
        upper = chunk[-1][0]
    return found


# The columns of a stored message, in the order insert_messages writes them.
INSERT_COLUMNS = (
    "session_id", "seq", "client_id", "role", "content", "text", "has_content", "reasoning", "tool_calls",
    "call_ids", "tool_call_id", "call_seq", "name", "attributes", "include_in_messages", "created_at",
    "tokens", "tool_call_tokens", "reasoning_tokens", "digest",
)
JSON_COLUMNS = {"content", "tool_calls", "call_ids", "attributes", "tool_call_tokens"}


def insert_messages(session: Session, rows: list[NewMessage]) -> None:
    """Insert validated messages with one executemany. The hot path of every append: the values are
    already checked and normalised, so they go to the database adapter as they are (JSON and dates
    adapted by the backend's own operations), without building a model instance per message."""
    ops = connection.ops
    empty = {list: ops.adapt_json_value([], None), dict: ops.adapt_json_value({}, None)}

    def adapt(value):
        # Most messages have no tool calls and no attributes: adapt those empty values once.
        if not value and type(value) in empty:
            return empty[type(value)]
        return ops.adapt_json_value(value, None)

    params = [
        (
            session.pk, m.seq, m.client_id, m.role, adapt(m.content), m.text, m.has_content, m.reasoning,
            adapt(m.tool_calls), adapt(m.call_ids), m.tool_call_id, m.call_seq, m.name,
            adapt(m.attributes), m.include_in_messages, ops.adapt_datetimefield_value(m.created_at),
            m.tokens, adapt(m.tool_call_tokens), m.reasoning_tokens, m.digest,
        )
        for m in rows
    ]
    table = ops.quote_name(Message._meta.db_table)
    columns = ", ".join(ops.quote_name(c) for c in INSERT_COLUMNS)
    placeholders = ", ".join(["%s"] * len(INSERT_COLUMNS))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", params)
