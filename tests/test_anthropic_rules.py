"""tests/anthropic_rules.py finds what the Messages API refuses: each check on a request made bad in one
place, beside a valid request it passes."""

import copy

import pytest

from tests.anthropic_rules import anthropic_request_problems

PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
GOOD = {
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "Where is my bag?"}, {"type": "image", "source": PNG},
        ]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look.\n\n"},
            {"type": "tool_use", "id": "call_1", "name": "find_bag", "input": {"tag": "AB12"}},
            {"type": "tool_use", "id": "call-2", "name": "find_flight", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "Paris"}]},
            {"type": "tool_result", "tool_use_id": "call-2", "content": "AF123", "is_error": True},
            {"type": "text", "text": "Quickly, please."},
        ]},
        {"role": "assistant", "content": [{"type": "text", "text": "It is in Paris."}]},
    ],
}
DELETE = object()


def changed(path: tuple, value) -> dict:
    """GOOD with the value at `path` replaced (DELETE: removed; one past a list's end: appended)."""
    body = copy.deepcopy(GOOD)
    *parents, last = path
    holder = body
    for key in parents:
        holder = holder[key]
    if value is DELETE:
        del holder[last]
    elif isinstance(holder, list) and last == len(holder):
        holder.append(value)
    else:
        holder[last] = value
    return body


def test_a_valid_request_has_no_problem():
    assert anthropic_request_problems(GOOD) == []


@pytest.mark.parametrize(("path", "value"), [
    (("system",), DELETE),
    (("system",), [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]),
    (("messages", 0, "content"), "Where is my bag?"),
    (("messages", 0, "content", 1, "source"), {"type": "url", "url": "https://example.com/bag.jpg"}),
    (("messages", 3), DELETE),  # ending with a user message
    (("messages", 3, "content"), "It is in Paris."),
    (("messages", 3, "content", 1), {"type": "text", "text": "Anything else?"}),
], ids=["no system", "system as text blocks", "text content", "url image", "ends with the user",
        "final text as a string", "two final texts"])
def test_variants_the_api_takes_have_no_problem(path, value):
    assert anthropic_request_problems(changed(path, value)) == []


# (id, where, new value, a sentence the validator must give)
TYPE_CASES = [
    ("an unknown key on a message", ("messages", 0, "name"), "Ann",
     "messages[0]: UserMessageParam.name: Extra inputs are not permitted"),
    ("an unknown key on a block", ("messages", 3, "content", 0, "cache"), True,
     "messages[3]: content.0.cache: Extra inputs are not permitted"),
    ("an unknown key in a tool_result's blocks", ("messages", 2, "content", 0, "content", 0, "seq"), 4,
     "messages[2]: content.0.content.0.TextBlockParam.seq: Extra inputs are not permitted"),
    ("an unknown key in a system block", ("system",), [{"type": "text", "text": "Be brief.", "kind": "x"}],
     "system.0.kind: Extra inputs are not permitted"),
    ("text of the wrong type", ("messages", 0, "content", 0, "text"), 3,
     "messages[0]: content.0.text: Input should be a valid string"),
    ("tool input that is not an object", ("messages", 1, "content", 1, "input"), '{"tag": "AB12"}',
     "messages[1]: content.1.input: Input should be a valid dictionary"),
    ("is_error of the wrong type", ("messages", 2, "content", 1, "is_error"), "yes",
     "messages[2]: content.1.is_error: Input should be a valid boolean"),
    ("a role the API does not know", ("messages", 2, "role"), "tool",
     "messages[2]: role: 'tool' is not a value allowed here"),
    ("a block type the API does not know", ("messages", 0, "content", 0, "type"), "input_text",
     "messages[0]: content.0: 'input_text' is no content block type of a request"),
    ("system of the wrong type", ("system",), 5, "system is int, neither a string nor a list of text blocks"),
]


@pytest.mark.parametrize(("path", "value", "sentence"), [c[1:] for c in TYPE_CASES], ids=[c[0] for c in TYPE_CASES])
def test_the_package_types_catch_a_wrong_key_or_type(path, value, sentence):
    assert sentence in anthropic_request_problems(changed(path, value))


RULE_CASES = [
    ("no message", ("messages",), [], "the request has no message; the API needs at least one"),
    ("an assistant message first", ("messages", 0, "role"), "assistant",
     "messages[0]: the first message has role 'assistant'; it must be user"),
    ("a system message among the messages", ("messages", 3, "role"), "system",
     "messages[3]: role 'system'; messages are user or assistant"),  # the package's MessageParam takes it
    ("two user messages in a row", ("messages", 3), {"role": "user", "content": "And my coat?"},
     "messages[3]: a user message right after another; roles must alternate user/assistant"),
    ("empty text content", ("messages", 3, "content"), "", "messages[3]: the message has empty content"),
    ("an empty list of blocks", ("messages", 3, "content"), [], "messages[3]: the message has empty content"),
    ("an empty text block", ("messages", 0, "content", 0, "text"), "",
     "messages[0]: a text block has empty text ('')"),
    ("a blank text block", ("messages", 1, "content", 0, "text"), " \n",
     "messages[1]: a text block has whitespace-only text (' \\n')"),
    ("a blank text block in a tool_result", ("messages", 2, "content", 0, "content", 0, "text"), "\t",
     "messages[2]: a text block has whitespace-only text ('\\t')"),
    ("a tool_use id used twice", ("messages", 1, "content", 2, "id"), "call_1",
     "messages[1]: tool_use id 'call_1' is already the id of a tool_use in messages[1]"),
    ("a tool_use id of other characters", ("messages", 1, "content", 1, "id"), "functions.find_bag:0",
     "messages[1]: tool_use id 'functions.find_bag:0' does not match ^[a-zA-Z0-9_-]+$"),
    ("a tool_use id ending in a newline", ("messages", 1, "content", 1, "id"), "call_1\n",
     "messages[1]: tool_use id 'call_1\\n' does not match ^[a-zA-Z0-9_-]+$"),
    ("a tool_use with no message after it", ("messages", 3, "content", 1),
     {"type": "tool_use", "id": "call_3", "name": "find_bag", "input": {}},
     "messages[3]: tool_use ['call_3'] is not followed by a user message with their tool_result blocks"),
    ("a tool_use without its tool_result", ("messages", 2, "content", 1), DELETE,
     "messages[1]: the next message opens with 0 tool_result blocks for tool_use 'call-2'; "
     "it must open with exactly one"),
    ("a tool_use answered twice", ("messages", 2, "content", 1, "tool_use_id"), "call_1",
     "messages[1]: the next message opens with 2 tool_result blocks for tool_use 'call_1'; "
     "it must open with exactly one"),
    ("a tool_result after a text block", ("messages", 2, "content"), [
        {"type": "tool_result", "tool_use_id": "call_1"}, {"type": "text", "text": "Quickly, please."},
        {"type": "tool_result", "tool_use_id": "call-2"}],
     "messages[2]: a tool_result block comes after another kind of block; tool_result blocks must come first"),
    ("a tool_result for no tool_use of the message before", ("messages", 4),
     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1"}]},
     "messages[4]: tool_result for 'call_1' answers no tool_use of the message before it"),
    ("a final assistant text ending in a newline", ("messages", 3, "content", 0, "text"), "It is in Paris.\n",
     "messages[3]: the final assistant message ends in whitespace ('It is in Paris.\\n')"),
    ("a final assistant string ending in a space", ("messages", 3, "content"), "It is in Paris. ",
     "messages[3]: the final assistant message ends in whitespace ('It is in Paris. ')"),
    ("an image of a type the API does not take", ("messages", 0, "content", 1, "source", "media_type"), "image/tiff",
     "messages[0]: an image's media type 'image/tiff' is none of ['image/gif', 'image/jpeg', 'image/png', 'image/webp']"),
    ("an image whose data is not base64", ("messages", 0, "content", 1, "source", "data"), "data:image/png,x y",
     "messages[0]: an image's base64 data is not base64"),
    ("an image with no data", ("messages", 0, "content", 1, "source", "data"), "",
     "messages[0]: an image's base64 data is not base64"),
    ("an unknown key in a base64 source", ("messages", 0, "content", 1, "source", "width"), 64,
     "messages[0]: an image's base64 source has the keys ['data', 'media_type', 'type', 'width'], "
     "not ['data', 'media_type', 'type']"),
    ("an image from a file id", ("messages", 0, "content", 1, "source"), {"type": "file", "file_id": "file_1"},
     "messages[0]: an image has a 'file' source, neither base64 nor url"),
    ("an image url that is not http", ("messages", 0, "content", 1, "source"), {"type": "url", "url": "ftp://x/y.png"},
     "messages[0]: an image's url source 'ftp://x/y.png' is not an http(s) URL"),
    ("an image in a tool_result", ("messages", 2, "content", 0, "content", 0),
     {"type": "image", "source": {**PNG, "media_type": "image/bmp"}},
     "messages[2]: an image's media type 'image/bmp' is none of ['image/gif', 'image/jpeg', 'image/png', 'image/webp']"),
]


@pytest.mark.parametrize(("path", "value", "sentence"), [c[1:] for c in RULE_CASES], ids=[c[0] for c in RULE_CASES])
def test_each_rule_of_the_api_catches_a_request_that_breaks_it(path, value, sentence):
    assert sentence in anthropic_request_problems(changed(path, value))


def test_an_assistant_message_before_the_last_may_end_in_whitespace():
    assert GOOD["messages"][1]["content"][0]["text"].endswith("\n\n")
    assert anthropic_request_problems(GOOD) == []
