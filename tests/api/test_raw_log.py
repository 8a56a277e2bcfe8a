"""GET /api/v1/sessions/{key}/messages?after=&limit=: the raw log, in seq order, paginated."""

import pytest

from sessions.db import message_sizes
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db

FIELDS = {"seq", "id", "role", "content", "reasoning", "tool_calls", "tool_call_id", "name", "is_error", "attributes",
          "include_in_messages", "created_at", "tokens", "reasoning_tokens", "explain"}


def test_it_returns_every_stored_message_with_its_fields_in_seq_order(api, conversation):
    api.patch("/sessions/chat/messages/4", {"include_in_messages": False, "attributes": {"note": "wrong"}})

    response = api.get("/sessions/chat/messages")

    assert response.status_code == 200
    items = response.json()["items"]
    assert response.json()["next_after"] is None
    assert [m["seq"] for m in items] == [1, 2, 3, 4, 5]
    assert all(set(m) == FIELDS for m in items)
    assert [m["id"] for m in items] == ["m1", "m2", "m3", "m4", "m5"]
    assert [m["role"] for m in items] == ["user", "assistant", "tool", "assistant", "user"]
    assert items[0]["content"] == "What is the weather in Lisbon?"
    assert items[1]["tool_calls"] == [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}]
    assert items[2]["tool_call_id"] == "call_1"
    assert items[3]["include_in_messages"] is False, "a hidden message stays in the raw log"
    assert items[3]["attributes"] == {"note": "wrong"}
    assert all(m["tokens"] > 0 for m in items)
    assert [m["explain"]["code"] for m in items] == ["in_input", "in_input", "in_input", "excluded_flag", "in_input"]
    assert items[3]["explain"]["sentence"].startswith("Hidden: include_in_messages is false.")


def test_it_pages_with_after_and_limit_without_gaps_or_repeats(api, append):
    append("long", [{"role": "user", "content": f"message {n}"} for n in range(1, 12)])

    seqs, after = [], 0
    while after is not None:
        page = api.get("/sessions/long/messages", query={"after": after, "limit": 4}).json()
        seqs += [m["seq"] for m in page["items"]]
        after = page["next_after"]

    assert seqs == list(range(1, 12))


def test_a_page_of_big_messages_stops_at_the_size_bound_and_says_where_to_go_on(api, append, monkeypatch):
    monkeypatch.setattr(message_sizes, "PAGE_CHARS", 250_000)
    append("big", [{"role": "user", "content": f"{n} " + "word " * 10_000} for n in range(1, 8)])

    first = api.get("/sessions/big/messages", query={"limit": 500}).json()
    pages, after = [], 0
    while after is not None:
        page = api.get("/sessions/big/messages", query={"after": after, "limit": 500}).json()
        pages.append([m["seq"] for m in page["items"]])
        after = page["next_after"]

    # Each message holds about 100,000 characters (its content and its text): two a page.
    assert [m["seq"] for m in first["items"]] == [1, 2] and first["next_after"] == 2
    assert pages == [[1, 2], [3, 4], [5, 6], [7]]


def test_a_single_message_bigger_than_the_bound_is_a_page_of_its_own(api, append, monkeypatch):
    monkeypatch.setattr(message_sizes, "PAGE_CHARS", 1_000)
    append("big", [{"role": "user", "content": "word " * 1_000}, {"role": "user", "content": "short"}])

    page = api.get("/sessions/big/messages").json()

    assert [m["seq"] for m in page["items"]] == [1] and page["next_after"] == 1
    assert page["items"][0]["content"] == "word " * 1_000


def test_a_page_that_ends_at_the_last_message_has_no_next_page(api, append):
    append("eight", [{"role": "user", "content": str(n)} for n in range(8)])

    page = api.get("/sessions/eight/messages", query={"after": 4, "limit": 4}).json()

    assert [m["seq"] for m in page["items"]] == [5, 6, 7, 8]
    assert page["next_after"] is None


def test_after_the_last_message_the_page_is_empty(api, conversation):
    page = api.get("/sessions/chat/messages", query={"after": 5}).json()

    assert page == {"items": [], "next_after": None}


def test_it_returns_images_and_reasoning_as_stored(api, append):
    append("pics", [
        {"role": "user", "content": [{"type": "text", "text": "Look"},
                                     {"type": "image", "url": "https://example.com/a.png", "width": 10, "height": 10}]},
        {"role": "assistant", "content": "A dot.", "reasoning": "It is tiny."},
    ])

    items = api.get("/sessions/pics/messages").json()["items"]

    assert items[0]["content"][1] == {"type": "image", "url": "https://example.com/a.png", "width": 10, "height": 10}
    assert items[1]["reasoning"] == "It is tiny."
    assert items[1]["reasoning_tokens"] > 0


@pytest.mark.parametrize("query", [{"after": -1}, {"limit": 0}, {"limit": 501}, {"after": "x"}],
                         ids=["negative after", "limit 0", "limit 501", "after not a number"])
def test_it_rejects_bad_paging_parameters_with_422(api, conversation, query):
    assert_error(api.get("/sessions/chat/messages", query=query), 422, "invalid_request")


def test_it_answers_404_for_an_unknown_session(api, conversation):
    assert_error(api.get("/sessions/nothing-here/messages"), 404, "session_not_found")


def test_another_projects_key_gets_404_and_no_messages(other_api, conversation):
    body = assert_error(other_api.get("/sessions/chat/messages"), 404, "session_not_found")

    assert set(body) <= {"detail", "code"}


@pytest.mark.parametrize("key", ["bad%20key", "k" * 201])
def test_it_rejects_an_invalid_session_key_with_422(api, key):
    assert_error(api.get(f"/sessions/{key}/messages"), 422, "invalid_session_key")


def test_it_rejects_a_request_without_a_valid_key_with_401(api, conversation, bad_credentials):
    kwargs, code = bad_credentials

    body = assert_error(api.get("/sessions/chat/messages", **kwargs), 401, code)

    assert "items" not in body
