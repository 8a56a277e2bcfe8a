from django.core.management.base import BaseCommand, CommandError

from sessions.access.members import ROLES, remove_member, set_member
from sessions.errors import DomainError
from sessions.models import Project


class Command(BaseCommand):
    help = "Give a user a role in a project (viewer, editor, admin), or remove them with --remove."

    def add_arguments(self, parser):
        parser.add_argument("project")
        parser.add_argument("username")
        parser.add_argument("role", nargs="?", choices=ROLES)
        parser.add_argument("--remove", action="store_true")

    def handle(self, *args, project, username, role, remove, **options):
        try:
            project_obj = Project.objects.get(name=project)
        except Project.DoesNotExist:
            raise CommandError(f"No project {project!r}.") from None
        if remove:
            if not remove_member(project_obj, username):
                raise CommandError(f"{username} is not a member of {project}.")
            self.stdout.write(f"Removed {username} from {project}.")
            return
        if not role:
            raise CommandError("Give a role (viewer, editor, admin) or --remove.")
        try:
            membership, created = set_member(project_obj, username, role)
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"{username} is now {membership.role} of {project}" + (" (new member)." if created else "."))
