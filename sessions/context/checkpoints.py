"""Checkpoints that were made elsewhere: a compaction found in an imported transcript (a Claude Code
compaction boundary, a checkpoint of a ctxweb export) recreated over the raw log as it is.

Unlike sessions.context.compaction, nothing is planned or summarized here: the cut and the summary are given.
The checkpoint still extends the latest one (checkpoints are append-only) and records
COMPACTION_COMPLETED with its figures, so imported compactions show up like any other.
"""

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from sessions.context.facts import FactReport, checkpoint_fields, fact_text, report
from sessions.context.figures import refresh_input_tokens
from sessions.context.model_input import layout_model_input, summary_message_tokens, visible_messages
from sessions.errors import Conflict, DomainError
from sessions.models import Checkpoint, Session
from sessions.store.event_types import CompactionCompleted
from sessions.store.events import record
from sessions.wire.validation import check_text

IMPORT = "import"
FACTS_CHUNK = 500


def covered_facts(session: Session, first_seq: int, last_seq: int, summary: str) -> FactReport:
    """The facts of the messages first_seq..last_seq the model saw that `summary` keeps and loses, read
    in chunks with only the fields facts are found in."""
    rows = (
        visible_messages(session, first_seq - 1, as_of=last_seq)
        .only("session_id", "seq", "text", "tool_calls")
        .iterator(chunk_size=FACTS_CHUNK)
    )
    return report(summary, rows)


def covered_message_texts(session: Session, first_seq: int, last_seq: int):
    """What of the messages first_seq..last_seq the model saw may hold facts (facts.fact_text), read in
    chunks: what a run with a supplied summary covers, for its pinned facts (sessions/context/pinned.py)."""
    rows = (visible_messages(session, first_seq - 1, as_of=last_seq).only("session_id", "seq", "text", "tool_calls")
            .iterator(chunk_size=FACTS_CHUNK))
    return (fact_text(row) for row in rows)


def store_checkpoint(
    session: Session, *, extra_tokens: int = 0, facts: FactReport | None = None, **fields
) -> tuple[Checkpoint, int]:
    """Create a checkpoint (in a savepoint: IntegrityError when another one already extends the same
    base), then bring the session's stored figures up to date. Returns (checkpoint, tokens_after);
    `extra_tokens` (a request's unpersisted messages) count into tokens_after. `facts`: what the summary
    keeps of the covered messages' facts, when the caller has them (else they are read here). Call it
    inside the transaction that holds the session's row lock."""
    if facts is None:
        facts = covered_facts(session, fields["first_seq"], fields["last_seq"], fields["summary"])
    with transaction.atomic():
        checkpoint = Checkpoint.objects.create(session=session, **fields, **checkpoint_fields(facts))
    tokens_after = refresh_input_tokens(session, checkpoint) + extra_tokens
    checkpoint.tokens_after = tokens_after
    checkpoint.save(update_fields=["tokens_after"])
    Session.objects.filter(pk=session.pk).update(checkpoint_count=F("checkpoint_count") + 1)
    return checkpoint, tokens_after


def create_imported_checkpoint(
    session: Session,
    last_seq: int,
    summary: str,
    actor: str = "system",
    *,
    created_at_seq: int | None = None,
    summarizer: str = IMPORT,
    trigger: str = IMPORT,
    created_at=None,
) -> tuple[Checkpoint, bool]:
    """A checkpoint covering messages up to `last_seq` with `summary`, extending the latest checkpoint.

    Returns (checkpoint, created). Importing the same checkpoint again (same cut, same summary) returns
    the stored one and records nothing. `created_at_seq` is the highest seq that existed when the
    compaction happened (default: the session's newest message now).
    """
    if not isinstance(summary, str) or not summary.strip():
        raise DomainError("an imported checkpoint needs a summary text", code="invalid_summary")
    check_text(summary, None, "summary")
    summary = summary.strip()
    with transaction.atomic():
        session = Session.objects.select_related("project").select_for_update(of=("self",)).get(pk=session.pk)
        if isinstance(last_seq, bool) or not isinstance(last_seq, int) or not 1 <= last_seq <= session.message_count:
            raise DomainError(
                f"a checkpoint's last_seq must be a stored message (1-{session.message_count})",
                code="invalid_checkpoint",
            )
        same = session.checkpoints.filter(last_seq=last_seq).first()
        if same is not None:
            if same.summary != summary:
                raise Conflict(
                    f"checkpoint {same.number} already covers messages up to #{last_seq} with another summary",
                    code="checkpoint_conflict",
                )
            return same, False
        layout = layout_model_input(session)
        previous = layout.checkpoint
        if previous is not None and previous.last_seq > last_seq:
            raise DomainError(
                f"checkpoint {previous.number} already covers messages up to #{previous.last_seq}; checkpoints are "
                f"append-only, so one ending at #{last_seq} cannot be added after it",
                code="checkpoint_out_of_order",
            )
        created_at_seq = session.message_count if created_at_seq is None else created_at_seq
        if not last_seq <= created_at_seq <= session.message_count:
            raise DomainError(
                f"created_at_seq must be between {last_seq} and {session.message_count}", code="invalid_checkpoint"
            )
        first_seq = previous.last_seq + 1 if previous else 1
        # What the summary replaces: the previous summary and the covered messages the model saw.
        replaced = sum(tokens for seq, tokens in layout.kept_tokens.items() if seq <= last_seq)
        replaced += previous.summary_tokens if previous else 0
        summary_tokens = summary_message_tokens(summary, last_seq)
        try:
            checkpoint, tokens_after = store_checkpoint(
                session,
                previous=previous,
                summary=summary,
                first_seq=first_seq,
                last_seq=last_seq,
                created_at_seq=created_at_seq,
                summary_tokens=summary_tokens,
                replaced_tokens=replaced,
                tokens_before=layout.tokens,
                summarizer=summarizer[:50],
                trigger=trigger[:20],
                created_at=created_at or timezone.now(),
            )
        except IntegrityError:
            raise Conflict("another checkpoint extended the same one first; nothing changed",
                           code="checkpoint_conflict") from None
        compaction = session.compaction_settings()
        record(session, actor, CompactionCompleted(
            trigger=IMPORT,
            max_tokens=compaction.max_tokens,
            keep_recent_tokens=compaction.keep_recent_tokens,
            tokens_before=layout.tokens,
            summarizer=checkpoint.summarizer,
            checkpoint_id=checkpoint.pk,
            at_seq=created_at_seq,
            covered_seq_range=[first_seq, last_seq],
            replaced_tokens=replaced,
            summary_tokens=summary_tokens,
            tokens_after=tokens_after,
            still_over_threshold=tokens_after > compaction.max_tokens,
            lost_count=checkpoint.facts_lost,
        ))
    return checkpoint, True
