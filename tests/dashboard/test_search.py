"""Search across transcripts down to the message, on SQLite FTS5 and PostgreSQL full-text:
exact phrase first, filters, escaped highlighting, tenant isolation, links, the htmx fragment."""

import tracemalloc
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.models import Message, Session
from sessions.store.search import SearchFilters, search_messages

from .dom import parse

SEARCH = reverse("search")
PHRASE = "The checked bag fee is 35 dollars for this route."
APART = "Your bag was weighed at the bag drop, then checked, checked and checked again before the bag left."
SCRIPT = "<script>alert(1)</script> checked bag"


@pytest.fixture
def corpus(project, other_project):
    """Messages about checked bags in several sessions and both projects; returns {name: Message}."""
    append_messages(project, "bags", [
        {"role": "user", "content": PHRASE},
        {"role": "assistant", "content": APART},
        {"role": "user", "content": "Nothing about luggage here."},
    ], "test")
    append_messages(project, "old-bags", [
        {"role": "user", "content": "Back in January: is a checked bag included?", "created_at": "2024-01-10T10:00:00Z"},
    ], "test")
    append_messages(project, "compacted", [
        {"role": "user", "content": "First question about a checked bag allowance " + "word " * 60},
        {"role": "assistant", "content": "First answer " + "word " * 60},
        {"role": "user", "content": "Second question, no luggage."},
    ], "test")
    compacted = Session.objects.get(project=project, key="compacted")
    assert compact(compacted, force=True, keep_recent_tokens=1, summary="A question about bags.").status == "completed"
    append_messages(project, "scripted", [{"role": "user", "content": SCRIPT}], "test")
    append_messages(other_project, "secret", [
        {"role": "user", "content": "Other project: my checked bag went to Oslo."},
    ], "test")

    def get(key, seq):
        return Message.objects.get(session__key=key, seq=seq)

    return {
        "phrase": get("bags", 1), "apart": get("bags", 2), "old": get("old-bags", 1),
        "compacted": get("compacted", 1), "script": get("scripted", 1), "secret": get("secret", 1),
    }


def message_hits(results):
    """(session key, seq, li) of every message hit on a results page, in page order: under each
    session's heading, its hits."""
    found = []
    for group in results.find_all("section", cls="hit-session"):
        key = group.one("h2").one("a", cls="key").text()
        for li in group.find_all("li", cls="hit"):
            if "note-hit" not in li.classes:
                found.append((key, int(li.one("a", cls="key").text().removeprefix("#")), li))
    return found


def hits(response):
    """(session key, seq) of every message hit, in page order."""
    assert response.status_code == 200, response.status_code
    return [(key, seq) for key, seq, _ in message_hits(parse(response).one(id="search-results"))]


def ident(message):
    return (message.session.key, message.seq)


def test_the_message_with_the_exact_phrase_ranks_first(viewer_client, corpus, project):
    ranked = [ident(h.message) for h in search_messages("checked bag", SearchFilters([project.pk]))]
    exact = [ident(corpus[n]) for n in ("phrase", "old", "compacted", "script")]
    assert set(ranked[:len(exact)]) == set(exact)
    assert ranked[len(exact):] == [ident(corpus["apart"])]
    found = hits(viewer_client.get(SEARCH, {"q": "checked bag"}))
    assert set(found) == set(ranked)
    assert found.index(ident(corpus["phrase"])) < found.index(ident(corpus["apart"]))


def test_an_exact_hit_is_labelled(viewer_client, corpus):
    results = parse(viewer_client.get(SEARCH, {"q": "checked bag"})).one(id="search-results")
    for key, seq, li in message_hits(results):
        assert ("exact phrase" in li.text()) == ((key, seq) != ident(corpus["apart"])), li.text()


def test_search_messages_ranks_the_exact_phrase_first(corpus, project):
    result = search_messages("checked bag", SearchFilters(project_ids=[project.pk]))
    assert result[0].exact
    assert [h.message for h in result].index(corpus["phrase"]) < [h.message for h in result].index(corpus["apart"])
    apart = next(h for h in result if h.message == corpus["apart"])
    assert not apart.exact
    assert all(h.message.session.project_id == project.pk for h in result)


def test_search_messages_with_nothing_to_search_returns_nothing(corpus, project):
    assert search_messages("", SearchFilters(project_ids=[project.pk])) == []
    assert search_messages("   ", SearchFilters(project_ids=[project.pk])) == []
    assert search_messages("!!!", SearchFilters(project_ids=[project.pk])) == []
    assert search_messages("checked bag", SearchFilters(project_ids=[])) == []


def test_search_messages_survives_query_syntax(corpus, project):
    for query in ('"checked', "checked OR", "bag*", "NEAR(checked bag)", "checked -bag", "bag's", "a:b", "'); --"):
        search_messages(query, SearchFilters(project_ids=[project.pk]))


def test_query_syntax_in_the_search_box_never_fails(viewer_client, corpus):
    for query in ('"checked', "checked OR", "bag*", "NEAR(checked bag)", "checked -bag", "(", "'); --", "%", "_"):
        assert viewer_client.get(SEARCH, {"q": query}).status_code == 200, query


def test_the_project_filter_narrows_the_results(superuser_client, corpus):
    everything = hits(superuser_client.get(SEARCH, {"q": "checked bag"}))
    assert ident(corpus["secret"]) in everything and ident(corpus["phrase"]) in everything
    assert hits(superuser_client.get(SEARCH, {"q": "checked bag", "project": "other"})) == [ident(corpus["secret"])]
    assert ident(corpus["secret"]) not in hits(superuser_client.get(SEARCH, {"q": "checked bag", "project": "default"}))


def test_the_role_filter_narrows_the_results(viewer_client, corpus):
    assert hits(viewer_client.get(SEARCH, {"q": "checked bag", "role": "assistant"})) == [ident(corpus["apart"])]
    users = hits(viewer_client.get(SEARCH, {"q": "checked bag", "role": "user"}))
    assert ident(corpus["apart"]) not in users and ident(corpus["phrase"]) in users


def test_the_date_range_narrows_the_results(viewer_client, corpus):
    assert hits(viewer_client.get(SEARCH, {"q": "checked bag", "from": "2024-01-01", "to": "2024-01-31"})) == [ident(corpus["old"])]
    recent = hits(viewer_client.get(SEARCH, {"q": "checked bag", "from": "2024-02-01"}))
    assert ident(corpus["old"]) not in recent and ident(corpus["phrase"]) in recent
    assert hits(viewer_client.get(SEARCH, {"q": "checked bag", "to": "2024-01-09"})) == []


def test_a_malformed_date_is_shown_as_a_form_error_and_the_search_still_runs(viewer_client, corpus):
    response = viewer_client.get(SEARCH, {"q": "checked bag", "from": "2024-13-45", "role": "assistant"})
    assert hits(response) == [ident(corpus["apart"])]
    errors = parse(response).one(id="search-results").one(cls="form-errors").find_all("li")
    assert len(errors) == 1 and "From “2024-13-45”" in errors[0].text() and "YYYY-MM-DD" in errors[0].text()


def test_an_unknown_role_is_a_form_error_and_every_role_is_searched(viewer_client, corpus):
    response = viewer_client.get(SEARCH, {"q": "checked bag", "role": "wizard"})
    assert ident(corpus["apart"]) in hits(response) and ident(corpus["phrase"]) in hits(response)
    assert "Role “wizard”" in parse(response).one(cls="form-errors").text()


def test_the_has_checkpoint_filter_narrows_the_results(viewer_client, corpus):
    assert hits(viewer_client.get(SEARCH, {"q": "checked bag", "has_checkpoint": "1"})) == [ident(corpus["compacted"])]


def test_search_messages_applies_every_filter(corpus, project):
    filters = SearchFilters(project_ids=[project.pk], role="user", since=datetime(2024, 1, 1, tzinfo=UTC),
                            until=datetime(2024, 1, 31, tzinfo=UTC))
    assert [h.message for h in search_messages("checked bag", filters)] == [corpus["old"]]
    assert [h.message for h in search_messages("checked bag", SearchFilters([project.pk], has_checkpoint=True))] == [corpus["compacted"]]


def test_highlighting_escapes_the_content_and_marks_the_terms(viewer_client, corpus):
    response = viewer_client.get(SEARCH, {"q": "checked bag"})
    page = response.content.decode()
    assert "<script>alert(1)</script>" not in page
    results = parse(response).one(id="search-results")
    li = next(li for key, seq, li in message_hits(results) if (key, seq) == ("scripted", 1))
    snippet = li.one(cls="snippet")
    assert snippet.find("script") is None
    assert "<script>alert(1)</script>" in snippet.text()  # shown as text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert [m.text().lower() for m in snippet.find_all("mark")][0].startswith("checked")
    for script in parse(response).find_all("script"):
        assert script.get("src"), "an inline script on the search page"


def test_search_messages_returns_an_escaped_snippet(corpus, project):
    hit = next(h for h in search_messages("checked", SearchFilters([project.pk])) if h.message == corpus["script"])
    assert str(hit.snippet).startswith("&lt;script&gt;alert(1)&lt;/script&gt; <mark>checked</mark>")
    assert "<script>" not in str(hit.snippet)


def test_a_query_that_looks_like_html_is_escaped_on_the_page(viewer_client, corpus):
    response = viewer_client.get(SEARCH, {"q": "<script>alert(1)</script> checked"})
    assert response.status_code == 200
    for script in parse(response).find_all("script"):
        assert script.get("src")
    assert "<script>alert(1)</script>" not in response.content.decode()


def test_a_project_the_user_is_not_in_never_appears(viewer_client, outsider_client, corpus):
    assert ident(corpus["secret"]) not in hits(viewer_client.get(SEARCH, {"q": "checked bag"}))
    assert hits(viewer_client.get(SEARCH, {"q": "Oslo"})) == []
    assert hits(viewer_client.get(SEARCH, {"q": "Oslo", "project": "other"})) == []
    assert hits(outsider_client.get(SEARCH, {"q": "checked bag"})) == [ident(corpus["secret"])]
    assert hits(outsider_client.get(SEARCH, {"q": "checked bag", "project": "default"})) == []


def test_a_user_without_projects_finds_nothing(make_user, corpus):
    from .conftest import make_client

    assert hits(make_client(make_user("nobody")).get(SEARCH, {"q": "checked bag"})) == []


def test_results_link_to_the_message_on_the_session_page(viewer_client, corpus):
    results = parse(viewer_client.get(SEARCH, {"q": "checked bag"})).one(id="search-results")
    for key, seq, li in message_hits(results):
        # The words go along, for the session page to mark them in the message.
        assert li.one("a", cls="key").get("href") == f"/p/default/s/{key}/?seq={seq}&q=checked%20bag#m-{seq}"
    phrase = corpus["phrase"]
    page = parse(viewer_client.get(f"/p/default/s/bags/?seq={phrase.seq}"))
    assert "target" in page.one("article", id=f"m-{phrase.seq}").classes


def test_an_htmx_request_for_the_results_gets_only_the_fragment(viewer_client, corpus):
    response = viewer_client.get(SEARCH, {"q": "checked bag"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="search-results")
    assert response.status_code == 200
    text = response.content.decode()
    assert text.lstrip().startswith('<div id="search-results">')
    assert "<html" not in text and "<form" not in text
    assert ident(corpus["phrase"]) in hits(response)


def test_the_search_page_without_a_query_shows_the_form(viewer_client, corpus):
    doc = parse(viewer_client.get(SEARCH))
    form = doc.one("form", cls="filters")
    names = {e.get("name") for e in form.iter() if e.get("name")}
    assert {"q", "project", "role", "from", "to", "has_checkpoint"} <= names
    assert doc.one(id="search-results").find("li") is None


def test_words_written_inside_angle_brackets_are_found_on_every_database(viewer_client, project):
    """LLM transcripts are full of XML-style tags (<thinking>, <tool_call>); their words are words."""
    append_messages(project, "tags", [
        {"role": "assistant", "content": "<thinking>refund the customer</thinking> Your refund is on its way."},
    ], "test")
    assert hits(viewer_client.get(SEARCH, {"q": "thinking"})) == [("tags", 1)]
    assert [h.message.seq for h in search_messages("thinking", SearchFilters([project.pk]))] == [1]


def test_a_message_appended_later_is_found(viewer_client, corpus, project):
    assert hits(viewer_client.get(SEARCH, {"q": "zeppelin"})) == []
    append_messages(project, "bags", [{"role": "user", "content": "Can I bring a zeppelin model?"}], "test")
    assert hits(viewer_client.get(SEARCH, {"q": "zeppelin"})) == [("bags", 4)]


def test_the_database_in_use_has_its_full_text_index(db):
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE name = 'ctx_message_fts'")
        else:
            assert connection.vendor == "postgresql"
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'message_search_vector'")
            assert "gin (search_vector)" in (cursor.fetchone() or ("",))[0]
            cursor.execute("SELECT attname FROM pg_attribute WHERE attrelid = 'ctx_sessions_message'::regclass"
                           " AND attname = 'search_vector' AND attgenerated = 's'")
        assert cursor.fetchone() is not None


def test_search_finds_a_message_stored_after_every_migration(db):
    """Each migration that makes SQLite rebuild the message table drops its triggers; the full-text
    index must still follow new messages once every migration has run (the test database is migrated)."""
    from sessions.ingest.append import append_messages
    from sessions.models import Project
    from sessions.store.search import SearchFilters, search_messages

    project = Project.objects.get_or_create(name="search-after-migrations")[0]
    append_messages(project, "after", [{"role": "user", "content": "a quokka in zanzibar"}])

    hits = search_messages("quokka zanzibar", SearchFilters(project_ids=[project.pk]))

    assert [h.message.text for h in hits] == ["a quokka in zanzibar"]


def test_hits_in_long_messages_read_only_a_window_of_each(viewer_client, project):
    text = "filler words here " * 11_000 + "the lost suitcase turned up in Porto " + "more filler " * 16_000
    append_messages(project, "long", [{"role": "user", "content": text}] * 12, "test")
    viewer_client.get(SEARCH, {"q": "suitcase Porto"})  # warm: templates, URL resolvers

    tracemalloc.start()
    try:
        response = viewer_client.get(SEARCH, {"q": "suitcase Porto"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    snippets = parse(response).one(id="search-results").find_all("p", cls="snippet")
    assert len(snippets) == 12
    assert "<mark>suitcase</mark>" in response.content.decode() and "Porto" in snippets[0].text()
    assert snippets[0].text().startswith("… ") and snippets[0].text().endswith(" …")
    assert len(snippets[0].text()) < 300
    # The 12 whole rows (text and content, 400,000 characters each) were about 10 MB.
    assert peak < 3_000_000
