"""Inputs past 2**31 tokens (every token figure is stored in 64 bits) and the caps on image parts per
message and per append batch, which hold for every format an append accepts."""

import json

import pytest

from sessions.context.figures import refresh_input_tokens
from sessions.models import Checkpoint, CompactionRun, Message, Session
from tests.api.conftest import assert_error, stored

pytestmark = pytest.mark.django_db

HUGE = 2**30  # one message's figure: four of them pass 2**31, the most a 32-bit column holds


def test_a_session_whose_input_passed_two_to_the_31_tokens_still_takes_appends_and_compacts(api, project):
    api.put("/sessions/big", {"compaction": {"max_tokens": 1000, "keep_recent_tokens": 100, "auto": True}})
    turns = []
    for n in range(1, 4):
        turns += [{"role": "user", "content": f"Question {n}"}, {"role": "assistant", "content": f"Answer {n}"}]
    api.post("/sessions/big/messages", {"messages": turns})
    # As ten requests of many small images would leave it, without sending them.
    Message.objects.filter(session__key="big").update(tokens=HUGE)
    session = Session.objects.get(key="big")
    Session.objects.filter(pk=session.pk).update(raw_tokens=6 * HUGE)
    refresh_input_tokens(session)
    assert Session.objects.get(pk=session.pk).input_tokens > 2**31

    appended = api.post("/sessions/big/messages", {"messages": [{"role": "user", "content": "Question 4"}]})

    assert appended.status_code == 200, appended.content[:500]
    assert Message.objects.filter(session__key="big").count() == 7
    # The append's automatic compaction ran (the immediate task backend) and made a checkpoint.
    runs = CompactionRun.objects.filter(session__key="big").values_list("state", "last_error")
    assert {state for state, _ in runs} == {"completed"}, list(runs)
    checkpoint = Checkpoint.objects.filter(session__key="big").earliest("last_seq")
    assert checkpoint.tokens_before > 2**31 and checkpoint.replaced_tokens >= HUGE
    api.post("/sessions/big/messages", {"messages": [{"role": "assistant", "content": "Answer 4"},
                                                     {"role": "user", "content": "Question 5"}]})
    compacted = api.post("/sessions/big/compact", {"force": True, "keep_recent_tokens": 0})
    assert compacted.status_code == 200, compacted.content[:500]
    assert compacted.json()["status"] == "completed"
    assert api.get("/sessions/big/model-input").status_code == 200
    session.refresh_from_db()
    assert session.raw_tokens > 6 * HUGE


# --- caps on image parts ----------------------------------------------------------------------------

IMAGE_URL = "https://example.com/a.png"


def images(fmt: str, count: int) -> dict:
    """One user message of `count` image parts, in the shape `fmt` sends it."""
    if fmt == "ctxweb":
        parts = [{"type": "image", "url": IMAGE_URL}] * count
        return {"role": "user", "content": parts}
    if fmt == "openai":
        return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": IMAGE_URL}}] * count}
    if fmt == "anthropic":
        return {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": IMAGE_URL}}] * count}
    assert fmt == "openai-responses"
    return {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": IMAGE_URL}] * count}


FORMATS = ["ctxweb", "openai", "anthropic", "openai-responses"]


@pytest.fixture
def caps(settings):
    settings.CTXWEB_MAX_IMAGE_PARTS_PER_MESSAGE = 3
    settings.CTXWEB_MAX_IMAGE_PARTS_PER_REQUEST = 5


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_message_of_more_image_parts_than_the_cap_is_refused_with_422_and_nothing_is_stored(api, caps, fmt):
    before = stored()

    response = api.post("/sessions/pics/messages", {"format": fmt, "messages": [images(fmt, 4)]})

    body = assert_error(response, 422, "too_many_images")
    assert body["detail"] == "messages[0]: a message may hold at most 3 image parts; this one holds 4"
    assert stored() == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_batch_of_more_image_parts_than_the_cap_is_refused_with_422_and_nothing_is_stored(api, caps, fmt):
    before = stored()

    response = api.post("/sessions/pics/messages", {"format": fmt, "messages": [images(fmt, 3), images(fmt, 3)]})

    body = assert_error(response, 422, "too_many_images")
    assert body["detail"] == "a request may hold at most 5 image parts; this one holds 6"
    assert stored() == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_image_parts_up_to_both_caps_are_stored(api, caps, fmt):
    response = api.post("/sessions/pics/messages", {"format": fmt, "messages": [images(fmt, 3), images(fmt, 2)]})

    assert response.status_code == 200, response.content[:500]
    parts = [p for m in Message.objects.filter(session__key="pics") for p in m.content]
    assert len(parts) == 5 and {p["type"] for p in parts} == {"image"}


def test_a_request_build_carrying_too_many_image_parts_is_refused_and_stores_nothing(api, caps):
    before = stored()

    response = api.post("/sessions/pics/requests", {"messages": [images("ctxweb", 3), images("ctxweb", 3)]})

    assert_error(response, 422, "too_many_images")
    assert stored() == before


def test_the_defaults_are_20_per_message_and_100_per_request(api):
    at_cap = api.post("/sessions/pics/messages", {"messages": [images("ctxweb", 20)] * 5})
    assert at_cap.status_code == 200, at_cap.content[:500]

    assert_error(api.post("/sessions/pics2/messages", {"messages": [images("ctxweb", 21)]}), 422, "too_many_images")
    over = api.post("/sessions/pics2/messages", {"messages": [images("ctxweb", 20)] * 5 + [images("ctxweb", 1)]})
    assert_error(over, 422, "too_many_images")
    assert not Session.objects.filter(key="pics2").exists()


def test_an_import_splits_its_batches_by_the_request_cap_and_refuses_a_message_over_the_message_cap(
        project, caps):
    from sessions.ingest.importers import import_data

    report = import_data(project, "ok.json", json.dumps([images("openai", 3)] * 4).encode(), fmt="openai")

    assert report.error is None, report.error
    assert Message.objects.filter(session__key="ok").count() == 4
    before = stored()
    refused = import_data(project, "bad.json", json.dumps([images("openai", 4)]).encode(), fmt="openai")
    assert "at most 3 image parts" in refused.error
    assert stored() == before
