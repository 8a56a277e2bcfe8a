"""GET /api/v1/sessions?q=&limit=&cursor=: the project's sessions, most recently active
first, in pages chained by an opaque cursor."""

import base64
from datetime import timedelta

import pytest
from django.utils import timezone

from sessions.models import Session
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db


def keys(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [item["key"] for item in response.json()["items"]]


@pytest.fixture
def seven_sessions(api, project):
    """seven sessions s1..s7, s7 the most recently active; s1 and s2 share one last-activity time."""
    now = timezone.now()
    for n in range(1, 8):
        api.put(f"/sessions/s{n}", {"title": f"Session number {n}"})
        Session.objects.filter(project=project, key=f"s{n}").update(last_activity_at=now - timedelta(minutes=10 - n))
    Session.objects.filter(project=project, key="s1").update(last_activity_at=now - timedelta(minutes=8))
    return [f"s{n}" for n in range(7, 0, -1)]


def cursor_of(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def test_it_lists_the_projects_sessions_most_recently_active_first(api, seven_sessions, other_api):
    other_api.put("/sessions/theirs", {"title": "Session number 99"})

    response = api.get("/sessions")

    assert keys(response)[:5] == ["s7", "s6", "s5", "s4", "s3"]
    assert sorted(keys(response)) == sorted(seven_sessions)
    assert response.json()["next_cursor"] is None
    first = response.json()["items"][0]
    assert first["title"] == "Session number 7"
    assert set(first) >= {"message_count", "raw_tokens", "model_input_tokens", "checkpoint_count"}


def test_it_pages_through_every_session_once_with_the_cursor(api, seven_sessions):
    seen, cursor, pages = [], "", 0
    while True:
        query = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        response = api.get("/sessions", query=query)
        page = keys(response)
        pages += 1
        seen += page
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
        assert len(page) == 3

    assert pages == 3
    assert len(seen) == len(set(seen)) == 7
    assert set(seen) == set(seven_sessions)
    assert seen[:5] == ["s7", "s6", "s5", "s4", "s3"]


def test_a_page_that_ends_exactly_at_the_last_session_has_no_cursor(api, seven_sessions):
    response = api.get("/sessions", query={"limit": 7})

    assert len(keys(response)) == 7
    assert response.json()["next_cursor"] is None


def test_it_searches_key_and_title_without_regard_to_case(api, seven_sessions):
    api.put("/sessions/support:ticket-9", {"title": "Refund for ORDER 12"})

    assert keys(api.get("/sessions", query={"q": "TICKET"})) == ["support:ticket-9"]
    assert keys(api.get("/sessions", query={"q": "order 12"})) == ["support:ticket-9"]
    assert sorted(keys(api.get("/sessions", query={"q": "number 1"}))) == ["s1"]
    assert keys(api.get("/sessions", query={"q": "nothing like this"})) == []


def test_it_searches_metadata_and_message_text_as_the_dashboard_list_does(api, seven_sessions):
    api.put("/sessions/with-metadata", {"metadata": {"customer": "mia_li_3668"}})
    api.post("/sessions/with-text/messages", {"messages": [{"role": "user", "content": "Is gate B32 open?"}]})

    assert keys(api.get("/sessions", query={"q": "MIA_LI"})) == ["with-metadata"]
    assert keys(api.get("/sessions", query={"q": "gate b32"})) == ["with-text"]
    assert keys(api.get("/sessions", query={"q": "gate B99"})) == []


def test_a_message_search_in_another_project_finds_nothing_here(api, other_api, seven_sessions):
    other_api.post("/sessions/theirs/messages", {"messages": [{"role": "user", "content": "a zeppelin ticket"}]})

    assert keys(api.get("/sessions", query={"q": "zeppelin"})) == []
    assert keys(other_api.get("/sessions", query={"q": "zeppelin"})) == ["theirs"]


def test_search_results_page_with_the_cursor_too(api, seven_sessions):
    first = api.get("/sessions", query={"q": "session number", "limit": 4}).json()
    second = api.get("/sessions", query={"q": "session number", "limit": 4, "cursor": first["next_cursor"]}).json()

    page_keys = [i["key"] for i in first["items"]] + [i["key"] for i in second["items"]]
    assert sorted(page_keys) == sorted(seven_sessions)
    assert second["next_cursor"] is None


def test_another_projects_key_sees_none_of_these_sessions(other_api, seven_sessions):
    assert keys(other_api.get("/sessions")) == []
    assert keys(other_api.get("/sessions", query={"q": "s1"})) == []


@pytest.mark.parametrize("cursor", [
    pytest.param("!!!not-base64!!!", id="not base64"),
    pytest.param(cursor_of("no separator"), id="no separator"),
    pytest.param(cursor_of("yesterday|5"), id="not a date"),
    pytest.param(cursor_of("2025-01-01T00:00:00+00:00|five"), id="id not a number"),
    pytest.param(cursor_of("2025-01-01T00:00:00+00:00|5|6"), id="too many parts"),
    pytest.param(base64.urlsafe_b64encode(b"\xff\xfe|1").decode(), id="not utf-8"),
    pytest.param(cursor_of("9999-12-31T23:59:59-23:59|5"), id="date past the year 9999 in UTC"),
    pytest.param(cursor_of("0001-01-01T00:00:00+14:00|5"), id="date before the year 1 in UTC"),
])
def test_it_rejects_a_bad_cursor_with_422(api, seven_sessions, cursor):
    assert_error(api.get("/sessions", query={"cursor": cursor}), 422)


@pytest.mark.parametrize("stamp", ["2999-01-01T00:00:00+16:00", "2999-01-01T00:00:00-23:59"])
def test_a_cursor_with_any_utc_offset_is_answered_without_a_server_error(api, seven_sessions, stamp):
    response = api.get("/sessions", query={"cursor": cursor_of(f"{stamp}|999999")})

    assert response.status_code in (200, 422), response.content
    if response.status_code == 200:
        assert len(keys(response)) == 7


@pytest.mark.parametrize("query", [
    {"limit": 0}, {"limit": 201}, {"limit": "ten"}, {"q": "x" * 201}, {"cursor": "c" * 201},
], ids=["limit 0", "limit 201", "limit not a number", "q too long", "cursor too long"])
def test_it_rejects_bad_query_parameters_with_422(api, seven_sessions, query):
    assert_error(api.get("/sessions", query=query), 422, "invalid_request")


def test_it_rejects_a_search_with_a_nul_character_with_422(api, seven_sessions):
    """PostgreSQL text cannot hold NUL: the search was a 500 there (found by the stateful fuzz test)."""
    body = assert_error(api.get("/sessions", query={"q": "s\x001"}), 422, "invalid_field")

    assert "NUL" in body["detail"]


def test_it_rejects_a_request_without_a_valid_key_with_401(api, seven_sessions, bad_credentials):
    kwargs, code = bad_credentials

    body = assert_error(api.get("/sessions", **kwargs), 401, code)

    assert "items" not in body


def test_q_finds_a_session_by_a_tag_name_or_the_words_of_a_note_as_the_dashboard_list_does(api, project, other_api):
    from django.contrib.auth import get_user_model

    from sessions.store.notes import add_note, set_tags

    for key in ("tagged", "noted", "plain"):
        api.post(f"/sessions/{key}/messages", {"messages": [{"role": "user", "content": "hello there"}]})
    other_api.post("/sessions/theirs/messages", {"messages": [{"role": "user", "content": "hello there"}]})
    staff = get_user_model().objects.create_user("staff")
    set_tags(Session.objects.get(project=project, key="tagged"), staff, ["escalated"])
    add_note(Session.objects.get(project=project, key="noted"), staff, "Refund approved by Dana", seq=1)
    theirs = Session.objects.get(key="theirs")
    set_tags(theirs, staff, ["escalated"])
    add_note(theirs, staff, "Refund approved by Dana")

    assert keys(api.get("/sessions", query={"q": "escalated"})) == ["tagged"]
    assert keys(api.get("/sessions", query={"q": "dana REFUND"})) == ["noted"]
    assert keys(api.get("/sessions", query={"q": "escalate"})) == []  # a tag is matched by its whole name
