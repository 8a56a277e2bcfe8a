"""The session page's request timeline and the recorded/<n>/ diff, for sessions rebuilt from recorded
requests (through record_requests, and from rows written directly); other sessions' pages are unchanged."""

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from sessions.models import RecordedRequest
from tests.recorded_sessions import (
    DROPPED_IN_4,
    FIRST_QUESTION,
    SUMMARY,
    orm_session,
    rebuilt_session,
)

from .conftest import session_url
from .dom import parse


def diff_url(session, number):
    return reverse("recorded_request_diff", args=[session.project.name, session.key, number])


def timeline_of(client, session):
    response = client.get(session_url(session))
    assert response.status_code == 200
    return parse(response).one("section", id="request-timeline")


def test_the_session_page_lists_every_request_with_both_figures(viewer_client, project):
    session = rebuilt_session(project)
    timeline = timeline_of(viewer_client, session)
    rows = timeline.one("table").one("tbody").find_all("tr")
    stored = list(RecordedRequest.objects.filter(session=session).order_by("number"))
    assert [r.get("id") for r in rows] == [f"request-{n}" for n in range(1, 6)]
    for row, request in zip(rows, stored, strict=True):
        cells = {td.get("data-label"): td.text() for td in row.find_all("td")}
        assert cells["Tokens, ctxweb"] == str(request.tokens)
        expected = "not reported" if request.usage_input_tokens is None else str(request.usage_input_tokens)
        assert cells["Tokens, provider"].startswith(expected)
        assert cells["Model"] == "gpt-4o-mini"
        assert request.started_at.strftime("%Y-%m-%d %H:%M:%S") in cells["Sent at"]
    fourth = {td.get("data-label"): td.text() for td in rows[3].find_all("td")}
    assert f"{len(DROPPED_IN_4)} dropped" in fourth["Dropped by the application"]
    assert "1 own" in fourth["Its own messages"]
    assert "marked" in rows[3].classes and "marked" not in rows[2].classes
    summary = timeline.one("p", cls="timeline-summary").text()
    assert "2 requests dropped messages" in summary


def test_each_bar_is_a_named_link_to_its_diff(viewer_client, project):
    session = rebuilt_session(project)
    svg = timeline_of(viewer_client, session).one("svg", role="group")
    links = svg.find_all("a")
    assert [a.get("href") for a in links] == [diff_url(session, n) for n in range(1, 6)]
    label = links[3].get("aria-label")
    assert label.startswith("request 4, gpt-4o-mini, sent ")
    assert "none reported by the provider" in label and "4 messages dropped by the application" in label
    assert links[3].one("title").text() == label
    assert len(links[3].find_all("polygon", cls="dropped-mark")) == 1
    assert len(links[3].find_all("polygon", cls="own-mark")) == 1
    assert links[2].find("polygon") is None
    assert len(links[3].find_all("rect", cls="usage")) == 0 and len(links[4].find_all("rect", cls="usage")) == 1


def test_other_sessions_pages_have_no_timeline(viewer_client, story):
    response = viewer_client.get(story.url())
    assert response.status_code == 200
    assert b"request-timeline" not in response.content
    assert b"Requests the application sent" not in response.content


def test_the_page_reads_the_requests_in_a_fixed_number_of_queries_however_many(viewer_client, project):
    """The timeline reads the requests once (tests/test_request_timeline.py); the raw log's explain reads
    the latest request and the drops (sessions.context.explain.request_history): at most 4, for 3 or 30 requests."""
    few, many = orm_session(project, "few", requests=3), orm_session(project, "many", requests=30)
    counts, request_reads = [], []
    for session in (few, many):
        with CaptureQueriesContext(connection) as queries:
            assert viewer_client.get(session_url(session)).status_code == 200
        counts.append(len(queries))
        request_reads.append(sum("recordedrequest" in q["sql"] for q in queries.captured_queries))
    assert counts[0] == counts[1]
    assert request_reads[0] == request_reads[1] <= 4


def test_the_diff_shows_dropped_added_and_own_messages(viewer_client, project):
    session = rebuilt_session(project)
    response = viewer_client.get(diff_url(session, 4))
    assert response.status_code == 200
    doc = parse(response)
    assert doc.one("h1").text() == "Request 4: what changed since request 3"
    dropped = doc.one("section", cls="diff-dropped").find_all("article")
    assert [a.one("a", cls="permalink").text() for a in dropped] == [f"#{s}" for s in DROPPED_IN_4]
    assert dropped[0].one("a", cls="permalink").get("href") == session_url(session) + "?seq=1#m-1"
    assert dropped[0].one("span", cls="role").text() == "user"
    assert dropped[0].one("p", cls="excerpt").text() == FIRST_QUESTION
    added = doc.one("section", cls="diff-added").find_all("article")
    assert [a.one("a", cls="permalink").text() for a in added] == ["#6", "#7"]
    assert "the answer to request 3" in added[0].text()
    own = doc.one("section", cls="diff-own").find_all("article")
    assert [o.one("div", cls="own-text").text() for o in own] == [SUMMARY]
    assert b"&lt;b&gt;and&lt;/b&gt;" in response.content and b"<b>and</b>" not in response.content
    nav = doc.one("p", cls="request-nav")
    compare = "/compare/?project=default&a=rebuilt&b=rebuilt&a_request=3&b_request=4"  # tests/dashboard/test_compare_page.py
    assert [a.get("href") for a in nav.find_all("a")] == [
        diff_url(session, 3), session_url(session) + "#request-timeline", compare, diff_url(session, 5)]


def test_the_first_request_shows_what_it_sent(viewer_client, project):
    session = rebuilt_session(project)
    doc = parse(viewer_client.get(diff_url(session, 1)))
    assert doc.one("h1").text() == "Request 1: what it sent"
    assert doc.find("section", cls="diff-dropped") is None
    assert [a.one("a", cls="permalink").text() for a in doc.one("section", cls="diff-added").find_all("article")] == ["#1"]


def test_rows_made_directly_render_and_escape_what_was_sent(viewer_client, project):
    session = orm_session(project)
    assert timeline_of(viewer_client, session).one("tbody").find_all("tr")[1].one(
        "td", **{"data-label": "Tokens, provider"}).text() == "not reported"
    response = viewer_client.get(diff_url(session, 2))
    assert response.status_code == 200
    assert b"<script>alert(2)</script>" not in response.content
    assert b"&lt;script&gt;alert(2)&lt;/script&gt; own note 2" in response.content
    assert "Not in the raw log." in parse(response).one("section", cls="diff-dropped").text()


def test_no_such_request_is_a_404(viewer_client, project):
    session = rebuilt_session(project)
    assert viewer_client.get(diff_url(session, 6)).status_code == 404
    assert viewer_client.get(diff_url(session, 0)).status_code == 404
    assert viewer_client.get(session_url(session) + "recorded/" + "9" * 30 + "/").status_code == 404


def test_only_who_may_see_the_session_sees_its_diffs(anonymous_client, outsider_client, project):
    session = rebuilt_session(project)
    response = anonymous_client.get(diff_url(session, 2))
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert outsider_client.get(diff_url(session, 2)).status_code == 404
    assert outsider_client.get(session_url(session)).status_code == 404


def test_the_diff_page_is_get_only(viewer_client, project):
    session = rebuilt_session(project)
    assert viewer_client.post(diff_url(session, 2)).status_code == 405


def test_many_requests_link_from_the_table_only(viewer_client, project):
    session = orm_session(project, "many", requests=40)
    timeline = timeline_of(viewer_client, session)
    assert timeline.one("svg", role="group").find("a") is None
    assert len(timeline.one("tbody").find_all("a")) == 40


def test_the_diff_lists_the_application_s_edits_of_raw_messages(viewer_client, project):
    from datetime import UTC, datetime, timedelta

    from sessions.ingest.recorded_requests import CapturedRequest, record_requests

    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]}
    full, short = ({"role": "tool", "tool_call_id": "c1", "content": text} for text in ("x\n" * 50, "(50 lines omitted)"))
    answer, thanks = {"role": "assistant", "content": "50 lines."}, {"role": "user", "content": "thanks"}
    sent = [([{"role": "user", "content": "cat it"}], call),
            ([{"role": "user", "content": "cat it"}, call, full], answer),
            ([{"role": "user", "content": "cat it"}, call, short, answer, thanks], {"role": "assistant", "content": "ok"})]
    record_requests(project, [CapturedRequest("edits", f"r{n}", "otlp", t0 + timedelta(seconds=n), m, [r])
                              for n, (m, r) in enumerate(sent, start=1)])
    session = RecordedRequest.objects.get(external_id="r3").session
    doc = parse(viewer_client.get(diff_url(session, 3)))
    edited = doc.one("section", cls="diff-own").find_all("article", cls="edited-message")
    assert len(edited) == 1 and edited[0].one("div", cls="own-text").text() == "(50 lines omitted)"
    assert "its edit of #3" in edited[0].text() and "new in request 3" in edited[0].text()
    assert doc.find("section", cls="diff-dropped").find_all("article") == []
