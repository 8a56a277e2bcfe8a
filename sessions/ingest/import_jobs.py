"""Dashboard imports as jobs: an upload is stored in CTXWEB_IMPORT_DIR, recorded as an ImportJob and
imported by the task worker (`manage.py db_worker`) through the same streaming path as
`manage.py import_transcripts` (sessions.ingest.importers.import_path). The job's counters are its progress
while it runs and its result when it is done.

Progress is a small UPDATE of the job's row made between two chunks of the import (the runner calls
`on_progress` only outside the transaction storing a chunk): written inside one, it would be seen only
once that transaction commits, and the row lock it takes would hold up the heartbeat renewing the job's
lease from another connection until then (tests/importers/test_import_chunks.py)."""

import logging
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from django.db import transaction
from django.utils import timezone
from django_tasks import task

from sessions.context.compaction_runs import Heartbeat, lease
from sessions.ingest.importers import FileReport, import_path
from sessions.models import ImportJob, Project

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
    ImportJob.objects.filter(pk=job.pk).update(state=ImportJob.State.QUEUED, error="", finished_at=None,
                                               attempts=0, retry_helps=True)
    transaction.on_commit(lambda: run_import_job.enqueue(job.pk))


def claim(job_id: int) -> ImportJob | None:
    """Move a queued job to running, as a new attempt with a lease; None when it is not this task's to do
    (done, running elsewhere, deleted)."""
    now = timezone.now()
    with transaction.atomic():
        job = ImportJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.state != ImportJob.State.QUEUED:
            return None
        job.state, job.attempts, job.started_at, job.lease_expires_at = ImportJob.State.RUNNING, job.attempts + 1, now, now + lease()
        job.save(update_fields=["state", "attempts", "started_at", "lease_expires_at"])
    return ImportJob.objects.select_related("project", "user").get(pk=job_id)


def sweep_import_jobs() -> int:
    """Put jobs whose worker is gone back in the queue: a running job whose lease has passed was cut off
    (its worker was killed). Running it again completes it (client ids; a session a streamed import was
    storing stays hidden until then), up to CTXWEB_IMPORT_MAX_ATTEMPTS attempts; after that it fails,
    saying why, and "Run again" on its page queues it anew. Returns how many jobs it acted on."""
    acted = 0
    expired = ImportJob.objects.filter(state=ImportJob.State.RUNNING, lease_expires_at__lt=timezone.now())
    for job_id in expired.values_list("pk", flat=True):
        with transaction.atomic():
            job = ImportJob.objects.select_for_update().filter(pk=job_id).first()
            if job is None or job.state != ImportJob.State.RUNNING or job.lease_expires_at >= timezone.now():
                continue
            cut_off = f"interrupted: the worker stopped during attempt {job.attempts} (its lease expired)"
            if job.attempts < settings.CTXWEB_IMPORT_MAX_ATTEMPTS:
                job.state, job.error = ImportJob.State.QUEUED, f"{cut_off}; queued again"
                transaction.on_commit(lambda pk=job.pk: run_import_job.enqueue(pk))
            else:
                job.state, job.finished_at = ImportJob.State.FAILED, timezone.now()
                job.error = f"{cut_off}; gave up after {job.attempts} attempts (Run again to try once more)"
            job.lease_expires_at, job.retry_helps = None, True  # the run was cut off, not the file at fault
            job.save(update_fields=["state", "error", "finished_at", "lease_expires_at", "retry_helps"])
            acted += 1
    return acted


def _save_report(job: ImportJob, report: FileReport, **fields) -> None:
    counters = {name: getattr(report, name) for name in (
        "sessions", "sessions_created", "messages", "duplicates", "tool_calls", "tool_results", "checkpoints",
        "entries_skipped")}
    ImportJob.objects.filter(pk=job.pk).update(
        detected_format=report.format, keys=report.keys[:SHOWN_KEYS], **counters, **fields)


@task()
def run_import_job(job_id: int) -> str:
    job = claim(job_id)
    if job is None:
        return "not claimed"
    return run_job(job)


def run_job(job: ImportJob) -> str:
    path = Path(storage().path(job.stored_name)) if job.stored_name else None
    ImportJob.objects.filter(pk=job.pk).update(state=ImportJob.State.RUNNING, started_at=timezone.now(),
                                               bytes_read=0, error="")
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
        this_attempt = ImportJob.objects.filter(pk=job.pk, state=ImportJob.State.RUNNING, attempts=job.attempts)
        with Heartbeat(this_attempt, f"import-job-{job.pk}"):
            report = import_path(job.project, path, name=job.file_name, fmt=job.format,
                                 key_prefix=job.key_prefix, actor=actor, on_progress=on_progress)
    state = ImportJob.State.FAILED if report.error else ImportJob.State.COMPLETED
    _save_report(job, report, state=state, error=report.error or "", finished_at=timezone.now(), lease_expires_at=None,
                 retry_helps=bool(report.error) and report.retry_helps,
                 bytes_read=job.size if not report.error else ImportJob.objects.get(pk=job.pk).bytes_read)
    if not report.error and path is not None:
        storage().delete(job.stored_name)
        ImportJob.objects.filter(pk=job.pk).update(stored_name="")
    return state
