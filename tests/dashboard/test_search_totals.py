"""What search and the sessions list find, as a person reads it (issue 39, item 7): the search page gives
the total of hits (or "more than 1,000"), not the hits of the page; the sessions list's `q` matches the
values of the metadata, never its keys or JSON punctuation; and neither a long word nor a long query
widens a phone's page."""

import json

import pytest
from django.urls import reverse

from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import Session
from sessions.store.listing import SessionFilters, find_sessions
from sessions.store.search import MAX_COUNTED, SearchFilters, search

from .dom import parse

SEARCH = reverse("search")


def bags(project, key: str, count: int) -> None:
    for start in range(0, count, 500):  # at most 500 messages a batch
        append_messages(project, key, [{"role": "user", "content": f"My checked bag number {n} is late."}
                                       for n in range(start, min(count, start + 500))], "test")


def test_a_page_of_hits_says_how_many_there_are_in_all(project, viewer_client):
    bags(project, "many-bags", 120)
    results = search("checked bag", SearchFilters(project_ids=[project.pk]), page=1)
    assert results.hit_count == 50 and results.has_next
    assert results.total == 120 and not results.total_is_more
    summary = parse(viewer_client.get(SEARCH, {"q": "checked bag"})).one("p", cls="search-summary").text()
    assert summary.startswith("120 hits for “checked bag”") and "page 1: 50 hits" in summary, summary
    last = search("checked bag", SearchFilters(project_ids=[project.pk]), page=3)
    assert (last.hit_count, last.total, last.has_next) == (20, 120, False)


def test_past_a_thousand_hits_the_page_says_more_than_1000(project, viewer_client):
    bags(project, "bag-flood", MAX_COUNTED + 5)
    results = search("checked bag", SearchFilters(project_ids=[project.pk]), page=2)
    assert results.total_is_more
    summary = parse(viewer_client.get(SEARCH, {"q": "checked bag"})).one("p", cls="search-summary").text()
    assert summary.startswith("More than 1,000 hits"), summary


METADATA = {
    "plain": {"customer": "mia_li_3668", "channel": "web"},
    "nested": {"order": {"id": 4471, "items": ["x-ray film", {"sku": "TAB-9"}]}, "vip": True},
    "quoted": {"note": 'said "hello" twice'},
    "none": {},
}


@pytest.fixture
def described(project):
    for key, metadata in METADATA.items():
        update_session(project, key, {"metadata": metadata}, "test")
    return project


def listed(project, q: str) -> set[str]:
    return {s.key for s in find_sessions([project.pk], SessionFilters(q=q))}


def values_of(value) -> list[str]:
    """Every scalar value of a JSON document, as text, the way a person reads them."""
    if isinstance(value, dict):
        return [text for v in value.values() for text in values_of(v)]
    if isinstance(value, list):
        return [text for v in value for text in values_of(v)]
    if value is None:
        return []
    return [json.dumps(value) if isinstance(value, bool) else str(value)]


@pytest.mark.parametrize("q", ['"', "{", ":", "customer", "order", "sku", "mia_li", "4471", "X-RAY", "tab-9",
                               "hello", '"hello"', "web", "true"])
def test_the_lists_q_matches_metadata_values_not_its_json(described, q):
    expected = {key for key, metadata in METADATA.items()
                if any(q.lower() in text.lower() for text in values_of(metadata)) or q.lower() in key}
    assert listed(described, q) == expected


def test_json_punctuation_finds_no_session_by_its_metadata(described, viewer_client):
    assert listed(described, '"') == {"quoted"}  # the one whose value holds a quote
    assert listed(described, "{") == set()
    assert Session.objects.count() == len(METADATA)
