"""What the renderers of every provider share: images as the providers take them (or a text
placeholder where they would refuse one), and tool-call arguments as an object or for people to read."""

import json
import re
from typing import Any, Protocol


class InputToRender(Protocol):
    """What a renderer reads of a model input (sessions.context.model_input.ModelInput builds it): its
    entries in order, the assistant message whose calls await their results, and what the application
    sent itself (a recorded request's messages, sent as they were)."""

    entries: list
    awaiting: Any
    sent_messages: list | None

DATA_URL_RE = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?(?:;[\w=.+-]+)*;base64,(.*)$", re.IGNORECASE | re.DOTALL)


# The image types both providers document for base64 images. An image a provider does not take where
# it stands (another type, a data: URL without base64, an image in an assistant message) reaches the
# model as a text placeholder, so the request stays valid and the model still knows it was there.
PROVIDER_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


def provider_image(url: str) -> bool:
    """An image URL both providers fetch (http, https) or decode (a base64 data: URL of a type they take)."""
    if url.startswith(("http://", "https://")):
        return True
    match = DATA_URL_RE.match(url)
    return bool(match) and (match.group(1) or "").lower() in PROVIDER_IMAGE_TYPES


def image_placeholder(url: str) -> str:
    return f"[image: {_short_url(url)}]"


def _short_url(url: str) -> str:
    return url if len(url) <= 80 else url[:77] + "..."


def arguments_object(arguments: str):
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def pretty_arguments(arguments: str) -> str:
    """Tool call arguments for people to read: indented when they are JSON, else as the model wrote them."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments
