"""GET /api/v1/sessions/{key}/events?type=: the session's events in order, filtered by
exact type or by a prefix such as COMPACTION_."""

import pytest
from django.test import Client

from sessions.models import Event, EventType
from tests.api.conftest import API, HOST, assert_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(api):
    """'chat' with one event of most kinds: created, appended, updated, a message hidden, a skipped and a
    completed compaction, a request built."""
    api.put("/sessions/chat", {"title": "Weather", "compaction": {"auto": False}})
    api.post("/sessions/chat/messages", {"messages": [
        {"role": "user", "content": "What is the weather in Lisbon?"},
        {"role": "assistant", "content": "It is 24°C and sunny in Lisbon, with a light wind from the north-west."},
        {"role": "user", "content": "And Porto?"}]})
    api.put("/sessions/chat", {"title": "Weather in Portugal"})
    api.patch("/sessions/chat/messages/2", {"attributes": {"checked": True}})
    api.post("/sessions/chat/compact", {})
    api.post("/sessions/chat/compact", {"force": True, "keep_recent_tokens": 1, "summary": "Lisbon: sunny."})
    api.post("/sessions/chat/requests", {})
    return "chat"


def types(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [e["type"] for e in response.json()["items"]]


def test_it_lists_every_event_in_order(api, history):
    response = api.get("/sessions/chat/events")

    assert types(response) == [
        "SESSION_CREATED", "MESSAGES_APPENDED", "SESSION_UPDATED", "MESSAGE_UPDATED",
        "COMPACTION_STARTED", "COMPACTION_SKIPPED", "COMPACTION_STARTED", "COMPACTION_COMPLETED", "REQUEST_BUILT",
    ]
    items = response.json()["items"]
    assert [e["id"] for e in items] == sorted(e["id"] for e in items)
    assert all(e["actor"] == "api:test-app" for e in items)
    assert all(set(e) == {"id", "type", "actor", "data", "created_at"} for e in items)
    assert items[1]["data"]["count"] == 3
    assert response.json()["next_after"] is None


def test_each_event_s_data_is_shown_as_it_was_stored(api, history):
    items = api.get("/sessions/chat/events").json()["items"]

    assert [e["data"] for e in items] == [e.data for e in Event.objects.filter(pk__in=[e["id"] for e in items])]
    assert "summary_tokens" not in items[5]["data"]  # a figure without a value is left out, not null
    assert items[7]["data"]["covered_seq_range"] == [1, 2]


def test_the_schema_describes_the_data_of_each_event_type():
    document = Client(HTTP_HOST=HOST).get(f"{API}/openapi.json").json()
    schemas = document["components"]["schemas"]

    item = schemas["EventListOut"]["properties"]["items"]["items"]
    assert item["discriminator"]["propertyName"] == "type"
    assert set(item["discriminator"]["mapping"]) == set(EventType.values)
    assert len(item["oneOf"]) == len(EventType.values)
    for type_, ref in item["discriminator"]["mapping"].items():
        event = schemas[ref.rsplit("/", 1)[1]]
        assert event["properties"]["type"]["const"] == type_
        data = schemas[event["properties"]["data"]["$ref"].rsplit("/", 1)[1]]
        assert data["additionalProperties"] is False
    assert schemas["CompactionOut"]["properties"]["events"]["items"] == item


def test_it_filters_by_exact_type(api, history):
    response = api.get("/sessions/chat/events", query={"type": "COMPACTION_STARTED"})

    assert types(response) == ["COMPACTION_STARTED", "COMPACTION_STARTED"]


def test_it_filters_by_prefix_when_the_type_ends_with_an_underscore(api, history):
    assert types(api.get("/sessions/chat/events", query={"type": "COMPACTION_"})) == [
        "COMPACTION_STARTED", "COMPACTION_SKIPPED", "COMPACTION_STARTED", "COMPACTION_COMPLETED"]
    assert types(api.get("/sessions/chat/events", query={"type": "SESSION_"})) == [
        "SESSION_CREATED", "SESSION_UPDATED"]


def test_a_type_without_the_underscore_is_not_a_prefix(api, history):
    assert types(api.get("/sessions/chat/events", query={"type": "COMPACTION"})) == []
    assert types(api.get("/sessions/chat/events", query={"type": "MESSAGE"})) == []


def test_compaction_events_carry_their_figures(api, history):
    items = api.get("/sessions/chat/events", query={"type": "COMPACTION_"}).json()["items"]

    for event in items:
        assert {"trigger", "max_tokens", "keep_recent_tokens", "tokens_before"} <= set(event["data"])
    assert items[1]["data"]["reason"] == "under_threshold"
    assert {"checkpoint_id", "covered_seq_range", "replaced_tokens", "summary_tokens", "tokens_after",
            "still_over_threshold"} <= set(items[3]["data"])


def test_it_pages_with_after_and_limit(api, history):
    seen, after = [], 0
    while after is not None:
        page = api.get("/sessions/chat/events", query={"after": after, "limit": 4}).json()
        seen += [e["type"] for e in page["items"]]
        after = page["next_after"]

    assert seen == types(api.get("/sessions/chat/events"))


@pytest.mark.parametrize("query", [{"type": "X" * 41}, {"limit": 0}, {"limit": 1001}, {"after": -1}],
                         ids=["type too long", "limit 0", "limit 1001", "negative after"])
def test_it_rejects_bad_query_parameters_with_422(api, history, query):
    assert_error(api.get("/sessions/chat/events", query=query), 422, "invalid_request")


def test_it_rejects_a_type_with_a_nul_character_with_422(api, history):
    """PostgreSQL text cannot hold NUL: the filter was a 500 there (found by the stateful fuzz test)."""
    body = assert_error(api.get("/sessions/chat/events", query={"type": "COMPACTION_\x00"}), 422, "invalid_field")

    assert "NUL" in body["detail"]


def test_it_answers_404_for_an_unknown_session(api, history):
    assert_error(api.get("/sessions/nope/events"), 404, "session_not_found")


def test_another_projects_key_gets_404_and_no_events(other_api, history):
    body = assert_error(other_api.get("/sessions/chat/events"), 404, "session_not_found")

    assert set(body) <= {"detail", "code"}


@pytest.mark.parametrize("key", ["bad%20key", "k" * 201])
def test_it_rejects_an_invalid_session_key_with_422(api, key):
    assert_error(api.get(f"/sessions/{key}/events"), 422, "invalid_session_key")


def test_it_rejects_a_request_without_a_valid_key_with_401(api, history, bad_credentials):
    kwargs, code = bad_credentials

    body = assert_error(api.get("/sessions/chat/events", **kwargs), 401, code)

    assert "items" not in body
