"""PostgreSQL: the message and event tables hash-partitioned by session (issue 42, item 7).

Each becomes PARTITIONS partitions of `PARTITION BY HASH (session_id)`: a session's rows are in one of
them, every query of a session reads one, and the primary key is (id, session_id), as a distributed
PostgreSQL asks of a table distributed by `session_id` (Citus: `create_distributed_table('...',
'session_id')`, docs/deployment.md). Django still names a row by its id: ids come from one identity,
never repeated.

An existing table is rebuilt: a partitioned twin made LIKE it, its rows copied (in one transaction: the
migration holds the table for the copy, about a minute a million messages on a small machine), the old
one dropped, the twin renamed, and every constraint and index of the old one made again under its name.
A foreign key may not point into a partitioned table: the one that did (a compaction run's starting
event) is left to Django. Backwards, the same with a plain table. SQLite is left as it is."""

from django.db import migrations, models

PARTITIONS = 16
TABLES = ("ctx_sessions_message", "ctx_sessions_event")


def _rows(cursor, sql, params=()):
    cursor.execute(sql, params)
    return cursor.fetchall()


def rebuild(cursor, table: str, partitioned: bool) -> None:
    """Make `table` again, partitioned by session or plain, with its rows, constraints and indexes."""
    if _rows(cursor, "SELECT 1 FROM pg_constraint WHERE confrelid = %s::regclass", [table]):
        raise RuntimeError(f"a foreign key points into {table}: it cannot be partitioned")
    constraints = _rows(cursor, "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
                                "WHERE conrelid = %s::regclass AND contype IN ('p', 'u', 'f', 'c') "
                                "ORDER BY contype = 'p' DESC, conname", [table])
    indexes = _rows(cursor, "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = %s::regclass "
                            "AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = indexrelid) "
                            "ORDER BY indexrelid", [table])
    columns = [name for name, in _rows(cursor, "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                                              "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' "
                                              "ORDER BY attnum", [table])]
    sequence, = _rows(cursor, "SELECT pg_get_serial_sequence(%s, 'id')", [table])[0]
    twin = f"{table}_rebuilt"
    listed = ", ".join(f'"{name}"' for name in columns)
    cursor.execute(f"CREATE TABLE {twin} (LIKE {table} INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING IDENTITY "
                   f"INCLUDING STORAGE){' PARTITION BY HASH (session_id)' if partitioned else ''}")
    if partitioned:
        for remainder in range(PARTITIONS):
            cursor.execute(f"CREATE TABLE {table}_p{remainder:02d} PARTITION OF {twin} "
                           f"FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {remainder})")
    cursor.execute(f"INSERT INTO {twin} ({listed}) OVERRIDING SYSTEM VALUE SELECT {listed} FROM {table}")
    twin_sequence, = _rows(cursor, "SELECT pg_get_serial_sequence(%s, 'id')", [twin])[0]
    cursor.execute(f"SELECT setval(%s, COALESCE((SELECT max(id) FROM {twin}), 0) + 1, false)", [twin_sequence])
    cursor.execute(f"DROP TABLE {table}")
    cursor.execute(f"ALTER TABLE {twin} RENAME TO {table}")
    cursor.execute(f"ALTER SEQUENCE {twin_sequence} RENAME TO {sequence.split('.')[-1]}")
    for name, kind, definition in constraints:
        if kind == "p":
            definition = "PRIMARY KEY (id, session_id)" if partitioned else "PRIMARY KEY (id)"
        cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
    for definition, in indexes:
        cursor.execute(definition)
    cursor.execute(f"ANALYZE {table}")


def partition(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            for table in TABLES:
                rebuild(cursor, table, partitioned=True)


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            for table in TABLES:
                rebuild(cursor, table, partitioned=False)


class Migration(migrations.Migration):

    dependencies = [
        ("ctx_sessions", "0031_trace_block"),
    ]

    operations = [
        migrations.AlterField(
            model_name="compactionrun",
            name="started_event",
            field=models.ForeignKey(blank=True, db_constraint=False, null=True,
                                    on_delete=models.SET_NULL, related_name="+", to="ctx_sessions.event"),
        ),
        migrations.RunPython(partition, unpartition),
    ]
