"""Storing parsed transcripts through the domain functions: update_session for the session's fields,
append_messages for the raw log (its client ids make a second import store nothing), and
create_imported_checkpoint for compactions found in the source, at the place they happened.

Every format is stored a chunk per transaction: at most CTXWEB_IMPORT_CHUNK_MESSAGES messages,
CTXWEB_MAX_IMAGE_PARTS_PER_REQUEST image parts and CTXWEB_IMPORT_CHUNK_BYTES bytes (a message over the
bytes alone), each checkpoint in a short transaction of its own once the messages before it are stored,
so other writers wait for one chunk at most (all of them, on SQLite), a transaction's size does not grow
with the file, and the progress of an import job, written between two chunks, is seen while it runs.

A file up to CTXWEB_IMPORT_STREAM_ABOVE bytes (or of a format that must be read whole) is parsed whole
first, storing nothing, so a file that fails to parse stores nothing; nor does one holding a session this
import may not write to. Its sessions are then stored one after the other, each created hidden
(Session.being_imported) and all shown once the whole file is stored: a failure while storing leaves only
hidden sessions, and running the import again completes them. A request log (or a trajectory rebuilt
from its requests) is recorded in bounded groups of requests the same way (store_requests).

A larger file in a chat format or a Claude Code log is read as a stream (sessions.ingest.importers.stream),
checked whole first so a bad file stores nothing, then stored session by session, each session hidden
until its last chunk is stored; an import stopped midway leaves whole sessions or hidden parts of one, and
running it again completes it.

An import never changes a session the application writes to (session_store.check_import_target): it
creates sessions, or resumes those it created from the same file (a session it resumes, already shown,
grows a chunk at a time). Automatic compaction does not run on imported history. A session's dates are its
messages' (when the source has timestamps), not the import's, so date filters and sorting mean the
conversation's.
"""

import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

import ijson
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils.dateparse import parse_datetime

from sessions.context.checkpoints import create_imported_checkpoint
from sessions.errors import DomainError
from sessions.ingest.append import append_messages, compact_after_write
from sessions.ingest.importers.detect import parse_transcript
from sessions.ingest.importers.links import link_relatives, with_links
from sessions.ingest.importers.stream import StreamedConversation, StreamedFile, message_bytes, open_stream
from sessions.ingest.recorded_requests import CapturedRequest, message_count, parse_captured, record_requests
from sessions.ingest.session_store import check_import_target, check_key, update_session
from sessions.models import Project, Session
from sessions.store import leases
from sessions.wire.parsed import ImportedCheckpoint, ImportedSession, TranscriptError
from sessions.wire.validation import image_parts

SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
logger = logging.getLogger("ctxweb.import")
PROGRESS_EVERY = 0.5  # seconds between progress reports while a file is checked
HAND_OVER, MAX_HAND_OVER = 0.25, 0.1  # on SQLite, the pause after a chunk: a share of its time, at most this


@dataclass
class FileReport:
    """What importing one file did. A file that fails keeps what it stored before the failure (hidden,
    for a file read whole), and counts it; one that fails its parse or check stores nothing (all zero)."""

    name: str
    format: str = ""
    keys: list[str] = field(default_factory=list)
    # Whether running the same file again may succeed: only after a failure of the run itself (a lost
    # worker, a database error), never after one of the file (not JSON, not UTF-8, empty, another format).
    retry_helps: bool = False
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
        result = append_messages(project, key, chunk, actor, import_source=source, compact_after=False)
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


def _chunks(items, size: int):
    """The messages of `items` in chunks, each stored in one transaction: at most `size` messages,
    CTXWEB_MAX_IMAGE_PARTS_PER_REQUEST image parts and CTXWEB_IMPORT_CHUNK_BYTES bytes (message_bytes). A
    message over a bound is a chunk of its own (over the image cap, the append refuses it). A checkpoint
    among the items (ImportedCheckpoint) closes the chunk before it and is yielded as it is."""
    cap, most = settings.CTXWEB_MAX_IMAGE_PARTS_PER_REQUEST, settings.CTXWEB_IMPORT_CHUNK_BYTES
    chunk, images, weight = [], 0, 0
    for item in items:
        if isinstance(item, ImportedCheckpoint):
            if chunk:
                yield chunk
                chunk, images, weight = [], 0, 0
            yield item
            continue
        parts = image_parts(item.get("content")) if isinstance(item, dict) else 0
        size_of = message_bytes(item)
        if chunk and (images + parts > cap or weight + size_of > most):
            yield chunk
            chunk, images, weight = [], 0, 0
        chunk.append(item)
        images, weight = images + parts, weight + size_of
        if len(chunk) >= size:
            yield chunk
            chunk, images, weight = [], 0, 0
    if chunk:
        yield chunk


def chunk_size() -> int:
    """Messages per chunk: CTXWEB_IMPORT_CHUNK_MESSAGES, within an append batch's limit."""
    return min(settings.CTXWEB_IMPORT_CHUNK_MESSAGES, settings.CTXWEB_MAX_BATCH_MESSAGES)


def _nothing() -> None:
    pass


_pace = threading.local()  # when this thread's import last handed the database over


def _between_chunks(progress: Callable[[], None]) -> None:
    """After a chunk, outside its transaction: the lease of the import job renewed from the work when due
    (sessions.store.leases), the progress reported (a small write of its own, seen at once), and, on SQLite, the
    write lock left free for a moment (HAND_OVER of the chunk's time, at most MAX_HAND_OVER seconds). A
    writer waiting for the lock polls for it, every 100 ms at most (SQLite's busy handler): with the next
    chunk taking the lock again 20 ms after the last, an append waited 1.3 to 2.3 s behind chunks of
    0.2 s; the pause lets it in at its next poll."""
    leases.pulse()
    progress()
    now = time.monotonic()
    if connection.vendor == "sqlite" and (last := getattr(_pace, "last", None)) is not None:
        time.sleep(min(MAX_HAND_OVER, HAND_OVER * (now - last)))
    _pace.last = time.monotonic()


def open_session(project: Project, key: str, fields: dict, actor: str, source: str) -> tuple[Session, bool]:
    """The session an import stores into, with its fields set first (set after the messages, instructions
    would lay out the whole model input again), and whether it was created: a session it creates is
    hidden (Session.being_imported) from the transaction that creates it until the import shows it."""
    try:
        with transaction.atomic():
            session, created = update_session(project, key, fields, actor, import_source=source)
            if created:
                Session.objects.filter(pk=session.pk).update(being_imported=True)
                session.being_imported = True
    except DomainError as exc:
        raise _about(key, exc) from exc
    return session, created


@contextmanager
def _first_chunk(project: Project, key: str, fields: dict, actor: str, source: str, report: FileReport,
                 progress: Callable[[], None]):
    """(session, created) of open_session, in one transaction with the first chunk the with-block stores:
    a session whose first chunk is refused is not created at all. Once it commits, the report counts the
    session."""
    with transaction.atomic():
        session, created = open_session(project, key, fields, actor, source)
        yield session, created
    report.sessions_created += created
    report.keys.append(key)
    _between_chunks(progress)


def show(sessions: list[Session], actor: str = "import") -> None:
    """Show the sessions an import has stored whole (those it resumed were never hidden), then apply the
    rule of every write to each (append.compact_after_write): an imported session over its max_tokens with
    automatic compaction on gets a run, as an application's append would."""
    Session.objects.filter(pk__in=[s.pk for s in sessions], being_imported=True).update(being_imported=False)
    for session in Session.objects.filter(pk__in=[s.pk for s in sessions]):
        compact_after_write(session, actor)


def check_targets(project: Project, keys: list[str], source: str) -> None:
    """Refuse a file before anything of it is stored when one of its sessions exists and is not one this
    import may write to (session_store.check_import_target)."""
    for session in Session.objects.filter(project=project, key__in=keys):
        check_import_target(session, source)


class _Appender:
    """Appends one session's messages a chunk per transaction (_chunks), remembering each message's seq."""

    def __init__(self, project: Project, imported: ImportedSession, actor: str, report: FileReport, source: str,
                 progress: Callable[[], None]):
        self.project, self.imported, self.actor, self.report = project, imported, actor, report
        self.source, self.progress = source, progress
        self.seqs: list[int | None] = []

    def chunk(self, end: int) -> None:
        """Store the next chunk of the messages before `end`, in one transaction."""
        messages, start = self.imported.messages, len(self.seqs)
        following = (messages[index] for index in range(start, end))
        if chunk := next(_chunks(following, chunk_size()), None):
            self.seqs += append_chunk(self.project, self.imported.key, chunk, self.actor, self.report,
                                      lambda index: start + index, source=self.source)

    def up_to(self, end: int) -> None:
        while len(self.seqs) < end:
            self.chunk(end)
            _between_chunks(self.progress)


def _checkpoints(imported: ImportedSession) -> list[ImportedCheckpoint]:
    """The session's checkpoints in the order they were made, each checked to fit its messages."""
    total = len(imported.messages)
    for checkpoint in imported.checkpoints:
        at = checkpoint.at or checkpoint.last
        if not 1 <= checkpoint.last <= at <= total:
            raise TranscriptError(
                f"session {imported.key}: a checkpoint covering {checkpoint.last} message(s), made after "
                f"{at}, does not fit its {total} message(s)"
            )
    return sorted(imported.checkpoints, key=lambda c: (c.at or c.last, c.last))


def store_session(project: Project, imported: ImportedSession, actor: str, report: FileReport, source: str,
                  progress: Callable[[], None] = _nothing, *, show_it: bool = True) -> Session:
    """Store a session read whole as store_streamed stores a streamed one: created hidden, its messages a
    chunk per transaction (`progress()` after each), each checkpoint once the messages before it are stored
    (so its figures are those of that moment), then its dates and links; shown at the end unless `show_it`
    is false (a file read whole shows its sessions once they are all stored). A session is created in the
    transaction of its first chunk, so one whose first chunk is refused is not created at all."""
    checkpoints = _checkpoints(imported)
    first_end = (checkpoints[0].at or checkpoints[0].last) if checkpoints else len(imported.messages)
    started, last_active = _dates(imported)
    stored_before = report.messages
    appender = _Appender(project, imported, actor, report, source, progress)
    fields = _session_fields(project, imported)
    with _first_chunk(project, imported.key, fields, actor, source, report, progress) as (session, created):
        if created and started:
            Session.objects.filter(pk=session.pk).update(created_at=started)
        appender.chunk(first_end)
    new = session.being_imported  # made by this import, or by a run of it that was stopped
    active_before = session.last_activity_at
    for checkpoint in checkpoints:
        at = checkpoint.at or checkpoint.last
        appender.up_to(at)
        try:
            _, made = create_imported_checkpoint(
                session, appender.seqs[checkpoint.last - 1], checkpoint.summary, actor,
                created_at_seq=appender.seqs[at - 1], summarizer=checkpoint.summarizer,
                trigger=checkpoint.trigger, created_at=_datetime(checkpoint.created_at),
            )
        except DomainError as exc:
            raise DomainError(f"session {imported.key}: {exc.detail}", code=exc.code) from exc
        report.checkpoints += made
    appender.up_to(len(imported.messages))
    if last_active and report.messages > stored_before:
        latest = last_active if new else max(last_active, active_before)
        Session.objects.filter(pk=session.pk).update(last_activity_at=latest)
    link_relatives(project, imported, actor)
    if show_it:
        show([session], actor)
    return session


Progress = Callable[[FileReport, int, int], None]  # (report so far, bytes checked, bytes stored)


def _failed(name: str, fmt: str, exc: Exception) -> FileReport:
    """The report of a file that failed, saying why, and whether running it again may help: not when the
    file is at fault (it would fail the same way), only when the run was (an unexpected error)."""
    if isinstance(exc, TranscriptError | DomainError):
        reason = exc.detail if isinstance(exc, DomainError) else str(exc)
    elif isinstance(exc, ijson.JSONError):
        reason = f"not valid JSON: {exc}"
    elif isinstance(exc, UnicodeDecodeError):
        reason = f"not UTF-8 text: {exc}"
    else:  # one odd file must not stop the others; the trace goes to the log
        logger.error("importing %s failed", name, exc_info=exc)
        return FileReport(name, fmt, error=f"unexpected error ({type(exc).__name__}: {exc})", retry_helps=True)
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
    """Import one transcript file's content, read whole: parsed and checked first, storing nothing (a file
    that is not a transcript of its format, or that holds a session this import may not write to, fails
    here), then stored a chunk per transaction, its sessions hidden until the whole file is stored (see the
    module's doc). Never raises for a bad file: the report says why, and counts what was stored (hidden)
    before a failure."""
    report = FileReport(name)
    size, source = len(data), source_of(name)
    try:
        parsed = parse_transcript(name, data, fmt, key_prefix)
        report.format = parsed.format
        requests = parsed.requests is not None
        total = len(parsed.requests) if requests else sum(len(s.messages) for s in parsed.sessions)

        def progress():
            if on_progress:  # the share of the file stored, by its requests or messages
                done = report.requests + report.requests_duplicate if requests else report.messages + report.duplicates
                on_progress(report, size, min(size, size * done // max(total, 1)))

        if requests:
            store_requests(project, parsed.requests, actor, report, parsed.request_lines, source=source,
                           provenance={"file": name, "format": parsed.format}, metadata=parsed.request_metadata,
                           progress=progress)
        else:
            check_targets(project, [imported.key for imported in parsed.sessions], source)
            for imported in parsed.sessions:
                _checkpoints(imported)
            show([store_session(project, imported, actor, report, source, progress, show_it=False)
                  for imported in parsed.sessions], actor)
            report.entries_skipped = parsed.skipped
    except Exception as exc:  # what was stored before the failure stays hidden, and the report counts it
        failed = _failed(name, report.format, exc)
        report.error, report.retry_helps = failed.error, failed.retry_helps
        return report
    if on_progress:
        on_progress(report, size, size)
    return report


def _name_line(reason: str, lines: dict[str, int]) -> str:
    """record_requests names a refused request by its external id: name its line instead."""
    head, _, detail = reason.partition(": ")
    number = lines.get(head.removeprefix("request "))
    return f"line {number}: {detail}" if number is not None else reason


def _refused(captured: list[CapturedRequest]) -> list[str]:
    """What record_requests would refuse of the requests (a bad session key, messages that are not valid
    OpenAI messages), in its words, found before anything is stored: a file with a bad request stores
    nothing. The same checks it makes (`parse_captured`): 0.4 s of the 2.2 s a log of 150 requests (11 MB,
    22,650 messages carried) took to import."""
    refused = []
    for request in captured:
        try:
            check_key(request.conversation)
            parse_captured(request)
        except DomainError as exc:
            refused.append(f"request {request.external_id}: {exc}")
    return refused


def _request_groups(captured: list[CapturedRequest]):
    """The requests, in time order, in groups bounded as chunks are: the messages they carry (sent,
    received, stored after) up to CTXWEB_IMPORT_CHUNK_MESSAGES and CTXWEB_IMPORT_CHUNK_BYTES. A request
    over a bound is a group of its own."""
    most = settings.CTXWEB_IMPORT_CHUNK_BYTES
    group, carried, weight = [], 0, 0
    # record_requests orders each conversation's requests so: across groups, each goes on from the last.
    for request in sorted(captured, key=lambda r: (r.started_at, r.external_id)):
        count, size_of = message_count(request), message_bytes([request.messages, request.response, request.after])
        if group and (carried + count > settings.CTXWEB_IMPORT_CHUNK_MESSAGES or weight + size_of > most):
            yield group
            group, carried, weight = [], 0, 0
        group.append(request)
        carried, weight = carried + count, weight + size_of
    if group:
        yield group


def store_requests(project: Project, captured: list, actor: str, report: FileReport,
                   request_lines: list[int] | None = None, *, source: str, provenance: dict,
                   metadata: dict | None = None, progress: Callable[[], None] = _nothing) -> None:
    """Store a file's recorded requests (a request log, a trajectory's steps) through record_requests, as
    an import of `source`, counting the sessions it touched (each thread too) and the messages their raw
    logs gained. Checked first, storing nothing: a request record_requests would refuse, or a conversation
    this import may not write to, fails the file. Then recorded a bounded group of requests per call and
    per transaction (_request_groups; `progress()` after each); the sessions it creates are hidden from the
    transaction that creates them until the last group is stored, so a failure leaves nothing to see and
    running the import again completes them. Each session the file made says so in its metadata, as every
    imported session does (`imported_from`, with the file's own fields for that conversation,
    `metadata[key]`, on each of its threads)."""
    keys = list(dict.fromkeys(c.conversation for c in captured))
    known = Session.objects.filter(project=project).filter(Q(key__in=keys) | Q(metadata__thread_of__in=keys))
    check_targets(project, keys, source)
    lines = {c.external_id: number for c, number in zip(captured, request_lines or (), strict=False)}
    if refused := _refused(captured):  # a file that fails stores nothing: name its bad lines
        raise TranscriptError("; ".join(_name_line(reason, lines) for reason in refused[:5])
                              + (f" (and {len(refused) - 5} more)" if len(refused) > 5 else ""))
    found = list(known.values_list("key", "message_count", "being_imported"))
    before = {key: count for key, count, _ in found}
    shown = [key for key, _, hidden in found if not hidden]
    touched = []
    for group in _request_groups(captured):
        with transaction.atomic():
            # A file is bounded by the upload and import limits, not by an export's (CTXWEB_MAX_CAPTURE_MESSAGES).
            result = record_requests(project, group, actor, import_source=source, max_messages=None)
            if result.rejected:  # checked above; should record_requests refuse more, this group stores nothing
                raise TranscriptError("; ".join(_name_line(reason, lines) for reason in result.rejected[:5]))
            made = Session.objects.filter(project=project, key__in=result.sessions, import_source=source)
            made.exclude(key__in=shown).update(being_imported=True)
            for session in made:
                conversation = (session.metadata or {}).get("thread_of") or session.key
                wanted = {**(metadata or {}).get(conversation, {}), **(session.metadata or {}),
                          "imported_from": provenance}
                if wanted != session.metadata:
                    update_session(project, session.key, {"metadata": wanted}, actor, import_source=source)
        touched += result.sessions
        report.requests += result.stored
        report.requests_duplicate += result.duplicates
        _between_chunks(progress)
    Session.objects.filter(project=project, import_source=source, being_imported=True).filter(
        Q(key__in=keys) | Q(metadata__thread_of__in=keys)).update(being_imported=False)
    touched = list(dict.fromkeys(touched))
    after = dict(Session.objects.filter(project=project, key__in=touched).values_list("key", "message_count"))
    # Every session the file records requests of, as for other imports run again.
    report.keys = list(dict.fromkeys([*touched, *(k for k in before if k not in touched)]))
    report.sessions_created = sum(1 for key in touched if key not in before)
    report.messages = sum(count - before.get(key, 0) for key, count in after.items())


def store_streamed(project: Project, streamed: StreamedConversation, instructions: str | None, actor: str,
                   report: FileReport, progress: Callable[[], None], source: str) -> None:
    """Store a conversation read as a stream, a chunk per transaction (client ids make a re-run complete
    what a stopped one began). A session it creates is hidden (Session.being_imported) until every chunk
    is stored, so a stopped import leaves nothing of it to see, and the re-run shows it whole; it is created
    in the transaction of its first chunk (one whose first chunk is refused is not created). Its
    instructions, found by the check, are set first. As store_session does: its links and dates, and each
    checkpoint among the messages made once the messages before it are stored."""
    imported = ImportedSession(streamed.key, metadata=streamed.metadata, family=streamed.family)
    fields = {"title": streamed.title, "metadata": with_links(project, imported), "instructions": instructions}
    stored_before = report.messages
    count, last_seq, first, last = 0, None, None, None

    def store(piece) -> None:
        nonlocal count, last_seq, first, last
        if isinstance(piece, ImportedCheckpoint):
            _store_checkpoint(session, piece, count, last_seq, actor, report)
            return
        last_seq = append_chunk(project, streamed.key, piece, actor, report, source=source)[-1]
        count += len(piece)
        for item in piece:
            if isinstance(item, dict) and (stamp := _datetime(item.get("created_at"))):
                first, last = min(first or stamp, stamp), max(last or stamp, stamp)

    pieces = _chunks(streamed.messages, chunk_size())
    fields = {k: v for k, v in fields.items() if v is not None}
    with _first_chunk(project, streamed.key, fields, actor, source, report, progress) as (session, created):
        if (piece := next(pieces, None)) is not None:
            store(piece)
    new = session.being_imported  # made by this import, or by a run of it that was stopped
    active_before = session.last_activity_at
    for piece in pieces:
        store(piece)
        _between_chunks(progress)
    if new and first:
        Session.objects.filter(pk=session.pk).update(created_at=first)
    if last and report.messages > stored_before:
        Session.objects.filter(pk=session.pk).update(last_activity_at=last if new else max(last, active_before))
    link_relatives(project, imported, actor)
    show([session], actor)


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


def _check(stream: StreamedFile, file, on_progress: Progress | None, report: FileReport) -> list[str | None]:
    """Read the whole file once, storing nothing: a file that is not a transcript of its format fails
    here, before anything is stored. Returns the instructions of its streamed conversations."""
    last = time.monotonic()
    instructions = []
    for session in stream.sessions(file):
        if not isinstance(session, StreamedConversation):
            continue
        for _ in session.messages:
            if time.monotonic() - last > PROGRESS_EVERY:
                leases.pulse()
                if on_progress:
                    on_progress(report, stream.position(file), 0)
                last = time.monotonic()
        instructions.append(session.instructions)
    return instructions


def import_stream(project: Project, stream: StreamedFile, file, name: str, *, actor: str = "import",
                  on_progress: Progress | None = None) -> FileReport:
    """Import a file read as a stream: checked whole first (a bad file stores nothing), then stored session
    by session, a chunk of messages per transaction, so other writers wait at most for one chunk. Each
    session is shown once its last chunk is stored."""
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
                store_session(project, session, actor, report, source_of(name), progress)
    except Exception as exc:  # what was stored before the failure stays, and the report counts it
        failed = _failed(name, report.format, exc)
        report.error, report.retry_helps = failed.error, failed.retry_helps
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
