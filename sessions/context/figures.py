"""The model input's figures stored on the session (input_tokens, input_messages, input_left_out,
checkpoint_last_seq): what the session list, the meter and the `openai` fetch read without building the
input. Written inside the transaction that changed the input, for either basis: ctxweb's own layout
(sessions.context.model_input) or what the application sent (sessions.context.recorded_input)."""

from sessions.context.model_input import layout_model_input
from sessions.context.recorded_input import recorded_figures
from sessions.db.rows import update_fields
from sessions.models import Checkpoint, RecordedRequest, Session


def save_figures(session: Session, **figures) -> None:
    """Write the figures that changed, in one UPDATE of the session's row (none when none did)."""
    changed = {name: value for name, value in figures.items() if getattr(session, name) != value}
    if changed:
        update_fields(session, **changed)


def refresh_input_tokens(session: Session, checkpoint: Checkpoint | None | bool = False) -> int:
    """Lay the model input out again and store its figures on the session; call inside the transaction
    that changed it (a checkpoint, a flag, the instructions). Returns the size in tokens of the input
    built by ctxweb's rules. The figures stored for a session rebuilt from recorded requests are those of
    what its application sent (sessions.context.recorded_input)."""
    layout = layout_model_input(session, checkpoint=checkpoint)
    checkpoint_last_seq = layout.checkpoint.last_seq if layout.checkpoint else 0
    if session.request_count:
        save_figures(session, checkpoint_last_seq=checkpoint_last_seq, **recorded_figures(session))
        return layout.tokens
    save_figures(
        session,
        input_tokens=layout.tokens,
        input_messages=layout.message_count,
        input_left_out=[o.as_dict() for o in layout.omitted],
        checkpoint_last_seq=checkpoint_last_seq,
    )
    return layout.tokens


def refresh_recorded_figures(session: Session, in_force: RecordedRequest | None = None, **also) -> None:
    """Store the figures of what the application sent on the session (inside the transaction that changed
    it): the sessions list, the meter and every reader of the stored figures show that input. `in_force`:
    the session's latest request, when the caller holds it; `also`: more of the session's fields to write
    in the same UPDATE (a capture's request count)."""
    save_figures(session, **recorded_figures(session, in_force), **also)
