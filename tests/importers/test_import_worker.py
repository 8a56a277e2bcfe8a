"""Import jobs on the real worker (tests/workers.py): a job whose worker is SIGKILLed midway is put back
in the queue when its lease passes and completed by the next worker; the conversation it was storing
stays hidden until then, and nothing is stored twice. A job that keeps losing its worker fails, saying
so, after CTXWEB_IMPORT_MAX_ATTEMPTS attempts."""

import time
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from sessions.ingest.import_jobs import create_job, sweep_import_jobs
from sessions.ingest.importers import runner
from sessions.models import ImportJob, Message, Session
from tests.importers.test_import_streaming import conversation_lines
from tests.workers import kill, start_worker, wait_until, worker


@pytest.fixture
def short_lease(settings, tmp_path):
    settings.CTXWEB_COMPACTION_LEASE_SECONDS = 0.5
    settings.CTXWEB_COMPACTION_SWEEP_INTERVAL = 0.1
    settings.CTXWEB_IMPORT_DIR = tmp_path / "imports"
    settings.CTXWEB_IMPORT_STREAM_ABOVE = 0
    settings.CTXWEB_IMPORT_CHUNK_MESSAGES = 50


@pytest.mark.real_queue
@pytest.mark.django_db(transaction=True)
def test_an_import_cut_off_by_a_killed_worker_is_completed_by_the_next_one(project, monkeypatch, short_lease):
    original = runner.append_chunk

    def slowly(*args, **kwargs):
        time.sleep(0.2)
        return original(*args, **kwargs)

    monkeypatch.setattr(runner, "append_chunk", slowly)  # the first worker is slow, so it is killed midway
    job = create_job(project, None, SimpleUploadedFile("talk.jsonl", conversation_lines(2001)))
    first = start_worker()
    try:
        part = wait_until(lambda: Session.objects.filter(key="talk", message_count__gte=100).first(), seconds=20)
    finally:
        kill(first)
    assert part.being_imported and part.message_count < 2001
    assert ImportJob.objects.get(pk=job.pk).state == "running"

    monkeypatch.setattr(runner, "append_chunk", original)  # the next worker is forked with the real one
    with worker():
        wait_until(lambda: ImportJob.objects.get(pk=job.pk).state == "completed", seconds=30)

    job.refresh_from_db()
    assert job.attempts == 2 and job.lease_expires_at is None
    session = Session.objects.get(key="talk")
    assert session.message_count == 2001 and not session.being_imported
    seqs = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 2002))


@pytest.mark.django_db
def test_a_job_that_keeps_losing_its_worker_fails_saying_so(project, settings, short_lease,
                                                          django_capture_on_commit_callbacks):
    settings.CTXWEB_IMPORT_MAX_ATTEMPTS = 2
    job = create_job(project, None, SimpleUploadedFile("talk.jsonl", conversation_lines(5)))
    gone = timezone.now() - timedelta(seconds=5)

    ImportJob.objects.filter(pk=job.pk).update(state="running", attempts=1, lease_expires_at=gone)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        assert sweep_import_jobs() == 1
    job.refresh_from_db()
    assert job.state == "queued" and len(queued) == 1
    assert job.error == "interrupted: the worker stopped during attempt 1 (its lease expired); queued again"

    ImportJob.objects.filter(pk=job.pk).update(state="running", attempts=2, lease_expires_at=gone)
    assert sweep_import_jobs() == 1
    job.refresh_from_db()
    assert job.state == "failed" and job.finished_at is not None
    assert "gave up after 2 attempts (Run again to try once more)" in job.error

    assert sweep_import_jobs() == 0  # a job whose lease has not passed, or that is done, is left alone
