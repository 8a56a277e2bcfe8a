from django.core.management.base import BaseCommand, CommandError

from sessions.models import Project, Session
from sessions.store import trace_blocks


class Command(BaseCommand):
    help = (
        "Write the trace blocks still missing (sessions/store/trace_blocks.py) of every session with a whole "
        f"block of {trace_blocks.BLOCK} messages, or of one project's: what the worker writes after appends, for sessions "
        "stored before ctxweb wrote them or restored without them."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", help="only this project's sessions")

    def handle(self, *args, **options):
        sessions = Session.objects.filter(message_count__gte=trace_blocks.BLOCK)
        if options["project"]:
            try:
                sessions = sessions.filter(project=Project.objects.get(name=options["project"]))
            except Project.DoesNotExist:
                raise CommandError(f"No project {options['project']!r}.") from None
        total = 0
        for pk, key in sessions.order_by("pk").values_list("pk", "key"):
            written = trace_blocks.index_session(pk)
            total += written
            if written:
                self.stdout.write(f"{key}: {written} blocks written")
        self.stdout.write(f"{total} blocks written")
