"""Search across transcripts, down to the message (or the sessions that hold one): PostgreSQL full-text
search (GIN index) on PostgreSQL, FTS5 on SQLite, behind one function (its SQL is in
sessions/db/message_search.py). Ranking puts messages that contain the exact phrase first, equal ranks in
session then seq order; highlighting escapes the text before it marks the terms. Notes support staff wrote,
and the comments of reviews, are searched too, by substring (see search_notes, search_reviews), and the
search page shows a page of note, review and message hits grouped by session."""

import re
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Greatest, Length, Lower, StrIndex, Substr
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from sessions.access.masking import mask
from sessions.db import message_search
from sessions.db.message_search import TextQuery
from sessions.db.message_sizes import PAGE_DEFERRED
from sessions.db.sessions import sessions_with_metadata_value
from sessions.models import Message, Note, Review, Session
from sessions.wire.grams import UNSPACED, pairs, split_query

WORD = re.compile(r"\w+", re.UNICODE)
# Not highlighted on their own when the query has other words (full-text search ignores them too).
STOP_WORDS = {"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on",
              "or", "that", "the", "this", "to", "was", "with"}
SNIPPET = 220
MAX_TERMS = 12
PAGE = 50  # hits on a page of the search page


@dataclass
class SearchFilters:
    project_ids: list[int]
    role: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    has_checkpoint: bool = False


@dataclass
class Hit:
    message: Message
    snippet: SafeString
    exact: bool
    kind = "message"

    @property
    def session(self) -> Session:
        return self.message.session

    @property
    def seq(self) -> int:
        return self.message.seq


@dataclass
class NoteHit:
    note: Note
    snippet: SafeString
    kind = "note"

    @property
    def session(self) -> Session:
        return self.note.session

    @property
    def seq(self) -> int | None:
        return self.note.seq


@dataclass
class ReviewHit:
    """A review whose comment holds the words; `seq` is the first message it is about (None: the session)."""

    review: Review
    snippet: SafeString
    kind = "review"

    @property
    def session(self) -> Session:
        return self.review.session

    @property
    def seq(self) -> int | None:
        return self.review.seqs[0] if self.review.seqs else None


@dataclass
class SessionHits:
    """One session's hits on a page of results, best first."""

    session: Session
    hits: list


@dataclass
class SearchPage:
    groups: list[SessionHits]
    number: int
    has_next: bool
    hit_count: int  # hits on this page
    total: int = 0  # hits of every page: notes and reviews, then messages counted to MAX_COUNTED + 1 at the most

    @property
    def ranked_at_most(self) -> str:
        """How many matching messages a search ranks at the most, the newest (past MAX_COUNTED it says so)."""
        return f"{message_search.RANKED_AT_MOST:,}"

    @property
    def total_is_more(self) -> bool:
        """The total passed MAX_COUNTED: the page says "more than" it rather than count further."""
        return self.total > MAX_COUNTED

    @property
    def has_previous(self) -> bool:
        return self.number > 1


# Matches are counted to this many at the most; past it a page says "more than 1,000 hits".
MAX_COUNTED = 1000


def terms_of(query: str) -> list[str]:
    """What a query looks for, as it is highlighted: its spaced words, lowercased, and its runs of
    unspaced scripts (Chinese, Japanese, Korean, Thai...: sessions/wire/grams.py), each found anywhere."""
    spaced, runs = split_query(query)
    return ([t.lower() for t in WORD.findall(spaced)] + runs)[:MAX_TERMS]


def text_query(query: str) -> TextQuery:
    """`query` as the full-text index reads it (sessions/db/message_search.py)."""
    spaced, runs = split_query(query)
    runs = runs[:MAX_TERMS]
    return TextQuery(words_query=spaced, words=[t.lower() for t in WORD.findall(spaced)][:MAX_TERMS],
                     runs=runs, grams=[pairs(run) for run in runs], phrase=" ".join(query.split()))


# The sessions list finds the sessions of a word's messages by their ids where the word's newest
# SESSIONS_BY_ID_AT_MOST matches are all it has; a commoner word (in a quarter of 10,000,000 messages,
# reading every match took seconds) is asked of each session's own messages, in the list's order, which
# stops once the page is full (docs/performance.md, "A project of 100,000 sessions").
SESSIONS_BY_ID_AT_MOST = 5000
ASKED_PER_SESSION = "text_asked_per_session"


def _with_text(query: str, project_ids: list[int]) -> tuple[Q | None, bool]:
    """Sessions with at least one message matching `query`, through the full-text index (None when the
    query has no words), and whether each session is asked on its own (a common word)."""
    text = text_query(query)
    if text.empty or not project_ids:
        return None, False
    return message_search.sessions_with_words(text, project_ids, SESSIONS_BY_ID_AT_MOST)


def asks_text_per_session(sessions: QuerySet) -> bool:
    """Whether `sessions` (of sessions_matching) asks each session whether its messages hold a common
    word: counting them would ask every session of the projects, so a list says how many it shows."""
    return ASKED_PER_SESSION in sessions.query.annotations


def sessions_matching(sessions: QuerySet, query: str, project_ids: list[int]) -> QuerySet:
    """Those of `sessions` (of the projects `project_ids`) that `query` finds: its text in the key, the
    title or a value of the metadata (any case), a tag named `query`, its words in a message's text (full-text),
    in a note's text or in a review's comment (any case). This is what `q` means in the sessions list, of the
    API and of the dashboard alike. One query (and, on PostgreSQL, one bounded read of the full-text index
    before it): the tag, note, review and full-text parts are subqueries."""
    query = query.strip()
    if not query:
        return sessions
    found = Q(key__icontains=query) | Q(title__icontains=query)
    if project_ids:  # a value of the metadata, never its keys or JSON punctuation
        found |= sessions_with_metadata_value(query, project_ids)
    found |= Q(pk__in=Session.tags.through.objects.filter(
        tag__project_id__in=project_ids, tag__name=query.lower()).values("session_id"))
    with_text, per_session = _with_text(query, project_ids)
    if with_text is not None:
        found |= with_text
        found |= Q(pk__in=notes_matching(Note.objects.filter(session__project_id__in=project_ids), query)
                   .values("session_id"))
        found |= Q(pk__in=reviews_matching(Review.objects.filter(session__project_id__in=project_ids), query)
                   .values("session_id"))
        if per_session:
            sessions = sessions.alias(**{ASKED_PER_SESSION: Value(True)})
    return sessions.filter(found)


@dataclass
class Snippet:
    """A snippet of a text around a match, as plain text, and where in it the matched words are:
    (start, end) offsets in characters. The API gives both as they are (JSON carries no markup);
    the dashboard marks them (as_html)."""

    text: str
    marks: list[tuple[int, int]]

    def as_html(self) -> SafeString:
        """The snippet HTML-escaped, each match in <mark>."""
        out, pos = [], 0
        for start, end in self.marks:
            out.append(escape(self.text[pos:start]))
            out.append("<mark>" + escape(self.text[start:end]) + "</mark>")
            pos = end
        out.append(escape(self.text[pos:]))
        return mark_safe("".join(out))


def snippet(text: str, query: str, terms: list[str], width: int = SNIPPET, *, more_before: bool = False,
            more_after: bool = False, marked: str | None = None) -> Snippet:
    """A snippet of `text` around the first match, with where the terms are in it. `text` may be a window
    of a longer text (more_before, more_after: it goes on before or after the window). `marked`: a
    regular expression of what to mark instead of the terms (Trace marks what it matched, wherever it
    stands: 7447 in credit_card_7447, W96*49 whole)."""
    phrase = " ".join(query.split())
    words = {t for t in terms if t}
    if words - STOP_WORDS:
        words -= STOP_WORDS
    words = sorted(words, key=len, reverse=True)
    patterns = [re.escape(phrase)] if phrase and len(terms) > 1 else []
    # A spaced word from its start (the index matches words by prefix); a run of an unspaced script
    # anywhere, as the index finds it.
    patterns += [re.escape(w) if UNSPACED.fullmatch(w) else r"\b" + re.escape(w) + r"\w*" for w in words]
    if marked is not None:
        patterns = [marked]
    if not patterns:
        return Snippet(("… " if more_before else "") + text[:width] + (" …" if more_after else ""), [])
    pattern = re.compile("|".join(patterns), re.IGNORECASE)
    first = pattern.search(text)
    start = max(0, (first.start() if first else 0) - width // 3)
    end = min(len(text), start + width)
    prefix = "… " if start > 0 or more_before else ""
    suffix = " …" if end < len(text) or more_after else ""
    cut = text[start:end]
    marks = [(len(prefix) + m.start(), len(prefix) + m.end()) for m in pattern.finditer(cut)]
    return Snippet(prefix + cut + suffix, marks)


def highlight(text: str, query: str, terms: list[str], width: int = SNIPPET, *, more_before: bool = False,
              more_after: bool = False) -> SafeString:
    """A snippet of `text` around the first match, HTML-escaped, with the terms in <mark>."""
    return snippet(text, query, terms, width, more_before=more_before, more_after=more_after).as_html()


def search_messages(query: str, filters: SearchFilters, limit: int = PAGE, offset: int = 0) -> list[Hit]:
    """Messages matching `query` in the projects of `filters`, best first (equal ranks in session, then
    seq order, so pages of them do not overlap); `offset` skips the first ones."""
    query = (query or "").strip()[:200]
    terms = terms_of(query)
    if not terms or not filters.project_ids:
        return []
    ranked = message_search.ranked_message_ids(
        text_query(query), limit, offset, project_ids=filters.project_ids, role=filters.role, since=filters.since,
        until=filters.until, has_checkpoint=filters.has_checkpoint)
    # Only a window of each text is read, cut by the database around the first place a term appears,
    # so 50 hits in messages of a megabyte hold 50 windows, not 50 megabytes.
    words = [t for t in terms if t not in STOP_WORDS] or terms
    needle = max(words, key=len)
    messages = (
        Message.objects.select_related("session__project").defer(*PAGE_DEFERRED)
        .annotate(match_at=StrIndex(Lower("text"), Value(needle)), text_chars=Length("text"))
        .annotate(window_from=Greatest(F("match_at") - SNIPPET, Value(1)))
        .annotate(text_window=Substr("text", F("window_from"), 3 * SNIPPET))
        .in_bulk([pk for pk, _ in ranked])
    )
    return [
        Hit(m, highlight(m.text_window, query, terms, more_before=m.window_from > 1,
                         more_after=m.window_from - 1 + len(m.text_window) < m.text_chars), exact)
        for pk, exact in ranked
        if (m := messages.get(pk)) is not None
    ]


def _words(terms: list[str]) -> list[str]:
    return [t for t in terms if t not in STOP_WORDS] or terms


def holding_words(rows: QuerySet, field: str, query: str) -> QuerySet:
    """Those of `rows` whose `field` holds every word of `query`, any case. A substring match without an
    index: notes and reviews are short and few next to messages, and each search reads only its projects'."""
    terms = terms_of(query)
    if not terms:
        return rows.none()
    for word in _words(terms):
        rows = rows.filter(**{f"{field}__icontains": word})
    return rows


def notes_matching(notes: QuerySet, query: str) -> QuerySet:
    """Those of `notes` whose text holds every word of `query`, any case."""
    return holding_words(notes, "text", query)


def _notes_found(query: str, filters: SearchFilters) -> QuerySet:
    notes = Note.objects.filter(session__project_id__in=filters.project_ids, session__being_imported=False)
    if filters.role:
        # A note on a message of that role; notes on the session have no role.
        notes = notes.filter(Exists(Message.objects.filter(
            session=OuterRef("session"), seq=OuterRef("seq"), role=filters.role)))
    if filters.since:
        notes = notes.filter(created_at__gte=filters.since)
    if filters.until:
        notes = notes.filter(created_at__lte=filters.until)
    if filters.has_checkpoint:
        notes = notes.filter(session__checkpoint_count__gt=0)
    return notes_matching(notes, query)


def search_notes(query: str, filters: SearchFilters, limit: int = PAGE, offset: int = 0) -> list[NoteHit]:
    """Notes whose text holds every word of `query` in the projects of `filters`, in session then seq
    order (notes on the session first), with the words highlighted."""
    query = (query or "").strip()[:200]
    terms = terms_of(query)
    if not terms or not filters.project_ids:
        return []
    notes = (_notes_found(query, filters).select_related("session__project", "author")
             .order_by("session_id", F("seq").asc(nulls_first=True), "pk")[offset:offset + limit])
    return [NoteHit(note, highlight(note.text, query, terms)) for note in notes]


def reviews_matching(reviews: QuerySet, query: str) -> QuerySet:
    """Those of `reviews` whose comment holds every word of `query`, any case."""
    return holding_words(reviews, "comment", query)


def _reviews_found(query: str, filters: SearchFilters) -> QuerySet:
    reviews = Review.objects.filter(session__project_id__in=filters.project_ids, session__being_imported=False)
    if filters.role:
        # A review is about the session (and maybe some of its messages), as a note on the session is:
        # a search for one role's messages leaves reviews out.
        return reviews.none()
    if filters.since:
        reviews = reviews.filter(created_at__gte=filters.since)
    if filters.until:
        reviews = reviews.filter(created_at__lte=filters.until)
    if filters.has_checkpoint:
        reviews = reviews.filter(session__checkpoint_count__gt=0)
    return reviews_matching(reviews, query)


def search_reviews(query: str, filters: SearchFilters, limit: int = PAGE, offset: int = 0) -> list[ReviewHit]:
    """Reviews whose comment holds every word of `query` in the projects of `filters`, in session then
    time order, with the words highlighted."""
    query = (query or "").strip()[:200]
    terms = terms_of(query)
    if not terms or not filters.project_ids:
        return []
    reviews = (_reviews_found(query, filters).select_related("session__project", "author", "queue")
               .order_by("session_id", "created_at", "pk")[offset:offset + limit])
    return [ReviewHit(review, highlight(review.comment, query, terms)) for review in reviews]


def search(query: str, filters: SearchFilters, page: int = 1, per_page: int = PAGE) -> SearchPage:
    """One page of what `query` finds, grouped by session: the notes that hold it first (what colleagues
    wrote about a case), then the reviews' comments, then the messages, best first. A session's group
    stands where its first hit on the page does."""
    query = (query or "").strip()[:200]
    page = max(1, page)
    start = (page - 1) * per_page
    if not terms_of(query) or not filters.project_ids:
        return SearchPage([], page, False, 0)
    note_total = _notes_found(query, filters).count()
    review_total = _reviews_found(query, filters).count()
    wanted = per_page + 1  # one more tells whether there is a next page
    hits: list = []
    if start < note_total:
        hits += search_notes(query, filters, limit=wanted, offset=start)
    if len(hits) < wanted and start < note_total + review_total:
        hits += search_reviews(query, filters, limit=wanted - len(hits), offset=max(0, start - note_total))
    if len(hits) < wanted:
        hits += search_messages(query, filters, limit=wanted - len(hits),
                                offset=max(0, start - note_total - review_total))
    has_next = len(hits) > per_page
    hits = hits[:per_page]
    groups: dict[int, SessionHits] = {}
    for hit in hits:
        groups.setdefault(hit.session.pk, SessionHits(hit.session, [])).hits.append(hit)
    if not has_next and (page == 1 or hits):  # the last page: what came before it, and it, are all there are
        total = start + len(hits)
    else:
        total = note_total + review_total + message_search.count_matching(
            text_query(query), MAX_COUNTED, project_ids=filters.project_ids, role=filters.role,
            since=filters.since, until=filters.until, has_checkpoint=filters.has_checkpoint)
    return SearchPage(list(groups.values()), page, has_next, len(hits), total)


def _hit_text(hit) -> str:
    if hit.kind == "note":
        return hit.note.text
    if hit.kind == "review":
        return hit.review.comment
    return hit.message.text or ""


def outside_masked_values(page: SearchPage, query: str, patterns) -> SearchPage:
    """The page of hits as a viewer who sees personal data masked may have it: a hit whose text holds
    personal data counts only if every word of the query is still in its text once masked, so that a
    search never matches inside a masked value (a search for an e-mail address, or for its domain, finds
    nothing it would reveal). Hits whose text has nothing masked stay as they are."""
    words = [w.lower() for w in _words(terms_of(query))]
    dropped = 0
    groups = []
    for group in page.groups:
        kept = []
        for hit in group.hits:
            text = _hit_text(hit)
            masked = mask(text, patterns)
            if masked == text or all(word in masked.lower() for word in words):
                kept.append(hit)
            else:
                dropped += 1
        if kept:
            groups.append(SessionHits(group.session, kept))
    page.groups, page.hit_count, page.total = groups, page.hit_count - dropped, max(0, page.total - dropped)
    return page
