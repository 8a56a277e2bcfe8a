"""PostgreSQL: the message and event tables hash-partitioned by session (migration 0032, issue 42 item 7),
so a deployment can distribute them by `session_id` without a schema change: each a partitioned table of
16 partitions whose keys all hold `session_id`; a session's rows in one partition, read from it alone; an
existing database converted with its rows, and back."""

import re

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from sessions.ingest.append import append_messages
from sessions.models import Event, Message, Project, Session
from tests.conftest import on_postgresql

pytestmark = [
    pytest.mark.skipif(not on_postgresql(), reason="partitions are PostgreSQL's (set DATABASE_URL=postgres://...)"),
    pytest.mark.django_db,
]
TABLES = ("ctx_sessions_message", "ctx_sessions_event")
BEFORE, AFTER = ("ctx_sessions", "0031_trace_block"), ("ctx_sessions", "0032_partition_messages_and_events")


def rows(sql, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def layout(table: str) -> tuple:
    """Whether `table` is partitioned, how, into how many, and its unique keys."""
    strategy = rows("SELECT partstrat, pg_get_partkeydef(partrelid) FROM pg_partitioned_table "
                    "WHERE partrelid = %s::regclass", [table])
    partitions = rows("SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass", [table])[0][0]
    keys = sorted(definition for definition, in rows(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype IN ('p', 'u')",
        [table]))
    return strategy, partitions, keys


def test_messages_and_events_are_partitioned_by_session_with_every_key_holding_it():
    assert layout("ctx_sessions_message") == (
        [("h", "HASH (session_id)")], 16,
        ["PRIMARY KEY (id, session_id)", "UNIQUE (session_id, client_id)", "UNIQUE (session_id, seq)"])
    assert layout("ctx_sessions_event") == ([("h", "HASH (session_id)")], 16, ["PRIMARY KEY (id, session_id)"])


def test_a_sessions_rows_are_in_one_partition_and_its_reads_touch_that_one_alone():
    project = Project.objects.create(name="parts")
    for key in ("a", "b", "c"):
        append_messages(project, key, [{"role": "user", "content": f"{key} {i}"} for i in range(5)])
    session = Session.objects.get(project=project, key="b")

    held = rows("SELECT tableoid::regclass::text, count(*) FROM ctx_sessions_message WHERE session_id = %s "
                "GROUP BY 1", [session.pk])
    plan = session.messages.order_by("seq").explain()

    assert len(held) == 1 and held[0][1] == 5
    assert set(re.findall(r"on (ctx_sessions_message_p\d+)", plan)) == {held[0][0]}  # pruned to its partition
    assert [m.text for m in session.messages.order_by("seq")] == [f"b {i}" for i in range(5)]


@pytest.mark.django_db(transaction=True)
def test_an_existing_database_is_converted_with_its_rows_and_back():
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    try:
        assert all(layout(table)[:2] == ([], 0) for table in TABLES)  # plain tables, as before 0032
        project = Project.objects.create(name="before")
        append_messages(project, "old", [{"role": "user", "content": f"said {i}"} for i in range(7)])
        ids = list(Message.objects.order_by("id").values_list("id", flat=True))

        MigrationExecutor(connection).migrate([AFTER])

        assert all(layout(table)[1] == 16 for table in TABLES)
        assert list(Message.objects.order_by("id").values_list("id", flat=True)) == ids
        assert Event.objects.filter(session__key="old").exists()
        append_messages(project, "old", [{"role": "user", "content": "said after"}])
        newest = Message.objects.get(session__key="old", seq=8)
        assert newest.pk > max(ids)  # the ids go on from the rows copied

        MigrationExecutor(connection).migrate([BEFORE])

        assert all(layout(table)[:2] == ([], 0) for table in TABLES)
        assert Message.objects.filter(session__key="old").count() == 8
    finally:
        MigrationExecutor(connection).migrate([AFTER])
