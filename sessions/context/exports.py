"""Exports of one session: lossless JSON (its messages can be appended as they are to
re-create the raw log), JSON Lines, and a readable Markdown transcript, and the download that carries
each, the same for the API and the dashboard. Every format also carries what support staff added: the
session's tags, its notes (on the session and on messages, with author and time) and its reviews
(verdict, labels, score, comment, the messages they are about, reviewer, queue and time)."""

import json
import re
from collections.abc import Iterator
from urllib.parse import quote

from django.http import StreamingHttpResponse

from sessions.db.message_sizes import pages, sizes
from sessions.errors import NotFound
from sessions.models import Checkpoint, Message, Note, Review, Session
from sessions.store.notes import session_notes, tag_names
from sessions.store.reviews import session_reviews
from sessions.wire.ctxweb import (
    CheckpointRecord,
    MessageRecord,
    NoteRecord,
    ReviewRecord,
    SessionRecord,
    is_data_url,
)
from sessions.wire.parts import pretty_arguments

EXPORT_FORMAT = "ctxweb-session"
EXPORT_VERSION = 1
# Messages are read in keyset pages of at most message_sizes.PAGE_CHARS characters as stored (text,
# reasoning, content, tool calls and attributes), their sizes read BATCH at a time: an export holds one
# page at a time, or one message when a single one is bigger.
BATCH = 1000
URL_SAFE = ":/?#@!$&'*+,;=%~-._"


def message_record(message: Message) -> dict:
    """A stored message in the shape the append endpoint takes, so it re-imports unchanged: the
    fields that hold something, and always its content and time."""
    return MessageRecord.model_validate(message).model_dump(mode="json", exclude_defaults=True)


def checkpoint_record(checkpoint: Checkpoint) -> dict:
    return CheckpointRecord.model_validate(checkpoint).model_dump(mode="json")


def session_record(session: Session) -> dict:
    return SessionRecord.model_validate(session).model_dump(mode="json")


def note_record(note: Note) -> dict:
    return NoteRecord.model_validate(note).model_dump(mode="json")


def notes(session: Session) -> list[Note]:
    """The session's notes, oldest first (notes are short and few next to the messages: read at once)."""
    return list(session_notes(session))


def review_record(review: Review) -> dict:
    return ReviewRecord.model_validate(review).model_dump(mode="json")


def reviews(session: Session) -> list[Review]:
    """The session's reviews, oldest first, with their queues (few next to the messages: read at once)."""
    return list(session_reviews(session))


def iter_messages(session: Session, batch: int = BATCH, batch_chars: int | None = None) -> Iterator[Message]:
    """Every stored message in seq order, read in pages bounded by stored characters: the sizes of the
    next `batch` messages are read first (from the database, one pass), then the messages a page at a
    time, so memory stays flat however big the messages are."""
    after = 0
    while True:
        measured = sizes(session.messages.filter(seq__gt=after), batch)
        for first, last in pages(measured, batch_chars):
            yield from session.messages.filter(seq__gte=first, seq__lte=last).order_by("seq")
        if len(measured) < batch:
            return
        after = measured[-1][0]


def checkpoints(session: Session) -> list[Checkpoint]:
    return list(session.checkpoints.order_by("last_seq"))


def export_json(session: Session) -> dict:
    """The JSON export as one object (the download streams the same bytes: export_json_chunks)."""
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": session_record(session),
        "messages": [message_record(m) for m in iter_messages(session)],
        "checkpoints": [checkpoint_record(c) for c in checkpoints(session)],
        "tags": tag_names(session),
        "notes": [note_record(n) for n in notes(session)],
        "reviews": [review_record(r) for r in reviews(session)],
    }


def export_json_chunks(session: Session) -> Iterator[str]:
    """json.dumps(export_json(session), ensure_ascii=False), written a message at a time."""

    def dumps(value) -> str:
        return json.dumps(value, ensure_ascii=False)

    head = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "session": session_record(session)}
    yield dumps(head)[:-1] + ', "messages": ['
    separator = ""
    for message in iter_messages(session):
        yield separator + dumps(message_record(message))
        separator = ", "
    yield '], "checkpoints": ['
    separator = ""
    for checkpoint in session.checkpoints.order_by("last_seq").iterator(chunk_size=100):
        yield separator + dumps(checkpoint_record(checkpoint))
        separator = ", "
    yield ('], "tags": ' + dumps(tag_names(session)) + ', "notes": ' + dumps([note_record(n) for n in notes(session)])
           + ', "reviews": ' + dumps([review_record(r) for r in reviews(session)]) + "}")


def export_jsonl(session: Session) -> Iterator[str]:
    def line(kind, data):
        return json.dumps({"type": kind, **data}, ensure_ascii=False) + "\n"

    yield line("session", {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, **session_record(session),
                           "tags": tag_names(session)})
    for message in iter_messages(session):
        yield line("message", {"seq": message.seq, **message_record(message)})
    for checkpoint in checkpoints(session):
        yield line("checkpoint", checkpoint_record(checkpoint))
    for note in notes(session):
        yield line("note", note_record(note))
    for review in reviews(session):
        yield line("review", review_record(review))


# The Markdown transcript is built so that nothing a client or a person wrote can change its structure
# (tests/api/test_export_markdown_structure.py parses it with a CommonMark parser): every multi-line
# text (message text, reasoning, tool arguments and results, instructions, summaries, notes) is a fenced
# code block no line of it can close, and every text that shares a line with ours (titles, names, media
# types, summarizer names) stays on that line (its line breaks become spaces) and is backslash-escaped.
# Image URLs are percent-encoded. The transcript holds no HTML of its own.

# What ends a line in CommonMark (in a fenced block, each is kept as a line break).
LINE_ENDING = re.compile(r"\r\n|\r|\n")
# What ends a line for CommonMark or for an editor or viewer showing the file (vertical tab, form feed,
# file/group/record separators, NEL, the Unicode line and paragraph separators).
ANY_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]+")
# Inline Markdown characters that could start a code span, emphasis, a link or image, raw HTML, a
# heading's closing sequence, strikethrough or a table cell, or escape the character after them; and `&`
# where it could start a character reference.
INLINE_SPECIAL = re.compile(r"[\\`*_\[\]<>#~|]|&(?=[#A-Za-z0-9])")


def _fence(text: str, lang: str = "") -> str:
    """`text` as a fenced code block that nothing in it can close: the fence is backticks, more than any
    run of backticks in the text (a closing fence may be indented and followed by spaces; tildes never
    close a backtick fence)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _inline(text: str) -> str:
    """`text` as literal inline Markdown on the line it is written on: its line breaks become spaces and
    every character that inline Markdown reads is backslash-escaped."""
    return INLINE_SPECIAL.sub(lambda m: "\\" + m.group(), ANY_LINE_BREAK.sub(" ", text))


def _code(text: str) -> str:
    """`text` as an inline code span on one line, which no backtick in it can end."""
    text = ANY_LINE_BREAK.sub(" ", text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _quoted(block: str) -> str:
    """`block` inside a quote: every line of it (as CommonMark splits lines) after `> `."""
    return "\n".join(">" if not line else "> " + line for line in LINE_ENDING.split(block))


def _markdown_image(part: dict) -> str:
    size = f", {part['width']}×{part['height']}" if part.get("width") and part.get("height") else ""
    url = part["url"]
    if is_data_url(url):
        return f"[image: {_inline(part.get('media_type') or 'inline data')}{size}]"
    # Percent-encoded where Markdown would read the URL as ending: ( ) < > spaces and brackets.
    return f"![image{size}]({quote(url, safe=URL_SAFE)})"


def _markdown_content(content) -> Iterator[str]:
    """A message's content as Markdown blocks: each text fenced, each image on its own line."""
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    for part in parts:
        if part["type"] != "text":
            yield _markdown_image(part)
        elif part["text"].strip():
            yield _fence(part["text"])


def _markdown_note(note: Note) -> str:
    """A note as a quote: who and when, then its text fenced (every line quoted, so it cannot end the quote)."""
    author = note.author.get_username() if note.author_id else "(deleted user)"
    edited = " · edited" if note.updated_at > note.created_at else ""
    return (f"> **Note** by {_code(author)} · {note.created_at:%Y-%m-%d %H:%M} UTC{edited}\n>\n"
            f"{_quoted(_fence(note.text))}\n\n")


def _markdown_review(review: Review) -> str:
    """A review as a quote: its verdict, who and when, score, labels, messages and queue on one line of
    ours (each of their texts inline code), then its comment fenced."""
    facts = [f"**Review** {_code(review.verdict)} by {_code(review.reviewer)} · {review.created_at:%Y-%m-%d %H:%M} UTC"]
    if review.score is not None:
        facts.append(f"score {review.score}/5")
    if review.labels:
        facts.append("labels " + ", ".join(_code(label) for label in review.labels))
    if review.seqs:
        facts.append("about " + ", ".join(f"#{seq}" for seq in review.seqs))
    if review.queue_id:
        facts.append(f"queue {_code(review.queue.name)}")
    comment = f">\n{_quoted(_fence(review.comment))}\n" if review.comment else ""
    return "> " + " · ".join(facts) + "\n" + comment + "\n"


def export_markdown(session: Session) -> Iterator[str]:
    title = session.title or session.key
    yield (f"# {_inline(title)}\n\nSession {_code(session.key)} · {session.message_count} messages · "
           f"{session.raw_tokens} tokens in the raw log\n\n")
    tags = tag_names(session)
    if tags:
        yield "**Tags:** " + ", ".join(_code(t) for t in tags) + "\n\n"
    on_messages: dict[int, list[Note]] = {}
    on_session = []
    for note in notes(session):
        (on_messages.setdefault(note.seq, []) if note.seq else on_session).append(note)
    if on_session:
        yield "## Notes on the session\n\n" + "".join(_markdown_note(n) for n in on_session)
    reviewed = reviews(session)
    if reviewed:
        yield "## Reviews\n\n" + "".join(_markdown_review(r) for r in reviewed)
    if session.instructions:
        yield f"**Instructions (current):**\n\n{_fence(session.instructions)}\n\n"
    ends = {c.last_seq: c for c in checkpoints(session)}
    for m in iter_messages(session):
        flags = []
        if not m.include_in_messages:
            flags.append("hidden from the model")
        if m.role == "tool":
            flags.append(f"result of {_code(m.tool_call_id)}")
        if m.is_error:
            flags.append("the tool reported an error")
        head = (f"### #{m.seq} · {m.role}" + (f" · {_inline(m.name)}" if m.name else "")
                + (f" ({'; '.join(flags)})" if flags else ""))
        yield f"{head}\n\n_{m.created_at:%Y-%m-%d %H:%M:%S} UTC · {m.tokens} tokens_\n\n"
        if m.reasoning:
            yield "**Reasoning:**\n\n" + _fence(m.reasoning) + "\n\n"
        for block in _markdown_content(m.content):
            yield block + "\n\n"
        for call in m.tool_calls:
            yield f"**Tool call** {_code(call['name'])} ({_code(call['id'])})\n\n{_fence(pretty_arguments(call['arguments']), 'json')}\n\n"
        for note in on_messages.get(m.seq, ()):
            yield _markdown_note(note)
        if m.seq in ends:
            c = ends[m.seq]
            yield (
                f"---\n\n**Checkpoint {c.number}** covers messages #1–#{c.last_seq} "
                f"({_inline(c.summarizer)}, {c.summary_tokens} tokens):\n\n{_fence(c.summary)}\n\n---\n\n"
            )


def export_response(session: Session, fmt: str) -> StreamingHttpResponse:
    """The download of one export, streamed in every format; shared by the API and the dashboard."""
    name = session.key.replace(":", "_").replace("@", "_")
    if fmt == "jsonl":
        response = StreamingHttpResponse(export_jsonl(session), content_type="application/x-ndjson")
        response["Content-Disposition"] = f'attachment; filename="{name}.jsonl"'
    elif fmt == "markdown":
        response = StreamingHttpResponse(export_markdown(session), content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.md"'
    elif fmt == "json":
        response = StreamingHttpResponse(export_json_chunks(session), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{name}.json"'
    else:
        raise NotFound("Unknown export format.", code="unknown_format")
    return response
