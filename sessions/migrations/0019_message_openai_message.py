"""Message.openai_message: each stored message as the `openai` model input sends it whole, rendered for
the messages stored before this migration as the append renders a new one (a NULL would be rendered at
each fetch, which is correct but slower)."""

from django.db import migrations, models

BATCH = 2000


def render_stored_messages(apps, schema_editor):
    from sessions.wire.openai import stored_openai_message

    Message = apps.get_model("ctx_sessions", "Message")
    db = schema_editor.connection.alias
    rows = Message.objects.using(db).exclude(role="system").order_by("pk")
    last = 0
    while True:
        batch = list(rows.filter(pk__gt=last).only("pk", "role", "content", "tool_calls", "tool_call_id", "name")[:BATCH])
        if not batch:
            return
        for message in batch:
            message.openai_message = stored_openai_message(message)
        Message.objects.using(db).bulk_update(batch, ["openai_message"])
        last = batch[-1].pk


class Migration(migrations.Migration):

    dependencies = [
        ('ctx_sessions', '0018_recorded_requests'),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='openai_message',
            field=models.TextField(blank=True, null=True),
        ),
        migrations.RunPython(render_stored_messages, migrations.RunPython.noop),
    ]
