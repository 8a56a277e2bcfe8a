"""Every token figure in 64 bits: an input of many images passes 2**31 tokens, which PostgreSQL's
integer columns cannot hold (checkpoints and compaction then failed). SQLite rebuilds the tables whose
columns change, which drops the message table's search triggers: they are put back (see 0007)."""

import importlib

from django.db import migrations, models

RESTORE = importlib.import_module("sessions.migrations.0007_message_search_triggers").restore


class Migration(migrations.Migration):

    dependencies = [
        ('ctx_sessions', '0013_summarise_message_updated_events'),
    ]

    operations = [
        migrations.AlterField(
            model_name='checkpoint',
            name='replaced_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='checkpoint',
            name='summary_tokens',
            field=models.PositiveBigIntegerField(),
        ),
        migrations.AlterField(
            model_name='checkpoint',
            name='tokens_after',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='checkpoint',
            name='tokens_before',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='message',
            name='reasoning_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='message',
            name='tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='project',
            name='keep_recent_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='project',
            name='max_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='session',
            name='instructions_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='session',
            name='keep_recent_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='session',
            name='max_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(RESTORE, RESTORE),
    ]
