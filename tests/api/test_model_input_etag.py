"""Conditional reads of the model input: GET /sessions/{key}/model-input answers with an ETag of the
session's state; If-None-Match with that tag is answered 304 with no body, without building the input.
Every change to what the input holds gives a new tag."""

import pytest

from sessions.http import model_input as sessions_api
from tests.api.conftest import assert_error
from tests.api.test_query_counts import AUTH  # the key with the recent failed keys, the rate-limit UPDATE

pytestmark = pytest.mark.django_db

TURN = [
    {"id": "q1", "role": "user", "content": "What is the weather in Lisbon?"},
    {"id": "c1", "role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}]},
    {"id": "r1", "role": "tool", "tool_call_id": "call_1", "content": "24°C, sunny"},
    {"id": "a1", "role": "assistant", "content": "It is 24°C and sunny in Lisbon."},
]


@pytest.fixture
def chat(api):
    api.put("/sessions/chat", {"instructions": "Be brief.", "compaction": {"auto": False}})
    assert api.post("/sessions/chat/messages", {"messages": TURN}).status_code == 200
    return "chat"


def fetch(api, key="chat", tag=None, **query):
    headers = {} if tag is None else {"HTTP_IF_NONE_MATCH": tag}
    return api.client.get(f"/api/v1/sessions/{key}/model-input", query,
                          HTTP_AUTHORIZATION=f"Bearer {api.secret}", **headers)


def tag_of(api, key="chat", **query) -> str:
    response = fetch(api, key, **query)
    assert response.status_code == 200, response.content[:300]
    return response["ETag"]


def test_the_model_input_carries_an_etag_to_revalidate_each_time(api, chat):
    response = fetch(api)

    assert response.status_code == 200
    assert response["ETag"].startswith('"') and response["ETag"].endswith('"') and len(response["ETag"]) > 20
    assert response["Cache-Control"] == "private, no-cache"
    assert "Authorization" in response["Vary"]
    assert fetch(api)["ETag"] == response["ETag"], "the same state gives the same tag"


def test_a_matching_tag_is_answered_304_without_building_the_input(api, chat, monkeypatch,
                                                                   django_assert_num_queries):
    tag = tag_of(api, format="openai")
    fetch(api)  # warm

    def must_not_build(*args, **kwargs):
        raise AssertionError("the model input was built for a 304")

    monkeypatch.setattr(sessions_api, "build_model_input", must_not_build)
    with django_assert_num_queries(AUTH + 1):  # and the session row
        response = fetch(api, tag=tag, format="openai")

    assert response.status_code == 304
    assert response.content == b""
    assert response["ETag"] == tag


@pytest.mark.parametrize("header", ['W/{tag}', '"other", {tag}', "*"])
def test_a_weak_tag_a_list_of_tags_and_a_star_match(api, chat, header):
    tag = tag_of(api)

    assert fetch(api, tag=header.format(tag=tag)).status_code == 304


def test_a_tag_that_does_not_match_gets_the_whole_input(api, chat):
    response = fetch(api, tag='"not-the-tag"')

    assert response.status_code == 200
    assert response.json()["messages"]


def test_a_tag_from_another_session_in_the_same_state_does_not_match(api, chat):
    api.put("/sessions/twin", {"instructions": "Be brief.", "compaction": {"auto": False}})
    api.post("/sessions/twin/messages", {"messages": TURN})

    assert fetch(api, "twin", tag=tag_of(api)).status_code == 200


@pytest.mark.parametrize("query, other", [
    ({"format": "openai"}, {"format": "anthropic"}),
    ({"format": "ctxweb"}, {"format": "openai-responses"}),
    ({}, {"as_of": 2}),
    ({"as_of": 2}, {"as_of": 3}),
])
def test_each_format_and_as_of_has_its_own_tag(api, chat, query, other):
    tag = tag_of(api, **query)

    assert tag_of(api, **other) != tag
    assert fetch(api, tag=tag, **other).status_code == 200


# --- every change to what the input holds moves the tag --------------------------------------------


def changes_the_tag(api, change, **query) -> None:
    before = fetch(api, **query)
    change()
    after = fetch(api, tag=before["ETag"], **query)
    assert after.status_code == 200, "a stale tag must not be answered 304"
    assert after["ETag"] != before["ETag"]


def test_an_append_changes_the_tag(api, chat):
    changes_the_tag(api, lambda: api.post("/sessions/chat/messages",
                                          {"messages": [{"role": "user", "content": "And tomorrow?"}]}))


def test_excluding_a_message_changes_the_tag(api, chat):
    changes_the_tag(api, lambda: api.patch("/sessions/chat/messages/4", {"include_in_messages": False}))


def test_including_it_again_changes_the_tag_again(api, chat):
    first = tag_of(api)
    api.patch("/sessions/chat/messages/4", {"include_in_messages": False})
    api.patch("/sessions/chat/messages/4", {"include_in_messages": True})

    assert fetch(api, tag=first).status_code == 200, "back to the same input, but not to a tag given out before"


def test_excluding_a_message_changes_the_tag_of_an_earlier_view_too(api, chat):
    changes_the_tag(api, lambda: api.patch("/sessions/chat/messages/1", {"include_in_messages": False}), as_of=2)


def test_new_instructions_change_the_tag(api, chat):
    changes_the_tag(api, lambda: api.put("/sessions/chat", {"instructions": "Be thorough."}))


def test_instructions_of_the_same_size_change_the_tag(api, chat):
    changes_the_tag(api, lambda: api.put("/sessions/chat", {"instructions": "Be terse."}))


def test_new_compaction_settings_change_the_tag(api, chat):
    changes_the_tag(api, lambda: api.put("/sessions/chat", {"compaction": {"max_tokens": 50_000}}))


def compact(api):
    response = api.post("/sessions/chat/compact", {"force": True, "keep_recent_tokens": 1, "summary": "Weather."})
    assert response.json()["status"] == "completed", response.content[:300]


def test_a_new_checkpoint_changes_the_tag(api, chat):
    api.post("/sessions/chat/messages", {"messages": [{"role": "user", "content": "And in Porto?"}]})

    changes_the_tag(api, lambda: compact(api))


def test_a_new_checkpoint_changes_the_tag_of_the_view_as_of_now(api, chat):
    api.post("/sessions/chat/messages", {"messages": [{"role": "user", "content": "And in Porto?"}]})

    changes_the_tag(api, lambda: compact(api), as_of=5)


def test_a_write_that_changes_nothing_keeps_the_tag(api, chat):
    tag = tag_of(api)
    api.post("/sessions/chat/messages", {"messages": TURN})  # every message a duplicate
    api.put("/sessions/chat", {"instructions": "Be brief."})

    assert fetch(api, tag=tag).status_code == 304


# --- errors come before the tag ---------------------------------------------------------------------


def test_an_unknown_session_is_404_whatever_the_tag(api, chat):
    assert_error(fetch(api, "nope", tag="*"), 404, "session_not_found")


def test_an_as_of_past_the_log_is_refused_whatever_the_tag(api, chat):
    assert_error(fetch(api, tag="*", as_of=99), 422, "invalid_as_of")


def test_another_projects_key_gets_no_304(other_api, api, chat):
    assert_error(fetch(other_api, tag=tag_of(api)), 404, "session_not_found")
