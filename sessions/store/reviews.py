"""Reviews: a person's (or an application's) judgement of a session, a verdict (ok, problem, unsure)
with optional labels, a 1-5 score, a comment and the messages it is about. Like notes, reviews are for
people: recorded as a REVIEW_ADDED event, exported and searched with the session, never part of the raw
log or the model input. Viewers may review. A review made in a review queue (review_queues.py) takes
its labels from the queue's list and ends its reviewer's claim on the session."""

from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from sessions.errors import DomainError, NotFound
from sessions.models import ApiKey, Review, ReviewClaim, ReviewQueue, Session, Verdict
from sessions.store.event_types import ReviewAdded
from sessions.store.events import record
from sessions.wire.validation import check_text

MAX_COMMENT = 10_000
MAX_LABEL = 50
MAX_LABELS = 20
MAX_SEQS = 100
SCORES = range(1, 6)
EVENT_COMMENT = 200  # characters of the comment a REVIEW_ADDED event keeps


@dataclass(frozen=True)
class Reviewer:
    """Who reviews: `name` as reviews and events show them (`user:<username>`, `api:<key name>`, as
    sessions.store.events.actor names them), `holder` as claims hold them (`user:<id>`, `key:<id>`: two
    keys may share a name), and the user, for a person."""

    name: str
    holder: str
    user: object = None


def reviewer(who) -> Reviewer:
    """`who`: a request (its API key, or its user), an ApiKey, or a user."""
    key = who if isinstance(who, ApiKey) else getattr(who, "auth", None)
    if key is not None:
        return Reviewer(f"api:{key.name}", f"key:{key.pk}")
    user = getattr(who, "user", who)
    return Reviewer(f"user:{user.get_username()}", f"user:{user.pk}", user)


def clean_verdict(verdict) -> str:
    if verdict not in Verdict.values:
        raise DomainError(f"A verdict is one of {', '.join(Verdict.values)}.", code="invalid_verdict")
    return verdict


def clean_labels(labels, allowed: list[str] | None = None, *, code: str = "invalid_label") -> list[str]:
    """Labels as given (trimmed, each once, in order): strings of 1-50 characters, at most 20; each one of
    `allowed` when it is given (a queue's list)."""
    if labels is None:
        return []
    if isinstance(labels, str) or not isinstance(labels, list | tuple):
        raise DomainError("Labels are a list of strings.", code=code)
    cleaned: list[str] = []
    for label in labels:
        if not isinstance(label, str) or not label.strip() or len(label.strip()) > MAX_LABEL:
            raise DomainError(f"A label is 1-{MAX_LABEL} characters of text.", code=code)
        label = check_text(label.strip(), None, "a label", code)
        if label not in cleaned:
            cleaned.append(label)
    if len(cleaned) > MAX_LABELS:
        raise DomainError(f"At most {MAX_LABELS} labels.", code=code)
    if allowed is not None:
        unknown = [label for label in cleaned if label not in allowed]
        if unknown:
            choices = ", ".join(allowed) if allowed else "none: the queue has no labels"
            raise DomainError(f"{unknown[0]!r} is not one of the queue's labels ({choices}).", code=code)
    return cleaned


def _whole(value):
    """A whole number given as one (not a bool), or as the digits a form sends; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return None


def clean_score(score) -> int | None:
    if score is None or score == "":
        return None
    number = _whole(score)
    if number not in SCORES:
        raise DomainError(f"A score is a whole number from {SCORES.start} to {SCORES.stop - 1}.", code="invalid_score")
    return number


def clean_comment(comment) -> str:
    if comment is None:
        return ""
    if not isinstance(comment, str):
        raise DomainError("A comment is text.", code="invalid_comment")
    if len(comment) > MAX_COMMENT:
        raise DomainError(f"A comment is at most {MAX_COMMENT} characters.", code="invalid_comment")
    return check_text(comment, None, "the comment", "invalid_comment").strip()


def clean_seqs(session: Session, seqs) -> list[int]:
    """The messages a review is about: seqs of the session's messages, each once, in order."""
    if seqs is None:
        return []
    if isinstance(seqs, str) or not isinstance(seqs, list | tuple):
        raise DomainError("seqs is a list of message numbers.", code="invalid_seqs")
    numbers = set()
    for seq in seqs:
        number = _whole(seq)
        if number is None:
            raise DomainError("seqs is a list of message numbers.", code="invalid_seqs")
        if not 1 <= number <= session.message_count:
            raise DomainError(f"No message #{number} in this session.", code="message_not_found", seq=number)
        numbers.add(number)
    if len(numbers) > MAX_SEQS:
        raise DomainError(f"A review is about at most {MAX_SEQS} messages.", code="invalid_seqs")
    return sorted(numbers)


def add_review(session: Session, who, verdict, labels=None, score=None, comment="", seqs=None,
               queue: ReviewQueue | None = None) -> Review:
    """Record a review of `session` by `who` (a request, an ApiKey or a user): everything is checked first
    (a DomainError with a code, and nothing stored, otherwise); then the review and its REVIEW_ADDED event
    are stored in one transaction, and the reviewer's claim on the session (in `queue`, or in any queue
    when none is given) ends. `score` and `seqs` may be digits, as a form sends them."""
    if queue is not None and queue.project_id != session.project_id:
        raise NotFound("No such review queue in this project.", code="queue_not_found")
    verdict = clean_verdict(verdict)
    labels = clean_labels(labels, list(queue.labels) if queue is not None else None)
    score = clean_score(score)
    comment = clean_comment(comment)
    seqs = clean_seqs(session, seqs)
    by = reviewer(who)
    with transaction.atomic():
        review = Review.objects.create(
            session=session, queue=queue, author=by.user, reviewer=by.name, verdict=verdict, labels=labels,
            score=score, comment=comment, seqs=seqs, created_at=timezone.now())
        record(session, by.name, ReviewAdded(
            review_id=review.pk, queue_id=queue.pk if queue is not None else None, verdict=verdict,
            labels=labels, score=score, seqs=seqs, comment=comment[:EVENT_COMMENT]))
        claims = ReviewClaim.objects.filter(session=session, holder=by.holder)
        (claims.filter(queue=queue) if queue is not None else claims).delete()
    return review


def session_reviews(session: Session, *, newest_first: bool = False) -> QuerySet:
    """The session's reviews, oldest (or newest) first, with their queues and authors."""
    order = ("-created_at", "-pk") if newest_first else ("created_at", "pk")
    return session.reviews.select_related("queue", "author").order_by(*order)
