"""Storing parsed transcripts through the domain functions: update_session for the session's fields,
append_messages for the raw log (its client ids make a second import store nothing), and
create_imported_checkpoint for compactions found in the source, at the place they happened.

Each file is imported in one transaction: a file that fails stores nothing, and the others still
import. Automatic compaction does not run on imported history. A session's dates are its messages'
(when the source has timestamps), not the import's, so date filters and sorting mean the conversation's.
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils.dateparse import parse_datetime

from sessions.append import append_messages
from sessions.checkpoints import create_imported_checkpoint
from sessions.errors import DomainError
from sessions.models import Project, Session
from sessions.session_store import update_session

from .base import ImportedSession, TranscriptError
from .detect import parse_transcript
from .links import link_relatives, with_links

SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
logger = logging.getLogger("ctxweb.import")


@dataclass
class FileReport:
    """What importing one file did (all zero when it failed: a failed file stores nothing)."""

    name: str
    format: str = ""
    keys: list[str] = field(default_factory=list)
    sessions_created: int = 0
    messages: int = 0  # stored now
    duplicates: int = 0  # already stored by an earlier import, so skipped
    tool_calls: int = 0
    tool_results: int = 0
    checkpoints: int = 0
    entries_skipped: int = 0  # source entries that are not messages
    error: str | None = None

    @property
    def sessions(self) -> int:
        return len(self.keys)

    @property
    def skipped(self) -> int:
        return self.duplicates + self.entries_skipped


@dataclass
class ImportSummary:
    files: list[FileReport] = field(default_factory=list)

    def total(self, name: str) -> int:
        return sum(getattr(report, name) for report in self.files)

    @property
    def failed(self) -> list[FileReport]:
        return [report for report in self.files if report.error]

    def text(self) -> str:
        ok = len(self.files) - len(self.failed)
        line = (
            f"Imported {ok} of {len(self.files)} file(s): {self.total('sessions')} session(s) "
            f"({self.total('sessions_created')} new), {self.total('messages')} message(s) stored, "
            f"{self.total('tool_calls')} tool call(s), {self.total('tool_results')} tool result(s), "
            f"{self.total('checkpoints')} checkpoint(s); skipped {self.total('skipped')} "
            f"({self.total('duplicates')} message(s) already stored, {self.total('entries_skipped')} "
            f"entr{'y' if self.total('entries_skipped') == 1 else 'ies'} without a message)."
        )
        if self.failed:
            line += f" {len(self.failed)} file(s) failed."
        return line


def _datetime(value):
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _session_fields(project: Project, imported: ImportedSession) -> dict:
    fields = {"title": imported.title, "metadata": with_links(project, imported),
              "instructions": imported.instructions, "compaction": imported.compaction}
    return {name: value for name, value in fields.items() if value is not None}


def _dates(imported: ImportedSession) -> tuple:
    """When the conversation started and when it was last active, from the source's timestamps."""
    stamps = [d for m in imported.messages if isinstance(m, dict) and (d := _datetime(m.get("created_at")))]
    first = _datetime(imported.created_at) or (min(stamps) if stamps else None)
    return first, max(stamps) if stamps else None


class _Appender:
    """Appends one session's messages in batches, remembering each message's seq."""

    def __init__(self, project: Project, imported: ImportedSession, actor: str, report: FileReport):
        self.project, self.imported, self.actor, self.report = project, imported, actor, report
        self.seqs: list[int | None] = []

    def up_to(self, end: int) -> None:
        batch = settings.CTXWEB_MAX_BATCH_MESSAGES
        messages = self.imported.messages
        while len(self.seqs) < end:
            start = len(self.seqs)
            chunk = messages[start : min(end, start + batch)]
            try:
                result = append_messages(self.project, self.imported.key, chunk, self.actor)
            except DomainError as exc:
                detail = exc.detail.split(": ", 1)[-1] if exc.detail.startswith("messages[") else exc.detail
                raise DomainError(self._where(exc, start) + detail, code=exc.code) from exc
            for appended in result.messages:
                self.seqs.append(appended.seq)
                source = chunk[appended.index]
                if appended.stored:
                    self.report.messages += 1
                    self.report.tool_calls += len(source.get("tool_calls") or ())
                    self.report.tool_results += source.get("role") == "tool"
                elif appended.duplicate:
                    self.report.duplicates += 1

    def _where(self, exc: DomainError, start: int) -> str:
        index = exc.extra.get("index")
        if index is None:
            return f"session {self.imported.key}: "
        message = self.imported.messages[start + index]
        label = message.get("id") if isinstance(message, dict) and message.get("id") else start + index
        return f"session {self.imported.key}, message {label}: "


def store_session(project: Project, imported: ImportedSession, actor: str, report: FileReport) -> Session:
    try:
        session, created = update_session(project, imported.key, _session_fields(project, imported), actor)
    except DomainError as exc:
        raise DomainError(f"session {imported.key}: {exc.detail}", code=exc.code) from exc
    started, last_active = _dates(imported)
    if created and started:
        Session.objects.filter(pk=session.pk).update(created_at=started)
    active_before = session.last_activity_at
    stored_before = report.messages
    report.sessions_created += created
    report.keys.append(imported.key)
    appender = _Appender(project, imported, actor, report)
    total = len(imported.messages)
    for checkpoint in sorted(imported.checkpoints, key=lambda c: (c.at or c.last, c.last)):
        at = checkpoint.at or checkpoint.last
        if not 1 <= checkpoint.last <= at <= total:
            raise TranscriptError(
                f"session {imported.key}: a checkpoint covering {checkpoint.last} message(s), made after "
                f"{at}, does not fit its {total} message(s)"
            )
        appender.up_to(at)
        try:
            _, new = create_imported_checkpoint(
                session, appender.seqs[checkpoint.last - 1], checkpoint.summary, actor,
                created_at_seq=appender.seqs[at - 1], summarizer=checkpoint.summarizer,
                trigger=checkpoint.trigger, created_at=_datetime(checkpoint.created_at),
            )
        except DomainError as exc:
            raise DomainError(f"session {imported.key}: {exc.detail}", code=exc.code) from exc
        report.checkpoints += new
    appender.up_to(total)
    if last_active and report.messages > stored_before:
        latest = last_active if created else max(last_active, active_before)
        Session.objects.filter(pk=session.pk).update(last_activity_at=latest)
    link_relatives(project, imported, actor)
    return session


def import_data(
    project: Project,
    name: str,
    data: bytes,
    *,
    fmt: str = "auto",
    key_prefix: str = "",
    actor: str = "import",
    on_session: Callable[[FileReport], None] | None = None,
) -> FileReport:
    """Import one transcript file's content. Never raises for a bad file: the report says why."""
    report = FileReport(name)
    try:
        parsed = parse_transcript(name, data, fmt, key_prefix)
        report.format = parsed.format
        with transaction.atomic():
            for imported in parsed.sessions:
                store_session(project, imported, actor, report)
                if on_session:
                    on_session(report)
        report.entries_skipped = parsed.skipped
    except (TranscriptError, DomainError) as exc:
        reason = exc.detail if isinstance(exc, DomainError) else str(exc)
        return FileReport(name, report.format, error=reason)
    except Exception as exc:  # one odd file must not stop the others; the trace goes to the log
        logger.exception("importing %s failed", name)
        return FileReport(name, report.format, error=f"unexpected error ({type(exc).__name__}: {exc})")
    return report


def collect_files(paths: Iterable[str | Path]) -> list[Path]:
    """The files to import: each path given, and every file with a SUFFIXES ending under each folder given."""
    files = []
    for path in map(Path, paths):
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        else:
            files.append(path)
    return files


def import_file(project: Project, path: Path, **options) -> FileReport:
    try:
        data = path.read_bytes()
    except OSError as exc:
        return FileReport(str(path), error=exc.strerror or str(exc))
    report = import_data(project, path.name, data, **options)
    report.name = str(path)
    return report
