"""The Markdown export's structure cannot be changed by what it holds: parsed with a CommonMark parser
(markdown-it-py, with GFM tables and strikethrough on), a transcript whose every free text is hostile
(fences of both kinds and any length, headings, setext underlines, raw HTML, link reference definitions,
lists, quotes, tables, line breaks of every kind, very long lines, the XSS corpus) has one heading per
message plus the document's own, no HTML, no list, table or link, and every text verbatim in a fence of
its own (or, on a line of ours, as literal text)."""

import base64
import json
import re
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from markdown_it import MarkdownIt

from sessions.context.checkpoints import create_imported_checkpoint
from sessions.context.exports import export_markdown
from sessions.models import Session
from sessions.store.notes import add_note
from sessions.wire.parts import pretty_arguments
from tests.xss_corpus import PAYLOADS

pytestmark = pytest.mark.django_db

PIXEL = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR").decode()
PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])

HOSTILE: dict[str, str] = {
    "tilde fence": "~~~",
    "tilde fence with info": "before\n~~~~~~~~ python\nafter",
    "backtick fence": "```",
    "backtick fences of every length": "\n".join("`" * n for n in range(3, 12)),
    "indented closing fence": "text\n   ``````   \nmore",
    "long backtick run": "`" * 1_000 + " x",
    "inline backticks": "a `code` and ``double`` and ` lone",
    "atx headings": "# one\n## two\n###### six\n####### seven",
    "heading without text": "#\n##",
    "setext underlines": "Title\n===\nSub\n---",
    "thematic breaks": "***\n---\n___\n- - -",
    "script": "<script>alert(1)</script>",
    "details": "<details open><summary>x</summary>\n\nhidden\n\n</details>",
    "html comment and cdata": "<!-- a\n\nb -->\n<![CDATA[ x ]]>\n<?php echo 1; ?>",
    "html block start": "<div>\n<p onclick=alert(1)>x</p>\n</div>",
    "link reference definition": "[evil]: https://evil.example/ 'title'\n\n[evil]",
    "links and images": "[click](javascript:alert(1)) ![img](https://evil.example/x.png) <https://evil.example>",
    "list markers": "- a\n* b\n+ c\n1. d\n2) e",
    "quote": "> quoted\n>> deeper",
    "table": "| a | b |\n|---|---|\n| 1 | 2 |",
    "emphasis and strikethrough": "**bold** _em_ ~~strike~~ __x__",
    "entities": "&lt;script&gt; &#60;b&#62; &amp; &copy;",
    "backslashes": "\\\\ \\` \\* trailing \\",
    "indented code": "    indented\n\ttabbed",
    "crlf and cr": "one\r\ntwo\rthree\r\n```\r\n# four",
    "trailing cr": "ends with cr\r",
    "unicode line breaks": "a\u2028# b\u2029c\u0085d\x0b\x0ce\x1cf",
    "control characters": "\x01\x02\x1b[31mred\x7f",
    "very long line": "word " * 40_000,
    "only whitespace": " \t ",
    "hostile html corpus": "\n".join(PAYLOADS),
}
# What sits on a line of ours, as long as each may be: the title (300 characters), a message's name, a
# tool call's name and id, an image's media type (200), a checkpoint's summarizer (50).


def cut(text: str, limit: int) -> str:
    return text[:limit] or "x"


def identifier(text: str) -> str:
    # An id or a tool call name must not be empty or blank-only for the API; prefix what is.
    return cut(text if text.strip() else "id" + text, 200)


def commonmark_lines(text: str) -> str:
    """The text as CommonMark reads it: CRLF and CR are line endings."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def one_line(text: str) -> str:
    """A text on a line of ours, as a reader sees it: its line breaks as spaces."""
    return re.sub(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]+", " ", text)


def walk(tokens):
    for token in tokens:
        yield token
        yield from walk(token.children or ())


def build_session(api, project, key: str, hostile: str, author) -> dict:
    """A session whose every free text is `hostile` (or holds it), and what the export must show of it."""
    ident = identifier(hostile)
    api.put(f"/sessions/{key}", {
        "title": cut(hostile, 300) if hostile.strip() else hostile[:299] + "t",
        "metadata": {"note": hostile, hostile[:100]: "value"},
        "instructions": hostile,
        "compaction": {"auto": False},
    })
    messages = [
        {"role": "user", "name": cut(hostile, 200), "content": hostile, "attributes": {"k": hostile}},
        {"role": "assistant", "content": hostile, "reasoning": hostile,
         "tool_calls": [{"id": ident, "name": ident, "arguments": hostile},
                        {"id": "c2", "name": "run", "arguments": {"q": hostile}}]},
        {"role": "tool", "tool_call_id": ident, "content": hostile, "is_error": True},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": hostile}]},
        {"role": "user", "content": [
            {"type": "text", "text": hostile},
            {"type": "image", "url": "https://example.com/a.png?q=" + hostile[:4_000]},
            {"type": "image", "url": PIXEL, "media_type": cut(hostile, 200), "width": 2, "height": 3},
            {"type": "text", "text": hostile + "\nsecond part"}]},
        {"role": "system", "content": hostile},
        {"role": "agent", "content": hostile, "include_in_messages": False},
        {"role": "assistant", "content": "the last word"},
    ]
    response = api.post(f"/sessions/{key}/messages", {"messages": messages})
    assert response.status_code == 200, response.content[:500]
    session = Session.objects.get(project=project, key=key)
    summarizer = cut(hostile, 50)
    checkpoint, _ = create_imported_checkpoint(session, 4, hostile + "\nsummary", summarizer=summarizer)
    note_text = ("note " + hostile)[:10_000]
    add_note(session, author, note_text)
    add_note(session, author, note_text, seq=2)
    session.refresh_from_db()

    # Every text the export fences, in the order it writes them.
    def content_fences(content):
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        return [p["text"] for p in parts if p["type"] == "text" and p["text"].strip()]

    fences = [note_text.strip(), hostile]  # the note on the session, the instructions
    for n, message in enumerate(messages, start=1):
        if message.get("reasoning"):
            fences.append(message["reasoning"])
        fences += content_fences(message["content"])
        fences += [pretty_arguments(a if isinstance(a := call["arguments"], str) else json.dumps(a, ensure_ascii=False))
                   for call in message.get("tool_calls", ())]
        if n == 2:
            fences.append(note_text.strip())
        if n == 4:
            fences.append(checkpoint.summary)  # as stored: an imported summary is stripped
    return {"session": session, "messages": messages, "fences": fences, "summarizer": summarizer}


def check_structure(markdown: str, expected: dict) -> None:
    session, messages = expected["session"], expected["messages"]
    tokens = PARSER.parse(markdown)
    kinds = Counter(t.type for t in walk(tokens))

    # No HTML, and none of the blocks or links that content could have opened.
    for kind in ("html_block", "html_inline", "code_block", "bullet_list_open", "ordered_list_open",
                 "table_open", "link_open", "s_open", "hardbreak", "softbreak", "lheading"):
        assert kinds[kind] == 0, (kind, kinds)

    # Headings: the title, "Notes on the session", and one per message, in order.
    headings = [(t.tag, tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert [tag for tag, _ in headings] == ["h1", "h2"] + ["h3"] * len(messages)
    title, notes_heading, *per_message = [inline for _, inline in headings]
    assert all(child.type == "text" for child in title.children)
    assert "".join(child.content for child in title.children) == one_line(session.title).strip(" \t")
    assert notes_heading.content == "Notes on the session"
    for seq, (inline, message) in enumerate(zip(per_message, messages, strict=True), start=1):
        shown = "".join(c.content for c in inline.children)
        assert shown.startswith(f"#{seq} · {message['role']}"), shown
        if message.get("name"):
            assert shown.startswith(f"#{seq} · {message['role']} · {one_line(message['name'])}".rstrip(" \t")), shown

    # Every text in a fence of its own, verbatim; and nothing else fenced.
    fences = [t for t in walk(tokens) if t.type == "fence"]
    assert [f.content for f in fences] == [commonmark_lines(text + "\n") for text in expected["fences"]]

    # The notes are quotes of a line of ours and their text; the checkpoint sits between two rules.
    quotes = [i for i, t in enumerate(tokens) if t.type == "blockquote_open"]
    assert len(quotes) == 2
    for i in quotes:
        inner = tokens[i + 1: next(j for j in range(i, len(tokens)) if tokens[j].type == "blockquote_close")]
        assert [t.type for t in inner if t.level == 1] == ["paragraph_open", "paragraph_close", "fence"]
    assert kinds["hr"] == 2
    checkpoint_line = next(t for t in tokens if t.type == "inline" and t.content.startswith("**Checkpoint 1**"))
    assert f"({one_line(expected['summarizer'])}, " in "".join(c.content for c in checkpoint_line.children)

    # Images: the http(s) one as an image of ours, the data: one named by its media type, as text.
    images = [t for t in walk(tokens) if t.type == "image"]
    assert len(images) == 1 and images[0].attrs["src"].startswith("https://example.com/a.png?q=")
    named = next(t for t in tokens if t.type == "inline" and t.content.startswith("[image: "))
    assert [c.type for c in named.children] == ["text"] * len(named.children)
    media_type = messages[4]["content"][2]["media_type"]
    assert "".join(c.content for c in named.children) == f"[image: {one_line(media_type)}, 2×3]"


def export(api, key: str) -> str:
    response = api.get(f"/sessions/{key}/export", query={"format": "markdown"})
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def author(db):
    return get_user_model().objects.create_user("support", "support@example.com", "pw")


@pytest.mark.parametrize("hostile", list(HOSTILE.values()), ids=list(HOSTILE))
def test_no_text_can_change_the_structure_of_the_markdown_export(api, project, author, hostile):
    expected = build_session(api, project, "hostile", hostile, author)

    check_structure(export(api, "hostile"), expected)


def test_a_fence_in_one_message_leaves_every_later_message_a_message_of_its_own(api, project, author):
    texts = list(HOSTILE.values())
    messages = [{"role": "user" if n % 2 else "assistant", "content": text} for n, text in enumerate(texts)]
    assert api.post("/sessions/mixed/messages", {"messages": messages}).status_code == 200

    tokens = PARSER.parse(export(api, "mixed"))

    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h3"]
    assert headings == [f"#{n} · {m['role']}" for n, m in enumerate(messages, start=1)]
    fences = [t.content for t in tokens if t.type == "fence"]
    assert fences == [commonmark_lines(text + "\n") for text in texts if text.strip()]
    assert not any(t.type.startswith("html") for t in walk(tokens))


def test_the_export_streams_the_same_text_it_parses(api, project, author):
    expected = build_session(api, project, "hostile", HOSTILE["tilde fence"], author)

    assert export(api, "hostile") == "".join(export_markdown(expected["session"]))
