"""The session page's trace box and lost-facts badge, the compaction diff's lost facts, and the
sessions list's filter for sessions whose latest summary lost facts."""

import pytest
from django.urls import reverse

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.models import Session
from tests.api.test_trace import ORDER_CHAT

from .dom import parse

pytestmark = pytest.mark.django_db


@pytest.fixture
def order(project):
    append_messages(project, "order", ORDER_CHAT, "test")
    session = Session.objects.get(project=project, key="order")
    outcome = compact(session, force=True, keep_recent_tokens=1, summary="The user asked about a late parcel.")
    assert outcome.status == "completed", outcome.error
    return Session.objects.select_related("project").get(pk=session.pk), outcome.checkpoint


def url(session, name, *args):
    return reverse(name, args=[session.project.name, session.key, *args])


def test_the_trace_fragment_answers_in_one_sentence_with_links(viewer_client, order):
    session, checkpoint = order

    response = viewer_client.get(url(session, "session_trace"), {"q": "W9609649"}, headers={"HX-Request": "true"})

    assert response.status_code == 200
    doc = parse(response)
    answer = doc.one("p", cls="trace-answer").text()
    assert answer.startswith(f"“W9609649” appears in #1, #2 and #4; they were covered by checkpoint {checkpoint.number}")
    assert "whose summary does not mention it" in answer
    hrefs = [a.get("href") for a in doc.find_all("a")]
    assert f"{session.get_absolute_url()}?seq=1#m-1" in hrefs
    assert url(session, "checkpoint_diff", checkpoint.pk) in hrefs
    assert doc.find("html") is None  # a fragment, not a page
    assert len(doc.one("table", cls="trace-rows").find_all("tr")) == 1 + 3
    assert "does not carry it" in doc.one("table", cls="trace-rows").text()


def test_the_fragment_puts_the_session_page_with_the_trace_in_the_address_bar(viewer_client, order):
    session, _ = order

    response = viewer_client.get(url(session, "session_trace"), {"q": "W96 09"}, headers={"HX-Request": "true"})

    assert response["HX-Push-Url"] == f"{session.get_absolute_url()}?trace=W96+09"


def test_without_htmx_the_trace_is_the_session_page_with_the_answer(viewer_client, order):
    session, _ = order

    response = viewer_client.get(url(session, "session_trace"), {"q": "W9609649"})

    assert response.status_code == 302
    assert response["Location"] == f"{session.get_absolute_url()}?trace=W9609649"
    doc = parse(viewer_client.get(response["Location"]))
    assert doc.one("form", cls="trace-form").one("input", name="q").get("value") == "W9609649"
    assert "appears in #1, #2 and #4" in doc.one("p", cls="trace-answer").text()


def test_the_session_page_shows_a_trace_it_cannot_run_as_a_form_error(viewer_client, order):
    session, _ = order

    response = viewer_client.get(session.get_absolute_url(), {"trace": "x"})

    assert response.status_code == 200
    assert "at least 2 characters" in parse(response).one("p", cls="form-error").text()


def test_a_query_it_cannot_trace_is_a_form_error(viewer_client, order):
    session, _ = order

    response = viewer_client.get(url(session, "session_trace"), {"q": "*"}, headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert "at least 2 characters" in parse(response).one("p", cls="form-error").text()


def test_an_outsider_gets_404_from_the_trace(outsider_client, order):
    session, _ = order

    assert outsider_client.get(url(session, "session_trace"), {"q": "W9609649"}).status_code == 404


def test_the_session_page_has_the_trace_box_and_the_lost_facts_badge(viewer_client, order):
    session, checkpoint = order

    doc = parse(viewer_client.get(session.get_absolute_url()))

    form = doc.one("form", cls="trace-form")
    assert form.get("hx-get") == url(session, "session_trace")
    badge = doc.one("details", cls="lost-facts")
    assert badge.one("summary").text() == f"{checkpoint.facts_lost} facts not in the summary"
    items = badge.find_all("li")
    assert len(items) == checkpoint.facts_lost
    w = next(li for li in items if li.one("code").text() == "W9609649")
    hrefs = [a.get("href") for a in w.find_all("a")]
    assert f"{session.get_absolute_url()}?seq=1#m-1" in hrefs
    assert f"{session.get_absolute_url()}?trace=W9609649#trace-title" in hrefs


def test_the_badge_leaves_out_facts_a_later_summary_carries_again(viewer_client, order, project):
    session, first = order
    append_messages(project, "order", [{"role": "assistant", "content": "Bye."}, {"role": "user", "content": "Bye"}],
                    "test")
    outcome = compact(session, force=True, keep_recent_tokens=1, summary="Late parcel, order W9609649.")
    assert outcome.status == "completed"

    badge = parse(viewer_client.get(session.get_absolute_url())).one("details", cls="lost-facts")

    texts = [li.one("code").text() for li in badge.find_all("li")]
    assert "W9609649" not in texts
    assert "UA123" in texts
    assert badge.one("summary").text() == f"{len(texts)} facts not in the summary"


def test_the_diff_lists_the_facts_its_summary_lost(viewer_client, order):
    session, checkpoint = order

    doc = parse(viewer_client.get(url(session, "checkpoint_diff", checkpoint.pk)))

    lost = doc.one("section", cls="diff-lost")
    assert f"carries {checkpoint.facts_kept} and loses {checkpoint.facts_lost}" in lost.text()
    codes = [c.text() for c in lost.find_all("code")]
    assert codes == [fact["text"] for fact in checkpoint.lost_facts]
    assert "W9609649" in codes


def test_the_sessions_list_filters_sessions_whose_latest_summary_lost_facts(viewer_client, order, project):
    chat = "we are only chatting about the weather, which is nice and mild today " * 3
    append_messages(project, "clean", [{"role": "user", "content": chat}, {"role": "assistant", "content": chat},
                                       {"role": "user", "content": "bye"}], "test")
    clean = Session.objects.get(project=project, key="clean")
    assert compact(clean, force=True, keep_recent_tokens=1, summary="greetings").status == "completed"
    append_messages(project, "plain", [{"role": "user", "content": "order W1"}], "test")

    everything = viewer_client.get(reverse("sessions")).content.decode()
    filtered = viewer_client.get(reverse("sessions"), {"lost_facts": "1"}).content.decode()

    assert all(key in everything for key in ("/s/order/", "/s/clean/", "/s/plain/"))
    assert "/s/order/" in filtered
    assert "/s/clean/" not in filtered
    assert "/s/plain/" not in filtered


def test_the_event_history_says_how_many_facts_a_compaction_lost(viewer_client, order):
    session, checkpoint = order

    doc = parse(viewer_client.get(session.get_absolute_url()))

    assert doc.one("span", cls="lost-count").text() == f"{checkpoint.facts_lost} facts lost"


def test_the_dashboard_marks_the_match_and_escapes_the_text(viewer_client, project):
    """The API gives the excerpt as plain text with the match's offsets; the page escapes the text and
    marks the match itself."""
    append_messages(project, "xss-trace", [{"role": "user", "content": "<script>alert(1)</script> order W1234567"}],
                    "test")
    session = Session.objects.select_related("project").get(project=project, key="xss-trace")
    response = viewer_client.get(url(session, "session_trace"), {"q": "W1234567"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; order <mark>W1234567</mark>" in html
