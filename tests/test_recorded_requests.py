"""Sessions rebuilt from recorded requests (sessions.recorded_requests): matching, appending, what the
application dropped or replaced, numbering by start time, and retries storing nothing twice."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from sessions.models import Message, RecordedRequest, Session
from sessions.recorded_requests import CapturedRequest, record_requests

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
def test_a_request_replacing_everything_appends_only_its_new_turn(project):
    requests = conversation(1)
    requests.append(captured(2, [SYSTEM, user("Summary: one question was answered."), user("question 2")]))
    record_requests(project, requests)
    second = recorded()[1]
    assert second.unmatched == [1]
    assert second.dropped_seqs == [1, 2]
    assert raw_log()[-1] == ("user", "question 2")


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
