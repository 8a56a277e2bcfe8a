"""Every message's header has a "copy link" beside its permalink: a plain link to the message's
address without JavaScript (static/ctxweb.js copies the absolute address instead)."""

from .dom import parse


def test_every_message_has_a_copy_link_to_its_permalink(viewer_client, story):
    page = parse(viewer_client.get(story.url(seq=story.result)))
    articles = page.find_all("article", cls="msg")
    assert articles
    for article in articles:
        seq = article.get("data-seq")
        header = article.one("header")
        copy = header.one("a", cls="copy-link")
        assert copy.get("href") == header.one("a", cls="permalink").get("href") == f"/p/default/s/story/?seq={seq}#m-{seq}"
        assert copy.get("data-copy-link") is not None
        assert copy.text() == "copy link" and copy.get("aria-label") == f"copy link to message {seq}"
