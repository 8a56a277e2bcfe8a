"""How big a stored message is, measured by the database, so that code which must bound its memory
(exports, the pages) can decide what to read before reading it.

A page reads its messages through `for_page`: the database cuts every long text to its first
TEXT_SHOWN characters and leaves out JSON fields longer than FIELD_SHOWN characters, so a page of 60
messages holds at most about 60 x (2 x TEXT_SHOWN + 3 x FIELD_SHOWN) = 1.9 M characters of message
data, whatever the messages' size. A message that was cut says so (`cut`), and its whole body is one request
away (views.message_full)."""

import json
from collections.abc import Iterator

from django.db.models import Case, F, Func, TextField, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce, Length, Substr
from django.db.models.lookups import LessThanOrEqual
from django.db.models.query import ModelIterable

# Characters of a long text (the content's text, reasoning) a page shows before its "show all" link.
TEXT_SHOWN = 4_000
# A JSON field (content, tool calls, attributes) longer than this, as stored, is left out of a page.
FIELD_SHOWN = 8_000
# A request that hands out whole messages (an export, a page of the API's raw log) holds at most this
# many characters of them at a time, or one message when a single one is bigger.
PAGE_CHARS = 4_000_000
PAGE_DEFERRED = ("content", "text", "reasoning", "tool_calls", "attributes", "digest")


def _length(field: str, json: bool = False) -> Func:
    return Coalesce(Length(Cast(field, TextField()) if json else field), 0)


def stored_chars() -> Func:
    """Characters a message holds as stored: its text, reasoning, content, tool calls and attributes
    (the JSON fields as their JSON text)."""
    return (_length("text") + _length("reasoning") + _length("content", json=True)
            + _length("tool_calls", json=True) + _length("attributes", json=True))


def sizes(qs, limit: int) -> list[tuple[int, int]]:
    """(seq, stored characters) of qs's first `limit` messages in seq order, measured by the database."""
    return list(qs.order_by("seq").annotate(chars=stored_chars()).values_list("seq", "chars")[:limit])


def pages(sizes: list[tuple[int, int]], budget: int | None = None) -> Iterator[tuple[int, int]]:
    """(first seq, last seq) of consecutive runs of `sizes` holding at most `budget` (PAGE_CHARS)
    characters, or one message when a single one holds more."""
    budget = PAGE_CHARS if budget is None else budget
    page, total = [], 0
    for seq, chars in sizes:
        if page and total + chars > budget:
            yield page[0], page[-1]
            page, total = [], 0
        page.append(seq)
        total += chars
    if page:
        yield page[0], page[-1]


def first_page(qs, limit: int) -> tuple[list, bool]:
    """qs's first messages in seq order, at most `limit` of them and at most PAGE_CHARS characters (or
    one message), and whether more may follow."""
    # The sizes are read a few rows at a time and no further than the page goes: measuring all `limit`
    # rows would read every one of them in the database, for every page.
    measured = qs.order_by("seq").annotate(chars=stored_chars()).values_list("seq", "chars")[:limit]
    seqs, total, cut = [], 0, False
    for seq, chars in measured.iterator(chunk_size=10):
        if seqs and total + chars > PAGE_CHARS:
            cut = True
            break
        seqs.append(seq)
        total += chars
    if not seqs:
        return [], False
    page = list(qs.filter(seq__gte=seqs[0], seq__lte=seqs[-1]).order_by("seq"))
    return page, cut or len(seqs) == limit


def _json_if_short(field: str):
    """The field as stored when its JSON is at most FIELD_SHOWN characters, else null."""
    return Case(When(LessThanOrEqual(_length(field, json=True), FIELD_SHOWN), then=F(field)), default=Value(None))


class _ShownMessages(ModelIterable):
    """Messages read by for_page, their cut fields put back in place under their usual names."""

    def __iter__(self):
        for m in super().__iter__():
            m.text_cut = m.text_chars > TEXT_SHOWN
            m.content_cut = m.shown_content is None
            m.reasoning_cut = m.reasoning_chars > TEXT_SHOWN
            m.tool_calls_cut = m.shown_tool_calls is None
            m.attributes_cut = m.shown_attributes is None
            m.cut = m.text_cut or m.content_cut or m.reasoning_cut or m.tool_calls_cut or m.attributes_cut
            # Display copies: these rows are never saved.
            m.text = m.text_head
            m.content = m.text_head if m.content_cut else m.shown_content
            m.reasoning = m.reasoning_head
            m.tool_calls = (m.shown_tool_calls if not m.tool_calls_cut else
                            [{"id": call_id, "name": "", "arguments": ""} for call_id in m.call_ids])
            m.attributes = m.shown_attributes if not m.attributes_cut else (
                {"hidden_in_source_ui": True} if m.hidden_in_source_ui in ("true", "1") else {})
            yield m


def too_long_for_page(value) -> bool:
    """A JSON field's value that for_page leaves out (measured as Django stores it: ASCII JSON)."""
    return len(json.dumps(value)) > FIELD_SHOWN


def for_page(qs):
    """qs's messages as a page shows them, with at most a bounded amount of each read from the database."""
    qs = qs.defer(*PAGE_DEFERRED).annotate(
        text_head=Substr("text", 1, TEXT_SHOWN), text_chars=_length("text"),
        reasoning_head=Substr("reasoning", 1, TEXT_SHOWN), reasoning_chars=_length("reasoning"),
        shown_content=_json_if_short("content"), shown_tool_calls=_json_if_short("tool_calls"),
        shown_attributes=_json_if_short("attributes"),
        hidden_in_source_ui=Cast(KT("attributes__hidden_in_source_ui"), TextField()),
        stored_chars=stored_chars(),
    )
    qs._iterable_class = _ShownMessages
    return qs
