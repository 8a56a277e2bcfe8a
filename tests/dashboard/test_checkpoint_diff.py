"""The compaction diff: for a checkpoint, what left the model input, what replaced it and
what stayed."""

from django.urls import reverse

from .conftest import SYSTEM_TEXT, build_story
from .dom import parse


def diff_url(story, checkpoint_id):
    return reverse("checkpoint_diff", args=[story.session.project.name, story.session.key, checkpoint_id])


def diff(client, story, checkpoint):
    response = client.get(diff_url(story, checkpoint.pk))
    assert response.status_code == 200, response.status_code
    return parse(response)


def seqs(section):
    return [int(a.one("a", cls="permalink").text().lstrip("#")) for a in section.find_all("article", cls="entry")
            if a.find("a", cls="permalink")]


def test_the_first_checkpoint_shows_what_left_what_replaced_it_and_what_stayed(viewer_client, story):
    doc = diff(viewer_client, story, story.first)
    cp = story.first
    left = doc.one("section", cls="diff-left")
    assert seqs(left) == [m.seq for m in story.session.messages.filter(seq__range=(cp.first_seq, cp.last_seq))
                          .exclude(role="system").order_by("seq")]
    assert left.find("article", cls="summary") is None  # nothing before the first checkpoint
    replaced = doc.one("section", cls="diff-summary")
    assert " ".join(cp.summary.split()) in replaced.text()
    assert f"covering messages 1–{cp.last_seq}" in replaced.text()
    stayed = doc.one("section", cls="diff-stayed")
    assert seqs(stayed) == list(range(cp.last_seq + 1, cp.created_at_seq + 1))


def test_a_later_checkpoint_shows_the_previous_summary_leaving_with_its_messages(viewer_client, story):
    doc = diff(viewer_client, story, story.second)
    left = doc.one("section", cls="diff-left")
    previous = left.one("article", cls="summary")
    assert f"checkpoint {story.first.number}" in previous.text()
    assert " ".join(story.first.summary.split()) in previous.text()
    assert seqs(left) == list(range(story.second.first_seq, story.second.last_seq + 1))
    assert seqs(doc.one("section", cls="diff-stayed")) == list(range(story.second.last_seq + 1, story.second.created_at_seq + 1))
    links = [a.get("href") for a in doc.find_all("a")]
    assert diff_url(story, story.first.pk) in links


def test_the_first_checkpoint_links_to_the_one_that_extends_it(viewer_client, story):
    links = [a.get("href") for a in diff(viewer_client, story, story.first).find_all("a")]
    assert diff_url(story, story.second.pk) in links


def test_a_stored_system_message_in_the_range_is_not_listed_as_having_left(viewer_client, story):
    # Instructions are never covered by a checkpoint: #1 (a system message) is inside the first
    # checkpoint's range but did not leave the input.
    assert story.session.messages.get(seq=1).role == "system"
    assert story.first.first_seq == 1
    left = diff(viewer_client, story, story.first).one("section", cls="diff-left")
    assert SYSTEM_TEXT not in left.text()
    assert 1 not in seqs(left)


def test_the_diff_states_the_compaction_figures(viewer_client, story):
    head = diff(viewer_client, story, story.second).one("section", cls="session-head")
    text = head.text()
    assert str(story.second.tokens_before) in text and str(story.second.tokens_after) in text
    assert "max_tokens 4000" in text and "keep_recent_tokens 200" in text


def test_each_message_links_to_its_place_in_the_raw_log(viewer_client, story):
    left = diff(viewer_client, story, story.first).one("section", cls="diff-left")
    for article in left.find_all("article", cls="entry"):
        link = article.find("a", cls="permalink")
        if link is not None:
            seq = link.text().lstrip("#")
            assert link.get("href") == story.url(seq=seq) + f"#m-{seq}"


def test_the_diff_of_an_unknown_checkpoint_is_404(viewer_client, story):
    assert viewer_client.get(diff_url(story, 999_999)).status_code == 404


def test_the_diff_of_another_sessions_checkpoint_is_404(viewer_client, story, project):
    other = build_story(project, "story-two")
    assert viewer_client.get(diff_url(story, other.first.pk)).status_code == 404


def test_an_outsider_gets_404(outsider_client, story):
    response = outsider_client.get(diff_url(story, story.first.pk))
    assert response.status_code == 404
    assert story.first.summary.encode() not in response.content
