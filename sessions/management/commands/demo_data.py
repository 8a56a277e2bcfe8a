import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from sessions.demo import load_demo
from sessions.members import set_member
from sessions.models import Project

DEMO_PASSWORD = os.environ.get("CTXWEB_DEMO_PASSWORD", "ctxweb-demo")
# username -> (superuser, {project: role})
DEMO_USERS = {
    "admin": (True, {}),
    "editor": (False, {"default": "editor", "support-bots": "editor"}),
    "viewer": (False, {"default": "viewer", "support-bots": "viewer"}),
}


class Command(BaseCommand):
    help = "Create the demo sessions and demo logins (safe to run again: it creates nothing twice)."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/",
                            help="where the server will be, for the banner (make run passes HOST and PORT)")

    def handle(self, *args, url, **options):
        created = load_demo(self.stdout)
        if not created:
            self.stdout.write("Demo data is already loaded.")
        User = get_user_model()
        for username, (superuser, roles) in DEMO_USERS.items():
            if not User.objects.filter(username=username).exists():
                maker = User.objects.create_superuser if superuser else User.objects.create_user
                maker(username, f"{username}@example.com", DEMO_PASSWORD)
            for project, role in roles.items():
                if Project.objects.filter(name=project).exists():
                    set_member(Project.objects.get(name=project), username, role)
        self.stdout.write(self.style.SUCCESS(
            f"\nctxweb is starting on {url}\n"
            f"  Log in as admin / {DEMO_PASSWORD}   (superuser: everything, API keys, members)\n"
            f"         or viewer / {DEMO_PASSWORD}  (support staff: read, search, notes, exports)\n"
            f"         or editor / {DEMO_PASSWORD}  (also compact and hide messages)\n"
        ))
