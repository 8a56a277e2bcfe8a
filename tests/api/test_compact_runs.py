"""Compaction runs over HTTP: POST .../compact with `wait`, GET .../compactions/{run_id}, and POST
.../requests while a run has not finished. Tests marked real_queue use the database task backend with
no worker unless they run one."""

import time

import pytest
from django.core.management import call_command

from sessions.models import CompactionRun, Event
from tests.api.conftest import assert_error, stored
from tests.builders import assistant, user

real_queue = pytest.mark.real_queue
committed = pytest.mark.django_db(transaction=True)


@pytest.fixture
def talk(api):
    """Three turns of 200 tokens over max_tokens 500 (auto off): a compaction covers the first two."""
    api.put("/sessions/talk", {"compaction": {"max_tokens": 500, "keep_recent_tokens": 150, "auto": False}})
    messages = []
    for n, city in enumerate(["Lisbon", "Porto", "Faro"], start=1):
        messages += [user(100, f"Question {n}: the weather in {city}?"), assistant(100, f"Answer {n}: sunny in {city}.")]
    assert api.post("/sessions/talk/messages", {"messages": messages}).status_code == 200
    return "talk"


def finish_queued_runs():
    call_command("compaction_worker", "--batch", "--no-reload", "--no-startup-delay", verbosity=0)


@real_queue
@committed
def test_compact_without_waiting_answers_202_and_the_run_can_be_followed_to_its_end(api, talk):
    response = api.post("/sessions/talk/compact", {"wait": False})

    assert response.status_code == 202
    run = response.json()
    assert (run["status"], run["trigger"], run["attempts"], run["outcome"]) == ("queued", "request", 0, None)
    assert run["url"] == f"/api/v1/sessions/talk/compactions/{run['id']}"
    assert not Event.objects.filter(session__key="talk", type__startswith="COMPACTION_").exists()

    finish_queued_runs()

    followed = api.get(f"/sessions/talk/compactions/{run['id']}")
    assert followed.status_code == 200
    body = followed.json()
    assert (body["status"], body["attempts"], body["last_error"]) == ("completed", 1, None)
    assert body["finished_at"] is not None
    assert body["outcome"]["status"] == "completed"
    assert body["outcome"]["checkpoint"]["last_seq"] == 4
    assert [e["type"] for e in body["outcome"]["events"]] == ["COMPACTION_STARTED", "COMPACTION_COMPLETED"]
    assert body["outcome"]["tokens_after"] < 500


@real_queue
@committed
def test_compact_answers_202_when_the_wait_passes_its_bound(api, talk, settings):
    settings.CTXWEB_COMPACTION_WAIT_SECONDS = 0.3  # no worker runs: the run stays queued

    began = time.monotonic()
    response = api.post("/sessions/talk/compact", {})

    assert 0.3 <= time.monotonic() - began < 1.5
    assert response.status_code == 202
    assert response.json()["status"] == "queued"


@real_queue
@committed
def test_compact_refuses_a_second_request_while_a_run_is_queued_and_stores_nothing(api, talk):
    first = api.post("/sessions/talk/compact", {"wait": False}).json()
    before = stored()

    body = assert_error(api.post("/sessions/talk/compact", {"force": True}), 409, "compaction_in_progress")

    assert str(first["id"]) in body["detail"]
    assert stored() == before and CompactionRun.objects.count() == 1


def test_compact_waits_for_the_instant_worker_and_answers_the_outcome(api, talk):
    response = api.post("/sessions/talk/compact", {"wait": True})

    assert response.status_code == 200
    assert response.json()["status"] == "completed"
    assert CompactionRun.objects.get().state == "completed"


@pytest.mark.parametrize("body, code", [
    ({"wait": "yes"}, None), ({"max_tokens": -1}, None), ({"summarizer": "gpt-9"}, None), ({"summary": 12}, None),
])
def test_compact_refuses_bad_input_and_stores_no_run(api, talk, body, code):
    before = stored()

    response = api.post("/sessions/talk/compact", body)

    assert 400 <= response.status_code < 500
    assert_error(response, response.status_code, code)
    assert stored() == before and not CompactionRun.objects.exists()


def test_a_run_is_read_only_through_its_own_session_and_project(api, other_api, talk):
    assert api.post("/sessions/talk/compact", {}).status_code == 200
    run_id = CompactionRun.objects.get().pk
    other_api.put("/sessions/talk", {})

    assert api.get(f"/sessions/talk/compactions/{run_id}").status_code == 200
    assert_error(other_api.get(f"/sessions/talk/compactions/{run_id}"), 404)
    assert_error(api.get(f"/sessions/talk/compactions/{run_id + 1}"), 404)
    assert_error(api.get("/sessions/nowhere/compactions/1"), 404)
    assert 400 <= api.get("/sessions/talk/compactions/0").status_code < 500
    assert 400 <= api.get("/sessions/talk/compactions/first").status_code < 500


@real_queue
@committed
def test_a_request_build_past_the_bound_returns_the_current_input_and_says_compaction_is_in_progress(api, settings):
    settings.CTXWEB_COMPACTION_WAIT_SECONDS = 0.2
    api.put("/sessions/near", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 50, "auto": True}})
    api.post("/sessions/near/messages", {"messages": [
        user(100, "Tell me about the earthquake of 1755."), assistant(100, "It struck Lisbon on 1 November."),
        user(50, "Who rebuilt the city?")]})

    response = api.post("/sessions/near/requests", {"messages": [assistant(60, "The Marquis of Pombal.")]})

    body = response.json()
    assert response.status_code == 200
    assert body["compaction_in_progress"] is True
    assert body["compaction"]["status"] == "queued"
    assert body["model_input"]["checkpoint"] is None
    assert len(body["model_input"]["messages"]) == 4  # the whole conversation: not compacted yet
    built = Event.objects.get(session__key="near", type="REQUEST_BUILT")
    assert built.data["compaction"] == "queued"

    finish_queued_runs()
    again = api.post("/sessions/near/requests", {}).json()
    assert again["compaction_in_progress"] is False and again["model_input"]["checkpoint"] is not None


@real_queue
@committed
def test_a_key_has_one_request_waiting_at_a_time_the_others_answer_at_once(api, talk, settings):
    """Security issue 37, item 8: four waiting requests of one key held every web worker of a deployment.
    While one request of a key waits for a run, the key's other requests do not wait: /compact answers 202
    with the run and /requests the current input, as a wait that ran out would."""
    from sessions.context.waiting import key_holder, wait_slot
    from sessions.models import ApiKey

    settings.CTXWEB_COMPACTION_WAIT_SECONDS = 2.0  # no worker runs: a waiting request waits it all
    holder = key_holder(ApiKey.objects.get())  # the one key of the test
    with wait_slot(holder, 30) as waiting:  # another request of the key, waiting meanwhile
        assert waiting
        began = time.monotonic()
        response = api.post("/sessions/talk/compact", {})
        assert time.monotonic() - began < 1.0 and response.status_code == 202
        assert response.json()["status"] == "queued"
        api.put("/sessions/near", {"compaction": {"max_tokens": 300, "keep_recent_tokens": 50, "auto": True}})
        api.post("/sessions/near/messages", {"messages": [
            user(100, "Tell me about the earthquake of 1755."), assistant(100, "It struck Lisbon on 1 November."),
            user(50, "Who rebuilt the city?")]})
        began = time.monotonic()
        body = api.post("/sessions/near/requests", {"messages": [assistant(60, "The Marquis of Pombal.")]}).json()
        assert time.monotonic() - began < 1.0 and body["compaction_in_progress"] is True
    # Once that request is done, the key's next request waits again (the bound: still no worker).
    settings.CTXWEB_COMPACTION_WAIT_SECONDS = 0.4
    began = time.monotonic()
    assert api.post("/sessions/near/requests", {}).json()["compaction_in_progress"] is True
    assert time.monotonic() - began >= 0.4


def test_a_wait_slot_ends_at_its_deadline_even_if_its_holder_never_gives_it_back(db):
    from sessions.context.waiting import wait_slot
    from sessions.models import WaitSlot

    WaitSlot.objects.create(holder="key:1", until=time.time() + 0.2)  # a process that died waiting
    with wait_slot("key:1", 5) as waiting:
        assert not waiting
    time.sleep(0.25)
    with wait_slot("key:1", 5) as waiting:
        assert waiting
    assert WaitSlot.objects.get(holder="key:1").until == 0
