"""JSON text from clients, read strictly and bounded before it is parsed: UTF-8 without a byte order mark,
no key twice, no NaN or infinity, and never nested deeper than free-form JSON may be plus the levels of a
request body of its own (found in linear time, without parsing). Used by the API's body parser, the
OTLP receiver and every importer."""

import json
import math
import re

from django.conf import settings

from sessions.errors import DomainError

# A request body wraps the free-form JSON it carries in a few levels of its own (body, messages,
# message, tool_calls, call, function, arguments), so it may be this much deeper than
# CTXWEB_MAX_JSON_DEPTH.
BODY_LEVELS = 8


class InvalidBody(DomainError):
    status = 400
    code = "invalid_json"


class InvalidNumber(DomainError):
    """A number in a request body that no field can hold (NaN, infinity, beyond a double's range, or
    more digits than Python reads); some JSON encoders write them."""

    status = 422
    code = "invalid_number"


def _object(pairs: list) -> dict:
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        shown = twice if len(twice) <= 60 else twice[:57] + "..."
        raise InvalidBody(f"The request body has the key {shown!r} twice in one object.")
    return obj


def _constant(name: str):
    raise InvalidNumber(f"The request body holds {name}, which is not a JSON number.")


def _float(text: str) -> float:
    # 1e999 would become infinity, which pydantic writes back as null: refused here instead.
    value = float(text)
    if not math.isfinite(value):
        raise InvalidNumber(f"The request body holds the number {text[:40]}, too large to store.")
    return value


def nesting_limit() -> int:
    """Levels of nesting any JSON document from a client may have: its free-form JSON's, plus its own."""
    return settings.CTXWEB_MAX_JSON_DEPTH + BODY_LEVELS


def too_deep(what: str) -> str:
    """The sentence that refuses JSON text nested past nesting_limit()."""
    return f"{what} is nested more than {nesting_limit()} levels deep (CTXWEB_MAX_JSON_DEPTH + {BODY_LEVELS})"


def _too_deep() -> DomainError:
    return DomainError(too_deep("The request body") + ".", code="json_too_deep")


# The depth check reads JSON text token by token, each token one match: what it skips (text outside
# brackets, strings, and flat objects and lists, which hold no other), then a run of opening brackets, a
# run of closing ones, or a string the text ends inside. Possessive quantifiers never give back what they
# read, so no byte is read more than twice: the check is linear in the text, and it builds nothing.
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'


_FLAT = r"[\[{](?:[^\"\[\]{}]++|" + _STRING + r")*+[\]}]"


_TOKEN = r"(?:([\[{]++)|([\]}]++)|(\")|\Z)"


_WITH_FLATS = r"(?:[^\"\[\]{}]++|" + _STRING + "|" + _FLAT + r")*+" + _TOKEN


_WITHOUT_FLATS = r"(?:[^\"\[\]{}]++|" + _STRING + r")*+" + _TOKEN


_STRING_REST = r'[^"\\]*+(?:\\.[^"\\]*+)*+'


NESTING_PATTERNS = {
    kind: tuple(re.compile(encode(p), re.DOTALL) for p in (_WITH_FLATS, _WITHOUT_FLATS, _STRING_REST))
    for kind, encode in ((str, str), (bytes, str.encode))
}


class Nesting:
    """How deep JSON text nests, read in pieces of any size without being parsed: objects and lists opened
    and not closed yet, brackets inside strings not counted. So that a parser never sees text nested past
    the limit: json.loads would recurse into it, ijson build ever longer paths (a 6 MB file of "[" took
    16 GB), and both would hold it all. Text that is not JSON is counted as far as it goes, never wrongly
    refused while it stays within the limit."""

    def __init__(self, limit: int | None = None):
        self.limit = nesting_limit() if limit is None else limit
        self.depth = 0
        self.in_string = self.escaped = False  # where the last piece ended

    def over(self, piece: bytes | bytearray | str) -> bool:
        """Whether the text read so far, `piece` included, nests deeper than the limit."""
        with_flats, without_flats, string_rest = NESTING_PATTERNS[str if isinstance(piece, str) else bytes]
        position, end = 0, len(piece)
        if self.escaped and end:
            position, self.escaped = 1, False
        if self.in_string:
            position = string_rest.match(piece, position).end()
            if position == end:
                return False
            if piece[position:position + 1] in (b"\\", "\\"):
                self.escaped = True
                return False
            position, self.in_string = position + 1, False
        depth, limit = self.depth, self.limit
        while True:
            # A flat object or list is one level deeper than where it is: skipped whole only below the limit.
            token = (with_flats if depth < limit else without_flats).match(piece, position)
            kind = token.lastindex
            if kind == 1:
                depth += token.end() - token.start(1)
                if depth > limit:
                    self.depth = depth
                    return True
            elif kind == 2:
                depth = max(0, depth - (token.end() - token.start(2)))
            else:
                if kind == 3:  # a string this piece ends inside (or that never ends)
                    self.in_string = True
                    self.escaped = string_rest.match(piece, token.end()).end() < end
                break
            position = token.end()
        self.depth = depth
        return False


def nested_too_deep(text: bytes | bytearray | str, limit: int | None = None) -> bool:
    """Whether JSON text nests deeper than `limit` (nesting_limit() unless given), without parsing it."""
    return Nesting(limit).over(text)


def load_json_body(raw: bytes):
    """A request body as JSON text (RFC 8259): UTF-8 without a byte order mark, no key twice in an
    object, and not nested deeper than free-form JSON may be plus BODY_LEVELS (400 invalid_json, 422
    json_too_deep, found before the body is parsed); no NaN, Infinity or number beyond a double's range
    (422 invalid_number). Never an unexpected error."""
    if nested_too_deep(raw):
        raise _too_deep()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidBody("The request body is not UTF-8 text.") from None
    if text.startswith("\ufeff"):
        raise InvalidBody("The request body starts with a byte order mark; send UTF-8 JSON without one.")
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_constant=_constant, parse_float=_float)
    except RecursionError:
        raise _too_deep() from None
    except json.JSONDecodeError as exc:
        raise InvalidBody(f"The request body is not valid JSON: {exc}") from None
    except ValueError:  # an integer of more digits than Python converts
        raise InvalidNumber("The request body holds an integer of too many digits to read.") from None
    return value
