"""The sessions list: its rows, search, filters, sorts, pages, the htmx fragment, who sees
what, and a query count that does not grow with the page size."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import Session
from sessions.store.notes import set_tags

from .conftest import make_client
from .dom import parse

LIST = reverse("sessions")


def rows(response) -> dict[str, list]:
    """key -> the row's cells (Element), for every session row of the page."""
    assert response.status_code == 200, response.status_code
    table = parse(response).one(id="session-rows")
    found = {}
    for tr in table.find_all("tr"):
        link = tr.find("a", cls="key")
        if link is not None:
            found[link.text()] = tr.find_all("td")
    return found


def keys(response) -> list[str]:
    return list(rows(response))


def make_session(project, key, *, title="", metadata=None, text="hello", count=2):
    update_session(project, key, {"title": title, "metadata": metadata or {}}, "test")
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{text} {i}"} for i in range(count)]
    append_messages(project, key, messages, "test")
    return Session.objects.get(project=project, key=key)


@pytest.fixture
def failed_session(project):
    """A session whose only compaction failed (the summary supplied was empty)."""
    session = make_session(project, "failed-one", title="Failed compaction", count=6)
    outcome = compact(session, force=True, keep_recent_tokens=1, summary="   ")
    assert outcome.status == "failed"
    session.refresh_from_db()
    assert session.failed_compactions == 1
    return session


def test_a_row_shows_key_title_counts_tokens_checkpoints_and_last_activity(viewer_client, story):
    session = story.session
    cells = rows(viewer_client.get(LIST))[session.key]
    assert "default" in cells[0].text()
    assert cells[0].find("a", cls="key").get("href") == f"/p/default/s/{session.key}/"
    assert session.title in cells[1].text()
    assert cells[2].text() == str(session.message_count) == "35"
    assert cells[3].text() == str(session.raw_tokens)
    assert f"{session.input_tokens} / 4000" in cells[4].text()
    assert session.input_tokens < session.raw_tokens
    assert cells[5].text().startswith("2")
    assert cells[6].text().strip() == "—"  # no review yet (tests/dashboard/test_review_pages.py)
    time = cells[7].find("time")
    assert time is not None and time.get("datetime") == session.last_activity_at.isoformat()


def test_a_session_over_max_tokens_has_its_mini_meter_marked_over(viewer_client, project):
    session = make_session(project, "big", count=4, text="word " * 50)
    Session.objects.filter(pk=session.pk).update(max_tokens=20)
    cells = rows(viewer_client.get(LIST))["big"]
    meter = cells[4].find(cls="mini-meter")
    assert "over" in meter.classes


def test_the_mini_meter_fills_its_share_of_max_tokens_up_to_full(viewer_client, project):
    half = make_session(project, "half", count=4, text="word " * 50)
    Session.objects.filter(pk=half.pk).update(max_tokens=half.input_tokens * 2)
    big = make_session(project, "big", count=4, text="word " * 50)
    Session.objects.filter(pk=big.pk).update(max_tokens=20)
    found = rows(viewer_client.get(LIST))
    assert found["half"][4].one(cls="mini-meter").one("rect").get("width") == "50%"
    assert found["big"][4].one(cls="mini-meter").one("rect").get("width") == "100%"


def test_a_failed_compaction_is_shown_on_its_row(viewer_client, failed_session):
    cells = rows(viewer_client.get(LIST))[failed_session.key]
    assert "1 failed" in cells[5].text()


@pytest.mark.parametrize("query", ["story", "STORY", "move a flight", "mia_li_3668", "gate B32"])
def test_search_finds_a_session_by_key_title_metadata_or_message_text(viewer_client, story, project, query):
    make_session(project, "unrelated", title="Something else", metadata={"customer": "someone"}, text="nothing")
    assert keys(viewer_client.get(LIST, {"q": query})) == ["story"]


def test_search_with_no_match_says_so(viewer_client, story):
    response = viewer_client.get(LIST, {"q": "zebra-that-is-nowhere"})
    assert keys(response) == []
    assert "No sessions match" in parse(response).one(id="session-rows").text()


def test_search_treats_like_wildcards_as_text(viewer_client, story, project):
    make_session(project, "percent", title="100% done")
    assert keys(viewer_client.get(LIST, {"q": "100%"})) == ["percent"]
    assert keys(viewer_client.get(LIST, {"q": "%"})) == ["percent"]


def test_the_has_checkpoints_filter_keeps_only_compacted_sessions(viewer_client, story, project):
    make_session(project, "plain")
    assert set(keys(viewer_client.get(LIST))) == {"story", "plain"}
    assert keys(viewer_client.get(LIST, {"has_checkpoints": "1"})) == ["story"]


def test_the_failed_filter_keeps_only_sessions_with_a_failed_compaction(viewer_client, story, failed_session):
    assert keys(viewer_client.get(LIST, {"failed": "1"})) == ["failed-one"]


def test_the_date_range_filters_on_last_activity(viewer_client, project):
    for key, day in [("march", 3), ("april", 4), ("may", 5)]:
        session = make_session(project, key)
        Session.objects.filter(pk=session.pk).update(last_activity_at=datetime(2025, day, 15, 12, tzinfo=UTC))
    assert set(keys(viewer_client.get(LIST, {"from": "2025-04-01"}))) == {"april", "may"}
    assert set(keys(viewer_client.get(LIST, {"to": "2025-04-30"}))) == {"march", "april"}
    assert keys(viewer_client.get(LIST, {"from": "2025-04-15", "to": "2025-04-15"})) == ["april"]
    assert keys(viewer_client.get(LIST, {"from": "2025-06-01"})) == []


def form_errors(response) -> list[str]:
    found = parse(response).find(cls="form-errors")
    return [li.text() for li in found.find_all("li")] if found is not None else []


def test_a_malformed_date_is_shown_as_a_form_error_and_the_list_is_not_filtered_by_it(viewer_client, story):
    response = viewer_client.get(LIST, {"from": "yesterday", "to": "2026-13-45"})
    assert keys(response) == ["story"]
    errors = form_errors(response)
    assert len(errors) == 2
    assert "Active from “yesterday”" in errors[0] and "YYYY-MM-DD" in errors[0]
    assert "Active to “2026-13-45”" in errors[1] and "YYYY-MM-DD" in errors[1]


def test_the_filters_that_parse_still_apply_beside_one_that_does_not(viewer_client, story, project):
    make_session(project, "plain")
    response = viewer_client.get(LIST, {"has_checkpoints": "1", "from": "2026-02-30"})
    assert keys(response) == ["story"]
    assert len(form_errors(response)) == 1


def test_an_unknown_sort_or_page_size_is_a_form_error_and_the_default_is_used(viewer_client, story, project):
    make_session(project, "plain")
    response = viewer_client.get(LIST, {"sort": "'; drop table", "size": "7"})
    assert set(keys(response)) == {"story", "plain"}
    errors = form_errors(response)
    assert len(errors) == 2
    assert errors[0].startswith("Sort") and errors[1].startswith("Per page")


def test_a_list_with_good_values_shows_no_form_errors(viewer_client, story):
    response = viewer_client.get(LIST, {"from": "2020-01-01", "sort": "tokens", "size": "50", "has_checkpoints": "1"})
    assert keys(response) == ["story"]
    assert parse(response).find(cls="form-errors") is None


def test_the_rows_fragment_carries_the_form_errors_too(viewer_client, story):
    response = viewer_client.get(LIST, {"to": "2026-13-45"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="session-rows")
    assert response.content.decode().lstrip().startswith('<div id="session-rows">')
    assert keys(response) == ["story"]
    assert len(form_errors(response)) == 1


def test_a_form_error_shows_the_value_escaped(viewer_client, story):
    response = viewer_client.get(LIST, {"from": "<script>alert(1)</script>"})
    assert b"<script>alert(1)</script>" not in response.content
    assert "<script>alert(1)</script>" in form_errors(response)[0]


def test_the_tag_filter_keeps_only_tagged_sessions(viewer_client, viewer_user, story, project):
    make_session(project, "untagged")
    set_tags(story.session, viewer_user, ["bug", "needs-review"])
    assert keys(viewer_client.get(LIST, {"tag": "bug"})) == ["story"]
    assert keys(viewer_client.get(LIST, {"tag": "nothing-has-this"})) == []


def test_the_project_filter_keeps_only_that_projects_sessions(superuser_client, story, other_session):
    assert set(keys(superuser_client.get(LIST))) == {"story", "other-chat"}
    assert keys(superuser_client.get(LIST, {"project": "other"})) == ["other-chat"]
    assert keys(superuser_client.get(LIST, {"project": "default"})) == ["story"]


def test_sorts_order_by_activity_tokens_input_and_messages(viewer_client, project):
    now = datetime(2025, 5, 1, tzinfo=UTC)
    specs = [("small", 2, "a", 3), ("medium", 6, "b " * 30, 1), ("large", 4, "c " * 200, 2)]
    for key, count, text, hours_ago in specs:
        session = make_session(project, key, count=count, text=text)
        Session.objects.filter(pk=session.pk).update(last_activity_at=now - timedelta(hours=hours_ago))
    assert keys(viewer_client.get(LIST)) == ["medium", "large", "small"]
    assert keys(viewer_client.get(LIST, {"sort": "activity"})) == ["medium", "large", "small"]
    assert keys(viewer_client.get(LIST, {"sort": "tokens"})) == ["large", "medium", "small"]
    assert keys(viewer_client.get(LIST, {"sort": "input"})) == ["large", "medium", "small"]
    assert keys(viewer_client.get(LIST, {"sort": "messages"})) == ["medium", "large", "small"]
    assert keys(viewer_client.get(LIST, {"sort": "'; drop table"})) == ["medium", "large", "small"]


def test_pages_hold_the_chosen_number_of_rows_and_link_to_each_other(viewer_client, project):
    start = datetime(2025, 1, 1, tzinfo=UTC)
    for i in range(30):
        session = make_session(project, f"s{i:02d}", count=1)
        Session.objects.filter(pk=session.pk).update(last_activity_at=start + timedelta(minutes=i))
    first = viewer_client.get(LIST)
    assert len(keys(first)) == 25
    assert keys(first)[0] == "s29"
    pager = parse(first).one(cls="pager")
    assert "30 sessions" in pager.text()
    older = [a for a in pager.find_all("a") if "page=2" in a.get("href")]
    assert older, pager.text()
    second = viewer_client.get(LIST + older[0].get("href"))
    assert keys(second) == [f"s{i:02d}" for i in range(4, -1, -1)]
    assert set(keys(first)).isdisjoint(keys(second))
    assert len(keys(viewer_client.get(LIST, {"size": "50"}))) == 30
    assert len(keys(viewer_client.get(LIST, {"size": "7"}))) == 25  # not an offered size
    assert keys(viewer_client.get(LIST, {"page": "99"})) == keys(second)  # past the end: the last page
    assert keys(viewer_client.get(LIST, {"page": "x"})) == keys(first)


def test_the_pager_keeps_the_filters(viewer_client, project):
    for i in range(30):
        make_session(project, f"kept-{i:02d}", count=1)
    make_session(project, "dropped-by-filter", count=1)
    pager = parse(viewer_client.get(LIST, {"q": "kept", "sort": "tokens"})).one(cls="pager")
    href = next(a.get("href") for a in pager.find_all("a") if "page=2" in a.get("href"))
    assert "q=kept" in href and "sort=tokens" in href
    assert all(key.startswith("kept-") for key in keys(viewer_client.get(LIST + href)))


def test_an_htmx_request_for_the_rows_gets_only_the_rows_fragment(viewer_client, story):
    response = viewer_client.get(LIST, {"q": "story"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="session-rows")
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="session-rows">')
    assert "<html" not in body and "<form" not in body
    assert keys(response) == ["story"]


def test_an_htmx_request_for_another_target_gets_the_whole_page(viewer_client, story):
    response = viewer_client.get(LIST, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="something-else")
    assert b"<html" in response.content


def test_the_page_has_the_filter_form(viewer_client, story):
    form = parse(viewer_client.get(LIST)).one("form", cls="filters")
    names = {e.get("name") for e in form.iter() if e.get("name")}
    assert {"q", "project", "tag", "has_checkpoints", "failed", "from", "to", "sort", "size"} <= names


def test_an_outsider_never_sees_the_default_projects_sessions(outsider_client, story, other_session):
    assert keys(outsider_client.get(LIST)) == ["other-chat"]
    assert keys(outsider_client.get(LIST, {"project": "default"})) == []
    assert keys(outsider_client.get(LIST, {"q": "story"})) == []
    assert keys(outsider_client.get(LIST, {"q": "gate B32"})) == []
    response = outsider_client.get(LIST)
    assert story.session.title not in response.content.decode()
    form = parse(response).one("form", cls="filters")
    assert [o.get("value") for o in form.one("select", name="project").find_all("option")] == ["", "other"]


def test_a_member_of_one_project_sees_only_it_and_a_superuser_sees_all(viewer_client, superuser_client, story, other_session):
    assert keys(viewer_client.get(LIST)) == ["story"]
    assert keys(viewer_client.get(LIST, {"project": "other"})) == []
    assert set(keys(superuser_client.get(LIST))) == {"story", "other-chat"}


def test_a_user_without_any_project_sees_an_empty_list(make_user, story):
    client = make_client(make_user("nobody"))
    assert keys(client.get(LIST)) == []


def test_the_list_page_has_one_project_selector_the_filters_one(viewer_client, story, other_session):
    doc = parse(viewer_client.get(LIST))
    selectors = [e for e in doc.iter() if e.tag == "select" and e.get("name") == "project"]
    assert len(selectors) == 1
    assert "filters" in selectors[0].parent.classes
    assert doc.find("form", cls="project-switcher") is None


def test_other_pages_keep_the_project_switcher_in_the_header(viewer_client, story):
    doc = parse(viewer_client.get(story.url()))
    assert doc.one("form", cls="project-switcher").one("select", id="project-switch")


def empty_list_text(client) -> tuple[str, list[str]]:
    cell = parse(client.get(LIST, {"q": "zebra-that-is-nowhere"})).one(id="session-rows").one("td", cls="empty")
    return cell.text(), [a.get("href") for a in cell.find_all("a")]


def test_an_empty_list_points_an_editor_to_the_api_and_the_import_page(editor_client, story):
    text, links = empty_list_text(editor_client)
    assert "through the API" in text and "Import page" in text
    assert links == ["/api/v1/docs", reverse("import")]


def test_an_empty_list_points_a_viewer_to_the_api_only(viewer_client, story):
    text, links = empty_list_text(viewer_client)
    assert "through the API" in text and "Import" not in text
    assert links == ["/api/v1/docs"]


@pytest.fixture
def many_sessions(project, viewer_user):
    """120 sessions, each with messages and a tag, and some with a checkpoint."""
    for i in range(120):
        key = f"bulk-{i:03d}"
        append_messages(project, key, [
            {"role": "user", "content": f"question {i} " + "word " * 40},
            {"role": "assistant", "content": f"answer {i}"},
            {"role": "user", "content": f"follow-up {i}"},
        ], "test")
        session = Session.objects.get(project=project, key=key)
        set_tags(session, viewer_user, [f"t{i % 5}", "bulk"])
        if i % 10 == 0:
            compact(session, force=True, keep_recent_tokens=1, summary="short")


def _queries(client, params) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(LIST, params)
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_the_list_issues_the_same_number_of_queries_for_25_and_100_rows(viewer_client, many_sessions):
    assert len(keys(viewer_client.get(LIST, {"size": "100"}))) == 100
    small = _queries(viewer_client, {"size": "25"})
    large = _queries(viewer_client, {"size": "100"})
    assert small == large, f"25 rows: {small} queries, 100 rows: {large}"


def test_a_filtered_search_issues_the_same_number_of_queries_for_25_and_100_rows(viewer_client, many_sessions):
    params = {"q": "word", "tag": "bulk", "sort": "tokens"}
    small = _queries(viewer_client, {**params, "size": "25"})
    large = _queries(viewer_client, {**params, "size": "100"})
    assert small == large, f"25 rows: {small} queries, 100 rows: {large}"
