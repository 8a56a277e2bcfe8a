import json

from django import template

from sessions.context.summarizers import SUMMARIZERS
from sessions.dashboard import session_metadata
from sessions.dashboard.inspection import checkpoint_colour
from sessions.store import events

register = template.Library()


@register.filter
def is_text(content) -> bool:
    """Message content is a plain string (otherwise a list of parts)."""
    return isinstance(content, str)


@register.filter
def pretty_json(value) -> str:
    """A JSON value as indented text, for display (escaped by the template like any text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@register.filter
def event_data(event):
    """An event's data as the model of its type (sessions/store/event_types.py)."""
    return events.event_data(event)


# The most characters of one event's data a page shows; the rest is in the event's record (its JSON view).
EVENT_SHOWN_CHARS = 2000


@register.filter
def event_excerpt(data) -> str:
    """An event's data as indented JSON, cut to EVENT_SHOWN_CHARS."""
    text = json.dumps(data.model_dump(mode="json"), indent=2, ensure_ascii=False)
    return text if len(text) <= EVENT_SHOWN_CHARS else text[: EVENT_SHOWN_CHARS - 1] + "…"


@register.filter
def checkpoint_palette(checkpoint) -> int | None:
    """The colour class number (cp-N) of a checkpoint (sessions.dashboard.inspection.checkpoint_colour)."""
    return checkpoint_colour(checkpoint)


@register.filter
def checkpoint_number(checkpoint_id, numbers) -> int | str:
    """A checkpoint's number in its session, from its id and {id: number} (the id when it is not there)."""
    if not numbers or checkpoint_id is None:
        return checkpoint_id
    return numbers.get(checkpoint_id, checkpoint_id)


@register.simple_tag
def session_url(session, name: str, *args) -> str:
    """The URL of one of a session's pages or fragments: {% session_url session 'session_log' %}."""
    return session.url(name, *args)


@register.inclusion_tag("sessions/_what_if.html", takes_context=True)
def what_if_panel(context, form=None, preview=None, error=None):
    """The session page's What if… panel, its fields filled with what was asked (`form`) or else the
    session's effective compaction settings."""
    session = context["session"]
    return {
        "session": session,
        "perms": context.get("perms") or {},
        "compaction": context.get("compaction") or session.compaction_settings(),
        "summarizers": list(SUMMARIZERS),
        "given": form.data if form is not None else {},
        "preview": preview,
        "error": error,
        "opened": "what-if" in (context.get("open_panels") or ()),
        "csrf_token": context.get("csrf_token"),
    }


@register.filter
def compact_json(value) -> str:
    """A JSON value on one line, for a table cell."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


@register.filter
def attribute_groups(attributes) -> tuple[list, list]:
    """(shown, folded) attribute items of a message (sessions.dashboard.session_metadata.attribute_groups)."""
    return session_metadata.attribute_groups(attributes)


@register.simple_tag
def folded(text, tokens=0):
    """A long text's preview and rest, or None (sessions.dashboard.session_metadata.fold_text)."""
    return session_metadata.fold_text(text if isinstance(text, str) else "", tokens or 0)


@register.inclusion_tag("sessions/_metadata.html")
def metadata_panel(session, open_panels=()):
    """The session page's metadata panel: metadata, import source, parent and sub-agent sessions; a
    panel of the fold bar, open when the user left it open (in `open_panels`)."""
    return {"session": session, "opened": "metadata" in open_panels, **session_metadata.metadata_panel(session)}
