"""POST /api/v1/sessions/{key}/compact: request compaction; the outcome and its events."""

import pytest

from sessions.models import Checkpoint, Event, Message
from tests.api.conftest import assert_error, session_state, stored
from tests.builders import assistant, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def four_turns(api, settings):
    """Four turns of 100 tokens (a 40-token question, a 60-token answer): the model input is 403 tokens,
    over max_tokens 300; keep_recent_tokens 150 keeps only the current turn."""
    settings.CTXWEB_SUMMARY_MAX_TOKENS = 2000
    api.put("/sessions/talk", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 150, "auto": False,
                                              "summarizer": "extractive"}})
    messages = []
    for n, city in enumerate(["Lisbon", "Porto", "Faro", "Braga"], start=1):
        messages += [user(40, f"Question {n}: what is the weather in {city}?"),
                     assistant(60, f"Answer {n}: it is sunny in {city}.")]
    assert api.post("/sessions/talk/messages", {"messages": messages}).status_code == 200
    return "talk"


def compact(api, body=None, key="talk", **kwargs):
    return api.post(f"/sessions/{key}/compact", {} if body is None else body, **kwargs)


def raw_log(key="talk") -> list[dict]:
    return list(Message.objects.filter(session__key=key).order_by("seq").values())


def test_it_compacts_a_session_over_its_threshold_and_returns_the_outcome(api, four_turns):
    log = raw_log()

    response = compact(api)

    assert response.status_code == 200
    outcome = response.json()
    assert outcome["status"] == "completed"
    assert outcome["reason"] is None
    assert (outcome["max_tokens"], outcome["keep_recent_tokens"], outcome["tokens_before"]) == (300, 150, 403)
    checkpoint = outcome["checkpoint"]
    assert (checkpoint["first_seq"], checkpoint["last_seq"], checkpoint["created_at_seq"]) == (1, 6, 8)
    assert checkpoint["previous_id"] is None
    assert checkpoint["summarizer"] == "extractive"
    assert checkpoint["trigger"] == "request"
    assert checkpoint["replaced_tokens"] == outcome["replaced_tokens"] == 300
    assert outcome["summary_tokens"] == checkpoint["summary_tokens"] < 300
    assert outcome["tokens_after"] == 3 + checkpoint["summary_tokens"] + 100
    assert outcome["still_over_threshold"] is False
    assert raw_log() == log, "compaction never changes the raw log"
    model_input = api.get("/sessions/talk/model-input").json()
    assert [e.get("seq") for e in model_input["messages"]] == [None, 7, 8]
    assert model_input["tokens"]["total"] == outcome["tokens_after"]
    assert api.get("/sessions/talk").json()["checkpoint_count"] == 1


def test_it_returns_the_events_it_recorded(api, four_turns):
    outcome = compact(api).json()

    events = outcome["events"]
    assert [e["type"] for e in events] == ["COMPACTION_STARTED", "COMPACTION_COMPLETED"]
    assert all(e["actor"] == "api:test-app" for e in events)
    assert events[0]["data"]["trigger"] == "request"
    completed = events[1]["data"]
    assert completed["checkpoint_id"] == outcome["checkpoint"]["id"]
    assert completed["covered_seq_range"] == [1, 6]
    assert {k: completed[k] for k in ("max_tokens", "keep_recent_tokens", "tokens_before", "replaced_tokens",
                                      "summary_tokens", "tokens_after", "still_over_threshold")} == {
        "max_tokens": 300, "keep_recent_tokens": 150, "tokens_before": 403, "replaced_tokens": 300,
        "summary_tokens": outcome["summary_tokens"], "tokens_after": outcome["tokens_after"],
        "still_over_threshold": False}
    listed = api.get("/sessions/talk/events", query={"type": "COMPACTION_"}).json()["items"]
    assert [e["id"] for e in listed] == [e["id"] for e in events]


def test_under_the_threshold_it_is_recorded_as_skipped(api, four_turns):
    response = compact(api, {"max_tokens": 1000})

    outcome = response.json()
    assert response.status_code == 200
    assert (outcome["status"], outcome["reason"], outcome["checkpoint"]) == ("skipped", "under_threshold", None)
    assert outcome["max_tokens"] == 1000
    assert [e["type"] for e in outcome["events"]] == ["COMPACTION_STARTED", "COMPACTION_SKIPPED"]
    assert outcome["events"][1]["data"]["reason"] == "under_threshold"
    assert not Checkpoint.objects.exists()


def test_force_compacts_under_the_threshold(api, four_turns):
    outcome = compact(api, {"max_tokens": 1000, "force": True}).json()

    assert outcome["status"] == "completed"
    assert outcome["checkpoint"]["last_seq"] == 6
    assert outcome["still_over_threshold"] is False


def test_exactly_at_the_threshold_is_under_it(api, four_turns):
    assert compact(api, {"max_tokens": 403}).json()["reason"] == "under_threshold"
    assert compact(api, {"max_tokens": 402}).json()["status"] == "completed"


def test_keep_recent_tokens_in_the_request_moves_the_cut(api, four_turns):
    outcome = compact(api, {"keep_recent_tokens": 250}).json()

    assert outcome["keep_recent_tokens"] == 250
    assert outcome["checkpoint"]["last_seq"] == 4
    assert outcome["replaced_tokens"] == 200
    session = api.get("/sessions/talk").json()
    assert session["compaction"]["keep_recent_tokens"] == 150, "an override is for this compaction only"


def test_a_supplied_summary_becomes_the_checkpoint(api, four_turns):
    outcome = compact(api, {"summary": "  The user asked about the weather in Lisbon, Porto and Faro.  "}).json()

    assert outcome["status"] == "completed"
    assert outcome["checkpoint"]["summary"] == "The user asked about the weather in Lisbon, Porto and Faro."
    assert outcome["checkpoint"]["summarizer"] == "supplied"
    first = api.get("/sessions/talk/model-input").json()["messages"][0]
    assert first["content"] == ("Summary of the earlier conversation, covering messages 1–6:\n\n"
                                "The user asked about the weather in Lisbon, Porto and Faro.")


def test_a_supplied_summary_not_smaller_than_what_it_replaces_is_skipped(api, four_turns):
    outcome = compact(api, {"summary": "word " * 400}).json()

    assert (outcome["status"], outcome["reason"]) == ("skipped", "not_smaller")
    assert [e["type"] for e in outcome["events"]] == ["COMPACTION_STARTED", "COMPACTION_SKIPPED"]
    assert not Checkpoint.objects.exists()


def test_a_second_compaction_extends_the_first(api, four_turns):
    first = compact(api).json()["checkpoint"]
    api.post("/sessions/talk/messages", {"messages": [
        user(40, "Question 5: and in Coimbra?"), assistant(60, "Answer 5: rain."),
        user(40, "Question 6: and in Evora?"), assistant(60, "Answer 6: hot.")]})

    second = compact(api, {"summary": "Six cities were discussed."}).json()["checkpoint"]

    assert second["previous_id"] == first["id"]
    assert (second["first_seq"], second["last_seq"]) == (7, 10)
    assert second["replaced_tokens"] == first["summary_tokens"] + 200


def test_nothing_to_compact_is_recorded_as_skipped(api):
    api.post("/sessions/short/messages", {"messages": [user(500, "One long question.")]})

    outcome = compact(api, {"force": True}, key="short").json()

    assert (outcome["status"], outcome["reason"]) == ("skipped", "nothing_to_compact")
    assert [e["type"] for e in outcome["events"]] == ["COMPACTION_STARTED", "COMPACTION_SKIPPED"]


@pytest.mark.parametrize("body", [
    pytest.param({"force": "very"}, id="force not a boolean"),
    pytest.param({"max_tokens": -1}, id="negative max_tokens"),
    pytest.param({"keep_recent_tokens": 1.5}, id="fractional keep_recent_tokens"),
    pytest.param({"max_tokens": 10**12}, id="huge max_tokens"),
    pytest.param({"summary": 42}, id="summary not a string"),
    pytest.param({"summarizer": "magic"}, id="unknown summarizer"),
    pytest.param({"forse": True}, id="unknown field"),
])
def test_it_rejects_a_bad_body_with_422_and_records_nothing(api, four_turns, project, body):
    before, state = stored(), session_state(project, "talk")

    assert_error(compact(api, body), 422, "invalid_request")

    assert stored() == before
    assert session_state(project, "talk") == state


def test_it_rejects_a_summary_a_database_cannot_store_with_422(api, four_turns):
    before = stored()

    assert_error(compact(api, {"summary": "nul \x00 byte"}), 422)

    assert stored() == before


def test_it_rejects_a_body_that_is_not_json_with_400(api, four_turns):
    before = stored()

    assert_error(api.post("/sessions/talk/compact", data="force"), 400, "invalid_json")

    assert stored() == before


def test_it_rejects_an_oversized_body_with_413(api, four_turns, small_request_limit):
    before = stored()

    assert_error(compact(api, {"summary": "x" * (small_request_limit + 1)}), 413, "request_too_large")

    assert stored() == before


def test_it_answers_404_for_an_unknown_session(api, four_turns):
    before = stored()

    assert_error(compact(api, {"force": True}, key="missing"), 404, "session_not_found")

    assert stored() == before


def test_another_projects_key_gets_404_and_compacts_nothing(other_api, four_turns):
    before = stored()

    body = assert_error(compact(other_api, {"force": True}), 404, "session_not_found")

    assert set(body) <= {"detail", "code"}
    assert stored() == before


@pytest.mark.parametrize("key", ["bad%20key", "k" * 201])
def test_it_rejects_an_invalid_session_key_with_422(api, key):
    assert_error(compact(api, {"force": True}, key=key), 422, "invalid_session_key")


def test_it_rejects_a_request_without_a_valid_key_with_401(api, four_turns, bad_credentials):
    kwargs, code = bad_credentials
    before = stored()

    assert_error(compact(api, {"force": True}, **kwargs), 401, code)

    assert stored() == before
    assert not Event.objects.filter(type__startswith="COMPACTION_").exists()
