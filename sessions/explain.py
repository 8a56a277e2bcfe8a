"""Explain: for every stored message, where it is in the model input, or why not."""

from dataclasses import dataclass

from .model_input import ModelInputShape, Omission, Reason
from .models import Checkpoint, Message, Role


@dataclass
class Explanation:
    code: str
    sentence: str
    checkpoint: Checkpoint | None = None  # the checkpoint that first covered the message
    position: int | None = None  # 1-based position in the model input, when in it
    dropped_calls: tuple = ()
    pending_calls: tuple = ()  # ids of its tool calls awaiting their results

    def as_dict(self) -> dict:
        data = {"code": self.code, "sentence": self.sentence}
        if self.checkpoint is not None:
            data["checkpoint_id"] = self.checkpoint.pk
            data["checkpoint_number"] = self.checkpoint.number
        if self.position is not None:
            data["position"] = self.position
        if self.dropped_calls:
            data["dropped_tool_calls"] = list(self.dropped_calls)
        if self.pending_calls:
            data["pending_tool_calls"] = list(self.pending_calls)
        return data


def covering_checkpoint(checkpoints: list[Checkpoint], seq: int) -> Checkpoint | None:
    """The checkpoint that first summarised `seq` (each covers first_seq..last_seq of its own)."""
    for checkpoint in checkpoints:
        if checkpoint.first_seq <= seq <= checkpoint.last_seq:
            return checkpoint
    return None


def explain_messages(
    messages: list[Message], model_input: ModelInputShape, checkpoints: list[Checkpoint]
) -> dict[int, Explanation]:
    """Explanations for `messages` (any window of the raw log, in seq order) against one model input,
    in any of its forms (sessions.model_input.ModelInputShape).

    `checkpoints` are the session's checkpoints (any order); only those the input's checkpoint extends
    count as covering.
    """
    current = model_input.checkpoint
    boundary = current.last_seq if current else 0
    chain = [c for c in checkpoints if current is not None and c.last_seq <= current.last_seq]
    positions = model_input.positions(messages)
    left_out = (model_input.dropped, model_input.pending)
    omissions = model_input.omitted_by_seq
    total = model_input.entry_count
    return {
        message.seq: _explain(message, model_input, boundary, chain, positions, left_out, omissions, total)
        for message in messages
    }


def _explain(message, model_input, boundary, chain, positions, left_out, omissions, total) -> Explanation:
    as_of = model_input.as_of
    if as_of is not None and message.seq > as_of:
        return Explanation(
            Reason.AFTER_AS_OF, f"Stored after message #{as_of}, so not part of the input as of #{as_of}."
        )
    if message.role == Role.SYSTEM:
        return Explanation(
            Reason.INSTRUCTIONS_ROLE,
            "A stored system message. Instructions are rebuilt for every request from the session's "
            "current instructions, so stored system messages are never sent to the model.",
        )
    if not message.include_in_messages:
        return Explanation(
            Reason.EXCLUDED,
            "Hidden: include_in_messages is false. It stays in the raw log but is left out of every "
            "model input.",
        )
    if message.seq <= boundary:
        checkpoint = covering_checkpoint(chain, message.seq)
        number = checkpoint.number if checkpoint else model_input.checkpoint.number
        first = checkpoint.first_seq if checkpoint else 1
        last = checkpoint.last_seq if checkpoint else boundary
        sentence = (
            f"Covered by checkpoint {number} (messages #{first}–#{last}). The model sees the summary "
            f"instead of this message"
        )
        if model_input.checkpoint and checkpoint and checkpoint.pk != model_input.checkpoint.pk:
            sentence += f", now carried by checkpoint {model_input.checkpoint.number}"
        return Explanation(Reason.COVERED, sentence + ".", checkpoint or model_input.checkpoint)
    for omission in omissions.get(message.seq, ()):
        if omission.whole_message:
            return _omission_explanation(message, omission, boundary)
    if message.seq in positions:
        calls = left_out[0].get(message.seq, ())
        pending = left_out[1].get(message.seq, ())
        sentence = f"In the model input, message {positions[message.seq]} of {total}."
        if calls:
            sentence += f" Its tool call(s) {', '.join(calls)} are left out: no result for them is in the input."
        if pending:
            sentence += (f" Its tool call(s) {', '.join(pending)} await their results and are left out of the "
                         f"request until the results are appended.")
        return Explanation(Reason.IN_INPUT, sentence, position=positions[message.seq], dropped_calls=tuple(calls),
                           pending_calls=tuple(pending))
    # Not reached for stored messages of a consistent input; kept for safety.
    return Explanation(Reason.EXCLUDED, "Not in the model input.")


def _omission_explanation(message, omission: Omission, boundary: int) -> Explanation:
    if omission.reason == Reason.ORPHAN:
        call_seq = message.call_seq
        if call_seq is not None and call_seq <= boundary:
            why = f"its call (in message #{call_seq}) is covered by a checkpoint"
        elif call_seq is not None:
            why = (
                f"its call (in message #{call_seq}) is not directly before it in the input "
                f"(hidden, or other messages came between)"
            )
        else:
            why = "its call is not in the input"
        return Explanation(
            Reason.ORPHAN,
            f"A tool result for {message.tool_call_id!r} left out to keep the input valid: {why}.",
        )
    if omission.reason == Reason.AWAITING:
        return Explanation(
            Reason.AWAITING,
            f"The newest assistant message: its tool call(s) {omission.tool_call_id} await their results. No "
            f"provider takes a call without its result, so it is left out of the request until they are "
            f"appended.",
            pending_calls=tuple(omission.tool_call_id.split(", ")),
        )
    return Explanation(
        Reason.DROPPED,
        f"An assistant message whose only content is tool call(s) {omission.tool_call_id} with no result in "
        f"the input; left out to keep the input valid.",
        dropped_calls=tuple(omission.tool_call_id.split(", ")),
    )
