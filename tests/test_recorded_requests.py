"""Sessions rebuilt from recorded requests (sessions.ingest.recorded_requests): matching, appending, what the
application dropped or replaced, numbering by start time, and retries storing nothing twice."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from sessions.ingest.recorded_requests import CapturedRequest, record_requests
from sessions.models import Message, RecordedRequest, Session

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SYSTEM = {"role": "system", "content": "You are a travel agent."}


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def captured(n, messages, response=None, key="conv", **extra):
    return CapturedRequest(
        conversation=key, external_id=f"span{n}", source="otlp", started_at=T0 + timedelta(seconds=n),
        messages=messages, response=[response] if response else [], **extra,
    )


def conversation(turns):
    """The requests an application that keeps its whole history sends over `turns` turns."""
    history, requests = [SYSTEM], []
    for n in range(1, turns + 1):
        history = [*history, user(f"question {n}")]
        answer = assistant(f"answer {n}")
        requests.append(captured(n, list(history), answer))
        history = [*history, answer]
    return requests


def raw_log(key="conv"):
    return [(m.role, m.text) for m in Message.objects.filter(session__key=key).order_by("seq")]


def recorded(key="conv"):
    return list(RecordedRequest.objects.filter(session__key=key).order_by("number"))


@pytest.mark.django_db
def test_a_whole_history_rebuilds_the_raw_log_once(project):
    result = record_requests(project, conversation(3))
    assert (result.stored, result.duplicates, result.rejected) == (3, 0, [])
    assert raw_log() == [("user", "question 1"), ("assistant", "answer 1"), ("user", "question 2"),
                         ("assistant", "answer 2"), ("user", "question 3"), ("assistant", "answer 3")]
    session = Session.objects.get(key="conv")
    assert session.instructions == "You are a travel agent."
    assert session.request_count == 3
    third = recorded()[2]
    assert third.number == 3
    assert third.message_seqs == [None, 1, 2, 3, 4, 5]
    assert third.response_seqs == [6]
    assert third.dropped_seqs == [] and third.unmatched == []
    assert third.messages == [SYSTEM, user("question 1"), assistant("answer 1"), user("question 2"),
                              assistant("answer 2"), user("question 3")]
    assert third.tokens > recorded()[1].tokens > recorded()[0].tokens


@pytest.mark.django_db
def test_a_retried_export_stores_nothing_twice(project):
    record_requests(project, conversation(2))
    again = record_requests(project, conversation(2))
    assert (again.stored, again.duplicates) == (0, 2)
    assert len(raw_log()) == 4 and len(recorded()) == 2


@pytest.mark.django_db
def test_trimming_to_the_last_messages_is_dropped_by_the_application(project):
    requests = conversation(2)
    # The third request keeps only the last two messages of the history.
    requests.append(captured(3, [SYSTEM, assistant("answer 2"), user("question 3")], assistant("answer 3")))
    record_requests(project, requests)
    third = recorded()[2]
    assert third.message_seqs == [None, 4, 5]
    assert third.dropped_seqs == [1, 2, 3]
    assert third.unmatched == []
    assert raw_log()[-2:] == [("user", "question 3"), ("assistant", "answer 3")]


@pytest.mark.django_db
def test_an_application_summary_matches_no_raw_message(project):
    requests = conversation(2)
    summary = user("Summary so far: the user asked two questions.")
    requests.append(captured(3, [SYSTEM, summary, assistant("answer 2"), user("question 3")]))
    record_requests(project, requests)
    third = recorded()[2]
    assert third.unmatched == [1]
    assert third.message_seqs == [None, None, 4, 5]
    assert third.dropped_seqs == [1, 2, 3]
    assert ("user", "Summary so far: the user asked two questions.") not in raw_log()


@pytest.mark.django_db
def test_a_request_replacing_everything_but_its_last_answer_appends_only_its_new_turn(project):
    requests = conversation(2)
    requests.append(captured(3, [SYSTEM, user("Summary: two questions were answered."), assistant("answer 2"),
                                 user("question 3")]))
    record_requests(project, requests)
    third = recorded()[2]
    assert third.unmatched == [1]
    assert third.dropped_seqs == [1, 2, 3]
    assert raw_log()[-1] == ("user", "question 3")


@pytest.mark.django_db
def test_a_request_replacing_everything_with_a_summary_goes_on_in_the_same_session(project):
    requests = conversation(1)
    requests.append(captured(2, [SYSTEM, user("Summary: one question was answered."), user("question 2")]))
    result = record_requests(project, requests)
    assert result.sessions == ["conv"]
    second = recorded()[1]
    assert second.unmatched == [1]
    assert second.dropped_seqs == [1, 2]
    assert raw_log()[-1] == ("user", "question 2")


@pytest.mark.django_db
def test_an_opening_request_with_another_first_question_starts_a_thread(project):
    requests = conversation(2)
    requests.append(captured(3, [SYSTEM, user("a question about something else")], assistant("another answer")))
    result = record_requests(project, requests)
    assert result.sessions == ["conv", "conv:2"]
    assert raw_log("conv:2") == [("user", "a question about something else"), ("assistant", "another answer")]
    first, second = Session.objects.get(key="conv"), Session.objects.get(key="conv:2")
    assert first.metadata["threads"] == ["conv:2"] and second.metadata["thread_of"] == "conv"
    assert (first.request_count, second.request_count) == (2, 1)
    # A retry of an opening request, and a request going on from it, stay in its thread.
    more = [captured(4, [SYSTEM, user("a question about something else")], assistant("another answer")),
            captured(5, [SYSTEM, user("question 1"), assistant("answer 1"), user("question 2"),
                         assistant("answer 2"), user("question 3")], assistant("answer 3"))]
    record_requests(project, more)
    assert Session.objects.get(key="conv:2").request_count == 2
    assert Session.objects.get(key="conv").request_count == 3


def agent_requests(key, system, task, turns, start, step=2):
    """One agent's requests: its own system prompt and task, keeping its whole history."""
    history, requests = [{"role": "system", "content": system}, user(task)], []
    for n in range(turns):
        answer = assistant(f"{system[:12]} step {n}")
        requests.append(captured(start + n * step, list(history), answer, key=key))
        history = [*history, answer, user(f"go on {n}")]
    return requests


@pytest.mark.django_db
def test_two_agents_in_one_trace_are_two_threads_each_with_only_its_own_requests(project):
    """A root-cause agent hands over to a patch agent, their requests interleaved in one trace: each thread
    holds one agent's requests, so no model input pairs one agent's system prompt with the other's task."""
    root = agent_requests("trace-1", "You find the root cause.", "Why does login fail?", 3, start=1)
    patch = agent_requests("trace-1", "You write the patch.", "Patch: the token check is inverted.", 3, start=2)
    result = record_requests(project, root + patch)
    assert result.rejected == [] and result.sessions == ["trace-1", "trace-1:2"]
    for key, system, task in (("trace-1", "You find the root cause.", "Why does login fail?"),
                              ("trace-1:2", "You write the patch.", "Patch: the token check is inverted.")):
        session = Session.objects.get(key=key)
        assert session.instructions == system
        assert raw_log(key)[0] == ("user", task)
        assert all(r.messages[0]["content"] == system for r in recorded(key))
        assert session.request_count == 3
    # A later capture of the same trace goes on in the thread it continues.
    more = captured(20, [{"role": "system", "content": "You write the patch."},
                         user("Patch: the token check is inverted."), assistant("You write the  step 0")],
                    key="trace-1")
    record_requests(project, [more])
    assert Session.objects.get(key="trace-1:2").request_count == 4
    assert Session.objects.get(key="trace-1").request_count == 3


@pytest.mark.django_db
def test_a_thread_goes_on_through_a_new_system_prompt_when_it_carries_its_own_turns(project):
    """An application whose system prompt changes every request (the date in it) is one conversation: each
    request carries the answers of the one before."""
    requests = []
    history = [user("question 1")]
    for n in range(1, 4):
        system = {"role": "system", "content": f"Today is day {n}."}
        answer = assistant(f"answer {n}")
        requests.append(captured(n, [system, *history], answer))
        history = [*history, answer, user(f"question {n + 1}")]
    result = record_requests(project, requests)
    assert result.sessions == ["conv"] and Session.objects.get(key="conv").request_count == 3


@pytest.mark.django_db
def test_a_message_sent_again_after_others_is_a_new_raw_message_where_it_was_sent(project):
    """SWE-agent sends "Your last output did not use any tool calls!" each time the model answers without
    one, and drops the pair from its next request: the second time it is sent, it is a new raw message
    after the newest, never the old one four messages back."""
    nudge = user("Your last output did not use any tool calls!")
    a1, a2, a3 = assistant("I looked."), assistant("Done, I think."), assistant("Really done.")
    requests = [
        captured(1, [SYSTEM, user("fix the bug")], a1),
        captured(2, [SYSTEM, user("fix the bug"), a1, nudge], a2),
        captured(3, [SYSTEM, user("fix the bug"), a1, user("ran the tests")], a3),
        captured(4, [SYSTEM, user("fix the bug"), a1, user("ran the tests"), a3, nudge], assistant("Submitting.")),
    ]
    record_requests(project, requests)
    assert raw_log() == [("user", "fix the bug"), ("assistant", "I looked."), ("user", nudge["content"]),
                         ("assistant", "Done, I think."), ("user", "ran the tests"), ("assistant", "Really done."),
                         ("user", nudge["content"]), ("assistant", "Submitting.")]
    fourth = recorded()[3]
    assert fourth.message_seqs == [None, 1, 2, 5, 6, 7]
    assert recorded()[2].dropped_seqs == [3, 4]


@pytest.mark.django_db
def test_a_message_the_application_shortened_in_place_is_its_edit_of_the_raw_message(project):
    """An application that trims an old tool output keeps the message where it was, with other text: the
    raw log keeps the full output, and the request says it sent an edit of it."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "cat", "arguments": '{"path": "a.py"}'}}]}
    full = {"role": "tool", "tool_call_id": "call_1", "content": "line\n" * 200}
    trimmed = {"role": "tool", "tool_call_id": "call_1", "content": "(200 lines omitted)"}
    requests = [
        captured(1, [SYSTEM, user("read a.py")], call),
        captured(2, [SYSTEM, user("read a.py"), call, full], assistant("It has 200 lines.")),
        captured(3, [SYSTEM, user("read a.py"), call, trimmed, assistant("It has 200 lines."), user("thanks")],
                 assistant("You are welcome.")),
        captured(4, [SYSTEM, user("read a.py"), call, trimmed, assistant("It has 200 lines."), user("thanks"),
                     assistant("You are welcome."), user("bye")], assistant("Bye.")),
    ]
    record_requests(project, requests)
    assert [role for role, _ in raw_log()] == ["user", "assistant", "tool", "assistant", "user", "assistant",
                                               "user", "assistant"]
    assert raw_log()[2] == ("tool", "line\n" * 200), "the raw log keeps what the user saw"
    third, fourth = recorded()[2], recorded()[3]
    assert third.message_seqs == [None, 1, 2, 3, 4, 5] and third.edited == [3]
    assert fourth.message_seqs == [None, 1, 2, 3, 4, 5, 6, 7] and fourth.edited == [3]
    assert third.dropped_seqs == [] and third.unmatched == []
    assert third.message_tokens[3] < 20 < recorded()[1].message_tokens[3]
    assert third.tokens == sum(third.message_tokens) + 3


@pytest.mark.django_db
def test_a_summary_in_place_of_the_first_turn_is_not_an_edit(project):
    requests = conversation(2)
    requests.append(captured(3, [SYSTEM, user("Summary: question 1 was answered."), user("question 2"),
                                 assistant("answer 2"), user("question 3")]))
    record_requests(project, requests)
    third = recorded()[2]
    assert third.edited == [] and third.unmatched == [1]
    assert third.message_seqs == [None, None, 3, 4, 5]


@pytest.mark.django_db
def test_out_of_order_batches_are_numbered_by_start_time(project):
    first, second, third = conversation(3)
    record_requests(project, [third])
    record_requests(project, [second, first])
    assert [r.external_id for r in recorded()] == ["span1", "span2", "span3"]
    assert raw_log() == [("user", "question 1"), ("assistant", "answer 1"), ("user", "question 2"),
                         ("assistant", "answer 2"), ("user", "question 3"), ("assistant", "answer 3")]
    assert recorded()[0].response_seqs == [2]
    assert all(r.dropped_seqs == [] for r in recorded())


@pytest.mark.django_db
def test_tool_calls_and_results_are_matched(project):
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "4 degrees"}
    requests = [captured(1, [SYSTEM, user("weather in Oslo?")], call),
                captured(2, [SYSTEM, user("weather in Oslo?"), call, result], assistant("It is 4 degrees."))]
    record_requests(project, requests)
    assert [role for role, _ in raw_log()] == ["user", "assistant", "tool", "assistant"]
    assert recorded()[1].message_seqs == [None, 1, 2, 3]
    assert Message.objects.get(session__key="conv", seq=3).call_seq == 2


@pytest.mark.django_db
def test_a_malformed_request_is_refused_and_the_rest_stored(project):
    good = conversation(1)
    bad = captured(2, [{"role": "wizard", "content": "hi"}], key="conv")
    result = record_requests(project, [*good, bad])
    assert result.stored == 1
    assert len(result.rejected) == 1 and "span2" in result.rejected[0]
    assert len(recorded()) == 1


@pytest.mark.django_db
def test_requests_without_messages_or_with_a_bad_key_are_refused(project):
    result = record_requests(project, [captured(1, []), captured(2, [user("hi")], key="bad key/")])
    assert result.stored == 0 and len(result.rejected) == 2
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_sessions_are_kept_apart(project):
    record_requests(project, [captured(1, [user("a")], key="one"), captured(2, [user("b")], key="two")])
    assert raw_log("one") == [("user", "a")] and raw_log("two") == [("user", "b")]


@pytest.mark.django_db
def test_messages_keep_the_time_of_their_request_and_the_bytes_sent(project):
    sent = [{"content": "hi", "role": "user", "name": "ada"}]  # keys in an order jsonb would change
    answer = {"role": "assistant", "content": "hello"}
    request = captured(1, sent, answer, ended_at=T0 + timedelta(seconds=3))
    record_requests(project, [request])
    first, second = Message.objects.filter(session__key="conv").order_by("seq")
    assert first.created_at == T0 + timedelta(seconds=1)
    assert second.created_at == T0 + timedelta(seconds=3)
    stored = RecordedRequest.objects.get()
    assert json.dumps(stored.messages) == json.dumps(sent)
    assert stored.response == [answer]


@pytest.mark.django_db
def test_messages_sent_again_are_not_counted_again(project, monkeypatch):
    """A request carries the conversation so far: the messages the raw log already holds take their stored
    token counts; only the new turn, the system prompt and the response are counted. The counts are the
    same as counting everything again."""
    import sessions.wire.validation as validation

    record_requests(project, conversation(2), "app")
    counted = []
    real = validation.count_message

    def counting(role, content=None, *args, **kwargs):
        counted.append(content)
        return real(role, content, *args, **kwargs)

    monkeypatch.setattr(validation, "count_message", counting)
    third = captured(3, [SYSTEM, user("question 1"), assistant("answer 1"), user("question 2"), assistant("answer 2"),
                         user("question 3")], assistant("answer 3"))
    record_requests(project, [third], "app")

    assert sorted(counted) == sorted([SYSTEM["content"], "question 3", "answer 3"])
    stored = recorded()[2]
    expected = [real(m["role"], m["content"]).total for m in third.messages]
    assert stored.message_tokens == expected and stored.tokens == sum(expected) + 3


@pytest.mark.django_db
def test_the_next_request_of_a_conversation_is_recorded_in_few_statements(project):
    """The usual capture, a conversation's next request with its new turn and response, reads the session
    once (locked), its latest request once, and appends the turn and the response together, with no
    savepoint inside the conversation's transaction (on PostgreSQL every statement is a round trip)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    record_requests(project, conversation(2), "app")
    third = captured(3, [SYSTEM, user("question 1"), assistant("answer 1"), user("question 2"), assistant("answer 2"),
                         user("question 3")], assistant("answer 3"))
    with CaptureQueriesContext(connection) as queries:
        record_requests(project, [third], "app")

    statements = [q["sql"] for q in queries.captured_queries]
    # The conversation's transaction is a savepoint here only because the test runs inside a transaction.
    assert len([s for s in statements if "SAVEPOINT" in s]) == 2
    assert sum(1 for s in statements if "FOR UPDATE" in s or s.startswith('SELECT "id", "project_id", "key"')) == 1
    assert sum(1 for s in statements if 'INSERT INTO "ctx_sessions_event"' in s) == 1, "one append"
    assert len(statements) <= 13, "\n".join(statements)
    assert raw_log()[-2:] == [("user", "question 3"), ("assistant", "answer 3")]
    assert recorded()[2].message_seqs == [None, 1, 2, 3, 4, 5] and recorded()[2].response_seqs == [6]


@pytest.mark.django_db
def test_requests_are_inserted_as_rows_not_as_arrays_of_their_messages(project):
    """Django's bulk_create on PostgreSQL would send each column of several requests as one array (UNNEST),
    which psycopg's client-side binding quotes element by element in Python: a request's messages, a long
    text, cost milliseconds each. JSONTextField's placeholder keeps the insert a plain multi-row VALUES."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "postgresql":
        pytest.skip("UNNEST inserts are PostgreSQL's")
    with CaptureQueriesContext(connection) as queries:
        record_requests(project, conversation(2), "app")

    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('INSERT INTO "ctx_sessions_recordedrequest"')]
    assert len(inserts) == 1 and "UNNEST" not in inserts[0]
    assert [r.number for r in recorded()] == [1, 2] and recorded()[1].messages == conversation(2)[1].messages
