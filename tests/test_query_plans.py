"""The hot path's queries use the index meant for them, whatever the session's size (issue 20.3a): each
query that the duplicate-id check of an append, the model input, a raw-log page and the sessions lists
send is captured from the real code path and its plan read (`EXPLAIN QUERY PLAN` on SQLite, `EXPLAIN` on
PostgreSQL). A plan fails when it scans a whole table, or walks every message of a session, where an
index would take it straight to the rows it needs.

The checker is itself checked against the duplicate-id query as it was before the fix (it inherited the
model's ordering by seq, so SQLite walked the session's (session, seq) index instead of probing the
unique (session, client_id) index): that query must fail here on SQLite."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from sessions.access.api_keys import create_api_key
from sessions.context.compaction_runs import compact
from sessions.context.model_input import build_model_input
from sessions.ingest.append import append_messages
from sessions.models import Message, Project, Session
from tests.api.conftest import Api
from tests.dashboard.conftest import create_user, make_client

HOT_TABLES = ("ctx_sessions_message", "ctx_sessions_event", "ctx_sessions_session")


def plan(sql: str, params=()) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            return "\n".join(str(row[-1]) for row in cursor.fetchall())
        for table in HOT_TABLES:
            cursor.execute(f"ANALYZE {table}")
        # The test's tables are tiny, where a sequential scan is cheapest: ask for the plan at scale.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        text = "\n".join(row[0] for row in cursor.fetchall())
        # A partition's table and indexes (migration 0032) by the names of the table's and its indexes.
        cursor.execute("SELECT child.relname, parent.relname FROM pg_inherits "
                       "JOIN pg_class child ON child.oid = inhrelid JOIN pg_class parent ON parent.oid = inhparent")
        for child, parent in sorted(cursor.fetchall(), key=lambda names: -len(names[0])):
            text = re.sub(rf"\b{child}\b", parent, text)
        return text


def problems(text: str) -> list[str]:
    """What is wrong with a plan: a whole hot table scanned, a session's messages walked by session alone
    (no seq range, no client id), or a whole result sorted when an index gives its order."""
    found = []
    for line in text.splitlines():
        if connection.vendor == "sqlite":
            scanned = re.match(r"\s*SCAN (\w+)", line)
            if scanned and scanned.group(1) in HOT_TABLES:
                found.append(f"scans the whole table: {line.strip()}")
            if re.match(r"\s*SEARCH ctx_sessions_message USING .*\(session_id=\?\)$", line):
                found.append(f"walks every message of the session: {line.strip()}")
            if "USE TEMP B-TREE FOR ORDER BY" in line:
                found.append(f"sorts the whole result: {line.strip()}")
        else:
            scanned = re.search(r"Seq Scan on (\w+)", line)
            if scanned and scanned.group(1) in HOT_TABLES:
                found.append(f"scans the whole table: {line.strip()}")
            if re.search(r"Index Cond: \(session_id = \d+\)$", line.strip()) and "ctx_sessions_message" in text:
                found.append(f"walks every message of the session: {line.strip()}")
    return found


def captured(run, *, table: str, containing: str = "") -> list[str]:
    """The SELECTs on `table` that `run` sends (with their parameters in place)."""
    with CaptureQueriesContext(connection) as queries:
        run()
    return [q["sql"] for q in queries if q["sql"].startswith("SELECT") and f'FROM "{table}"' in q["sql"]
            and containing in q["sql"]]


def assert_indexed(sqls: list[str]) -> None:
    assert sqls, "no query captured"
    for sql in sqls:
        text = plan(sql)
        assert not problems(text), f"{sql}\n\nplan:\n{text}\n\nproblems: {problems(text)}"


def conversation(n: int, prefix: str = "m") -> list[dict]:
    return [{"id": f"{prefix}{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
            for i in range(n)]


@pytest.fixture
def api(project) -> Api:
    return Api(create_api_key(project, "plans")[1])


@pytest.fixture
def session(project):
    append_messages(project, "plans", conversation(60))
    session = Session.objects.get(project=project, key="plans")
    compact(session, force=True, max_tokens=200, keep_recent_tokens=100, summary="what happened first")
    session = Session.objects.get(pk=session.pk)
    assert session.checkpoint_last_seq > 10
    return session


@pytest.mark.django_db
def test_the_duplicate_id_check_of_an_append_probes_the_client_id_index(project, session):
    sqls = captured(lambda: append_messages(project, "plans", [{"id": "m4", "role": "user", "content": "message 4"},
                                                                {"id": "new", "role": "user", "content": "new"}]),
                    table="ctx_sessions_message", containing='"client_id" IN')
    assert len(sqls) == 1, sqls
    assert_indexed(sqls)
    assert "ORDER BY" not in sqls[0], sqls[0]
    text = plan(sqls[0])
    if connection.vendor == "sqlite":  # the unique constraint's index is SQLite's autoindex
        assert "(session_id=? AND client_id=?)" in text, text
    else:
        assert "message_id_unique_per_session" in text, text


@pytest.mark.django_db
def test_the_stored_figures_of_an_append_read_the_last_rows_by_seq(project, session):
    sqls = captured(lambda: append_messages(project, "plans", [{"id": "later", "role": "user", "content": "later"}]),
                    table="ctx_sessions_message", containing='"include_in_messages"')
    assert len(sqls) == 1, sqls
    assert_indexed(sqls)


@pytest.mark.django_db
def test_the_call_a_result_answers_is_read_through_the_role_index(project, session):
    append_messages(project, "plans", [{"id": "ask", "role": "assistant", "content": "",
                                        "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}]}])
    sqls = captured(lambda: append_messages(project, "plans", [{"id": "res", "role": "tool", "tool_call_id": "c1",
                                                                "content": "ok"}]),
                    table="ctx_sessions_message", containing='"role" = ')
    assert len(sqls) == 1, sqls
    if connection.vendor == "postgresql":
        # A test session is small enough that sorting its rows looks cheaper than the index that gives
        # them in order; at scale it is not.
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_sort = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")
    assert_indexed(sqls)
    text = plan(sqls[0])
    assert ("(session_id=? AND role=? AND seq<?)" if connection.vendor == "sqlite" else "message_session_role_seq") in text, text


@pytest.mark.django_db
def test_the_checker_fails_the_duplicate_id_check_as_it_was_before_the_fix(session):
    """Before the fix the query kept the model's ordering by (session, seq): SQLite walked the session."""
    old = Message.objects.filter(session=session, client_id__in=["m4", "new"]).values("client_id", "seq", "digest", "tokens")
    sql, params = old.query.sql_with_params()
    assert "ORDER BY" in sql
    text = plan(sql, params)
    if connection.vendor == "sqlite":
        assert any("walks every message of the session" in p for p in problems(text)), text
    else:  # PostgreSQL probes the client-id index and sorts the few rows found: it never had the defect
        assert "message_id_unique_per_session" in text, text


@pytest.mark.django_db
def test_the_model_input_reads_only_the_messages_after_the_checkpoint(session):
    sqls = captured(lambda: build_model_input(Session.objects.get(pk=session.pk)), table="ctx_sessions_message")
    assert_indexed(sqls)


@pytest.mark.django_db
def test_the_openai_model_input_reads_the_stored_renderings_after_the_checkpoint_in_seq_order(api, session):
    sqls = captured(lambda: api.get(f"/sessions/{session.key}/model-input", query={"format": "openai"}),
                    table="ctx_sessions_message", containing='"openai_message"')
    assert len(sqls) == 1, sqls
    assert_indexed(sqls)
    if connection.vendor == "sqlite":
        assert "(session_id=? AND seq>?)" in plan(sqls[0]), plan(sqls[0])


@pytest.mark.django_db
def test_a_raw_log_page_reads_its_seq_range(api, session):
    def page():
        response = api.get("/sessions/plans/messages", query={"after": 30, "limit": 10})
        assert response.status_code == 200, response.content
        assert [m["seq"] for m in response.json()["items"]] == list(range(31, 41))

    assert_indexed(captured(page, table="ctx_sessions_message"))


@pytest.mark.django_db
def test_the_sessions_lists_read_the_activity_index(api, project):
    for i in range(30):
        append_messages(project, f"s{i}", conversation(2, prefix=f"s{i}-"))
    other = Project.objects.create(name="elsewhere")
    append_messages(other, "theirs", conversation(2))

    def api_list():
        response = api.get("/sessions", query={"limit": 5})
        assert response.status_code == 200 and len(response.json()["items"]) == 5, response.content

    user = create_user("reader", project=project, role="viewer")
    client = make_client(user)

    def dashboard_list():
        response = client.get(reverse("sessions") + "?size=25")
        assert response.status_code == 200

    for run in (api_list, dashboard_list):
        assert_indexed(captured(run, table="ctx_sessions_session", containing="last_activity_at"))
