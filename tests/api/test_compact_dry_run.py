"""POST /api/v1/sessions/{key}/compact with dry_run: what a compaction would do, with nothing stored."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.context.summarizers import SUMMARIZERS
from sessions.models import CompactionRun
from tests.api import test_compact
from tests.api.conftest import assert_error, session_state, stored
from tests.builders import assistant, user

pytestmark = pytest.mark.django_db
four_turns = test_compact.four_turns  # 403 tokens over max_tokens 300, keep_recent_tokens 150


def dry_run(api, key="talk", **settings):
    return api.post(f"/sessions/{key}/compact", {"dry_run": True, **settings})


def nothing_changes(project, key="talk"):
    """Rows of every kind and the session row, to show a dry run left them as they were."""
    return stored(), CompactionRun.objects.count(), session_state(project, key)


def test_it_says_what_a_compaction_would_cover_and_stores_nothing(api, project, four_turns):
    before = nothing_changes(project)

    response = dry_run(api)

    assert response.status_code == 200
    preview = response.json()
    assert preview["dry_run"] is True
    assert preview["would_compact"] is True
    assert preview["reason"] is None
    assert (preview["first_seq"], preview["last_seq"], preview["covered_turns"]) == (1, 6, 3)
    assert preview["covered_tokens"] == preview["replaced_tokens"] == 300
    assert preview["tokens_before"] == 403
    assert preview["summary_estimated"] is False
    assert "Lisbon" in preview["summary"]
    assert preview["summary_tokens"] < 300
    assert preview["tokens_after"] == 3 + preview["summary_tokens"] + 100
    assert preview["settings"] == {"max_tokens": 300, "keep_recent_tokens": 150, "summarizer": "extractive"}
    assert "would cover messages #1–#6" in preview["explanation"]
    assert nothing_changes(project) == before


def test_its_projection_matches_what_the_real_run_then_does(api, four_turns):
    preview = dry_run(api).json()

    outcome = api.post("/sessions/talk/compact", {}).json()

    assert outcome["status"] == "completed"
    assert [outcome["checkpoint"]["first_seq"], outcome["checkpoint"]["last_seq"]] == [preview["first_seq"], preview["last_seq"]]
    assert outcome["summary_tokens"] == preview["summary_tokens"]
    assert outcome["tokens_after"] == preview["tokens_after"]


def test_it_uses_the_settings_of_the_request_over_the_sessions(api, project, four_turns):
    before = nothing_changes(project)

    preview = dry_run(api, keep_recent_tokens=250).json()

    assert preview["settings"]["keep_recent_tokens"] == 250
    assert (preview["first_seq"], preview["last_seq"], preview["covered_turns"]) == (1, 4, 2)
    assert api.get("/sessions/talk").json()["compaction"]["keep_recent_tokens"] == 150, "the session keeps its own"
    assert nothing_changes(project) == before


def test_it_explains_that_keep_recent_tokens_keeps_every_turn(api, project, four_turns):
    before = nothing_changes(project)

    preview = dry_run(api, keep_recent_tokens=20_000).json()

    assert preview["would_compact"] is False
    assert preview["reason"] == "nothing_to_compact"
    assert preview["first_seq"] is None and preview["last_seq"] is None
    assert preview["tokens_after"] == preview["tokens_before"] == 403
    assert preview["explanation"].startswith("keep_recent_tokens 20,000 keeps every turn of this 403-token session")
    assert "Lower keep_recent_tokens below 400" in preview["explanation"]
    assert nothing_changes(project) == before


def test_it_explains_a_session_under_its_threshold_and_what_forcing_would_do(api, four_turns):
    preview = dry_run(api, max_tokens=100_000).json()

    assert preview["would_compact"] is False
    assert preview["reason"] == "under_threshold"
    assert "not over max_tokens 100,000" in preview["explanation"]
    assert "Forced, it would cover messages #1–#6" in preview["explanation"]

    forced = dry_run(api, max_tokens=100_000, force=True).json()
    assert forced["would_compact"] is True
    assert forced["last_seq"] == 6


def test_it_explains_a_session_of_one_turn(api):
    api.post("/sessions/one/messages", {"messages": [user(40, "Hello?"), assistant(60, "Hi.")]})

    preview = dry_run(api, "one", force=True).json()

    assert preview["reason"] == "nothing_to_compact"
    assert "one turn, the current one (from message #1)" in preview["explanation"]


def test_it_does_not_call_an_llm_summarizer_and_says_the_summary_is_an_estimate(api, project, four_turns, monkeypatch):
    def never(*args):
        raise AssertionError("a dry run called the LLM summarizer")

    monkeypatch.setitem(SUMMARIZERS, "openai", never)
    before = nothing_changes(project)

    preview = dry_run(api, summarizer="openai").json()

    assert preview["would_compact"] is True
    assert preview["summary_estimated"] is True
    assert preview["summary"] is None
    assert preview["settings"]["summarizer"] == "openai"
    assert "not called in a preview" in preview["explanation"]
    assert preview["tokens_after"] == 403 - 300 + preview["summary_tokens"]
    assert nothing_changes(project) == before


def test_it_counts_a_supplied_summary(api, four_turns):
    preview = dry_run(api, summary="They asked about the weather in four cities.").json()

    assert preview["would_compact"] is True
    assert preview["summary"] == "They asked about the weather in four cities."
    assert preview["settings"]["summarizer"] == "supplied"
    assert preview["summary_estimated"] is False


@pytest.mark.parametrize(("body", "field"), [
    ({"max_tokens": -1}, "max_tokens"),
    ({"keep_recent_tokens": "20000"}, "keep_recent_tokens"),
    ({"keep_recent_tokens": 1.5}, "keep_recent_tokens"),
    ({"summarizer": "gpt-9"}, "summarizer"),
    ({"dry_run": "yes"}, "dry_run"),
])
def test_bad_settings_are_refused_naming_the_field_and_nothing_is_stored(api, project, four_turns, body, field):
    before = nothing_changes(project)

    response = api.post("/sessions/talk/compact", {"dry_run": True, **body})

    error = assert_error(response, 422)
    assert field in error["detail"]
    assert nothing_changes(project) == before


def test_an_unknown_session_is_not_found(api):
    assert_error(dry_run(api, "nobody"), 404)


def test_the_openapi_schema_documents_the_dry_run(api):
    schema = api.get("/openapi.json").json()
    assert "dry_run" in schema["components"]["schemas"]["CompactIn"]["properties"]
    assert "CompactionPreviewOut" in schema["components"]["schemas"]
    operation = schema["paths"]["/api/v1/sessions/{key}/compact"]["post"]
    answer = str(operation["responses"]["200"]["content"]["application/json"]["schema"])
    assert "CompactionPreviewOut" in answer and "CompactionOut" in answer


def test_a_real_run_skipped_for_nothing_to_compact_says_why(api, four_turns):
    outcome = api.post("/sessions/talk/compact", {"keep_recent_tokens": 20_000}).json()

    assert (outcome["status"], outcome["reason"]) == ("skipped", "nothing_to_compact")
    assert outcome["explanation"].startswith("keep_recent_tokens 20,000 keeps every turn of this 403-token session")


def test_a_real_run_skipped_under_the_threshold_says_why(api, four_turns):
    outcome = api.post("/sessions/talk/compact", {"max_tokens": 100_000}).json()

    assert (outcome["status"], outcome["reason"]) == ("skipped", "under_threshold")
    assert "not over max_tokens 100,000" in outcome["explanation"]


def test_a_completed_run_has_no_explanation(api, four_turns):
    assert api.post("/sessions/talk/compact", {}).json()["explanation"] is None


def test_its_queries_do_not_grow_with_the_session(api):
    """The dry run reads figures, not one row at a time: as many queries for 40 turns as for 4."""
    counts = []
    for key, turns in (("short", 4), ("long", 40)):
        messages = [m for n in range(turns) for m in (user(40, f"Question {n}?"), assistant(60, f"Answer {n}."))]
        api.put(f"/sessions/{key}", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 150, "auto": False}})
        api.post(f"/sessions/{key}/messages", {"messages": messages})
        with CaptureQueriesContext(connection) as queries:
            assert dry_run(api, key).json()["would_compact"] is True
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
