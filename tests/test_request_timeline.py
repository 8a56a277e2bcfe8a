"""The request timeline and the diff between consecutive requests (sessions.dashboard.request_timeline), on a session
rebuilt through record_requests and on rows written directly."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.dashboard.request_timeline import request_diff, request_timeline
from sessions.ingest.append import append_messages
from sessions.models import RecordedRequest, Session

from .recorded_sessions import (
    DROPPED_IN_4,
    DROPPED_IN_5,
    FIRST_QUESTION,
    MODEL,
    REQUESTS,
    SUMMARY,
    orm_session,
    rebuilt_session,
)

pytestmark = pytest.mark.django_db


def test_a_session_not_rebuilt_from_requests_has_no_timeline_and_costs_no_query(project):
    append_messages(project, "plain", [{"role": "user", "content": "hello"}], "test")
    session = Session.objects.get(key="plain")
    with CaptureQueriesContext(connection) as queries:
        assert request_timeline(session) is None
    assert len(queries) == 0


def test_the_timeline_has_one_bar_per_request_with_both_figures(project):
    session = rebuilt_session(project)
    with CaptureQueriesContext(connection) as queries:
        timeline = request_timeline(session)
    assert len(queries) == 1
    stored = list(RecordedRequest.objects.filter(session=session).order_by("number"))
    assert [b.number for b in timeline.bars] == [1, 2, 3, 4, 5]
    assert [b.tokens for b in timeline.bars] == [r.tokens for r in stored]
    assert [b.usage_input_tokens for b in timeline.bars] == [usage for _, _, usage in REQUESTS]
    assert {b.model for b in timeline.bars} == {MODEL}
    assert [b.started_at for b in timeline.bars] == [r.started_at for r in stored]
    assert (timeline.total, timeline.earlier, timeline.unreported) == (5, 0, 1)
    assert timeline.bars[0].difference == 41 - stored[0].tokens
    assert timeline.bars[3].difference is None


def test_the_timeline_marks_what_the_application_dropped_or_wrote_itself(project):
    timeline = request_timeline(rebuilt_session(project))
    assert [(b.dropped, b.unmatched) for b in timeline.bars] == [
        (0, 0), (0, 0), (0, 0), (len(DROPPED_IN_4), 1), (len(DROPPED_IN_5), 1)]
    assert [b.number for b in timeline.marked] == [4, 5]
    assert (timeline.dropped_requests, timeline.rewritten_requests) == (2, 2)


def test_the_bars_stand_on_the_axis_in_order_and_scale_with_their_tokens(project):
    timeline = request_timeline(rebuilt_session(project))
    bars = timeline.bars
    assert [b.x for b in bars] == sorted(b.x for b in bars)
    for b in bars:
        assert b.ours_y + b.ours_height == pytest.approx(timeline.axis_y, abs=0.2)
        assert timeline.pad_left <= b.x and b.usage_x + b.width <= timeline.right
        if b.usage_input_tokens is not None:
            assert b.usage_y + b.usage_height == pytest.approx(timeline.axis_y, abs=0.2)
            assert b.mark_y < min(b.ours_y, b.usage_y)
    tallest = max(bars, key=lambda b: b.tokens)
    assert tallest.ours_y == min(b.ours_y for b in bars)
    assert bars[3].usage_y is None and bars[3].usage_height == 0


def test_the_timeline_draws_the_newest_requests_and_counts_the_rest(project):
    session = rebuilt_session(project)
    timeline = request_timeline(session, limit=2)
    assert [b.number for b in timeline.bars] == [4, 5]
    assert (timeline.total, timeline.earlier) == (5, 3)


def test_the_diff_lists_the_dropped_messages_with_their_raw_seqs(project):
    session = rebuilt_session(project)
    with CaptureQueriesContext(connection) as queries:
        diff = request_diff(session, 4)
    assert len(queries) == 2
    assert [d.seq for d in diff.dropped] == DROPPED_IN_4
    assert [d.role for d in diff.dropped] == ["user", "assistant", "user", "assistant"]
    assert diff.dropped[0].excerpt == FIRST_QUESTION
    assert diff.previous.number == 3 and diff.next_number == 5
    # #5 and #6 were carried before; #6 was the answer to request 3, #7 is the new question.
    assert [(d.seq, d.response) for d in diff.added] == [(6, True), (7, False)]
    assert diff.kept == 1
    assert [(o.index, o.role, o.text, o.also_in_previous) for o in diff.own] == [(1, "user", SUMMARY, False)]
    assert not diff.instructions_changed


def test_the_next_diff_says_the_summary_was_sent_before(project):
    diff = request_diff(rebuilt_session(project), 5)
    assert [d.seq for d in diff.dropped] == DROPPED_IN_5
    assert [o.also_in_previous for o in diff.own] == [True]
    assert diff.next_number is None


def test_the_first_request_has_everything_added_and_nothing_dropped(project):
    diff = request_diff(rebuilt_session(project), 1)
    assert diff.previous is None and diff.dropped == [] and diff.own == []
    assert [d.seq for d in diff.added] == [1]


def test_a_request_that_keeps_its_history_drops_nothing(project):
    diff = request_diff(rebuilt_session(project), 3)
    assert diff.dropped == [] and diff.own == []
    assert [d.seq for d in diff.added] == [4, 5]
    assert diff.kept == 3


def test_no_such_request(project):
    session = rebuilt_session(project)
    assert request_diff(session, 6) is None
    assert request_diff(session, 0) is None


def test_rows_naming_seqs_the_raw_log_lacks_still_make_a_diff(project):
    session = orm_session(project)
    diff = request_diff(session, 3)
    assert [(d.seq, d.message) for d in diff.dropped] == [(3, None)]
    assert [o.text for o in diff.own] == ["<script>alert(3)</script> own note 3"]
    assert request_timeline(session).unreported == 1


def test_long_diffs_are_cut(project):
    session = rebuilt_session(project)
    diff = request_diff(session, 4, limit=2)
    assert [d.seq for d in diff.dropped] == [1, 2] and diff.dropped_more == 2
    assert len(diff.added) == 2 and diff.added_more == 0


def test_own_messages_show_text_parts_tool_calls_and_count_images(project):
    session = orm_session(project, requests=1)
    RecordedRequest.objects.filter(session=session).update(messages=[
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"},
                                          {"type": "image_url", "image_url": {"url": "data:,"}}],
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": 1}"}}]},
    ])
    own = request_diff(session, 1).own[0]
    assert (own.text, own.images, own.tool_calls) == ("part one\npart two", 1, [{"name": "lookup", "arguments": "{\"q\": 1}"}])


def test_bars_are_links_only_while_they_are_wide_enough(project):
    assert request_timeline(orm_session(project, "few", requests=35)).linked
    assert not request_timeline(orm_session(project, "many", requests=36)).linked


def test_the_request_numbers_on_the_axis_are_round(project):
    assert [t["label"] for t in request_timeline(orm_session(project, "five", requests=5)).x_ticks] == [
        "1", "2", "3", "4", "5"]
    assert [t["label"] for t in request_timeline(orm_session(project, "forty", requests=40)).x_ticks] == [
        "1", "5", "10", "15", "20", "25", "30", "35", "40"]
    timeline = request_timeline(orm_session(project, "window", requests=40), limit=12)
    assert [t["label"] for t in timeline.x_ticks] == [str(n) for n in range(29, 41)]
