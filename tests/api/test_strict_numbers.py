"""Numbers and booleans are taken as they are sent: `true` is not 1, 1 is not true, "5" is not 5. Each
wrong type is a 422 naming the field in plain words, and stores nothing."""

import json

import pytest

from sessions.ingest.importers import import_data
from tests.api.conftest import assert_error, stored

pytestmark = pytest.mark.django_db

IMAGE = {"type": "image", "url": "https://example.com/a.png", "width": 512, "height": 512}


def image_with(**changes):
    return {"messages": [{"role": "user", "content": [{**IMAGE, **changes}]}]}


# Every whole-number field of a request body: (method, path, body with the field set to `value`, its name).
WHOLE_NUMBERS = {
    "session max_tokens": ("put", "/sessions/s", lambda v: {"compaction": {"max_tokens": v}},
                           "compaction.max_tokens"),
    "session keep_recent_tokens": ("put", "/sessions/s", lambda v: {"compaction": {"keep_recent_tokens": v}},
                                   "compaction.keep_recent_tokens"),
    "compact max_tokens": ("post", "/sessions/s/compact", lambda v: {"max_tokens": v}, "max_tokens"),
    "compact keep_recent_tokens": ("post", "/sessions/s/compact", lambda v: {"keep_recent_tokens": v},
                                   "keep_recent_tokens"),
    "image width": ("post", "/sessions/s/messages", lambda v: image_with(width=v), "content[0].width"),
    "image height": ("post", "/sessions/s/messages", lambda v: image_with(height=v), "content[0].height"),
    "counted image width": ("post", "/tokens", lambda v: image_with(width=v), "content[0].width"),
}


@pytest.mark.parametrize("value", [True, False, "5", 5.0], ids=["true", "false", "string", "float"])
@pytest.mark.parametrize("field", WHOLE_NUMBERS)
def test_a_whole_number_field_refuses_anything_but_a_whole_number_with_422_naming_it(api, append, field, value):
    append("s", [{"role": "user", "content": "hello"}])
    method, path, body, name = WHOLE_NUMBERS[field]
    before = stored()

    response = getattr(api, method)(path, body(value))

    detail = assert_error(response, 422)["detail"]
    assert f"{name} must be a whole number" in detail
    assert stored() == before


@pytest.mark.parametrize("value", [1, 0, "false", "true"])
def test_an_anthropic_tool_results_is_error_must_be_true_or_false(api, value):
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "failed",
                                           "is_error": value}]}
    before = stored()

    response = api.post("/sessions/s/messages", {"format": "anthropic", "messages": [call, result]})

    body = assert_error(response, 422)
    assert body["detail"] == "messages[1]: is_error must be true or false"
    assert stored() == before


def test_an_anthropic_tool_results_is_error_true_and_false_are_kept(api):
    messages = [{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "f", "input": {}}
                                                  for n in (1, 2)]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "failed", "is_error": True},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "done", "is_error": False}]}]

    assert api.post("/sessions/s/messages", {"format": "anthropic", "messages": messages}).status_code == 200

    items = api.get("/sessions/s/messages").json()["items"]
    assert [m["is_error"] for m in items if m["role"] == "tool"] == [True, False]


EXPORT = {"format": "ctxweb-session", "version": 1, "session": {"key": "exported"},
          "messages": [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]}


@pytest.mark.parametrize("seq", [True, 1.0, "1"], ids=["true", "float", "string"])
def test_an_exports_checkpoint_seqs_must_be_whole_numbers(project, seq):
    export = {**EXPORT, "checkpoints": [{"last_seq": seq, "created_at_seq": 2, "summary": "s"}]}

    report = import_data(project, "exported.json", json.dumps(export).encode())

    assert report.error is not None and "checkpoint" in report.error
    assert stored()["sessions"] == 0


def test_an_exports_message_seq_must_be_a_whole_number(project):
    lines = [{"type": "session", "format": "ctxweb-session", "version": 1, "key": "exported"},
             {"type": "message", "seq": True, "role": "user", "content": "one"}]

    report = import_data(project, "exported.jsonl", "\n".join(json.dumps(line) for line in lines).encode())

    assert report.error is not None and "seq order" in report.error
    assert stored()["sessions"] == 0
