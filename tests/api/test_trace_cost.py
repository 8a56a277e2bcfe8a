"""What a trace (GET /api/v1/sessions/{key}/trace, sessions/context/trace.py) costs, issue 37: a `*` matched in
linear time, the query bounded, and only a window of each message read around the match."""

import time
import tracemalloc

import pytest

from sessions.context.trace import MAX_QUERY, MAX_WILDCARDS, trace
from sessions.models import Message, Session
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db

A = "a" * 100_000


def hostile_session(api, key: str, text: str, count: int = 3) -> None:
    api.post(f"/sessions/{key}/messages", {"messages": [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text} for i in range(count)]})


def timed(api, key: str, q: str):
    start = time.perf_counter()
    response = api.get(f"/sessions/{key}/trace", query={"q": q})
    return response, time.perf_counter() - start


# Each made Python's re (SQLite's REGEXP) backtrack: a*a*a*b over 400 characters took it 15 s, over
# 3,000 a worker's 30 s and more.
WORST = {
    "a*a*…*b, every star allowed": ("a*" * MAX_WILDCARDS + "b", A),
    "the longest query, every star allowed": ("*".join(["a" * 23] * MAX_WILDCARDS + ["b" * 8]), A),
    "overlapping parts": ("ab*" * MAX_WILDCARDS + "c", "ab" * 50_000),
    "a match, so its place is found too": ("a*" * MAX_WILDCARDS + "a", A),
    "case folding (K and the Kelvin sign)": ("k*" * MAX_WILDCARDS + "x", "\u212a" * 100_000),
    "stars across spaces": ("a *" * MAX_WILDCARDS + "b", "a " * 50_000),
    "the longest literal string": ("a" * (MAX_QUERY - 1) + "b", A),
}


@pytest.mark.parametrize("shape", list(WORST))
def test_the_worst_patterns_are_answered_in_under_a_second(api, shape):
    q, text = WORST[shape]
    assert len(q) <= MAX_QUERY and q.count("*") <= MAX_WILDCARDS
    hostile_session(api, "hostile", text)

    response, elapsed = timed(api, "hostile", q)

    assert response.status_code == 200, response.content
    assert elapsed < 1.0


def test_a_star_found_in_a_long_message_is_marked_in_its_excerpt(api):
    hostile_session(api, "long", "x" * 300_000 + " order W9609649 " + "y" * 300_000, count=1)

    body = api.get("/sessions/long/trace", query={"q": "W96*49"}).json()

    assert [m["seq"] for m in body["messages"]] == [1]
    excerpt, matches = body["messages"][0]["excerpt"], body["messages"][0]["matches"]
    assert [excerpt[start:end] for start, end in matches] == ["W9609649"]
    assert excerpt.startswith("… ") and excerpt.endswith(" …")


def test_more_stars_than_allowed_are_refused_naming_the_limit(api):
    hostile_session(api, "hostile", "a b", count=1)

    response = api.get("/sessions/hostile/trace", query={"q": "a*" * (MAX_WILDCARDS + 1) + "b"})

    assert_error(response, 400, "invalid_query")
    assert response.json()["detail"] == f"q may hold at most {MAX_WILDCARDS} wildcards (*)"
    assert api.get("/sessions/hostile/trace", query={"q": "a*" * MAX_WILDCARDS + "b"}).status_code == 200


def test_a_query_longer_than_allowed_is_refused(api):
    hostile_session(api, "hostile", "a b", count=1)

    response = api.get("/sessions/hostile/trace", query={"q": "a" * (MAX_QUERY + 1)})

    assert 400 <= response.status_code < 500


# --- memory: a window of each message -----------------------------------------------------------

MEGABYTE = 1_000_000
HALF = MEGABYTE // 2 - 10


@pytest.fixture
def fifty_megabyte_messages(api):
    api.post("/sessions/big/messages", {"messages": [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"order W9609649 {i}"} for i in range(50)]})
    big = "x" * HALF + " order W9609649 " + "y" * HALF
    Message.objects.filter(session__key="big").update(text=big, content=big)
    return Session.objects.get(key="big")


@pytest.mark.parametrize("q", ["W9609649", "W96*49"])
def test_fifty_hits_in_messages_of_a_megabyte_read_a_window_of_each(fifty_megabyte_messages, q):
    """Whole messages were read for their excerpts: 142 MB more in the worker for 50 such hits."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = trace(fifty_megabyte_messages, q)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()

    assert len(result.rows) == 50
    assert all("<mark>W9609649</mark>" in row.excerpt.as_html() for row in result.rows)
    assert peak < 20 * MEGABYTE, f"{peak / MEGABYTE:.1f} MB"
