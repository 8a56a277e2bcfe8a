"""The dashboard's import page: editors upload transcripts and see the summary; viewers may not
(403); people outside the project do not learn it exists (404)."""

import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from sessions.models import SESSION_KEY_RE, Membership, Session
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


def upload(client, *files, project="default", **fields):
    return client.post(reverse("import"), {"project": project, "files": list(files), **fields})


def chat_file(name="chat.json"):
    return SimpleUploadedFile(name, json.dumps(CHAT).encode(), content_type="application/json")


def test_an_editor_sees_the_form(editor):
    response = editor.get(reverse("import"))

    assert response.status_code == 200
    assert b'enctype="multipart/form-data"' in response.content
    assert b">default</option>" in response.content


def test_an_editor_uploads_files_and_sees_the_summary(editor, project):
    claude = SimpleUploadedFile(CLAUDE.name, CLAUDE.read_bytes())

    response = upload(editor, chat_file(), claude)

    assert response.status_code == 200
    text = response.content.decode()
    assert "Imported 2 of 2 file(s): 4 session(s) (4 new), 48 message(s) stored" in text
    assert "claude-code" in text and "openai" in text
    assert reverse("session", args=["default", "chat"]) in text
    chat = Session.objects.get(project=project, key="chat")
    assert chat.instructions == "Be brief." and chat.message_count == 3
    assert chat.events.first().actor == "user:editor"


def test_the_form_accepts_swe_agent_trajectories(editor, project):
    assert b".traj" in editor.get(reverse("import")).content

    response = upload(editor, SimpleUploadedFile(SWE_AGENT.name, SWE_AGENT.read_bytes()))

    assert "Imported 1 of 1 file(s): 1 session(s) (1 new), 12 message(s) stored" in response.content.decode()
    assert Session.objects.get(project=project, key="function_calling_simple").metadata["imported_from"] == {
        "file": SWE_AGENT.name, "format": "swe-agent"}


def test_a_file_name_of_250_characters_uploads(editor, project):
    name = long_name("")

    response = upload(editor, SimpleUploadedFile(name, json.dumps(CHAT).encode()))

    text = response.content.decode()
    assert "Imported 1 of 1 file(s): 1 session(s) (1 new), 3 message(s) stored" in text
    session = Session.objects.get(project=project)
    assert re.fullmatch(SESSION_KEY_RE, session.key) and session.key.startswith(name[:100])
    assert reverse("session", args=["default", session.key]) in text


def test_uploading_again_stores_nothing(editor, project):
    upload(editor, chat_file())
    before = counts(project)

    response = upload(editor, chat_file())

    assert "0 message(s) stored" in response.content.decode()
    assert "3 message(s) already stored" in response.content.decode()
    assert counts(project) == before


def test_a_broken_file_is_reported_and_the_others_import(editor, project):
    broken = SimpleUploadedFile("broken.json", b"[{")

    response = upload(editor, broken, chat_file(), session_key_prefix="up:")

    text = response.content.decode()
    assert "failed" in text and "not valid JSON" in text
    assert "Imported 1 of 2 file(s)" in text
    assert Session.objects.filter(project=project).get().key == "up:chat"


def test_without_files_it_says_so(editor):
    response = editor.post(reverse("import"), {"project": "default"}, follow=True)

    assert "Choose at least one transcript file." in response.content.decode()


def test_a_viewer_gets_403_and_nothing_is_stored(viewer, project):
    assert upload(viewer, chat_file()).status_code == 403
    assert viewer.get(reverse("import")).status_code == 403
    assert viewer.get(reverse("import"), {"project": "default"}).status_code == 403
    assert counts(project)["sessions"] == 0


def test_an_outsider_gets_404(outsider, project):
    assert upload(outsider, chat_file()).status_code == 404
    assert outsider.get(reverse("import"), {"project": "default"}).status_code == 404
    assert counts(project)["sessions"] == 0


def test_someone_in_no_project_gets_404(project):
    nobody = client_for(project, None, "nobody")

    assert nobody.get(reverse("import")).status_code == 404


def test_logging_in_is_required(db):
    response = Client(HTTP_HOST=HOST).get(reverse("import"))

    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
