"""Automatic compaction on the task queue: enqueued by appends, one run per session, done by a real
worker process (tests/workers.py), kept alive across a SIGKILLed worker, backing off when it fails."""

import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from sessions.access.api_keys import create_api_key
from sessions.context.compaction_runs import run_compaction, sweep_compaction_runs
from sessions.context.summarizers import SUMMARIZERS, extractive
from sessions.models import Checkpoint, CompactionRun, Event, Session
from tests.api.conftest import Api
from tests.builders import assistant, user
from tests.workers import kill, start_worker, wait_until, worker

real_queue = [pytest.mark.real_queue, pytest.mark.django_db(transaction=True)]
STARTED, COMPLETED, FAILED = "COMPACTION_STARTED", "COMPACTION_COMPLETED", "COMPACTION_FAILED"


@pytest.fixture
def api(project):
    return Api(create_api_key(project, "queue-test")[1])


@pytest.fixture
def short_lease(settings):
    """Leases of half a second, swept every tenth, retried at once: a killed worker's run comes back fast."""
    settings.CTXWEB_COMPACTION_LEASE_SECONDS = 0.5
    settings.CTXWEB_COMPACTION_SWEEP_INTERVAL = 0.1
    settings.CTXWEB_COMPACTION_RETRY_DELAY = 0


def over_threshold(api, key="queued") -> list[dict]:
    """Three turns of 200 tokens against max_tokens 500 (keeping 150): the next append crosses it."""
    api.put(f"/sessions/{key}", {"compaction": {"max_tokens": 500, "keep_recent_tokens": 150, "auto": True}})
    assert api.post(f"/sessions/{key}/messages", {"messages": [
        user(100, "Where was the 1755 earthquake?"), assistant(100, "Lisbon, on 1 November."),
        user(100, "How strong was it?"), assistant(99, "Perhaps magnitude 8.5 to 9."),
    ]}).json()["compaction"] is None
    return [user(100, "Who rebuilt the city?")]


def append(api, messages, key="queued"):
    response = api.post(f"/sessions/{key}/messages", {"messages": messages})
    assert response.status_code == 200, response.content
    return response.json()


def compaction_events(key="queued") -> list[str]:
    return list(Event.objects.filter(session__key=key, type__startswith="COMPACTION_").order_by("pk").values_list("type", flat=True))


def the_run(key="queued") -> CompactionRun:
    return CompactionRun.objects.get(session__key=key)


def test_the_database_allows_one_queued_or_running_run_per_session(project, append_messages_session):
    session = append_messages_session
    CompactionRun.objects.create(session=session, state="running")
    with pytest.raises(IntegrityError), transaction.atomic():
        CompactionRun.objects.create(session=session, state="queued")
    CompactionRun.objects.create(session=session, state="failed")  # finished runs do not count
    CompactionRun.objects.create(session=session, state="completed")
    assert CompactionRun.objects.filter(session=session).count() == 3


@pytest.fixture
def append_messages_session(append):
    return append("constrained", [{"role": "user", "content": "Hello"}]).session


@pytest.mark.real_queue
@pytest.mark.django_db(transaction=True)
def test_a_burst_of_appends_enqueues_one_run_and_one_task(api):
    crossing = over_threshold(api)

    answers = [append(api, crossing)] + [append(api, [assistant(50 + n, f"More, part {n}.")]) for n in range(5)]

    runs = {(a["compaction"]["id"], a["compaction"]["status"]) for a in answers}
    assert runs == {(the_run().pk, "queued")}
    assert DBTaskResult.objects.filter(task_path="sessions.context.compaction_runs.run_compaction").count() == 1
    assert compaction_events() == []  # nothing ran inside the appends


@pytest.mark.real_queue
@pytest.mark.django_db(transaction=True)
def test_an_append_answers_before_the_run_and_a_worker_then_does_it(api):
    answer = append(api, over_threshold(api))

    assert answer["compaction"]["status"] == "queued" and answer["compaction"]["attempts"] == 0
    assert not Checkpoint.objects.filter(session__key="queued").exists()

    call_command("compaction_worker", "--batch", "--no-reload", "--no-startup-delay", verbosity=0)

    run = the_run()
    assert (run.state, run.attempts, run.last_error) == ("completed", 1, "")
    assert compaction_events() == [STARTED, COMPLETED]
    assert Session.objects.get(key="queued").input_tokens <= 500
    body = api.get(f"/sessions/queued/compactions/{run.pk}").json()
    assert body["outcome"]["checkpoint"]["last_seq"] == 4


@pytest.mark.real_queue
@pytest.mark.django_db(transaction=True)
def test_appends_answer_within_a_second_while_a_worker_waits_30_seconds_for_an_llm(api, monkeypatch, settings):
    def slow_llm(previous, messages, budget):
        time.sleep(30)  # the worker is killed long before
        return "never used"

    monkeypatch.setitem(SUMMARIZERS, "extractive", slow_llm)
    settings.CTXWEB_SUMMARIZER_TIMEOUT = 60
    crossing = over_threshold(api)
    with worker():
        append(api, crossing)
        wait_until(lambda: the_run().started_event_id, seconds=10)

        for n in range(4):
            began = time.monotonic()
            answer = append(api, [assistant(60, f"Still talking, part {n}.")])
            assert time.monotonic() - began < 1.0
            assert answer["compaction"]["status"] == "running"
            assert answer["messages"][0]["stored"] is True

    assert Session.objects.get(key="queued").message_count == 9
    assert compaction_events() == [STARTED]


@pytest.mark.real_queue
@pytest.mark.django_db(transaction=True)
def test_a_run_cut_off_by_a_killed_worker_is_closed_and_completed_by_another(api, monkeypatch, settings, short_lease):
    monkeypatch.setitem(SUMMARIZERS, "extractive", lambda *args: time.sleep(30))
    settings.CTXWEB_SUMMARIZER_TIMEOUT = 60
    append(api, over_threshold(api))
    first = start_worker()
    try:
        wait_until(lambda: the_run().started_event_id, seconds=10)
    finally:
        kill(first)
    assert the_run().state == "running"

    monkeypatch.setitem(SUMMARIZERS, "extractive", extractive)  # the next worker's summarizer answers
    with worker():
        wait_until(lambda: the_run().state == "completed", seconds=10)

    run = the_run()
    assert run.attempts == 2
    assert compaction_events() == [STARTED, FAILED, STARTED, COMPLETED]
    started = Event.objects.filter(session__key="queued", type=STARTED).order_by("pk")
    closed = Event.objects.filter(session__key="queued", type__in=[FAILED, COMPLETED]).order_by("pk")
    assert [e.data["run"] for e in closed] == [e.pk for e in started]  # each STARTED closed exactly once
    assert closed[0].data["error"].startswith("interrupted: the worker stopped during attempt 1")
    assert Checkpoint.objects.filter(session__key="queued").count() == 1
    assert Session.objects.get(key="queued").failed_compactions == 1


@pytest.mark.django_db
def test_a_failing_run_backs_off_then_fails_after_the_last_attempt(api, monkeypatch, settings):
    """With the instant test worker: attempts happen when the sweep finds them due."""
    settings.CTXWEB_COMPACTION_MAX_ATTEMPTS = 3
    settings.CTXWEB_COMPACTION_RETRY_DELAY = 10

    def broken(*args):
        raise ConnectionError("the LLM endpoint refused the connection")

    monkeypatch.setitem(SUMMARIZERS, "extractive", broken)
    answer = append(api, over_threshold(api))

    queued = answer["compaction"]
    assert (queued["status"], queued["attempts"], queued["max_attempts"]) == ("queued", 1, 3)
    assert "refused the connection" in queued["last_error"]
    run = the_run()
    assert 9 < (run.run_after - run.started_at).total_seconds() <= 11
    assert sweep_compaction_runs() == 0  # not due yet: nothing happens
    assert run.attempts == the_run().attempts == 1

    for attempts, delay in ((2, 20), (3, None)):
        CompactionRun.objects.filter(pk=run.pk).update(run_after=run.run_after.replace(year=2000))
        assert sweep_compaction_runs() == 1
        run.refresh_from_db()
        assert run.attempts == attempts
        if delay:
            assert run.state == "queued" and delay - 1 < (run.run_after - run.started_at).total_seconds() <= delay + 1

    assert run.state == "failed" and run.finished_at is not None
    assert compaction_events() == [STARTED, FAILED] * 3
    assert Session.objects.get(key="queued").failed_compactions == 3

    # Failed for good: the next appends name that run instead of starting the cycle again at once...
    assert append(api, [assistant(30, "Still here.")])["compaction"]["id"] == run.pk
    assert CompactionRun.objects.count() == 1
    # ...until CTXWEB_COMPACTION_RETRY_MAX_DELAY has passed.
    CompactionRun.objects.filter(pk=run.pk).update(finished_at=run.finished_at.replace(year=2000))
    assert append(api, [assistant(30, "And still.")])["compaction"]["id"] != run.pk
    assert CompactionRun.objects.count() == 2


@pytest.mark.django_db
def test_a_long_turn_with_nothing_to_compact_leaves_one_run_not_one_per_append(api):
    api.put("/sessions/agent", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 100, "auto": True}})
    append(api, [user(350, "One huge task for the agent.")], key="agent")
    for n in range(5):
        answer = append(api, [assistant(40, f"Step {n} of the agent.")], key="agent")
        assert answer["compaction"]["status"] == "skipped"
    assert CompactionRun.objects.filter(session__key="agent").count() == 1
    assert compaction_events("agent") == [STARTED, "COMPACTION_SKIPPED"]

    append(api, [user(20, "Now a new question.")], key="agent")  # a new turn: the old one can be covered

    assert CompactionRun.objects.filter(session__key="agent").count() == 2
    assert compaction_events("agent")[-2:] == [STARTED, COMPLETED]


@pytest.mark.real_queue
@pytest.mark.django_db(transaction=True)
def test_an_attempt_closed_by_the_sweep_while_it_works_records_nothing_more(api, monkeypatch, settings):
    """A worker too slow to renew its lease is judged dead: the sweep closes its STARTED and queues the
    run again. When that worker finishes after all, it records no second terminal event and no checkpoint."""
    settings.CTXWEB_COMPACTION_RETRY_DELAY = 60

    def outlived_its_lease(previous, messages, budget):
        CompactionRun.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        assert sweep_compaction_runs() == 1
        connection.close()  # this summarizer runs on a thread of its own
        return "A summary that arrives too late."

    monkeypatch.setitem(SUMMARIZERS, "extractive", outlived_its_lease)
    append(api, over_threshold(api))

    assert run_compaction.call(the_run().pk) == "taken over"

    assert compaction_events() == [STARTED, FAILED]
    assert not Checkpoint.objects.filter(session__key="queued").exists()
    run = the_run()
    assert (run.state, run.attempts) == ("queued", 1) and run.last_error.startswith("interrupted")


@pytest.mark.real_queue
@pytest.mark.django_db
def test_the_worker_waits_out_a_locked_database_instead_of_exiting(monkeypatch):
    """Security issue 37, item 6: a capture holding SQLite's write lock made the worker's loop raise
    "database is locked", and the worker process exited, leaving queued runs until someone started it
    again. It waits and goes on now."""
    from django.db import OperationalError
    from django_tasks_db.management.commands import db_worker

    from sessions.management.commands import compaction_worker

    calls, pauses = [], []

    def run(self):
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise OperationalError("database is locked")

    monkeypatch.setattr(db_worker.Worker, "run", run)
    monkeypatch.setattr(compaction_worker.time, "sleep", pauses.append)
    call_command("compaction_worker", "--batch", "--no-reload", "--no-startup-delay", verbosity=0)

    assert len(calls) == 3, "it went on twice after the errors, then stopped as --batch does"
    assert pauses == [compaction_worker.RETRY_FIRST, 2 * compaction_worker.RETRY_FIRST]


@pytest.mark.real_queue
@pytest.mark.django_db(transaction=True)
def test_a_run_s_lease_is_renewed_by_its_own_steps_when_the_heartbeat_thread_cannot_run(
        api, monkeypatch, settings, short_lease):
    """The lease must not depend on the heartbeat thread getting the interpreter (a step holding it, as
    a backtracking regex once did, got live attempts declared dead): the run's own steps renew it."""
    from sessions.context.compaction_runs import Heartbeat

    monkeypatch.setattr(Heartbeat, "beat", lambda self: None)  # a thread that never gets to run
    renewed = []
    original = Heartbeat.renew

    def renew(self):
        renewed.append(time.monotonic())
        original(self)

    monkeypatch.setattr(Heartbeat, "renew", renew)

    def slow_summary(*args):  # a summarizer whose steps take longer than a third of the lease
        time.sleep(0.4)
        return extractive(*args)

    monkeypatch.setitem(SUMMARIZERS, "extractive", slow_summary)
    append(api, over_threshold(api))
    run_compaction.call(the_run().pk)

    assert the_run().state == "completed"
    assert renewed, "the run renewed its lease from its own steps"
