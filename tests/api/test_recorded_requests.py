"""GET /sessions/{key}/requests and /requests/{n}: a session's recorded requests, one of them in every
model-input format (openai exactly as sent); `source` on sessions; and the explain of every raw message on
GET /sessions/{key}/messages, for sessions rebuilt from requests and all others, in a fixed number of
queries."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.ingest.importers import import_data, import_file, import_path
from sessions.ingest.recorded_requests import CapturedRequest, record_requests
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SYSTEM = {"role": "system", "content": "You are a travel agent."}
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "4 degrees"}


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def captured(n, messages, response=None, key="trip", **extra):
    return CapturedRequest(conversation=key, external_id=f"span{n}", source="otlp",
                           started_at=T0 + timedelta(seconds=n), messages=messages,
                           response=[response] if response else [], **extra)


@pytest.fixture
def trip(project):
    """Four requests: a tool call and its result, then the application trims its history (request 3), then
    replaces what it trimmed with its own summary (request 4)."""
    summary = user("Summary: the user asked about Oslo's weather; it is 4 degrees.")
    requests = [
        captured(1, [SYSTEM, user("weather in Oslo?")], CALL, model="gpt-4o", usage_input_tokens=20,
                 usage_output_tokens=9, parameters={"temperature": 0.2, "model": "gpt-4o"}),
        captured(2, [SYSTEM, user("weather in Oslo?"), CALL, RESULT], assistant("It is 4 degrees."), model="gpt-4o"),
        captured(3, [SYSTEM, RESULT, assistant("It is 4 degrees."), user("and Bergen?")], assistant("Rain."),
                 model="gpt-4o"),
        captured(4, [SYSTEM, summary, assistant("Rain."), user("thanks")], assistant("You're welcome."),
                 model="gpt-4o"),
    ]
    result = record_requests(project, requests)
    assert result.rejected == [] and result.stored == 4
    return requests


def test_the_list_gives_each_request_s_figures_in_order(api, trip):
    body = api.get("/sessions/trip/requests").json()
    assert body["next_after"] is None
    items = body["items"]
    assert [r["number"] for r in items] == [1, 2, 3, 4]
    first = items[0]
    assert set(first) == {"number", "started_at", "ended_at", "source", "model", "provider", "tokens",
                          "usage_input_tokens", "usage_output_tokens", "message_count", "dropped_seqs",
                          "unmatched_count"}
    assert (first["model"], first["source"], first["usage_input_tokens"], first["usage_output_tokens"]) == (
        "gpt-4o", "otlp", 20, 9)
    assert first["tokens"] > 0 and first["started_at"].startswith("2026-11-30T12:00:01")
    assert [r["message_count"] for r in items] == [2, 4, 4, 4]
    assert items[1]["usage_input_tokens"] is None
    assert items[2]["dropped_seqs"] == [1, 2], "request 3 no longer sent the question and the call"
    assert [r["unmatched_count"] for r in items] == [0, 0, 0, 1]


def test_the_list_pages_with_after_and_limit(api, trip):
    numbers, after = [], 0
    while after is not None:
        page = api.get("/sessions/trip/requests", query={"after": after, "limit": 3}).json()
        numbers += [r["number"] for r in page["items"]]
        after = page["next_after"]
    assert numbers == [1, 2, 3, 4]


def test_one_request_in_openai_is_exactly_what_was_sent(api, trip):
    response = api.get("/sessions/trip/requests/2")
    body = response.json()
    assert body["format"] == "openai"
    sent = json.dumps(trip[1].messages)  # as the API writes JSON
    assert sent in response.content.decode(), "byte for byte, key order and all"
    assert body["messages"] == trip[1].messages
    assert body["message_seqs"] == [None, 1, 2, 3]
    assert body["response"] == [assistant("It is 4 degrees.")]
    assert body["response_seqs"] == [4]
    assert body["external_id"] == "span2" and body["unmatched"] == []
    first = api.get("/sessions/trip/requests/1").json()
    assert first["parameters"] == {"temperature": 0.2, "model": "gpt-4o"}


def test_one_request_in_the_other_formats(api, trip):
    anthropic = api.get("/sessions/trip/requests/2", query={"format": "anthropic"}).json()
    assert anthropic["system"] == "You are a travel agent."
    assert [m["role"] for m in anthropic["messages"]] == ["user", "assistant", "user"]
    assert anthropic["messages"][1]["content"][0] == {"type": "tool_use", "id": "call_1", "name": "weather",
                                                      "input": {"city": "Oslo"}}
    assert anthropic["messages"][2]["content"][0]["type"] == "tool_result"

    ctxweb = api.get("/sessions/trip/requests/2", query={"format": "ctxweb"}).json()
    assert [(m["kind"], m.get("seq")) for m in ctxweb["messages"]] == [
        ("instructions", None), ("message", 1), ("message", 2), ("message", 3)]
    assert ctxweb["system"] is None

    responses = api.get("/sessions/trip/requests/2", query={"format": "openai-responses"}).json()
    assert [item["type"] for item in responses["messages"]] == [
        "message", "message", "function_call", "function_call_output"]
    assert responses["messages"][0]["role"] == "developer"


def test_an_application_summary_is_listed_as_unmatched(api, trip):
    body = api.get("/sessions/trip/requests/4", query={"format": "ctxweb"}).json()
    assert body["unmatched"] == [1]
    assert body["message_seqs"][1] is None
    assert body["messages"][1]["content"].startswith("Summary:")
    assert "seq" not in body["messages"][1]


def test_unknown_requests_sessions_and_formats_are_4xx(api, trip, append):
    assert_error(api.get("/sessions/trip/requests/9"), 404, "request_not_found")
    assert_error(api.get("/sessions/nope/requests"), 404)
    assert api.get("/sessions/trip/requests/0").status_code == 422
    assert api.get("/sessions/trip/requests/1", query={"format": "yaml"}).status_code == 422
    append("plain", [user("hi")])
    assert api.get("/sessions/plain/requests").json() == {"items": [], "next_after": None}


def test_another_project_s_key_sees_nothing(other_api, trip):
    assert other_api.get("/sessions/trip/requests").status_code == 404
    assert other_api.get("/sessions/trip/requests/1").status_code == 404


def test_sessions_say_where_they_come_from(api, project, trip, append):
    append("written", [user("hi")])
    assert import_data(project, "chat.json", json.dumps([user("hello"), assistant("hi")]).encode()).error is None
    assert api.get("/sessions/trip").json()["source"] == "requests"
    assert api.get("/sessions/trip").json()["request_count"] == 4
    assert api.get("/sessions/written").json()["source"] == "api"
    assert api.get("/sessions/chat").json()["source"] == "import"
    listed = {s["key"]: s["source"] for s in api.get("/sessions").json()["items"]}
    assert listed == {"trip": "requests", "written": "api", "chat": "import"}


def test_the_raw_log_explains_what_the_application_dropped_and_replaced(api, trip):
    items = api.get("/sessions/trip/messages").json()["items"]
    explain = {m["seq"]: m["explain"] for m in items}
    # 1 question, 2 call: dropped at request 3; 3 result, 4 answer: dropped at request 4 for a summary.
    assert explain[1]["code"] == "dropped_by_application"
    assert (explain[1]["last_sent_request"], explain[1]["first_missing_request"]) == (2, 3)
    assert "Last sent in request 2; request 3 was the first without it" in explain[1]["sentence"]
    assert explain[3]["code"] == "replaced_by_application_summary"
    assert (explain[3]["last_sent_request"], explain[3]["first_missing_request"]) == (3, 4)
    assert explain[3]["replacements"] == [2]
    assert "request 4" in explain[3]["sentence"] and "summary" in explain[3]["sentence"]
    # 6 "Rain.", 7 "thanks": sent by the latest request.
    assert explain[6]["code"] == explain[7]["code"] == "in_input"
    assert (explain[7]["request"], explain[7]["request_position"]) == (4, 4)
    # 5 "and Bergen?" was sent by request 3 only: dropped at request 4, for the summary.
    assert explain[5]["code"] == "replaced_by_application_summary"


def test_the_raw_log_of_other_sessions_carries_their_explain_too(api, append):
    append("plain", [user("hi"), assistant("hello")])
    api.patch("/sessions/plain/messages/1", {"include_in_messages": False})
    items = api.get("/sessions/plain/messages").json()["items"]
    assert [m["explain"]["code"] for m in items] == ["excluded_flag", "in_input"]
    assert items[1]["explain"]["position"] == 1


def test_patch_answers_the_message_with_its_new_explain(api, append):
    append("plain", [user("hi"), assistant("hello")])
    body = api.patch("/sessions/plain/messages/2", {"include_in_messages": False}).json()
    assert body["explain"]["code"] == "excluded_flag"


@pytest.mark.parametrize("kind", ["requests", "plain"])
def test_the_raw_log_s_explain_costs_the_same_queries_for_a_short_and_a_long_page(api, project, append, kind):
    def make(key, turns):
        if kind == "plain":
            append(key, [m for n in range(turns) for m in (user(f"q{n}"), assistant(f"a{n}"))])
            return
        history, requests = [SYSTEM], []
        for n in range(turns):
            history = [*history[-4:], user(f"q{n}")]  # the application keeps its last messages only
            requests.append(captured(n, history, assistant(f"a{n}"), key=key))
            history = [*history, assistant(f"a{n}")]
        record_requests(project, requests)

    make("short", 5)  # the first drop is at the fourth request
    make("long", 40)
    counts = []
    for key in ("short", "long"):
        with CaptureQueriesContext(connection) as queries:
            assert api.get(f"/sessions/{key}/messages").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
    codes = {m["explain"]["code"] for m in api.get("/sessions/long/messages").json()["items"]}
    if kind == "requests":
        assert "dropped_by_application" in codes


def test_the_requests_list_costs_the_same_queries_whatever_its_length(api, project):
    for key, turns in (("short", 2), ("long", 30)):
        history, requests = [], []
        for n in range(turns):
            history = [*history, user(f"q{n}")]
            requests.append(captured(n, list(history), assistant(f"a{n}"), key=key))
            history.append(assistant(f"a{n}"))
        record_requests(project, requests)
    counts = []
    for key in ("short", "long"):
        with CaptureQueriesContext(connection) as queries:
            assert api.get(f"/sessions/{key}/requests").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_a_request_log_imported_end_to_end(api, project):
    """Import a real request log, then read its requests and the explain of its raw log over the API."""
    log = Path(__file__).resolve().parent.parent / "data" / "request-logs" / "interactions_20251103_025309.jsonl"
    assert import_path(project, log).error is None
    key = "interactions_20251103_025309"
    session = api.get(f"/sessions/{key}").json()
    assert (session["source"], session["request_count"]) == ("requests", 8)
    listed = api.get(f"/sessions/{key}/requests").json()["items"]
    assert [r["number"] for r in listed] == list(range(1, 9))
    assert [r["dropped_seqs"] for r in listed][6] == [8, 9]
    assert all(r["source"] == "request_log" for r in listed)
    first_line = json.loads(log.read_text().splitlines()[0])
    assert api.get(f"/sessions/{key}/requests/1").json()["messages"] == first_line["messages"]
    anthropic = api.get(f"/sessions/{key}/requests/8", query={"format": "anthropic"}).json()
    assert anthropic["system"].startswith("You are a helpful assistant")
    explain = {m["seq"]: m["explain"] for m in api.get(f"/sessions/{key}/messages").json()["items"]}
    assert explain[8]["code"] == explain[9]["code"] == "dropped_by_application"
    assert (explain[8]["last_sent_request"], explain[8]["first_missing_request"]) == (6, 7)
    assert explain[13]["code"] == "in_input" and explain[13]["request"] == 8
    model_input = api.get(f"/sessions/{key}/model-input", query={"format": "openai"}).json()
    assert (model_input["basis"], model_input["request"]) == ("recorded_request", 8)
    last_line = json.loads(log.read_text().splitlines()[-2])
    assert model_input["messages"][:12] == last_line["messages"], "request 8, exactly as sent"


def test_the_api_says_the_input_was_derived_from_the_declared_configuration(api, project):
    marshmallow = Path(__file__).resolve().parent.parent / "data" / "transcripts" / "swe-agent" / (
        "marshmallow-1867_window100_last_n_observations.traj")
    import_file(project, marshmallow)
    key = marshmallow.name.removesuffix(".traj")
    body = api.get(f"/sessions/{key}/model-input", query={"format": "ctxweb"}).json()
    assert (body["basis"], body["request"]) == ("recorded_request", 11)
    assert body["derived_from"].startswith("SWE-agent's history processors declared in the trajectory's replay_config")
    edited = [m for m in body["messages"] if m.get("edited_by_application")]
    assert [m["seq"] for m in edited] == [3, 5, 7, 9, 11]
    assert edited[0]["content"] == "Old environment output: (6 lines omitted)"
    # As of message 8 the request in force is the fourth, which elided nothing yet.
    earlier = api.get(f"/sessions/{key}/model-input", query={"format": "ctxweb", "as_of": 8}).json()
    assert earlier["request"] == 4 and not any(m.get("edited_by_application") for m in earlier["messages"])
