"""GET /api/v1/sessions/{key}/checkpoints: the session's checkpoints, newest first."""

import json

import pytest

from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db

FIELDS = {"id", "number", "previous_id", "first_seq", "last_seq", "created_at_seq", "summary", "summary_tokens",
          "replaced_tokens", "tokens_before", "tokens_after", "summarizer", "trigger", "created_at", "facts", "lost"}


@pytest.fixture
def two_checkpoints(api, conversation):
    """'chat' compacted twice: messages 1-4, then 5-6."""
    first = api.post("/sessions/chat/compact", {"force": True, "keep_recent_tokens": 1,
                                                 "summary": "Lisbon: sunny."}).json()["checkpoint"]
    api.post("/sessions/chat/messages", {"messages": [
        {"role": "assistant", "content": "Porto is cloudy, 19°C, with a chance of rain later in the evening."},
        {"role": "user", "content": "And Faro?"}]})
    second = api.post("/sessions/chat/compact", {"force": True, "keep_recent_tokens": 1,
                                                  "summary": "Lisbon sunny, Porto cloudy."}).json()["checkpoint"]
    return first, second


def test_it_lists_checkpoints_newest_first_with_their_figures(api, two_checkpoints):
    first, second = two_checkpoints

    response = api.get("/sessions/chat/checkpoints")

    assert response.status_code == 200
    items = response.json()["items"]
    assert [c["id"] for c in items] == [second["id"], first["id"]]
    assert all(set(c) == FIELDS for c in items)
    assert items == [second, first]
    assert (items[1]["first_seq"], items[1]["last_seq"], items[1]["previous_id"]) == (1, 4, None)
    assert (items[0]["first_seq"], items[0]["last_seq"], items[0]["previous_id"]) == (5, 6, first["id"])
    assert items[0]["summary"] == "Lisbon sunny, Porto cloudy."
    assert items[0]["summarizer"] == "supplied"
    assert items[0]["trigger"] == "request"
    assert items[0]["tokens_after"] < items[0]["tokens_before"]


def test_a_session_without_checkpoints_has_an_empty_list(api, conversation):
    assert api.get("/sessions/chat/checkpoints").json() == {"items": []}


def test_it_answers_404_for_an_unknown_session(api, conversation):
    assert_error(api.get("/sessions/nope/checkpoints"), 404, "session_not_found")


def test_another_projects_key_gets_404_and_no_summaries(other_api, two_checkpoints):
    body = assert_error(other_api.get("/sessions/chat/checkpoints"), 404, "session_not_found")

    assert set(body) <= {"detail", "code"}
    assert "Lisbon" not in str(body)


@pytest.mark.parametrize("key", ["bad%20key", "k" * 201])
def test_it_rejects_an_invalid_session_key_with_422(api, key):
    assert_error(api.get(f"/sessions/{key}/checkpoints"), 422, "invalid_session_key")


def test_it_rejects_a_request_without_a_valid_key_with_401(api, two_checkpoints, bad_credentials):
    kwargs, code = bad_credentials

    body = assert_error(api.get("/sessions/chat/checkpoints", **kwargs), 401, code)

    assert "items" not in body


def test_checkpoints_are_numbered_within_their_session(api, two_checkpoints):
    """`number` counts 1, 2, 3 within the session in creation order (what the dashboard shows); `id` stays
    the global key the URLs use. Another session's first checkpoint is number 1 again."""
    first, second = two_checkpoints
    assert (first["number"], second["number"]) == (1, 2)
    assert second["id"] > first["id"]
    api.post("/sessions/other/messages", {"messages": [
        {"role": "user", "content": "What is the weather in Faro this week, day by day?"},
        {"role": "assistant", "content": "Faro: sunny all week, 24-27°C, light wind from the west."},
        {"role": "user", "content": "And in Lagos?"}]})
    other = api.post("/sessions/other/compact", {"force": True, "keep_recent_tokens": 1,
                                                  "summary": "Faro: sunny."})
    assert other.status_code == 200, other.content
    made = other.json()["checkpoint"]
    assert made["number"] == 1 and made["id"] > second["id"]
    items = api.get("/sessions/chat/checkpoints").json()["items"]
    assert [c["number"] for c in items] == [2, 1]
    assert [c["number"] for c in api.get("/sessions/other/checkpoints").json()["items"]] == [1]


def test_the_export_and_the_trace_give_the_number(api, two_checkpoints):
    exported = api.get("/sessions/chat/export")
    assert exported.status_code == 200
    assert [c["number"] for c in json.loads(b"".join(exported.streaming_content))["checkpoints"]] == [1, 2]
    trace = api.get("/sessions/chat/trace?q=Lisbon")
    assert trace.status_code == 200, trace.content
    numbers = {c["number"] for row in trace.json()["messages"] for c in row["checkpoints"]}
    assert numbers and numbers <= {1, 2}
