"""Reviews and review queues in the domain (sessions/store/reviews.py, review_queues.py): a queue is the
sessions list's query string, so it holds what the list shows for it, new sessions included; `next`
hands each reviewer a different session and claims it for them until a review or the claim's end; a
review is checked whole before anything is stored; progress, the CSV, exports, search and the list's
filters see reviews."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from markdown_it import MarkdownIt

from sessions.access.api_keys import create_api_key
from sessions.context.exports import export_json, export_json_chunks, export_jsonl, export_markdown
from sessions.errors import DomainError
from sessions.ingest.append import append_messages
from sessions.ingest.importers.ctxweb_export import parse as parse_export
from sessions.ingest.session_store import update_session
from sessions.models import Event, EventType, Project, Review, ReviewClaim, ReviewQueue, Session
from sessions.store.list_query import SessionListForm
from sessions.store.listing import SessionFilters, find_sessions
from sessions.store.review_queues import (
    CLAIM_DURATION,
    claim_of,
    create_queue,
    next_in_queue,
    queue_filters,
    queue_progress,
    queue_sessions,
    release_claim,
    reviews_csv,
)
from sessions.store.reviews import add_review, session_reviews
from sessions.store.search import SearchFilters, search
from sessions.wire.parsed import Source

pytestmark = pytest.mark.django_db


def make(project, key, metadata=None, text="hello", messages=1) -> Session:
    update_session(project, key, {"metadata": metadata or {}}, "test")
    append_messages(project, key, [{"role": "user", "content": f"{text} {n}"} for n in range(messages)], "test")
    return Session.objects.get(project=project, key=key)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw")


@pytest.fixture
def runs(project):
    """Benchmark runs, oldest first: rewards 0.5, 1, 0 and 2, one whose reward is the text "0.5", one without."""
    return {key: make(project, key, metadata) for key, metadata in [
        ("run-a", {"reward": 0.5}), ("run-b", {"reward": 1}), ("run-c", {"reward": 0}),
        ("run-d", {"reward": 2}), ("run-text", {"reward": "0.5"}), ("run-none", {"model": "m"}),
    ]}


@pytest.fixture
def low_reward(project, alice, runs) -> ReviewQueue:
    return create_queue(project, alice, "Low reward", "meta=reward<1", ["wrong-tool", "rude"])


def counts() -> dict:
    return {"reviews": Review.objects.count(), "events": Event.objects.count(), "claims": ReviewClaim.objects.count(),
            "queues": ReviewQueue.objects.count()}


def keys(sessions) -> list[str]:
    return [s.key for s in sessions]


# --- the queue's sessions ---------------------------------------------------------------------------


def test_a_queue_holds_what_the_list_shows_for_its_query_string(project, low_reward, runs):
    listed = find_sessions([project.pk], SessionListForm(QueryDict("meta=reward<1")).filters())
    assert sorted(keys(queue_sessions(low_reward))) == sorted(keys(listed)) == ["run-a", "run-c"]


def test_a_queue_hands_out_only_matching_sessions_oldest_first(low_reward, alice):
    first = next_in_queue(low_reward, alice)
    add_review(first, alice, "ok", queue=low_reward)
    second = next_in_queue(low_reward, alice)
    add_review(second, alice, "problem", queue=low_reward)

    assert [first.key, second.key] == ["run-a", "run-c"]
    assert next_in_queue(low_reward, alice) is None


def test_a_new_matching_session_joins_the_queue(project, low_reward, alice, runs):
    for session in (runs["run-a"], runs["run-c"]):
        add_review(session, alice, "ok", queue=low_reward)
    assert next_in_queue(low_reward, alice) is None

    make(project, "run-new", {"reward": 0.25})
    make(project, "run-high", {"reward": 5})

    assert next_in_queue(low_reward, alice).key == "run-new"


def test_two_reviewers_get_different_sessions(low_reward, alice, bob):
    mine, theirs = next_in_queue(low_reward, alice), next_in_queue(low_reward, bob)

    assert {mine.key, theirs.key} == {"run-a", "run-c"}
    assert next_in_queue(low_reward, create_api_key(low_reward.project, "third")[0]) is None


def test_asking_again_gives_back_the_session_one_holds_and_renews_the_claim(low_reward, alice):
    now = timezone.now()
    first = next_in_queue(low_reward, alice, now=now)
    again = next_in_queue(low_reward, alice, now=now + timedelta(minutes=20))

    assert again.pk == first.pk
    assert claim_of(low_reward, first, alice).until == now + timedelta(minutes=20) + CLAIM_DURATION
    assert ReviewClaim.objects.count() == 1


def test_a_claim_expires_and_the_session_goes_to_the_next_reviewer(low_reward, alice, bob):
    now = timezone.now()
    held = next_in_queue(low_reward, alice, now=now)
    other = next_in_queue(low_reward, bob, now=now)
    add_review(other, bob, "ok", queue=low_reward)

    assert next_in_queue(low_reward, bob, now=now + CLAIM_DURATION - timedelta(seconds=1)) is None
    taken_over = next_in_queue(low_reward, bob, now=now + CLAIM_DURATION + timedelta(seconds=1))

    assert taken_over.pk == held.pk
    assert ReviewClaim.objects.get(queue=low_reward, session=held).holder == f"user:{bob.pk}"


def test_a_reviewed_session_is_not_handed_out_again_and_its_claim_ends(low_reward, alice, bob):
    session = next_in_queue(low_reward, alice)
    add_review(session, alice, "problem", ["rude"], queue=low_reward)

    assert not ReviewClaim.objects.filter(session=session).exists()
    assert next_in_queue(low_reward, bob).pk != session.pk
    assert next_in_queue(low_reward, alice) is None  # the other one is bob's


def test_a_review_outside_the_queue_does_not_take_the_session_out_of_it(low_reward, alice, runs):
    add_review(runs["run-a"], alice, "ok")
    assert next_in_queue(low_reward, alice).key == "run-a"


def test_a_session_given_back_goes_to_the_next_reviewer(low_reward, alice, bob):
    first = next_in_queue(low_reward, alice)
    release_claim(low_reward, first, alice)
    assert next_in_queue(low_reward, bob).pk == first.pk


def test_an_api_key_claims_for_itself_even_beside_a_key_of_the_same_name(project, low_reward):
    one, two = create_api_key(project, "ci")[0], create_api_key(project, "ci")[0]
    assert next_in_queue(low_reward, one).pk != next_in_queue(low_reward, two).pk


def test_a_session_being_imported_is_not_handed_out(project, low_reward, alice, runs):
    Session.objects.filter(pk=runs["run-a"].pk).update(being_imported=True)
    assert next_in_queue(low_reward, alice).key == "run-c"


def test_handing_out_the_next_session_costs_the_same_queries_for_a_big_queue(project, alice):
    queue = create_queue(project, alice, "All", "")
    make(project, "s-0")

    def cost():
        with CaptureQueriesContext(connection) as ctx:
            session = next_in_queue(queue, alice)
        add_review(session, alice, "ok", queue=queue)
        return len(ctx.captured_queries)

    few = cost()
    for n in range(1, 40):
        make(project, f"s-{n}")
    assert cost() == few


# --- the queue's filter -----------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "tags=refund",  # not a parameter of the list
    "from=2026-13-45",
    "meta=bad key:1",
    "meta=reward<abc",
    "meta=reward<1e400",
    "meta=reward<true",
    "sort=nonsense",
    "verdict=great",
    "reviewed=maybe",
    "source=ftp",
    "q=" + "x" * 201,
    "project=other",
    "meta=a&meta=b&meta=c&meta=d&meta=e&meta=f",
    "q=" + "x" * 2_001,
    "q=a%00b",
])
def test_a_filter_the_list_would_not_take_is_refused_and_no_queue_is_made(project, alice, text):
    before = counts()
    with pytest.raises(DomainError) as error:
        create_queue(project, alice, "Bad", text)
    assert error.value.code == "invalid_filter" and 400 <= error.value.status < 500
    assert error.value.detail
    assert counts() == before


def test_a_filter_may_be_a_lists_whole_address_query(project, alice, runs):
    queue = create_queue(project, alice, "From the list", "?meta=reward<1&sort=tokens&page=3&size=50&project=default")
    assert queue.filter == "meta=reward<1&sort=tokens&page=3&size=50&project=default"
    assert sorted(keys(queue_sessions(queue))) == ["run-a", "run-c"]


@pytest.mark.parametrize("name, labels, code", [
    ("", [], "invalid_queue"),
    ("x" * 101, [], "invalid_queue"),
    (5, [], "invalid_queue"),
    ("Fine", ["ok", ""], "invalid_queue"),
    ("Fine", ["x" * 51], "invalid_queue"),
    ("Fine", "rude", "invalid_queue"),
    ("Fine", [f"l{n}" for n in range(31)], "invalid_queue"),
    ("Low reward", [], "queue_exists"),
])
def test_a_bad_queue_is_refused_and_nothing_is_stored(project, alice, low_reward, name, labels, code):
    before = counts()
    with pytest.raises(DomainError) as error:
        create_queue(project, alice, name, "", labels)
    assert error.value.code == code
    assert counts() == before


def test_queue_names_are_unique_per_project_only(other_project, alice, low_reward):
    assert create_queue(other_project, alice, "Low reward", "").project == other_project


# --- metadata comparisons in the list ---------------------------------------------------------------


@pytest.mark.parametrize("meta, expected", [
    ("reward<1", ["run-a", "run-c"]),
    ("reward<=1", ["run-a", "run-b", "run-c"]),
    ("reward>1", ["run-d"]),
    ("reward>=0.5", ["run-a", "run-b", "run-d"]),
    ("reward < 0", []),
    ("reward>-1", ["run-a", "run-b", "run-c", "run-d"]),
])
def test_a_metadata_comparison_keeps_numbers_only_on_every_database(project, runs, meta, expected):
    form = SessionListForm(QueryDict(f"meta={meta}"))
    assert form.is_valid(), form.errors
    assert sorted(keys(find_sessions([project.pk], form.filters()))) == expected


def test_a_comparison_reads_nested_keys_and_combines_with_other_filters(project):
    make(project, "deep", {"info": {"score": 3}, "model": "m"})
    make(project, "shallow", {"info": {"score": 9}, "model": "m"})
    filters = SessionListForm(QueryDict("meta=info.score<5&meta=model:m")).filters()
    assert keys(find_sessions([project.pk], filters)) == ["deep"]


def test_a_huge_metadata_number_is_compared_without_error(project):
    Session.objects.filter(pk=make(project, "huge").pk).update(metadata={"reward": 10**400})
    make(project, "small", {"reward": 3})
    assert keys(find_sessions([project.pk], SessionListForm(QueryDict("meta=reward>5")).filters())) == ["huge"]


# --- reviewing ----------------------------------------------------------------------------------------


def test_a_review_is_stored_with_its_event(project, alice, low_reward, runs):
    session = runs["run-a"]
    review = add_review(session, alice, "problem", ["rude", "wrong-tool", "rude"], 2, "  Rude answer.  ", [1],
                        queue=low_reward)

    assert (review.verdict, review.labels, review.score, review.comment, review.seqs, review.reviewer) == \
        ("problem", ["rude", "wrong-tool"], 2, "Rude answer.", [1], "user:alice")
    event = session.events.get(type=EventType.REVIEW_ADDED)
    assert event.actor == "user:alice"
    assert event.data == {"review_id": review.pk, "queue_id": low_reward.pk, "verdict": "problem",
                          "labels": ["rude", "wrong-tool"], "score": 2, "seqs": [1], "comment": "Rude answer."}
    assert list(session_reviews(session)) == [review]


def test_an_api_key_reviews_under_its_name(project, runs):
    key = create_api_key(project, "grader")[0]
    review = add_review(runs["run-a"], key, "ok")
    assert (review.reviewer, review.author) == ("api:grader", None)


def test_form_values_are_read_as_numbers(alice, runs):
    review = add_review(runs["run-a"], alice, "unsure", score="4", seqs=["1"])
    assert (review.score, review.seqs) == (4, [1])


def test_without_a_queue_any_well_formed_label_goes(alice, runs):
    assert add_review(runs["run-a"], alice, "ok", ["anything"]).labels == ["anything"]


@pytest.mark.parametrize("change, code", [
    ({"verdict": "fine"}, "invalid_verdict"),
    ({"verdict": None}, "invalid_verdict"),
    ({"score": 0}, "invalid_score"),
    ({"score": 6}, "invalid_score"),
    ({"score": "x"}, "invalid_score"),
    ({"score": 2.5}, "invalid_score"),
    ({"score": True}, "invalid_score"),
    ({"labels": ["polite"]}, "invalid_label"),
    ({"labels": "rude"}, "invalid_label"),
    ({"labels": [3]}, "invalid_label"),
    ({"seqs": [2]}, "message_not_found"),
    ({"seqs": [0]}, "message_not_found"),
    ({"seqs": ["one"]}, "invalid_seqs"),
    ({"seqs": 1}, "invalid_seqs"),
    ({"comment": "x" * 10_001}, "invalid_comment"),
    ({"comment": "nul \x00 byte"}, "invalid_comment"),
    ({"comment": 5}, "invalid_comment"),
])
def test_a_bad_review_is_refused_with_its_code_and_nothing_is_stored(alice, low_reward, runs, change, code):
    session = next_in_queue(low_reward, alice)
    before = counts()
    arguments = {"verdict": "ok", "labels": ["rude"], "score": 3, "comment": "fine", "seqs": [1], **change}

    with pytest.raises(DomainError) as error:
        add_review(session, alice, queue=low_reward, **arguments)

    assert error.value.code == code and 400 <= error.value.status < 500 and error.value.detail
    assert counts() == before
    assert claim_of(low_reward, session, alice) is not None  # still theirs


def test_a_queue_of_another_project_is_refused(other_project, alice, runs):
    elsewhere = create_queue(other_project, alice, "Elsewhere", "")
    before = counts()
    with pytest.raises(DomainError) as error:
        add_review(runs["run-a"], alice, "ok", queue=elsewhere)
    assert (error.value.code, error.value.status) == ("queue_not_found", 404)
    assert counts() == before


# --- progress and the CSV -----------------------------------------------------------------------------


def test_progress_counts_matching_reviewed_claimed_and_reviews_by_verdict_and_reviewer(
        project, low_reward, alice, bob, runs):
    make(project, "run-e", {"reward": 0.1})
    make(project, "run-f", {"reward": 0.2})
    add_review(next_in_queue(low_reward, alice), alice, "ok", queue=low_reward)
    add_review(next_in_queue(low_reward, bob), bob, "problem", queue=low_reward)
    add_review(runs["run-a"], bob, "problem", queue=low_reward)  # a second review of one session
    next_in_queue(low_reward, alice)  # held, not reviewed
    add_review(runs["run-d"], alice, "ok")  # outside the queue

    progress = queue_progress(low_reward)

    assert (progress.matching, progress.reviewed, progress.remaining, progress.claimed, progress.reviews) == (4, 2, 2, 1, 3)
    assert progress.by_verdict == {"ok": 1, "problem": 2, "unsure": 0}
    assert progress.by_reviewer == [("user:bob", 2), ("user:alice", 1)]
    assert progress.percent == 50 and not progress.done


def test_progress_takes_three_queries_whatever_the_queue_holds(project, alice):
    queue = create_queue(project, alice, "All", "")
    for n in range(5):
        add_review(make(project, f"s-{n}"), alice, ["ok", "problem", "unsure"][n % 3], queue=queue)
    with CaptureQueriesContext(connection) as ctx:
        queue_progress(queue)
    assert len(ctx.captured_queries) <= 3


def read_csv(queue) -> list[list[str]]:
    return list(csv.reader(io.StringIO("".join(reviews_csv(queue)))))


def test_the_csv_has_a_row_per_review(project, alice, low_reward, runs):
    Session.objects.filter(pk=runs["run-a"].pk).update(title="Refund, \"urgent\"\nsecond line")
    review = add_review(Session.objects.get(pk=runs["run-a"].pk), alice, "problem", ["rude", "wrong-tool"], 2,
                        "Said \"no\", twice.\nThen stopped.", [1], queue=low_reward)

    rows = read_csv(low_reward)

    assert rows == [
        ["session", "title", "verdict", "labels", "score", "comment", "seqs", "reviewer", "created_at"],
        ["run-a", "Refund, \"urgent\"\nsecond line", "problem", "rude; wrong-tool", "2",
         "Said \"no\", twice.\nThen stopped.", "1", "user:alice", review.created_at.isoformat()],
    ]


def test_the_csv_writes_cells_a_spreadsheet_would_run_as_text(project, alice):
    queue = create_queue(project, alice, "All", "", ["=cmd", "-x"])
    session = make(project, "-risky", messages=3)
    Session.objects.filter(pk=session.pk).update(title="@SUM(A1)")
    session.refresh_from_db()
    add_review(session, alice, "ok", ["=cmd", "-x"], None, "=HYPERLINK(\"http://evil\")", [1, 3], queue=queue)
    add_review(session, alice, "ok", [], None, "+1", queue=queue)
    add_review(session, alice, "ok", [], None, "@here", queue=queue)

    rows = read_csv(queue)[1:]

    assert [row[:4] for row in rows][0] == ["'-risky", "'@SUM(A1)", "ok", "'=cmd; -x"]
    assert [row[5] for row in rows] == ["'=HYPERLINK(\"http://evil\")", "'+1", "'@here"]
    assert rows[0][4] == "" and rows[0][6] == "1 3"


def test_the_csv_reads_reviews_in_chunks_not_one_query_per_review(project, alice):
    queue = create_queue(project, alice, "All", "")
    for n in range(12):
        add_review(make(project, f"s-{n}"), alice, "ok", queue=queue)
    with CaptureQueriesContext(connection) as ctx:
        assert len(read_csv(queue)) == 13
    assert len(ctx.captured_queries) <= 2


# --- the list, search and exports ---------------------------------------------------------------------


def test_the_list_filters_by_reviewed_and_by_the_latest_verdict(project, alice, runs):
    add_review(runs["run-a"], alice, "problem")
    add_review(runs["run-a"], alice, "ok")  # the latest
    add_review(runs["run-b"], alice, "problem")

    def listed(query):
        form = SessionListForm(QueryDict(query))
        assert form.is_valid(), form.errors
        return sorted(keys(find_sessions([project.pk], form.filters())))

    assert listed("reviewed=yes") == ["run-a", "run-b"]
    assert listed("reviewed=no") == ["run-c", "run-d", "run-none", "run-text"]
    assert listed("verdict=ok") == ["run-a"]
    assert listed("verdict=problem") == ["run-b"]
    assert listed("verdict=unsure") == []
    assert listed("verdict=problem&meta=reward<1") == []


def test_the_list_gives_each_row_its_latest_verdict_and_review_count_in_the_same_query(project, alice, runs):
    add_review(runs["run-a"], alice, "problem")
    add_review(runs["run-a"], alice, "unsure")
    with CaptureQueriesContext(connection) as ctx:
        rows = {s.key: (s.review_verdict, s.review_count)
                for s in find_sessions([project.pk], SessionFilters(), with_reviews=True)}
    assert len(ctx.captured_queries) == 1
    assert rows["run-a"] == ("unsure", 2) and rows["run-b"] == (None, 0)


def test_the_list_filters_by_source(project):
    make(project, "written")
    imported = make(project, "imported")
    Session.objects.filter(pk=imported.pk).update(import_source="runs.jsonl")
    rebuilt = make(project, "rebuilt")
    Session.objects.filter(pk=rebuilt.pk).update(request_count=3, import_source="spans.jsonl")
    for source, expected in [("api", ["written"]), ("import", ["imported"]), ("requests", ["rebuilt"])]:
        assert keys(find_sessions([project.pk], SessionListForm(QueryDict(f"source={source}")).filters())) == expected


def test_q_finds_a_session_by_a_review_comment(project, alice, runs):
    add_review(runs["run-b"], alice, "problem", comment="The agent booked the wrong FLIGHT to Lisbon")
    assert keys(find_sessions([project.pk], SessionFilters(q="wrong flight"))) == ["run-b"]
    assert keys(find_sessions([project.pk], SessionFilters(q="wrong train"))) == []


def test_search_shows_a_review_comment_as_a_hit_of_its_session(project, alice, runs):
    review = add_review(runs["run-b"], alice, "problem", comment="Booked the <wrong> flight", seqs=[1])

    found = search("wrong flight", SearchFilters(project_ids=[project.pk]))

    assert found.total == 1 and [g.session.key for g in found.groups] == ["run-b"]
    hit = found.groups[0].hits[0]
    assert (hit.kind, hit.review, hit.seq) == ("review", review, 1)
    assert "<mark>wrong</mark>" in hit.snippet and "&lt;" in hit.snippet
    assert search("wrong flight", SearchFilters(project_ids=[project.pk], role="user")).total == 0


def test_search_pages_run_from_notes_through_reviews_to_messages(project, alice):
    from sessions.store.notes import add_note

    session = make(project, "mixed", text="refund please", messages=3)
    add_note(session, alice, "refund approved")
    for n in range(3):
        add_review(session, alice, "ok", comment=f"refund {n} checked")
    pages = [search("refund", SearchFilters(project_ids=[project.pk]), page=n, per_page=2) for n in (1, 2, 3, 4)]
    kinds = [[hit.kind for group in page.groups for hit in group.hits] for page in pages]
    assert kinds == [["note", "review"], ["review", "review"], ["message", "message"], ["message"]]
    assert pages[0].total == 7 and not pages[3].has_next


def test_exports_carry_the_reviews(project, alice, low_reward, runs):
    session = runs["run-a"]
    add_review(session, alice, "problem", ["rude"], 2, "Rude.", [1], queue=low_reward)
    add_review(session, alice, "ok")
    expected = [
        {"verdict": "problem", "labels": ["rude"], "score": 2, "comment": "Rude.", "seqs": [1],
         "reviewer": "user:alice", "queue": "Low reward"},
        {"verdict": "ok", "labels": [], "score": None, "comment": "", "seqs": [], "reviewer": "user:alice",
         "queue": None},
    ]

    document = export_json(session)
    streamed = json.loads("".join(export_json_chunks(session)))
    lines = [json.loads(line) for line in export_jsonl(session)]
    markdown = "".join(export_markdown(session))

    for records in (document["reviews"], streamed["reviews"], [x for x in lines if x["type"] == "review"]):
        assert [{k: v for k, v in r.items() if k not in ("created_at", "type")} for r in records] == expected
    assert streamed == document
    assert "## Reviews" in markdown and "**Review** `problem` by `user:alice`" in markdown
    assert "score 2/5 · labels `rude` · about #1 · queue `Low reward`" in markdown and "Rude." in markdown


def test_an_export_with_reviews_imports_back(project, alice, runs):
    add_review(runs["run-a"], alice, "problem", comment="x")
    lines = [json.loads(line) for line in export_jsonl(runs["run-a"])]
    parsed = parse_export(lines, Source.for_file("x.jsonl"))
    assert len(parsed.sessions[0].messages) == 1


def test_hostile_review_text_cannot_change_the_markdown_exports_structure(project, alice):
    session = make(project, "hostile")
    hostile = "```\n# heading\n<script>alert(1)</script>\n- item\n> quote\n[x]: https://evil.example"
    queue = create_queue(project, alice, "q`ueue <b>", "", ["`x` <i>", "# h"])
    add_review(session, alice, "problem", ["`x` <i>", "# h"], 1, hostile, [1], queue=queue)

    tokens = MarkdownIt("commonmark").parse("".join(export_markdown(session)))

    assert [t.tag for t in tokens if t.type == "heading_open"] == ["h1", "h2", "h3"]
    assert not [t for t in tokens if t.type in ("html_block", "bullet_list_open", "link_open")]
    assert not [c for t in tokens if t.children for c in t.children if c.type in ("html_inline", "link_open")]
    assert [t.content for t in tokens if t.type == "fence"][0] == hostile + "\n"


def test_a_project_may_hold_queues_apart_from_another(project, other_project, alice):
    make(other_project, "theirs", {"reward": 0})
    queue = create_queue(project, alice, "Mine", "meta=reward<1")
    assert next_in_queue(queue, alice) is None
    assert queue_filters(project, "").q == ""
    assert Project.objects.count() == 2
