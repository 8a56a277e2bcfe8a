"""The salient-literal extractor (sessions/context/facts.py): what it finds, of which kind, and what it does not."""

from sessions.context import facts as facts_module
from sessions.context.facts import Tally, extract, not_in_summary, ranked, report, tally


class Msg:
    def __init__(self, seq, text, tool_calls=()):
        self.seq, self.text, self.tool_calls = seq, text, list(tool_calls)


TEXT = (
    "My order W9609649 was charged $1,250.00 on 2024-05-03 (May 5, 2024 for the refund). Write to "
    "mia.li@example.com or see https://example.com/orders/42. The log is /srv/app/config.yaml and "
    "sessions/models.py changed in commit 3f2a9bc1. Ticket #48213, user mia_li_3668, flight UA123 with "
    "2 bags of 23 kg. She said \"please do not cancel\". Ask Omar Davis."
)


def test_it_finds_each_kind_of_salient_literal_in_order():
    found = [(f.text, f.kind) for f in extract(TEXT)]

    assert found == [
        ("W9609649", "identifier"), ("$1,250.00", "amount"), ("2024-05-03", "date"), ("May 5, 2024", "date"),
        ("mia.li@example.com", "email"), ("https://example.com/orders/42", "url"),
        ("/srv/app/config.yaml", "path"), ("sessions/models.py", "path"), ("3f2a9bc1", "hash"),
        ("#48213", "identifier"), ("mia_li_3668", "identifier"), ("UA123", "identifier"),
        ("2 bags", "quantity"), ("23 kg", "quantity"), ("please do not cancel", "quoted"), ("Omar Davis", "name"),
    ]


def test_it_ignores_json_punctuation_sentence_openers_and_plain_words():
    text = '{"status": "on time", "seats": 100, "gate": "B"} The Flight was fine. It is ok.'

    assert [(f.text, f.kind) for f in extract(text)] == [("on time", "quoted")]


def test_the_same_text_always_gives_the_same_facts():
    assert extract(TEXT) == extract(TEXT)


def test_a_report_counts_what_a_summary_carries_ignoring_case_and_spacing():
    messages = [Msg(1, "Order W9609649 for $84.50"), Msg(2, "Seat 14C on UA123", [
        {"id": "c", "name": "seat", "arguments": '{"flight": "UA123"}'}])]

    facts = report("order w9609649 was paid; seat  14C.", messages)

    assert facts.kept == 2
    assert [(t.text, t.count, t.seqs) for t in facts.lost] == [("UA123", 2, [2]), ("$84.50", 1, [1])]


def test_a_message_s_facts_are_extracted_once_however_often_it_is_tallied(monkeypatch):
    """A compaction by the extractive summarizer tallies the covered messages for the summary and again
    for its report: the second tally reads what the first extracted."""
    messages = [Msg(1, "Order W9609649 for $84.50"), Msg(2, "Seat 14C on UA123")]
    calls = []
    monkeypatch.setattr(facts_module, "extract", lambda text: calls.append(text) or extract(text))

    first = {key: (t.text, t.count, t.seqs) for key, t in tally(messages).items()}
    again = {key: (t.text, t.count, t.seqs) for key, t in tally(messages).items()}

    assert first == again and len(first) == 4
    assert len(calls) == 2  # once per message
    assert report("order w9609649", messages).kept == 1


def test_ranking_puts_the_most_repeated_then_the_most_recent_first():
    tallies = [Tally("A1", "identifier", 1, [1], 1), Tally("B2", "identifier", 3, [2], 2),
               Tally("C3", "identifier", 1, [9], 9)]

    assert [t.text for t in ranked(tallies)] == ["B2", "C3", "A1"]


def test_not_in_summary_keeps_what_the_current_summary_still_lacks():
    class Cp:
        def __init__(self, pk, last_seq, summary, lost):
            self.pk, self.last_seq, self.summary, self.lost_facts = pk, last_seq, summary, lost
            self.number = pk - 40  # ids are global, numbers count within the session

    first = Cp(41, 4, "short", [{"text": "W1234567", "kind": "identifier", "count": 1, "seqs": [2]},
                               {"text": "UA123", "kind": "identifier", "count": 1, "seqs": [3]}])
    second = Cp(42, 8, "UA123 again", [{"text": "$5", "kind": "amount", "count": 1, "seqs": [6]}])

    lost = not_in_summary([second, first], second)

    assert [(f["text"], f["checkpoint_id"], f["checkpoint_number"]) for f in lost] == [("W1234567", 41, 1), ("$5", 42, 2)]
    assert not_in_summary([first], None) == []
