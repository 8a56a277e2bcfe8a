"""One OTLP export costs what it carries, and no more (security issue 37, item 6): a request is matched to
the raw log in one pass (by position, then by content in order, each digest's seqs looked up by bisection),
so many identical messages cost as many as different ones; and one export records at most
CTXWEB_MAX_CAPTURE_MESSAGES messages a conversation, so it holds each session's lock (SQLite's write lock)
for a bounded time. What passes the bound is refused as rejected spans, storing nothing of them. Many
conversations in one export (the SDK's batches of 512 spans from agents running at once) are each bounded
on their own: the export as a whole is bounded by its size."""

import gzip

import pytest
from django.test import override_settings

from sessions.models import Message, RecordedRequest, Session
from tests.otlp.spans import SECOND, T0, export, openinference, span
from tests.otlp.test_receiver import answer, post

pytestmark = pytest.mark.django_db

SAME = {"role": "user", "content": "the same question"}
ANSWER = [{"role": "assistant", "content": "the same answer"}]


def identical(count: int, session: str, start: int = T0) -> bytes:
    return gzip.compress(export(span(openinference([SAME] * count, ANSWER, session=session), start=start))
                         .SerializeToString())


@override_settings(CTXWEB_MAX_CAPTURE_MESSAGES=2_000)
def test_an_export_past_the_bound_is_refused_as_rejected_spans_and_stores_nothing(api_key):
    body = identical(30_000, "flood")

    reply = answer(post(body, api_key, **{"Content-Encoding": "gzip"}))

    assert reply.partial_success.rejected_spans == 1
    assert "more than 2000 messages in one export (CTXWEB_MAX_CAPTURE_MESSAGES)" in reply.partial_success.error_message
    assert not Session.objects.filter(key="flood").exists() and not RecordedRequest.objects.exists()


@override_settings(CTXWEB_MAX_CAPTURE_MESSAGES=2_000)
def test_a_conversations_spans_within_the_bound_are_kept_and_those_past_it_refused(api_key):
    spans = [span(openinference([SAME] * (900 + n), ANSWER, session="s"), start=T0 + n * SECOND) for n in range(3)]

    reply = answer(post(export(*spans).SerializeToString(), api_key))

    assert reply.partial_success.rejected_spans == 1
    assert "its conversation carries more than 2000 messages" in reply.partial_success.error_message
    assert Session.objects.get(key="s").request_count == 2


@override_settings(CTXWEB_MAX_CAPTURE_MESSAGES=2_000)
def test_each_conversation_of_an_export_is_bounded_on_its_own(api_key):
    """Three conversations of 900 messages in one export, 2,700 in all: each is within the bound, all kept."""
    spans = [span(openinference([SAME] * 900, ANSWER, session=f"s{n}"), start=T0 + n * SECOND) for n in range(3)]

    reply = answer(post(export(*spans).SerializeToString(), api_key))

    assert reply.partial_success.rejected_spans == 0
    assert sorted(Session.objects.values_list("key", flat=True)) == ["s0", "s1", "s2"]


def test_identical_messages_are_matched_in_one_pass_each_stored_once(api_key):
    """An application sending 3,000 identical messages, then the same with one more turn: every message is
    one raw message, the second request matches the first by position, and the retried export stores
    nothing twice."""
    first = identical(3_000, "same")
    answer(post(first, api_key, **{"Content-Encoding": "gzip"}))
    answer(post(first, api_key, **{"Content-Encoding": "gzip"}))
    messages = [SAME] * 3_000 + ANSWER + [{"role": "user", "content": "and now?"}]
    answer(post(export(span(openinference(messages, ANSWER, session="same"), start=T0 + SECOND)).SerializeToString(),
                api_key))

    session = Session.objects.get(key="same")
    assert session.request_count == 2 and session.message_count == 3_003
    second = RecordedRequest.objects.get(session=session, number=2)
    assert second.message_seqs == list(range(1, 3_003)) and second.dropped_seqs == []
    assert Message.objects.filter(session=session, text="the same question").count() == 3_000
