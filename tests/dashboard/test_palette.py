"""Checkpoint colours: sessions.dashboard.inspection.PALETTE says how many there are, the stylesheet defines
exactly that many (cp-0 to cp-N), and checkpoints past the last colour start again at the first."""

import re

from django.conf import settings

from sessions.context.compaction_runs import compact
from sessions.dashboard.inspection import PALETTE
from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import Session

from .conftest import history_turn, session_url
from .dom import parse

STYLESHEET = settings.BASE_DIR / "static" / "ctxweb.css"


def palette_rules() -> list[tuple[int, str]]:
    """(N, declarations) for every rule of the stylesheet whose selectors name the class cp-N."""
    css = re.sub(r"/\*.*?\*/", "", STYLESHEET.read_text(), flags=re.DOTALL)
    found = []
    for selectors, declarations in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        for number in re.findall(r"\.cp-(\d+)(?![\w-])", selectors):
            found.append((int(number), declarations))
    return found


def test_the_stylesheet_defines_one_class_per_palette_colour():
    rules = palette_rules()
    assert [number for number, _ in rules] == list(range(PALETTE))
    for number, declarations in rules:
        assert "--cp-bg:" in declarations and "--cp-edge:" in declarations, (number, declarations)


def test_checkpoints_past_the_last_colour_start_again_at_the_first(viewer_client, project):
    key = "many-checkpoints"
    update_session(project, key, {"compaction": {"max_tokens": 100_000, "keep_recent_tokens": 1, "auto": False}}, "test")
    append_messages(project, key, history_turn(0), "test")
    for n in range(1, PALETTE + 3):  # each compaction covers all but the newest turn
        append_messages(project, key, history_turn(n), "test")
        outcome = compact(Session.objects.get(project=project, key=key), force=True, actor="test")
        assert outcome.status == "completed", (n, outcome.status, outcome.reason)
    session = Session.objects.get(project=project, key=key)
    checkpoints = list(session.checkpoints.order_by("last_seq"))
    colour = {c.pk: f"cp-{i % PALETTE}" for i, c in enumerate(checkpoints)}
    assert len(set(colour.values())) == PALETTE

    doc = parse(viewer_client.get(session_url(session)))
    items = doc.one("ol", cls="checkpoints").find_all("li", cls="checkpoint")
    assert [int(li.get("data-checkpoint")) for li in items] == [c.pk for c in checkpoints]
    for li in items:
        assert {"cp", colour[int(li.get("data-checkpoint"))]} <= li.classes, li
    covered = doc.find_all("article", cls="msg code-covered_by_checkpoint")
    assert {int(m.get("data-checkpoint")) for m in covered} == set(colour)
    for message in covered:
        expected = {"cp", colour[int(message.get("data-checkpoint"))]}
        assert expected <= message.classes, message
        assert expected <= message.one(cls="badge covered").classes, message


def test_a_session_compacted_many_times_lists_its_newest_checkpoints(viewer_client, project, monkeypatch):
    """The panel and the as-of choice list the newest LISTED_CHECKPOINTS (a session compacted thousands of
    times rendered them all); each keeps the colour of its number, as the messages it covers do."""
    monkeypatch.setattr("sessions.dashboard.inspection.LISTED_CHECKPOINTS", 3)
    key = "compacted-often"
    update_session(project, key, {"compaction": {"max_tokens": 100_000, "keep_recent_tokens": 1, "auto": False}}, "test")
    append_messages(project, key, history_turn(0), "test")
    for n in range(1, PALETTE + 3):
        append_messages(project, key, history_turn(n), "test")
        compact(Session.objects.get(project=project, key=key), force=True, actor="test")
    session = Session.objects.get(project=project, key=key)
    checkpoints = list(session.checkpoints.order_by("last_seq"))
    assert len(checkpoints) == PALETTE + 2

    doc = parse(viewer_client.get(session_url(session)))
    items = doc.one("ol", cls="checkpoints").find_all("li", cls="checkpoint")
    assert [int(li.get("data-checkpoint")) for li in items] == [c.pk for c in checkpoints[-3:]]
    for li, checkpoint in zip(items, checkpoints[-3:], strict=True):
        assert f"cp-{(checkpoint.number - 1) % PALETTE}" in li.classes
    assert f"The newest 3 of {PALETTE + 2} are listed" in doc.one(cls="checkpoints-unlisted").text()
    options = doc.one("select", name="as_of_checkpoint").find_all("option")
    assert [o.get("value") for o in options] == ["", *(str(c.pk) for c in checkpoints[-3:])]
