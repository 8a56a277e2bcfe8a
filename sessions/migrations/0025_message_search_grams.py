"""Search finds words inside sentences of the scripts written without spaces (Chinese, Japanese, Korean,
Thai...): Message.search_grams holds their runs as overlapping pairs of characters
(sessions/wire/grams.py), filled here for the messages stored before, and the full-text index covers it
beside the text. On SQLite the FTS5 table gets a second column (adding the field rebuilt the message
table, which drops 0003's triggers: they are made again, for both columns); on PostgreSQL the stored
tsvector is made of both."""

import importlib

from django.db import migrations, models

from sessions.wire.grams import UNSPACED, search_grams

SEARCH = importlib.import_module("sessions.migrations.0003_message_search")

BATCH = 2000

SQLITE_UP = [
    "DROP TRIGGER IF EXISTS ctx_message_fts_au",
    "DROP TRIGGER IF EXISTS ctx_message_fts_ad",
    "DROP TRIGGER IF EXISTS ctx_message_fts_ai",
    "DROP TABLE IF EXISTS ctx_message_fts",
    "CREATE VIRTUAL TABLE ctx_message_fts USING fts5(text, search_grams, content='ctx_sessions_message', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER ctx_message_fts_ai AFTER INSERT ON ctx_sessions_message BEGIN "
    "INSERT INTO ctx_message_fts(rowid, text, search_grams) VALUES (new.id, new.text, new.search_grams); END",
    "CREATE TRIGGER ctx_message_fts_ad AFTER DELETE ON ctx_sessions_message BEGIN "
    "INSERT INTO ctx_message_fts(ctx_message_fts, rowid, text, search_grams) "
    "VALUES ('delete', old.id, old.text, old.search_grams); END",
    "CREATE TRIGGER ctx_message_fts_au AFTER UPDATE OF text, search_grams ON ctx_sessions_message BEGIN "
    "INSERT INTO ctx_message_fts(ctx_message_fts, rowid, text, search_grams) "
    "VALUES ('delete', old.id, old.text, old.search_grams); "
    "INSERT INTO ctx_message_fts(rowid, text, search_grams) VALUES (new.id, new.text, new.search_grams); END",
    "INSERT INTO ctx_message_fts(ctx_message_fts) VALUES ('rebuild')",
]
# Back to 0003's table and triggers, as 0007 left them: 0003's own statements.
SQLITE_DOWN = SQLITE_UP[:4] + SEARCH.SQLITE_UP


def vector(columns: str) -> list[str]:
    return [
        "DROP INDEX IF EXISTS message_search_vector",
        "ALTER TABLE ctx_sessions_message DROP COLUMN IF EXISTS search_vector",
        "ALTER TABLE ctx_sessions_message ADD COLUMN search_vector tsvector "
        f"GENERATED ALWAYS AS (to_tsvector('english', {columns})) STORED",
        "CREATE INDEX message_search_vector ON ctx_sessions_message USING gin (search_vector)",
    ]


POSTGRES_UP = vector("translate(text, '<>', '  ') || ' ' || search_grams")
POSTGRES_DOWN = vector("translate(text, '<>', '  ')")


def fill(apps, schema_editor):
    """search_grams of the messages stored before: on PostgreSQL only those whose text holds an
    unspaced run (found by the database), elsewhere every message, read a batch at a time."""
    Message = apps.get_model("ctx_sessions", "Message")
    db = schema_editor.connection.alias
    rows = Message.objects.using(db).order_by("pk")
    if schema_editor.connection.vendor == "postgresql":
        rows = rows.filter(text__regex=UNSPACED.pattern)
    last = 0
    while batch := list(rows.filter(pk__gt=last).only("pk", "text")[:BATCH]):
        changed = []
        for message in batch:
            message.search_grams = search_grams(message.text)
            if message.search_grams:
                changed.append(message)
        Message.objects.using(db).bulk_update(changed, ["search_grams"])
        last = batch[-1].pk


class Migration(migrations.Migration):
    dependencies = [("ctx_sessions", "0024_compaction_run_in_process")]
    operations = [
        migrations.AddField(
            model_name="message",
            name="search_grams",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.RunPython(
            SEARCH.run({"sqlite": SQLITE_UP, "postgresql": POSTGRES_UP}),
            SEARCH.run({"sqlite": SQLITE_DOWN, "postgresql": POSTGRES_DOWN}),
        ),
    ]
