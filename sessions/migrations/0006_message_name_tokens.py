"""Stored token figures count a message's name as the `openai` format sends it: not at all on a tool
message (no provider format sends a tool message's name), and with the characters OpenAI refuses
replaced by `_` elsewhere. Messages stored before counted the name as given; their `tokens` and their
sessions' `raw_tokens` and `input_tokens` are corrected here. Only names are tokenized again; figures
recorded in events and checkpoints stay as they were when recorded."""

import re
from collections import defaultdict

from django.db import migrations

NOT_NAME_CHARACTER = re.compile(r"[^a-zA-Z0-9_-]")
NAME_OVERHEAD = 1
CHUNK = 2000


def name_tokens(role: str, name: str, count_text) -> tuple[int, int]:
    """(as counted before, as counted now)."""
    before = count_text(name) + NAME_OVERHEAD
    now = 0 if role == "tool" else count_text(NOT_NAME_CHARACTER.sub("_", name)[:64]) + NAME_OVERHEAD
    return before, now


def recount_names(apps, schema_editor, backwards=False):
    from sessions.wire.tokens import count_text

    Message = apps.get_model("ctx_sessions", "Message")
    Session = apps.get_model("ctx_sessions", "Session")
    changed, raw, visible = [], defaultdict(int), defaultdict(list)
    rows = (Message.objects.exclude(name="").order_by("pk")
            .only("pk", "session_id", "seq", "role", "name", "tokens", "include_in_messages"))
    for message in rows.iterator(chunk_size=CHUNK):
        before, now = name_tokens(message.role, message.name, count_text)
        if backwards:
            before, now = now, before
        if before == now:
            continue
        message.tokens += now - before
        changed.append(message)
        raw[message.session_id] += now - before
        if message.include_in_messages and message.role != "system":
            visible[message.session_id].append((message.seq, now - before))
        if len(changed) >= CHUNK:
            Message.objects.bulk_update(changed, ["tokens"])
            changed = []
    Message.objects.bulk_update(changed, ["tokens"])
    for session in Session.objects.filter(pk__in=list(raw)).only("pk", "raw_tokens", "input_tokens",
                                                                  "checkpoint_last_seq", "input_left_out"):
        left_out = {o["seq"] for o in session.input_left_out if o.get("whole_message", True)}
        in_input = sum(delta for seq, delta in visible[session.pk]
                       if seq > session.checkpoint_last_seq and seq not in left_out)
        session.raw_tokens += raw[session.pk]
        session.input_tokens += in_input
        session.save(update_fields=["raw_tokens", "input_tokens"])


class Migration(migrations.Migration):
    dependencies = [("ctx_sessions", "0005_message_is_error")]
    operations = [migrations.RunPython(recount_names, lambda apps, editor: recount_names(apps, editor, backwards=True))]
