"""A failed import offers "Run again" only where running again can help (issue 39, item 9): not for a
file that can never succeed (not JSON, not UTF-8, empty, another format), whose page says so; a wrong
format names the one detection would pick. An import cut off by its worker still offers it."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from sessions.ingest.import_jobs import create_job, sweep_import_jobs
from sessions.models import ImportJob, Membership
from tests.importers.conftest import client_for

CLAUDE_CODE_LOG = b"".join(json.dumps(entry).encode() + b"\n" for entry in [
    {"type": "user", "sessionId": "s1", "uuid": "u1", "timestamp": "2026-01-01T10:00:00Z",
     "message": {"role": "user", "content": "Fix the failing test"}},
    {"type": "assistant", "sessionId": "s1", "uuid": "a1", "parentUuid": "u1", "timestamp": "2026-01-01T10:00:05Z",
     "message": {"role": "assistant", "content": [{"type": "text", "text": "Looking at it."}]}},
])


@pytest.fixture
def editor(project):
    return client_for(project, Membership.Role.EDITOR, "editor")


def run(project, name: str, data: bytes, fmt: str = "auto") -> ImportJob:
    job = create_job(project, None, SimpleUploadedFile(name, data), fmt=fmt)
    return ImportJob.objects.get(pk=job.pk)


def page(client, job) -> str:
    return client.get(reverse("import_job", args=[job.pk])).content.decode()


@pytest.mark.parametrize("name, data", [
    ("notes.json", b"this is not JSON {"),
    ("latin1.json", '[{"role": "user", "content": "caf\u00e9"}]'.encode("latin-1")),
    ("empty.json", b""),
    ("numbers.json", b"[1, 2, 3]"),
])
def test_a_file_that_can_never_succeed_offers_no_run_again(project, editor, import_dir,
                                                           django_capture_on_commit_callbacks, name, data):
    with django_capture_on_commit_callbacks(execute=True):
        job = run(project, name, data)
    job.refresh_from_db()
    assert job.state == "failed" and job.error
    assert job.retry_helps is False
    text = page(editor, job)
    assert "Run again</button>" not in text
    assert "would fail the same way" in text
    response = editor.post(reverse("import_job_retry", args=[job.pk]), follow=True)
    assert ImportJob.objects.get(pk=job.pk).state == "failed"  # not queued again
    assert "would fail the same way" in response.content.decode()


def test_a_wrong_format_names_the_one_detection_picks(project, editor, import_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        job = run(project, "session.jsonl", CLAUDE_CODE_LOG, fmt="openai")
    job.refresh_from_db()
    assert job.state == "failed" and job.retry_helps is False
    assert "looks like claude-code" in job.error, job.error
    assert "import it as claude-code" in page(editor, job)


def test_an_import_cut_off_by_its_worker_still_offers_run_again(project, editor, import_dir, settings):
    settings.CTXWEB_IMPORT_MAX_ATTEMPTS = 1
    job = run(project, "chat.json", json.dumps([{"role": "user", "content": "Hi"}]).encode())
    ImportJob.objects.filter(pk=job.pk).update(state="running", attempts=1, lease_expires_at="2000-01-01T00:00:00Z",
                                               retry_helps=False)
    assert sweep_import_jobs() == 1
    job.refresh_from_db()
    assert job.state == "failed" and job.retry_helps is True
    assert "Run again</button>" in page(editor, job)
