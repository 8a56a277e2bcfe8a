# One waiting request per holder (sessions/context/waiting.py) and per-user dashboard budgets (sessions/access/dashboard_limits.py).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ctx_sessions', '0021_recorded_request_keys'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='WaitSlot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('holder', models.CharField(max_length=64, unique=True)),
                ('until', models.FloatField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name='DashboardBudget',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('requests_refilled_at', models.FloatField(default=0)),
                ('heavy_refilled_at', models.FloatField(default=0)),
                ('throttled_total', models.PositiveBigIntegerField(default=0)),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
    ]
