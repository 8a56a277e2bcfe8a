"""Storing parsed transcripts through the domain functions: update_session for the session's fields,
append_messages for the raw log (its client ids make a second import store nothing), and
create_imported_checkpoint for compactions found in the source, at the place they happened.

A file up to CTXWEB_IMPORT_STREAM_ABOVE bytes (or of a format that must be read whole) is imported in one
transaction: a file that fails stores nothing, and the others still import. A larger file in a chat format
or a Claude Code log is read as a stream (sessions.importers.stream), checked whole first so a bad file
stores nothing, then stored a session per transaction (a file of records) or a chunk of messages per
transaction (one long conversation, or each thread of a Claude Code log, hidden until its last chunk is
stored); an import stopped midway leaves whole sessions or nothing of a session, and running it again
completes it.

An import never changes a session the application writes to (session_store.check_import_target): it
creates sessions, or resumes those it created from the same file. Automatic compaction does not run on imported history. A session's dates are its messages'
(when the source has timestamps), not the import's, so date filters and sorting mean the conversation's.
"""

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC
from pathlib import Path

import ijson
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils.dateparse import parse_datetime

from sessions.append import append_messages
from sessions.checkpoints import create_imported_checkpoint
from sessions.errors import DomainError
from sessions.models import Project, Session
from sessions.recorded_requests import record_requests
from sessions.session_store import update_session
from sessions.validation import image_parts

from .base import ImportedCheckpoint, ImportedSession, TranscriptError
from .detect import parse_transcript
from .links import link_relatives, with_links
from .stream import StreamedConversation, StreamedFile, open_stream

SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
logger = logging.getLogger("ctxweb.import")
PROGRESS_EVERY = 0.5  # seconds between progress reports while a file is checked


@dataclass
class FileReport:
    """What importing one file did. A failed file read whole stores nothing (all zero); a streamed one
    keeps what it stored before the failure, and counts it."""

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
    requests: int = 0  # a request log: requests recorded now
    requests_duplicate: int = 0  # a request log: requests already recorded by an earlier import
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
        if self.total("requests") or self.total("requests_duplicate"):
            line += (f" Recorded {self.total('requests')} request(s) from request logs and trajectories "
                     f"({self.total('requests_duplicate')} already recorded).")
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


def source_of(name: str) -> str:
    """What an import remembers of its source file (Session.import_source): the file's own name."""
    return name.replace("\\", "/").rsplit("/", 1)[-1][:300]


def _about(key: str, exc: DomainError) -> DomainError:
    """The error, saying which session it is about (import_refused names it already)."""
    if exc.code == "import_refused":
        return exc
    return DomainError(f"session {key}: {exc.detail}", code=exc.code)


def append_chunk(project: Project, key: str, chunk: list[dict], actor: str, report: FileReport,
                 where=None, *, source: str) -> list[int | None]:
    """Append one chunk of a session's messages (one transaction), counting them into `report`; the seq
    of each. `where(exc)` names the message an error is about."""
    try:
        result = append_messages(project, key, chunk, actor, import_source=source)
    except DomainError as exc:
        detail = exc.detail.split(": ", 1)[-1] if exc.detail.startswith("messages[") else exc.detail
        index = exc.extra.get("index")
        if exc.code == "import_refused":
            raise
        if index is None:
            place = f"session {key}: "
        else:
            label = chunk[index].get("id") if isinstance(chunk[index], dict) else None
            place = f"session {key}, message {label or (where(index) if where else index)}: "
        raise DomainError(place + detail, code=exc.code) from exc
    seqs = []
    for appended in result.messages:
        seqs.append(appended.seq)
        source = chunk[appended.index]
        if appended.stored:
            report.messages += 1
            report.tool_calls += len(source.get("tool_calls") or ())
            report.tool_results += source.get("role") == "tool"
        elif appended.duplicate:
            report.duplicates += 1
    return seqs


class _Appender:
    """Appends one session's messages in batches, remembering each message's seq."""

    def __init__(self, project: Project, imported: ImportedSession, actor: str, report: FileReport, source: str):
        self.project, self.imported, self.actor, self.report = project, imported, actor, report
        self.source = source
        self.seqs: list[int | None] = []

    def up_to(self, end: int) -> None:
        messages = self.imported.messages
        while len(self.seqs) < end:
            start = len(self.seqs)
            following = (messages[index] for index in range(start, end))
            chunk = next(_chunks(following, settings.CTXWEB_MAX_BATCH_MESSAGES))
            self.seqs += append_chunk(self.project, self.imported.key, chunk, self.actor, self.report,
                                      lambda index, start=start: start + index, source=self.source)


def store_session(project: Project, imported: ImportedSession, actor: str, report: FileReport, source: str
                  ) -> Session:
    try:
        session, created = update_session(project, imported.key, _session_fields(project, imported), actor,
                                          import_source=source)
    except DomainError as exc:
        raise _about(imported.key, exc) from exc
    started, last_active = _dates(imported)
    if created and started:
        Session.objects.filter(pk=session.pk).update(created_at=started)
    active_before = session.last_activity_at
    stored_before = report.messages
    report.sessions_created += created
    report.keys.append(imported.key)
    appender = _Appender(project, imported, actor, report, source)
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
    Session.objects.filter(pk=session.pk, being_imported=True).update(being_imported=False)
    return session


Progress = Callable[[FileReport, int, int], None]  # (report so far, bytes checked, bytes stored)


def _failed(name: str, fmt: str, exc: Exception) -> FileReport:
    if isinstance(exc, TranscriptError | DomainError):
        reason = exc.detail if isinstance(exc, DomainError) else str(exc)
    elif isinstance(exc, ijson.JSONError):
        reason = f"not valid JSON: {exc}"
    else:  # one odd file must not stop the others; the trace goes to the log
        logger.error("importing %s failed", name, exc_info=exc)
        reason = f"unexpected error ({type(exc).__name__}: {exc})"
    return FileReport(name, fmt, error=reason)


def import_data(
    project: Project,
    name: str,
    data: bytes,
    *,
    fmt: str = "auto",
    key_prefix: str = "",
    actor: str = "import",
    on_progress: Progress | None = None,
) -> FileReport:
    """Import one transcript file's content, read whole, in one transaction. Never raises for a bad file:
    the report says why."""
    report = FileReport(name)
    size = len(data)
    try:
        parsed = parse_transcript(name, data, fmt, key_prefix)
        report.format = parsed.format
        if parsed.requests is not None:
            store_requests(project, parsed.requests, actor, report, parsed.request_lines, source=source_of(name),
                           provenance={"file": name, "format": parsed.format}, metadata=parsed.request_metadata)
            if on_progress:
                on_progress(report, size, size)
            return report
        with transaction.atomic():
            for imported in parsed.sessions:
                store_session(project, imported, actor, report, source_of(name))
                if on_progress:
                    on_progress(report, size, 0)
        report.entries_skipped = parsed.skipped
    except Exception as exc:
        return _failed(name, report.format, exc)
    if on_progress:
        on_progress(report, size, size)
    return report


def _name_line(reason: str, lines: dict[str, int]) -> str:
    """record_requests names a refused request by its external id: name its line instead."""
    head, _, detail = reason.partition(": ")
    number = lines.get(head.removeprefix("request "))
    return f"line {number}: {detail}" if number is not None else reason


def store_requests(project: Project, captured: list, actor: str, report: FileReport,
                   request_lines: list[int] | None = None, *, source: str, provenance: dict,
                   metadata: dict | None = None) -> None:
    """Store a file's recorded requests (a request log, a trajectory's steps) through record_requests, as
    an import of `source` (one transaction: a file that fails stores nothing), counting the sessions it
    touched (each thread too) and the messages their raw logs gained. Each session the file made says so
    in its metadata, as every imported session does (`imported_from`, with the file's own fields for that
    conversation, `metadata[key]`, on each of its threads)."""
    keys = list(dict.fromkeys(c.conversation for c in captured))
    known = Session.objects.filter(project=project).filter(
        Q(key__in=keys) | Q(metadata__thread_of__in=keys))
    before = dict(known.values_list("key", "message_count"))
    lines = {c.external_id: number for c, number in zip(captured, request_lines or (), strict=False)}
    with transaction.atomic():
        result = record_requests(project, captured, actor, import_source=source)
        if result.rejected:  # a file that fails stores nothing: name its bad lines
            raise TranscriptError("; ".join(_name_line(reason, lines) for reason in result.rejected[:5])
                                  + (f" (and {len(result.rejected) - 5} more)" if len(result.rejected) > 5 else ""))
        for session in Session.objects.filter(project=project, key__in=result.sessions, import_source=source):
            conversation = (session.metadata or {}).get("thread_of") or session.key
            wanted = {**(metadata or {}).get(conversation, {}), **(session.metadata or {}), "imported_from": provenance}
            if wanted != session.metadata:
                update_session(project, session.key, {"metadata": wanted}, actor, import_source=source)
    after = dict(Session.objects.filter(project=project, key__in=result.sessions).values_list("key", "message_count"))
    # Every session the file records requests of, as for other imports run again.
    report.keys = list(dict.fromkeys([*result.sessions, *(k for k in before if k not in result.sessions)]))
    report.sessions_created = sum(1 for key in result.sessions if key not in before)
    report.messages = sum(count - before.get(key, 0) for key, count in after.items())
    report.requests, report.requests_duplicate = result.stored, result.duplicates


def store_streamed(project: Project, streamed: StreamedConversation, instructions: str | None, actor: str,
                   report: FileReport, progress: Callable[[], None], source: str) -> None:
    """Store a conversation read as a stream, a chunk per transaction (client ids make a re-run complete
    what a stopped one began). A session it creates is hidden (Session.being_imported) until every chunk
    is stored, so a stopped import leaves nothing of it to see, and the re-run shows it whole. Its
    instructions, found by the check, are set first: set after the messages, they would lay out the whole
    model input again. As store_session does: its links and dates, and each checkpoint among the messages
    made once the messages before it are stored (so its figures are those of that moment)."""
    imported = ImportedSession(streamed.key, metadata=streamed.metadata, family=streamed.family)
    fields = {"title": streamed.title, "metadata": with_links(project, imported), "instructions": instructions}
    try:
        with transaction.atomic():
            session, created = update_session(
                project, streamed.key, {k: v for k, v in fields.items() if v is not None}, actor,
                import_source=source,
            )
            if created:
                Session.objects.filter(pk=session.pk).update(being_imported=True)
    except DomainError as exc:
        raise _about(streamed.key, exc) from exc
    new = created or session.being_imported  # made by this import, or by a run of it that was stopped
    active_before, stored_before = session.last_activity_at, report.messages
    report.sessions_created += created
    report.keys.append(streamed.key)
    batch = min(settings.CTXWEB_IMPORT_CHUNK_MESSAGES, settings.CTXWEB_MAX_BATCH_MESSAGES)
    cap = settings.CTXWEB_MAX_IMAGE_PARTS_PER_REQUEST  # image parts per chunk, as _chunks keeps them
    chunk, images, count, last_seq, first, last = [], 0, 0, None, None, None

    def flush():
        nonlocal chunk, images, last_seq
        if chunk:
            last_seq = append_chunk(project, streamed.key, chunk, actor, report, source=source)[-1]
            chunk, images = [], 0
            progress()

    for item in streamed.messages:
        if isinstance(item, ImportedCheckpoint):
            flush()
            _store_checkpoint(session, item, count, last_seq, actor, report)
            continue
        parts = image_parts(item.get("content")) if isinstance(item, dict) else 0
        if chunk and images + parts > cap:
            flush()
        chunk.append(item)
        images += parts
        count += 1
        if isinstance(item, dict) and (stamp := _datetime(item.get("created_at"))):
            first, last = min(first or stamp, stamp), max(last or stamp, stamp)
        if len(chunk) >= batch:
            flush()
    flush()
    if new and first:
        Session.objects.filter(pk=session.pk).update(created_at=first)
    if last and report.messages > stored_before:
        Session.objects.filter(pk=session.pk).update(last_activity_at=last if new else max(last, active_before))
    link_relatives(project, imported, actor)
    Session.objects.filter(pk=session.pk, being_imported=True).update(being_imported=False)


def _store_checkpoint(session: Session, checkpoint: ImportedCheckpoint, count: int, last_seq: int | None,
                      actor: str, report: FileReport) -> None:
    """A checkpoint of a streamed conversation, covering the `count` messages stored before it."""
    if not checkpoint.last == (checkpoint.at or checkpoint.last) == count or last_seq is None:
        raise TranscriptError(f"session {session.key}: a checkpoint covering {checkpoint.last} message(s) "
                              f"does not cover the {count} message(s) before it")
    try:
        _, new = create_imported_checkpoint(
            session, last_seq, checkpoint.summary, actor, created_at_seq=last_seq,
            summarizer=checkpoint.summarizer, trigger=checkpoint.trigger, created_at=_datetime(checkpoint.created_at),
        )
    except DomainError as exc:
        raise DomainError(f"session {session.key}: {exc.detail}", code=exc.code) from exc
    report.checkpoints += new


def store_record(project: Project, imported: ImportedSession, actor: str, report: FileReport, source: str) -> None:
    """Store one record of a file of records: a whole session, in one transaction, so a stopped import
    leaves it whole or not at all; the report counts it only once it is stored."""
    counted = replace(report, keys=list(report.keys))
    try:
        with transaction.atomic():
            store_session(project, imported, actor, report, source)
    except Exception:
        for name in ("keys", "sessions_created", "messages", "duplicates", "tool_calls", "tool_results", "checkpoints"):
            setattr(report, name, getattr(counted, name))
        raise


def _chunks(items, size: int):
    """Batches of at most `size` messages and CTXWEB_MAX_IMAGE_PARTS_PER_REQUEST image parts (a
    message over that cap alone goes in a batch of its own, which refuses it)."""
    cap = settings.CTXWEB_MAX_IMAGE_PARTS_PER_REQUEST
    chunk, images = [], 0
    for item in items:
        count = image_parts(item.get("content")) if isinstance(item, dict) else 0
        if chunk and (len(chunk) >= size or images + count > cap):
            yield chunk
            chunk, images = [], 0
        chunk.append(item)
        images += count
    if chunk:
        yield chunk


def _check(stream: StreamedFile, file, on_progress: Progress | None, report: FileReport) -> list[str | None]:
    """Read the whole file once, storing nothing: a file that is not a transcript of its format fails
    here, before anything is stored. Returns the instructions of its streamed conversations."""
    last = time.monotonic()
    instructions = []
    for session in stream.sessions(file):
        if not isinstance(session, StreamedConversation):
            continue
        for _ in session.messages:
            if on_progress and time.monotonic() - last > PROGRESS_EVERY:
                on_progress(report, stream.position(file), 0)
                last = time.monotonic()
        instructions.append(session.instructions)
    return instructions


def import_stream(project: Project, stream: StreamedFile, file, name: str, *, actor: str = "import",
                  on_progress: Progress | None = None) -> FileReport:
    """Import a file read as a stream: checked whole first (a bad file stores nothing), then stored session
    by session, a chunk of messages per transaction, so other writers wait at most for one chunk."""
    report = FileReport(name, stream.format)
    try:
        instructions = iter(_check(stream, file, on_progress, report))
        size = stream.position(file)
        if on_progress:
            on_progress(report, size, 0)
        for session in stream.sessions(file):
            def progress():
                if on_progress:
                    on_progress(report, size, stream.position(file))

            if isinstance(session, StreamedConversation):
                store_streamed(project, session, next(instructions), actor, report, progress, source_of(name))
            else:
                store_record(project, session, actor, report, source_of(name))
                progress()
    except Exception as exc:  # what was stored before the failure stays, and the report counts it
        report.error = _failed(name, report.format, exc).error
        return report
    report.entries_skipped = stream.skipped
    if on_progress:
        on_progress(report, size, size)
    return report


def import_path(project: Project, path: Path, *, name: str | None = None, fmt: str = "auto",
                key_prefix: str = "", actor: str = "import", on_progress: Progress | None = None) -> FileReport:
    """Import a transcript file from disk: the path shared by `manage.py import_transcripts` and the
    dashboard's import jobs. Files above CTXWEB_IMPORT_STREAM_ABOVE bytes in a chat format, and Claude Code
    logs, stream; the others are read whole."""
    name = name or path.name
    try:
        with path.open("rb") as file:
            if path.stat().st_size > settings.CTXWEB_IMPORT_STREAM_ABOVE:
                stream = open_stream(path, file, name, fmt, key_prefix)
                if stream is not None:
                    return import_stream(project, stream, file, name, actor=actor, on_progress=on_progress)
            file.seek(0)
            data = file.read()
    except OSError as exc:
        return FileReport(name, error=exc.strerror or str(exc))
    except Exception as exc:
        return _failed(name, "", exc)
    return import_data(project, name, data, fmt=fmt, key_prefix=key_prefix, actor=actor, on_progress=on_progress)


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
    report = import_path(project, path, **options)
    report.name = str(path)
    return report
