"""The session page's request timeline and the diff between two consecutive requests, for sessions
rebuilt from recorded requests (Session.request_count > 0, sessions.ingest.recorded_requests).

The timeline reads the session's requests in one query, leaving out what they sent (`messages`,
`response`): only the figures and the lists of seqs it marks. A diff reads its two requests in one query
and the raw messages it names in one more, cut for the page (message_sizes.for_page)."""

from dataclasses import dataclass, field

from sessions.dashboard.chart import round_step, token_ticks
from sessions.db.message_sizes import for_page
from sessions.models import Message, RecordedRequest, Session
from sessions.wire.provider_messages import to_ctxweb

# The newest this many requests are drawn and listed; older ones are counted.
TIMELINE_LIMIT = 400
# Up to this many requests each pair of bars is a link (to its diff) at least 24 px wide, even when a
# phone scrolls the chart at 900 px; with more, the table's links alone lead to the diffs.
LINKED_BARS = 35
# A diff lists at most this many dropped and this many added messages.
DIFF_LIMIT = 300
EXCERPT = 160  # characters of a dropped or added message the diff shows


@dataclass
class TimelineBar:
    """One request of the timeline, with where the chart draws it."""

    number: int
    started_at: object
    model: str
    tokens: int
    usage_input_tokens: int | None
    dropped: int  # raw messages it no longer carries
    unmatched: int  # messages it sent that match no raw message: the application's own
    x: float = 0  # left edge of its pair of bars
    width: float = 0  # of each bar
    ours_y: float = 0
    ours_height: float = 0
    usage_y: float | None = None
    usage_height: float = 0
    mark_y: float = 0  # where its markers sit
    slot_x: float = 0  # its whole slot, which a pointer or a tap may hit
    slot_width: float = 0

    @property
    def difference(self) -> int | None:
        """The provider's figure minus ours."""
        return None if self.usage_input_tokens is None else self.usage_input_tokens - self.tokens

    @property
    def marked(self) -> bool:
        return bool(self.dropped or self.unmatched)

    @property
    def usage_x(self) -> float:
        """The provider's bar's left edge, and the middle of the pair, where the markers sit."""
        return round(self.x + self.width, 1)

    @property
    def dropped_mark(self) -> str:
        """A triangle pointing down above the bars: this request dropped raw messages."""
        cx = self.usage_x - (6 if self.unmatched else 0)
        return f"{cx - 5:.1f},{self.mark_y - 5:.1f} {cx + 5:.1f},{self.mark_y - 5:.1f} {cx:.1f},{self.mark_y + 4:.1f}"

    @property
    def own_mark(self) -> str:
        """A diamond above the bars: this request sent messages of the application's own."""
        cx = self.usage_x + (6 if self.dropped else 0)
        y = self.mark_y
        return f"{cx:.1f},{y - 6:.1f} {cx + 5:.1f},{y:.1f} {cx:.1f},{y + 6:.1f} {cx - 5:.1f},{y:.1f}"


@dataclass
class Timeline:
    bars: list[TimelineBar]
    total: int  # requests recorded
    earlier: int  # older requests not drawn (beyond TIMELINE_LIMIT)
    width: int
    height: int
    pad_left: int
    right: int
    axis_y: float
    y_ticks: list[dict]
    x_ticks: list[dict]
    dropped_requests: int  # requests that dropped messages
    rewritten_requests: int  # requests that sent messages of the application's own
    unreported: int  # requests whose provider reported no usage

    @property
    def linked(self) -> bool:
        """Whether each pair of bars is a link: only while they are wide enough to hit."""
        return len(self.bars) <= LINKED_BARS

    @property
    def plot_height(self) -> float:
        return round(self.axis_y - 4, 1)

    @property
    def marked(self) -> list[TimelineBar]:
        return [b for b in self.bars if b.marked]


def request_timeline(session: Session, limit: int = TIMELINE_LIMIT, width: int = 1400,
                     height: int = 190) -> Timeline | None:
    """The session's recorded requests in number order, each with our token count and the provider's side
    by side, and marked where the application dropped messages or sent its own; None (and no query) for a
    session not rebuilt from requests."""
    if not session.request_count:
        return None
    rows = list(
        RecordedRequest.objects.filter(session=session).order_by("-number")
        .values_list("number", "started_at", "model", "tokens", "usage_input_tokens", "dropped_seqs", "unmatched")
        [:limit]
    )[::-1]
    if not rows:
        return None
    bars = [TimelineBar(number, started_at, model, tokens, usage, len(dropped or []), len(unmatched or []))
            for number, started_at, model, tokens, usage, dropped, unmatched in rows]
    first, last = bars[0].number, bars[-1].number
    pad_left, pad_right, pad_top, pad_bottom = 56, 16, 22, 22  # pad_top: room for the markers
    axis_y = height - pad_bottom
    highest = max([1] + [b.tokens for b in bars] + [b.usage_input_tokens or 0 for b in bars])
    top = highest * 1.1
    slots = last - first + 1
    slot = (width - pad_left - pad_right) / slots

    def x(number):  # the left edge of a request's slot
        return pad_left + slot * (number - first)

    def y(tokens):
        return round(pad_top + (axis_y - pad_top) * (1 - tokens / top), 1)

    bar_width = round(max(slot * 0.36, 0.6), 1)
    for b in bars:
        b.x = round(x(b.number) + slot / 2 - bar_width, 1)
        b.width = bar_width
        b.ours_y = y(b.tokens)
        b.ours_height = round(axis_y - b.ours_y, 1)
        b.usage_y = None if b.usage_input_tokens is None else y(b.usage_input_tokens)
        b.usage_height = 0 if b.usage_y is None else round(axis_y - b.usage_y, 1)
        b.slot_x, b.slot_width = round(x(b.number), 1), round(slot, 1)
        b.mark_y = round(min(b.ours_y, b.usage_y if b.usage_y is not None else axis_y) - 9, 1)
    # Round request numbers (every 1, 2, 5, 10... of them) from `first` to `last`, and `first` itself.
    step = round_step(slots, 12)
    numbers = sorted({first, *range(-(-first // step) * step, last + 1, step)})
    if len(numbers) > 1 and numbers[1] - first < step / 2:
        numbers.remove(first)  # too close to the next label
    x_ticks = [{"x": round(x(n) + slot / 2, 1), "label": str(n)} for n in numbers]
    return Timeline(
        bars=bars,
        total=max(session.request_count, last),
        earlier=first - 1,
        width=width,
        height=height,
        pad_left=pad_left,
        right=width - pad_right,
        axis_y=axis_y,
        y_ticks=[{"y": y(t.value), "label": t.label} for t in token_ticks(top)],
        x_ticks=x_ticks,
        dropped_requests=sum(1 for b in bars if b.dropped),
        rewritten_requests=sum(1 for b in bars if b.unmatched),
        unreported=sum(1 for b in bars if b.usage_input_tokens is None),
    )


# --- the diff between two consecutive requests -----------------------------------------------------


@dataclass
class RawMention:
    """A raw message a diff names: dropped from, or added to, the request."""

    seq: int
    message: Message | None  # None when the raw log has no such seq (it should)
    response: bool = False  # an added message that was the previous request's response

    @property
    def role(self) -> str:
        return self.message.role if self.message else ""

    @property
    def excerpt(self) -> str:
        return excerpt(self.message) if self.message else ""


@dataclass
class OwnMessage:
    """A message a request sent that matches no raw message: the application's summary or rewrite."""

    index: int  # its position among the messages sent, from 0
    role: str
    text: str  # its text parts, joined
    tool_calls: list[dict]  # [{"name", "arguments"}]
    images: int  # image parts (not shown)
    also_in_previous: bool  # the previous request sent the same message
    edits: int | None = None  # the raw seq it is the application's edit of (None: it matches no raw message)


@dataclass
class RequestDiff:
    request: RecordedRequest
    previous: RecordedRequest | None  # None for the first request
    dropped: list[RawMention]
    dropped_more: int
    added: list[RawMention]
    added_more: int
    own: list[OwnMessage]
    instructions_changed: bool
    next_number: int | None  # the following request, when there is one
    kept: int = 0  # raw messages both requests carried
    edited: list[OwnMessage] = field(default_factory=list)  # its edits of raw messages, each naming the seq

    @property
    def number(self) -> int:
        return self.request.number


def excerpt(message: Message, length: int = EXCERPT) -> str:
    """A short, one-line excerpt of a raw message: its text, else its tool calls' names."""
    text = " ".join((message.text or "").split())
    if not text and message.tool_calls:
        text = "calls " + ", ".join(str(c.get("name", "")) for c in message.tool_calls)
    if not text and message.content and not isinstance(message.content, str):
        text = "(no text: " + ", ".join(str(p.get("type", "part")) for p in message.content if isinstance(p, dict)) + ")"
    return text if len(text) <= length else text[: length - 1].rstrip() + "…"


def _own_message(index: int, sent: dict, previous_own: list) -> OwnMessage:
    """A message the application sent that matches no raw message, read by the importers' OpenAI parser
    (as every recorded request was when it was stored): its text, tool calls and image parts."""
    from sessions.wire.parsed import (
        text_of,  # the importers' package imports the append path: imported here
    )

    message = to_ctxweb("openai", [sent]).messages[0]
    content = message.get("content")
    text = text_of(content) or str((message.get("attributes") or {}).get("refusal", ""))
    images = sum(1 for part in content if part.get("type") == "image") if isinstance(content, list) else 0
    calls = [{"name": call["name"], "arguments": call["arguments"]} for call in message.get("tool_calls") or []]
    return OwnMessage(index, message["role"], text, calls, images, sent in previous_own)


def _system_messages(request: RecordedRequest) -> list:
    return [m for m in request.messages if isinstance(m, dict) and m.get("role") in ("system", "developer")]


def _seqs(request: RecordedRequest) -> list[int]:
    return [s for s in request.message_seqs if isinstance(s, int)]


def request_diff(session: Session, number: int, limit: int = DIFF_LIMIT) -> RequestDiff | None:
    """What changed from request `number - 1` to request `number` of the session: the raw messages it
    dropped, the raw messages it added, and the messages of its own (matching no raw message) it sent.
    None when the session has no such request."""
    if not 1 <= number <= 2_147_483_647:
        return None  # no query with a number no database column holds
    pair = {r.number: r for r in RecordedRequest.objects.filter(
        session=session, number__in=[number - 1, number]).defer("response", "parameters")}
    request = pair.get(number)
    if request is None:
        return None
    previous = pair.get(number - 1)
    before = set(_seqs(previous)) if previous else set()
    now = _seqs(request)
    dropped_seqs = [s for s in request.dropped_seqs if isinstance(s, int)]
    added_seqs = [s for s in dict.fromkeys(now) if s not in before]
    shown_dropped, shown_added = dropped_seqs[:limit], added_seqs[:limit]
    wanted = set(shown_dropped) | set(shown_added)
    raw = {m.seq: m for m in for_page(Message.objects.filter(session=session, seq__in=wanted))} if wanted else {}
    responded = set(previous.response_seqs) if previous else set()
    previous_own = [previous.messages[i] for i in previous.unmatched
                    if isinstance(i, int) and 0 <= i < len(previous.messages)] if previous else []
    own = []
    for i in request.unmatched:
        if not isinstance(i, int) or not 0 <= i < len(request.messages) or not isinstance(request.messages[i], dict):
            continue
        own.append(_own_message(i, request.messages[i], previous_own))
    # What it sent of a raw message in a form of its own (a trimmed output, an elided observation).
    previous_edits = [previous.messages[i] for i in previous.edited or ()
                      if isinstance(i, int) and 0 <= i < len(previous.messages)] if previous else []
    edited = []
    for i in request.edited or ():
        if isinstance(i, int) and 0 <= i < len(request.messages) and isinstance(request.messages[i], dict):
            edit = _own_message(i, request.messages[i], previous_edits)
            edit.edits = request.message_seqs[i]
            edited.append(edit)
    return RequestDiff(
        request=request,
        previous=previous,
        dropped=[RawMention(s, raw.get(s)) for s in shown_dropped],
        dropped_more=len(dropped_seqs) - len(shown_dropped),
        added=[RawMention(s, raw.get(s), s in responded) for s in shown_added],
        added_more=len(added_seqs) - len(shown_added),
        own=own,
        edited=edited,
        instructions_changed=bool(previous) and _system_messages(previous) != _system_messages(request),
        next_number=number + 1 if number < session.request_count else None,
        kept=len(before & set(now)),
    )
