"""What the session page shows, computed without HTTP: a window of the raw log with each message's
explanation, coverage and tool links; a window of the model input; the size of the model input
across the conversation. Every piece reads a bounded number of rows with a fixed number of queries,
so a 100,000-message session opens as fast as a small one."""

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import F, Window
from django.db.models.functions import Mod, RowNumber

from sessions.context.compaction import CurrentTurn, oversized_turn
from sessions.context.explain import (
    Explanation,
    checkpoints_of,
    covering_checkpoint,
    explain_messages,
    page_layout,
)
from sessions.context.model_input import (
    ModelInputShape,
    Reason,
    kept_tokens,
    summary_message_text,
    visible_messages,
)
from sessions.context.recorded_input import RAW_LOG, RECORDED_REQUEST, basis_of
from sessions.dashboard.chart import message_ticks, token_ticks
from sessions.db.message_sizes import FIELD_SHOWN, TEXT_SHOWN, for_page, too_long_for_page
from sessions.models import (
    Checkpoint,
    CompactionRun,
    CompactionSettings,
    Event,
    EventType,
    Message,
    Note,
    RecordedRequest,
    Role,
    Session,
)
from sessions.store.event_types import CompactionCompleted, MessagesAppended, MessageUpdated
from sessions.store.events import event_data
from sessions.wire.parts import pretty_arguments
from sessions.wire.tokens import REPLY_PRIMING

RAW_WINDOW = 60
INPUT_WINDOW = 60
CHART_POINTS = 400
DIFF_WINDOW = 300
# Checkpoint colours cycle through this many CSS classes, cp-0 to cp-5 in static/ctxweb.css
# (tests/dashboard/test_palette.py holds the two to the same size).
PALETTE = 6


@dataclass
class ToolCallView:
    id: str
    name: str
    arguments: str  # pretty-printed when it is JSON
    result_seq: int | None
    dropped: bool = False
    pending: bool = False  # awaiting its result: left out of the request until it comes


@dataclass
class RawItem:
    message: Message
    explanation: Explanation
    checkpoint: Checkpoint | None  # the checkpoint that first covered it
    tool_calls: list[ToolCallView] = field(default_factory=list)
    colour: int | None = None
    notes: list = field(default_factory=list)
    hidden_by: Event | None = None  # the MESSAGE_UPDATED event that hid it, when it is hidden and one did

    @property
    def seq(self) -> int:
        return self.message.seq

    @property
    def code(self) -> str:
        return self.explanation.code

    @property
    def in_input(self) -> bool:
        return self.explanation.code == Reason.IN_INPUT


@dataclass
class RawWindow:
    items: list[RawItem]
    first_seq: int | None
    last_seq: int | None
    has_earlier: bool
    has_later: bool


@dataclass
class InputItem:
    kind: str  # instructions | summary | message
    role: str
    tokens: int
    position: int
    message: Message | None = None
    text: str = ""
    checkpoint: Checkpoint | None = None
    tool_calls: list[ToolCallView] = field(default_factory=list)
    dropped_calls: list[str] = field(default_factory=list)
    pending_calls: list[str] = field(default_factory=list)
    # What the application sent (basis recorded_request): the request's own message (no raw message:
    # `content` is what it sent) or its edit of the raw message (`content` is the edited form).
    own: bool = False
    edited: bool = False
    content: object = None
    content_cut: bool = False
    seq: int | None = None

    @property
    def provider_role(self) -> str:
        return "user" if self.role == Role.AGENT else self.role


@dataclass
class InputWindow:
    items: list[InputItem]
    earlier: int  # stored messages of the input not shown (before the window)
    first_position: int | None
    first_seq: int | None = None

    @property
    def head(self) -> list[InputItem]:
        """The instructions and the summary, when this window has them."""
        return [item for item in self.items if item.kind != "message"]

    @property
    def messages(self) -> list[InputItem]:
        return [item for item in self.items if item.kind == "message"]


LISTED_CHECKPOINTS = 50


def checkpoint_colour(checkpoint: Checkpoint | None) -> int | None:
    """Its colour (the class cp-N): by its number, which is its place among the session's checkpoints,
    oldest first; past the last colour the palette starts again at the first."""
    if checkpoint is None:
        return None
    return (checkpoint.number - 1) % PALETTE


def _tool_results(session: Session, messages: list[Message]) -> dict[tuple[int, str], int]:
    """(assistant seq, call id) -> seq of the stored result, for the calls in `messages`."""
    seqs = [m.seq for m in messages if m.call_ids]
    if not seqs:
        return {}
    # Only tool results have a call_seq; the (session, call_seq) index answers this directly.
    rows = (
        Message.objects.filter(session=session, call_seq__in=seqs)
        .order_by("call_seq", "seq")
        .values_list("call_seq", "tool_call_id", "seq")
    )
    results = {}
    for call_seq, call_id, seq in rows:
        results.setdefault((call_seq, call_id), seq)
    return results


def _calls(message: Message, results, dropped=(), pending=()) -> list[ToolCallView]:
    return [
        ToolCallView(c["id"], c["name"], pretty_arguments(c["arguments"]), results.get((message.seq, c["id"])),
                     c["id"] in dropped, c["id"] in pending)
        for c in message.tool_calls
    ]


def raw_window(
    session: Session,
    layout: ModelInputShape,
    checkpoints: list[Checkpoint],
    *,
    after: int | None = None,
    before: int | None = None,
    around: int | None = None,
    limit: int = RAW_WINDOW,
) -> RawWindow:
    """A window of the raw log: the newest messages, or those after/before a seq, or around one."""
    qs = for_page(session.messages.all())
    if around is not None:
        start = max(1, around - limit // 2)
        messages = list(qs.filter(seq__gte=start).order_by("seq")[:limit])
    elif after is not None:
        messages = list(qs.filter(seq__gt=after).order_by("seq")[:limit])
    elif before is not None:
        messages = list(qs.filter(seq__lt=before).order_by("-seq")[:limit])[::-1]
    else:
        messages = list(qs.order_by("-seq")[:limit])[::-1]
    explanations = explain_messages(messages, layout, checkpoints)
    results = _tool_results(session, messages)
    notes = defaultdict(list)
    if messages:
        for note in Note.objects.filter(session=session, seq__gte=messages[0].seq, seq__lte=messages[-1].seq).select_related("author"):
            notes[note.seq].append(note)
    chain = [c for c in checkpoints if layout.checkpoint and c.last_seq <= layout.checkpoint.last_seq]
    hidden_by = hiding_events(session, [m.seq for m in messages if not m.include_in_messages])
    items = []
    for m in messages:
        explanation = explanations[m.seq]
        covering = covering_checkpoint(chain, m.seq) if explanation.code == Reason.COVERED else None
        items.append(
            RawItem(m, explanation, covering, _calls(m, results, explanation.dropped_calls, explanation.pending_calls),
                    checkpoint_colour(covering), notes.get(m.seq, []),
                    hidden_by.get(m.seq) if explanation.code == Reason.EXCLUDED else None)
        )
    first = messages[0].seq if messages else None
    last = messages[-1].seq if messages else None
    return RawWindow(
        items,
        first,
        last,
        has_earlier=bool(first and first > 1),
        has_later=bool(last and last < session.message_count),
    )


def hiding_events(session: Session, seqs: list[int]) -> dict[int, Event]:
    """For hidden messages: the latest MESSAGE_UPDATED event that set include_in_messages to false, by seq
    (one query, none when no message is hidden). A message stored hidden has none."""
    if not seqs:
        return {}
    found: dict[int, Event] = {}
    events = Event.objects.filter(session=session, type=EventType.MESSAGE_UPDATED, data__seq__in=seqs)
    for event in events.order_by("pk").only("pk", "data", "actor", "created_at"):
        change = (event.data.get("changes") or {}).get("include_in_messages") or {}
        if change.get("to") is False:
            found[event.data["seq"]] = event
    return found


def whole_message(message: Message) -> dict:
    """What a message's "show all" shows: all of its text and reasoning, and its tool calls and attributes
    when they are long enough that the pages left them out."""
    return {"m": message, "calls": _calls(message, {}), "calls_long": too_long_for_page(message.tool_calls),
            "attributes_long": too_long_for_page(message.attributes)}


def input_window(session: Session, layout: ModelInputShape, checkpoints: list[Checkpoint], *,
                 before: int | None = None, limit: int = INPUT_WINDOW) -> InputWindow:
    """The newest `limit` stored messages of the model input (or those before seq `before`), with the
    instructions and the summary at the top of the first window (before=None), so the summary is always
    on the page; the earlier messages load between the summary and the window, without them. For what
    the application sent (basis recorded_request), `before` is a position in the input instead."""
    if layout.basis == RECORDED_REQUEST:
        return recorded_input_window(session, layout, before=before, limit=limit)
    shown = layout.stored_tail(before, limit)
    positions = layout.positions(shown)
    first_position = positions[shown[0].seq] if shown else None
    earlier = first_position - layout.head_count - 1 if shown else 0
    results = _tool_results(session, shown)
    items: list[InputItem] = []
    if before is None:
        position = 0
        if session.instructions_tokens:
            position += 1
            items.append(InputItem("instructions", Role.SYSTEM, session.instructions_tokens, position, text=session.instructions))
        if layout.checkpoint:
            position += 1
            items.append(InputItem(
                "summary", Role.USER, layout.checkpoint.summary_tokens, position,
                text=summary_message_text(layout.checkpoint.summary, layout.checkpoint.last_seq),
                checkpoint=layout.checkpoint,
            ))
    dropped_by_seq, pending_by_seq = layout.dropped, layout.pending
    for m in shown:
        dropped = dropped_by_seq.get(m.seq, [])
        pending = pending_by_seq.get(m.seq, [])
        calls = [c for c in _calls(m, results) if c.id not in dropped and c.id not in pending]
        items.append(InputItem("message", m.role, kept_tokens(m, dropped + pending), positions[m.seq], message=m,
                               tool_calls=calls, dropped_calls=dropped, pending_calls=pending))
    return InputWindow(items, earlier, first_position, shown[0].seq if shown else None)


def _shown(content) -> tuple[object, bool]:
    """Content the application sent, cut for a page as message_sizes.for_page cuts stored messages: a text
    to its first TEXT_SHOWN characters; whether anything was cut."""
    if isinstance(content, str):
        return (content[:TEXT_SHOWN], True) if len(content) > TEXT_SHOWN else (content, False)
    parts, cut, budget = [], False, TEXT_SHOWN
    for part in content or ():
        if part.get("type") == "text":
            text = part.get("text", "")
            if len(text) > budget:
                text, cut = text[:budget], True
            budget -= len(text)
            parts.append({**part, "text": text})
        elif part.get("type") == "image" and len(part.get("url", "")) <= FIELD_SHOWN:
            parts.append(part)
        else:
            cut = True
    return parts, cut


def recorded_input_window(session: Session, model_input, *, before: int | None = None,
                          limit: int = INPUT_WINDOW) -> InputWindow:
    """The last `limit` entries of what the application sent (before position `before`), each with its raw
    message when it is one, or what the application sent in its place (its own message, its edit)."""
    entries = model_input.entries
    end = len(entries) if before is None else max(0, min(before - 1, len(entries)))
    start = max(0, end - limit)
    shown = entries[start:end]
    seqs = [e.seq for e in shown if e.seq is not None]
    stored = {m.seq: m for m in for_page(session.messages.filter(seq__in=seqs))} if seqs else {}
    results = _tool_results(session, list(stored.values()))
    items = []
    for position, entry in enumerate(shown, start=start + 1):
        if entry.kind == "instructions":
            items.append(InputItem("instructions", Role.SYSTEM, entry.tokens, position, text=entry.content))
            continue
        message = stored.get(entry.seq)
        own = message is None
        content, cut = _shown(entry.content) if own or entry.edited else (None, False)
        calls = _calls(message, results) if message is not None else [
            ToolCallView(c["id"], c["name"], pretty_arguments(c["arguments"]), None) for c in entry.tool_calls]
        left_out = set(entry.dropped_calls) | {c["id"] for c in entry.pending_calls}
        items.append(InputItem(
            "message", entry.role, entry.tokens, position, message=message,
            tool_calls=[c for c in calls if c.id not in left_out], dropped_calls=list(entry.dropped_calls),
            pending_calls=[c["id"] for c in entry.pending_calls], own=own, edited=entry.edited and not own,
            content=content, content_cut=cut, seq=entry.seq,
        ))
    return InputWindow(items, start, start + 1 if shown else None, None)


def checkpoint_as_of(session: Session, checkpoint_id: int) -> int | None:
    """The seq the input "as of" a checkpoint ends at (the highest seq when it was made), or None when the
    session has no such checkpoint."""
    return session.checkpoints.filter(pk=checkpoint_id).values_list("created_at_seq", flat=True).first()


@dataclass
class CompactionDiff:
    """What a compaction changed: what left the input, what replaced it, what stayed."""

    checkpoint: Checkpoint
    previous: Checkpoint | None
    summary_text: str
    previous_text: str
    left: list[Message]  # the messages it newly covers (the first `limit`)
    left_more: int
    stayed: list[Message]  # the visible messages after it, up to where it was made (the first `limit`)
    stayed_more: int
    event: Event | None  # its COMPACTION_COMPLETED


def compaction_diff(session: Session, checkpoint: Checkpoint, limit: int = DIFF_WINDOW) -> CompactionDiff:
    # System messages in the range are instructions: they never leave the input, so they are not listed.
    covered = session.messages.filter(seq__gte=checkpoint.first_seq, seq__lte=checkpoint.last_seq).exclude(
        role=Role.SYSTEM)
    left = list(for_page(covered).order_by("seq")[:limit])
    stayed = visible_messages(session, checkpoint.last_seq, as_of=checkpoint.created_at_seq)
    shown = list(for_page(stayed)[:limit])
    previous = checkpoint.previous
    return CompactionDiff(
        checkpoint=checkpoint,
        previous=previous,
        summary_text=summary_message_text(checkpoint.summary, checkpoint.last_seq),
        previous_text=summary_message_text(previous.summary, previous.last_seq) if previous else "",
        left=left,
        left_more=covered.count() - len(left) if len(left) == limit else 0,
        stayed=shown,
        stayed_more=stayed.count() - len(shown) if len(shown) == limit else 0,
        event=Event.objects.filter(session=session, type=EventType.COMPACTION_COMPLETED,
                                   data__checkpoint_id=checkpoint.pk).first(),
    )


def recorded_size_series(session: Session, limit: int = CHART_POINTS) -> list[dict]:
    """The size of what the application sent across the conversation (a session rebuilt from recorded
    requests): one point per request (the newest `limit`), at the message it was sent after, with the tokens
    ctxweb counted of it."""
    rows = list(RecordedRequest.objects.filter(session=session).order_by("-number")
                .values_list("number", "at_seq", "tokens")[:limit])[::-1]
    points = [{"seq": at_seq, "tokens": tokens, "id": number, "kind": "request", "number": number}
              for number, at_seq, tokens in rows]
    if points:
        points.insert(0, {"seq": 0, "tokens": REPLY_PRIMING, "id": 0, "kind": "start"})
    return points


def size_series(session: Session, limit: int = CHART_POINTS) -> list[dict]:
    """Model-input size across the conversation, from the figures events recorded when they happened:
    one point per append (sampled down to about `limit`), and a drop at every completed compaction."""
    appends = Event.objects.filter(session=session, type__in=[EventType.MESSAGES_APPENDED, EventType.MESSAGE_UPDATED])
    total = appends.count()
    step = max(1, total // limit)
    if step > 1:
        sampled = (
            appends.annotate(n=Window(RowNumber(), order_by=F("pk").asc()))
            .annotate(r=Mod("n", step))
            .filter(r=0)
            .values_list("pk", flat=True)
        )
        newest = appends.order_by("-pk").values_list("pk", flat=True)[:1]
        appends = Event.objects.filter(pk__in=[*sampled, *newest])
    points = []
    for event in appends.order_by("pk").only("type", "data"):
        data: MessagesAppended | MessageUpdated = event_data(event)
        seq = data.last_seq if isinstance(data, MessagesAppended) else data.at_seq
        points.append({"seq": seq, "tokens": data.input_tokens, "id": event.pk, "kind": "append"})
    numbers = checkpoint_numbers(session)
    for event in Event.objects.filter(session=session, type=EventType.COMPACTION_COMPLETED).only("type", "data"):
        data: CompactionCompleted = event_data(event)
        points.append({"seq": data.at_seq, "tokens": data.tokens_before, "id": event.pk - 0.5, "kind": "before"})
        points.append({"seq": data.at_seq, "tokens": data.tokens_after, "id": event.pk, "kind": "drop",
                       "checkpoint": data.checkpoint_id, "number": numbers.get(data.checkpoint_id)})
    points.sort(key=lambda p: (p["seq"], p["id"]))
    if points:
        points.insert(0, {"seq": 0, "tokens": REPLY_PRIMING + session.instructions_tokens, "id": 0, "kind": "start"})
    return points


def chart_svg_data(session: Session, width: int = 1400, height: int = 170, as_of: ModelInputShape | None = None,
                   basis: str | None = None) -> dict:
    """Coordinates for the server-rendered SVG chart: the line, round ticks on both axes, a marker per
    drop, and the model input the page shows "as of" a message (`as_of`, laid out by page_layout). On the
    basis recorded_request, the line is what the application sent, request by request."""
    recorded = (basis or basis_of(session)) == RECORDED_REQUEST
    points = recorded_size_series(session) if recorded else size_series(session)
    compaction = session.compaction_settings()
    max_seq = max([session.message_count, 1] + [p["seq"] for p in points])
    highest = max([1, as_of.tokens if as_of is not None else 0] + [p["tokens"] for p in points])
    # The threshold is drawn when it is in sight; far above the data it would flatten the line.
    threshold_shown = compaction.max_tokens <= highest * 3
    top = max(highest, compaction.max_tokens if threshold_shown else 0) * 1.1
    pad_left, pad_right, pad_top, pad_bottom = 56, 28, 8, 22  # room for the labels at either end
    axis_y = height - pad_bottom

    def x(seq):
        return round(pad_left + (width - pad_left - pad_right) * seq / max_seq, 1)

    def y(tokens):
        return round(pad_top + (axis_y - pad_top) * (1 - tokens / top), 1)

    line = " ".join(f"{x(p['seq'])},{y(p['tokens'])}" for p in points)
    drops = [
        {"x": x(p["seq"]), "y": y(p["tokens"]), "seq": p["seq"], "tokens": p["tokens"], "checkpoint": p.get("checkpoint"),
         "number": p.get("number")}
        for p in points if p["kind"] == "drop"
    ]
    return {
        "width": width,
        "height": height,
        "line": line,
        # What the pointer reads (static/ctxweb.js): "seq tokens x y" per point.
        "readings": ";".join(f"{p['seq']} {p['tokens']} {x(p['seq'])} {y(p['tokens'])}" for p in points),
        "drops": drops,
        "threshold_y": y(compaction.max_tokens) if threshold_shown else None,
        "max_tokens": compaction.max_tokens,
        "axis_y": axis_y,
        "pad_left": pad_left,
        "right": width - pad_right,
        "y_ticks": [{"y": y(t.value), "label": t.label} for t in token_ticks(top)],
        "x_ticks": [{"x": x(t.value), "label": t.label} for t in message_ticks(max_seq)],
        "as_of": None if as_of is None else {
            "seq": as_of.as_of, "tokens": as_of.tokens, "x": x(as_of.as_of), "y": y(as_of.tokens)},
        "max_seq": max_seq,
        "empty": not points,
        "recorded": recorded,
    }


def session_view(session: Session, *, as_of: int | None = None, around: int | None = None,
                 basis: str | None = None) -> dict:
    """Everything the first screen of the session page needs."""
    checkpoints = checkpoints_of(session)
    layout = page_layout(session, checkpoints, as_of, basis)
    compaction = session.compaction_settings()
    # An application that sends its own context is not compacted by ctxweb: no turn of it is "oversized".
    turn = oversized_turn(layout, compaction) if layout.basis == RAW_LOG else None
    return {
        "layout": layout,
        "checkpoints": checkpoints,
        # The panel and the as-of choice list the newest LISTED_CHECKPOINTS: a session compacted thousands
        # of times rendered them all, most of its page's time at a million messages.
        "listed_checkpoints": checkpoints[-LISTED_CHECKPOINTS:],
        "raw": raw_window(session, layout, checkpoints, around=around),
        "input": input_window(session, layout, checkpoints),
        "compaction": compaction,
        "meter": meter(layout.tokens, compaction, turn),
        "compaction_run": latest_compaction_run(session),
        "backlog_left": backlog_left(session, compaction),
    }


def meter(tokens: int, compaction, turn: CurrentTurn | None = None) -> dict:
    """The meter's figures; `turn` is the current turn when it alone is over max_tokens."""
    scale = max(compaction.max_tokens, tokens, 1)
    fill = round(100 * min(tokens, scale) / scale, 2)
    keep_width = round(100 * min(compaction.keep_recent_tokens, tokens) / scale, 2)
    return {
        "tokens": tokens,
        "max_tokens": compaction.max_tokens,
        "keep_recent_tokens": compaction.keep_recent_tokens,
        "fill": fill,
        "threshold": round(100 * compaction.max_tokens / scale, 2),
        "keep_width": keep_width,
        "keep_x": round(fill - keep_width, 2),  # the keep window ends where the fill ends
        "over": tokens > compaction.max_tokens,
        "percent": round(100 * tokens / max(compaction.max_tokens, 1)),
        "oversized_turn": turn,
    }


def checkpoint_numbers(session) -> dict[int, int]:
    """{checkpoint id: its number within the session}: how pages name the checkpoints that events and
    chart drops refer to by id."""
    return dict(session.checkpoints.values_list("pk", "number"))


def latest_compaction_run(session: Session) -> CompactionRun | None:
    return session.compaction_runs.order_by("-pk").first()


def backlog_left(session: Session, compaction: CompactionSettings) -> str:
    """What a backlog being worked off still has over max_tokens, for the run box ("" when none)."""
    over = session.input_tokens - compaction.max_tokens
    return f"{over:,}" if over > 0 else ""
