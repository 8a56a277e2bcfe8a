"""Notes and tags: what support staff add on top of a transcript. Each change is recorded as an
event with the person as actor; the raw log and the model input never change."""

import re

from django.db import transaction
from django.utils import timezone

from sessions.errors import DomainError
from sessions.models import Note, Session, Tag
from sessions.store.event_types import NoteAdded, NoteDeleted, NoteEdited, TagsChanged
from sessions.store.events import actor, record
from sessions.wire.validation import check_text

MAX_NOTE = 10_000
TAG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,49}$")


def _clean_text(text) -> str:
    if not isinstance(text, str) or not text.strip():
        raise DomainError("A note needs some text.", code="invalid_note")
    if len(text) > MAX_NOTE:
        raise DomainError(f"A note is at most {MAX_NOTE} characters.", code="invalid_note")
    check_text(text, None, "note")
    return text.strip()


def add_note(session: Session, user, text, seq: int | None = None) -> Note:
    text = _clean_text(text)
    if seq is not None and not (1 <= seq <= session.message_count):
        raise DomainError(f"No message #{seq} in this session.", code="message_not_found")
    with transaction.atomic():
        now = timezone.now()  # one instant, so a new note does not read as edited
        note = Note.objects.create(session=session, seq=seq, author=user, text=text, created_at=now, updated_at=now)
        record(session, actor(user), NoteAdded(note_id=note.pk, seq=seq, text=text[:200]))
    return note


def edit_note(note: Note, user, text) -> Note:
    if note.author_id != user.pk:
        raise DomainError("Only its author can edit a note.", code="not_author", status=403)
    text = _clean_text(text)
    with transaction.atomic():
        note.text = text
        note.updated_at = timezone.now()
        note.save(update_fields=["text", "updated_at"])
        record(note.session, actor(user), NoteEdited(note_id=note.pk, seq=note.seq, text=text[:200]))
    return note


def delete_note(note: Note, user) -> None:
    if note.author_id != user.pk:
        raise DomainError("Only its author can delete a note.", code="not_author", status=403)
    with transaction.atomic():
        record(note.session, actor(user), NoteDeleted(note_id=note.pk, seq=note.seq))
        note.delete()


def parse_tags(text: str) -> list[str]:
    names = sorted({t.strip().lower() for t in re.split(r"[,\s]+", text or "") if t.strip()})
    bad = [n for n in names if not TAG_RE.match(n)]
    if bad:
        raise DomainError(
            f"Tags are lowercase letters, digits, - and _ (at most 50): {', '.join(bad[:5])}", code="invalid_tag"
        )
    if len(names) > 20:
        raise DomainError("At most 20 tags on a session.", code="invalid_tag")
    return names


def session_notes(session: Session):
    """The session's notes, oldest first, with their authors."""
    return session.notes.select_related("author").order_by("created_at", "pk")


def tag_names(session: Session) -> list[str]:
    return sorted(session.tags.values_list("name", flat=True))


def set_tags(session: Session, user, names: list[str]) -> list[str]:
    with transaction.atomic():
        before = tag_names(session)
        if before == names:
            return names
        tags = [Tag.objects.get_or_create(project=session.project, name=name)[0] for name in names]
        session.tags.set(tags)
        record(session, actor(user), TagsChanged(before=before, after=names, added=sorted(set(names) - set(before)),
                                                    removed=sorted(set(before) - set(names))))
    return names


def change_tag(sessions: list[Session], user, name: str, *, add: bool) -> list[Session]:
    """Put the tag `name` on each of `sessions`, or take it off, all in one transaction; each session
    it changes records its TAGS_CHANGED event as a single change does. Returns the sessions changed."""
    names = parse_tags(name)
    if len(names) != 1:
        raise DomainError("Name one tag.", code="invalid_tag")
    name = names[0]
    changed = []
    with transaction.atomic():
        for session in sessions:
            before = tag_names(session)
            after = sorted(set(before) | {name}) if add else [t for t in before if t != name]
            if len(after) > 20:
                raise DomainError(f"At most 20 tags on a session: {session.key} has {len(before)}.", code="invalid_tag")
            if after != before:
                set_tags(session, user, after)
                changed.append(session)
    return changed
