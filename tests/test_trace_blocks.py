"""Trace reads only the blocks of messages whose trigrams can hold the string (sessions/store/trace_blocks.py,
issue 42 item 3): the same answer as reading every message, on real transcripts and on text the databases'
case rules fold; blocks written by the task an append enqueues once it fills one; blocks not written yet,
and the messages after the last whole block, read as before."""

import io
import logging
import random
import re

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.context.facts import extract
from sessions.context.trace import trace
from sessions.ingest.append import append_messages
from sessions.models import Project, Session, TraceBlock
from sessions.store import trace_blocks
from sessions.store.trace_blocks import BLOCK, Scan, index_session, query_grams, scan_ranges
from tests.conftest import on_postgresql

pytestmark = pytest.mark.django_db

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima")


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 8 messages, 4 to a span: the shapes of a million messages in a few dozen."""
    monkeypatch.setattr(trace_blocks, "BLOCK", 8)
    monkeypatch.setattr(trace_blocks, "SPAN", 4)


def filler(rng: random.Random, n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": " ".join(rng.choice(WORDS) for _ in range(8))}
            for i in range(n)]


def session_with(messages: list[dict], key: str = "long") -> Session:
    project = Project.objects.get_or_create(name="blocks")[0]
    append_messages(project, key, messages)
    return Session.objects.get(project=project, key=key)


def indexed(seed: int, count: int, planted: dict[int, str]) -> Session:
    """A session of `count` messages of filler, with the texts `planted` at their indexes, its blocks written."""
    messages = filler(random.Random(seed), count)
    for index, text in planted.items():
        messages[index]["content"] = text
    session = session_with(messages)
    index_session(session.pk)
    return session


def found(session: Session, query: str) -> list[tuple[int, str]]:
    result = trace(session, query)
    return [(row.seq, row.excerpt.text) for row in result.rows] + [("truncated", result.truncated)]


def unindexed(session: Session, query: str):
    """What Trace answers reading every message: the blocks set aside for the call."""
    kept = list(TraceBlock.objects.filter(session=session))
    TraceBlock.objects.filter(session=session).delete()
    try:
        return found(session, query)
    finally:
        TraceBlock.objects.bulk_create(kept)


def test_a_string_said_once_is_read_from_its_block_and_the_messages_after_the_last_block(small_blocks):
    rng = random.Random(1)
    messages = filler(rng, 8 * 40 + 5)  # 40 whole blocks, 10 whole spans, 5 messages after them
    messages[100]["content"] += " the quokka from Zanzibar"
    session = session_with(messages)

    assert index_session(session.pk) == 40 + 10
    scan = scan_ranges(session, query_grams(["zanzibar", "quokka"]))

    assert scan.ranges == [(97, 104), (321, 325)]  # message #101's block, and the five after the last block
    assert scan.blocks_read == 10 + 4  # every span's bitset, then the blocks of the one span that can hold it
    assert [row.seq for row in trace(session, "QUOKKA from zanzibar").rows] == [101]


def test_the_statement_that_finds_the_messages_names_only_the_seqs_the_blocks_leave(small_blocks):
    session = indexed(2, 8 * 40, {200: "order W9609649 is late"})

    with CaptureQueriesContext(connection) as queries:
        rows = trace(session, "w9609649").rows

    assert [row.seq for row in rows] == [201]
    named = [re.search(r'"seq" IN \(([^)]*)\)', q["sql"]) for q in queries.captured_queries]
    named = [match.group(1).split(", ") for match in named if match]
    assert named == [[str(seq) for seq in range(201, 209)]]  # message #201's block, and nothing else


def test_blocks_not_written_yet_are_read_like_the_messages_after_the_last_one(small_blocks):
    rng = random.Random(3)
    messages = filler(rng, 8 * 12)
    messages[10]["content"] += " marmalade"  # block 1
    messages[70]["content"] += " marmalade"  # block 8
    session = session_with(messages)
    index_session(session.pk)
    TraceBlock.objects.filter(session=session, number__in=[1, 2]).delete()  # block 1 and span 1 never written

    # Span 0 holds it (block 1); spans 1 and 2 are not written, so their blocks are asked: 4 to 7 rule it
    # out, 8 holds it; blocks 1 and 2 are not written, so read.
    assert scan_ranges(session, query_grams(["marmalade"])).ranges == [(9, 24), (65, 72)]
    assert [row.seq for row in trace(session, "marmalade").rows] == [11, 71]
    assert index_session(session.pk) == 4  # writes them
    assert scan_ranges(session, query_grams(["marmalade"])).ranges == [(9, 16), (65, 72)]


def test_a_string_of_common_trigrams_or_of_none_reads_the_session_in_order(small_blocks):
    session = indexed(4, 8 * 20, {})

    # In nearly every block: read in order, where its first matches come soon; no span rules it out, so
    # every span's bitset and every block's are read.
    assert scan_ranges(session, query_grams(["alpha"])) == Scan(None, 5 + 20)
    assert scan_ranges(session, query_grams(["lima", "echo"])) == Scan(None, 5 + 20)
    assert query_grams(["é", "ab", "*"]) == []  # no three letters or digits: nothing to narrow by
    assert scan_ranges(session, []) == Scan(None)
    assert [row.seq for row in trace(session, "ab").rows] == []


def test_an_append_that_fills_a_block_has_the_task_queue_write_it(django_capture_on_commit_callbacks):
    project = Project.objects.create(name="appends")
    rng = random.Random(5)
    with django_capture_on_commit_callbacks(execute=True):
        append_messages(project, "s", filler(rng, BLOCK - 1))
    session = Session.objects.get(project=project, key="s")
    assert not TraceBlock.objects.filter(session=session).exists()  # no block is whole yet

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        append_messages(project, "s", filler(rng, 2))

    assert len(callbacks) == 1
    assert list(TraceBlock.objects.filter(session=session).values_list("level", "number")) == [(0, 0)]


def test_a_queue_that_cannot_take_the_task_leaves_the_append_stored(django_capture_on_commit_callbacks, monkeypatch,
                                                                    caplog):
    class Down:
        def enqueue(self, *args, **kwargs):
            raise ConnectionError("the queue is down")

    monkeypatch.setattr(trace_blocks, "index_trace_blocks", Down())
    project = Project.objects.create(name="queue-down")
    messages = filler(random.Random(6), BLOCK)
    messages[6]["content"] = "an ocelot"
    with caplog.at_level(logging.ERROR), django_capture_on_commit_callbacks(execute=True):
        result = append_messages(project, "s", messages)

    assert result.stored_count == BLOCK
    assert "could not enqueue the trace index of session" in caplog.text
    session = Session.objects.get(project=project, key="s")
    assert not TraceBlock.objects.filter(session=session).exists()
    assert [row.seq for row in trace(session, "ocelot").rows] == [7]  # read, with no block written


def test_writing_the_blocks_twice_writes_each_once(small_blocks):
    session = session_with(filler(random.Random(7), 8 * 9))

    assert index_session(session.pk) == 9 + 2
    assert index_session(session.pk) == 0
    assert TraceBlock.objects.filter(session=session).count() == 11


# Characters outside ASCII that the databases' case rules read as ASCII letters: the long s and the
# Kelvin sign (RE2's (?i) on SQLite, PostgreSQL's upper), the sharp s and ligatures (ICU's upper).
FOLDING = [
    "ſtop walking", "the \u212aumquat tree", "Straße 12", "the ﬁnal oﬀer", "ıngredients listed",
    "Ärger mit Müller", "注文番号 W9609649 です", 'said "hello\\nworld" twice',
]


@pytest.mark.parametrize("query", [
    "stop walking", "stop", "kumquat tree", "KUMQUAT", "strasse", "straße", "final offer", "final", "ingredients",
    "müller", "MÜLLER", "W9609649", "hello", "hello\\nworld", "st*ing", "the *o of", "ärger mit", "注文番号",
])
def test_text_the_case_rules_fold_is_found_as_without_the_blocks(small_blocks, query):
    rng = random.Random(8)
    messages = filler(rng, 8 * 16)
    for i, text in enumerate(FOLDING):
        messages[9 + i * 13]["content"] = text
    messages[40] = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "name": "note", "arguments": '{"text": "ſtop at Straße 12, \\u212aumquat W9609649"}'}]}
    messages[41] = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    session = session_with(messages)
    index_session(session.pk)

    assert found(session, query) == unindexed(session, query)


def test_every_literal_of_every_transcript_is_found_as_without_the_blocks(small_blocks, imported_files):
    """Real data: the salient literals of the longest sessions of every file in tests/data, each a
    trigram narrower than the whole session, traced with and without the blocks."""
    sessions = []
    for project, _ in imported_files.values():
        sessions += list(Session.objects.filter(project=project, message_count__gte=8 * 3)
                         .order_by("-message_count", "key")[:2])
    assert len(sessions) >= 5
    traced = narrowed = 0
    for session in sessions:
        index_session(session.pk)
        literals = []
        for message in session.messages.order_by("seq")[::3]:
            literals += [f.text for f in extract(message.text or "")[:2]]
        for literal in dict.fromkeys(literals):
            if "*" in literal or len(literal.strip()) < 2 or len(literal) > 200:
                continue
            scan = scan_ranges(session, query_grams(literal.split()))
            narrowed += scan.ranges is not None
            assert found(session, literal) == unindexed(session, literal), (session.key, literal)
            traced += 1
    assert traced >= 40 and narrowed >= 10, (traced, narrowed)


@pytest.mark.skipif(not on_postgresql(), reason="PostgreSQL's upper() and regular expressions")
def test_on_postgresql_its_own_case_rules_agree_with_the_blocks(small_blocks):
    session = indexed(9, 8 * 8, {20: "ſtop and \u212aumquat and ﬁnal"})

    for query in ("stop", "STOP and", "kumquat", "kumquat and", "final", "st*p"):
        assert found(session, query) == unindexed(session, query), query


def test_the_command_writes_the_blocks_of_sessions_stored_before_them(small_blocks):
    session = indexed(10, 8 * 5, {})
    TraceBlock.objects.filter(session=session).delete()  # as a database from before the trace blocks
    out = io.StringIO()

    call_command("trace_blocks", "--project", "blocks", stdout=out)

    assert out.getvalue() == "long: 6 blocks written\n6 blocks written\n"
    assert TraceBlock.objects.filter(session=session).count() == 6
    with pytest.raises(CommandError, match="No project 'nope'"):
        call_command("trace_blocks", "--project", "nope")
