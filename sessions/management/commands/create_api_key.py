from django.core.management.base import BaseCommand, CommandError

from sessions.api_keys import create_api_key
from sessions.errors import DomainError
from sessions.models import Project


class Command(BaseCommand):
    help = "Create an API key for a project and print its secret (shown only this once)."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project name, e.g. default")
        parser.add_argument("name", help="a name for the key, e.g. the application using it")
        parser.add_argument("--create-project", action="store_true", help="create the project if missing")

    def handle(self, *args, project, name, create_project, **options):
        if create_project:
            project_obj = Project.objects.get_or_create(name=project)[0]
        else:
            try:
                project_obj = Project.objects.get(name=project)
            except Project.DoesNotExist:
                raise CommandError(f"No project {project!r} (add --create-project to create it).") from None
        try:
            key, secret = create_api_key(project_obj, name)
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        self.stderr.write(f"Created API key {key.name!r} for project {project_obj.name!r}. The secret is shown once:")
        self.stdout.write(secret)
