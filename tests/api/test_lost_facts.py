"""What each summary lost: a checkpoint's record lists the salient literals of the messages it
replaced that its summary does not carry (`lost`, with counts in `facts`), and COMPACTION_COMPLETED
carries `lost_count`."""

import pytest

from sessions.models import Checkpoint
from tests.api.test_trace import ORDER_CHAT, compact

pytestmark = pytest.mark.django_db


@pytest.fixture
def order_session(api):
    api.post("/sessions/order/messages", {"messages": ORDER_CHAT})
    return "order"


def test_a_checkpoint_lists_the_facts_its_summary_lost(api, order_session):
    checkpoint = compact(api, "order", "Order W9609649 was shipped; the user asked about a seat.")

    assert (checkpoint["first_seq"], checkpoint["last_seq"]) == (1, 6)
    lost = {fact["text"]: fact for fact in checkpoint["lost"]}
    assert set(lost) == {"$84.50", "2024-05-03", "UA123", "14C"}
    assert lost["UA123"] == {"text": "UA123", "kind": "identifier", "count": 2, "seqs": [5, 6]}
    assert lost["$84.50"]["kind"] == "amount"
    assert lost["2024-05-03"] == {"text": "2024-05-03", "kind": "date", "count": 1, "seqs": [4]}
    assert "W9609649" not in lost  # the summary carries it
    assert checkpoint["facts"] == {"kept": 1, "lost": len(checkpoint["lost"])}
    # Most repeated first.
    assert checkpoint["lost"][0]["text"] == "UA123"


def test_the_checkpoints_list_returns_the_same_record(api, order_session):
    checkpoint = compact(api, "order", "Nothing specific.")

    [listed] = api.get("/sessions/order/checkpoints").json()["items"]

    assert listed == checkpoint
    assert "W9609649" in {fact["text"] for fact in listed["lost"]}
    assert listed["facts"]["kept"] == 0


def test_compaction_completed_carries_lost_count(api, order_session):
    checkpoint = compact(api, "order", "Order W9609649 was shipped to Lisbon.")

    [event] = api.get("/sessions/order/events", query={"type": "COMPACTION_COMPLETED"}).json()["items"]

    assert event["data"]["lost_count"] == checkpoint["facts"]["lost"] > 0
    assert event["data"]["checkpoint_id"] == checkpoint["id"]


def test_an_imported_checkpoint_stores_its_lost_facts_too(api, project):
    api.post("/sessions/imp/messages", {"messages": ORDER_CHAT})
    from sessions.context.checkpoints import create_imported_checkpoint
    from sessions.models import Session

    session = Session.objects.get(project=project, key="imp")
    checkpoint, created = create_imported_checkpoint(session, 4, "A parcel was late.")

    assert created
    stored = Checkpoint.objects.get(pk=checkpoint.pk)
    assert {fact["text"] for fact in stored.lost_facts} >= {"W9609649", "$84.50", "2024-05-03"}
    assert stored.facts_lost == len(stored.lost_facts)
    event = api.get("/sessions/imp/events", query={"type": "COMPACTION_COMPLETED"}).json()["items"][0]
    assert event["data"]["lost_count"] == stored.facts_lost


def test_a_hidden_message_is_not_counted_as_lost(api, order_session):
    api.patch("/sessions/order/messages/4", {"include_in_messages": False})

    checkpoint = compact(api, "order", "Order W9609649; seat 14C on UA123; paid $84.50; Lisbon.")

    assert "2024-05-03" not in {fact["text"] for fact in checkpoint["lost"]}


def test_the_sessions_list_filters_sessions_whose_latest_checkpoint_lost_facts(api, order_session):
    compact(api, "order", "A late parcel.")
    api.post("/sessions/plain/messages", {"messages": [{"role": "user", "content": "order W1234567"}]})
    api.post("/sessions/kept/messages", {"messages": ORDER_CHAT})
    compact(api, "kept", "Order W9609649, $84.50, 2024-05-03; seat 14C on UA123.")

    everything = api.get("/sessions").json()["items"]
    filtered = api.get("/sessions", query={"lost_facts": "true"}).json()["items"]

    assert {s["key"] for s in everything} == {"order", "plain", "kept"}
    assert [s["key"] for s in filtered] == ["order"]


def test_the_sessions_list_rejects_a_lost_facts_value_that_is_no_boolean(api):
    response = api.get("/sessions", query={"lost_facts": "maybe"})

    assert 400 <= response.status_code < 500
