import json

from django import template

from sessions import events
from sessions.inspection import palette_colour

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
    """An event's data as the model of its type (sessions/event_types.py)."""
    return events.event_data(event)


@register.filter
def checkpoint_palette(index: int) -> int:
    """The colour class number (cp-N) of the checkpoint at `index` in the session's list, oldest first."""
    return palette_colour(index)


@register.simple_tag
def session_url(session, name: str, *args) -> str:
    """The URL of one of a session's pages or fragments: {% session_url session 'session_log' %}."""
    return session.url(name, *args)
