"""The session page shows the session's latest compaction run: its state, attempts and last error, so
a run that keeps failing is seen with why; "Compact now" goes through the background worker."""

import pytest
from django.urls import reverse

from sessions.context.compaction_runs import compact_if_needed, sweep_compaction_runs
from sessions.context.summarizers import SUMMARIZERS
from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import CompactionRun
from tests.builders import assistant, user

from .conftest import session_url
from .dom import parse


@pytest.fixture
def broken_llm(monkeypatch, settings):
    settings.CTXWEB_COMPACTION_MAX_ATTEMPTS = 2
    settings.CTXWEB_COMPACTION_RETRY_DELAY = 30

    def broken(*args):
        raise ConnectionError("the LLM endpoint refused the connection")

    monkeypatch.setitem(SUMMARIZERS, "extractive", broken)


@pytest.fixture
def over(project):
    """A session over its max_tokens with automatic compaction on, whose run the test asks for itself:
    stored with automatic compaction off, since the append would otherwise enqueue it at once."""
    update_session(project, "failing", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 50, "auto": False}}, "test")
    append_messages(project, "failing", [
        user(100, "First question."), assistant(100, "First answer."), user(120, "Second question.")], "test")
    return update_session(project, "failing", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 50, "auto": True}},
                          "test")[0]


def run_box(client, session):
    return parse(client.get(session_url(session))).one(id="compaction-run")


def test_a_session_without_runs_shows_no_run_box(viewer_client, project):
    session = append_messages(project, "quiet", [user(10, "Hello.")], "test").session
    assert parse(viewer_client.get(session_url(session))).find(id="compaction-run") is None


def test_a_failing_run_shows_its_backoff_and_last_error_then_its_failure(viewer_client, over, broken_llm):
    compact_if_needed(over)

    box = run_box(viewer_client, over)
    assert "Queued" in box.text() and "attempt 1 of 2" in box.text()
    assert "next attempt in" in box.text()
    assert "Last error: ConnectionError: the LLM endpoint refused the connection" in " ".join(box.text().split())

    run = CompactionRun.objects.get()
    CompactionRun.objects.filter(pk=run.pk).update(run_after=run.run_after.replace(year=2000))
    assert sweep_compaction_runs() == 1

    box = run_box(viewer_client, over)
    assert "Failed" in box.text() and "attempt 2 of 2" in box.text()
    assert "refused the connection" in box.text()


def test_compact_now_while_a_run_is_under_way_says_so_and_changes_nothing(editor_client, over, broken_llm):
    compact_if_needed(over)  # queued again after its first failure
    url = reverse("session_compact", args=["default", "failing"])

    response = editor_client.post(url, {"force": "1"}, follow=True)

    assert "is queued" in parse(response).one(cls="flash").text()
    assert CompactionRun.objects.count() == 1


def test_compact_now_works_a_backlog_off_and_the_page_shows_how_far(editor_client, project, settings):
    """Issue 39, item 3: "Compact now" on a backlog larger than a run's budget goes on run after run on the
    worker (here the instant one) until the input is under max_tokens; the run box says where it is."""
    settings.CTXWEB_SUMMARY_MAX_TOKENS = 2000
    settings.CTXWEB_COMPACTION_RUN_MAX_TOKENS = 200
    update_session(project, "backlog", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 1, "auto": False,
                                                       "summarizer": "extractive"}}, "test")
    messages = []
    for n in range(1, 7):
        messages += [user(40, f"Question {n}: what is the weather in town {n}?"),
                     assistant(60, f"Answer {n}: it is sunny in town {n}.")]
    session = append_messages(project, "backlog", [*messages, user(30, "And tomorrow?")], "test").session

    response = editor_client.post(reverse("session_compact", args=[project.name, session.key]), follow=True)

    flash_text = parse(response).one(cls="flash").text()
    assert "the background worker goes on, run after run" in flash_text, flash_text
    runs = list(CompactionRun.objects.filter(session=session).order_by("pk"))
    assert len(runs) > 1 and all(run.state == "completed" for run in runs)
    box = " ".join(run_box(editor_client, session).text().split())
    last = runs[-1].options["backlog"]
    assert f"Working the backlog off: run {last['run']} of about {last['of_about']}" in box, box



@pytest.mark.real_queue  # the run waits in the database queue: the box polls until it has finished
def test_the_run_box_polls_while_its_run_is_active_then_reloads_the_page(editor_client, over):
    run = compact_if_needed(over)
    box = run_box(editor_client, over)
    url = reverse("session_compaction_run", args=["default", "failing"])
    assert box.get("hx-get") == f"{url}?run={run.pk}" and box.get("hx-trigger") == "every 2s"

    polled = editor_client.get(url, {"run": run.pk}, headers={"HX-Request": "true"})
    assert polled.status_code == 200 and "HX-Refresh" not in polled
    assert parse(polled).one(id="compaction-run").get("hx-get") == f"{url}?run={run.pk}"

    CompactionRun.objects.filter(pk=run.pk).update(state="completed")
    done = editor_client.get(url, {"run": run.pk}, headers={"HX-Request": "true"})
    assert done["HX-Refresh"] == "true"  # the page loads again and shows what is stored
    assert run_box(editor_client, over).get("hx-get") is None  # a finished run's box does not poll
