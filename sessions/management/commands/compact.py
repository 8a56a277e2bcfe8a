from django.core.management.base import BaseCommand, CommandError

from sessions.compaction import compact
from sessions.errors import DomainError
from sessions.models import Project
from sessions.session_store import get_session


class Command(BaseCommand):
    help = "Compact one session now and print the outcome with its figures."

    def add_arguments(self, parser):
        parser.add_argument("session_key")
        parser.add_argument("--project", default="default")
        parser.add_argument("--force", action="store_true", help="compact even under the threshold")
        parser.add_argument("--max-tokens", type=int)
        parser.add_argument("--keep-recent-tokens", type=int)
        parser.add_argument("--summarizer", choices=["extractive", "openai"])

    def handle(self, *args, **options):
        try:
            project = Project.objects.get(name=options["project"])
            session = get_session(project, options["session_key"])
            outcome = compact(
                session,
                force=options["force"],
                max_tokens=options["max_tokens"],
                keep_recent_tokens=options["keep_recent_tokens"],
                summarizer=options["summarizer"],
                actor="cli",
            )
        except Project.DoesNotExist:
            raise CommandError(f"No project {options['project']!r}.") from None
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        figures = outcome.figures()
        self.stdout.write(f"{outcome.status}" + (f" ({outcome.reason})" if outcome.reason else ""))
        for name, value in figures.items():
            if name != "status":
                self.stdout.write(f"  {name}: {value}")
        if outcome.status == "failed":
            raise CommandError(outcome.error)
