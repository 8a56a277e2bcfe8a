"""POST .../messages and .../requests with `format`: messages in OpenAI Chat Completions or Anthropic
Messages shape, read by the importers' parsers and validated by the one validator."""

import base64

import pytest

from sessions.models import Message, Session

from .conftest import assert_error, session_state, stored

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


def post(api, key, messages, **body):
    return api.post(f"/sessions/{key}/messages", {"messages": messages, **body})


def raw_log(key) -> list[Message]:
    return list(Message.objects.filter(session__key=key).order_by("seq"))


def test_an_openai_image_url_part_is_stored_in_the_default_format(api):
    message = {"role": "user", "content": [
        {"type": "text", "text": "What is on this picture?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}}]}

    response = post(api, "pictures", [message])

    assert response.status_code == 200, response.json()
    assert raw_log("pictures")[0].content == [
        {"type": "text", "text": "What is on this picture?"},
        {"type": "image", "url": "https://example.com/cat.png", "detail": "low"}]


def test_openai_messages_are_stored_as_sent_to_openai(api):
    messages = [
        {"role": "developer", "content": "You are a weather assistant."},
        {"role": "user", "name": "maria", "content": [
            {"type": "text", "text": "Weather here?"}, {"type": "image_url", "image_url": {"url": PNG}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "24°C, sunny"},
        {"role": "assistant", "content": "It is 24°C and sunny."},
    ]

    response = post(api, "weather", messages, format="openai")

    assert response.status_code == 200, response.json()
    log = raw_log("weather")
    assert [m.role for m in log] == ["system", "user", "assistant", "tool", "assistant"]
    assert log[1].name == "maria"
    assert log[1].content[1] == {"type": "image", "url": PNG}
    assert log[2].tool_calls == [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}]
    assert (log[3].tool_call_id, log[3].call_seq) == ("call_1", 3)
    # The system (developer) message is the session's instructions from now on.
    assert Session.objects.get(key="weather").instructions == "You are a weather assistant."
    sent = api.get("/sessions/weather/model-input", query={"format": "openai"}).json()["messages"]
    assert sent[0] == {"role": "system", "content": "You are a weather assistant."}
    assert sent[2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}


def test_anthropic_messages_are_stored_with_their_system_prompt(api):
    messages = [
        {"role": "user", "content": [
            {"type": "text", "text": "Look up order W9609649."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG.split(",", 1)[1]}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should call the tool.", "signature": "sig"},
            {"type": "tool_use", "id": "toolu_1", "name": "find_order", "input": {"order": "W9609649"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True, "content": "not found"},
            {"type": "text", "text": "Try again?"}]},
    ]

    response = post(api, "orders", messages, format="anthropic", system="You are a support agent.")

    assert response.status_code == 200, response.json()
    log = raw_log("orders")
    assert [m.role for m in log] == ["user", "assistant", "tool", "user"]
    assert log[0].content[1] == {"type": "image", "url": PNG, "media_type": "image/png"}
    assert log[1].reasoning == "I should call the tool."
    assert log[1].tool_calls == [{"id": "toolu_1", "name": "find_order", "arguments": '{"order": "W9609649"}'}]
    assert (log[2].tool_call_id, log[2].content) == ("toolu_1", "not found")
    assert log[3].content == "Try again?"
    assert Session.objects.get(key="orders").instructions == "You are a support agent."
    # Each stored message is reported against the message the client sent.
    assert [m["index"] for m in response.json()["messages"]] == [0, 1, 2, 2]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_model_input_fetched_in_a_format_appends_back_to_the_same_model_input(api, fmt):
    post(api, "source", [
        {"role": "user", "content": "What is the weather in Lisbon?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "functions.get:0", "name": "get", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "functions.get:0", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "Thanks"},
    ])
    api.put("/sessions/source", {"instructions": "Be brief."})
    api.post("/sessions/source/compact", {"force": True, "keep_recent_tokens": 1, "summary": "Lisbon is sunny."})
    fetched = api.get("/sessions/source/model-input", query={"format": fmt}).json()

    extra = {"system": fetched["system"]} if fmt == "anthropic" else {}
    response = post(api, "copy", fetched["messages"], format=fmt, **extra)

    assert response.status_code == 200, response.json()
    again = api.get("/sessions/copy/model-input", query={"format": fmt}).json()
    assert (again["system"], again["messages"]) == (fetched["system"], fetched["messages"])


@pytest.mark.parametrize(("fmt", "messages", "index"), [
    pytest.param("openai", [{"role": "user", "content": "ok"}, {"role": "user", "content": 5}], 1, id="openai content"),
    pytest.param("openai", [{"role": "tool", "content": "x"}], 0, id="openai tool without id"),
    pytest.param("anthropic", [{"role": "user", "content": "ok"}, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "nope", "content": "x"}, {"type": "text", "text": "y"}]}], 1,
        id="anthropic unknown tool id"),
    pytest.param("anthropic", [{"role": "user", "content": 7}], 0, id="anthropic content a number"),
])
def test_a_bad_provider_message_is_a_422_naming_the_message_sent_and_stores_nothing(api, project, fmt, messages, index):
    before = stored()

    body = assert_error(post(api, "fresh", messages, format=fmt), 422)

    assert body["index"] == index
    assert body["detail"].startswith(f"messages[{index}]")
    assert stored() == before


def test_system_is_refused_outside_the_anthropic_format(api, project):
    before = stored()
    assert_error(post(api, "fresh", [{"role": "user", "content": "x"}], system="x"), 422, "invalid_field")
    assert stored() == before


@pytest.mark.parametrize(("message", "detail"), [
    ({"role": "user", "content": 5}, "messages[0]: content must be a string or a list of parts"),
    ({"role": "user", "content": [{"type": "text", "text": 5}]}, "messages[0]: content[0].text must be a string"),
    ({"role": "user", "content": [{"type": "video"}]}, "messages[0]: content[0] must be a part of type text or image"),
    ({"role": "assistant", "content": "x", "tool_calls": [{"id": "c", "name": "f", "arguments": 7}]},
     "messages[0]: tool_calls[0].arguments must be a string or a JSON object"),
])
def test_errors_name_the_field_in_plain_words(api, message, detail):
    body = assert_error(post(api, "fresh", [message]), 422)
    assert body["detail"] == detail


def test_a_request_build_takes_messages_in_a_provider_format(api, project):
    post(api, "chat", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}])
    before = session_state(project, "chat")

    response = api.post("/sessions/chat/requests", {
        "format": "anthropic", "message_format": "anthropic",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "How are you?"}]}],
    })

    assert response.status_code == 200, response.json()
    assert response.json()["model_input"]["messages"][-1] == {
        "role": "user", "content": [{"type": "text", "text": "How are you?"}]}
    assert session_state(project, "chat") != before
    assert raw_log("chat")[-1].content == "How are you?"
