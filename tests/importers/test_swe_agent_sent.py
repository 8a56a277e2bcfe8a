"""What a SWE-agent model saw (issue: "SWE-agent trims old observations"): SWE-agent's history processors
change its history before each query, so a trajectory's `history` is not what was sent. A trajectory that
records each step's messages (`trajectory[n].query`) is imported as those requests; one that only declares
its processors (`replay_config`) has them applied, step by step, and says the input was derived from that
configuration. Either way the raw log keeps the history whole, and each elided observation shows as the
application's edit of the raw message."""

import copy
import json
from pathlib import Path

import pytest

from sessions.context.explain import with_explanations
from sessions.context.recorded_input import build_input
from sessions.ingest.importers import import_file
from sessions.ingest.importers.swe_agent import apply_processors
from sessions.models import RecordedRequest, Session

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts" / "swe-agent"
MARSHMALLOW = DATA / "marshmallow-1867_window100_last_n_observations.traj"
FUNCTION_CALLING = DATA / "function_calling_simple.traj"
ELIDED = "Old environment output: ({} lines omitted)"

pytestmark = pytest.mark.django_db


def observation(n: int, lines: int = 3) -> dict:
    return {"role": "user", "content": "\n".join(f"out {n}.{i}" for i in range(lines)), "message_type": "observation",
            "agent": "main"}


def action(n: int) -> dict:
    return {"role": "assistant", "content": f"step {n}\n```\nls\n```", "message_type": "action", "agent": "main",
            "thought": f"step {n}", "action": "ls"}


def history(steps: int) -> list[dict]:
    items = [{"role": "system", "content": "You are an agent.", "message_type": "system_prompt", "agent": "main"},
             observation(0)]
    for n in range(1, steps + 1):
        items += [action(n), observation(n, lines=n + 1)]
    return items


def test_last_n_observations_keeps_the_task_and_the_last_n_and_elides_the_others():
    items = history(6)  # observations at 1, 3, ..., 13: the task and six outputs
    sent = apply_processors([{"type": "last_n_observations", "n": 2}], items)
    observations = [e["content"] for e in sent if e["message_type"] == "observation"]
    assert observations[0] == items[1]["content"], "the first observation, the task, is never elided"
    assert observations[1:5] == [ELIDED.format(n + 1) for n in range(1, 5)]
    assert observations[5:] == [items[11]["content"], items[13]["content"]]
    assert items[3]["content"].startswith("out 1.0"), "the history itself is unchanged"
    # polling keeps between n and n + polling; tags force an observation in or out.
    polled = apply_processors([{"type": "last_n_observations", "n": 2, "polling": 3}], items)
    assert sum(e["content"].startswith("Old") for e in polled) == 3
    tagged = copy.deepcopy(items)
    tagged[3]["tags"], tagged[13]["tags"] = ["keep_output"], ["remove_output"]
    sent = apply_processors([{"type": "last_n_observations", "n": 2}], tagged)
    assert sent[3]["content"] == items[3]["content"] and sent[13]["content"] == ELIDED.format(7)


def test_a_trajectory_declaring_its_processor_is_imported_as_the_requests_it_made(project):
    report = import_file(project, MARSHMALLOW)
    assert report.error is None and report.format == "swe-agent" and report.requests == 11
    session = Session.objects.get(key=MARSHMALLOW.name.removesuffix(".traj"))
    trajectory = json.loads(MARSHMALLOW.read_text())
    # The raw log is the history as the user saw it, whole (its system prompt is the instructions).
    assert [m.text for m in session.messages.order_by("seq")] == [
        item["content"] for item in trajectory["history"][1:]]
    assert session.instructions == trajectory["history"][0]["content"]
    assert session.metadata["info"] == trajectory["info"] and session.metadata["imported_from"]["format"] == "swe-agent"
    last = RecordedRequest.objects.filter(session=session).order_by("-number").first()
    assert last.source == "trajectory" and "last_n_observations n=5" in last.derived_from
    # Observations 2-6 of 11 were elided in the last step (seqs 3, 5, 7, 9 and 11), each an edit.
    assert [last.message_seqs[i] for i in last.edited] == [3, 5, 7, 9, 11]
    assert all(last.messages[i]["content"].startswith("Old environment output: (") for i in last.edited)

    model_input = build_input(session)
    assert (model_input.basis, model_input.request.number) == ("recorded_request", 11)
    raw = build_input(session, basis="raw_log")
    assert model_input.tokens < raw.tokens
    explained = {m.seq: m.explanation for m in with_explanations(session, list(session.messages.order_by("seq")))}
    assert explained[3].edited_by_application and explained[3].code == "in_input"
    assert "as the application edited it" in explained[3].sentence
    assert not explained[13].edited_by_application, "one of the last five observations, sent whole"


def with_queries(trajectory: dict, processors: list[dict]) -> dict:
    """The trajectory as a newer SWE-agent writes it: each step with the messages it sent (`query`)."""
    items = trajectory["history"]
    answers = [j for j, item in enumerate(items) if item["role"] == "assistant"]
    steps = [{"action": "", "observation": "", "response": "", "thought": "", "state": {},
              "query": apply_processors(processors, items[:j])} for j in answers]
    return {**trajectory, "trajectory": steps}


def test_a_trajectory_recording_each_step_s_messages_is_imported_as_those_requests(project, tmp_path):
    trajectory = {"history": history(4), "info": {"exit_status": "submitted"}}
    path = tmp_path / "recorded.traj"
    path.write_text(json.dumps(with_queries(trajectory, [{"type": "last_n_observations", "n": 1}])))
    report = import_file(project, path)
    assert report.error is None and report.requests == 4
    session = Session.objects.get(key="recorded")
    requests = list(RecordedRequest.objects.filter(session=session).order_by("number"))
    assert all(r.source == "trajectory" and r.derived_from == "" for r in requests)
    # The raw log: the history whole, the last observation (stored after the last step) included.
    assert [m.text for m in session.messages.order_by("seq")] == [i["content"] for i in trajectory["history"][1:]]
    assert requests[-1].edited == [3, 5] and [requests[-1].message_seqs[i] for i in (3, 5)] == [3, 5]
    model_input = build_input(session)
    assert model_input.sent_messages == requests[-1].messages
    assert [e.seq for e in model_input.entries[len(model_input.sent_messages):]] == [8, 9]


def test_an_unknown_processor_is_named_and_the_history_imported_as_it_is(project, tmp_path):
    trajectory = {"history": history(2), "replay_config": json.dumps(
        {"agent": {"history_processors": [{"type": "remove_regex", "remove": ["<diff>.*?</diff>"]}]}})}
    path = tmp_path / "regex.traj"
    path.write_text(json.dumps(trajectory))
    report = import_file(project, path)
    assert report.error is None and report.requests == 0
    session = Session.objects.get(key="regex")
    assert session.metadata["history_processors_not_applied"] == ["remove_regex"] and session.request_count == 0


def test_a_trajectory_without_processors_is_the_history_it_sent(project):
    import_file(project, FUNCTION_CALLING)
    session = Session.objects.get(key="function_calling_simple")
    assert session.request_count == 0 and build_input(session).basis == "raw_log"
