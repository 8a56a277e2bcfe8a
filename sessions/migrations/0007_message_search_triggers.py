"""SQLite rebuilds a table to add a NOT NULL column with a default (0005 added Message.is_error), and the
rebuild drops the table's triggers, so the FTS5 index of message text (0003) stopped following new
messages. This puts the triggers back and rebuilds the index from the stored text. Any later migration
that makes SQLite rebuild the message table must do the same."""

import importlib

from django.db import migrations


# 0003's own statements: its triggers, dropped first where they survived, then created and the index
# rebuilt (its first statement creates the FTS5 table, which the rebuild kept).
SEARCH = importlib.import_module("sessions.migrations.0003_message_search")
TRIGGERS = [s for s in SEARCH.SQLITE_DOWN if s.startswith("DROP TRIGGER")] + SEARCH.SQLITE_UP[1:]


def restore(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in TRIGGERS:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("ctx_sessions", "0006_message_name_tokens")]
    operations = [migrations.RunPython(restore, migrations.RunPython.noop)]
