"""Claude Code sessions as a whole: the title (a summary of this conversation, else the first prompt),
the dates (the messages', not the import's), and sub-agent sessions linked to their parent both ways,
also when Claude Code wrote the sub-agent to a file of its own."""

import json
from datetime import datetime
from pathlib import Path

import pytest

from sessions.ingest.importers import import_file
from sessions.models import Event, Session
from tests.importers.conftest import counts, jsonl

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts" / "claude-code"
INIT = DATA / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
WITH_AGENTS = DATA / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_summary_of_another_conversation_does_not_title_the_session(tmp_path, project):
    """Claude Code writes summaries of other sessions into a file (their leafUuid is not in it)."""
    path = tmp_path / INIT.name
    foreign = {"type": "summary", "summary": "Payment module refactor", "leafUuid": "3f9c2a1e-0000-4000-8000-c0ffee000001"}
    path.write_bytes(jsonl(foreign, *entries(INIT)))

    report = import_file(project, path)

    assert report.error is None
    assert Session.objects.get(key=INIT.stem).title == "/init"


def test_a_summary_of_this_conversation_titles_it(tmp_path, project):
    path = tmp_path / INIT.name
    lines = entries(INIT)
    own = {"type": "summary", "summary": "CLAUDE.md for an empty repository", "leafUuid": lines[-1]["uuid"]}
    foreign = {"type": "summary", "summary": "Payment module refactor", "leafUuid": "3f9c2a1e-0000-4000-8000-c0ffee000001"}
    path.write_bytes(jsonl(own, foreign, *lines))

    import_file(project, path)

    assert Session.objects.get(key=INIT.stem).title == "CLAUDE.md for an empty repository"


def test_without_a_summary_the_title_is_the_first_prompt(project):
    import_file(project, WITH_AGENTS)

    main = Session.objects.get(key=WITH_AGENTS.stem)
    assert main.title == "/orchestrator @CLAUDE.md を最新の状態にアップデートしてください"  # the command typed
    for agent in Session.objects.filter(metadata__sidechain=True):
        assert agent.title.startswith("Sub-agent: ")


@pytest.mark.parametrize("path", [INIT, WITH_AGENTS], ids=lambda p: p.name[:8])
def test_a_sessions_dates_are_its_messages(project, path):
    threads: dict[bool, list[str]] = {}
    for entry in entries(path):
        if entry.get("type") in ("user", "assistant"):
            threads.setdefault(bool(entry.get("isSidechain")), []).append(entry["timestamp"])

    import_file(project, path)

    main = Session.objects.get(key=path.stem)
    assert main.created_at == stamp(min(threads[False]))
    assert main.last_activity_at == stamp(max(threads[False]))
    for agent in Session.objects.filter(metadata__sidechain=True):
        times = [m.created_at for m in agent.messages.all()]
        assert (agent.created_at, agent.last_activity_at) == (min(times), max(times))
        assert stamp(min(threads[True])) <= agent.created_at <= agent.last_activity_at <= stamp(max(threads[True]))


def test_the_sessions_list_sorts_by_the_conversations_dates(project):
    import_file(project, WITH_AGENTS)  # 2025-09-07
    import_file(project, INIT)  # 2025-09-03, imported last

    mains = Session.objects.filter(key__in=[INIT.stem, WITH_AGENTS.stem])
    assert [s.key for s in mains.order_by("-last_activity_at")] == [WITH_AGENTS.stem, INIT.stem]
    assert [s.key for s in mains.order_by("created_at")] == [INIT.stem, WITH_AGENTS.stem]


@pytest.fixture
def split_files(tmp_path):
    """WITH_AGENTS as newer Claude Code writes it: the main thread in <sessionId>.jsonl, each sub-agent
    thread in agent-<id>.jsonl with the parent's sessionId on every line."""
    main, agents = [], {}
    thread_of = {}
    for entry in entries(WITH_AGENTS):
        if not entry.get("isSidechain"):
            main.append(entry)
            continue
        root = thread_of.get(entry.get("parentUuid"), entry["uuid"])
        thread_of[entry["uuid"]] = root
        agents.setdefault(root, []).append({**entry, "agentId": root[:8]})
    folder = tmp_path / "projects" / "sample-project"
    folder.mkdir(parents=True)
    (folder / WITH_AGENTS.name).write_bytes(jsonl(*main))
    paths = []
    for root, lines in agents.items():
        paths.append(folder / f"agent-{root[:8]}.jsonl")
        paths[-1].write_bytes(jsonl(*lines))
    return folder / WITH_AGENTS.name, paths


def assert_linked(main_key: str, agent_keys: list[str]):
    main = Session.objects.get(key=main_key)
    assert main.metadata["sidechains"] == sorted(agent_keys)
    for key in agent_keys:
        agent = Session.objects.get(key=key)
        assert agent.metadata["sidechain"] is True and agent.metadata["parent_session"] == main_key
        assert agent.metadata["claude_code"]["sessionId"] == main.metadata["claude_code"]["sessionId"]


@pytest.mark.parametrize("order", ["parent first", "sub-agents first"])
def test_sub_agent_files_are_linked_to_their_parent_whatever_the_order(project, split_files, order):
    main, agents = split_files
    files = [main, *agents] if order == "parent first" else [*agents, main]

    for path in files:
        assert import_file(project, path).error is None

    assert_linked(main.stem, [path.stem for path in agents])


def test_importing_linked_files_again_changes_nothing(project, split_files):
    main, agents = split_files
    for path in [agents[0], main, agents[1]]:
        import_file(project, path)
    before = counts(project)
    rows = list(Session.objects.order_by("pk").values())

    for path in [main, *agents]:
        again = import_file(project, path)
        assert again.messages == again.sessions_created == 0

    assert counts(project) == before  # no rows, no events
    assert list(Session.objects.order_by("pk").values()) == rows


def test_sub_agents_find_their_parent_by_session_id_not_by_file_name(project, split_files, tmp_path):
    """The parent's file renamed (copied off the machine, say): its sub-agents still link to it."""
    main, agents = split_files
    renamed = tmp_path / "orchestrator-run.jsonl"
    renamed.write_bytes(main.read_bytes())

    import_file(project, agents[0])
    import_file(project, renamed)
    import_file(project, agents[1])

    assert_linked("orchestrator-run", [path.stem for path in agents])
    assert Event.objects.filter(session__key="orchestrator-run").exists()
