"""The sessions list's query string (`?q=refund&tag=escalated&meta=reward<1&reviewed=no`) read into
SessionFilters through a Django form. The dashboard's list page reads its GET parameters with it, and a
review queue (review_queues.py) reads its saved filter with it, so a queue holds exactly the sessions the
list shows for the same query string. A value that does not parse (`from=2026-13-45`, an unknown sort) is
a form error: the list shows it and filters by the parameters that did parse; a queue refuses it."""

import json
import math
import re
from datetime import datetime, time

from django import forms
from django.utils import timezone

from sessions.models import Verdict
from sessions.store.listing import META_SORT, SORTS, SOURCES, MetadataFilter, SessionFilters

PAGE_SIZES = (25, 50, 100)
DATE_ERROR = "Enter a date as YYYY-MM-DD."
# A metadata key as the list's parameters name it: words, digits, `_` and `-`, a dot between the keys of
# nested objects (`info.task.user_id`).
METADATA_PATH = re.compile(r"[A-Za-z0-9_-]{1,100}(\.[A-Za-z0-9_-]{1,100}){0,4}")
PATH_ERROR = "Name a metadata key with letters, digits, _ and -, and dots between nested keys (e.g. info.task.user_id)."
# `meta=reward<1`: a key, a comparison, a number.
METADATA_COMPARISON = re.compile(r"(?P<key>[A-Za-z0-9_.-]+)\s*(?P<op><=|>=|<|>)\s*(?P<number>.*)", re.DOTALL)
NUMBER_ERROR = "Compare a metadata value with a number, as in reward<1 or score>=0.5."


class DayRangeForm(forms.Form):
    """`from` and `to`: whole days, from the start of the first to the end of the last (server time)."""

    day_labels = ("from", "to")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # "from" is a Python keyword, so these two cannot be declared as class attributes.
        for name, label in zip(("from", "to"), self.day_labels, strict=True):
            self.fields[name] = forms.DateField(required=False, label=label, input_formats=["%Y-%m-%d"],
                                                error_messages={"invalid": DATE_ERROR})

    def valid(self) -> dict:
        """The cleaned values of the parameters that parsed (all of them when the form is valid)."""
        self.is_valid()
        return self.cleaned_data

    def since(self) -> datetime | None:
        day = self.valid().get("from")
        return timezone.make_aware(datetime.combine(day, time.min)) if day else None

    def until(self) -> datetime | None:
        day = self.valid().get("to")
        return timezone.make_aware(datetime.combine(day, time.max)) if day else None


def metadata_path(text: str) -> tuple[str, ...]:
    if not METADATA_PATH.fullmatch(text):
        raise forms.ValidationError(PATH_ERROR)
    return tuple(text.split("."))


class ManyValues(forms.TextInput):
    """Every value a parameter is given (`meta=a&meta=b`), not only the last."""

    def value_from_datadict(self, data, files, name):
        return data.getlist(name) if hasattr(data, "getlist") else data.get(name)


def _comparison(item: str) -> MetadataFilter | None:
    """`key<number` (or <=, >, >=) as a MetadataFilter; None when `item` is not written that way."""
    found = METADATA_COMPARISON.fullmatch(item)
    if found is None:
        return None
    path = metadata_path(found["key"])
    try:
        number = json.loads(found["number"])
    except ValueError:
        number = None
    # A whole number as the databases' integers hold it (SQLite's are 64-bit), any other finite.
    whole = isinstance(number, int) and not isinstance(number, bool) and abs(number) < 2**63
    if not whole and not (isinstance(number, float) and math.isfinite(number)):
        raise forms.ValidationError(NUMBER_ERROR)
    return MetadataFilter(path, number, found["number"].strip(), op=found["op"])


class MetadataFiltersField(forms.Field):
    """`meta=key` (has the key), `meta=key:value` (its value is that), or `meta=key<number` (<, <=, >, >=:
    its value is a number that compares so), once or more: MetadataFilter items."""

    widget = ManyValues
    MAX = 5

    def to_python(self, value) -> tuple[MetadataFilter, ...]:
        values = [v.strip() for v in (value if isinstance(value, list) else [value or ""]) if v and v.strip()]
        if len(values) > self.MAX:
            raise forms.ValidationError(f"Filter on at most {self.MAX} metadata keys.")
        found = []
        for item in values:
            if len(item) > 500:
                raise forms.ValidationError("A metadata filter is at most 500 characters.")
            comparison = _comparison(item)
            if comparison is not None:
                found.append(comparison)
                continue
            key, colon, text = item.partition(":")
            path = metadata_path(key.strip())
            if not colon:
                found.append(MetadataFilter(path))
                continue
            try:
                value = json.loads(text)
            except ValueError:
                value = text
            found.append(MetadataFilter(path, value, text))
        return tuple(found)


class SessionListForm(DayRangeForm):
    day_labels = ("active from", "active to")
    q = forms.CharField(required=False, max_length=200, label="search")
    project = forms.CharField(required=False, max_length=100)
    tag = forms.CharField(required=False, max_length=50)
    has_checkpoints = forms.BooleanField(required=False, label="has checkpoints")
    failed = forms.BooleanField(required=False, label="had a failed compaction")
    lost_facts = forms.BooleanField(required=False, label="latest summary lost facts")
    pinned_lost = forms.BooleanField(required=False, label="pinned fact lost")
    source = forms.ChoiceField(required=False, label="source", choices=[("", "any source"), *SOURCES.items()])
    reviewed = forms.ChoiceField(required=False, label="reviewed",
                                 choices=[("", "reviewed or not"), ("yes", "reviewed"), ("no", "not reviewed")])
    verdict = forms.ChoiceField(required=False, label="latest verdict", choices=[("", "any verdict"), *Verdict.choices])
    sort = forms.CharField(required=False, max_length=120)
    meta = MetadataFiltersField(required=False, label="metadata")
    column = forms.CharField(required=False, max_length=120, label="metadata column")
    size = forms.TypedChoiceField(required=False, coerce=int, choices=[(n, str(n)) for n in PAGE_SIZES],
                                  empty_value=PAGE_SIZES[0], label="per page")

    def filters(self) -> SessionFilters:
        data = self.valid()
        reviewed = data.get("reviewed")
        return SessionFilters(
            q=data.get("q", ""),
            project=data.get("project", ""),
            tag=data.get("tag", ""),
            has_checkpoints=data.get("has_checkpoints", False),
            failed=data.get("failed", False),
            lost_facts=data.get("lost_facts", False),
            pinned_lost=data.get("pinned_lost", False),
            since=self.since(),
            until=self.until(),
            sort=data.get("sort") or "activity",
            meta=data.get("meta", ()),
            column=data.get("column") or (),
            source=data.get("source") or "",
            reviewed={"yes": True, "no": False}.get(reviewed),
            verdict=data.get("verdict") or "",
        )

    def clean_sort(self) -> str:
        sort = self.cleaned_data["sort"]
        if not sort or sort in SORTS:
            return sort
        if sort.startswith(META_SORT):
            return META_SORT + ".".join(metadata_path(sort.removeprefix(META_SORT)))
        choices = ", ".join(SORTS)
        raise forms.ValidationError(f"Sort by one of {choices}, or by a metadata key as meta:<key>.")

    def clean_column(self) -> tuple[str, ...]:
        column = self.cleaned_data["column"].strip()
        return metadata_path(column) if column else ()

    def page_size(self) -> int:
        return self.valid().get("size") or PAGE_SIZES[0]
