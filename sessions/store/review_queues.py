"""Review queues: a saved filter of the sessions list (its query string, `meta=reward<1&tag=refund`,
read by the list's own form, sessions.store.list_query), so that the sessions that match it now, those
stored since it was made included, are reviewed one after another. `next_in_queue` hands a reviewer the
oldest matching session that has no review from the queue and that no one else holds, and claims it for
them for CLAIM_DURATION; a review from them (reviews.add_review) ends the claim, and an expired claim is
taken over by the next reviewer who asks.

Two reviewers asking at once never get the same session: a claim is one row per queue and session (a
unique constraint), taken by an INSERT, or by an UPDATE conditional on the old claim having expired, so
of two racing writers one wins and the other moves on to the next session, on PostgreSQL (the loser's
write waits for the winner's commit, then fails or matches nothing) as on SQLite (writes are serial)."""

import csv
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.http import QueryDict, StreamingHttpResponse
from django.utils import timezone

from sessions.errors import Conflict, DomainError, NotFound
from sessions.models import Project, Review, ReviewClaim, ReviewQueue, Session, Verdict
from sessions.store.list_query import SessionListForm
from sessions.store.listing import SessionFilters, find_sessions
from sessions.store.reviews import Reviewer, clean_labels, reviewer
from sessions.wire.validation import check_text

CLAIM_DURATION = timedelta(minutes=30)
MAX_NAME = 100
MAX_FILTER = 2_000
MAX_QUEUE_LABELS = 30
# Parameters of the list's query string that do not choose sessions: a queue accepts and ignores them,
# so a list's address can be saved as it is.
NOT_FILTERS = {"page", "sort", "column", "size"}
# Candidates read at a time by next_in_queue; each lost race reads the next ones.
CANDIDATES = 20
MAX_ROUNDS = 5


# --- queues ----------------------------------------------------------------------------------------


def filter_text(text) -> str:
    """A filter string as a queue keeps it: the query string without its `?`."""
    if text is None:
        return ""
    if not isinstance(text, str):
        raise DomainError("A filter is the sessions list's query string, as text.", code="invalid_filter")
    return text.strip().removeprefix("?")


def queue_filters(project: Project, text: str) -> SessionFilters:
    """The sessions-list filters a queue's filter string stands for, read by the list's form: a parameter
    the list does not have, or a value the list would show as a form error, is a DomainError
    (`invalid_filter`)."""
    text = filter_text(text)
    if len(text) > MAX_FILTER:
        raise DomainError(f"A filter is at most {MAX_FILTER} characters.", code="invalid_filter")
    check_text(text, None, "the filter", "invalid_filter")
    try:
        data = QueryDict(text)
    except (SuspiciousOperation, ValueError):
        raise DomainError("The filter has too many parameters.", code="invalid_filter") from None
    form = SessionListForm(data)
    unknown = sorted(set(data) - set(form.fields) - NOT_FILTERS)
    if unknown:
        raise DomainError(f"The sessions list has no filter {unknown[0]!r}; its filters are "
                          f"{', '.join(sorted(set(form.fields) - NOT_FILTERS))}.", code="invalid_filter")
    if not form.is_valid():
        problems = "; ".join(f"{form.fields[name].label or name}: {' '.join(errors)}"
                             for name, errors in form.errors.items())
        raise DomainError(f"The filter does not parse: {problems}", code="invalid_filter")
    filters = form.filters()
    if filters.project and filters.project != project.name:
        raise DomainError(f"A queue of {project.name} holds its sessions only: project={filters.project} "
                          "names another.", code="invalid_filter")
    return filters


def _clean_name(name) -> str:
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > MAX_NAME:
        raise DomainError(f"A queue needs a name of 1-{MAX_NAME} characters.", code="invalid_queue")
    return check_text(name.strip(), None, "the name", "invalid_queue")


def create_queue(project: Project, who, name, filter: str = "", labels=None) -> ReviewQueue:
    """A new queue of `project` (its name unique in the project: a Conflict otherwise) with the sessions
    list's query string `filter` and the labels its reviews may carry."""
    name = _clean_name(name)
    text = filter_text(filter)
    queue_filters(project, text)
    labels = clean_labels(labels, code="invalid_queue")
    if len(labels) > MAX_QUEUE_LABELS:
        raise DomainError(f"A queue has at most {MAX_QUEUE_LABELS} labels.", code="invalid_queue")
    try:
        with transaction.atomic():
            return ReviewQueue.objects.create(project=project, name=name, filter=text, labels=labels,
                                              created_by=reviewer(who).user, created_at=timezone.now())
    except IntegrityError:  # the name is taken
        raise Conflict(f"The project already has a queue named {name!r}.", code="queue_exists") from None


def project_queues(project: Project) -> QuerySet:
    """The project's queues, by name, with who made them."""
    return ReviewQueue.objects.filter(project=project).select_related("project", "created_by").order_by("name", "pk")


def get_queue(project: Project, queue_id) -> ReviewQueue:
    """One queue of `project`; NotFound (`queue_not_found`) for any other id."""
    queue = None
    if isinstance(queue_id, int) and not isinstance(queue_id, bool) and 0 < queue_id < 2**63:
        queue = project_queues(project).filter(pk=queue_id).first()
    if queue is None:
        raise NotFound(f"No review queue {queue_id} in this project.", code="queue_not_found")
    return queue


def queue_sessions(queue: ReviewQueue) -> QuerySet:
    """The sessions the queue's filter matches now, as the sessions list finds them (its order left to
    the caller)."""
    return find_sessions([queue.project_id], queue_filters(queue.project, queue.filter))


def _reviewed_in(queue: ReviewQueue) -> Exists:
    return Exists(Review.objects.filter(queue=queue, session=OuterRef("pk")))


# --- handing sessions out ----------------------------------------------------------------------------


def _claim(queue: ReviewQueue, session: Session, by: Reviewer, now: datetime) -> bool:
    """Claim `session` for `by` until now + CLAIM_DURATION: take its claim over when the claim expired or
    is theirs, or make one; False when someone else holds it (or took it at the same moment)."""
    until = now + CLAIM_DURATION
    taken = (ReviewClaim.objects.filter(queue=queue, session=session)
             .filter(Q(until__lte=now) | Q(holder=by.holder))
             .update(holder=by.holder, reviewer=by.name, until=until))
    if not taken:
        try:
            with transaction.atomic():
                ReviewClaim.objects.create(queue=queue, session=session, holder=by.holder, reviewer=by.name,
                                           until=until)
        except IntegrityError:  # someone else's claim, made or renewed since the candidates were read
            return False
    # Reviewed from the queue between the read of the candidates and the claim: let it go.
    if Review.objects.filter(queue=queue, session=session).exists():
        ReviewClaim.objects.filter(queue=queue, session=session, holder=by.holder).delete()
        return False
    return True


def next_in_queue(queue: ReviewQueue, who, now: datetime | None = None) -> Session | None:
    """The session `who` (a request, an ApiKey or a user) should review next in `queue`, claimed for them:
    the one they already hold if it is still to be reviewed (its claim renewed), otherwise the oldest
    matching session without a review from the queue that no one else holds. None when there is none
    left."""
    by = reviewer(who)
    now = now or timezone.now()
    open_sessions = queue_sessions(queue).filter(~_reviewed_in(queue)).order_by("created_at", "pk")
    held = open_sessions.filter(Exists(ReviewClaim.objects.filter(
        queue=queue, session=OuterRef("pk"), holder=by.holder, until__gt=now))).first()
    if held is not None and _claim(queue, held, by, now):
        return held
    free = open_sessions.filter(~Exists(ReviewClaim.objects.filter(queue=queue, session=OuterRef("pk"), until__gt=now)))
    for _ in range(MAX_ROUNDS):
        candidates = list(free[:CANDIDATES])
        for session in candidates:
            if _claim(queue, session, by, now):
                return session
        if len(candidates) < CANDIDATES:
            break
    return None


def claim_of(queue: ReviewQueue, session: Session, who) -> ReviewClaim | None:
    """`who`'s claim on `session` in `queue`, while it lasts."""
    return ReviewClaim.objects.filter(queue=queue, session=session, holder=reviewer(who).holder,
                                      until__gt=timezone.now()).first()


def release_claim(queue: ReviewQueue, session: Session, who) -> None:
    """Give the session back to the queue without reviewing it (a "skip"): the next reviewer may get it."""
    ReviewClaim.objects.filter(queue=queue, session=session, holder=reviewer(who).holder).delete()


# --- progress --------------------------------------------------------------------------------------


@dataclass
class QueueProgress:
    """Where a queue stands: `matching` sessions match its filter now, `reviewed` of them have a review
    from the queue, `remaining` have none, `claimed` of those are held by a reviewer now; `reviews`
    counts the queue's reviews (a session may have more than one), `by_verdict` and `by_reviewer`
    count them (every verdict present; reviewers by most reviews)."""

    matching: int
    reviewed: int
    claimed: int
    reviews: int
    by_verdict: dict[str, int] = field(default_factory=dict)
    by_reviewer: list[tuple[str, int]] = field(default_factory=list)

    @property
    def remaining(self) -> int:
        return self.matching - self.reviewed

    @property
    def done(self) -> bool:
        return self.remaining == 0

    @property
    def percent(self) -> int:
        return 100 * self.reviewed // self.matching if self.matching else 100


def queue_progress(queue: ReviewQueue, now: datetime | None = None) -> QueueProgress:
    """The queue's progress, in three queries whatever its size."""
    now = now or timezone.now()
    claimed = Exists(ReviewClaim.objects.filter(queue=queue, session=OuterRef("pk"), until__gt=now))
    counts = queue_sessions(queue).order_by().aggregate(
        matching=Count("pk"),
        reviewed=Count("pk", filter=Q(_reviewed_in(queue))),
        claimed=Count("pk", filter=Q(claimed) & ~Q(_reviewed_in(queue))),
    )
    by_verdict = dict.fromkeys(Verdict.values, 0)
    by_reviewer: dict[str, int] = {}
    rows = Review.objects.filter(queue=queue).order_by().values_list("verdict", "reviewer").annotate(count=Count("pk"))
    for verdict, name, count in rows:
        by_verdict[verdict] = by_verdict.get(verdict, 0) + count
        by_reviewer[name] = by_reviewer.get(name, 0) + count
    return QueueProgress(
        matching=counts["matching"], reviewed=counts["reviewed"], claimed=counts["claimed"],
        reviews=sum(by_verdict.values()), by_verdict=by_verdict,
        by_reviewer=sorted(by_reviewer.items(), key=lambda item: (-item[1], item[0])),
    )


def latest_reviews(queue: ReviewQueue, limit: int) -> list[Review]:
    """The queue's newest reviews, with their sessions."""
    return list(Review.objects.filter(queue=queue).select_related("session").order_by("-created_at", "-pk")[:limit])


# --- the CSV of a queue's reviews -------------------------------------------------------------------

CSV_COLUMNS = ("session", "title", "verdict", "labels", "score", "comment", "seqs", "reviewer", "created_at")
# A cell a spreadsheet would read as a formula (or as a command, after a tab or a carriage return) is
# written after a quote, as OWASP's "CSV injection" advises: the text stays readable, nothing runs.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class _Line:
    """A file-like object csv.writer writes one line into, which it then hands back."""

    def write(self, text: str) -> str:
        return text


def reviews_csv(queue: ReviewQueue) -> Iterator[str]:
    """The queue's reviews as CSV lines, oldest first, read in chunks (one query per 500 reviews, each
    with its session): a header, then session key, title, verdict, labels (`; ` between them), score,
    comment, seqs (spaces between them), reviewer and time (ISO 8601, UTC)."""
    writer = csv.writer(_Line())
    yield writer.writerow(CSV_COLUMNS)
    reviews = (Review.objects.filter(queue=queue).select_related("session").order_by("created_at", "pk")
               .iterator(chunk_size=500))
    for review in reviews:
        yield writer.writerow([csv_cell(value) for value in (
            review.session.key, review.session.title, review.verdict, "; ".join(review.labels),
            "" if review.score is None else review.score, review.comment,
            " ".join(str(seq) for seq in review.seqs), review.reviewer, review.created_at.isoformat(),
        )])


def reviews_csv_response(queue: ReviewQueue) -> StreamingHttpResponse:
    """The download of reviews_csv(queue), streamed."""
    response = StreamingHttpResponse(reviews_csv(queue), content_type="text/csv; charset=utf-8")
    name = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_") else "_" for ch in queue.name)
    response["Content-Disposition"] = f'attachment; filename="reviews-{queue.pk}-{name[:60]}.csv"'
    return response

