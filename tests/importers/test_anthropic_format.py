"""Anthropic Messages transcripts: every block type maps to ctxweb's messages, and the model input in
the anthropic format gives back what was imported (less thinking, which is never sent back), a failed
tool result's is_error included."""

import copy
import json

import pytest

from sessions.ingest.demo import tiny_png
from sessions.ingest.importers import parse_transcript
from sessions.models import Message, Session
from tests.importers.conftest import anthropic_input, jsonl, openai_input, stored

PNG = tiny_png(8, 8).split(",", 1)[1]
PHOTO = "https://example.com/gate-12.jpg"

SAMPLE = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": "You are a travel assistant.",
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "What is on this departures board?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "The board lists TP1351; check its status.", "signature": "sig-1"},
            {"type": "text", "text": "Let me look up TP1351."},
            {"type": "tool_use", "id": "toolu_1", "name": "flight_status", "input": {"flight": "TP1351"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "TP1351: on time, gate 12"},
        ]},
        {"role": "assistant", "content": [{"type": "text", "text": "TP1351 is on time, at gate 12."}]},
        {"role": "user", "content": [
            {"type": "text", "text": "Is this the gate?"},
            {"type": "image", "source": {"type": "url", "url": PHOTO}},
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Lisbon", "days": [1, 2]}},
            {"type": "tool_use", "id": "toolu_3", "name": "gate_map", "input": {"gate": 12}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "24°C, sunny"}]},
            {"type": "tool_result", "tool_use_id": "toolu_3", "is_error": True,
             "content": [{"type": "text", "text": "map service unavailable"}]},
            {"type": "text", "text": "Thanks. And the map?"},
        ]},
        {"role": "assistant", "content": "The map service is down; gate 12 is on the left after security."},
    ],
}


def model_visible(messages: list[dict]) -> list[dict]:
    """The sample as a provider receives it back: text as blocks, no thinking."""
    out = []
    for message in copy.deepcopy(messages):
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = []
        for block in content:
            if block["type"] == "thinking":
                continue
            blocks.append(block)
        out.append({"role": message["role"], "content": blocks})
    return out


@pytest.fixture
def imported(import_bytes):
    report = import_bytes("trip.json", SAMPLE)
    assert report.error is None
    return Session.objects.get(key="trip")


def test_the_sample_is_recognised_as_anthropic():
    assert parse_transcript("trip.json", json.dumps(SAMPLE).encode()).format == "anthropic"


def test_the_model_input_gives_the_conversation_back(imported):
    rendered = anthropic_input(imported)

    assert rendered["system"] == SAMPLE["system"]
    assert rendered["messages"] == model_visible(SAMPLE["messages"])


def test_each_block_type_maps_to_ctxweb_fields(imported):
    system, board, lookup, status, answer, photo, calls, weather, gate_map, thanks, final = stored(imported)

    assert imported.instructions == "You are a travel assistant."
    assert system.role == "system" and system.text == "You are a travel assistant."
    assert imported.metadata == {"model": "claude-sonnet-4-5", "max_tokens": 1024,
                                 "imported_from": {"file": "trip.json", "format": "anthropic"}}
    assert board.role == "user" and board.content == [
        {"type": "text", "text": "What is on this departures board?"},
        {"type": "image", "url": f"data:image/png;base64,{PNG}", "media_type": "image/png"},
    ]
    assert lookup.role == "assistant" and lookup.text == "Let me look up TP1351."
    assert lookup.reasoning == "The board lists TP1351; check its status."
    assert lookup.attributes == {"thinking_signatures": ["sig-1"]}
    assert lookup.tool_calls == [{"id": "toolu_1", "name": "flight_status", "arguments": '{"flight": "TP1351"}'}]
    assert (status.role, status.tool_call_id, status.content) == ("tool", "toolu_1", "TP1351: on time, gate 12")
    assert status.call_seq == lookup.seq
    assert answer.content == "TP1351 is on time, at gate 12."
    assert photo.content == [{"type": "text", "text": "Is this the gate?"}, {"type": "image", "url": PHOTO}]
    assert calls.content == "" and [c["id"] for c in calls.tool_calls] == ["toolu_2", "toolu_3"]
    assert json.loads(calls.tool_calls[0]["arguments"]) == {"city": "Lisbon", "days": [1, 2]}
    # One tool message per result, then the user's own text as a user message.
    assert (weather.role, weather.tool_call_id, weather.content) == ("tool", "toolu_2", [{"type": "text", "text": "24°C, sunny"}])
    assert (gate_map.role, gate_map.tool_call_id, gate_map.is_error, gate_map.attributes) == ("tool", "toolu_3", True, {})
    assert not status.is_error and not weather.is_error
    assert (thanks.role, thanks.content) == ("user", "Thanks. And the map?")
    assert final.content == SAMPLE["messages"][-1]["content"]
    assert [m.client_id for m in (system, board, weather, gate_map, thanks)] == [
        "trip:0:system", "trip:0:0", "trip:0:6:0", "trip:0:6:1", "trip:0:6:2",
    ]


def test_the_openai_rendering_of_the_same_session_is_valid_too(imported):
    messages = openai_input(imported)

    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant",
                                             "tool", "tool", "user", "assistant"]


def test_importing_the_sample_again_stores_nothing(import_bytes, imported):
    again = import_bytes("trip.json", SAMPLE)

    assert again.messages == 0 and again.duplicates == imported.message_count


@pytest.mark.parametrize("shape", ["list", "jsonl", "no-markers-but-system"])
def test_other_containers_and_detection(import_bytes, shape):
    if shape == "list":
        data = json.dumps(SAMPLE["messages"][:4]).encode()
    elif shape == "jsonl":
        data = jsonl({"system": "Be brief.", "messages": SAMPLE["messages"][:4]})
    else:
        data = json.dumps({"system": [{"type": "text", "text": "Be brief."}],
                           "messages": [{"role": "user", "content": "Hi"},
                                        {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]}]}).encode()

    report = import_bytes(f"chat.{'jsonl' if shape == 'jsonl' else 'json'}", data)

    assert report.error is None and report.format == "anthropic"
    session = Session.objects.get(key=report.keys[0])
    assert openai_input(session)
    if shape != "list":
        assert session.instructions == "Be brief."


def test_unknown_blocks_are_kept_in_attributes(import_bytes):
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "..."}}
    import_bytes("doc.json", {"system": "x", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Summarise this."}, document]},
    ]})

    user = Session.objects.get(key="doc").messages.get(seq=2)
    assert user.content == "Summarise this." and user.attributes == {"unsupported_blocks": [document]}


def test_the_sample_named_openai_fails_instead_of_storing_garbage(import_bytes):
    report = import_bytes("trip.json", SAMPLE, fmt="openai")

    # The reason, then the format detection picks (issue 39, item 9).
    assert report.error == ("record 0, message 0: content part type 'image' is not an OpenAI Chat Completions part; "
                            "OpenAI's are text, image_url, input_audio, file and refusal (the file looks like "
                            "anthropic: import it as anthropic, or let the format be detected with auto)")
    assert Message.objects.count() == 0


@pytest.mark.parametrize(("message", "reason"), [
    ({"role": "system", "content": "You are a travel assistant."},
     "role 'system' is not an Anthropic Messages role; Anthropic's are user and assistant (the system prompt is "
     "the separate `system`)"),
    ({"role": "tool", "tool_call_id": "toolu_1", "content": "TP1351: on time"},
     "role 'tool' is not an Anthropic Messages role; Anthropic's are user and assistant (the system prompt is "
     "the separate `system`)"),
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "flight_status", "arguments": "{}"}}]},
     "`tool_calls` is a field of OpenAI Chat Completions messages, not of Anthropic Messages"),
    ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": PHOTO}}]},
     "content block type 'image_url' is not an Anthropic Messages block"),
])
def test_a_record_that_is_not_anthropic_fails_the_file(import_bytes, message, reason):
    data = {**SAMPLE, "messages": [*SAMPLE["messages"][:4], message]}

    report = import_bytes("trip.json", data, fmt="anthropic")

    assert report.error == f"record 0, message 4: {reason}"
    assert Message.objects.count() == 0
