# The keys matching reads of a recorded request instead of its messages (sessions/ingest/recorded_requests.py).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ctx_sessions', '0020_recorded_request_at_seq'),
    ]

    operations = [
        migrations.AddField(
            model_name='recordedrequest',
            name='message_keys',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name='recordedrequest',
            name='response_keys',
            field=models.JSONField(blank=True, default=list),
        ),
    ]
