import json

from django import template

register = template.Library()


@register.filter
def is_text(content) -> bool:
    """Message content is a plain string (otherwise a list of parts)."""
    return isinstance(content, str)


@register.filter
def pretty_json(value) -> str:
    """A JSON value as indented text, for display (escaped by the template like any text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
