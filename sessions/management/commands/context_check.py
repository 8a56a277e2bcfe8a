import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sessions.errors import DomainError
from sessions.ingest.context_check import Settings, check_file, check_session, junit_xml
from sessions.ingest.session_store import get_session
from sessions.models import Project


class Command(BaseCommand):
    help = (
        "Replay a conversation message by message through ctxweb's compaction, on a scratch copy that stores "
        "nothing, and check that every pinned fact and every expected literal survives in every model input "
        "after it first appears. Exit status 1 when one does not (CI)."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="*", help="transcript files, in any import format")
        parser.add_argument("--session", help="check an existing session instead (with --project)")
        parser.add_argument("--project", default="default")
        parser.add_argument("--key", help="of a file holding several conversations, only this one")
        parser.add_argument("--format", default="auto", help="the files' format, as import_transcripts takes it")
        parser.add_argument("--pin", action="append", default=[], metavar="PATTERN",
                            help="a pinned fact: an RE2 regular expression (repeatable)")
        parser.add_argument("--expect", action="append", default=[], metavar="LITERAL",
                            help="a literal that must survive (repeatable)")
        parser.add_argument("--max-tokens", type=int)
        parser.add_argument("--keep-recent-tokens", type=int)
        parser.add_argument("--summarizer", choices=["extractive", "openai"])
        parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")

    def handle(self, *args, **options):
        if bool(options["paths"]) == bool(options["session"]):
            raise CommandError("Give transcript files, or --session KEY (and --project), not both.")
        settings = Settings(max_tokens=options["max_tokens"], keep_recent_tokens=options["keep_recent_tokens"],
                            summarizer=options["summarizer"], expect=options["expect"],
                            pinned_facts=[{"name": f"pin {n}", "pattern": p} for n, p in enumerate(options["pin"], 1)])
        try:
            if options["session"]:
                project = Project.objects.filter(name=options["project"]).first()
                if project is None:
                    raise CommandError(f"No project {options['project']!r}.")
                reports = [check_session(get_session(project, options["session"]), settings)]
            else:
                reports = [report for path in options["paths"]
                           for report in check_file(Path(path), settings, fmt=options["format"], only=options["key"])]
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        for report in reports:
            verdict = "passed" if report.passed else "FAILED"
            self.stdout.write(f"{report.conversation}: {verdict} · {report.messages} messages, {report.checkpoints} "
                              f"checkpoints, {report.seconds:.2f} s")
            for run in report.failed_runs:
                self.stdout.write(f"  compaction failed {run}")
            for fact in report.facts:
                if fact.first_seq is None:
                    self.stdout.write(f"  {fact.name} {fact.literal!r}: in no message")
                elif fact.lost_count:
                    shown = ", ".join(f"#{n}" for n in fact.lost_at[:10])
                    self.stdout.write(f"  {fact.name} {fact.literal!r}: first in #{fact.first_seq}, missing from "
                                      f"{fact.lost_count} model input(s) (as of {shown}{'…' if fact.lost_count > 10 else ''}), "
                                      f"lost by checkpoint {', '.join(map(str, fact.lost_by))}")
                else:
                    self.stdout.write(f"  {fact.name} {fact.literal!r}: first in #{fact.first_seq}, kept")
        if options["junit"]:
            Path(options["junit"]).write_bytes(junit_xml(reports))
        if not all(report.passed for report in reports):
            sys.exit(1)
