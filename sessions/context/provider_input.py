"""The model input rendered for a provider: ctxweb's own shape, OpenAI Chat Completions, Anthropic Messages."""


import orjson
from django.db import connections, router

from sessions.context.model_input import ModelInput, Omission, Reason, head_entries
from sessions.db.messages import STORED_OPENAI_SQL, stored_renderings
from sessions.errors import Conflict
from sessions.models import Checkpoint, Message, Session
from sessions.wire.anthropic import to_anthropic
from sessions.wire.ctxweb import to_ctxweb
from sessions.wire.openai import openai_message, to_openai
from sessions.wire.openai_responses import to_openai_responses
from sessions.wire.tokens import REPLY_PRIMING

FORMATS = ("ctxweb", "openai", "anthropic", "openai-responses")


def render_model_input(model_input: ModelInput, fmt: str):
    """The model input in one of FORMATS."""
    if fmt == "openai":
        return to_openai(model_input)
    if fmt == "anthropic":
        return to_anthropic(model_input)
    if fmt == "openai-responses":
        return to_openai_responses(model_input)
    return to_ctxweb(model_input)


class NothingToSend(Conflict):
    code = "nothing_to_send"


NOTHING_TO_SEND = {
    "openai": "Nothing to send: the model input is empty (no instructions and no message), and OpenAI Chat "
              "Completions needs at least one message. Set instructions or append a message first.",
    "anthropic": "Nothing to send: the model input holds no message besides the instructions, and Anthropic "
                 "Messages needs at least one. Append a user message first.",
}


def check_something_to_send(model_input: ModelInput, fmt: str, rendered=None) -> None:
    """A provider format with no message in it is not a request its provider takes: NothingToSend (409)."""
    if fmt not in NOTHING_TO_SEND:
        return
    rendered = render_model_input(model_input, fmt) if rendered is None else rendered
    if not (rendered["messages"] if fmt == "anthropic" else rendered):
        raise NothingToSend(NOTHING_TO_SEND[fmt])


def model_input_response(model_input: ModelInput, fmt: str) -> dict:
    """The model input in `fmt` with its figures, in the shape of schemas.ModelInputOut."""
    rendered = render_model_input(model_input, fmt)
    check_something_to_send(model_input, fmt, rendered)
    totals = {"instructions": 0, "summary": 0, "messages": 0, "request": 0}
    for entry in model_input.entries:
        totals["messages" if entry.kind == "message" else entry.kind] += entry.tokens
    request = model_input.request
    return {
        "format": fmt,
        "session": model_input.session.key,
        "as_of": model_input.as_of,
        "basis": model_input.basis,
        "request": request.number if request is not None else None,
        "derived_from": (request.derived_from or None) if request is not None else None,
        "checkpoint": model_input.checkpoint,
        "tokens": {"total": model_input.tokens, **totals},
        "system": rendered.get("system") if fmt == "anthropic" else None,
        "messages": rendered["messages"] if fmt == "anthropic" else rendered,
        "omitted": model_input.omitted,
        "pending_tool_calls": model_input.pending_tool_calls,
    }


# --- the `openai` input from the stored renderings ----------------------------------------------

# The omissions that leave a stored message out whole, which the stored figures say in full: any other
# (a call awaiting its result, a message sent without some of its calls) needs the message's fields.
WHOLE_OMISSIONS = (Reason.ORPHAN, Reason.DROPPED)
# At most this many stored messages left out are skipped in the read itself; past it (a log of orphaned
# results) the input is built in full.
MAX_SKIPPED = 500


def stored_openai_response(session: Session, checkpoint: Checkpoint | None) -> dict | None:
    """The `openai` model input of `session` now, as model_input_response gives it, from what was stored
    when each part of it was: every message's rendering (Message.openai_message), written with the
    message, and the session's figures of its input (input_tokens, input_left_out), which every change
    to the input updates in its own transaction (the session page lays the input out from them too).
    One read of the renderings (STORED_OPENAI_SQL): no field is decoded, checked or rendered again, and
    the messages go into the response as the JSON text they are. The same JSON as built in full
    (tests/test_stored_openai.py compares the two on every transcript).

    None where the stored parts cannot say it all, for build_model_input to build it: a call awaiting
    its result or a message sent without some of its calls (either is sent otherwise than stored), a
    message stored without its rendering, a session changed since the request read it (its figures
    would not be those of the messages read), a database of another kind; and a session rebuilt from
    recorded requests, whose stored figures are those of what its application sent."""
    if session.request_count:
        return None
    left_out = session.input_left_out
    if len(left_out) > MAX_SKIPPED or any(
        o["reason"] not in WHOLE_OMISSIONS or not o.get("whole_message", True) for o in left_out
    ):
        return None
    db = connections[router.db_for_read(Message, instance=session)]
    if db.vendor not in STORED_OPENAI_SQL:
        return None
    stored = stored_renderings(db, session, checkpoint.last_seq if checkpoint else 0, [o["seq"] for o in left_out])
    if stored is None:
        return None
    count, joined = stored
    entries = head_entries(session, checkpoint)
    head = [orjson.dumps(openai_message(e)) for e in entries]
    totals = {"instructions": 0, "summary": 0, "request": 0, **{e.kind: e.tokens for e in entries}}
    if not head and not count:
        raise NothingToSend(NOTHING_TO_SEND["openai"])
    if count:
        head.append(joined)
    totals["messages"] = session.input_tokens - REPLY_PRIMING - session.instructions_tokens - totals["summary"]
    return {
        "format": "openai",
        "session": session.key,
        "as_of": None,
        "basis": "raw_log",
        "request": None,
        "derived_from": None,
        "checkpoint": checkpoint,
        "tokens": {"total": session.input_tokens, **totals},
        "system": None,
        "messages": orjson.Fragment(b"[" + b",".join(head) + b"]"),
        "omitted": [Omission.from_dict(o) for o in left_out],
        "pending_tool_calls": [],
    }


# --- OpenAI Responses API ------------------------------------------------------------------------


