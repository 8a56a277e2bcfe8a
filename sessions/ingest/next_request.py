"""Building the next request to the model: store what may be stored, compact when the
request crosses max_tokens, return the model input with the request's unpersisted messages, and
record REQUEST_BUILT with what was sent; and reading back what a recorded request sent."""

from dataclasses import dataclass

from django.db import transaction

from sessions.access.masking import mask_value
from sessions.access.masking_policy import capture_masking
from sessions.context.compaction_runs import compact_if_needed, wait_for
from sessions.context.model_input import ModelInput, build_model_input, summary_message_text, visible_messages
from sessions.context.provider_input import check_something_to_send
from sessions.context.waiting import wait_once
from sessions.db.message_sizes import for_page
from sessions.ingest.append import AppendResult, Batch, append_messages, parse_batch
from sessions.ingest.session_store import get_or_create_locked, update_session
from sessions.models import Checkpoint, CompactionRun, Event, EventType, Message, Project, Role, Session
from sessions.store.event_types import RequestBuilt
from sessions.store.events import event_data, record


@dataclass
class BuiltRequest:
    model_input: ModelInput
    appended: AppendResult | None
    compaction: CompactionRun | None  # the automatic compaction this request needed
    compaction_in_progress: bool  # ... and it had not finished when the input was built
    event: Event


def build_request(project: Project, key: str, *, instructions=None, messages=None, fmt: str = "openai",
                  message_format: str = "ctxweb", actor: str = "system", waiter: str | None = None) -> BuiltRequest:
    """`messages` are in `message_format`; the model input is returned in `fmt`. `waiter` names who waits
    for a compaction this request needs (sessions/context/waiting.py: one waiting request per holder); None: the
    caller does not share its waits."""
    if (patterns := capture_masking(project)) is not None:  # the project keeps no personal data
        messages, instructions = mask_value(messages, patterns), mask_value(instructions, patterns)
    parsed = parse_batch(messages, message_format) if messages else Batch([])
    if instructions is None:
        instructions = parsed.instructions
    batch = parsed.messages
    appended = None
    with transaction.atomic():  # instructions and stored messages change together or not at all
        if instructions is not None:
            session, _ = update_session(project, key, {"instructions": instructions}, actor)
        else:
            session, _ = get_or_create_locked(project, key, actor)
        if any(m.persist for m in batch):
            # The rule of a write runs below, counting the messages that are not stored too.
            appended = append_messages(project, key, None, actor, parsed=Batch(batch), compact_after=False)
            session = appended.session
        unpersisted = [m for m in batch if not m.persist]
        if not session.input_messages and not session.checkpoint_count:
            # Perhaps nothing to send (only instructions): refused here, so the request stores nothing.
            check_something_to_send(build_model_input(session, extra_messages=unpersisted), fmt)
    extra_tokens = sum(m.tokens for m in unpersisted)
    starts_turn = any(m.role == Role.USER for m in unpersisted)
    # Enqueued like an append's, then waited for up to CTXWEB_COMPACTION_WAIT_SECONDS: past that
    # the request gets the current input, and says a compaction is in progress.
    compaction = compact_if_needed(session, actor, extra_tokens, starts_turn)
    in_progress = False
    if compaction is not None:
        compaction = wait_for(compaction) if waiter is None else wait_once(compaction, waiter)
        in_progress = compaction.state in CompactionRun.ACTIVE
        session.refresh_from_db()
    model_input = build_model_input(session, extra_messages=unpersisted)
    check_something_to_send(model_input, fmt)
    seq_range = model_input.seq_range
    instructions_entry = next((e for e in model_input.entries if e.kind == "instructions"), None)
    event = record(session, actor, RequestBuilt(
        format=fmt,
        checkpoint_id=model_input.checkpoint.pk if model_input.checkpoint else None,
        seq_range=list(seq_range) if seq_range else None,
        stored_messages=len(model_input.message_entries),
        tokens=model_input.tokens,
        instructions_tokens=instructions_entry.tokens if instructions_entry else 0,
        summary_tokens=model_input.checkpoint.summary_tokens if model_input.checkpoint else 0,
        unpersisted={"count": len(unpersisted), "tokens": extra_tokens},
        omitted=[o.as_dict() for o in model_input.omitted],
        compaction=compaction.state if compaction else None,
    ))
    return BuiltRequest(model_input, appended, compaction, in_progress, event)


SENT_WINDOW = 500


@dataclass
class SentRequest:
    """What one REQUEST_BUILT sent, rebuilt from the event's figures and the stored messages."""

    event: Event
    data: RequestBuilt
    checkpoint: Checkpoint | None
    summary_text: str
    stored: list[Message]  # the stored messages it sent (today's include flags; the first SENT_WINDOW)


def sent_request(session: Session, event_id: int) -> SentRequest | None:
    """The request recorded by event `event_id` of the session, or None when there is no such request."""
    event = session.events.filter(pk=event_id, type=EventType.REQUEST_BUILT).first()
    if event is None:
        return None
    data: RequestBuilt = event_data(event)
    checkpoint = session.checkpoints.filter(pk=data.checkpoint_id).first() if data.checkpoint_id else None
    stored = []
    if data.seq_range:
        first, last = data.seq_range
        omitted = {o.seq for o in data.omitted if o.whole_message}
        rows = for_page(visible_messages(session, first - 1, as_of=last))[:SENT_WINDOW]
        stored = [m for m in rows if m.seq not in omitted]
    summary = summary_message_text(checkpoint.summary, checkpoint.last_seq) if checkpoint else ""
    return SentRequest(event, data, checkpoint, summary, stored)
