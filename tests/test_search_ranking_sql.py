"""A search ranks the newest RANKED_AT_MOST matches (sessions.db.message_search.ranked_message_ids). On
PostgreSQL the newest are chosen first and only they are ranked (their rank and exact phrase read
again by key); this compares every page with the statement that ranked every match in the pass that
found it, which is what the ranking means: exact phrase first, then ts_rank_cd, then session and seq."""

import pytest
from django.db import connection

from sessions.db import message_search
from sessions.db.message_search import ranked_message_ids
from sessions.ingest.append import append_messages
from sessions.store.search import text_query

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the PostgreSQL statement"),
]

TEXTS = [
    "the refund has not arrived",
    "refund refund refund, and the refund has not arrived yet",
    "has the refund arrived? not yet",
    "arrived: a refund",
    "nothing about money here",
    "the parcel has not arrived and no refund",
    "refund",
]


def ranked_in_one_pass(query: str, project_ids: list[int], limit: int, offset: int) -> list[tuple[int, bool]]:
    """The ranking as one statement that computes every match's rank and phrase (the reference)."""
    placeholders = ", ".join(["%s"] * len(project_ids))
    sql = f"""
        SELECT id, exact FROM (
            SELECT m.id, m.session_id, m.seq, (m.search_vector @@ phraseto_tsquery('english', %s)) AS exact,
                   ts_rank_cd(m.search_vector, websearch_to_tsquery('english', %s)) AS rank
            FROM ctx_sessions_message m JOIN ctx_sessions_session s ON s.id = m.session_id
            WHERE m.search_vector @@ websearch_to_tsquery('english', %s)
              AND s.project_id IN ({placeholders}) AND NOT s.being_imported
            ORDER BY m.id DESC LIMIT %s
        ) AS newest
        ORDER BY exact DESC, rank DESC, session_id, seq
        LIMIT %s OFFSET %s"""
    phrase = " ".join(query.split())
    with connection.cursor() as cursor:
        cursor.execute(sql, [phrase, query, query, *project_ids, message_search.RANKED_AT_MOST, limit, offset])
        return [(row[0], bool(row[1])) for row in cursor.fetchall()]


@pytest.fixture
def searched(project, other_project):
    for n in range(6):
        append_messages(project, f"r{n}", [{"role": "user", "content": TEXTS[(n + i) % len(TEXTS)]}
                                           for i in range(5)])
        append_messages(other_project, f"o{n}", [{"role": "user", "content": TEXTS[n % len(TEXTS)]}])
    return project


@pytest.mark.parametrize("query", ["refund arrived", '"the refund has not arrived"', "refund", "refund -parcel"])
@pytest.mark.parametrize("at_most", [7, 2000])
def test_every_page_ranks_the_newest_matches_as_one_pass_over_every_match_does(searched, monkeypatch, query, at_most):
    monkeypatch.setattr(message_search, "RANKED_AT_MOST", at_most)
    expected_all = ranked_in_one_pass(query, [searched.pk], 100, 0)
    assert expected_all and len(expected_all) <= at_most
    if query == "refund arrived":  # some hold the words as a phrase and rank first, some do not
        assert {exact for _, exact in expected_all} == {True, False}
    for limit, offset in [(100, 0), (3, 0), (3, 3), (4, 5), (50, 20)]:
        found = ranked_message_ids(text_query(query), limit, offset, project_ids=[searched.pk])
        assert found == ranked_in_one_pass(query, [searched.pk], limit, offset), (limit, offset)
