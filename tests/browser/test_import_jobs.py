"""Uploading a transcript in the browser: the job page says it waits for the worker, shows the progress
bar, and turns into the result by itself (htmx polling, under the strict CSP) once the worker ran it."""

import json

import pytest
from django.core.management import call_command

from sessions.models import ImportJob

pytestmark = [pytest.mark.browser, pytest.mark.real_queue]  # the job waits for db_worker

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <b>there</b>"},
        {"role": "assistant", "content": "Hello."}]


def test_an_upload_shows_its_progress_then_its_result(page, login, live_server, tmp_path, settings, shot):
    settings.CTXWEB_IMPORT_DIR = tmp_path / "imports"
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps(CHAT))
    violations = []
    page.on("console", lambda message: "Content Security Policy" in message.text and violations.append(message.text))
    login(page, "admin")

    page.goto(live_server.url + "/import/")
    page.set_input_files("input[name=files]", str(transcript))
    with page.expect_navigation():
        page.click("form button.primary")

    assert "Waiting for the worker" in page.inner_text("#import-job")
    job = ImportJob.objects.get()
    ImportJob.objects.filter(pk=job.pk).update(state="running", bytes_read=job.size // 2, messages=2, sessions=1)
    page.wait_for_selector("text=Importing:")
    shot(page, "import-job-running")
    ImportJob.objects.filter(pk=job.pk).update(state="queued", bytes_read=0, messages=0, sessions=0)
    call_command("db_worker", "--batch", "--no-reload", "--no-startup-delay")

    page.wait_for_selector("text=Imported.")
    text = page.inner_text("#import-job")
    assert "completed" in text and "chat" in text
    shot(page, "import-job-completed", full_page=True)
    assert page.js_errors == [] and violations == []
    with page.expect_navigation():
        page.click("#import-job a:text('chat')")
    assert "Hi <b>there</b>" in page.content().replace("&lt;", "<").replace("&gt;", ">")
