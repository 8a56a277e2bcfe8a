"""POST /api/v1/sessions/{key}/compact with a backlog: each request is one run within the run budget
(CTXWEB_COMPACTION_RUN_MAX_TOKENS), and the outcome says whether another run has turns left."""

import pytest

from tests.builders import assistant, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def backlog(api, settings):
    """Six turns of 100 tokens and a current question: 633 tokens over max_tokens 300; a run covers
    two old turns (200 tokens)."""
    settings.CTXWEB_SUMMARY_MAX_TOKENS = 2000
    settings.CTXWEB_COMPACTION_RUN_MAX_TOKENS = 200
    api.put("/sessions/backlog", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 1, "auto": False,
                                                 "summarizer": "extractive"}})
    messages = []
    for n in range(1, 7):
        messages += [user(40, f"Question {n}: what is the weather in town {n}?"),
                     assistant(60, f"Answer {n}: it is sunny in town {n}.")]
    messages.append(user(30, "And tomorrow?"))
    assert api.post("/sessions/backlog/messages", {"messages": messages}).status_code == 200
    return "backlog"


def test_each_request_is_one_run_within_the_budget_and_says_when_the_budget_was_reached(api, backlog):
    first = api.post("/sessions/backlog/compact", {}).json()

    assert first["status"] == "completed"
    assert (first["checkpoint"]["first_seq"], first["checkpoint"]["last_seq"]) == (1, 4)
    assert first["budget_reached"] is True
    assert first["still_over_threshold"] is True
    assert first["events"][1]["data"]["budget_reached"] is True

    second = api.post("/sessions/backlog/compact", {}).json()

    assert (second["checkpoint"]["first_seq"], second["checkpoint"]["last_seq"]) == (5, 8)
    assert second["checkpoint"]["previous_id"] == first["checkpoint"]["id"]
    assert api.get("/sessions/backlog").json()["checkpoint_count"] == 2


def test_a_skipped_run_says_nothing_of_the_budget(api, backlog):
    outcome = api.post("/sessions/backlog/compact", {"max_tokens": 10_000}).json()

    assert (outcome["status"], outcome["reason"]) == ("skipped", "under_threshold")
    assert outcome["budget_reached"] is None


def test_with_backlog_the_worker_goes_on_run_after_run_until_the_input_is_under(api, backlog):
    """Issue 39, item 3: one request works the whole backlog off, each run its own checkpoint and events,
    each numbered in its options ("run 2 of about 3")."""
    from sessions.models import CompactionRun

    first = api.post("/sessions/backlog/compact", {"backlog": True}).json()
    assert first["status"] == "completed" and first["budget_reached"] is True  # the first run, waited for

    runs = list(CompactionRun.objects.filter(session__key="backlog").order_by("pk"))
    assert len(runs) == 3 and all(run.state == "completed" for run in runs)
    assert [run.options["backlog"]["run"] for run in runs] == [1, 2, 3]
    assert all(run.options["backlog"]["of_about"] >= run.options["backlog"]["run"] for run in runs)
    session = api.get("/sessions/backlog").json()
    assert session["checkpoint_count"] == 3
    assert runs[-1].outcome["budget_reached"] is False or runs[-1].outcome["tokens_after"] <= 300


def test_without_backlog_a_request_is_one_run(api, backlog):
    from sessions.models import CompactionRun

    api.post("/sessions/backlog/compact", {})
    assert CompactionRun.objects.filter(session__key="backlog").count() == 1
