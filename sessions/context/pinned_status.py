"""Where a session's pinned facts stand: every literal they pin in its messages, the message it first
appeared in, and for each checkpoint whether its summary carries it (kept), carries it only on the
`Pinned:` line compaction appended (added back), or does not (lost: the checkpoint was made before the
fact was pinned, since compaction never drops a pinned value; sessions/context/pinned.py).

The literals are read once: a session keeps them (PinnedSighting) with the last message read for them
and a digest of the declarations they were read for, so a later read only looks at the messages since,
and a change of the project's or the session's pinned facts reads them all again. `Session.pinned_lost`
counts the literals the latest checkpoint, the one in the model input, does not carry: the sessions
list's "pinned fact lost" filter. It is brought up to date after every compaction, when the pinned facts
change (a project's sessions on the task queue), and when the session page is opened.

A session keeps at most MAX_SIGHTINGS literals (the first found) and none longer than MAX_LITERAL
characters; compaction pins every literal, whatever its number or length. Opening the session page reads
at most PAGE_BUDGET messages not read yet (the first opening of a long session's page would otherwise
read all of it), and says how far it has read; the rest is read by the next openings, or at once after a
compaction and on the task queue."""

import hashlib
import json
from dataclasses import dataclass
from typing import NamedTuple

from django.db import transaction
from django_tasks import task

from sessions.context.facts import carries, fact_text, fold
from sessions.context.model_input import visible_messages
from sessions.context.pinned import PINNED_HEAD, PINNED_JOIN, clean_pinned, pinned_literals, pinned_of
from sessions.models import Checkpoint, PinnedSighting, Project, Session

MAX_SIGHTINGS = 500
MAX_LITERAL = 500
CHUNK = 2000
PAGE_BUDGET = 20_000  # messages read for pinned values when a page opens

KEPT, ADDED_BACK, LOST, NOT_COVERED = "kept", "added back", "lost", "not summarized"


def pins_key(session: Session) -> str:
    """A digest of the declarations the session's pinned literals are read for; empty for none."""
    declared = [session.project.pinned_facts or [], session.pinned_facts or []]
    if not any(declared):
        return ""
    return hashlib.sha256(json.dumps(declared, sort_keys=True).encode()).hexdigest()


def added_back(summary: str) -> set[str]:
    """The values compaction appended on the summary's `Pinned:` line (its last line)."""
    last = (summary or "").rstrip().rsplit("\n", 1)[-1]
    if not last.startswith(PINNED_HEAD):
        return set()
    return set(last[len(PINNED_HEAD):].split(PINNED_JOIN))


def state_in(checkpoint: Checkpoint, literal: str, folded: str | None = None, added: set[str] | None = None) -> str:
    """KEPT, ADDED_BACK or LOST: how `checkpoint`'s summary stands for a literal it covers (`folded` and
    `added`: its summary folded and its Pinned: line's values, when the caller read them already)."""
    if literal in (added if added is not None else added_back(checkpoint.summary)):
        return ADDED_BACK
    return KEPT if carries(folded if folded is not None else fold(checkpoint.summary), literal) else LOST


def _latest(session: Session) -> Checkpoint | None:
    return session.checkpoints.order_by("-last_seq").only("pk", "summary", "last_seq", "number").first()


class PinnedRead(NamedTuple):
    lost: int  # pinned values the latest checkpoint does not carry
    read_through: int  # the messages read for pinned values so far
    messages: int  # of the session's


def refresh_pinned(session: Session, budget: int | None = None) -> PinnedRead:
    """Read the pinned literals of the messages not read yet (all of them when the declarations
    changed; at most `budget` messages), and store how many the latest checkpoint loses."""
    session = Session.objects.select_related("project").get(pk=session.pk)
    facts = pinned_of(session)
    key = pins_key(session)
    through = session.pinned_through if key == session.pinned_key else 0
    upto = session.message_count if budget is None else min(session.message_count, through + budget)
    with transaction.atomic():
        if key != session.pinned_key:
            PinnedSighting.objects.filter(session=session).delete()
        if facts and through < upto:
            _read(session, facts, through, upto)
        lost = _lost_count(session) if facts else 0
        read_through = upto if facts else 0
        # Written only when something changed: the session page's GET of an unchanged session writes nothing.
        if (key, read_through, lost) != (session.pinned_key, session.pinned_through, session.pinned_lost):
            Session.objects.filter(pk=session.pk).update(pinned_key=key, pinned_through=read_through, pinned_lost=lost)
    return PinnedRead(lost, read_through, session.message_count)


def _read(session: Session, facts, through: int, upto: int) -> None:
    seen = set(PinnedSighting.objects.filter(session=session).values_list("literal", flat=True)) if through else set()
    if len(seen) >= MAX_SIGHTINGS:
        return
    new = []
    rows = visible_messages(session, through, as_of=upto).only("session_id", "seq", "text", "tool_calls")
    for row in rows.iterator(chunk_size=CHUNK):
        for name, literal in pinned_literals(facts, [fact_text(row)]):
            if literal not in seen and len(literal) <= MAX_LITERAL:
                seen.add(literal)
                new.append(PinnedSighting(session=session, name=name, literal=literal, seq=row.seq))
        if len(seen) >= MAX_SIGHTINGS:
            break
    PinnedSighting.objects.bulk_create(new[:MAX_SIGHTINGS])


def _lost_count(session: Session) -> int:
    latest = _latest(session)
    if latest is None:
        return 0
    folded = fold(latest.summary)
    return sum(1 for s in _sightings(session.pk, latest.last_seq) if state_in(latest, s.literal, folded) == LOST)


@task()
def refresh_project_pins(project_id: int) -> int:
    """Bring every session of a project with checkpoints up to date with its pinned facts (after they
    changed); the session page brings the others up to date when it is opened. Returns how many."""
    ids = list(Session.objects.filter(project_id=project_id, checkpoint_count__gt=0).values_list("pk", flat=True))
    for pk in ids:
        refresh_pinned(Session(pk=pk))
    return len(ids)


def set_pinned_facts(project: Project, items) -> Project:
    """Replace the project's pinned facts, checked, and queue the refresh of its sessions (their
    "pinned fact lost" figure) for after the transaction commits."""
    project.pinned_facts = clean_pinned(items)
    project.save(update_fields=["pinned_facts"])
    transaction.on_commit(lambda: refresh_project_pins.enqueue(project.pk))
    return project


@dataclass
class PinnedRow:
    """One pinned literal of a session: where it first appeared and how the model input stands for it."""

    name: str
    literal: str
    seq: int
    state: str  # KEPT, ADDED_BACK, LOST or NOT_COVERED, in the latest checkpoint
    checkpoint: Checkpoint | None  # the latest checkpoint, where it covers the literal
    added_by: Checkpoint | None = None  # the first checkpoint that added it back on its Pinned: line
    lost_by: Checkpoint | None = None  # the first checkpoint that covered it and did not carry it


def pinned_rows(session: Session, checkpoints: list[Checkpoint]) -> list[PinnedRow]:
    """Every stored pinned literal of `session`, first appeared first, against its checkpoints (in
    last_seq order). Read after refresh_pinned."""
    # Each summary is folded and its Pinned: line read once: a session compacted thousands of times, with
    # hundreds of pinned values, would otherwise do both for every pair.
    read = {c.pk: (fold(c.summary), added_back(c.summary)) for c in checkpoints}
    latest = checkpoints[-1] if checkpoints else None
    rows = []
    for sighting in _sightings(session.pk):
        covering = [c for c in checkpoints if c.last_seq >= sighting.seq]
        states = [(c, state_in(c, sighting.literal, *read[c.pk])) for c in covering]
        row = PinnedRow(sighting.name, sighting.literal, sighting.seq,
                        states[-1][1] if states else NOT_COVERED, latest if states else None)
        row.added_by = next((c for c, state in states if state == ADDED_BACK), None)
        row.lost_by = next((c for c, state in states if state == LOST), None)
        rows.append(row)
    return rows


def checkpoint_pins(checkpoint: Checkpoint) -> list[PinnedRow]:
    """The stored pinned literals `checkpoint` covers, with how its summary stands for each."""
    folded = fold(checkpoint.summary)
    return [PinnedRow(s.name, s.literal, s.seq, state_in(checkpoint, s.literal, folded), checkpoint)
            for s in _sightings(checkpoint.session_id, checkpoint.last_seq)]


def _sightings(session_id: int, upto: int | None = None) -> list[PinnedSighting]:
    """The stored sightings, each literal once (two refreshes at once may both store one)."""
    rows = PinnedSighting.objects.filter(session_id=session_id).order_by("seq", "pk")
    if upto is not None:
        rows = rows.filter(seq__lte=upto)
    seen, unique = set(), []
    for row in rows:
        if row.literal not in seen:
            seen.add(row.literal)
            unique.append(row)
    return unique


def pinned_name(session: Session, literal: str) -> str | None:
    """The name of the pinned fact `literal` is a literal of in `session`, if any (for Trace)."""
    for fact in pinned_of(session):
        if fact.value == literal or (fact.pattern and literal in fact.literals(literal)):
            return fact.name
    return None
