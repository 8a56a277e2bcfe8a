"""Small frictions a new user met (issue 39, item 5), each as it reads now: imported sessions get a title
(a tau-bench run's task instruction, else the first user message; a Claude Code session's first prompt,
a slash command with arguments counting as one); a checkpoint is "made after #N"; the trace says what it
needs in words; a cut message's "Show all" does not quote a size that reads as twice its length; What
if… says a new summary replaces the previous one; the members page is in the header."""

import json
from pathlib import Path

import pytest
from django.urls import reverse

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.ingest.importers import import_data
from sessions.models import Membership, Session
from tests.dashboard.dom import parse
from tests.importers.conftest import client_for, jsonl

TAU = Path(__file__).resolve().parent / "data" / "transcripts" / "openai-chat" / "tau-bench-gpt-4o-airline.json"


def test_a_tau_bench_run_is_titled_by_its_task_instruction(project):
    records = json.loads(TAU.read_text())[:3]
    report = import_data(project, "tau.json", json.dumps(records).encode())
    assert report.error is None
    titles = list(Session.objects.order_by("key").values_list("title", flat=True))
    expected = [" ".join(r["info"]["task"]["instruction"].split()) for r in records]
    assert titles == [t if len(t) <= 120 else t[:119] + "…" for t in expected]


def test_a_chat_without_a_title_is_titled_by_its_first_user_message(project):
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is\n my order 4471?"},
            {"role": "assistant", "content": "On its way."}]
    import_data(project, "chat.json", json.dumps(chat).encode())
    assert Session.objects.get().title == "Where is my order 4471?"


def claude_line(uuid: str, text: str, parent=None) -> dict:
    return {"type": "user", "sessionId": "s1", "uuid": uuid, "parentUuid": parent, "timestamp": "2026-01-01T10:00:00Z",
            "message": {"role": "user", "content": text}}


@pytest.mark.parametrize(("first", "title"), [
    ("<command-name>/review</command-name><command-args>the login flow</command-args>", "/review the login flow"),
    ("<command-name>/clear</command-name><command-args></command-args>", "Fix the failing test"),
])
def test_a_slash_command_with_arguments_titles_a_claude_code_session(project, first, title):
    data = jsonl(claude_line("u1", first), claude_line("u2", "Fix the failing test", "u1"))
    report = import_data(project, "s1.jsonl", data, fmt="claude-code")
    assert report.error is None, report.error
    assert Session.objects.get().title == title


@pytest.fixture
def compacted(project):
    turns = []
    for n in range(6):
        turns += [{"role": "user", "content": f"Question {n} about order W9609649"},
                  {"role": "assistant", "content": f"Answer {n}: it ships on Monday."}]
    append_messages(project, "friction", turns, "test")
    session = Session.objects.get(key="friction")
    outcome = compact(session, force=True, keep_recent_tokens=30, summary="Questions about an order.")
    assert outcome.status == "completed"
    return Session.objects.select_related("project").get(pk=session.pk), outcome.checkpoint


def test_the_trace_says_a_checkpoint_was_made_after_its_message(compacted, project):
    session, checkpoint = compacted
    client = client_for(project, Membership.Role.VIEWER, "reader")
    url = reverse("session_trace", args=[project.name, session.key])
    html = client.get(url, {"q": "W9609649"}, headers={"HX-Request": "true"}).content.decode()
    assert f"checkpoint {checkpoint.number} (made after #{checkpoint.created_at_seq})" in html
    assert f" at #{checkpoint.created_at_seq}" not in html
    short = client.get(url, {"q": "W"}, headers={"HX-Request": "true"}).content.decode()
    assert "Trace needs at least 2 characters" in short and "q needs" not in short


def test_what_if_says_the_new_summary_replaces_the_previous_one(compacted, project):
    session, checkpoint = compacted
    for n in range(2):  # two long turns: the first is covered, and its summary is far smaller
        append_messages(project, "friction", [{"role": "user", "content": f"Question {n}. " + "More detail. " * 80},
                                              {"role": "assistant", "content": f"Answer {n}. " + "More detail. " * 80}],
                        "test")
    client = client_for(project, Membership.Role.VIEWER, "reader")
    response = client.get(reverse("session_what_if", args=[project.name, session.key]),
                          {"max_tokens": 50, "keep_recent_tokens": 10, "force": "on"}, headers={"HX-Request": "true"})
    assert response.status_code == 200, response.content[:300]
    row = parse(response).one("tr", cls="what-if-summary").text()
    assert f"also replaces the latest checkpoint's summary (#1–#{checkpoint.last_seq}" in row, row


def test_show_all_on_a_cut_text_quotes_no_doubled_size(project, settings):
    append_messages(project, "long", [{"role": "user", "content": "word " * 20_000}], "test")
    client = client_for(project, Membership.Role.VIEWER, "reader")
    html = parse(client.get(reverse("session", args=[project.name, "long"])))
    links = [a.text() for a in html.find_all("a", cls="show-all")]
    assert links and all(link == "Show all" for link in links), links  # the cut note gives the length


def test_an_admin_finds_the_members_page_in_the_header(project):
    admin = client_for(project, Membership.Role.ADMIN, "boss")
    links = {a.text(): a.get("href") for a in main_nav(admin)}
    assert links["Members"] == reverse("members", args=[project.name])
    viewer = client_for(project, Membership.Role.VIEWER, "reader")
    assert "Members" not in [a.text() for a in main_nav(viewer)]


def main_nav(client):
    return parse(client.get(reverse("sessions"))).one("nav", **{"aria-label": "Main"}).find_all("a")
