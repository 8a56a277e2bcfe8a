# Failed log-ins and API keys are also counted per username and per key prefix: the address column
# becomes a subject that holds any of them.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("ctx_sessions", "0010_import_rules"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="authfailure", name="auth_failure_recent"),
        migrations.RenameField(model_name="authfailure", old_name="address", new_name="subject"),
        migrations.AlterField(
            model_name="authfailure", name="subject", field=models.CharField(max_length=150),
        ),
        migrations.AlterField(
            model_name="authfailure",
            name="scope",
            field=models.CharField(
                choices=[("login", "Login"), ("api_key", "API key"), ("account", "log-in account"),
                         ("key_prefix", "API key prefix")],
                max_length=10,
            ),
        ),
        migrations.AddIndex(
            model_name="authfailure",
            index=models.Index(fields=["subject", "scope", "-created_at"], name="auth_failure_recent"),
        ),
    ]
