"""How big a stored message is, measured by the database, so that code which must bound its memory
(exports, the session page) can decide what to read before reading it."""

from django.db.models import Func, TextField
from django.db.models.functions import Cast, Coalesce, Length


def _chars(field: str, json: bool = False) -> Func:
    value = Cast(field, TextField()) if json else field
    return Coalesce(Length(value), 0)


def stored_chars() -> Func:
    """Characters a message holds as stored: its text, reasoning, content, tool calls and attributes
    (the JSON fields as their JSON text)."""
    return (_chars("text") + _chars("reasoning") + _chars("content", json=True) + _chars("tool_calls", json=True)
            + _chars("attributes", json=True))
