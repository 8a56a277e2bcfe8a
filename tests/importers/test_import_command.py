"""manage.py import_transcripts: a progress bar on stderr, one line per failed file while the others
import, a summary at the end, and a second run that stores nothing."""

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import OutputWrapper

from sessions.ingest.importers import ImportSummary
from sessions.management.commands.import_transcripts import Progress
from sessions.models import SESSION_KEY_RE, Session
from tests.importers.conftest import counts, long_name

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"
MINI = DATA / "openai-chat" / "mini-swe-agent-deepseek_reasoner_dev__pvlib__pvlib-python-1072.traj.json"
CLAUDE = DATA / "claude-code" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
SWE_AGENT = DATA / "swe-agent"


@pytest.fixture
def folder(tmp_path):
    """Two real transcripts (one in a subfolder), a broken file, a file the API would refuse, and a file
    that is not a transcript's kind (ignored)."""
    shutil.copy(MINI, tmp_path / "mini.traj.json")
    (tmp_path / "cc").mkdir()
    shutil.copy(CLAUDE, tmp_path / "cc" / "claude.jsonl")
    (tmp_path / "broken.json").write_text('{"messages": [')
    (tmp_path / "orphan.json").write_text(json.dumps([{"role": "tool", "tool_call_id": "x", "content": "?"}]))
    (tmp_path / "notes.txt").write_text("not a transcript")
    return tmp_path


def run(*args) -> tuple[str, str, CommandError | None]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("import_transcripts", *map(str, args), stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), exc
    return out.getvalue(), err.getvalue(), None


def test_a_folder_imports_with_progress_failures_and_a_summary(project, folder):
    out, err, error = run(folder)

    assert "[........................] 0/4 files" in err
    assert "[########################] 4/4 files · 2 sessions · 54 messages" in err
    assert f"FAILED {folder / 'broken.json'}: not valid JSON: Expecting value (line 1, column 15)" in err
    assert f"FAILED {folder / 'orphan.json'}: session orphan, message orphan:0:0: tool_call_id 'x' does not" in err
    assert out.strip() == (
        "Imported 2 of 4 file(s): 2 session(s) (2 new), 54 message(s) stored, 27 tool call(s), 27 tool result(s), "
        "0 checkpoint(s); skipped 0 (0 message(s) already stored, 0 entries without a message). 2 file(s) failed."
    )
    assert str(error) == "2 of 4 file(s) could not be imported (see above)."
    assert sorted(Session.objects.values_list("key", flat=True)) == ["claude", "mini.traj"]


def test_running_it_again_stores_nothing(project, folder):
    run(folder)
    before = counts()

    out, err, error = run(folder)

    assert counts() == before
    assert "0 message(s) stored" in out and "54 message(s) already stored" in out
    assert "2 session(s) (0 new)" in out
    assert err.count("FAILED") == 2


def test_good_files_alone_exit_cleanly(project):
    out, err, error = run(MINI, CLAUDE)

    assert error is None
    assert "Imported 2 of 2 file(s)" in out and "FAILED" not in err


def test_options_project_format_and_key_prefix(other_project):
    out, err, error = run(MINI, "--project", "other", "--format", "openai", "--session-key-prefix", "bench/")

    assert error is None
    session = Session.objects.get(project=other_project)
    assert session.key == "bench-" + MINI.name.removesuffix(".json")  # "/" is not a key character
    assert session.metadata["imported_from"] == {"file": MINI.name, "format": "openai"}


def test_a_forced_format_that_does_not_fit_fails_the_file(project):
    out, err, error = run(CLAUDE, "--format", "ctxweb")

    assert f"FAILED {CLAUDE}: line 1: unknown entry type 'user'" in err
    assert error is not None and counts()["sessions"] == 0


@pytest.mark.parametrize("body", [{"model": "gpt-4o", "instructions": "Be brief."}, {"input": 42}, {"input": None}])
def test_a_responses_body_without_input_items_is_refused_in_a_sentence(project, tmp_path, body):
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))

    out, err, error = run(path, "--format", "openai-responses")

    assert f"FAILED {path}: a Responses request body needs `input`: a list of input items or a string" in err
    assert "unexpected error" not in err and "Traceback" not in err
    assert error is not None and counts()["sessions"] == 0


def test_an_unknown_project_or_an_empty_folder_is_an_error(project, tmp_path):
    with pytest.raises(CommandError, match="No project 'nope'"):
        call_command("import_transcripts", str(MINI), "--project", "nope", stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match=r"No \.json, \.jsonl, \.ndjson, \.traj files found"):
        call_command("import_transcripts", str(tmp_path), stdout=io.StringIO(), stderr=io.StringIO())


def test_a_missing_path_is_reported_like_a_failed_file(project, tmp_path):
    out, err, error = run(tmp_path / "missing.json", MINI)

    assert f"FAILED {tmp_path / 'missing.json'}: No such file or directory" in err
    assert "Imported 1 of 2 file(s)" in out


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_the_bar_is_redrawn_in_place():
    stream = Terminal()
    progress = Progress(OutputWrapper(stream), total=2)

    progress.show(1, ImportSummary(), "big.json", sessions=3, messages=40)
    progress.message("FAILED big.json: broken")
    progress.show(2, ImportSummary())
    progress.end()

    text = stream.getvalue()
    assert text.startswith("\r[############............] 1/2 files · 3 sessions · 40 messages · big.json")
    assert "\rFAILED big.json: broken\n" in text.replace(" " * 10, "")
    assert text.endswith("[########################] 2/2 files · 0 sessions · 0 messages\n")


def test_an_unexpected_error_in_one_file_does_not_stop_the_others(project, monkeypatch):
    from sessions.ingest.importers import runner

    real = runner.parse_transcript

    def parse(name, *args, **kwargs):
        if name == CLAUDE.name:
            raise RuntimeError("boom")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(runner, "parse_transcript", parse)

    out, err, error = run(CLAUDE, MINI)

    assert f"FAILED {CLAUDE}: unexpected error (RuntimeError: boom)" in err
    assert "Imported 1 of 2 file(s)" in out


def test_a_folder_picks_up_swe_agent_trajectories(project, tmp_path):
    for path in SWE_AGENT.glob("*.traj"):
        shutil.copy(path, tmp_path / path.name)

    out, err, error = run(tmp_path)

    assert error is None, err
    assert "Imported 3 of 3 file(s): 3 session(s) (3 new), 49 message(s) stored" in out
    # The trajectory that declares a history processor is rebuilt from its eleven steps.
    assert "Recorded 11 request(s) from request logs and trajectories (0 already recorded)." in out
    assert sorted(Session.objects.values_list("key", flat=True)) == [
        "ctf_pwn_warmup", "function_calling_simple", "marshmallow-1867_window100_last_n_observations"]


def test_file_names_of_250_characters_import_under_valid_distinct_keys(project, tmp_path):
    names = [long_name("-attempt-1"), long_name("-attempt-2")]  # the same but for their last characters
    for name in names:
        assert len(name) == 250
        shutil.copy(MINI, tmp_path / name)

    out, err, error = run(*(tmp_path / name for name in names))

    assert error is None, err
    assert "Imported 2 of 2 file(s): 2 session(s) (2 new)" in out
    sessions = list(Session.objects.order_by("pk"))
    assert len({s.key for s in sessions}) == 2
    for session, name in zip(sessions, names, strict=True):
        assert re.fullmatch(SESSION_KEY_RE, session.key) and session.key.startswith(name[:100])
        assert session.metadata["imported_from"]["file"] == name
        assert session.messages.get(seq=1).client_id.startswith(session.key + ":")
    again, _, _ = run(*(tmp_path / name for name in names))
    assert "0 message(s) stored" in again
