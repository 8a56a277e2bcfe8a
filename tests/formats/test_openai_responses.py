"""The `openai-responses` format: the model input as the `input` items of an OpenAI Responses API request,
valid for the `openai` package's typed params on every real transcript, before and after compaction; and
Responses items read back as ctxweb messages."""

from pathlib import Path

import pytest
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter

from sessions.context.compaction_runs import compact
from sessions.context.model_input import build_model_input
from sessions.context.provider_input import render_model_input
from sessions.ingest.append import append_messages
from sessions.ingest.demo import tiny_png
from sessions.ingest.importers import import_file
from sessions.ingest.session_store import update_session
from sessions.models import Session
from sessions.wire.openai_responses import ItemError, convert_items, to_openai_responses
from tests.responses_input import responses_input_problems

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"
FILES = sorted(p for p in DATA.rglob("*") if p.suffix in (".json", ".jsonl"))
COMPACTED_PER_FILE = 3
PNG = tiny_png(8, 8)
SVG = "data:image/svg+xml;base64,PHN2Zy8+"

pytestmark = pytest.mark.django_db


def responses_input(session) -> list[dict]:
    return render_model_input(build_model_input(Session.objects.get(pk=session.pk)), "openai-responses")


@pytest.mark.parametrize("path", FILES, ids=[p.name[:40] for p in FILES])
def test_every_real_transcript_renders_as_valid_responses_input_before_and_after_compaction(project, path):
    report = import_file(project, path)
    assert report.error is None and report.keys
    for n, key in enumerate(report.keys):
        session = Session.objects.get(project=project, key=key)
        items = responses_input(session)
        assert responses_input_problems(items) == [], key
        assert not any(item["type"] == "reasoning" for item in items)
        if n < COMPACTED_PER_FILE and compact(session, force=True, keep_recent_tokens=200).status == "completed":
            items = responses_input(session)
            summary = items[1] if items[0].get("role") == "developer" else items[0]
            assert (summary["role"], summary["content"][:35]) == ("user", "Summary of the earlier conversation")
            assert responses_input_problems(items) == [], key


def test_each_kind_of_entry_becomes_its_responses_item(project):
    update_session(project, "shapes", {"instructions": "You are a travel assistant."})
    append_messages(project, "shapes", [
        {"role": "user", "name": "maria", "content": [
            {"type": "text", "text": "What is on this board?"},
            {"type": "image", "url": PNG, "detail": "low"},
            {"type": "image", "url": "https://example.com/board.jpg"},
            {"type": "image", "url": SVG},
        ]},
        {"role": "assistant", "content": "Let me look both up.", "reasoning": "Two flights: check both.",
         "tool_calls": [{"id": "call_1", "name": "flight_status", "arguments": '{"flight": "TP1351"}'},
                        {"id": "call_2", "name": "flight_status", "arguments": '{"flight": "TP1352"}'}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "TP1351: on time"},
        {"role": "tool", "tool_call_id": "call_2", "content": [
            {"type": "text", "text": "TP1352: delayed; the gate map:"}, {"type": "image", "url": PNG}]},
        {"role": "assistant", "content": [{"type": "text", "text": "TP1351 is on time."},
                                          {"type": "text", "text": "TP1352 is delayed."}]},
        {"role": "agent", "content": "(the user went quiet; the agent checks again)"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_3", "name": "flight_status", "arguments": '{"flight": "TP1352"}'}]},
    ], "test")

    items = responses_input(Session.objects.get(key="shapes"))

    assert items == [
        {"type": "message", "role": "developer", "content": "You are a travel assistant."},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "What is on this board?"},
            {"type": "input_image", "image_url": PNG, "detail": "low"},
            {"type": "input_image", "image_url": "https://example.com/board.jpg", "detail": "auto"},
            {"type": "input_text", "text": f"[image: {SVG}]"},
        ]},
        {"type": "message", "role": "assistant", "content": "Let me look both up."},
        {"type": "function_call", "call_id": "call_1", "name": "flight_status", "arguments": '{"flight": "TP1351"}'},
        {"type": "function_call", "call_id": "call_2", "name": "flight_status", "arguments": '{"flight": "TP1352"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "TP1351: on time"},
        {"type": "function_call_output", "call_id": "call_2", "output": [
            {"type": "input_text", "text": "TP1352: delayed; the gate map:"},
            {"type": "input_image", "image_url": PNG}]},
        {"type": "message", "role": "assistant", "content": "TP1351 is on time.\nTP1352 is delayed."},
        {"type": "message", "role": "user", "content": "(the user went quiet; the agent checks again)"},
        # call_3 still awaits its result: the Responses API refuses a function_call without its output,
        # so it is left out until the result is appended (omitted: awaiting_tool_result).
    ]
    assert responses_input_problems(items) == []


def test_a_checkpoint_summary_is_a_user_message_after_the_instructions(project):
    update_session(project, "summarised", {"instructions": "Be brief."})
    append_messages(project, "summarised", [
        {"role": "user", "content": "First question " + "about bags " * 80},
        {"role": "assistant", "content": "First answer " + "about bags " * 80},
        {"role": "user", "content": "Second question?"},
    ], "test")
    session = Session.objects.get(key="summarised")
    outcome = compact(session, force=True, keep_recent_tokens=10)
    assert outcome.status == "completed"

    items = to_openai_responses(build_model_input(Session.objects.get(pk=session.pk)))

    assert [(i["type"], i["role"]) for i in items] == [("message", "developer"), ("message", "user"), ("message", "user")]
    assert items[1]["content"].startswith("Summary of the earlier conversation, covering messages 1–2:")
    assert items[2]["content"] == "Second question?"


# --- reading items --------------------------------------------------------------------------------

# What an OpenAI Agents SDK session holds after one run with a reasoning model and a tool, in the shapes
# of the `openai` package's params (checked below).
AGENT_RUN = [
    {"content": "What is the weather in Lisbon?", "role": "user"},
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "I should call the weather tool."}],
     "encrypted_content": "gAAAA-opaque"},
    {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "get_weather",
     "arguments": '{"city": "Lisbon"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "24°C, sunny"},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "It is 24°C and sunny in Lisbon.", "annotations": []}]},
]


def test_the_sample_items_are_responses_input():
    TypeAdapter(ResponseInputParam).validate_python(AGENT_RUN)


def test_items_become_messages_with_reasoning_on_the_output_it_led_to():
    converted = convert_items(AGENT_RUN, lambda i: f"messages[{i}]")

    assert [index for index, _ in converted] == [0, 2, 3, 4]
    assert [message for _, message in converted] == [
        {"role": "user", "content": "What is the weather in Lisbon?"},
        {"role": "assistant", "content": None, "reasoning": "I should call the weather tool.",
         "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}],
         "attributes": {"reasoning_items": [{"id": "rs_1", "encrypted_content": "gAAAA-opaque"}],
                        "function_call_fields": [{"call_id": "call_1", "id": "fc_1", "status": "completed"}]}},
        {"role": "tool", "tool_call_id": "call_1", "content": "24°C, sunny"},
        {"role": "assistant", "content": [{"type": "text", "text": "It is 24°C and sunny in Lisbon."}],
         "attributes": {"id": "msg_1", "status": "completed"}},
    ]


def test_an_assistant_message_and_the_function_calls_after_it_are_one_message():
    items = [
        {"type": "message", "role": "user", "content": "Two flights?"},
        {"type": "message", "role": "assistant", "content": "Checking both."},
        {"type": "function_call", "call_id": "a", "name": "status", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "status", "arguments": "{}"},
    ]

    converted = [message for _, message in convert_items(items, str)]

    assert converted[1] == {"role": "assistant", "content": "Checking both.", "tool_calls": [
        {"id": "a", "name": "status", "arguments": "{}"}, {"id": "b", "name": "status", "arguments": "{}"}]}
    assert len(converted) == 2


def test_reasoning_that_no_output_followed_is_kept_hidden():
    items = [{"role": "user", "content": "Hi"},
             {"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "Greet back."}]}]

    converted = [message for _, message in convert_items(items, str)]

    assert converted[1] == {"role": "assistant", "content": "", "include_in_messages": False,
                            "reasoning": "Greet back.",
                            "attributes": {"not_sent": "a reasoning item that no assistant output followed",
                                           "reasoning_items": [{"id": "rs_9"}]}}


@pytest.mark.parametrize(("item", "says"), [
    ({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
     "an item of type 'web_search_call' is not supported"),
    ({"type": "message", "role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]},
     "a part of type 'input_file' is not supported"),
    ({"type": "message", "role": "user", "content": [{"type": "input_image", "file_id": "file_1", "detail": "auto"}]},
     "needs an image_url"),
    ({"type": "function_call", "call_id": "c", "name": "f", "arguments": {"city": "Lisbon"}},
     "arguments must be a string"),
    ({"type": "message", "role": "tool", "content": "x"}, "role 'tool' is not a message role"),
    ("just text", "an item must be an object"),
])
def test_an_item_ctxweb_cannot_store_is_refused_by_its_index(item, says):
    with pytest.raises(ItemError) as caught:
        convert_items([{"role": "user", "content": "Hi"}, item], lambda i: f"messages[{i}]")
    assert caught.value.index == 1
    assert str(caught.value).startswith("messages[1]: ")
    assert says in str(caught.value)
