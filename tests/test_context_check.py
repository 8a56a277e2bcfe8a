"""Context checks (issue 41, items 4-5; sessions/ingest/context_check.py): a real tau-bench conversation of
tests/data (run 6 of the airline set: the customer's city, Denver, is said once, in a tool result)
replayed through ctxweb's compaction on a scratch copy. Without a pin the extractive summaries lose the
city and the check fails; pinned, it passes. Nothing of the replay is stored."""

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sessions.ingest.append import append_messages
from sessions.ingest.context_check import Settings, check_messages
from sessions.models import Checkpoint, Event, Message, Project, Session

pytestmark = pytest.mark.django_db

TAU_BENCH = Path(__file__).resolve().parent / "data" / "transcripts" / "openai-chat" / "tau-bench-gpt-4o-airline.json"
RUN = "tau-bench-run-6:0"  # run 6 alone, in a file of its own: the importer reads one run, not 200
CITY_PIN = '"city": "[A-Z][a-z]+"'
TIGHT = ["--max-tokens", "1500", "--keep-recent-tokens", "300"]


def parcel_chat(turns: int, *, planted_in: int, planted: str) -> list[dict]:
    """A generated support chat of `turns` turns, `planted` said once, in turn `planted_in`."""
    messages = []
    for n in range(turns):
        said = planted if n == planted_in else ""
        messages += [{"role": "user", "content": f"Turn {n}: where is my parcel?{said} " + "detail " * 20},
                     {"role": "assistant", "content": f"Answer {n}: on its way. " + "words " * 20}]
    return messages


@pytest.fixture(scope="module")
def run_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("runs") / "tau-bench-run-6.json"
    path.write_text(json.dumps([json.loads(TAU_BENCH.read_text())[6]]))
    return path


def check(run_file: Path, *arguments, junit: Path | None = None) -> tuple[int, str]:
    out = []

    class Out:
        def write(self, text):
            out.append(text)

        def flush(self):
            pass

    try:
        call_command("context_check", str(run_file), "--key", RUN, *TIGHT, *arguments,
                     *(["--junit", str(junit)] if junit else []), stdout=Out())
        status = 0
    except SystemExit as exc:
        status = exc.code
    return status, "".join(out)


def test_the_check_fails_without_the_pin_and_passes_with_it(tmp_path, project, run_file):
    before = (Project.objects.count(), Session.objects.count(), Message.objects.count(), Event.objects.count())
    status, out = check(run_file, "--expect", "Denver", junit=tmp_path / "lost.xml")
    assert status == 1, out
    assert "Denver 'Denver': first in #6, missing from" in out and "lost by checkpoint 1" in out
    suite = ElementTree.parse(tmp_path / "lost.xml").getroot().find("testsuite")
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == (RUN, "1", "1")
    assert suite.find("testcase").find("failure").get("message") == "lost by checkpoint 1"

    status, out = check(run_file, "--expect", "Denver", "--pin", CITY_PIN, junit=tmp_path / "kept.xml")
    assert status == 0, out
    assert "Denver 'Denver': first in #6, kept" in out
    assert ElementTree.parse(tmp_path / "kept.xml").getroot().find("testsuite").get("failures") == "0"
    # A scratch copy: nothing stayed behind.
    assert (Project.objects.count(), Session.objects.count(), Message.objects.count(), Event.objects.count()) == before
    assert not Checkpoint.objects.exists()


def test_a_literal_no_message_holds_fails(project, run_file):
    status, out = check(run_file, "--expect", "ZZ9PLURALZALPHA")
    assert status == 1 and "in no message" in out


def test_an_existing_session_is_checked_as_it_is(project):
    runs = json.loads(TAU_BENCH.read_text())
    append_messages(project, "run-6", [m for m in runs[6]["traj"] if m["role"] != "system"], "test", fmt="openai")
    out = []
    with pytest.raises(SystemExit):
        call_command("context_check", "--session", "run-6", "--expect", "Denver", *TIGHT,
                     stdout=type("O", (), {"write": lambda self, t: out.append(t), "flush": lambda self: None})())
    assert "run-6: FAILED" in "".join(out)
    assert Session.objects.get(key="run-6").checkpoint_count == 0  # the session itself is left alone


def test_bad_arguments_are_refused(project, run_file):
    with pytest.raises(CommandError, match="not both"):
        call_command("context_check")
    with pytest.raises(CommandError, match="RE2"):
        call_command("context_check", str(run_file), "--key", RUN, "--pin", "(?=x)x")
    with pytest.raises(CommandError, match="holds no conversation"):
        call_command("context_check", str(run_file), "--key", "nope")


def test_a_thousand_turns_replay_in_a_few_seconds(project):
    """Item 5's figure is measured by `make bench` (context_check); this only says the replay finishes and
    finds a planted value, in turn 3 of 1,000, carried by every checkpoint once pinned."""
    messages = parcel_chat(1000, planted_in=3, planted=" My booking reference is QX7T2M.")
    report = check_messages("generated", messages, Settings(
        max_tokens=4000, keep_recent_tokens=1000, expect=["QX7T2M"],
        pinned_facts=[{"name": "booking", "pattern": "[A-Z0-9]{6}"}]))
    assert report.messages == 2000 and report.checkpoints > 10 and report.passed, report.as_dict()


def test_moving_the_scratch_session_to_a_new_row_changes_nothing_of_the_report(project, monkeypatch):
    """On PostgreSQL the replay moves its scratch session to a new row every ROW_RENEWED_EVERY messages
    (context_check._renew_row); forced every 7 messages, on either database, the report is the same, with
    a value lost (unpinned) and one carried (pinned)."""
    messages = parcel_chat(60, planted_in=2, planted=" My booking reference is QX7T2M, the gate is Z9.")
    settings = Settings(max_tokens=900, keep_recent_tokens=300, expect=["gate is Z9"],
                        pinned_facts=[{"name": "booking", "pattern": "[A-Z0-9]{6}"}])
    monkeypatch.setattr("sessions.ingest.context_check.RENEWED_ON", ())
    plain = check_messages("generated", messages, settings).as_dict()
    monkeypatch.setattr("sessions.ingest.context_check.RENEWED_ON", ("postgresql", "sqlite"))
    monkeypatch.setattr("sessions.ingest.context_check.ROW_RENEWED_EVERY", 7)
    renewed = check_messages("generated", messages, settings).as_dict()
    assert plain["checkpoints"] > 5 and [f["passed"] for f in plain["facts"]] == [True, False], plain
    assert {**renewed, "seconds": 0} == {**plain, "seconds": 0}
    assert not Session.objects.filter(key__startswith="context-check").exists()


def test_with_the_openai_summarizer_the_check_calls_the_configured_endpoint(project, openai_stub):
    """The stub's summary carries nothing: an expected literal is lost, a pinned one is added back."""
    openai_stub.reply = "The customer asked about the parcel."
    messages = parcel_chat(30, planted_in=1, planted=" My booking reference is QX7T2M and my postcode is AB1 2CD.")
    report = check_messages("stubbed", messages, Settings(
        max_tokens=1500, keep_recent_tokens=300, summarizer="openai", expect=["QX7T2M", "AB1 2CD"],
        pinned_facts=[{"name": "booking", "pattern": "[A-Z0-9]{6}"}]))
    assert openai_stub.received, "the configured endpoint was called"
    facts = {fact.literal: fact for fact in report.facts}
    assert facts["QX7T2M"].passed and not facts["AB1 2CD"].passed and facts["AB1 2CD"].lost_by == [1]
    assert not report.passed
