"""RecordedRequest.at_seq, edited, message_tokens and derived_from (what the model input of a session
rebuilt from recorded requests is made of). For requests recorded before this migration, at_seq is worked
out as recording would have set it: the seq just before its response (which was appended right after
the request), or the newest seq it sent when it has no response. message_tokens stays empty for them: a
fetch counts their messages once (sessions.context.recorded_input)."""

from django.db import migrations, models

BATCH = 2000


def set_at_seq(apps, schema_editor):
    RecordedRequest = apps.get_model("ctx_sessions", "RecordedRequest")
    db = schema_editor.connection.alias
    rows = RecordedRequest.objects.using(db).order_by("pk")
    last = 0
    while True:
        batch = list(rows.filter(pk__gt=last).only("pk", "message_seqs", "response_seqs")[:BATCH])
        if not batch:
            return
        for request in batch:
            sent = max((s for s in request.message_seqs or () if s is not None), default=0)
            answered = min(request.response_seqs or (), default=0)
            request.at_seq = answered - 1 if answered > sent else sent
        RecordedRequest.objects.using(db).bulk_update(batch, ["at_seq"])
        last = batch[-1].pk


class Migration(migrations.Migration):

    dependencies = [
        ('ctx_sessions', '0019_message_openai_message'),
    ]

    operations = [
        migrations.AddField(
            model_name='recordedrequest',
            name='at_seq',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='recordedrequest',
            name='derived_from',
            field=models.CharField(blank=True, default='', max_length=300),
        ),
        migrations.AddField(
            model_name='recordedrequest',
            name='edited',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name='recordedrequest',
            name='message_tokens',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddIndex(
            model_name='recordedrequest',
            index=models.Index(fields=['session', 'at_seq'], name='recorded_request_at_seq'),
        ),
        migrations.RunPython(set_at_seq, migrations.RunPython.noop),
    ]
