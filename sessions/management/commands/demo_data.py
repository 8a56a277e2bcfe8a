import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from sessions.access.members import set_member
from sessions.ingest.demo import load_demo
from sessions.models import Project

DEV_PASSWORD = "ctxweb-demo"
# username -> (superuser, {project: role}, what the login is for)
DEMO_USERS = {
    "admin": (True, {}, "superuser: everything, API keys, members"),
    "viewer": (False, {"default": "viewer", "support-bots": "viewer"}, "support staff: read, search, notes, exports"),
    "editor": (False, {"default": "editor", "support-bots": "editor"}, "also compact and hide messages"),
}


class Command(BaseCommand):
    help = ("Create the demo sessions and demo logins (safe to run again: it creates nothing twice). With DEBUG "
            "off it refuses unless --force is given, and the logins get a random password, printed once.")

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true",
                            help="run with DEBUG off too (the demo logins then get a random password)")
        parser.add_argument("--url", default="http://127.0.0.1:8000/",
                            help="where the server will be, for the banner (make run passes HOST and PORT)")

    def handle(self, *args, url="http://127.0.0.1:8000/", force=False, **options):
        if not settings.DEBUG and not force:
            raise CommandError("DEBUG is off: demo_data would add demo sessions and logins to this installation. "
                               "Pass --force to do it anyway (the logins then get a random password).")
        # A known password only where DEBUG is on; a production run gets one nobody could guess.
        if settings.DEBUG:
            password = os.environ.get("CTXWEB_DEMO_PASSWORD") or DEV_PASSWORD
        else:
            password = secrets.token_urlsafe(18)
        created = load_demo(self.stdout)
        if not created:
            self.stdout.write("Demo data is already loaded.")
        User = get_user_model()
        new_logins = []
        for username, (superuser, roles, purpose) in DEMO_USERS.items():
            if not User.objects.filter(username=username).exists():
                maker = User.objects.create_superuser if superuser else User.objects.create_user
                maker(username, f"{username}@example.com", password)
                new_logins.append((username, purpose))
            for project, role in roles.items():
                if Project.objects.filter(name=project).exists():
                    set_member(Project.objects.get(name=project), username, role)
        lines = [f"  Log in as {username} / {password}   ({purpose})" for username, purpose in new_logins]
        if len(new_logins) < len(DEMO_USERS):
            lines.append("  Demo logins made before keep their password.")
        if not settings.DEBUG and new_logins:
            lines.append("  This random password is shown once; it is not stored anywhere you can read it.")
        self.stdout.write(self.style.SUCCESS(f"\nctxweb is starting on {url}\n" + "\n".join(lines) + "\n"))
