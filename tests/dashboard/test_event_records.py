"""What the pages show of event data: a bounded excerpt, and a link to the event's whole record (its
JSON view, access-checked like the session page). Event data itself is bounded: a MESSAGE_UPDATED
event summarises an attributes change (sessions/store/event_types.py), old rows included."""

import hashlib
import importlib
import json

from django.apps import apps

from sessions.ingest.message_edits import update_message
from sessions.models import Event, EventType
from sessions.store.event_types import RequestBuilt
from sessions.store.events import event_data
from sessions.templatetags.ctxweb import EVENT_SHOWN_CHARS, event_excerpt

from .dom import parse


def big_attributes(n: int) -> dict:
    return {f"blob{k}": f"{n}-{k}-" + "x" * 60_000 for k in range(4)}


def test_forty_edits_of_large_attributes_keep_the_event_history_small(viewer_client, story, project):
    for n in range(40):
        update_message(project, "story", story.image, {"attributes": big_attributes(n)}, "test")

    fragment = viewer_client.get(story.url("events/"))
    page = viewer_client.get(story.url())

    assert fragment.status_code == 200 and page.status_code == 200
    # Each edit stored 480 kB of before and after and showed it all: 19 MB of HTML for 40 events.
    assert len(fragment.content) < 100_000
    assert len(page.content) < 400_000
    updated = [li for li in parse(fragment).find_all("li", cls="event") if li.one(cls="etype").text() == "MESSAGE_UPDATED"]
    assert len(updated) == 40
    assert "4 keys changed (blob0, blob1, blob2, blob3)" in updated[0].text()


def test_each_event_links_to_its_whole_record(viewer_client, story, project):
    update_message(project, "story", story.image, {"attributes": {"ticket": "T-9"}}, "test")
    event = Event.objects.filter(session=story.session, type=EventType.MESSAGE_UPDATED).get()
    doc = parse(viewer_client.get(story.url("events/")))
    links = [a.get("href") for a in doc.find_all("a") if a.text() == "record"]
    assert story.url(f"events/{event.pk}/") in links

    response = viewer_client.get(story.url(f"events/{event.pk}/"))

    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    record = response.json()
    assert (record["id"], record["type"], record["actor"]) == (event.pk, "MESSAGE_UPDATED", "test")
    assert record["data"]["changes"]["attributes"]["after"]["value"] == {"ticket": "T-9"}


def test_an_event_record_is_access_checked_like_the_session(outsider_client, anonymous_client, viewer_client,
                                                             story, other_session):
    event = Event.objects.filter(session=story.session).first()
    other_event = Event.objects.filter(session=other_session).first()

    assert outsider_client.get(story.url(f"events/{event.pk}/")).status_code == 404
    assert anonymous_client.get(story.url(f"events/{event.pk}/")).status_code == 302
    assert viewer_client.get(story.url(f"events/{other_event.pk}/")).status_code == 404
    assert viewer_client.get(story.url("events/999999999/")).status_code == 404


def test_the_excerpt_of_an_event_is_cut_to_a_bound():
    data = RequestBuilt(format="ctxweb", checkpoint_id=None, seq_range=(1, 2), stored_messages=2, tokens=10,
                        instructions_tokens=0, summary_tokens=0, unpersisted={"count": 0, "tokens": 0},
                        omitted=[{"seq": n, "reason": "orphan_tool_result", "whole_message": True} for n in range(500)],
                        compaction=None)

    excerpt = event_excerpt(data)

    assert len(excerpt) == EVENT_SHOWN_CHARS and excerpt.endswith("…")
    assert excerpt.startswith('{\n  "format": "ctxweb"')


def test_the_migration_summarises_message_updated_events_stored_whole(story):
    before, after = {"a": 1}, {"a": 2, "big": "z" * 5_000}
    old = Event.objects.create(session=story.session, type=EventType.MESSAGE_UPDATED, data={
        "seq": 2, "id": "m2", "input_tokens": 5, "at_seq": 9,
        "changes": {"include_in_messages": {"from": True, "to": False}, "attributes": {"from": before, "to": after}},
    })
    migration = importlib.import_module("sessions.migrations.0013_summarise_message_updated_events")

    migration.summarise(apps, None)

    old.refresh_from_db()
    whole = json.dumps(after, sort_keys=True, separators=(",", ":")).encode()
    assert old.data["changes"] == {
        "include_in_messages": {"from": True, "to": False},
        "attributes": {"keys": ["a", "big"], "keys_changed": 2,
                       "before": {"bytes": 7, "sha256": hashlib.sha256(b'{"a":1}').hexdigest(), "value": {"a": 1}},
                       "after": {"bytes": len(whole), "sha256": hashlib.sha256(whole).hexdigest()}},
    }
    assert event_data(old).changes.attributes.keys_changed == 2
