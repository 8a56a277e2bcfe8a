"""Per-session checkpoint numbers (1, 2, 3 in creation order), backfilled for stored checkpoints."""

from django.db import migrations, models


def number_checkpoints(apps, schema_editor):
    Checkpoint = apps.get_model("ctx_sessions", "Checkpoint")
    batch, session_id, number = [], None, 0
    # Checkpoints are append-only, each extending the latest: creation order is last_seq order.
    for checkpoint in Checkpoint.objects.order_by("session_id", "last_seq", "pk").only("pk", "session_id").iterator(chunk_size=2000):
        if checkpoint.session_id != session_id:
            session_id, number = checkpoint.session_id, 0
        number += 1
        checkpoint.number = number
        batch.append(checkpoint)
        if len(batch) >= 1000:
            Checkpoint.objects.bulk_update(batch, ["number"])
            batch = []
    if batch:
        Checkpoint.objects.bulk_update(batch, ["number"])


class Migration(migrations.Migration):

    dependencies = [
        ('ctx_sessions', '0016_checkpoint_lost_facts'),
    ]

    operations = [
        migrations.AddField(
            model_name='checkpoint',
            name='number',
            field=models.PositiveIntegerField(null=True),
        ),
        migrations.RunPython(number_checkpoints, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='checkpoint',
            name='number',
            field=models.PositiveIntegerField(),
        ),
        migrations.AddConstraint(
            model_name='checkpoint',
            constraint=models.UniqueConstraint(fields=('session', 'number'), name='checkpoint_number_per_session'),
        ),
    ]
