"""POST /api/v1/tokens: count an OpenAI-format message list, total and per message."""

import pytest

from tests.api.conftest import assert_error, stored, too_big_text
from tests.counting import REPLY_PRIMING, message_tokens

pytestmark = pytest.mark.django_db


def count(api, messages, **kwargs):
    return api.post("/tokens", {"messages": messages}, **kwargs)


def test_it_counts_each_message_and_the_total_the_way_openai_documents(api):
    messages = [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What is the weather in Lisbon?", "name": "maria"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Lisbon"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "24°C, sunny"},
    ]

    response = count(api, messages)

    assert response.status_code == 200
    expected = [
        message_tokens("system", "You are a weather assistant."),
        message_tokens("user", "What is the weather in Lisbon?", name="maria"),
        message_tokens("assistant", tool_calls=[{"name": "get_weather", "arguments": '{"city":"Lisbon"}'}]),
        message_tokens("tool", "24°C, sunny"),
    ]
    assert response.json() == {"total": REPLY_PRIMING + sum(expected), "messages": expected}


def test_it_counts_text_parts_and_images(api):
    response = count(api, [{"role": "user", "content": [
        {"type": "text", "text": "Look at these."},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "image", "url": "https://example.com/b.png", "width": 512, "height": 512},
    ]}])

    # An image of unknown size is 765 tokens; a 512x512 image is one tile: 85 + 170.
    assert response.json()["messages"] == [message_tokens("user", "Look at these.") + 765 + 255]


def test_developer_is_counted_as_system_and_agent_as_user(api):
    response = count(api, [{"role": "developer", "content": "Be brief."}, {"role": "agent", "content": "Go on."}])

    assert response.json()["messages"] == [message_tokens("system", "Be brief."), message_tokens("user", "Go on.")]


def test_it_agrees_with_the_tokens_of_a_stored_message(api):
    message = {"role": "user", "content": "How many tokens is this sentence, exactly?"}
    stored_tokens = api.post("/sessions/count/messages", {"messages": [message]}).json()["messages"][0]["tokens"]

    assert count(api, [message]).json()["messages"] == [stored_tokens]


def test_it_stores_nothing(api):
    before = stored()

    count(api, [{"role": "user", "content": "hello"}])

    assert stored() == before


@pytest.mark.parametrize("body", [
    pytest.param({"messages": []}, id="empty list"),
    pytest.param({}, id="no messages"),
    pytest.param({"messages": "hello"}, id="messages not a list"),
    pytest.param({"messages": ["hello"]}, id="message not an object"),
])
def test_it_rejects_a_malformed_body_with_422_invalid_request(api, body):
    assert_error(api.post("/tokens", body), 422, "invalid_request")


@pytest.mark.parametrize("message", [
    pytest.param({"role": "wizard", "content": "x"}, id="unknown role"),
    pytest.param({"content": "x"}, id="no role"),
    pytest.param({"role": "user", "content": 12}, id="content a number"),
    pytest.param({"role": "user", "content": [{"type": "audio"}]}, id="unknown part"),
    pytest.param({"role": "user", "content": "x", "name": ["n"]}, id="name not a string"),
    pytest.param({"role": "assistant", "content": "x", "tool_calls": {"id": "c"}}, id="tool_calls not a list"),
    pytest.param({"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "function": "f"}]},
                 id="function not an object"),
])
def test_it_rejects_a_message_it_cannot_count_with_422(api, message):
    assert_error(count(api, [{"role": "user", "content": "fine"}, message]), 422)


def test_it_rejects_a_body_that_is_not_json_with_400(api):
    assert_error(api.post("/tokens", data="[{role: user}]"), 400, "invalid_json")


def test_it_rejects_an_oversized_body_with_413(api, small_request_limit):
    assert_error(count(api, [{"role": "user", "content": too_big_text(small_request_limit)}]), 413,
                 "request_too_large")


def test_it_rejects_a_request_without_a_valid_key_with_401(api, bad_credentials):
    kwargs, code = bad_credentials

    body = assert_error(count(api, [{"role": "user", "content": "hello"}], **kwargs), 401, code)

    assert "total" not in body


def test_another_projects_key_counts_the_same(api, other_api):
    messages = [{"role": "user", "content": "Same words, same count."}]

    assert other_api.post("/tokens", {"messages": messages}).json() == api.post("/tokens", {"messages": messages}).json()


def test_the_text_of_one_count_is_limited_in_total_before_anything_is_tokenized(api, settings, monkeypatch):
    settings.CTXWEB_MAX_TOKEN_COUNT_CHARS = 100
    tokenized = []
    monkeypatch.setattr("sessions.wire.validation.count_message", lambda *args: tokenized.append(args))
    messages = [{"role": "user", "content": "x" * 40}, {"role": "assistant", "content": [
        {"type": "text", "text": "y" * 40}]}, {"role": "user", "content": "z" * 30}]

    body = assert_error(count(api, messages), 413, "too_much_text")

    # Every string counts, keys too (tool call arguments given as objects are tokenized with theirs):
    # 4 + 4 + 7 + 40, then 4 + 9 + 7 + 4 + 4 + 4 + 40, then 4 + 4 + 7 + 30.
    assert "172 characters" in body["detail"] and "at most 100" in body["detail"]
    assert "CTXWEB_MAX_TOKEN_COUNT_CHARS" in body["detail"]
    assert tokenized == []


def test_text_up_to_the_limit_is_counted(api, settings):
    settings.CTXWEB_MAX_TOKEN_COUNT_CHARS = 100
    # 4 + 4 + 7 + 40, then 4 + 9 + 7 + 20: 95.
    messages = [{"role": "user", "content": "x" * 40}, {"role": "assistant", "content": "y" * 20}]

    assert count(api, messages).status_code == 200


def test_by_default_ten_long_strings_are_refused_together(api, settings):
    """The issue's request: ten texts each within CTXWEB_MAX_TEXT_CHARS cost seconds of CPU together."""
    settings.CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE = 0
    messages = [{"role": "user", "content": "x" * 200_000} for _ in range(10)]

    assert_error(count(api, messages), 413, "too_much_text")
