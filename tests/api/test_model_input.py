"""GET /api/v1/sessions/{key}/model-input?format=&as_of=: the model input with its token
totals, the checkpoint used and what was left out."""

import json

import pytest

from sessions.context.compaction_runs import compact
from sessions.context.model_input import latest_checkpoint
from sessions.context.provider_input import stored_openai_response
from sessions.ingest.message_edits import update_message
from sessions.models import Message, Session
from sessions.wire.tokens import count_message
from tests.api.conftest import assert_error
from tests.builders import openai_input_problems
from tests.conftest import TRANSCRIPT_FILES
from tests.test_stored_openai import compare, from_stored

pytestmark = pytest.mark.django_db

INSTRUCTIONS = "You are a weather assistant."
IMAGE = {"type": "image", "url": "https://example.com/sky.png", "width": 512, "height": 512}


@pytest.fixture
def weather(api):
    """Instructions and seven messages: a question, a tool call and its result, an answer, a stored
    system message, an agent continuation and a question with an image."""
    api.put("/sessions/weather", {"instructions": INSTRUCTIONS, "compaction": {"auto": False}})
    response = api.post("/sessions/weather/messages", {"messages": [
        {"id": "m1", "role": "user", "content": "What is the weather in Lisbon?"},
        {"id": "m2", "role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}]},
        {"id": "m3", "role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "24°C, sunny"},
        {"id": "m4", "role": "assistant", "content": "It is 24°C and sunny in Lisbon."},
        {"id": "m5", "role": "system", "content": "An old system prompt, stored but never sent."},
        {"id": "m6", "role": "agent", "content": "Reminder: the user is flying this afternoon."},
        {"id": "m7", "role": "user", "content": [{"type": "text", "text": "And this sky?"}, IMAGE]},
    ]})
    assert response.status_code == 200
    return "weather"


def tokens_of(seqs) -> int:
    return sum(Message.objects.filter(session__key="weather", seq__in=seqs).values_list("tokens", flat=True))


def test_the_ctxweb_format_lists_each_entry_with_its_kind_seq_id_and_tokens(api, weather):
    response = api.get("/sessions/weather/model-input")

    assert response.status_code == 200
    body = response.json()
    assert body["format"] == "ctxweb"
    assert body["session"] == "weather"
    assert body["as_of"] is None
    assert body["checkpoint"] is None
    assert body["omitted"] == []
    entries = body["messages"]
    assert [(e["kind"], e["role"], e.get("seq"), e.get("id")) for e in entries] == [
        ("instructions", "system", None, None),
        ("message", "user", 1, "m1"),
        ("message", "assistant", 2, "m2"),
        ("message", "tool", 3, "m3"),
        ("message", "assistant", 4, "m4"),
        ("message", "agent", 6, "m6"),
        ("message", "user", 7, "m7"),
    ]
    assert entries[0]["content"] == INSTRUCTIONS
    assert entries[2]["tool_calls"] == [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}]
    assert entries[3]["tool_call_id"] == "call_1"
    assert entries[6]["content"] == [{"type": "text", "text": "And this sky?"}, IMAGE]
    assert [e["tokens"] for e in entries[1:]] == [tokens_of([s]) for s in (1, 2, 3, 4, 6, 7)]


def test_the_token_totals_add_up_and_match_the_session(api, weather):
    tokens = api.get("/sessions/weather/model-input").json()["tokens"]

    instructions = count_message("system", INSTRUCTIONS).total
    assert tokens == {
        "total": 3 + instructions + tokens_of([1, 2, 3, 4, 6, 7]),
        "instructions": instructions,
        "summary": 0,
        "messages": tokens_of([1, 2, 3, 4, 6, 7]),
        "request": 0,
    }
    assert api.get("/sessions/weather").json()["model_input_tokens"] == tokens["total"]


def test_the_openai_format_is_a_valid_chat_completions_message_list(api, weather):
    body = api.get("/sessions/weather/model-input", query={"format": "openai"}).json()

    messages = body["messages"]
    assert body["format"] == "openai"
    assert openai_input_problems(messages) == []
    assert messages[0] == {"role": "system", "content": INSTRUCTIONS}
    assert messages[1] == {"role": "user", "content": "What is the weather in Lisbon?"}
    assert messages[2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}]}
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "24°C, sunny"}
    assert messages[5] == {"role": "user", "content": "Reminder: the user is flying this afternoon."}
    assert messages[6]["content"][1] == {"type": "image_url", "image_url": {"url": IMAGE["url"]}}
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "user", "user"]


def test_the_anthropic_format_has_the_instructions_apart_and_tool_blocks(api, weather):
    body = api.get("/sessions/weather/model-input", query={"format": "anthropic"}).json()

    assert body["format"] == "anthropic"
    assert body["system"] == INSTRUCTIONS
    messages = body["messages"]
    roles = [m["role"] for m in messages]
    assert roles[0] == "user"
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False)), roles
    assert {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Lisbon"}} in messages[1][
        "content"]
    assert messages[2]["content"][0] == {"type": "tool_result", "tool_use_id": "call_1", "content": "24°C, sunny"}
    last = messages[-1]["content"]
    assert {"type": "text", "text": "Reminder: the user is flying this afternoon."} in last
    assert {"type": "image", "source": {"type": "url", "url": IMAGE["url"]}} in last


def test_the_token_totals_are_the_same_in_every_format(api, weather):
    totals = [api.get("/sessions/weather/model-input", query={"format": f}).json()["tokens"]
              for f in ("ctxweb", "openai", "anthropic")]

    assert totals[0] == totals[1] == totals[2]


def test_as_of_rebuilds_the_input_as_it_was_right_after_that_message(api, weather):
    body = api.get("/sessions/weather/model-input", query={"as_of": 3}).json()

    assert body["as_of"] == 3
    assert [e.get("seq") for e in body["messages"]] == [None, 1, 2, 3]
    assert body["tokens"]["total"] == 3 + count_message("system", INSTRUCTIONS).total + tokens_of([1, 2, 3])


def test_as_of_zero_is_the_instructions_alone(api, weather):
    body = api.get("/sessions/weather/model-input", query={"as_of": 0}).json()

    assert [e["kind"] for e in body["messages"]] == ["instructions"]


def test_the_model_input_starts_from_the_latest_checkpoint(api, weather):
    compacted = api.post("/sessions/weather/compact",
                         {"force": True, "keep_recent_tokens": 1, "summary": "Lisbon was sunny."}).json()
    checkpoint = compacted["checkpoint"]
    assert checkpoint["last_seq"] == 6

    body = api.get("/sessions/weather/model-input").json()

    assert body["checkpoint"]["id"] == checkpoint["id"]
    assert [e["kind"] for e in body["messages"]] == ["instructions", "summary", "message"]
    summary = body["messages"][1]
    assert summary["role"] == "user"
    assert summary["content"] == "Summary of the earlier conversation, covering messages 1–6:\n\nLisbon was sunny."
    assert summary["checkpoint_id"] == checkpoint["id"]
    assert body["messages"][2]["seq"] == 7
    assert body["tokens"]["summary"] == checkpoint["summary_tokens"]
    assert body["tokens"]["total"] == 3 + body["tokens"]["instructions"] + checkpoint["summary_tokens"] + tokens_of([7])
    openai = api.get("/sessions/weather/model-input", query={"format": "openai"}).json()["messages"]
    assert openai[1] == {"role": "user", "content": summary["content"]}


def test_as_of_before_a_checkpoint_was_made_does_not_use_it(api, weather):
    api.post("/sessions/weather/compact", {"force": True, "keep_recent_tokens": 1, "summary": "Lisbon was sunny."})
    api.post("/sessions/weather/messages", {"messages": [{"role": "assistant", "content": "Clear skies."}]})

    before = api.get("/sessions/weather/model-input", query={"as_of": 6}).json()
    after = api.get("/sessions/weather/model-input", query={"as_of": 7}).json()

    assert before["checkpoint"] is None
    assert [e.get("seq") for e in before["messages"]] == [None, 1, 2, 3, 4, 6]
    assert after["checkpoint"] is not None
    assert [e["kind"] for e in after["messages"]] == ["instructions", "summary", "message"]


# A question, an assistant message calling for two cities, and the result for one of them.
TWO_CALLS_ONE_RESULT = [
    {"role": "user", "content": "Check both cities."},
    {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"id": "c_lis", "name": "get_weather", "arguments": "{}"},
        {"id": "c_opo", "name": "get_weather", "arguments": "{}"}]},
    {"role": "tool", "tool_call_id": "c_lis", "content": "sunny"},
]


def test_what_is_left_out_to_stay_valid_is_listed_in_omitted(api):
    api.post("/sessions/gaps/messages", {"messages": [
        *TWO_CALLS_ONE_RESULT,
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c_far", "name": "get_weather", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c_far", "content": "rain"},
        {"role": "user", "content": "Thanks."},
    ]})
    api.patch("/sessions/gaps/messages/4", {"include_in_messages": False})

    body = api.get("/sessions/gaps/model-input", query={"format": "openai"}).json()

    assert body["omitted"] == [
        {"seq": 2, "reason": "dropped_tool_call", "tool_call_id": "c_opo", "request_index": None,
         "whole_message": False},
        {"seq": 5, "reason": "orphan_tool_result", "tool_call_id": "c_far", "request_index": None,
         "whole_message": True},
    ]
    assert openai_input_problems(body["messages"]) == []
    assert [c["id"] for c in body["messages"][1]["tool_calls"]] == ["c_lis"]


@pytest.mark.parametrize("query", [{"format": "gemini"}, {"as_of": -1}, {"as_of": "last"}],
                         ids=["unknown format", "negative as_of", "as_of not a number"])
def test_it_rejects_bad_query_parameters_with_422(api, weather, query):
    assert_error(api.get("/sessions/weather/model-input", query=query), 422, "invalid_request")


def test_it_rejects_as_of_beyond_the_last_message_with_422(api, weather):
    assert_error(api.get("/sessions/weather/model-input", query={"as_of": 8}), 422, "invalid_as_of")


def test_it_answers_404_for_an_unknown_session(api, weather):
    assert_error(api.get("/sessions/no-weather/model-input"), 404, "session_not_found")


def test_another_projects_key_gets_404_and_no_data(other_api, weather):
    body = assert_error(other_api.get("/sessions/weather/model-input", query={"format": "openai"}),
                        404, "session_not_found")

    assert set(body) <= {"detail", "code"}


@pytest.mark.parametrize("key", ["bad%20key", "k" * 201])
def test_it_rejects_an_invalid_session_key_with_422(api, key):
    assert_error(api.get(f"/sessions/{key}/model-input"), 422, "invalid_session_key")


def test_it_rejects_a_request_without_a_valid_key_with_401(api, weather, bad_credentials):
    kwargs, code = bad_credentials

    body = assert_error(api.get("/sessions/weather/model-input", **kwargs), 401, code)

    assert "messages" not in body


# --- what a provider takes -------------------------------------------------------------------------


def test_calls_awaiting_their_results_are_left_out_and_listed_as_pending(api):
    api.post("/sessions/waiting/messages", {"messages": TWO_CALLS_ONE_RESULT})
    pending = [{"seq": 2, "request_index": None, "id": "c_opo", "name": "get_weather", "arguments": "{}"}]
    omitted = [{"seq": 2, "reason": "awaiting_tool_result", "tool_call_id": "c_opo", "request_index": None,
                "whole_message": False}]

    openai = api.get("/sessions/waiting/model-input", query={"format": "openai"}).json()
    anthropic = api.get("/sessions/waiting/model-input", query={"format": "anthropic"}).json()
    ctxweb = api.get("/sessions/waiting/model-input").json()

    assert [c["id"] for c in openai["messages"][1]["tool_calls"]] == ["c_lis"]
    assert openai_input_problems(openai["messages"]) == []
    assert [b.get("id") for b in anthropic["messages"][1]["content"]] == [None, "c_lis"]
    assert [c["id"] for c in ctxweb["messages"][1]["pending_tool_calls"]] == ["c_opo"]
    for body in (openai, anthropic, ctxweb):
        assert (body["pending_tool_calls"], body["omitted"]) == (pending, omitted)
        assert body["tokens"] == openai["tokens"]
    assert api.post("/tokens", {"messages": openai["messages"]}).json()["total"] == openai["tokens"]["total"]
    assert api.get("/sessions/waiting").json()["model_input_tokens"] == openai["tokens"]["total"]


def test_a_session_of_only_instructions_has_nothing_to_send_to_anthropic(api):
    api.put("/sessions/bare", {"instructions": INSTRUCTIONS})

    body = assert_error(api.get("/sessions/bare/model-input", query={"format": "anthropic"}), 409, "nothing_to_send")

    assert body["detail"] == ("Nothing to send: the model input holds no message besides the instructions, and "
                              "Anthropic Messages needs at least one. Append a user message first.")
    openai = api.get("/sessions/bare/model-input", query={"format": "openai"})
    assert openai.json()["messages"] == [{"role": "system", "content": INSTRUCTIONS}]  # OpenAI takes it
    assert api.get("/sessions/bare/model-input").status_code == 200


def test_an_empty_session_has_nothing_to_send_to_either_provider(api):
    api.put("/sessions/empty", {"title": "nothing yet"})

    for fmt in ("openai", "anthropic"):
        assert_error(api.get("/sessions/empty/model-input", query={"format": fmt}), 409, "nothing_to_send")
    assert api.get("/sessions/empty/model-input").json()["messages"] == []


@pytest.mark.parametrize("fmt", ["ctxweb", "openai", "anthropic", "openai-responses"])
def test_the_response_is_what_ninja_renders_from_the_schema(imported_files, fmt):
    """The model input's messages skip the response schema and are written by orjson
    (sessions.http.model_input.model_input_json); every imported transcript's input, in each format, with and without
    a checkpoint, is the JSON value ninja renders from ModelInputOut with them validated and dumped, its
    fields in the same order, and everything but the messages byte for byte the same."""
    from ninja.renderers import JSONRenderer

    from ctxweb.api import api as ninja_api
    from sessions.access.api_keys import create_api_key
    from sessions.context.provider_input import model_input_response
    from sessions.context.recorded_input import build_input
    from sessions.http.schemas import ModelInputOut
    from tests.api.conftest import Api

    assert type(ninja_api.renderer) is JSONRenderer  # the renderer sessions.http.model_input.model_input_json uses
    compared = set()
    for project, _ in imported_files.values():
        api = Api(create_api_key(project, "bytes")[1])
        sessions = list(project.sessions.order_by("pk")[:3])
        compact(sessions[0], force=True, max_tokens=1_000, keep_recent_tokens=200, summary="what happened first")
        for session in sessions:
            session.refresh_from_db()
            response = api.get(f"/sessions/{session.key}/model-input", query={"format": fmt})
            assert response.status_code == 200, response.content[:300]
            body = model_input_response(build_input(session), fmt)
            expected = JSONRenderer().render(None, ModelInputOut.model_validate(body).model_dump(), response_status=200)
            got, want = json.loads(response.content), json.loads(expected)
            assert got == want, (project.name, session.key)
            assert list(got) == list(want)  # the schema's order
            # Only the messages' bytes differ: orjson's (no spaces, UTF-8, and in the ctxweb and openai formats
            # on SQLite a string content as it is stored, with \u escapes) where ninja's renderer wrote its own.
            theirs = json.dumps(want["messages"])
            before, after = expected[:expected.index(theirs)], expected[expected.index(theirs) + len(theirs):]
            content = response.content.decode()
            assert content.startswith(before) and content.endswith(after), (project.name, session.key)
            assert json.loads(content[len(before):len(content) - len(after)]) == want["messages"]
            assert response["Content-Type"] == "application/json; charset=utf-8" and response["ETag"]
            compared.add((bool(body["checkpoint"]), bool(body["omitted"]), bool(body["pending_tool_calls"])))
    assert (True, False, False) in compared or (True, True, False) in compared  # a checkpoint was compared


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "caf\u00e9 \u2013 \U0001f600 \"quoted\" \\ \n"}],
    [{"role": "user", "content": "a lone surrogate \ud800 (SQLite can hold one)"}],  # orjson refuses it
    [{"role": "tool", "content": "x", "big": 2 ** 70}],  # past 64 bits: orjson refuses it
], ids=["unicode", "lone surrogate", "big integer"])
def test_the_messages_json_is_the_same_value_whichever_writer_took_it(messages):
    """orjson writes the model input's messages; what it refuses goes to the standard library, and
    either way a client reads back exactly what was rendered."""
    from sessions.http.model_input import messages_json

    assert json.loads(messages_json(messages)) == messages


@pytest.mark.parametrize("text", [
    '["caf\\u00e9", "\\ud83d\\ude00", [{"type": "text", "text": "t"}], null]',
    '["\\ud800 escaped alone"]',  # SQLite keeps a lone surrogate escaped; orjson refuses to read it
], ids=["escapes", "lone surrogate"])
def test_stored_json_columns_read_the_same_as_the_standard_library_reads_them(text):
    from sessions.context.model_input import _json_values

    assert _json_values(text) == json.loads(text)


def test_a_string_content_is_sent_as_stored_and_reads_back_the_same(api):
    """In the ctxweb and openai formats a string content goes into the response as the JSON text the
    database stores it as (StoredText, on SQLite), not decoded and encoded again: a client reads back
    the same values as from the input built with every content decoded, whatever the text holds."""
    from django.db import connection

    from sessions.context.model_input import build_model_input
    from sessions.context.provider_input import model_input_response
    from sessions.models import Session
    from sessions.wire.ctxweb import StoredText

    api.put("/sessions/texts", {"compaction": {"auto": False}})
    texts = ["caf\u00e9 \u2013 \U0001f600", '"quoted" \\ \n\t', "", " ", "<b>&amp;</b>", "\\u00e9 written out"]
    messages = [{"role": "user", "content": text} for text in texts] + [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "\u00e9"},
        {"role": "assistant", "content": [{"type": "text", "text": "in parts \u00e9"}]},
        {"role": "user", "content": "the last \u00e9"},
    ]
    appended = api.post("/sessions/texts/messages", {"messages": messages})
    assert appended.status_code == 200, appended.content
    session = Session.objects.get(key="texts")
    as_stored = build_model_input(session, text_as_stored=True)
    kept = [type(entry.content) for entry in as_stored.entries]
    if connection.vendor == "sqlite":  # every non-empty string; the empty one and the parts decoded
        assert kept.count(StoredText) == len(messages) - 3 and kept.count(str) == 2 and kept.count(list) == 1, kept
    for fmt in ("ctxweb", "openai"):
        got = json.loads(api.get("/sessions/texts/model-input", query={"format": fmt}).content)
        assert got["messages"] == model_input_response(build_model_input(session), fmt)["messages"]
    openai = json.loads(api.get("/sessions/texts/model-input", query={"format": "openai"}).content)["messages"]
    assert openai[len(texts)]["content"] is None and openai[len(texts)]["tool_calls"]  # "" with calls: null


def test_the_messages_json_writes_stored_text_as_it_is_either_way():
    from sessions.http.model_input import messages_json
    from sessions.wire.ctxweb import StoredText

    stored = StoredText(json.dumps("caf\u00e9 \ud800"))
    assert messages_json([{"content": stored}]) == b'[{"content":' + stored.json.encode() + b"}]"  # orjson
    # past 64 bits: the standard library writes it all
    assert json.loads(messages_json([{"content": stored, "big": 2 ** 70}])) == [{"content": "caf\u00e9 \ud800",
                                                                                 "big": 2 ** 70}]


# --- the openai input written from its stored renderings (tests/test_stored_openai.py) -----------------


@pytest.mark.parametrize("path", TRANSCRIPT_FILES, ids=[p.name[:40] for p in TRANSCRIPT_FILES])
def test_every_imported_transcript_gives_the_input_built_in_full(imported_files, path):
    project, _ = imported_files[path]
    sessions = list(Session.objects.filter(project=project).select_related("project").order_by("pk"))

    answered, different = compare(sessions)

    assert different == []
    assert answered >= 1 or all(stored_openai_response(s, latest_checkpoint(s)) is None for s in sessions)


def test_the_transcripts_are_answered_from_the_stored_parts_nearly_always(imported_files):
    """The stored path is the one taken, not the exception: over every transcript, the sessions it
    declines are those with a call awaiting its result or sent without some of its calls."""
    sessions = list(Session.objects.filter(project__in=[p for p, _ in imported_files.values()]))
    answered, different = compare(sessions)
    # A session rebuilt from recorded requests answers what its application sent, never from these parts.
    declined = [s for s in sessions if from_stored(s) is None and not s.request_count]

    assert different == []
    assert answered > 2 * len(declined)
    for session in declined:
        assert any(o["reason"] == "awaiting_tool_result" or not o["whole_message"] for o in session.input_left_out)


def test_after_compactions_and_a_flag_the_input_is_still_the_one_built_in_full(imported_files):
    project, _ = imported_files[next(p for p in TRANSCRIPT_FILES if "tau-bench" in p.name)]
    sessions = list(Session.objects.filter(project=project).order_by("-message_count")[:3])
    for session in sessions:
        compact(session, force=True, max_tokens=2000, keep_recent_tokens=500)
        session.refresh_from_db()
        assert session.checkpoint_count >= 1
        newest_user = session.messages.filter(role="user").order_by("-seq").first()
        update_message(project, session.key, newest_user.seq, {"include_in_messages": False}, "test")

    answered, different = compare(Session.objects.filter(pk__in=[s.pk for s in sessions]))

    assert (answered, different) == (3, [])
    for session in sessions:
        session.refresh_from_db()
        body = from_stored(session)
        summary = body["messages"][1 if session.instructions else 0]  # after the instructions
        assert summary["content"].startswith("Summary of the earlier conversation")
        assert body["checkpoint"]["number"] == session.checkpoint_count
