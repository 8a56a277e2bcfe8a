from django.core.management.base import BaseCommand, CommandError

from sessions.access.api_keys import create_api_key
from sessions.errors import DomainError
from sessions.models import Project


class Command(BaseCommand):
    help = "Create an API key for a project and print its secret (shown only this once)."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project name, e.g. default")
        parser.add_argument("name", help="a name for the key, e.g. the application using it")
        parser.add_argument("--create-project", action="store_true", help="create the project if missing")
        parser.add_argument("--allow-duplicate", action="store_true",
                            help="create the key even if the project already has one with this name")

    def handle(self, *args, project, name, create_project, allow_duplicate, **options):
        if create_project:
            project_obj = Project.objects.get_or_create(name=project)[0]
        else:
            try:
                project_obj = Project.objects.get(name=project)
            except Project.DoesNotExist:
                raise CommandError(f"No project {project!r} (add --create-project to create it).") from None
        if not allow_duplicate and project_obj.api_keys.filter(name=name.strip(), revoked_at__isnull=True).exists():
            raise CommandError(
                f"Project {project_obj.name!r} already has an active API key named {name.strip()!r}, and its secret "
                "cannot be shown again. Use the secret you saved, revoke that key on the API keys page, choose "
                "another name, or add --allow-duplicate to create a second key with this name."
            )
        try:
            key, secret = create_api_key(project_obj, name)
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        self.stderr.write(f"Created API key {key.name!r} for project {project_obj.name!r}. The secret is shown once:")
        self.stdout.write(secret)
