"""Full-text search over message text: a GIN index on PostgreSQL, an FTS5 table kept in step by
triggers on SQLite. Other databases get neither and fall back to a plain scan (sessions/db/message_search.py)."""

from django.db import migrations

SQLITE_UP = [
    "CREATE VIRTUAL TABLE ctx_message_fts USING fts5(text, content='ctx_sessions_message', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER ctx_message_fts_ai AFTER INSERT ON ctx_sessions_message BEGIN "
    "INSERT INTO ctx_message_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER ctx_message_fts_ad AFTER DELETE ON ctx_sessions_message BEGIN "
    "INSERT INTO ctx_message_fts(ctx_message_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER ctx_message_fts_au AFTER UPDATE OF text ON ctx_sessions_message BEGIN "
    "INSERT INTO ctx_message_fts(ctx_message_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO ctx_message_fts(rowid, text) VALUES (new.id, new.text); END",
    "INSERT INTO ctx_message_fts(ctx_message_fts) VALUES ('rebuild')",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS ctx_message_fts_au",
    "DROP TRIGGER IF EXISTS ctx_message_fts_ad",
    "DROP TRIGGER IF EXISTS ctx_message_fts_ai",
    "DROP TABLE IF EXISTS ctx_message_fts",
]
# A stored tsvector (angle brackets blanked first: the default parser would read "<thinking>" as an
# HTML tag and not index the word), so ranking reads it instead of parsing every match again.
POSTGRES_UP = [
    "ALTER TABLE ctx_sessions_message ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', translate(text, '<>', '  '))) STORED",
    "CREATE INDEX message_search_vector ON ctx_sessions_message USING gin (search_vector)",
]
POSTGRES_DOWN = [
    "DROP INDEX IF EXISTS message_search_vector",
    "ALTER TABLE ctx_sessions_message DROP COLUMN IF EXISTS search_vector",
]


def run(statements_by_vendor):
    def apply(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return apply


class Migration(migrations.Migration):
    dependencies = [("ctx_sessions", "0002_default_project")]
    operations = [
        migrations.RunPython(
            run({"sqlite": SQLITE_UP, "postgresql": POSTGRES_UP}),
            run({"sqlite": SQLITE_DOWN, "postgresql": POSTGRES_DOWN}),
        )
    ]
