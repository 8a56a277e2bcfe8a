from django.core.management.base import BaseCommand, CommandError

from sessions.ingest.importers import FORMATS, ImportSummary, collect_files, import_file
from sessions.ingest.importers.runner import SUFFIXES
from sessions.models import Project

BAR_WIDTH = 24


class Progress:
    """A plain-text progress bar on stderr: redrawn in place on a terminal, one line per file otherwise."""

    def __init__(self, out, total: int):
        self.out, self.total = out, total
        self.tty = out.isatty()
        self.width = 0

    def show(self, done: int, summary: ImportSummary, current: str = "", sessions: int = 0, messages: int = 0):
        filled = BAR_WIDTH * done // max(self.total, 1)
        line = (
            f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{self.total} files · "
            f"{summary.total('sessions') + sessions} sessions · {summary.total('messages') + messages} messages"
            + (f" · {current}" if current else "")
        )
        if self.tty:
            self.out.write("\r" + line.ljust(self.width), ending="")
            self.width = len(line)
            self.out.flush()
        elif not current:
            self.out.write(line)

    def message(self, text: str):
        if self.tty and self.width:
            self.out.write("\r" + " " * self.width + "\r", ending="")
            self.width = 0
        self.out.write(text)

    def end(self):
        if self.tty and self.width:
            self.out.write("")


class Command(BaseCommand):
    help = (
        "Import transcripts: OpenAI Chat Completions, Anthropic Messages, Claude Code session logs, Codex CLI "
        "rollouts, SWE-agent trajectories, ctxweb exports and request logs (JSON or JSON Lines; folders are searched "
        "for *.json, *.jsonl, *.ndjson and *.traj). Importing again stores nothing twice."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH", help="a transcript file or a folder of them")
        parser.add_argument("--project", default="default", help="the project to import into (default: default)")
        parser.add_argument("--format", default="auto", choices=FORMATS, help="the files' format (default: auto)")
        parser.add_argument("--session-key-prefix", default="", help="put before every session key")

    def handle(self, *args, paths, project, format, session_key_prefix, **options):
        try:
            project_obj = Project.objects.get(name=project)
        except Project.DoesNotExist:
            raise CommandError(f"No project {project!r}.") from None
        files = collect_files(paths)
        if not files:
            raise CommandError(f"No {', '.join(SUFFIXES)} files found.")
        summary = ImportSummary()
        progress = Progress(self.stderr, len(files))
        progress.show(0, summary)
        for done, path in enumerate(files, start=1):
            def on_progress(report, checked, stored, done=done, path=path):
                progress.show(done - 1, summary, path.name, report.sessions, report.messages)

            report = import_file(project_obj, path, fmt=format, key_prefix=session_key_prefix, actor="import",
                                 on_progress=on_progress)
            summary.files.append(report)
            if report.error:
                progress.message(f"FAILED {report.name}: {report.error}")
            progress.show(done, summary)
        progress.end()
        self.stdout.write(summary.text())
        if summary.failed:
            raise CommandError(f"{len(summary.failed)} of {len(files)} file(s) could not be imported (see above).")
