"""Many clients appending to one session at once: seqs stay gapless, nothing is lost."""

import threading

import pytest
from django.db import connection

from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import Event, EventType, Message, Project, Session

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

THREADS = 6
BATCHES = 5


def batch_of(thread: int, batch: int) -> list[dict]:
    call_id = f"call-{thread}-{batch}"
    return [
        {"role": "user", "content": f"question {thread}/{batch}", "id": f"u-{thread}-{batch}"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "name": "lookup", "arguments": f'{{"t": {thread}, "b": {batch}}}'}],
            "id": f"a-{thread}-{batch}",
        },
        {"role": "tool", "tool_call_id": call_id, "content": f"result {thread}/{batch}", "id": f"t-{thread}-{batch}"},
    ]


def append_concurrently(project: Project, key: str) -> list:
    """Every thread appends its batches at the same moment; returns every AppendResult."""
    start = threading.Barrier(THREADS)
    results, errors = [], []

    def client(thread: int):
        try:
            start.wait()
            for batch in range(BATCHES):
                results.append(append_messages(project, key, batch_of(thread, batch), f"client-{thread}"))
        except Exception as exc:  # reported below; a thread's exception would otherwise vanish
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a client is still waiting"
    assert errors == []
    return results


def assert_log_is_whole(key: str, results: list):
    total = THREADS * BATCHES * 3
    session = Session.objects.get(key=key)
    rows = list(Message.objects.filter(session=session).order_by("seq"))

    assert [m.seq for m in rows] == list(range(1, total + 1))
    assert sorted(m.client_id for m in rows) == sorted(
        f"{kind}-{t}-{b}" for kind in "uat" for t in range(THREADS) for b in range(BATCHES)
    )
    assert session.message_count == total
    assert session.raw_tokens == sum(m.tokens for m in rows)

    # Each batch was stored whole, in one run of seqs, and its result paired with its own call.
    assert len(results) == THREADS * BATCHES
    for result in results:
        assert [m.status for m in result.messages] == ["stored"] * 3
        first = result.messages[0].seq
        assert [m.seq for m in result.messages] == [first, first + 1, first + 2]
    by_seq = {m.seq: m for m in rows}
    for m in rows:
        if m.role == "tool":
            assert by_seq[m.call_seq].call_ids == [m.tool_call_id]
            assert m.call_seq == m.seq - 1
    assert sum(len(m.call_ids) for m in rows) == THREADS * BATCHES
    assert Event.objects.filter(session=session, type=EventType.MESSAGES_APPENDED).count() == THREADS * BATCHES


def test_concurrent_batches_to_an_existing_session_keep_seqs_gapless():
    project = Project.objects.get_or_create(name="default")[0]
    update_session(project, "busy", {"title": "Many clients"})

    results = append_concurrently(project, "busy")
    assert_log_is_whole("busy", results)


def test_concurrent_batches_to_a_new_session_create_it_once():
    project = Project.objects.get_or_create(name="default")[0]
    results = append_concurrently(project, "brand-new")

    assert_log_is_whole("brand-new", results)
    assert Session.objects.filter(key="brand-new").count() == 1
    assert sum(r.session_created for r in results) == 1
    assert Event.objects.filter(session__key="brand-new", type=EventType.SESSION_CREATED).count() == 1
