"""A message field sent to the model is declared once (sessions.models.MODEL_FIELDS, with its column),
in the ctxweb schema, and in the wire module of each provider that carries it: the model input's read,
its entries, recorded requests, the duplicate digest and the ctxweb rendering take it from there. These
tests hold every layer to the declaration, and keep the layers from naming such a field themselves."""

import hashlib
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connection

from sessions.context.model_input import Entry, StoredMessage, model_fields_sent
from sessions.db.messages import stored_messages_sql
from sessions.models import MODEL_FIELDS, Message
from sessions.wire.ctxweb import CTXWEB_OPTIONAL_FIELDS, MessageIn, to_ctxweb
from sessions.wire.validation import message_digest, parse_message

ROOT = Path(__file__).resolve().parent.parent
# The modules that must read MODEL_FIELDS rather than name a field of it.
GENERIC = ["sessions/db/messages.py", "sessions/context/model_input.py", "sessions/context/recorded_input.py"]


@pytest.mark.parametrize("name", list(MODEL_FIELDS))
def test_each_field_is_a_column_a_schema_field_and_an_entry_attribute(name):
    default = MODEL_FIELDS[name]
    assert Message._meta.get_field(name).default == default
    assert name in MessageIn.model_fields
    assert getattr(Entry("message", "tool", "x", 1), name) == default
    assert name in StoredMessage.__slots__
    assert f'"{name}"' in stored_messages_sql(connection.vendor)
    assert (name, name) in CTXWEB_OPTIONAL_FIELDS


def test_the_generic_layers_name_no_field_of_their_own():
    for path in GENERIC:
        text = (ROOT / path).read_text()
        # "name" is also a tool call's, a column's and a variable's: the fields with names of their own.
        for name in [n for n in MODEL_FIELDS if n != "name"]:
            assert not re.findall(rf"\b{name}\b", text), f"{path} names {name!r} itself: read MODEL_FIELDS"


def test_a_recorded_message_and_a_rendered_entry_carry_every_field():
    sent = {"role": "tool", "content": "failed", "tool_call_id": "c1", "name": "lookup", "is_error": True}
    assert model_fields_sent(sent) == {"name": "lookup", "is_error": True}
    assert model_fields_sent({"role": "user", "content": "hi", "name": None}) == MODEL_FIELDS
    entry = Entry("message", "tool", "failed", 3, seq=2, tool_call_id="c1", **model_fields_sent(sent))
    rendered = to_ctxweb(SimpleNamespace(entries=[entry], awaiting=None, sent_messages=None))[0]
    assert {k: rendered[k] for k in MODEL_FIELDS} == {"name": "lookup", "is_error": True}


def test_the_digest_of_a_message_without_a_later_field_is_what_it_always_was():
    """A field at its default adds nothing to the fingerprint, so stored messages match their retries;
    set, it tells two messages apart."""
    plain = parse_message({"role": "tool", "content": "done", "tool_call_id": "c1"})
    failed = parse_message({"role": "tool", "content": "done", "tool_call_id": "c1", "is_error": True})
    assert plain.digest != failed.digest
    assert plain.digest == fingerprint_before_is_error("tool", "done", "", [], "c1", "")
    assert message_digest("tool", "done", "", [], "c1", {"name": "", "is_error": False}) == plain.digest


def fingerprint_before_is_error(*parts) -> str:
    """The fingerprint as the versions before is_error computed it: each part hashed as text (s) or JSON (j)."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, str):
            digest.update(b"s" + part.encode())
        else:
            digest.update(b"j" + json.dumps(part, ensure_ascii=False, separators=(",", ":")).encode())
        digest.update(b"\x00")
    return digest.hexdigest()
