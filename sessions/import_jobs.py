"""Dashboard imports as jobs: an upload is stored in CTXWEB_IMPORT_DIR, recorded as an ImportJob and
imported by the task worker (`manage.py db_worker`) through the same streaming path as
`manage.py import_transcripts` (sessions.importers.import_path). The job's counters are its progress
while it runs and its result when it is done."""

import logging
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from django.db import transaction
from django.utils import timezone
from django_tasks import task

from .importers import FileReport, import_path
from .models import ImportJob, Project

SHOWN_KEYS = 50
PROGRESS_EVERY = 0.5  # seconds between progress writes
logger = logging.getLogger("ctxweb.import")


def storage() -> FileSystemStorage:
    return FileSystemStorage(location=settings.CTXWEB_IMPORT_DIR)


def create_job(project: Project, user, upload, fmt: str = "auto", key_prefix: str = "") -> ImportJob:
    """Store an uploaded file and queue its import (enqueued when the transaction commits, so the worker
    finds the job)."""
    # The stored name is ours: the file's own name (kept on the job) may be anything a browser sends.
    stored = storage().save(f"{project.name}/{uuid.uuid4().hex}.upload", upload)
    job = ImportJob.objects.create(project=project, user=user, file_name=upload.name[:300], stored_name=stored,
                                   size=upload.size or 0, format=fmt, key_prefix=key_prefix)
    transaction.on_commit(lambda: run_import_job.enqueue(job.pk))
    return job


def retry_job(job: ImportJob) -> None:
    """Queue a failed job again: what it stored is kept, and client ids make the re-run complete it."""
    ImportJob.objects.filter(pk=job.pk).update(state=ImportJob.State.QUEUED, error="", finished_at=None)
    transaction.on_commit(lambda: run_import_job.enqueue(job.pk))


def _save_report(job: ImportJob, report: FileReport, **fields) -> None:
    counters = {name: getattr(report, name) for name in (
        "sessions", "sessions_created", "messages", "duplicates", "tool_calls", "tool_results", "checkpoints",
        "entries_skipped")}
    ImportJob.objects.filter(pk=job.pk).update(
        detected_format=report.format, keys=report.keys[:SHOWN_KEYS], **counters, **fields)


@task()
def run_import_job(job_id: int) -> str:
    job = ImportJob.objects.select_related("project", "user").filter(pk=job_id).first()
    if job is None or job.state == ImportJob.State.COMPLETED:
        return "nothing to do"
    return run_job(job)


def run_job(job: ImportJob) -> str:
    path = Path(storage().path(job.stored_name)) if job.stored_name else None
    ImportJob.objects.filter(pk=job.pk).update(state=ImportJob.State.RUNNING, started_at=timezone.now(),
                                               bytes_read=0)
    last = 0.0

    def on_progress(report: FileReport, checked: int, stored: int) -> None:
        nonlocal last
        if time.monotonic() - last >= PROGRESS_EVERY:
            last = time.monotonic()
            _save_report(job, report, bytes_read=(checked + stored) // 2)

    actor = f"user:{job.user.username}" if job.user else "import"
    if path is None or not path.exists():
        report = FileReport(job.file_name, error="the uploaded file is no longer stored; upload it again")
    else:
        report = import_path(job.project, path, name=job.file_name, fmt=job.format, key_prefix=job.key_prefix,
                             actor=actor, on_progress=on_progress)
    state = ImportJob.State.FAILED if report.error else ImportJob.State.COMPLETED
    _save_report(job, report, state=state, error=report.error or "", finished_at=timezone.now(),
                 bytes_read=job.size if not report.error else ImportJob.objects.get(pk=job.pk).bytes_read)
    if not report.error and path is not None:
        storage().delete(job.stored_name)
        ImportJob.objects.filter(pk=job.pk).update(stored_name="")
    return state
