"""The XSS corpus (tests/xss_corpus.py) stored in every field the dashboard shows, through the domain
functions an application or a person goes through (append, update_session, compact, notes, tags,
build_request, update_message, API keys, members), never through SQL.

The vectors are split into groups that fit a session title (300 characters); each group gets a session
`xss-gNN` holding its vectors in every per-session and per-message field, so each page stays a
reasonable size. A long session `xss-windows` holds every vector again, in more messages than one window
of the raw log, the model input and the event history, so the "load earlier" fragments have something
to load. `Seeded.placed` records which vectors went into which field; `Seeded.skipped` the ones the
domain refused for a field (a tag must be a slug, for instance), with the reason.
"""

import json
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model

from sessions.access.api_keys import create_api_key
from sessions.access.members import set_member
from sessions.context.compaction_runs import compact
from sessions.context.exports import EXPORT_FORMAT
from sessions.errors import DomainError
from sessions.ingest.append import append_messages
from sessions.ingest.demo import tiny_png
from sessions.ingest.message_edits import update_message
from sessions.ingest.next_request import build_request
from sessions.ingest.session_store import update_session
from sessions.models import Checkpoint, Event, Message, Project, Session
from sessions.store.notes import add_note, parse_tags, set_tags
from sessions.store.reviews import add_review

from .xss_corpus import PAYLOADS, pack

ACTOR = "xss-test"
SEPARATOR = " | "
FILLER = " ".join(["filler"] * 200)
TAG = "xss-probe"
WINDOW_KEY = "xss-windows"
# An SVG image whose scripts would run if it were opened as a document; as an <img> it never runs, and
# browsers refuse to navigate the top frame to a data: URL, so its thumbnail link is inert too.
SVG_IMAGE = "data:image/svg+xml,<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'><script>alert(2)</script></svg>"
PNG_IMAGE = tiny_png(24, 16)
# Image URLs that must never be stored: they would become a link (and an <img src>) on the page.
REJECTED_IMAGE_URLS = [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "\tjavascript:alert(1)",
    "java\tscript:alert(1)",
    "jav&#x09;ascript:alert(1)",
    "javascript://example.com/%0aalert(1)",
    "vbscript:msgbox(1)",
    "data:text/html,<script>alert(1)</script>",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "DATA:TEXT/HTML,<script>alert(1)</script>",
    "data:,<script>alert(1)</script>",
    "data:application/xhtml+xml,<script>alert(1)</script>",
    "//example.com/x.png",
]
# The fields the vectors go into. Every vector is in every one of them unless `skipped` says why not.
FIELDS = (
    "title", "metadata", "instructions", "system_message", "text", "text_part", "name",
    "attribute_key", "attribute_value", "attribute_patch", "reasoning", "tool_name", "tool_call_id",
    "tool_arguments", "tool_arguments_json", "tool_result", "tool_result_part", "image_url", "summary",
    "agent_message", "hidden_message", "dropped_call_id", "orphan_result_id", "message_note",
    "session_note", "note_author", "request_message", "tag", "api_key_name", "member_username",
    "review_comment",
)


@dataclass
class Group:
    number: int
    indexes: list[int]  # into PAYLOADS
    session: Session
    checkpoint: Checkpoint
    request: Event

    @property
    def marker(self) -> str:
        """A word in this group's message text, to find it with search."""
        return f"xssprobe{self.number:02d}"

    @property
    def payloads(self) -> list[str]:
        return [PAYLOADS[i] for i in self.indexes]


@dataclass
class Seeded:
    project: Project
    groups: list[Group]
    window: Session
    window_checkpoint: Checkpoint
    placed: dict[str, set[int]] = field(default_factory=dict)
    skipped: dict[str, dict[int, str]] = field(default_factory=dict)
    rejected_image_urls: dict[str, str] = field(default_factory=dict)  # url -> the validator's reason


def _user_seq(session: Session, index: int) -> int:
    return Message.objects.get(session=session, client_id=f"u-{index}").seq


def seed_corpus(project: Project, author, *, image_base: str = "https://example.com/thumb.png?v=") -> Seeded:
    """Store the whole corpus; `author` writes the notes (log in as them to see the note edit forms)."""
    placed: dict[str, set[int]] = {name: set() for name in FIELDS}
    skipped: dict[str, dict[int, str]] = {name: {} for name in FIELDS}
    groups = [
        _seed_group(project, author, number, indexes, image_base, placed)
        for number, indexes in enumerate(group_indexes())
    ]
    window, window_checkpoint = _seed_window(project, author)
    _seed_people(project, groups, placed, skipped)
    seeded = Seeded(project, groups, window, window_checkpoint, placed, skipped)
    for url in REJECTED_IMAGE_URLS:
        try:
            append_messages(project, "xss-rejected-images", [
                {"role": "user", "content": [{"type": "image", "url": url}]}], ACTOR)
        except DomainError as exc:
            seeded.rejected_image_urls[url] = exc.detail
    return seeded


def group_indexes() -> list[list[int]]:
    """The vectors of each `xss-gNN` session, as indexes into PAYLOADS."""
    indexes, groups = iter(range(len(PAYLOADS))), []
    for group in pack(PAYLOADS, 300, SEPARATOR):
        groups.append([next(indexes) for _ in group])
    return groups


def _seed_group(project, author, number: int, indexes: list[int], image_base: str, placed) -> Group:
    key = f"xss-g{number:02d}"
    payloads = [PAYLOADS[i] for i in indexes]
    joined = SEPARATOR.join(payloads)
    marker = f"xssprobe{number:02d}"

    def mark(*names):
        for name in names:
            placed[name].update(indexes)

    update_session(project, key, {
        "title": joined,
        "metadata": {"vectors": payloads, **{p: p for p in payloads}},
        "instructions": joined,
        "compaction": {"max_tokens": 100_000, "keep_recent_tokens": 1, "auto": False},
    }, ACTOR)
    mark("title", "metadata", "instructions")

    # The first turn is covered by the checkpoint: it shows on the compaction diff as what left the input.
    append_messages(project, key, [
        {"role": "system", "content": joined},
        {"role": "user", "content": f"{marker} {joined} {FILLER}"},
        {"role": "assistant", "content": [*({"type": "text", "text": p} for p in payloads),
                                          {"type": "text", "text": FILLER}]},
        {"role": "user", "content": [{"type": "text", "text": p} for p in payloads]},
    ], ACTOR)
    mark("system_message")
    session = Session.objects.get(project=project, key=key)
    outcome = compact(session, force=True, keep_recent_tokens=1, summary=joined, actor=ACTOR)
    assert outcome.status == "completed", (key, outcome.status, outcome.reason, outcome.error)
    mark("summary")

    for index, payload in zip(indexes, payloads, strict=True):
        append_messages(project, key, [
            {"id": f"u-{index}", "role": "user", "content": f"{marker} {payload}", "name": payload,
             "attributes": {payload: payload, "vector": payload}},
            {"role": "assistant", "content": [{"type": "text", "text": payload}], "reasoning": payload,
             "tool_calls": [{"id": payload, "name": payload, "arguments": payload},
                            {"id": f"call_{index}", "name": "lookup", "arguments": json.dumps({"q": payload})}]},
            {"role": "tool", "tool_call_id": payload, "name": payload, "content": payload},
            {"role": "tool", "tool_call_id": f"call_{index}", "content": [{"type": "text", "text": payload}]},
        ], ACTOR)
    mark("text", "text_part", "name", "attribute_key", "attribute_value", "reasoning", "tool_name",
         "tool_call_id", "tool_arguments", "tool_arguments_json", "tool_result", "tool_result_part")

    images = [{"type": "image", "url": image_base + p, "width": 24, "height": 16} for p in payloads]
    if number == 0:
        images += [{"type": "image", "url": SVG_IMAGE}, {"type": "image", "url": PNG_IMAGE, "media_type": "image/png"}]
    append_messages(project, key, [
        {"role": "user", "content": [{"type": "text", "text": f"{marker} images"}, *images]},
        {"role": "agent", "content": joined},
        {"role": "assistant", "content": joined, "include_in_messages": False,
         "tool_calls": [{"id": f"orphan {p}", "name": "audit", "arguments": "{}"} for p in payloads]},
        *({"role": "tool", "tool_call_id": f"orphan {p}", "content": p} for p in payloads),
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": f"dropped {p}", "name": "never_answered", "arguments": "{}"} for p in payloads]},
        {"role": "user", "content": f"{marker} done"},
        {"role": "assistant", "content": joined},
    ], ACTOR)
    mark("image_url", "agent_message", "hidden_message", "orphan_result_id", "dropped_call_id")

    session.refresh_from_db()
    for index, payload in zip(indexes, payloads, strict=True):
        add_note(session, author, payload, _user_seq(session, index))
    add_note(session, author, joined)
    mark("message_note", "session_note")
    add_review(session, author, "problem", comment=joined, seqs=[_user_seq(session, indexes[0])])
    mark("review_comment")
    update_message(project, key, _user_seq(session, indexes[0]), {"attributes": {p: p for p in payloads}}, ACTOR)
    mark("attribute_patch")
    set_tags(session, author, [TAG, key])
    request = build_request(project, key, messages=[
        {"role": "user", "content": p, "persist": False} for p in payloads], actor=ACTOR).event
    mark("request_message")
    session.refresh_from_db()
    return Group(number, indexes, session, outcome.checkpoint, request)


def _seed_window(project, author) -> tuple[Session, Checkpoint]:
    update_session(project, WINDOW_KEY, {
        "title": "More than a window: " + PAYLOADS[0],
        "compaction": {"max_tokens": 1_000_000, "keep_recent_tokens": 1, "auto": False},
    }, ACTOR)
    half = len(PAYLOADS) // 2
    checkpoint = None
    for index, payload in enumerate(PAYLOADS):
        if index == half:
            session = Session.objects.get(project=project, key=WINDOW_KEY)
            outcome = compact(session, force=True, keep_recent_tokens=1, summary=SEPARATOR.join(PAYLOADS[:5]),
                              actor=ACTOR)
            assert outcome.status == "completed", (outcome.status, outcome.reason, outcome.error)
            checkpoint = outcome.checkpoint
        append_messages(project, WINDOW_KEY, [
            {"role": "user", "content": payload},
            {"role": "assistant", "content": [{"type": "text", "text": payload}]},
        ], ACTOR)
    session = Session.objects.get(project=project, key=WINDOW_KEY)
    set_tags(session, author, [TAG])
    return session, checkpoint


def _seed_people(project, groups: list[Group], placed, skipped) -> None:
    """API key names, member usernames (and those members' notes on the sessions), and tags."""
    User = get_user_model()
    by_index = {i: g for g in groups for i in g.indexes}
    for index, payload in enumerate(PAYLOADS):
        try:
            create_api_key(project, payload)
        except DomainError as exc:
            skipped["api_key_name"][index] = exc.detail
        else:
            placed["api_key_name"].add(index)

        try:
            parse_tags(payload)
        except DomainError as exc:
            skipped["tag"][index] = exc.detail
        else:
            raise AssertionError(f"the tag {payload!r} should be refused")

        if User.normalize_username(payload) != payload:
            reason = "Django normalises this username (NFKC) into another one"
            skipped["member_username"][index] = skipped["note_author"][index] = reason
            continue
        member = User.objects.create_user(username=payload)
        set_member(project, payload, "viewer")
        placed["member_username"].add(index)
        group = by_index[index]
        add_note(group.session, member, f"{group.marker} from a member: {payload}")
        placed["note_author"].add(index)


def import_files(indexes: list[int]) -> list[tuple[str, bytes]]:
    """Transcript files for the import page: for each vector a file named after it whose import fails with
    an error quoting it, and one file whose conversations have the vectors as titles and text."""
    files = []
    for index in indexes:
        payload = PAYLOADS[index]
        lines = [{"type": "session", "format": EXPORT_FORMAT, "key": f"xss-import-{index}"}, {"type": payload}]
        files.append((f"{payload}.jsonl", "\n".join(json.dumps(line) for line in lines).encode()))
    records = [{"title": PAYLOADS[i], "messages": [{"role": "user", "content": PAYLOADS[i]}]} for i in indexes]
    files.append((f"xss-import-{indexes[0]}.json", json.dumps(records).encode()))
    return files
