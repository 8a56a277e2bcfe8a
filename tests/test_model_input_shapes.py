"""The three forms of the model input (built in full, laid out from the visible rows, read from the
session's stored figures) answer one interface, ModelInputShape, with the same answers: explain and the
session page read that interface and never ask which form they were given."""

import pytest

from sessions.context.compaction_runs import compact
from sessions.context.explain import explain_messages
from sessions.context.model_input import ModelInputShape, build_model_input, layout_model_input, stored_layout
from sessions.dashboard.inspection import input_window, raw_window
from sessions.ingest.session_store import update_session
from sessions.models import Session


def call(call_id):
    return {"id": call_id, "name": "lookup", "arguments": f'{{"id": "{call_id}"}}'}


@pytest.fixture
def session(project, append):
    """Instructions, a checkpoint, and after it a hidden message, an orphan result, a dropped call, a
    partly answered call and a pending call in the newest assistant message."""
    update_session(project, "forms", {"instructions": "You answer questions about bookings."})
    older = []
    for n in range(4):
        older += [{"role": "user", "content": f"Question {n} " + "context " * 40},
                  {"role": "assistant", "content": f"Answer {n} " + "detail " * 40}]
    append("forms", older)
    outcome = compact(Session.objects.get(project=project, key="forms"), force=True, keep_recent_tokens=1,
                      summary="Four questions about bookings were answered.")
    assert outcome.status == "completed"
    append("forms", [
        {"role": "user", "content": "Look these up."},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "found a"},
        {"role": "assistant", "content": "hidden thoughts", "include_in_messages": False, "tool_calls": [call("h")]},
        {"role": "tool", "tool_call_id": "h", "content": "an orphan once its call is hidden"},
        {"role": "system", "content": "an old system prompt"},
        {"role": "assistant", "content": None, "tool_calls": [call("never")]},
        {"role": "user", "content": "And this one?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [call("pending")]},
    ])
    return Session.objects.get(project=project, key="forms")


def forms(session):
    return {
        "built": build_model_input(session),
        "laid out": layout_model_input(session),
        "stored": stored_layout(session),
    }


def windows(session):
    messages = list(session.messages.order_by("seq"))
    return [messages, messages[:5], messages[5:12], messages[-4:], messages[-1:], []]


def test_every_form_of_the_model_input_is_a_model_input_shape(session):
    for name, form in forms(session).items():
        assert isinstance(form, ModelInputShape), name


def test_every_form_gives_the_same_figures(session):
    answers = {
        name: (form.tokens, form.head_count, form.message_count, form.entry_count, form.left_out, form.dropped,
               form.checkpoint, form.as_of)
        for name, form in forms(session).items()
    }
    assert answers["built"] == answers["laid out"] == answers["stored"]
    built = answers["built"]
    assert built[1] == 2 and built[4] and built[5]  # the scenario has a head, messages left out and calls dropped


def test_every_form_gives_the_same_omissions_by_seq(session):
    answers = {
        name: {seq: [o.as_dict() for o in omissions] for seq, omissions in form.omitted_by_seq.items()}
        for name, form in forms(session).items()
    }
    assert answers["built"] == answers["laid out"] == answers["stored"]
    assert answers["built"]


def test_every_form_places_any_window_of_the_raw_log_alike(session):
    for window in windows(session):
        answers = {name: form.positions(window) for name, form in forms(session).items()}
        assert answers["built"] == answers["laid out"] == answers["stored"], [m.seq for m in window]


def test_positions_are_given_only_for_the_window_asked_about(session):
    window = list(session.messages.order_by("seq"))[-3:]
    for name, form in forms(session).items():
        assert set(form.positions(window)) <= {m.seq for m in window}, name


@pytest.mark.parametrize("before, limit", [(None, 60), (None, 2), (None, 1), (13, 2), (12, 60), (10, 3), (1, 5)])
def test_every_form_gives_the_same_tail_of_stored_messages(session, before, limit):
    answers = {name: [m.seq for m in form.stored_tail(before, limit)] for name, form in forms(session).items()}
    assert answers["built"] == answers["laid out"] == answers["stored"]


def test_every_form_explains_and_windows_the_same_way(session):
    messages = list(session.messages.order_by("seq"))
    checkpoints = list(session.checkpoints.order_by("last_seq"))
    explained, raw, inputs = {}, {}, {}
    for name, form in forms(session).items():
        explained[name] = {seq: e.as_dict() for seq, e in explain_messages(messages, form, checkpoints).items()}
        raw[name] = [(i.seq, i.code, i.colour) for i in raw_window(session, form, checkpoints).items]
        window = input_window(session, form, checkpoints, limit=3)
        inputs[name] = (window.earlier, window.first_position,
                        [(i.kind, i.position, i.tokens, i.dropped_calls) for i in window.items])
    assert explained["built"] == explained["laid out"] == explained["stored"]
    assert raw["built"] == raw["laid out"] == raw["stored"]
    assert inputs["built"] == inputs["laid out"] == inputs["stored"]
