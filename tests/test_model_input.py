"""The model input: what the next request to the model contains, in every format."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.context.figures import refresh_input_tokens
from sessions.context.model_input import Reason, build_model_input, summary_message_tokens
from sessions.errors import DomainError
from sessions.ingest.session_store import update_session
from sessions.models import Checkpoint, Message, Session
from sessions.wire.anthropic import to_anthropic
from sessions.wire.ctxweb import to_ctxweb
from sessions.wire.openai import to_openai
from sessions.wire.validation import parse_message
from tests.counting import REPLY_PRIMING, message_tokens, text_tokens


def user(text, **extra):
    return {"role": "user", "content": text, **extra}


def assistant(text, calls=(), **extra):
    message = {"role": "assistant", "content": text, **extra}
    if calls:
        message["tool_calls"] = [{"id": c, "name": "lookup", "arguments": f'{{"call": "{c}"}}'} for c in calls]
    return message


def tool(call_id, text="result"):
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def session_of(key="s1") -> Session:
    return Session.objects.get(key=key)


def checkpoint(session, last_seq, previous=None, created_at_seq=None, summary=None):
    summary = summary or f"The first {last_seq} messages, summarised."
    made = Checkpoint.objects.create(
        session=session,
        previous=previous,
        summary=summary,
        first_seq=previous.last_seq + 1 if previous else 1,
        last_seq=last_seq,
        created_at_seq=session.message_count if created_at_seq is None else created_at_seq,
        summary_tokens=summary_message_tokens(summary, last_seq),
        summarizer="test",
    )
    refresh_input_tokens(session)
    return made


def hide(session, *seqs):
    Message.objects.filter(session=session, seq__in=seqs).update(include_in_messages=False)
    refresh_input_tokens(session)


def seqs(model_input):
    return [e.seq for e in model_input.entries if e.kind == "message"]


def omitted(model_input):
    return [(o.reason, o.seq, o.tool_call_id, o.whole_message) for o in model_input.omitted]


def call_tokens(call_id):
    return text_tokens("lookup") + text_tokens(f'{{"call": "{call_id}"}}')


# --- order and boundaries ------------------------------------------------------------------------


def test_it_starts_with_the_instructions_as_one_system_message(project, append):
    update_session(project, "s1", {"instructions": "You are a helpful travel agent."})
    append("s1", [user("hi"), assistant("hello")])
    model_input = build_model_input(session_of())
    first = model_input.entries[0]
    assert (first.kind, first.role, first.content) == ("instructions", "system", "You are a helpful travel agent.")
    assert [e.kind for e in model_input.entries] == ["instructions", "message", "message"]
    assert to_openai(model_input)[0] == {"role": "system", "content": "You are a helpful travel agent."}


def test_it_has_no_system_message_when_there_are_no_instructions(append):
    append("s1", [user("hi"), assistant("hello")])
    assert [e.role for e in build_model_input(session_of()).entries] == ["user", "assistant"]


def test_the_requests_instructions_replace_the_sessions(project, append):
    update_session(project, "s1", {"instructions": "old"})
    append("s1", [user("hi")])
    model_input = build_model_input(session_of(), instructions="new instructions")
    assert [(e.kind, e.content) for e in model_input.entries][0] == ("instructions", "new instructions")
    assert model_input.tokens == REPLY_PRIMING + message_tokens("system", "new instructions") + message_tokens("user", "hi")


def test_it_keeps_stored_messages_unchanged_in_seq_order(append):
    append("s1", [user("weather?", id="u1"), assistant(None, ["c1"], id="a1"), tool("c1", "sunny"), assistant("Sunny.")])
    entries = build_model_input(session_of()).entries
    assert [(e.seq, e.role) for e in entries] == [(1, "user"), (2, "assistant"), (3, "tool"), (4, "assistant")]
    assert [e.client_id for e in entries[:2]] == ["u1", "a1"]
    assert entries[1].tool_calls == [{"id": "c1", "name": "lookup", "arguments": '{"call": "c1"}'}]
    assert entries[2].tool_call_id == "c1"


def test_it_starts_after_the_latest_checkpoint(project, append):
    update_session(project, "s1", {"instructions": "Be brief."})
    append("s1", [user(f"u{i}") if i % 2 else assistant(f"a{i}") for i in range(1, 11)])
    session = session_of()
    first = checkpoint(session, 4)
    latest = checkpoint(session, 6, previous=first, summary="Everything up to six.")

    model_input = build_model_input(session)
    assert model_input.checkpoint == latest
    instructions, summary, *rest = model_input.entries
    assert instructions.kind == "instructions"
    assert (summary.kind, summary.role, summary.checkpoint) == ("summary", "user", latest)
    assert summary.content == "Summary of the earlier conversation, covering messages 1–6:\n\nEverything up to six."
    assert [e.seq for e in rest] == [7, 8, 9, 10]
    assert to_openai(model_input)[1] == {"role": "user", "content": summary.content}


def test_hidden_messages_are_left_out(append):
    append("s1", [user("a"), assistant("b"), user("secret", include_in_messages=False), assistant("c")])
    model_input = build_model_input(session_of())
    assert seqs(model_input) == [1, 2, 4]
    assert model_input.omitted == []  # left out by choice, not for validity


def test_stored_system_messages_are_left_out(project, append):
    update_session(project, "s1", {"instructions": "current instructions"})
    append("s1", [{"role": "system", "content": "old instructions"}, user("a"), assistant("b")])
    model_input = build_model_input(session_of())
    assert seqs(model_input) == [2, 3]
    assert [e.content for e in model_input.entries if e.role == "system"] == ["current instructions"]


# --- provider formats ----------------------------------------------------------------------------


def test_agent_messages_are_user_messages_for_the_providers(append):
    append("s1", [user("start"), assistant("working"), {"role": "agent", "content": "Continue the task."}])
    model_input = build_model_input(session_of())
    assert to_openai(model_input)[2] == {"role": "user", "content": "Continue the task."}
    anthropic = to_anthropic(model_input)["messages"]
    assert anthropic[-1] == {"role": "user", "content": [{"type": "text", "text": "Continue the task."}]}
    assert all(m["role"] in ("user", "assistant") for m in anthropic)


def test_openai_format_has_tool_calls_and_results(append):
    append("s1", [user("weather?"), assistant(None, ["c1"]), tool("c1", "sunny")])
    messages = to_openai(build_model_input(session_of()))
    assert messages[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"call": "c1"}'}}],
    }
    assert messages[2] == {"role": "tool", "content": "sunny", "tool_call_id": "c1"}


def test_anthropic_format_has_system_tool_blocks_and_alternating_roles(project, append):
    update_session(project, "s1", {"instructions": "Be brief."})
    append(
        "s1",
        [
            user("weather and time?"),
            assistant("Checking both.", ["c1", "c2"]),
            tool("c1", "sunny"),
            tool("c2", "noon"),
            {"role": "agent", "content": "Now answer."},
            assistant("Sunny at noon."),
            user("thanks"),
            user("bye"),
        ],
    )
    result = to_anthropic(build_model_input(session_of()))
    assert result["system"] == "Be brief."
    messages = result["messages"]
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
    assert all(m["role"] != "system" for m in messages)
    assert messages[1]["content"] == [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"call": "c1"}},
        {"type": "tool_use", "id": "c2", "name": "lookup", "input": {"call": "c2"}},
    ]
    results = messages[2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
    assert [(b["tool_use_id"], b["content"]) for b in results[:2]] == [("c1", "sunny"), ("c2", "noon")]
    assert messages[4]["content"] == [{"type": "text", "text": "thanks"}, {"type": "text", "text": "bye"}]


# --- validity: what is left out ------------------------------------------------------------------


def test_a_tool_result_whose_call_is_covered_by_a_checkpoint_is_left_out(append):
    append("s1", [user("go"), assistant(None, ["c1"]), tool("c1"), assistant("done"), user("next")])
    session = session_of()
    checkpoint(session, 2)
    model_input = build_model_input(session)
    assert seqs(model_input) == [4, 5]
    assert omitted(model_input) == [(Reason.ORPHAN, 3, "c1", True)]
    assert all(m["role"] != "tool" for m in to_openai(model_input))


def test_a_tool_result_whose_call_is_hidden_is_left_out(append):
    append("s1", [user("go"), assistant(None, ["c1"]), tool("c1"), assistant("done")])
    session = session_of()
    hide(session, 2)
    model_input = build_model_input(session)
    assert seqs(model_input) == [1, 4]
    assert omitted(model_input) == [(Reason.ORPHAN, 3, "c1", True)]
    assert session_of().input_tokens == model_input.tokens


def test_a_tool_result_answering_a_hidden_call_with_a_reused_id_is_left_out(append):
    append(
        "s1",
        [user("go"), assistant(None, ["c1"]), tool("c1", "first"), assistant(None, ["c1"]), tool("c1", "second")],
    )
    session = session_of()
    hide(session, 4)
    model_input = build_model_input(session)
    assert seqs(model_input) == [1, 2, 3]
    assert omitted(model_input) == [(Reason.ORPHAN, 5, "c1", True)]


def test_a_tool_result_separated_from_its_call_is_left_out_and_the_call_dropped(append):
    append("s1", [user("go"), assistant(None, ["c1"]), user("hurry up"), tool("c1", "late"), assistant("done")])
    model_input = build_model_input(session_of())
    assert seqs(model_input) == [1, 3, 5]
    assert omitted(model_input) == [(Reason.DROPPED, 2, "c1", True), (Reason.ORPHAN, 4, "c1", True)]


def test_hiding_a_tool_result_drops_its_call(append):
    append("s1", [user("go"), assistant("Looking.", ["c1"]), tool("c1"), assistant("done")])
    session = session_of()
    hide(session, 3)
    model_input = build_model_input(session)
    assert seqs(model_input) == [1, 2, 4]
    assert model_input.entries[1].tool_calls == []
    assert omitted(model_input) == [(Reason.DROPPED, 2, "c1", False)]
    assert "tool_calls" not in to_openai(model_input)[1]
    assert session_of().input_tokens == model_input.tokens


def test_an_unanswered_tool_call_of_an_older_assistant_message_is_dropped(append):
    append(
        "s1",
        [user("weather and time?"), assistant("Checking.", ["c1", "c2"]), tool("c1", "sunny"), user("and?"), assistant("ok")],
    )
    session = session_of()
    model_input = build_model_input(session)
    entry = model_input.entries[1]
    assert [c["id"] for c in entry.tool_calls] == ["c1"]
    assert entry.dropped_calls == ["c2"]
    assert omitted(model_input) == [(Reason.DROPPED, 2, "c2", False)]
    assert [c["id"] for c in to_openai(model_input)[1]["tool_calls"]] == ["c1"]

    full = message_tokens("assistant", "Checking.") + call_tokens("c1") + call_tokens("c2")
    assert Message.objects.get(session=session, seq=2).tokens == full
    expected = REPLY_PRIMING + sum(
        [
            message_tokens("user", "weather and time?"),
            full - call_tokens("c2"),
            message_tokens("tool", "sunny"),
            message_tokens("user", "and?"),
            message_tokens("assistant", "ok"),
        ]
    )
    assert model_input.tokens == expected
    assert session.input_tokens == expected


def test_an_older_assistant_message_of_only_unanswered_calls_is_left_out(append):
    append("s1", [user("go"), assistant(None, ["c1"]), user("never mind"), assistant("ok")])
    session = session_of()
    model_input = build_model_input(session)
    assert seqs(model_input) == [1, 3, 4]
    assert omitted(model_input) == [(Reason.DROPPED, 2, "c1", True)]
    expected = REPLY_PRIMING + sum(
        [message_tokens("user", "go"), message_tokens("user", "never mind"), message_tokens("assistant", "ok")]
    )
    assert model_input.tokens == session.input_tokens == expected


def test_the_pending_calls_of_the_newest_assistant_message_are_left_out_until_answered(append):
    append("s1", [user("weather and time?"), assistant(None, ["c1", "c2"]), tool("c1", "sunny")])
    session = session_of()
    model_input = build_model_input(session)

    assert seqs(model_input) == [1, 2, 3]
    assert [c["id"] for c in model_input.entries[1].tool_calls] == ["c1"]
    assert omitted(model_input) == [(Reason.AWAITING, 2, "c2", False)]
    assert model_input.pending_tool_calls == [
        {"seq": 2, "request_index": None, "id": "c2", "name": "lookup", "arguments": '{"call": "c2"}'}]
    expected = REPLY_PRIMING + sum([message_tokens("user", "weather and time?"),
                                    message_tokens("assistant", tool_calls=[assistant(None, ["c1"])["tool_calls"][0]]),
                                    message_tokens("tool", "sunny")])
    assert model_input.tokens == session.input_tokens == expected
    assert [c["id"] for c in to_openai(model_input)[1]["tool_calls"]] == ["c1"]
    assert [b["id"] for b in to_anthropic(model_input)["messages"][1]["content"]] == ["c1"]
    shown = to_ctxweb(model_input)[1]
    assert ([c["id"] for c in shown["tool_calls"]], [c["id"] for c in shown["pending_tool_calls"]]) == (["c1"], ["c2"])

    append("s1", [tool("c2", "noon")])
    answered = build_model_input(session_of())
    assert [c["id"] for c in answered.entries[1].tool_calls] == ["c1", "c2"]
    assert (answered.omitted, answered.pending_tool_calls) == ([], [])


def test_an_assistant_message_of_only_pending_calls_is_shown_by_the_ctxweb_format_alone(append):
    append("s1", [user("weather?"), assistant(None, ["c1"])])
    session = session_of()
    model_input = build_model_input(session)

    assert seqs(model_input) == [1]
    assert omitted(model_input) == [(Reason.AWAITING, 2, "c1", True)]
    assert [c["id"] for c in model_input.pending_tool_calls] == ["c1"]
    assert model_input.tokens == session.input_tokens == REPLY_PRIMING + message_tokens("user", "weather?")
    assert to_openai(model_input) == [{"role": "user", "content": "weather?"}]
    assert to_anthropic(model_input)["messages"] == [{"role": "user", "content": [{"type": "text", "text": "weather?"}]}]
    last = to_ctxweb(model_input)[-1]
    assert (last["seq"], last["tokens"], "tool_calls" in last) == (2, 0, False)
    assert [c["id"] for c in last["pending_tool_calls"]] == ["c1"]


# --- as of ---------------------------------------------------------------------------------------


def test_as_of_rebuilds_an_earlier_input(append):
    append("s1", [user(f"u{i}") if i % 2 else assistant(f"a{i}") for i in range(1, 7)])
    session = session_of()
    first = checkpoint(session, 2, created_at_seq=4)
    append("s1", [user(f"u{i}") if i % 2 else assistant(f"a{i}") for i in range(7, 11)])
    session = session_of()
    second = checkpoint(session, 6, previous=first)
    assert second.created_at_seq == 10

    def rebuilt(n):
        model_input = build_model_input(session, as_of=n)
        return model_input.checkpoint, seqs(model_input)

    assert rebuilt(3) == (None, [1, 2, 3])
    assert rebuilt(4) == (first, [3, 4])
    assert rebuilt(9) == (first, [3, 4, 5, 6, 7, 8, 9])
    assert rebuilt(10) == (second, [7, 8, 9, 10])
    assert rebuilt(0) == (None, [])
    assert build_model_input(session, as_of=10).tokens == build_model_input(session).tokens


def test_as_of_uses_todays_flags(append):
    append("s1", [user("a"), assistant("b"), user("c")])
    session = session_of()
    hide(session, 2)
    assert seqs(build_model_input(session, as_of=2)) == [1]


@pytest.mark.parametrize("as_of", [-1, 4, 100, "2", 1.5, True])
def test_an_invalid_as_of_is_rejected(append, as_of):
    append("s1", [user("a"), assistant("b"), user("c")])
    with pytest.raises(DomainError) as info:
        build_model_input(session_of(), as_of=as_of)
    assert (info.value.code, info.value.status) == ("invalid_as_of", 422)


# --- reading only what it returns ----------------------------------------------------------------


def fill(append, key, count):
    messages = [user(f"question {i}") if i % 2 == 0 else assistant(f"answer {i}") for i in range(count)]
    for start in range(0, count, 500):
        append(key, messages[start : start + 500])
    session = session_of(key)
    checkpoint(session, count - 10)
    return session_of(key)


def test_building_takes_the_same_queries_for_20_and_2000_messages(append, django_assert_num_queries):
    small = fill(append, "small", 20)
    large = fill(append, "large", 2000)
    with CaptureQueriesContext(connection) as small_queries:
        assert seqs(build_model_input(small)) == list(range(11, 21))
    assert len(small_queries) <= 2  # the latest checkpoint and the messages after it
    with django_assert_num_queries(len(small_queries)) as large_queries:
        assert seqs(build_model_input(large)) == list(range(1991, 2001))
    message_query = large_queries.captured_queries[-1]["sql"]
    assert '"seq" >' in message_query  # a range over the (session, seq) index, not the whole log


# --- request messages ----------------------------------------------------------------------------


def test_unpersisted_request_messages_come_last(project, append):
    update_session(project, "s1", {"instructions": "Be brief."})
    append("s1", [user("a"), assistant("b")])
    extra = [parse_message(user("one-off question", persist=False), 0)]
    model_input = build_model_input(session_of(), extra_messages=extra)
    last = model_input.entries[-1]
    assert (last.kind, last.role, last.content, last.seq) == ("request", "user", "one-off question", None)
    assert [e.kind for e in model_input.entries] == ["instructions", "message", "message", "request"]
    assert model_input.tokens == session_of().input_tokens + message_tokens("user", "one-off question")
    assert to_openai(model_input)[-1] == {"role": "user", "content": "one-off question"}


# --- the stored figure ---------------------------------------------------------------------------


def test_the_sessions_input_tokens_follow_every_change(project, append):
    def assert_consistent():
        session = session_of()
        assert session.input_tokens == build_model_input(session).tokens
        return session

    append("s1", [user("hello"), assistant(None, ["c1"]), tool("c1", "data"), assistant("done")])
    assert_consistent()
    update_session(project, "s1", {"instructions": "You are a very careful assistant."})
    assert_consistent()
    append("s1", [user("more"), assistant("sure", ["c2"]), user("skip that"), assistant("ok")])
    before = assert_consistent().input_tokens
    hide(session_of(), 5)
    after = assert_consistent()
    assert after.input_tokens == before - message_tokens("user", "more")
    checkpoint(after, 3)
    assert_consistent()
    update_session(project, "s1", {"instructions": ""})
    assert_consistent()
