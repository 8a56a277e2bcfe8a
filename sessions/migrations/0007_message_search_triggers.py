"""SQLite rebuilds a table to add a NOT NULL column with a default (0005 added Message.is_error), and the
rebuild drops the table's triggers, so the FTS5 index of message text (0003) stopped following new
messages. This puts the triggers back and rebuilds the index from the stored text. Any later migration
that makes SQLite rebuild the message table must do the same."""

from django.db import migrations


TRIGGERS = [
    "DROP TRIGGER IF EXISTS ctx_message_fts_au",
    "DROP TRIGGER IF EXISTS ctx_message_fts_ad",
    "DROP TRIGGER IF EXISTS ctx_message_fts_ai",
    "CREATE TRIGGER ctx_message_fts_ai AFTER INSERT ON ctx_sessions_message BEGIN "
    "INSERT INTO ctx_message_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER ctx_message_fts_ad AFTER DELETE ON ctx_sessions_message BEGIN "
    "INSERT INTO ctx_message_fts(ctx_message_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER ctx_message_fts_au AFTER UPDATE OF text ON ctx_sessions_message BEGIN "
    "INSERT INTO ctx_message_fts(ctx_message_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO ctx_message_fts(rowid, text) VALUES (new.id, new.text); END",
    "INSERT INTO ctx_message_fts(ctx_message_fts) VALUES ('rebuild')",
]


def restore(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in TRIGGERS:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("ctx_sessions", "0006_message_name_tokens")]
    operations = [migrations.RunPython(restore, migrations.RunPython.noop)]
