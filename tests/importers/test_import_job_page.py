"""An import job's page: it says what the job is waiting for, shows its progress while the worker runs it
(htmx polls the fragment until the job is done), then the result; only members who may import see it."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from sessions.ingest.import_jobs import create_job
from sessions.models import ImportJob, Membership, Session
from tests.importers.conftest import client_for

CHAT = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]


@pytest.fixture
def editor(project):
    return client_for(project, Membership.Role.EDITOR, "editor")


@pytest.fixture
def queued(project, editor, import_dir, django_capture_on_commit_callbacks):
    """A job queued on the database backend, as the dashboard leaves it for the worker."""
    with django_capture_on_commit_callbacks(execute=True):
        job = create_job(project, None, SimpleUploadedFile("chat.json", json.dumps(CHAT).encode()))
    return job


def page(client, job, htmx=False):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return client.get(reverse("import_job", args=[job.pk]), **headers)


@pytest.mark.real_queue  # the job waits in the database queue for db_worker
def test_a_queued_job_says_it_waits_for_the_worker_and_polls(editor, queued):
    response = page(editor, queued)

    text = response.content.decode()
    assert response.status_code == 200
    assert "Waiting for the worker to start this import." in text
    assert 'hx-trigger="every 1s"' in text and "<!doctype html>" in text


def test_the_fragment_alone_answers_htmx(editor, queued):
    text = page(editor, queued, htmx=True).content.decode()

    assert text.lstrip().startswith('<section id="import-job"') and "<!doctype" not in text


def test_a_running_job_shows_how_far_it_is(editor, queued):
    ImportJob.objects.filter(pk=queued.pk).update(state="running", size=200, bytes_read=100, messages=7)

    text = page(editor, queued, htmx=True).content.decode()

    assert "Importing: 50% of the file read." in text
    assert 'value="50"' in text and '<td data-label="Messages stored">7</td>' in text
    assert 'hx-trigger="every 1s"' in text


@pytest.mark.real_queue
@pytest.mark.django_db(transaction=True)  # the worker closes a connection left in a transaction (PostgreSQL)
def test_the_worker_runs_the_job_and_the_page_shows_the_result_without_polling(editor, queued, project):
    call_command("db_worker", "--batch", "--no-reload", "--no-startup-delay")

    text = page(editor, queued, htmx=True).content.decode()
    assert "Imported." in text and "hx-trigger" not in text
    assert reverse("session", args=["default", "chat"]) in text
    assert Session.objects.get(project=project, key="chat").message_count == 2
    job = ImportJob.objects.get(pk=queued.pk)
    assert (job.state, job.messages, job.bytes_read) == ("completed", 2, job.size)
    assert job.started_at and job.finished_at


def test_a_viewer_may_not_see_a_job_and_an_outsider_learns_nothing(project, other_project, queued):
    viewer = client_for(project, Membership.Role.VIEWER, "viewer")
    outsider = client_for(other_project, Membership.Role.ADMIN, "outsider")

    assert page(viewer, queued).status_code == 403
    assert page(outsider, queued).status_code == 404
    assert viewer.post(reverse("import_job_retry", args=[queued.pk])).status_code == 403


def test_a_file_name_and_an_error_from_the_file_are_shown_as_text(editor, project, import_dir):
    name = "<script>alert(1)</script>.json"
    job = ImportJob.objects.create(project=project, file_name=name, state="failed",
                                   error="line 1: role '<img src=x onerror=alert(1)>' is not a role")

    text = page(editor, job).content.decode()

    assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;.json" in text
    assert "<img src=x" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
