"""Explain: for every stored message, where it is in the model input, or why not."""

import pytest

from sessions.context.explain import explain_messages
from sessions.context.figures import refresh_input_tokens
from sessions.context.model_input import Reason, build_model_input, summary_message_tokens
from sessions.models import Checkpoint, Message, Session


def make_checkpoint(session, last_seq, previous=None):
    summary = f"Summary up to #{last_seq}."
    made = Checkpoint.objects.create(
        session=session,
        previous=previous,
        summary=summary,
        first_seq=previous.last_seq + 1 if previous else 1,
        last_seq=last_seq,
        created_at_seq=session.message_count,
        summary_tokens=summary_message_tokens(summary, last_seq),
        summarizer="test",
    )
    refresh_input_tokens(session)
    return made


def explain(session, **build):
    model_input = build_model_input(session, **build)
    messages = list(Message.objects.filter(session=session).order_by("seq"))
    return explain_messages(messages, model_input, list(session.checkpoints.all()))


@pytest.fixture
def story(append):
    """A session with one message for each way a stored message can be in the input or not."""
    call = {"id": "k1", "name": "lookup", "arguments": "{}"}
    append(
        "s1",
        [
            {"role": "user", "content": "u1"},  # 1 covered by the first checkpoint
            {"role": "assistant", "content": "a1"},  # 2 covered by the first checkpoint
            {"role": "user", "content": "u2"},  # 3 covered by the second checkpoint
            {"role": "assistant", "content": None, "tool_calls": [call]},  # 4 covered by the second
            {"role": "tool", "tool_call_id": "k1", "content": "r1"},  # 5 its call is covered
            {"role": "system", "content": "old instructions"},  # 6 stored system message
            {"role": "user", "content": "hidden", "include_in_messages": False},  # 7 hidden
            {"role": "user", "content": "u3"},  # 8 in the input
            {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "k2"}]},  # 9 never answered
            {"role": "user", "content": "u4"},  # 10 in the input
            {"role": "assistant", "content": "a4"},  # 11 in the input
        ],
    )
    session = Session.objects.get(key="s1")
    first = make_checkpoint(session, 2)
    second = make_checkpoint(session, 4, previous=first)
    return Session.objects.get(key="s1"), first, second


def test_every_stored_message_gets_a_reason_and_a_sentence(story):
    session, _, _ = story
    explained = explain(session)
    assert {seq: e.code for seq, e in explained.items()} == {
        1: Reason.COVERED,
        2: Reason.COVERED,
        3: Reason.COVERED,
        4: Reason.COVERED,
        5: Reason.ORPHAN,
        6: Reason.INSTRUCTIONS_ROLE,
        7: Reason.EXCLUDED,
        8: Reason.IN_INPUT,
        9: Reason.DROPPED,
        10: Reason.IN_INPUT,
        11: Reason.IN_INPUT,
    }
    assert all(e.sentence.strip() for e in explained.values())


def test_reason_codes_are_the_documented_ones(story):
    session, _, _ = story
    codes = {e.code for e in explain(session).values()}
    assert codes == {
        "covered_by_checkpoint", "orphan_tool_result", "instructions_role", "excluded_flag",
        "in_input", "dropped_tool_call",
    }


def test_a_covered_message_names_the_checkpoint_that_first_covered_it(story):
    session, first, second = story
    explained = explain(session)
    assert [explained[seq].checkpoint for seq in (1, 2, 3, 4)] == [first, first, second, second]
    # Named by their number in the session (1, 2), not their global id.
    assert (first.number, second.number) == (1, 2)
    assert explained[1].sentence.startswith("Covered by checkpoint 1 (messages #1–")
    assert explained[1].sentence.endswith("now carried by checkpoint 2.")
    assert explained[3].sentence.startswith("Covered by checkpoint 2 (messages #")
    assert explained[1].as_dict()["checkpoint_number"] == 1 and explained[1].as_dict()["checkpoint_id"] == first.pk


def test_a_message_in_the_input_gives_its_position(story):
    session, _, second = story
    model_input = build_model_input(session)
    explained = explain(session)
    for seq in (8, 10, 11):
        position = explained[seq].position
        assert model_input.entries[position - 1].seq == seq
        assert explained[seq].checkpoint is None
    assert model_input.entries[0].checkpoint == second  # the summary comes first


def test_a_dropped_tool_call_is_named(story):
    session, _, _ = story
    explained = explain(session)
    assert explained[9].dropped_calls == ("k2",)
    assert "k2" in explained[9].sentence
    assert "k1" in explained[5].sentence


def test_an_in_input_message_with_a_dropped_call_says_so(append):
    calls = [{"id": "x1", "name": "f", "arguments": "{}"}, {"id": "x2", "name": "g", "arguments": "{}"}]
    append(
        "s1",
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "Running two tools.", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "x1", "content": "done"},
            {"role": "user", "content": "and the other?"},
        ],
    )
    explained = explain(Session.objects.get(key="s1"))
    assert explained[2].code == Reason.IN_INPUT
    assert explained[2].dropped_calls == ("x2",)
    assert "x2" in explained[2].sentence


def test_a_tool_result_of_a_hidden_call_is_an_orphan(append):
    call = {"id": "h1", "name": "f", "arguments": "{}"}
    append(
        "s1",
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call], "include_in_messages": False},
            {"role": "tool", "tool_call_id": "h1", "content": "result"},
            {"role": "assistant", "content": "done"},
        ],
    )
    explained = explain(Session.objects.get(key="s1"))
    assert [explained[seq].code for seq in (1, 2, 3, 4)] == [
        Reason.IN_INPUT, Reason.EXCLUDED, Reason.ORPHAN, Reason.IN_INPUT,
    ]
    assert explained[3].sentence


def test_messages_after_as_of_are_explained_as_such(append):
    append("s1", [{"role": "user", "content": f"m{i}"} for i in range(1, 6)])
    explained = explain(Session.objects.get(key="s1"), as_of=3)
    assert [explained[seq].code for seq in range(1, 6)] == [
        Reason.IN_INPUT, Reason.IN_INPUT, Reason.IN_INPUT, Reason.AFTER_AS_OF, Reason.AFTER_AS_OF,
    ]
    assert "3" in explained[4].sentence


def test_explanations_serialise_with_code_and_sentence(story):
    session, first, _ = story
    explained = explain(session)
    covered = explained[1].as_dict()
    assert covered["code"] == "covered_by_checkpoint"
    assert covered["sentence"] == explained[1].sentence
    assert covered["checkpoint_id"] == first.pk
    assert explained[8].as_dict()["position"] == explained[8].position
