"""PATCH /api/v1/sessions/{key}/messages/{seq}: change include_in_messages and/or attributes;
records MESSAGE_UPDATED."""

import hashlib
import json

import pytest

from sessions.models import Event, Message
from sessions.store.event_types import (
    EVENT_ID_BYTES,
    EVENT_KEYS_BYTES,
    EVENT_MAX_BYTES,
    EVENT_VALUE_BYTES,
    AttributesChange,
    MessageUpdated,
    ValueSummary,
    shown_keys,
    stored_size,
)
from sessions.store.events import event_data
from tests.api.conftest import assert_error, session_state, stored

pytestmark = pytest.mark.django_db


def raw(seq: int) -> dict:
    return Message.objects.filter(session__key="chat", seq=seq).values().get()


def input_tokens(api) -> int:
    return api.get("/sessions/chat/model-input").json()["tokens"]["total"]


def test_hiding_a_message_takes_it_out_of_the_model_input_and_records_the_change(api, conversation):
    before_tokens, before_raw = input_tokens(api), raw(4)

    response = api.patch("/sessions/chat/messages/4", {"include_in_messages": False})

    assert response.status_code == 200
    assert response.json()["seq"] == 4
    assert response.json()["include_in_messages"] is False
    assert input_tokens(api) == before_tokens - before_raw["tokens"]
    assert api.get("/sessions/chat").json()["model_input_tokens"] == before_tokens - before_raw["tokens"]
    assert 4 not in [m.get("seq") for m in api.get("/sessions/chat/model-input").json()["messages"]]
    assert raw(4) == {**before_raw, "include_in_messages": False}
    event = Event.objects.get(session__key="chat", type="MESSAGE_UPDATED")
    assert event.actor == "api:test-app"
    assert (event.data["seq"], event.data["id"]) == (4, "m4")
    assert event.data["changes"] == {"include_in_messages": {"from": True, "to": False}}


def test_showing_a_hidden_message_again_puts_it_back(api, conversation):
    full = input_tokens(api)
    api.patch("/sessions/chat/messages/4", {"include_in_messages": False})

    api.patch("/sessions/chat/messages/4", {"include_in_messages": True})

    assert input_tokens(api) == full
    assert Event.objects.filter(session__key="chat", type="MESSAGE_UPDATED").count() == 2


def test_hiding_a_tool_call_leaves_its_result_out_as_an_orphan(api, conversation):
    before = input_tokens(api)

    api.patch("/sessions/chat/messages/2", {"include_in_messages": False})

    model_input = api.get("/sessions/chat/model-input").json()
    assert [o["seq"] for o in model_input["omitted"]] == [3]
    assert model_input["omitted"][0]["reason"] == "orphan_tool_result"
    assert model_input["tokens"]["total"] == before - raw(2)["tokens"] - raw(3)["tokens"]


def test_changing_attributes_records_the_change_and_leaves_the_model_input_alone(api, conversation):
    before_tokens, before_raw = input_tokens(api), raw(1)

    response = api.patch("/sessions/chat/messages/1", {"attributes": {"ticket": "T-1", "nested": {"a": [1, 2]}}})

    assert response.status_code == 200
    assert response.json()["attributes"] == {"ticket": "T-1", "nested": {"a": [1, 2]}}
    assert raw(1) == {**before_raw, "attributes": {"ticket": "T-1", "nested": {"a": [1, 2]}}}
    assert input_tokens(api) == before_tokens
    event = Event.objects.get(session__key="chat", type="MESSAGE_UPDATED")
    change = event.data["changes"]["attributes"]
    assert (change["keys"], change["keys_changed"]) == (["nested", "ticket"], 2)
    assert change["before"] == {"bytes": 2, "sha256": hashlib.sha256(b"{}").hexdigest(), "value": {}}
    after = b'{"nested":{"a":[1,2]},"ticket":"T-1"}'
    assert change["after"] == {"bytes": len(after), "sha256": hashlib.sha256(after).hexdigest(),
                               "value": {"ticket": "T-1", "nested": {"a": [1, 2]}}}


def test_edits_of_large_attributes_record_a_bounded_summary_not_the_attributes(api, conversation):
    # 40 edits of 4 x 60 kB of attributes: the events held 40 x 480 kB (before and after, whole).
    for n in range(40):
        attributes = {f"blob{k}": f"{n}-{k}-" + "x" * 60_000 for k in range(4)}
        assert api.patch("/sessions/chat/messages/1", {"attributes": attributes}).status_code == 200

    events = list(Event.objects.filter(session__key="chat", type="MESSAGE_UPDATED").order_by("pk"))
    assert len(events) == 40
    assert max(len(json.dumps(e.data)) for e in events) < 2_000
    last = events[-1].data["changes"]["attributes"]
    assert last["keys"] == ["blob0", "blob1", "blob2", "blob3"] and last["keys_changed"] == 4
    whole = json.dumps(attributes, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
    assert last["after"] == {"bytes": len(whole), "sha256": hashlib.sha256(whole).hexdigest()}
    listed = api.get("/sessions/chat/events", query={"type": "MESSAGE_UPDATED"})
    assert listed.status_code == 200 and len(listed.content) < 40 * 2_000


def test_an_edit_of_many_keys_names_the_first_twenty_keys_and_counts_them_all(api, conversation):
    api.patch("/sessions/chat/messages/1", {"attributes": {f"k{n:03}": n for n in range(300)}})

    change = Event.objects.get(session__key="chat", type="MESSAGE_UPDATED").data["changes"]["attributes"]
    assert change["keys_changed"] == 300
    assert change["keys"] == [f"k{n:03}" for n in range(20)]
    assert "value" not in change["after"] and change["before"]["value"] == {}


def test_long_changed_keys_are_cut_and_named_while_they_fit_the_bound(api, conversation):
    api.patch("/sessions/chat/messages/1", {"attributes": {f"k{n:03}" + "y" * 500: n for n in range(300)}})

    change = Event.objects.get(session__key="chat", type="MESSAGE_UPDATED").data["changes"]["attributes"]
    assert change["keys_changed"] == 300
    # Each key's JSON cut to EVENT_KEY_BYTES (100) with an ellipsis, their list within EVENT_KEYS_BYTES (500).
    assert change["keys"] == [f"k{n:03}" + "y" * 88 + "…" for n in range(len(change["keys"]))]
    assert len(change["keys"]) == 4 and stored_size(change["keys"]) <= EVENT_KEYS_BYTES


# The worst PATCH bodies the API accepts for the size of the event they record: changed keys as long as
# a text may be or as many as a body may hold, in the characters whose JSON escapes are longest
# (astral: 12 bytes, other non-ASCII and control characters: 6), values right at the bound where they
# are still kept, and the message's client id as long as an id may be (200 astral characters).
ASTRAL, CONTROL, ACCENT = "\U0001f600", "\x01", "é"


def kept_value(char: str, key: str = "v") -> dict:
    """The largest attributes whose JSON is still kept whole in the event, in `char`s."""
    text = ""
    while stored_size({key: text + char}) <= EVENT_VALUE_BYTES:
        text += char
    return {key: text}


def many_keys(char: str, limit: int) -> dict:
    # Keys as long as fits a body of `limit` bytes (the test client sends ASCII-escaped JSON).
    per_key = (limit - 1_000) // 40 // len(json.dumps(char)[1:-1])
    return {f"{n:02}" + char * per_key: n for n in range(40)}


WORST_BODIES = {
    "astral keys": lambda limit: many_keys(ASTRAL, limit),
    "control-character keys": lambda limit: many_keys(CONTROL, limit),
    "accented keys": lambda limit: many_keys(ACCENT, limit),
    "one key of a whole text": lambda limit: {"k" * 1_000_000: 1},
    "thousands of short keys": lambda limit: {f"{ASTRAL * 8}{n:05}": 0 for n in range(50_000)},
    "astral value at the bound": lambda limit: kept_value(ASTRAL),
    "control value at the bound": lambda limit: kept_value(CONTROL),
    "nested value": lambda limit: {"a": [[[[{"b": [1, 2.5, None, True, "x"]}]]]] * 3},
}


@pytest.mark.parametrize("worst", list(WORST_BODIES.values()), ids=list(WORST_BODIES))
def test_no_message_updated_event_exceeds_the_documented_bound_whatever_the_patch(api, append, settings, worst):
    limit = settings.CTXWEB_MAX_REQUEST_BYTES
    before = kept_value(ASTRAL, "before")
    append("worst", [{"id": ASTRAL * 200, "role": "user", "content": "hi", "attributes": before}])
    body = {"include_in_messages": False, "attributes": worst(limit)}
    assert len(json.dumps(body)) <= limit

    response = api.patch("/sessions/worst/messages/1", body)

    assert response.status_code == 200, response.content[:300]
    event = Event.objects.get(session__key="worst", type="MESSAGE_UPDATED")
    # As SQLite stores it (ASCII escapes) and as the API lists it (UTF-8): both under the bound.
    assert stored_size(event.data) < EVENT_MAX_BYTES == 2_000
    assert len(json.dumps(event.data, ensure_ascii=False).encode()) < EVENT_MAX_BYTES
    listed = api.get("/sessions/worst/events", query={"type": "MESSAGE_UPDATED"})
    assert len(json.dumps(listed.json()["items"][0]["data"]).encode()) < EVENT_MAX_BYTES
    assert event_data(event).changes.attributes.keys_changed == len(body["attributes"]) + len(before)


def test_an_event_with_every_part_at_its_bound_is_under_the_documented_size():
    # Not only the bodies above: each part of the event at the most it may hold, together.
    keys = shown_keys(sorted(f"{n:02}" + ASTRAL * 400 for n in range(40)))
    change = AttributesChange(keys=keys, keys_changed=2**63 - 1, before=ValueSummary.of(kept_value(CONTROL)),
                              after=ValueSummary.of(kept_value(ASTRAL)))
    event = MessageUpdated(seq=2**31 - 1, id=CONTROL * 200, input_tokens=2**63 - 1, at_seq=2**31 - 1,
                           changes={"include_in_messages": {"from": True, "to": False}, "attributes": change})
    data = event.model_dump(mode="json")

    assert stored_size(data["changes"]["attributes"]["keys"]) <= EVENT_KEYS_BYTES
    assert "value" in data["changes"]["attributes"]["before"] and "value" in data["changes"]["attributes"]["after"]
    assert stored_size(data) < EVENT_MAX_BYTES


def test_a_long_client_id_is_cut_in_the_event_and_parses_back_unchanged(api, append):
    append("ids", [{"id": ASTRAL * 200, "role": "user", "content": "hi"}])

    api.patch("/sessions/ids/messages/1", {"include_in_messages": False})

    event = Event.objects.get(session__key="ids", type="MESSAGE_UPDATED")
    assert event.data["id"].endswith("…") and (ASTRAL * 200).startswith(event.data["id"][:-1])
    assert stored_size(event.data["id"]) <= EVENT_ID_BYTES
    assert event_data(event).model_dump(mode="json") == event.data


def test_a_patch_that_changes_nothing_records_nothing(api, conversation):
    before = stored()

    response = api.patch("/sessions/chat/messages/1", {"include_in_messages": True})

    assert response.status_code == 200
    assert stored() == before


@pytest.mark.parametrize("body", [
    pytest.param({"content": "rewritten history"}, id="content"),
    pytest.param({"role": "system"}, id="role"),
    pytest.param({"include_in_messages": "no"}, id="flag not a boolean"),
    pytest.param({"attributes": "not an object"}, id="attributes not an object"),
    pytest.param({"attributes": {"k": "nul \x00"}, "include_in_messages": False}, id="NUL in attributes"),
])
def test_it_rejects_a_bad_body_with_422_and_changes_nothing(api, conversation, body):
    before, message = stored(), raw(1)

    assert_error(api.patch("/sessions/chat/messages/1", body), 422)

    assert stored() == before
    assert raw(1) == message


def test_fields_other_than_the_two_that_may_change_are_invalid_requests(api, conversation):
    assert_error(api.patch("/sessions/chat/messages/1", {"content": "x"}), 422, "invalid_request")


def test_it_rejects_a_body_that_is_not_json_with_400(api, conversation):
    before, message = stored(), raw(1)

    assert_error(api.patch("/sessions/chat/messages/1", data="include_in_messages=false"), 400, "invalid_json")

    assert stored() == before
    assert raw(1) == message


def test_it_rejects_an_oversized_body_with_413(api, conversation, small_request_limit):
    before, message = stored(), raw(1)

    response = api.patch("/sessions/chat/messages/1", {"attributes": {"blob": "x" * (small_request_limit + 1)}})

    assert_error(response, 413, "request_too_large")
    assert stored() == before
    assert raw(1) == message


@pytest.mark.parametrize("seq", ["6", "0", "-1", "99999999999999999999"])
def test_it_answers_404_for_a_message_that_does_not_exist(api, conversation, seq):
    before = stored()

    response = api.patch(f"/sessions/chat/messages/{seq}", {"include_in_messages": False})

    assert response.status_code in (404, 422)
    assert_error(response, response.status_code)
    if seq == "6":
        assert response.json()["code"] == "message_not_found"
    assert stored() == before


def test_it_rejects_a_seq_that_is_not_a_number_with_422(api, conversation):
    assert_error(api.patch("/sessions/chat/messages/first", {"include_in_messages": False}), 422, "invalid_request")


def test_it_answers_404_for_an_unknown_session(api, conversation):
    assert_error(api.patch("/sessions/nope/messages/1", {"include_in_messages": False}), 404, "session_not_found")


def test_another_projects_key_gets_404_and_changes_nothing(other_api, conversation, project):
    before, state, message = stored(), session_state(project, "chat"), raw(1)

    body = assert_error(other_api.patch("/sessions/chat/messages/1", {"include_in_messages": False}),
                        404, "session_not_found")

    assert set(body) <= {"detail", "code"}
    assert stored() == before
    assert session_state(project, "chat") == state
    assert raw(1) == message


@pytest.mark.parametrize("key", ["bad%20key", "k" * 201])
def test_it_rejects_an_invalid_session_key_with_422(api, key):
    assert_error(api.patch(f"/sessions/{key}/messages/1", {"include_in_messages": False}), 422,
                 "invalid_session_key")


def test_it_rejects_a_request_without_a_valid_key_with_401(api, conversation, bad_credentials):
    kwargs, code = bad_credentials
    before, message = stored(), raw(1)

    assert_error(api.patch("/sessions/chat/messages/1", {"include_in_messages": False}, **kwargs), 401, code)

    assert stored() == before
    assert raw(1) == message
