"""The sessions list and search of a large project (issue 42, item 4), with their bounds made small: a
word in more messages than the list reads by id is asked of each session's own messages (PostgreSQL),
and finds the same sessions; the list counts to a bound and says "more than" past it, or says it did
not count; a search ranks the newest matches; a metadata value is found through its JSON text first."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from sessions.db import message_search
from sessions.models import Review, Session
from sessions.store import listing, search
from sessions.store.listing import SessionFilters, find_sessions, list_page
from tests.api.conftest import Api

from .dom import parse
from .test_sessions_list import LIST, keys, make_session, rows

pytestmark = pytest.mark.django_db

postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="the per-session path is PostgreSQL's")


@pytest.fixture
def twelve(project):
    """Twelve sessions, newest last made: the even ones talk about a refund (three messages each), the
    odd ones about the weather; s05 also names order R000123."""
    for i in range(12):
        text = "the refund for the parcel" if i % 2 == 0 else "rain and wind in lisbon"
        session = make_session(project, f"s{i:02d}", text=text, count=3)
        if i == 5:
            from sessions.ingest.append import append_messages

            append_messages(project, session.key, [{"role": "user", "content": "order R000123 please"}], "test")
    return project


def listed(client, **params) -> list[str]:
    return keys(client.get(LIST, params))


@postgres_only
def test_a_common_word_is_asked_of_each_session_and_finds_the_same_sessions(twelve, viewer_client, monkeypatch):
    by_id = listed(viewer_client, q="refund", size=50)
    assert by_id == [f"s{i:02d}" for i in range(10, -1, -2)]

    monkeypatch.setattr(search, "SESSIONS_BY_ID_AT_MOST", 4)  # fewer than the word's 18 messages
    sessions = find_sessions([twelve.pk], SessionFilters(q="refund"))
    assert search.asks_text_per_session(sessions)
    assert "EXISTS (SELECT 1 FROM ctx_sessions_message m WHERE m.session_id" in str(sessions.query)
    per_session = listed(viewer_client, q="refund", size=50)

    assert per_session == by_id
    assert listed(viewer_client, q="r000123") == ["s05"]  # one message: by id still


@postgres_only
def test_a_list_asked_session_by_session_is_not_counted_and_pages_on(twelve, viewer_client, monkeypatch):
    monkeypatch.setattr(search, "SESSIONS_BY_ID_AT_MOST", 4)

    first = viewer_client.get(LIST, {"q": "refund", "size": 25})
    pager = parse(first).one(cls="pager").text()

    assert "not counted: a word in too many messages" in pager
    assert "page 1" in pager and " of " not in pager
    page = list_page([twelve.pk], SessionFilters(q="refund"), 2, 4)
    assert [s.key for s in page.object_list] == ["s02", "s00"]
    assert page.count is None and page.num_pages is None and not page.has_next and page.has_previous


@postgres_only
def test_the_api_list_finds_the_same_sessions_by_a_common_word(twelve, monkeypatch):
    from sessions.access.api_keys import create_api_key

    api = Api(create_api_key(twelve, "test-app")[1])
    by_id = [item["key"] for item in api.get("/sessions", query={"q": "refund"}).json()["items"]]
    monkeypatch.setattr(search, "SESSIONS_BY_ID_AT_MOST", 4)
    body = api.get("/sessions", query={"q": "refund", "limit": 4}).json()
    rest = api.get("/sessions", query={"q": "refund", "limit": 4, "cursor": body["next_cursor"]}).json()

    assert [item["key"] for item in body["items"] + rest["items"]] == by_id


def test_the_list_counts_to_its_bound_and_says_more_than_past_it(twelve, viewer_client, monkeypatch):
    monkeypatch.setattr(listing, "COUNTED_AT_MOST", 5)

    doc = parse(viewer_client.get(LIST, {"size": 25}))

    pager = doc.one(cls="pager").text()
    assert "more than 5 sessions" in pager
    assert "page 1 of more than 1" in pager
    assert len(keys(viewer_client.get(LIST, {"size": 25}))) == 12  # the page itself is whole
    page = list_page([twelve.pk], SessionFilters(), 1, 4)
    assert (page.count, page.more, page.num_pages, page.has_next) == (6, True, 2, True)
    assert [s.key for s in list_page([twelve.pk], SessionFilters(), 3, 4).object_list] == [
        "s03", "s02", "s01", "s00"]  # past the counted pages, the pages go on


def test_under_its_bound_the_list_counts_exactly_and_a_page_past_the_end_is_the_last(twelve):
    page = list_page([twelve.pk], SessionFilters(), 99, 5)

    assert (page.count, page.more, page.num_pages, page.number) == (12, False, 3, 3)
    assert [s.key for s in page.object_list] == ["s01", "s00"]
    assert list_page([twelve.pk], SessionFilters(), "x", 5).number == 1


def test_a_search_ranks_the_newest_matches_and_says_so_past_its_count(twelve, viewer_client, monkeypatch):
    from sessions.store.search import SearchFilters, search_messages

    everything = search_messages("refund", SearchFilters([twelve.pk]), limit=50)
    assert len(everything) == 18
    monkeypatch.setattr(message_search, "RANKED_AT_MOST", 4)

    newest = search_messages("refund", SearchFilters([twelve.pk]), limit=50)

    newest_four = sorted((hit.message for hit in everything), key=lambda m: m.pk)[-4:]
    assert sorted(hit.message.pk for hit in newest) == sorted(m.pk for m in newest_four)
    monkeypatch.setattr(search, "MAX_COUNTED", 3)
    summary = parse(viewer_client.get("/search/", {"q": "refund"})).one(cls="search-summary").text()
    assert summary.startswith("More than 1,000 hits (messages: the best of the newest 4 that match)")


@pytest.mark.parametrize("q", ['say "hi"', "0.25", "true", "Zürich", "back\\slash"])
def test_a_metadata_value_is_found_whatever_it_holds(project, viewer_client, q):
    make_session(project, "meta", metadata={"deep": {"note": 'she said: say "hi"', "city": "zürich"},
                                            "score": 0.25, "ok": True, "path": "C:\\back\\slash"})
    make_session(project, "other", metadata={"deep": {"note": "nothing"}})

    assert listed(viewer_client, q=q) == ["meta"]


def test_a_metadata_key_is_not_a_value(project, viewer_client):
    make_session(project, "meta", metadata={"customer": "c0421"})

    assert listed(viewer_client, q="customer") == []
    assert Session.objects.filter(project=project).count() == 1


def test_the_verdict_filter_reads_each_sessions_latest_review_as_the_list_shows_it(project, viewer_client):
    at = timezone.now().replace(microsecond=0)
    tied, later, older = (make_session(project, key) for key in ("tied", "later", "older"))
    for session, verdicts in ((tied, ["ok", "problem"]), (later, ["problem", "ok"]), (older, ["problem"])):
        for n, verdict in enumerate(verdicts):  # tied: the same moment, the higher id is the latest
            moment = at if session is tied else at + timedelta(seconds=n)
            Review.objects.create(session=session, reviewer="user:x", verdict=verdict, created_at=moment)

    assert sorted(listed(viewer_client, verdict="problem")) == ["older", "tied"]
    assert listed(viewer_client, verdict="ok") == ["later"]
    shown = {key: " ".join(td.text() for td in cells) for key, cells in rows(viewer_client.get(LIST)).items()}
    assert "problem" in shown["older"] and "problem" in shown["tied"] and "ok" in shown["later"]


@pytest.mark.parametrize(("page", "number"), [("99999999999999999999999", 1000), ("-3", 1), ("1.5", 1), ("", 1),
                                              ("٣", 3)])
def test_any_page_number_gets_a_page(twelve, viewer_client, monkeypatch, page, number):
    monkeypatch.setattr(listing, "COUNTED_AT_MOST", 5)

    response = viewer_client.get(LIST, {"page": page, "size": 25})

    assert response.status_code == 200
    assert list_page([twelve.pk], SessionFilters(), page, 4).number == number
