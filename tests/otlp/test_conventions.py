"""Spans of LLM calls in both conventions become OpenAI Chat Completions messages (sessions.ingest.otlp)."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions.ingest.otlp import MalformedSpan, captured_request
from tests.otlp.spans import SECOND, T0, TRACE, openinference, span

WEATHER_CALL = {"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
    {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
    {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
    {"role": "user", "content": "thanks", "name": "bob"},
]


def flattened_openinference(messages):
    """What openinference-instrumentation-openai writes for each message (see tests/otlp/test_real_producers)."""
    flat = []
    for message in messages:
        item = {"role": message["role"]}
        if isinstance(message.get("content"), str):
            item["content"] = message["content"]
        for j, part in enumerate(message["content"] if isinstance(message.get("content"), list) else ()):
            key = f"contents.{j}.message_content"
            if part["type"] == "text":
                item |= {f"{key}.type": "text", f"{key}.text": part["text"]}
            else:
                item |= {f"{key}.type": "image", f"{key}.image.image.url": part["image_url"]["url"]}
        for k, call in enumerate(message.get("tool_calls", ())):
            key = f"tool_calls.{k}.tool_call"
            item |= {f"{key}.id": call["id"], f"{key}.function.name": call["function"]["name"],
                     f"{key}.function.arguments": call["function"]["arguments"]}
        for field in ("name", "tool_call_id"):
            if field in message:
                item[field] = message[field]
        flat.append(item)
    return flat


def test_openinference_messages_become_the_openai_messages_sent():
    attrs = openinference(flattened_openinference(CONVERSATION), [{"role": "assistant", "content": "Sunny."}],
                          **{"llm.invocation_parameters": '{"model": "gpt-test", "temperature": 0.2}',
                             "llm.token_count.prompt": 51, "llm.token_count.completion": 3,
                             "llm.tools.0.tool.json_schema": '{"type": "function", "function": {"name": "w"}}'})

    request = captured_request(span(attrs, span_id=b"\x05" * 8, start=T0))

    assert json.dumps(request.messages) == json.dumps(CONVERSATION)
    assert request.response == [{"role": "assistant", "content": "Sunny."}]
    assert (request.conversation, request.external_id, request.trace_id) == ("chat-1", "05" * 8, TRACE.hex())
    assert (request.model, request.provider) == ("gpt-test", "openai")
    assert request.parameters == {"model": "gpt-test", "temperature": 0.2,
                                  "tools": [{"type": "function", "function": {"name": "w"}}]}
    assert (request.usage_input_tokens, request.usage_output_tokens) == (51, 3)
    assert request.started_at.timestamp() == T0 / SECOND
    assert (request.ended_at - request.started_at).total_seconds() == 0.5


def genai_parts(message):
    if message["role"] == "tool":
        return {"role": "tool", "parts": [
            {"type": "tool_call_response", "id": message["tool_call_id"], "response": message["content"]}]}
    parts = []
    if isinstance(message["content"], str):
        parts.append({"type": "text", "content": message["content"]})
    for part in message["content"] if isinstance(message["content"], list) else ():
        if part["type"] == "text":
            parts.append({"type": "text", "content": part["text"]})
        else:
            parts.append({"type": "blob", "modality": "image", "mime_type": "image/png",
                          "content": part["image_url"]["url"].split(",", 1)[1]})
    for call in message.get("tool_calls", ()):
        parts.append({"type": "tool_call", "id": call["id"], "name": call["function"]["name"],
                      "arguments": json.loads(call["function"]["arguments"])})
    return {"role": message["role"], "parts": parts, **({"name": message["name"]} if "name" in message else {})}


def test_genai_message_attributes_become_the_openai_messages_sent():
    items = [genai_parts(m) for m in CONVERSATION[1:]]  # the system prompt is in gen_ai.system_instructions
    attrs = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test",
        "gen_ai.request.temperature": 0.2, "gen_ai.request.max_tokens": 100,
        "gen_ai.conversation.id": "conv-9", "gen_ai.usage.input_tokens": 51, "gen_ai.usage.output_tokens": 3,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.input.messages": json.dumps(items),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "finish_reason": "stop",
                                               "parts": [{"type": "text", "content": "Sunny."}]}]),
    }

    request = captured_request(span(attrs))

    assert json.dumps(request.messages) == json.dumps(CONVERSATION)
    assert request.response == [{"role": "assistant", "content": "Sunny."}]
    assert (request.conversation, request.model, request.provider) == ("conv-9", "gpt-test", "openai")
    assert request.parameters == {"temperature": 0.2, "max_tokens": 100}
    assert (request.usage_input_tokens, request.usage_output_tokens) == (51, 3)


def test_the_older_per_message_span_events_are_read():
    events = [
        ("gen_ai.system.message", {"content": "Be brief."}),
        ("gen_ai.user.message", {"content": "Weather in Paris?"}),
        ("gen_ai.assistant.message", {"tool_calls": [WEATHER_CALL]}),
        ("gen_ai.tool.message", {"content": "sunny", "id": "call_1"}),
        ("gen_ai.choice", {"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": "Sunny."}}),
    ]

    request = captured_request(span({"gen_ai.system": "openai", "gen_ai.request.model": "gpt-test",
                                     "gen_ai.operation.name": "chat"}, events=events))

    assert request.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
    ]
    assert request.response == [{"role": "assistant", "content": "Sunny."}]
    assert request.provider == "openai"
    assert request.conversation == f"trace-{TRACE.hex()}"


def test_a_span_that_is_not_an_llm_call_is_none():
    assert captured_request(span({"http.request.method": "GET"})) is None
    assert captured_request(span({"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "e"})) is None
    assert captured_request(span({"openinference.span.kind": "CHAIN"})) is None


@pytest.mark.parametrize("attrs", [
    openinference([{"role": "user", "content": 5}]),
    openinference([{"role": "user", "contents.0.message_content.type": "audio"}]),
    openinference([{"role": "user", "content": "nul \x00 inside"}]),
    {"gen_ai.operation.name": "chat", "gen_ai.input.messages": '{"role": "user"}'},
    {"gen_ai.operation.name": "chat", "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "x"}]}]'},
    {"gen_ai.operation.name": "chat", "gen_ai.input.messages": '[{"role": "user", "parts": "text"}]'},
    {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[]"},
])
def test_malformed_messages_raise(attrs):
    with pytest.raises(MalformedSpan):
        captured_request(span(attrs))


def test_genai_image_uris_and_json_tool_responses_are_read():
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([
        {"role": "user", "parts": [{"type": "uri", "modality": "image", "uri": "https://example.com/a.png"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Let me look."},
                                        {"type": "tool_call", "id": "c1", "name": "zoom", "arguments": "x2"}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": {"ok": True}}]},
    ])}

    assert captured_request(span(attrs)).messages == [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "zoom", "arguments": "x2"}}]},
        {"role": "tool", "content": '{"ok": true}', "tool_call_id": "c1"},
    ]


KEYS = [
    "openinference.span.kind", "session.id", "llm.model_name", "llm.invocation_parameters", "llm.token_count.prompt",
    "llm.input_messages.0.message.role", "llm.input_messages.0.message.content",
    "llm.input_messages.0.message.contents.0.message_content.type",
    "llm.input_messages.0.message.contents.0.message_content.image.image.url",
    "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments", "llm.input_messages.1.message.name",
    "llm.output_messages.0.message.role", "gen_ai.operation.name", "gen_ai.input.messages",
    "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.usage.input_tokens", "gen_ai.conversation.id",
]
scalars = st.one_of(st.text(max_size=20), st.integers(-(2**63), 2**63 - 1), st.floats(), st.booleans(),
                    st.sampled_from(["LLM", "chat", "user", "assistant", "tool", "text", "image", "[]", "{}",
                                     '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
                                     '[{"role": "tool", "parts": [{"type": "tool_call_response"}]}]']))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=3), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=10),
       st.lists(st.tuples(st.sampled_from(["gen_ai.user.message", "gen_ai.choice", "gen_ai.tool.message", "x"]),
                          st.dictionaries(st.sampled_from(["content", "tool_calls", "id", "role", "message"]),
                                          values, max_size=3)), max_size=3))
def test_any_attributes_give_a_request_nothing_or_a_malformed_span(attrs, events):
    try:
        request = captured_request(span(attrs, events=events))
    except MalformedSpan:
        return
    assert request is None or (request.messages and all(isinstance(m, dict) for m in request.messages))


@pytest.mark.parametrize("session_id, key", [
    ("support-42", "support-42"),
    ("user 42 / chat", "user-42-chat-"),
    ("..", "session-"),
    ("x" * 300, "x" * 180 + "-"),
])
def test_session_ids_that_are_not_valid_keys_get_one(session_id, key):
    request = captured_request(span(openinference([{"role": "user", "content": "hi"}], session=session_id)))

    assert request.conversation.startswith(key)
    assert request.conversation == key or len(request.conversation) == len(key) + 12
