"""Query counts of the read endpoints are pinned: they do not grow with the page or the session ("query
counts are pinned on list endpoints"). Two queries authenticate: the key with its project, read with the
recent failed keys of the address and the key prefix (sessions/access/api_keys.py, sessions/access/throttle.py), and
the UPDATE that takes from its rate limits (sessions/access/rate_limits.py), its last_used_at written with them."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

AUTH = 2


@pytest.fixture
def warm(api):
    assert api.get("/sessions").status_code == 200
    return api


def messages(n: int) -> list[dict]:
    """n messages in turns of four: a question, a tool call, its result, an answer."""
    out = []
    for i in range(n):
        turn, step = divmod(i, 4)
        if step == 0:
            out.append({"role": "user", "content": f"Question {turn}"})
        elif step == 1:
            out.append({"role": "assistant", "content": None,
                        "tool_calls": [{"id": f"call_{turn}", "name": "lookup", "arguments": "{}"}]})
        elif step == 2:
            out.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": f"Result {turn}"})
        else:
            out.append({"role": "assistant", "content": f"Answer {turn}", "attributes": {"turn": turn}})
    return out


def fill(append, key: str, n: int):
    batch = messages(n)
    for start in range(0, n, 500):
        append(key, batch[start:start + 500])


@pytest.mark.parametrize("limit", [5, 50])
def test_the_sessions_list_costs_the_same_queries_at_any_page_size(warm, limit, django_assert_num_queries, append):
    for n in range(60):
        warm.put(f"/sessions/s{n:02}", {"title": f"Session {n}"})
    append("s01", messages(8))
    warm.post("/sessions/s01/compact", {"force": True, "keep_recent_tokens": 1, "summary": "x"})

    # On PostgreSQL, q's words are first read from the full-text index, bounded (the newest matches:
    # sessions.db.message_search.sessions_with_words), then the list itself.
    with django_assert_num_queries(AUTH + 1 + (connection.vendor == "postgresql")):
        response = warm.get("/sessions", query={"limit": limit, "q": "Session"})

    assert len(response.json()["items"]) == limit
    with django_assert_num_queries(AUTH + 1):
        assert warm.get("/sessions", query={"limit": limit, "cursor": response.json()["next_cursor"]}).status_code == 200


@pytest.mark.parametrize("limit", [10, 200])
def test_a_raw_log_page_costs_the_same_queries_at_any_page_size(warm, limit, django_assert_num_queries, append):
    fill(append, "long", 240)

    # The session, the sizes of the page's messages, the page; for each message's explain, the session's
    # checkpoints and one COUNT placing the page in the model input.
    with django_assert_num_queries(AUTH + 5):
        response = warm.get("/sessions/long/messages", query={"limit": limit, "after": 20})

    assert len(response.json()["items"]) == limit


@pytest.mark.parametrize("size", [20, 1000])
@pytest.mark.parametrize("fmt", ["ctxweb", "openai", "anthropic", "openai-responses"])
def test_the_model_input_costs_the_same_queries_for_any_session_size(warm, size, fmt, django_assert_num_queries,
                                                                      append):
    fill(append, "talk", size)

    with django_assert_num_queries(AUTH + 2):  # the session, the messages (never compacted: no checkpoint lookup)
        response = warm.get("/sessions/talk/model-input", query={"format": fmt})

    assert response.status_code == 200
    assert response.json()["tokens"]["messages"] > 0


@pytest.mark.parametrize("size", [20, 1000])
def test_the_model_input_after_a_checkpoint_costs_the_same_queries_for_any_session_size(
        warm, size, django_assert_num_queries, append):
    fill(append, "talk", size)
    assert warm.post("/sessions/talk/compact", {"force": True, "keep_recent_tokens": 1,
                                                "summary": "Earlier turns."}).json()["status"] == "completed"

    with django_assert_num_queries(AUTH + 3):
        response = warm.get("/sessions/talk/model-input", query={"as_of": size})

    assert response.json()["checkpoint"] is not None


@pytest.mark.parametrize("size", [20, 1000])
def test_one_session_costs_the_same_queries_for_any_session_size(warm, size, django_assert_num_queries, append):
    fill(append, "talk", size)

    with django_assert_num_queries(AUTH + 1):
        assert warm.get("/sessions/talk").json()["message_count"] == size


def test_a_compaction_costs_the_same_queries_however_many_messages_it_covers(warm, append):
    """The plan reads stored figures and the covered messages are read in one query: no query per
    covered message (a deferred field read row by row once cost one query each)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = {}
    for size in (40, 400):
        fill(append, f"compact-{size}", size)
        with CaptureQueriesContext(connection) as queries:
            response = warm.post(f"/sessions/compact-{size}/compact", {"force": True, "keep_recent_tokens": 1})
        assert response.json()["status"] == "completed", response.json()
        counts[size] = len(queries)
    assert counts[40] == counts[400], counts
