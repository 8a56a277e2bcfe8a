"""The switch to a broker: the same compaction run enqueued through django-tasks' RQ backend on Redis
(127.0.0.1:6379, database 15, emptied first) and done by an RQ worker in burst mode."""

import os
import socket

import pytest

from sessions.access.api_keys import create_api_key
from sessions.models import CompactionRun, Event
from tests.api.conftest import Api
from tests.builders import assistant, user

REDIS_URL = os.environ.get("CTXWEB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def redis_reachable() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=0.5).close()
        return True
    except OSError:
        return False


@pytest.fixture
def rq_queue(settings):
    pytest.importorskip("django_tasks_rq", reason="the RQ backend is optional: pip install '.[rq]'")
    if not redis_reachable():
        if os.environ.get("CI") == "true":
            pytest.fail("Redis is not reachable at 127.0.0.1:6379 (CI needs it for the RQ backend test)")
        pytest.skip("Redis is not reachable at 127.0.0.1:6379: the RQ backend test needs a local Redis")
    settings.RQ_QUEUES = {"default": {"URL": REDIS_URL}}
    settings.TASKS = {"default": {"BACKEND": "django_tasks_rq.RQBackend"}}
    import django_rq

    queue = django_rq.get_queue("default")
    queue.empty()
    yield queue
    queue.empty()


def burst_worker_class():
    """rq's SimpleWorker without its command channel, which this test never uses. rq 3.0 listens on that
    channel from a thread that waits up to 60 s for a message (run_in_thread(sleep_time=60)). This test
    took 60.0 s in two of four full runs of the suite here, and 0.3 s when run alone; the likely cause
    is that closing the channel at the end of a burst waited for that thread. I did not reproduce it."""
    from rq import SimpleWorker

    class BurstWorker(SimpleWorker):
        def subscribe(self):
            pass

        def unsubscribe(self):
            pass

    return BurstWorker


@pytest.mark.real_queue
@pytest.mark.django_db(transaction=True)
def test_a_compaction_enqueued_through_rq_is_done_by_an_rq_worker(project, rq_queue):
    import django_rq

    api = Api(create_api_key(project, "rq-test")[1])
    api.put("/sessions/rq", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 50, "auto": True}})
    answer = api.post("/sessions/rq/messages", {"messages": [
        user(100, "Tell me about the earthquake of 1755."), assistant(100, "It struck Lisbon on 1 November."),
        user(120, "Who rebuilt the city?")]}).json()

    assert answer["compaction"]["status"] == "queued"
    assert rq_queue.count == 1

    django_rq.get_worker("default", job_class="django_tasks_rq.backend.Job", worker_class=burst_worker_class()).work(burst=True)

    run = CompactionRun.objects.get(session__key="rq")
    assert (run.state, run.attempts) == ("completed", 1)
    types = list(Event.objects.filter(session__key="rq", type__startswith="COMPACTION_").values_list("type", flat=True))
    assert types == ["COMPACTION_STARTED", "COMPACTION_COMPLETED"]
