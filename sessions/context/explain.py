"""Explain: for every stored message, where it is in the model input, or why not.

Explanations are read off the model input they explain, in any of its forms, so they never disagree with
it: a message is explained `in_input` exactly when it is in that input.

For a session rebuilt from recorded requests (basis recorded_request, sessions.context.recorded_input), what the
application sent decides: a message the request in force carried is in the input (`edited_by_application`
when it was sent in a form of the application's own); one that request no longer carried was dropped by
the application (`dropped_by_application`, naming the request where it was last sent and the first where
it was missing), or replaced by the application's own summary or rewrite
(`replaced_by_application_summary`, when that first request sent a message matching no stored one).
"""

from dataclasses import dataclass, field

from sessions.context.model_input import ModelInputShape, Omission, Reason, layout_model_input, stored_layout
from sessions.context.recorded_input import RAW_LOG, RECORDED_REQUEST, basis_of, build_recorded_input
from sessions.models import Checkpoint, Message, RecordedRequest, Role, Session


@dataclass
class Explanation:
    code: str
    sentence: str
    checkpoint: Checkpoint | None = None  # the checkpoint that first covered the message
    position: int | None = None  # 1-based position in the model input, when in it
    dropped_calls: tuple = ()
    pending_calls: tuple = ()  # ids of its tool calls awaiting their results
    # Sessions rebuilt from recorded requests (numbers of RecordedRequest.number):
    request: int | None = None  # the latest request, which carried it (as its message `request_position`)
    request_position: int | None = None
    last_sent_request: int | None = None  # dropped: the last request that carried it (None: never sent)
    first_missing_request: int | None = None  # dropped: the first request without it
    replacements: tuple = field(default=())  # replaced: 1-based positions, in that request, of its own messages
    edited_by_application: bool = False  # in the input as the application edited it

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
        for name in ("request", "request_position", "first_missing_request"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.first_missing_request is not None:
            data["last_sent_request"] = self.last_sent_request
        if self.replacements:
            data["replacements"] = list(self.replacements)
        if self.edited_by_application:
            data["edited_by_application"] = True
        return data


@dataclass
class RequestHistory:
    """What a session's requests, up to the one in force, say of the raw messages it did not carry."""

    drops: dict[int, tuple[int, int | None, tuple]]  # seq -> (first request without it, last that sent it, replacements)


def request_history(session, seqs, upto: int) -> RequestHistory:
    """What the requests numbered up to `upto` say of the raw messages `seqs`: for each, the latest request
    that no longer carried it. Two queries at most, whatever the number of requests: the drops of every
    request, and the requests just before the drops that concern `seqs`."""
    requests = RecordedRequest.objects.filter(session=session, number__lte=upto)
    wanted = set(seqs)
    first_missing: dict[int, tuple[int, tuple]] = {}
    if wanted:
        for number, dropped, unmatched in requests.order_by("number").values_list("number", "dropped_seqs", "unmatched"):
            for seq in set(dropped or ()) & wanted:  # the latest drop wins: it was not sent again after it
                first_missing[seq] = (number, tuple(index + 1 for index in unmatched or ()))
    previous = {}
    if first_missing:
        numbers = {number - 1 for number, _ in first_missing.values()}
        previous = {number: set(s for s in seqs_sent or () if s is not None) for number, seqs_sent in
                    requests.filter(number__in=numbers).values_list("number", "message_seqs")}
    drops = {
        seq: (number, number - 1 if seq in previous.get(number - 1, ()) else None, replacements)
        for seq, (number, replacements) in first_missing.items()
    }
    return RequestHistory(drops)


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
    in any of its forms (sessions.context.model_input.ModelInputShape).

    `checkpoints` are the session's checkpoints (any order); only those the input's checkpoint extends
    count as covering.
    """
    if model_input.basis == RECORDED_REQUEST:
        return _explain_recorded(messages, model_input)
    current = model_input.checkpoint
    boundary = current.last_seq if current else 0
    chain = [c for c in checkpoints if current is not None and c.last_seq <= current.last_seq]
    positions = model_input.positions(messages)
    left_out = (model_input.dropped, model_input.pending)
    omissions = model_input.omitted_by_seq
    total = model_input.entry_count
    return {message.seq: _explain(message, model_input, boundary, chain, positions, left_out, omissions, total)
            for message in messages}


def _explain_recorded(messages: list[Message], model_input) -> dict[int, "Explanation"]:
    """Explanations against what the application sent (a ModelInput of basis recorded_request)."""
    recorded = model_input.request
    positions = model_input.every_position
    total = model_input.entry_count
    sent = model_input.sent_messages or []
    in_request = {}  # seq -> (1-based position in the request, edited)
    for index, entry in enumerate(model_input.entries[:len(sent)], start=1):
        if entry.seq is not None:
            in_request[entry.seq] = (index, entry.edited)
    at_seq = recorded.at_seq if recorded is not None else 0
    as_of = model_input.as_of
    left_out = (model_input.dropped, model_input.pending)
    omissions = model_input.omitted_by_seq
    answered = set(recorded.response_seqs or ()) if recorded is not None else set()
    dropped = [m.seq for m in messages if m.seq <= at_seq and m.seq not in positions and m.role != Role.SYSTEM
               and m.seq not in answered and (as_of is None or m.seq <= as_of)]
    history = request_history(model_input.session, dropped, recorded.number) if recorded is not None and dropped \
        else RequestHistory({})
    explained = {}
    for message in messages:
        explained[message.seq] = _recorded(message, model_input, recorded, positions, total, in_request, at_seq,
                                           history, left_out, omissions)
    return explained


def _recorded(message, model_input, recorded, positions, total, in_request, at_seq, history, left_out,
              omissions) -> Explanation:
    as_of = model_input.as_of
    seq = message.seq
    if as_of is not None and seq > as_of:
        return Explanation(
            Reason.AFTER_AS_OF, f"Stored after message #{as_of}, so not part of the input as of #{as_of}."
        )
    number = recorded.number if recorded is not None else None
    if seq in positions:
        position = positions[seq]
        if seq in in_request:
            index, edited = in_request[seq]
            count = len(model_input.sent_messages)
            sent = f"request {number} sent it as message {index} of {count}"
            hidden = ("" if message.include_in_messages else
                      " It is hidden in ctxweb's own input (include_in_messages is false), but the application "
                      "sent it.")
            if edited:
                return Explanation(
                    Reason.IN_INPUT,
                    f"In the model input as the application edited it: {sent}, with content of its own in place "
                    f"of the raw text.{hidden}",
                    position=position, request=number, request_position=index, edited_by_application=True,
                )
            return Explanation(Reason.IN_INPUT, f"In the model input: the application's {sent}.{hidden}",
                               position=position, request=number, request_position=index)
        if recorded is not None and seq in (recorded.response_seqs or ()):
            where = f"the response to request {number}"
        elif recorded is not None:
            where = f"stored after request {number}, the latest the application sent"
        else:
            where = "stored before the application's first request"
        explanation = _in_input(seq, position, total, left_out, f": {where}")
        explanation.request = number
        return explanation
    if message.role == Role.SYSTEM:
        return Explanation(
            Reason.INSTRUCTIONS_ROLE,
            "A stored system message. The application sends its own system prompt with each request, so a "
            "stored system message is not part of the input.",
        )
    if seq > at_seq or (recorded is not None and seq in (recorded.response_seqs or ())):
        if not message.include_in_messages:
            return Explanation(
                Reason.EXCLUDED,
                "Hidden: include_in_messages is false. It stays in the raw log but is left out of the input.",
            )
        for omission in omissions.get(seq, ()):
            if omission.whole_message:
                return _omission_explanation(message, omission, 0)
        return Explanation(Reason.EXCLUDED, "Not in the model input.")  # not reached; kept for safety
    if seq in history.drops:
        return _dropped(history.drops[seq], number)
    return Explanation(
        Reason.DROPPED_BY_APPLICATION,
        f"Dropped by the application: stored before request {number}, the latest it sent, which does not carry "
        f"it, and no request before that sent it either.",
        first_missing_request=number,
    )


def _dropped(drop: tuple, latest: int) -> Explanation:
    first_missing, last_sent, replacements = drop
    if last_sent is None:
        sent = (f"It was never sent: stored after request {first_missing - 1} (its response, or a message "
                f"added then), and request {first_missing} was the first without it")
    else:
        sent = f"Last sent in request {last_sent}; request {first_missing} was the first without it"
    later = ("" if first_missing == latest else
             f", and no later request sent it again (the request in force is request {latest})")
    if replacements:
        which = ", ".join(str(p) for p in replacements)
        return Explanation(
            Reason.REPLACED_BY_APPLICATION_SUMMARY,
            f"Replaced by the application's own summary or rewrite. {sent}, and instead sent "
            f"{'a message' if len(replacements) == 1 else 'messages'} matching no stored message (its message"
            f"{'' if len(replacements) == 1 else 's'} {which}){later}.",
            last_sent_request=last_sent, first_missing_request=first_missing, replacements=tuple(replacements),
        )
    return Explanation(
        Reason.DROPPED_BY_APPLICATION,
        f"Dropped by the application from its own requests. {sent}{later}.",
        last_sent_request=last_sent, first_missing_request=first_missing,
    )


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
        return _in_input(message.seq, positions[message.seq], total, left_out)
    # Not reached for stored messages of a consistent input; kept for safety.
    return Explanation(Reason.EXCLUDED, "Not in the model input.")


def _in_input(seq: int, position: int, total: int, left_out: tuple, where: str = "") -> Explanation:
    """In the input at `position` of `total` (`where`: how it got there), with the calls left out of it."""
    calls, pending = left_out[0].get(seq, ()), left_out[1].get(seq, ())
    sentence = f"In the model input, message {position} of {total}{where}."
    if calls:
        sentence += f" Its tool call(s) {', '.join(calls)} are left out: no result for them is in the input."
    if pending:
        sentence += (f" Its tool call(s) {', '.join(pending)} await their results and are left out of the "
                     f"request until the results are appended.")
    return Explanation(Reason.IN_INPUT, sentence, position=position, dropped_calls=tuple(calls),
                       pending_calls=tuple(pending))


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


# --- the layout a page of the raw log is explained against ----------------------------------------


def checkpoints_of(session: Session) -> list[Checkpoint]:
    return list(session.checkpoints.order_by("last_seq"))


def page_layout(session: Session, checkpoints: list[Checkpoint], as_of: int | None = None,
                basis: str | None = None) -> ModelInputShape:
    """The model input the page explains, on its basis (the session's own unless `basis` says): what the
    application sent (sessions.context.recorded_input); or built by ctxweb's rules now, from the session's stored
    figures, or as of message `as_of`, laid out again (reading every visible row up to it)."""
    basis = basis or basis_of(session)
    if basis == RECORDED_REQUEST:
        return build_recorded_input(session, as_of=as_of)
    if as_of is None and basis_of(session) == RAW_LOG:  # the stored figures are those of the session's basis
        latest = max(checkpoints, key=lambda c: c.last_seq) if checkpoints else None
        return stored_layout(session, checkpoint=latest)
    return layout_model_input(session, as_of=as_of)


def with_explanations(session: Session, messages: list[Message]) -> list[Message]:
    """`messages` (a page of the raw log, in seq order) each with its `explanation` against the model
    input built now: a fixed number of queries, whatever the page's length (the API's raw log)."""
    checkpoints = checkpoints_of(session)
    explanations = explain_messages(messages, page_layout(session, checkpoints), checkpoints)
    for message in messages:
        message.explanation = explanations[message.seq]
    return messages
