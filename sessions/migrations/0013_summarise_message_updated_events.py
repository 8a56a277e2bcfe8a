"""MESSAGE_UPDATED events stored the whole attributes before and after a change; rewrite those rows
into the bounded summary event_types.AttributesChange now records (sizes, digests, small values). The
summary is copied here as it is today so this migration keeps meaning the same thing."""

import hashlib
import json

from django.db import migrations

VALUE_CHARS = 200
KEYS_SHOWN = 20


def _value(value):
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    data = text.encode()
    summary = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if len(text) <= VALUE_CHARS:
        summary["value"] = value
    return summary


def _summary(before, after):
    changed = sorted(k for k in before.keys() | after.keys() if k not in before or k not in after or before[k] != after[k])
    return {"keys": [k[:VALUE_CHARS] for k in changed[:KEYS_SHOWN]], "keys_changed": len(changed),
            "before": _value(before), "after": _value(after)}


def summarise(apps, schema_editor):
    Event = apps.get_model("ctx_sessions", "Event")
    rows = Event.objects.filter(type="MESSAGE_UPDATED", data__changes__has_key="attributes")
    for event in rows.only("pk", "data").iterator(chunk_size=100):
        change = event.data["changes"]["attributes"]
        if set(change) != {"from", "to"}:
            continue
        event.data["changes"]["attributes"] = _summary(change["from"] or {}, change["to"] or {})
        Event.objects.filter(pk=event.pk).update(data=event.data)


class Migration(migrations.Migration):
    dependencies = [
        ("ctx_sessions", "0012_api_key_rate_limits"),
    ]

    operations = [
        migrations.RunPython(summarise, migrations.RunPython.noop),
    ]
