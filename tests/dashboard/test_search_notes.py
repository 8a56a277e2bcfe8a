"""Support staff's journeys through search: notes are found as note hits, results come grouped by
session in a stable order and in pages, and the sessions list's q finds tags and notes, the same in the
API's list. On SQLite and PostgreSQL."""

import pytest
from django.urls import reverse

from sessions.ingest.append import append_messages
from sessions.models import Session
from sessions.store.notes import add_note, set_tags
from sessions.store.search import SearchFilters, search, search_messages, search_notes

from .conftest import make_client
from .dom import parse

SEARCH = reverse("search")
LIST = reverse("sessions")


def session_of(project, key, *texts):
    append_messages(project, key, [{"role": "user" if i % 2 == 0 else "assistant", "content": t}
                                   for i, t in enumerate(texts)], "test")
    return Session.objects.get(project=project, key=key)


@pytest.fixture
def noted(project, other_project, viewer_user, outsider_user):
    """Sessions whose messages never say "wombat" but whose notes do, in both projects."""
    lost = session_of(project, "lost-bag", "My bag did not arrive.", "We are tracing it.")
    late = session_of(project, "late-flight", "The flight is late.", "Sorry about that.")
    theirs = session_of(other_project, "theirs", "Something else.")
    on_message = add_note(lost, viewer_user, "Wombat sticker on the bag, per the <b>customer</b>", seq=2)
    on_session = add_note(late, viewer_user, "Customer mentioned a wombat plush in the cabin.")
    hidden = add_note(theirs, outsider_user, "Wombat in another project")
    return {"lost": lost, "late": late, "theirs": theirs, "on_message": on_message, "on_session": on_session,
            "hidden": hidden}


def groups(response):
    """[(session key, [hit text, ...]), ...] of a results page, in page order."""
    assert response.status_code == 200, response.status_code
    results = parse(response).one(id="search-results")
    return [(g.one("h2").one("a", cls="key").text(), [li for li in g.find_all("li", cls="hit")])
            for g in results.find_all("section", cls="hit-session")]


def test_a_note_on_a_message_is_found_and_links_to_the_message_with_the_words(viewer_client, noted):
    found = dict(groups(viewer_client.get(SEARCH, {"q": "wombat sticker"})))

    assert list(found) == ["lost-bag"]
    (li,) = found["lost-bag"]
    assert "note-hit" in li.classes and "note" in li.one(cls="note-badge").text()
    assert "by viewer" in li.text()
    link = li.one("a", cls="key")
    assert link.text() == "#2"
    assert link.get("href") == "/p/default/s/lost-bag/?seq=2&q=wombat%20sticker#m-2"
    snippet = li.one(cls="snippet")
    assert [m.text() for m in snippet.find_all("mark")] == ["Wombat sticker"]  # the phrase, marked once
    assert snippet.find("b") is None and "&lt;b&gt;customer&lt;/b&gt;" in parse_raw(viewer_client, "wombat sticker")


def parse_raw(client, q):
    return client.get(SEARCH, {"q": q}).content.decode()


def test_a_note_on_the_session_links_to_the_note_on_the_session_page(viewer_client, noted):
    found = dict(groups(viewer_client.get(SEARCH, {"q": "plush"})))

    (li,) = found["late-flight"]
    link = li.one("a", cls="key")
    assert link.text() == "session"
    assert link.get("href") == f"/p/default/s/late-flight/?q=plush#session-note-{noted['on_session'].pk}"
    page = parse(viewer_client.get(link.get("href")))
    assert page.one("li", id=f"session-note-{noted['on_session'].pk}") is not None


def test_notes_of_projects_the_reader_is_not_in_are_never_found(viewer_client, outsider_client, noted):
    assert [key for key, _ in groups(viewer_client.get(SEARCH, {"q": "wombat"}))] == ["lost-bag", "late-flight"]
    assert [key for key, _ in groups(outsider_client.get(SEARCH, {"q": "wombat"}))] == ["theirs"]
    assert [key for key, _ in groups(viewer_client.get(SEARCH, {"q": "wombat", "project": "other"}))] == []


def test_a_note_matches_when_it_holds_every_word_in_any_case(project, noted):
    filters = SearchFilters([project.pk])
    assert [h.note for h in search_notes("WOMBAT bag", filters)] == [noted["on_message"]]
    assert [h.note for h in search_notes("wombat giraffe", filters)] == []
    assert search_notes("", filters) == [] and search_notes("!!!", filters) == []


def test_the_role_filter_keeps_notes_on_messages_of_that_role(project, noted):
    assert [h.note for h in search_notes("wombat", SearchFilters([project.pk], role="assistant"))] == [noted["on_message"]]
    assert search_notes("wombat", SearchFilters([project.pk], role="user")) == []


def test_notes_come_first_then_messages_each_session_once_under_its_heading(viewer_client, project, noted, viewer_user):
    session_of(project, "zoo", "A wombat escaped from the zoo.", "Which wombat?")
    add_note(noted["lost"], viewer_user, "Second wombat note on the session")

    found = groups(viewer_client.get(SEARCH, {"q": "wombat"}))

    keys = [key for key, _ in found]
    assert keys == ["lost-bag", "late-flight", "zoo"]  # no heading twice
    lost = found[0][1]
    assert [li.one("a", cls="key").text() for li in lost] == ["session", "#2"]  # notes on the session first
    assert sorted(li.one("a", cls="key").text() for li in found[2][1]) == ["#1", "#2"]  # best first
    assert all("note-hit" not in li.classes for li in found[2][1])
    heading = parse(viewer_client.get(SEARCH, {"q": "wombat"})).find_all("section", cls="hit-session")[0].one("h2")
    assert "2 hits" in heading.text()


def test_equal_ranks_come_in_session_then_seq_order(project):
    same = "The quokka smiled at the camera."
    sessions = [session_of(project, f"q{n}", same, "filler words here", same) for n in (3, 1, 2)]

    ranked = [(h.message.session_id, h.message.seq) for h in search_messages("quokka", SearchFilters([project.pk]))]

    assert ranked == sorted((s.pk, seq) for s in sessions for seq in (1, 3))
    assert ranked == [(h.message.session_id, h.message.seq) for h in search_messages("quokka", SearchFilters([project.pk]))]


def test_pages_of_hits_neither_overlap_nor_leave_any_out(project, viewer_user):
    session = session_of(project, "many", *[f"Platypus sighting number {n}" for n in range(7)])
    add_note(session, viewer_user, "platypus note one")
    add_note(session, viewer_user, "platypus note two", seq=3)
    filters = SearchFilters([project.pk])

    pages = [search("platypus", filters, page=n, per_page=3) for n in (1, 2, 3)]

    seen = [(h.kind, h.note.pk if h.kind == "note" else h.message.seq) for p in pages for g in p.groups for h in g.hits]
    assert [kind for kind, _ in seen] == ["note", "note"] + ["message"] * 7
    assert len(set(seen)) == 9
    assert [p.has_next for p in pages] == [True, True, False]
    assert [p.hit_count for p in pages] == [3, 3, 3]
    assert search("platypus", filters, page=4, per_page=3).groups == []


def test_the_search_page_links_to_the_next_page_and_back(viewer_client, project):
    session_of(project, "long", *[f"Echidna report {n}" for n in range(53)])

    first = parse(viewer_client.get(SEARCH, {"q": "echidna", "role": "user"}))
    assert len(first.find_all("li", cls="hit")) == 27  # the user messages: fewer than a page
    first = parse(viewer_client.get(SEARCH, {"q": "echidna"}))
    assert len(first.find_all("li", cls="hit")) == 50
    more = next(a for a in first.one("nav", cls="pager").find_all("a") if "page=2" in a.get("href"))
    assert "q=echidna" in more.get("href")
    second = parse(viewer_client.get(SEARCH + more.get("href")))
    seqs = [li.one("a", cls="key").text() for li in second.find_all("li", cls="hit")]
    assert seqs == ["#51", "#52", "#53"]
    assert any("page=1" in a.get("href") for a in second.one("nav", cls="pager").find_all("a"))


def test_a_silly_page_number_shows_the_first_page(viewer_client, noted):
    for page in ("0", "-3", "abc", "99999999999"):
        response = viewer_client.get(SEARCH, {"q": "wombat", "page": page})
        assert response.status_code == 200
        assert [key for key, _ in groups(response)] == ["lost-bag", "late-flight"]


# --- the sessions list's q ---------------------------------------------------------------------


def list_keys(response) -> list[str]:
    assert response.status_code == 200, response.status_code
    return [a.text() for a in parse(response).one(id="session-rows").find_all("a", cls="key")]


def test_a_tag_typed_into_the_list_search_finds_the_sessions_with_that_tag(viewer_client, project, viewer_user):
    tagged = session_of(project, "tagged-one", "hello")
    session_of(project, "untagged", "hello")
    set_tags(tagged, viewer_user, ["vip-customer"])

    assert list_keys(viewer_client.get(LIST, {"q": "vip-customer"})) == ["tagged-one"]
    assert list_keys(viewer_client.get(LIST, {"q": "VIP-Customer "})) == ["tagged-one"]
    assert list_keys(viewer_client.get(LIST, {"q": "vip"})) == []  # a whole tag name, not part of one


def test_words_of_a_note_typed_into_the_list_search_find_its_session(viewer_client, outsider_client, noted):
    assert list_keys(viewer_client.get(LIST, {"q": "wombat"})) in (["late-flight", "lost-bag"], ["lost-bag", "late-flight"])
    assert list_keys(viewer_client.get(LIST, {"q": "sticker wombat"})) == ["lost-bag"]
    assert list_keys(outsider_client.get(LIST, {"q": "wombat"})) == ["theirs"]


def test_a_tag_of_another_project_is_not_matched_in_the_list(project, other_project, make_user, viewer_user, outsider_user):
    mine = session_of(project, "mine", "hello")
    theirs = session_of(other_project, "theirs-tagged", "hello")
    set_tags(mine, viewer_user, ["shared-name"])
    set_tags(theirs, outsider_user, ["shared-name"])
    both = make_user("both")
    from sessions.models import Membership

    Membership.objects.create(user=both, project=project, role="viewer")
    Membership.objects.create(user=both, project=other_project, role="viewer")
    client = make_client(both)
    assert sorted(list_keys(client.get(LIST, {"q": "shared-name"}))) == ["mine", "theirs-tagged"]
    assert list_keys(client.get(LIST, {"q": "shared-name", "project": "default"})) == ["mine"]


def test_the_search_page_takes_as_many_queries_for_many_hits_as_for_one(viewer_client, project, viewer_user):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    one = session_of(project, "one-hit", "A lone capybara.")
    add_note(one, viewer_user, "capybara noted")
    with CaptureQueriesContext(connection) as few:
        assert viewer_client.get(SEARCH, {"q": "capybara"}).status_code == 200
    for n in range(12):
        session = session_of(project, f"herd-{n}", "A capybara here.", "Another capybara there.")
        add_note(session, viewer_user, f"capybara note {n}", seq=1)
    with CaptureQueriesContext(connection) as many:
        response = viewer_client.get(SEARCH, {"q": "capybara"})
    assert len(groups(response)) == 13
    assert len(many) == len(few)
