from django.db import migrations


def create_default_project(apps, schema_editor):
    Project = apps.get_model("ctx_sessions", "Project")
    Project.objects.get_or_create(name="default", defaults={"title": "Default project"})


class Migration(migrations.Migration):
    dependencies = [("ctx_sessions", "0001_initial")]
    operations = [migrations.RunPython(create_default_project, migrations.RunPython.noop)]
