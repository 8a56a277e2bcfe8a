"""POST .../messages and .../requests with `format`: messages in OpenAI Chat Completions or Anthropic
Messages shape, read by the importers' parsers and validated by the one validator."""

import base64

import pytest

from sessions.models import Event, Message, Session
from tests.responses_input import responses_input_problems

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


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "openai-responses"])
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
    pytest.param("anthropic", [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"},
                                     {"type": "text", "text": "and?"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "y"}]}], 2,
        id="anthropic unknown tool id after a message stored as two"),
    pytest.param("openai-responses", [{"role": "user", "content": "ok"}, {"type": "file_search_call", "id": "fs_1"}], 1,
                 id="responses item type"),
    pytest.param("openai-responses", [
        {"role": "user", "content": "ok"},
        {"type": "message", "role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "x"}], 3, id="responses unknown call id"),
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


# What an OpenAI Agents SDK session holds after a run with a reasoning model and a tool.
RESPONSES_ITEMS = [
    {"type": "message", "role": "developer", "content": "You are a weather assistant."},
    {"role": "user", "content": [{"type": "input_text", "text": "Weather here?"},
                                 {"type": "input_image", "image_url": PNG, "detail": "low"}]},
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Call the weather tool."}]},
    {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "get_weather",
     "arguments": '{"city": "Lisbon"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "24°C, sunny"},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "It is 24°C and sunny.", "annotations": []}]},
]


def test_openai_responses_items_are_stored_as_messages(api):
    response = post(api, "agent-run", RESPONSES_ITEMS, format="openai-responses")

    assert response.status_code == 200, response.json()
    log = raw_log("agent-run")
    assert [m.role for m in log] == ["system", "user", "assistant", "tool", "assistant"]
    assert log[1].content == [{"type": "text", "text": "Weather here?"}, {"type": "image", "url": PNG, "detail": "low"}]
    assert log[2].reasoning == "Call the weather tool."
    assert log[2].tool_calls == [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}]
    assert (log[3].tool_call_id, log[3].call_seq, log[3].content) == ("call_1", 3, "24°C, sunny")
    assert log[4].content == [{"type": "text", "text": "It is 24°C and sunny."}]
    assert log[4].attributes == {"id": "msg_1", "status": "completed"}
    assert Session.objects.get(key="agent-run").instructions == "You are a weather assistant."
    # Each stored message is reported against the item it came from (the reasoning went with the call).
    assert [m["index"] for m in response.json()["messages"]] == [0, 1, 3, 4, 5]

    fetched = api.get("/sessions/agent-run/model-input", query={"format": "openai-responses"}).json()
    assert fetched["format"] == "openai-responses"
    assert responses_input_problems(fetched["messages"]) == []
    assert fetched["messages"] == [
        {"type": "message", "role": "developer", "content": "You are a weather assistant."},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Weather here?"},
            {"type": "input_image", "image_url": PNG, "detail": "low"}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "24°C, sunny"},
        {"type": "message", "role": "assistant", "content": "It is 24°C and sunny."},
    ]


def test_a_request_build_takes_and_returns_openai_responses_items(api, project):
    post(api, "agent-chat", RESPONSES_ITEMS, format="openai-responses")

    response = api.post("/sessions/agent-chat/requests", {
        "format": "openai-responses", "message_format": "openai-responses",
        "messages": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"}]}],
    })

    assert response.status_code == 200, response.json()
    items = response.json()["model_input"]["messages"]
    assert items[-1] == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"}]}
    assert responses_input_problems(items) == []
    built = Event.objects.filter(session__key="agent-chat", type="REQUEST_BUILT").get()
    assert built.data["format"] == "openai-responses"
