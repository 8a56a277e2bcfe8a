from django.core.management.base import BaseCommand, CommandError

from sessions.context.compaction_runs import work_off_backlog
from sessions.errors import DomainError
from sessions.ingest.session_store import get_session
from sessions.models import Project


class Command(BaseCommand):
    help = (
        "Compact one session now, run after run (each within the run budget, each its own checkpoint) until "
        "its model input is under max_tokens or nothing more can be covered; print each run's outcome."
    )

    def add_arguments(self, parser):
        parser.add_argument("session_key")
        parser.add_argument("--project", default="default")
        parser.add_argument("--force", action="store_true", help="compact even under the threshold")
        parser.add_argument("--max-tokens", type=int)
        parser.add_argument("--keep-recent-tokens", type=int)
        parser.add_argument("--summarizer", choices=["extractive", "openai"])
        parser.add_argument("--runs", type=int, help="stop after this many runs (default: until done)")

    def handle(self, *args, **options):
        if options["runs"] is not None and options["runs"] < 1:
            raise CommandError("--runs must be at least 1.")
        try:
            project = Project.objects.get(name=options["project"])
            session = get_session(project, options["session_key"])
            outcomes = work_off_backlog(
                session,
                max_runs=options["runs"],
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
        for number, outcome in enumerate(outcomes, start=1):
            prefix = f"run {number}: " if len(outcomes) > 1 else ""
            self.stdout.write(f"{prefix}{outcome.status}" + (f" ({outcome.reason})" if outcome.reason else ""))
            for name, value in outcome.figures().items():
                if name != "status":
                    self.stdout.write(f"  {name}: {value}")
        if outcomes[-1].status == "failed":
            raise CommandError(outcomes[-1].error)
