"""The hot path's lookups use the index meant for them, whatever the session's size (EXPLAIN on SQLite and
PostgreSQL): an append's duplicate-id check probes the unique (session, client_id) index instead of
walking the session's messages in seq order (issue 20)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.append import append_messages


def plan(sql: str) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            return "\n".join(str(row[-1]) for row in cursor.fetchall())
        cursor.execute("ANALYZE ctx_sessions_message")
        cursor.execute("SET LOCAL enable_seqscan = off")  # a small test table: ask for the plan at scale
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.django_db
def test_the_duplicate_id_check_of_an_append_probes_the_client_id_index(project):
    append_messages(project, "plans", [{"id": f"m{n}", "role": "user", "content": f"message {n}"} for n in range(50)])
    with CaptureQueriesContext(connection) as queries:
        append_messages(project, "plans", [{"id": "m3", "role": "user", "content": "message 3"},
                                           {"id": "new", "role": "user", "content": "new"}])
    checks = [q["sql"] for q in queries if '"client_id" IN' in q["sql"]]
    assert len(checks) == 1, [q["sql"] for q in queries]
    assert "ORDER BY" not in checks[0], checks[0]
    text = plan(checks[0])
    if connection.vendor == "sqlite":  # the unique constraint's index is SQLite's autoindex
        assert "(session_id=? AND client_id=?)" in text and "ORDER BY" not in text, text
    else:
        assert "message_id_unique_per_session" in text, text
