"""The dashboard's import page: editors upload transcripts, each file becomes an import job run by the
task worker, and its page shows the result; viewers may not (403); people outside the project do not
learn it exists (404). Uploads have their own size limit (CTXWEB_MAX_IMPORT_BYTES), not the API's."""

import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from sessions.models import SESSION_KEY_RE, ImportJob, Membership, Session
from tests.importers.conftest import HOST, client_for, counts, long_name

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"
CLAUDE = DATA / "claude-code" / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
SWE_AGENT = DATA / "swe-agent" / "function_calling_simple.traj"
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <b>there</b>"},
        {"role": "assistant", "content": "Hello."}]


@pytest.fixture
def editor(project):
    return client_for(project, Membership.Role.EDITOR, "editor")


@pytest.fixture
def viewer(project):
    return client_for(project, Membership.Role.VIEWER, "viewer")


@pytest.fixture
def outsider(project, other_project):
    return client_for(other_project, Membership.Role.EDITOR, "outsider")


@pytest.fixture
def upload(django_capture_on_commit_callbacks, immediate_tasks):
    """upload(client, *files, **fields): post the form; the jobs it queues run when it commits."""

    def _upload(client, *files, project="default", follow=True, **fields):
        with django_capture_on_commit_callbacks(execute=True):
            posted = client.post(reverse("import"), {"project": project, "files": list(files), **fields})
        if not follow or posted.status_code != 302:
            return posted
        response = client.get(posted["Location"], follow=True)
        response.posted = posted
        return response

    return _upload


def chat_file(name="chat.json"):
    return SimpleUploadedFile(name, json.dumps(CHAT).encode(), content_type="application/json")


def test_an_editor_sees_the_form(editor):
    response = editor.get(reverse("import"))

    assert response.status_code == 200
    assert b'enctype="multipart/form-data"' in response.content
    assert b">default</option>" in response.content
    assert b"up to 512.0\xc2\xa0MB" in response.content


def test_an_upload_becomes_a_job_whose_page_shows_the_result(editor, project, upload):
    response = upload(editor, chat_file())

    job = ImportJob.objects.get()
    assert response.posted["Location"] == reverse("import_job", args=[job.pk])
    text = response.content.decode()
    assert "completed" in text and "Imported." in text
    assert job.state == "completed" and job.detected_format == "openai"
    assert (job.sessions, job.sessions_created, job.messages) == (1, 1, 3)
    assert reverse("session", args=["default", "chat"]) in text
    chat = Session.objects.get(project=project, key="chat")
    assert chat.instructions == "Be brief." and chat.message_count == 3
    assert chat.events.first().actor == "user:editor"


def test_several_files_become_several_jobs_listed_on_the_import_page(editor, project, upload):
    claude = SimpleUploadedFile(CLAUDE.name, CLAUDE.read_bytes())

    response = upload(editor, chat_file(), claude)

    text = response.content.decode()
    assert "2 files are queued for import." in text
    assert text.count('<span class="badge in">completed</span>') == 2
    assert sum(ImportJob.objects.values_list("messages", flat=True)) == 48
    assert counts(project)["sessions"] == 4


def test_the_form_accepts_swe_agent_trajectories(editor, project, upload):
    assert b".traj" in editor.get(reverse("import")).content

    upload(editor, SimpleUploadedFile(SWE_AGENT.name, SWE_AGENT.read_bytes()))

    job = ImportJob.objects.get()
    assert (job.detected_format, job.sessions, job.messages) == ("swe-agent", 1, 12)
    assert Session.objects.get(project=project, key="function_calling_simple").metadata["imported_from"] == {
        "file": SWE_AGENT.name, "format": "swe-agent"}


def test_a_file_name_of_250_characters_uploads(editor, project, upload):
    name = long_name("")

    response = upload(editor, SimpleUploadedFile(name, json.dumps(CHAT).encode()))

    session = Session.objects.get(project=project)
    assert re.fullmatch(SESSION_KEY_RE, session.key) and session.key.startswith(name[:100])
    assert reverse("session", args=["default", session.key]) in response.content.decode()
    assert ImportJob.objects.get().file_name == name


def test_uploading_again_stores_nothing(editor, project, upload):
    upload(editor, chat_file())
    before = counts(project)

    upload(editor, chat_file())

    again = ImportJob.objects.latest("pk")
    assert (again.messages, again.duplicates) == (0, 3)
    assert counts(project) == before


def test_a_broken_file_gives_a_failed_job_in_plain_words_and_the_others_import(editor, project, upload):
    broken = SimpleUploadedFile("broken.json", b"[{")

    response = upload(editor, broken, chat_file(), session_key_prefix="up:")

    assert response.status_code == 200
    failed = ImportJob.objects.get(file_name="broken.json")
    assert failed.state == "failed" and "not valid JSON" in failed.error
    page = editor.get(reverse("import_job", args=[failed.pk])).content.decode()
    assert "The import failed: not valid JSON" in page
    assert Session.objects.filter(project=project).get().key == "up:chat"


def test_without_files_it_says_so(editor, upload):
    response = upload(editor)

    assert "Choose at least one transcript file." in response.content.decode()
    assert not ImportJob.objects.exists()


def test_a_viewer_gets_403_and_nothing_is_stored(viewer, project, upload):
    assert upload(viewer, chat_file()).status_code == 403
    assert viewer.get(reverse("import")).status_code == 403
    assert viewer.get(reverse("import"), {"project": "default"}).status_code == 403
    assert counts(project)["sessions"] == 0
    assert not ImportJob.objects.exists()


def test_an_outsider_gets_404(outsider, project, upload):
    assert upload(outsider, chat_file()).status_code == 404
    assert outsider.get(reverse("import"), {"project": "default"}).status_code == 404
    assert counts(project)["sessions"] == 0


def test_someone_in_no_project_gets_404(project):
    nobody = client_for(project, None, "nobody")

    assert nobody.get(reverse("import")).status_code == 404


def test_logging_in_is_required(db):
    response = Client(HTTP_HOST=HOST).get(reverse("import"))

    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


class Unreadable:
    """A request body that fails the test if anything reads it."""

    def read(self, *args):
        raise AssertionError("the body was read")

    readline = read


def test_an_upload_over_the_limit_gets_413_before_the_body_is_read(editor, settings, import_dir):
    settings.CTXWEB_MAX_IMPORT_BYTES = 1000

    response = editor.generic("POST", reverse("import"), b"", "multipart/form-data; boundary=x",
                              CONTENT_LENGTH=str(10**9), **{"wsgi.input": Unreadable()})

    assert response.status_code == 413
    assert "import limit of 1,000 bytes" in response.content.decode()
    assert not ImportJob.objects.exists()


def test_files_larger_than_the_limit_are_stopped_while_they_stream_in(editor, settings, upload):
    settings.CTXWEB_MAX_IMPORT_BYTES = 1000

    response = upload(editor, SimpleUploadedFile("big.json", b" " * 1001 + json.dumps(CHAT).encode()), follow=False)

    assert response.status_code == 413
    assert not ImportJob.objects.exists() and not Session.objects.exists()


def test_the_import_limit_not_the_api_limit_governs_uploads(editor, settings, upload):
    settings.CTXWEB_MAX_REQUEST_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 50  # the upload goes to a temporary file on its way
    padded = SimpleUploadedFile("padded.json", b" " * 5000 + json.dumps(CHAT).encode())

    upload(editor, padded)

    job = ImportJob.objects.get()
    assert (job.state, job.size, job.messages) == ("completed", 5000 + len(json.dumps(CHAT)), 3)
    assert job.stored_name == ""  # the stored upload is removed once imported
