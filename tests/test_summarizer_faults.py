"""A summarizer that fails, hangs, answers garbage or answers more than it replaces changes nothing
: the compaction records STARTED and exactly one terminal event, FAILED or SKIPPED, and the
raw log, checkpoints and model input stay as they were. No database lock is held while it runs: an
append during a hanging summarizer completes promptly, directly and over HTTP."""

import json
import threading
import time
import urllib.request
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from sessions.access.api_keys import create_api_key
from sessions.checks import check_compaction_defaults
from sessions.context.checkpoints import create_imported_checkpoint
from sessions.context.compaction_runs import compact
from sessions.context.model_input import build_model_input
from sessions.context.summarizers import SUMMARIZERS, SummarizerError
from sessions.errors import Conflict
from sessions.ingest.append import append_messages
from sessions.models import Checkpoint, CompactionRun, Event, Message, Session
from sessions.store.event_types import EVENT_ERROR_CHARS
from tests.builders import assistant, user

STARTED, COMPLETED = "COMPACTION_STARTED", "COMPACTION_COMPLETED"
SKIPPED, FAILED = "COMPACTION_SKIPPED", "COMPACTION_FAILED"
PROMPT = 1.5  # seconds an append may take while a summarizer hangs; an append alone takes milliseconds


def raise_runtime_error(previous, messages, budget):
    raise RuntimeError("the model server is on fire")


def raise_summarizer_error(previous, messages, budget):
    raise SummarizerError("summarizer endpoint answered 503: overloaded")


def answer(value):
    return lambda previous, messages, budget: value


def as_large_as_its_input(previous, messages, budget):
    return "\n".join(m.text for m in messages) * 2


FAULTS = {
    # name: (summarizer, terminal event, text the error or reason must contain)
    "an exception": (raise_runtime_error, FAILED, "RuntimeError: the model server is on fire"),
    "a summarizer error": (raise_summarizer_error, FAILED, "answered 503"),
    "None": (answer(None), FAILED, "returned NoneType, not text"),
    "bytes": (answer(b"summary"), FAILED, "returned bytes, not text"),
    "a JSON object": (answer({"summary": "ok"}), FAILED, "returned dict, not text"),
    "a list of parts": (answer([{"type": "text", "text": "ok"}]), FAILED, "returned list, not text"),
    "an empty string": (answer(""), FAILED, "returned no text"),
    "whitespace": (answer(" \n\t "), FAILED, "returned no text"),
    "a NUL character": (answer("summary\x00with NUL"), FAILED, "cannot be stored"),
    "a lone surrogate": (answer("summary \ud800 broken"), FAILED, "cannot be stored"),
    "more than its input": (as_large_as_its_input, SKIPPED, "not_smaller"),
    "a megabyte of text": (answer("word " * 200_000), SKIPPED, "not_smaller"),
}


class Hanging:
    """A summarizer that waits until released (at most 30 s), then answers `text`."""

    def __init__(self, text: str):
        self.text = text
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, previous, messages, budget):
        self.entered.set()
        self.release.wait(30)
        return self.text


def history(project, key: str) -> Session:
    """Two old turns of 200 tokens and a current question: compaction would cover seqs 1-4."""
    return append_messages(project, key, [
        user(120, "first question"), assistant(80, "first answer"),
        user(120, "second question"), assistant(80, "second answer"),
        user(30, "current question"),
    ]).session


def state(session: Session) -> dict:
    """Everything a compaction could change."""
    fresh = Session.objects.get(pk=session.pk)
    model_input = build_model_input(fresh)
    return {
        "raw log": list(Message.objects.filter(session=session).order_by("seq").values()),
        "checkpoints": list(Checkpoint.objects.filter(session=session).values()),
        "model input": [(e.kind, e.seq, json.dumps(e.content), e.tokens) for e in model_input.entries],
        "figures": (fresh.message_count, fresh.input_tokens, fresh.input_messages, fresh.input_left_out,
                    fresh.checkpoint_last_seq, fresh.checkpoint_count),
    }


def compaction_events(session: Session) -> list[Event]:
    return list(Event.objects.filter(session=session, type__startswith="COMPACTION_").order_by("pk"))


@pytest.mark.django_db
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_faulty_summarizer_records_one_terminal_event_and_changes_nothing(project, monkeypatch, fault):
    function, terminal, words = FAULTS[fault]
    monkeypatch.setitem(SUMMARIZERS, "extractive", function)
    session = history(project, "faulty")
    before = state(session)
    failed_before = Session.objects.get(pk=session.pk).failed_compactions

    outcome = compact(Session.objects.get(pk=session.pk), max_tokens=100, keep_recent_tokens=50)

    events = compaction_events(session)
    assert [e.type for e in events] == [STARTED, terminal]
    assert events[1].data["run"] == events[0].pk
    if terminal == FAILED:
        assert outcome.status == "failed"
        assert words in outcome.error and events[1].data["error"] == outcome.error
        assert Session.objects.get(pk=session.pk).failed_compactions == failed_before + 1
    else:
        assert (outcome.status, outcome.reason, events[1].data["reason"]) == ("skipped", words, words)
        assert events[1].data["summary_tokens"] >= events[1].data["replaced_tokens"]
    assert state(session) == before


@pytest.mark.django_db
def test_a_failure_quoting_a_megabyte_is_recorded_cut_to_a_bound(project, monkeypatch):
    def echo_everything(previous, messages, budget):
        raise SummarizerError("the provider refused this prompt: " + "quoted prompt " * 75_000)

    monkeypatch.setitem(SUMMARIZERS, "extractive", echo_everything)
    session = history(project, "echoing")

    outcome = compact(Session.objects.get(pk=session.pk), max_tokens=100, keep_recent_tokens=50)

    failed = compaction_events(session)[-1]
    assert outcome.status == "failed" and failed.type == FAILED
    assert len(failed.data["error"]) == EVENT_ERROR_CHARS
    assert failed.data["error"].startswith("the provider refused this prompt: quoted prompt")
    assert failed.data["error"].endswith("…")


@pytest.mark.django_db(transaction=True)
def test_a_summarizer_that_hangs_past_the_timeout_fails_and_an_append_meanwhile_is_prompt(
    project, monkeypatch, settings
):
    settings.CTXWEB_SUMMARIZER_TIMEOUT = 4
    hangs = Hanging("A summary that comes far too late.")
    monkeypatch.setitem(SUMMARIZERS, "extractive", hangs)
    session = history(project, "hangs")
    before = state(session)
    outcomes = []

    def run():
        try:
            outcomes.append(compact(Session.objects.get(pk=session.pk), max_tokens=100, keep_recent_tokens=50))
        finally:
            connection.close()

    started_at = time.monotonic()
    compaction = threading.Thread(target=run)
    compaction.start()
    assert hangs.entered.wait(10), "the summarizer never started"

    # While the summarizer hangs, another client appends: no lock is held, so it does not wait.
    append_started = time.monotonic()
    appended = append_messages(project, "hangs", [assistant(20, "a late answer")])
    append_seconds = time.monotonic() - append_started
    assert compaction.is_alive(), "the compaction should still be waiting for the summarizer"
    assert append_seconds < PROMPT
    after_append = state(session)

    compaction.join(20)
    elapsed = time.monotonic() - started_at
    hangs.release.set()
    assert not compaction.is_alive()
    outcome = outcomes[0]
    assert outcome.status == "failed"
    assert outcome.error == "the summarizer did not answer within 4s"
    assert 4 <= elapsed < 15
    assert [e.type for e in compaction_events(session)] == [STARTED, FAILED]
    # Nothing but the append changed: the raw log grew by the late message and nothing else.
    assert [r["seq"] for r in after_append["raw log"]] == [1, 2, 3, 4, 5, appended.messages[0].seq]
    assert after_append["raw log"][:5] == before["raw log"]
    assert after_append["checkpoints"] == [] and state(session)["checkpoints"] == []
    assert state(session) == after_append


@pytest.mark.django_db(transaction=True)
def test_an_api_append_completes_while_an_api_compaction_waits_on_its_summarizer(
    project, monkeypatch, live_server
):
    slow = Hanging("Earlier: two questions and their answers.")
    monkeypatch.setitem(SUMMARIZERS, "extractive", slow)
    session = history(project, "over-http")
    secret = create_api_key(project, "faults")[1]

    def call(method: str, path: str, body: dict) -> tuple[int, dict]:
        request = urllib.request.Request(
            live_server.url + "/api/v1" + path, method=method, data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())

    results = []
    compaction = threading.Thread(target=lambda: results.append(
        call("POST", "/sessions/over-http/compact", {"max_tokens": 100, "keep_recent_tokens": 50})))
    compaction.start()
    assert slow.entered.wait(10), "the summarizer never started"

    append_started = time.monotonic()
    status, body = call("POST", "/sessions/over-http/messages",
                        {"messages": [{"id": "late-1", "role": "assistant", "content": "a late answer"}]})
    append_seconds = time.monotonic() - append_started
    assert compaction.is_alive()
    slow.release.set()
    compaction.join(30)

    assert status == 200 and body["messages"][0]["seq"] == 6
    assert append_seconds < PROMPT
    status, outcome = results[0]
    assert status == 200 and outcome["status"] == "completed"
    assert outcome["checkpoint"]["last_seq"] == 4
    assert Session.objects.get(pk=session.pk).message_count == 6


# --- runs cut off by a killed process -------------------------------------------------------------


def open_run(session: Session, lease_left: float) -> CompactionRun:
    """A run as a process killed mid-run leaves it: running, its COMPACTION_STARTED without a terminal
    event, and a lease that nobody renews (`lease_left` seconds from now; negative when it has passed)."""
    started = Event.objects.create(
        session=session, type=STARTED, actor="system",
        data={"trigger": "auto", "max_tokens": 100, "keep_recent_tokens": 50, "tokens_before": 433,
              "summarizer": "extractive"},
    )
    now = timezone.now()
    return CompactionRun.objects.create(
        session=session, trigger="auto", in_process=True, state="running", attempts=1, started_at=now,
        lease_expires_at=now + timedelta(seconds=lease_left), started_event=started,
    )


@pytest.mark.django_db
def test_the_next_compaction_closes_a_run_cut_off_by_a_killed_process(project):
    session = history(project, "cut-off")
    cut_off = open_run(session, -5)
    before = state(session)

    outcome = compact(Session.objects.get(pk=session.pk), max_tokens=100_000)

    events = compaction_events(session)
    assert [e.type for e in events] == [STARTED, FAILED, STARTED, SKIPPED]
    closing = events[1]
    assert closing.data["run"] == cut_off.started_event_id
    assert closing.data["error"].startswith("interrupted")
    assert {k: closing.data[k] for k in ("trigger", "max_tokens", "tokens_before")} == {
        "trigger": "auto", "max_tokens": 100, "tokens_before": 433}
    assert outcome.status == "skipped" and events[3].data["run"] == events[2].pk
    assert Session.objects.get(pk=session.pk).failed_compactions == 1
    assert state(session) == before
    # The run owns its state: failed for good (a process's own run is never retried), not running.
    cut_off.refresh_from_db()
    assert cut_off.state == "failed" and cut_off.last_error.startswith("interrupted")
    # Closed once: a later compaction finds nothing left to close.
    compact(Session.objects.get(pk=session.pk), max_tokens=100_000)
    assert [e.type for e in compaction_events(session)].count(FAILED) == 1


@pytest.mark.django_db
def test_a_run_within_its_lease_is_left_running_and_a_requested_one_is_refused(project):
    session = history(project, "in-flight")
    in_flight = open_run(session, 30)
    before = state(session)

    with pytest.raises(Conflict) as refused:
        compact(Session.objects.get(pk=session.pk), max_tokens=100_000)

    assert refused.value.code == "compaction_in_progress" and str(in_flight.pk) in str(refused.value)
    assert [e.type for e in compaction_events(session)] == [STARTED]
    in_flight.refresh_from_db()
    assert in_flight.state == "running"
    assert state(session) == before


@pytest.mark.django_db
def test_an_automatic_compaction_does_not_start_while_another_runs(project):
    session = history(project, "busy")
    running = open_run(session, 30)
    before = state(session)

    outcome = compact(Session.objects.get(pk=session.pk), trigger="auto", max_tokens=100, keep_recent_tokens=50)

    assert outcome.status == "not_run"
    assert [e.pk for e in compaction_events(session)] == [running.started_event_id]
    assert state(session) == before
    assert list(CompactionRun.objects.filter(session=session).values_list("pk", flat=True)) == [running.pk]


@pytest.mark.django_db
def test_an_automatic_compaction_runs_once_the_other_run_is_cut_off(project):
    session = history(project, "stale")
    cut_off = open_run(session, -5)

    outcome = compact(Session.objects.get(pk=session.pk), trigger="auto", max_tokens=100, keep_recent_tokens=50)

    assert outcome.status == "completed"
    types = [(e.type, e.data.get("run")) for e in compaction_events(session)]
    assert types[:2] == [(STARTED, None), (FAILED, cut_off.started_event_id)]
    assert [t for t, _ in types[2:]] == [STARTED, COMPLETED]
    assert [run.state for run in CompactionRun.objects.filter(session=session).order_by("pk")] == ["failed", "completed"]


@pytest.mark.django_db
def test_a_run_cut_off_after_an_imported_checkpoint_is_closed_too(project):
    """An imported checkpoint records a COMPACTION_COMPLETED that closes no run (it has no `run`): it
    must not hide a run a killed process left open."""
    session = history(project, "imported-then-cut-off")
    create_imported_checkpoint(session, 2, "The user asked a first question.")
    cut_off = open_run(session, -5)

    compact(Session.objects.get(pk=session.pk), max_tokens=100_000)

    closing = Event.objects.get(session=session, type=FAILED)
    assert closing.data["run"] == cut_off.started_event_id and closing.data["error"].startswith("interrupted")


@pytest.mark.django_db
def test_an_imported_checkpoint_does_not_hide_a_run_in_progress(project):
    session = history(project, "imported-then-busy")
    create_imported_checkpoint(session, 2, "The user asked a first question.")
    running = open_run(session, 30)

    outcome = compact(Session.objects.get(pk=session.pk), trigger="auto", max_tokens=10, keep_recent_tokens=5)

    assert outcome.status == "not_run"
    assert compaction_events(session)[-1].pk == running.started_event_id


@pytest.mark.django_db
def test_every_compaction_is_a_run_and_a_failing_one_ends_failed(project, monkeypatch):
    """compact() in this process owns a CompactionRun like a worker's: running while it works, then the
    state its outcome says, with the events of its attempt; an exception leaves no run running."""
    session = history(project, "owned")
    seen = []
    outcome = compact(Session.objects.get(pk=session.pk), max_tokens=100, keep_recent_tokens=50,
                      on_started=lambda started: seen.append(
                          CompactionRun.objects.get(session=session, started_event=started).state))
    run = CompactionRun.objects.get(session=session)
    assert seen == ["running"]
    assert (run.state, run.in_process, run.trigger) == ("completed", True, "request")
    assert run.outcome["event_ids"] == [e.pk for e in outcome.events]
    assert run.lease_expires_at is None and run.finished_at is not None

    def broken(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr("sessions.context.compaction.plan_compaction", broken)
    with pytest.raises(RuntimeError):
        compact(Session.objects.get(pk=session.pk), force=True)
    failed = CompactionRun.objects.filter(session=session).latest("pk")
    assert failed.state == "failed" and "the database went away" in failed.last_error
    assert not CompactionRun.objects.filter(session=session, state__in=["queued", "running"]).exists()


@pytest.mark.parametrize(("timeout", "errors"), [(120, []), (0, ["ctxweb.E005"])])
def test_the_summarizer_deadline_is_checked_at_start_up(settings, timeout, errors):
    settings.CTXWEB_SUMMARIZER_TIMEOUT = timeout
    assert [e.id for e in check_compaction_defaults(None)] == errors
