"""Every `anthropic` model input is a request the Anthropic Messages API takes, on conversations of the
shapes its rules are about, each replayed at every point (as of each message). Every session of tests/data
is checked the same way, on the basis its API answer has, by tests/test_every_model_input.py; the real runs
there hold no assistant text ending in whitespace (tau-bench's gpt-4o run writes none), so these hand-made
conversations make sure each rule is met where it matters. A point with nothing to send is the documented
409, not a request, and is skipped."""


import pytest

from sessions.context.model_input import build_model_input
from sessions.context.provider_input import NothingToSend, check_something_to_send, render_model_input
from sessions.models import Project, Session
from tests.anthropic_rules import anthropic_request_problems
from tests.builders import call

SHOWN = 20

LOOKUP = call("call_1", "find_bag", '{"tag": "AB12"}')
# Conversations of the shapes the rules are about, each replayed at every point like a real one.
CONVERSATIONS = {
    "a reply ending in a newline": [
        {"role": "user", "content": "Where is my bag?"},
        {"role": "assistant", "content": "In Paris.\n"},
    ],
    "text before a call awaiting its result, ending in blank lines": [
        {"role": "user", "content": "Where is my bag?"},
        {"role": "assistant", "content": "Let me look that up.\n\n", "tool_calls": [LOOKUP]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Paris"},
        {"role": "assistant", "content": "It is in Paris. "},
        {"role": "user", "content": "Thanks"},
    ],
    "text parts, an image in the reply and a blank part last": [
        {"role": "user", "content": "Show me the route."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Here:\n"}, {"type": "image", "url": "https://example.com/route.png"},
            {"type": "text", "text": "Done. \n"}, {"type": "text", "text": " \n"},
        ]},
    ],
    "an assistant message first": [
        {"role": "assistant", "content": "Hello! How can I help?  "},
        {"role": "agent", "content": "(the user opened the chat)"},
        {"role": "assistant", "content": "\t"},
    ],
    "an image data URL with no data": [
        {"role": "user", "content": [
            {"type": "text", "text": "My boarding pass:"}, {"type": "image", "url": "data:image/png;base64,"},
        ]},
    ],
    "ids other providers write, reused": [
        {"role": "user", "content": "Search twice."},
        {"role": "assistant", "content": None, "tool_calls": [call("functions.search:0", "search", "{}")]},
        {"role": "tool", "tool_call_id": "functions.search:0", "content": "   "},
        {"role": "assistant", "content": "Again.", "tool_calls": [call("functions.search:0", "search", "[1]")]},
        {"role": "tool", "tool_call_id": "functions.search:0", "content": [{"type": "text", "text": " "}]},
        {"role": "agent", "content": "Both searches came back empty."},
    ],
}


def invalid_points(name: str, project: Project) -> tuple[int, list[str]]:
    """How many points were checked, and a sentence for each that the API would refuse."""
    checked, failures = 0, []
    for session in Session.objects.filter(project=project).order_by("key"):
        for as_of in range(1, session.message_count + 1):
            model_input = build_model_input(session, as_of=as_of)
            body = render_model_input(model_input, "anthropic")
            try:
                check_something_to_send(model_input, "anthropic", body)
            except NothingToSend:
                continue
            checked += 1
            if problems := anthropic_request_problems(body):
                failures.append(f"{name} session {session.key!r} as_of={as_of}: {problems}")
    return checked, failures


def assert_all_valid(checked: int, failures: list[str]) -> None:
    assert checked, "no point of the conversation had anything to send"
    if failures:
        pytest.fail(f"{len(failures)} of {checked} points give an invalid request; the first {SHOWN}:\n"
                    + "\n".join(failures[:SHOWN]), pytrace=False)


@pytest.mark.parametrize("name", CONVERSATIONS)
def test_every_point_of_a_conversation_of_a_tricky_shape_is_a_valid_anthropic_request(project, append, name):
    append("shape", CONVERSATIONS[name])

    assert_all_valid(*invalid_points(name, project))


def test_the_final_assistant_text_loses_its_trailing_whitespace_and_nothing_else(project, append):
    append("shape", CONVERSATIONS["text before a call awaiting its result, ending in blank lines"])
    session = Session.objects.get(project=project, key="shape")

    awaiting = render_model_input(build_model_input(session, as_of=2), "anthropic")["messages"]
    later = render_model_input(build_model_input(session, as_of=5), "anthropic")["messages"]

    assert awaiting[-1] == {"role": "assistant", "content": [{"type": "text", "text": "Let me look that up."}]}
    assert later[1]["content"][0] == {"type": "text", "text": "Let me look that up.\n\n"}  # not the final turn
    assert later[3]["content"] == [{"type": "text", "text": "It is in Paris. "}]


def test_blank_text_left_at_the_end_goes_with_the_whitespace(project, append):
    append("shape", CONVERSATIONS["text parts, an image in the reply and a blank part last"])
    session = Session.objects.get(project=project, key="shape")

    body = render_model_input(build_model_input(session), "anthropic")

    assert [block["text"] for block in body["messages"][-1]["content"]] == [
        "Here:\n", "[image: https://example.com/route.png]", "Done."]


def test_an_image_data_url_with_no_data_reaches_the_model_as_a_placeholder(project, append):
    append("shape", CONVERSATIONS["an image data URL with no data"])
    session = Session.objects.get(project=project, key="shape")

    body = render_model_input(build_model_input(session), "anthropic")

    assert body["messages"][0]["content"][1] == {"type": "text", "text": "[image: data:image/png;base64,]"}
