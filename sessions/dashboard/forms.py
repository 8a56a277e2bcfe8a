"""The GET parameters of the dashboard's list and search pages, read through Django forms. A value that
does not parse (`from=2026-13-45`, an unknown sort) is a form error shown on the page; the page is then
filtered by the parameters that did parse."""

import json
import re
from datetime import datetime, time

from django import forms
from django.utils import timezone

from sessions.context.summarizers import SUMMARIZERS
from sessions.models import Role
from sessions.store.listing import META_SORT, SORTS, MetadataFilter, SessionFilters
from sessions.store.search import SearchFilters

PAGE_SIZES = (25, 50, 100)
SORT_LABELS = {"activity": "last activity", "tokens": "raw tokens", "input": "model-input tokens",
               "messages": "messages"}
DATE_ERROR = "Enter a date as YYYY-MM-DD."
# A metadata key as the list's parameters name it: words, digits, `_` and `-`, a dot between the keys of
# nested objects (`info.task.user_id`).
METADATA_PATH = re.compile(r"[A-Za-z0-9_-]{1,100}(\.[A-Za-z0-9_-]{1,100}){0,4}")
PATH_ERROR = "Name a metadata key with letters, digits, _ and -, and dots between nested keys (e.g. info.task.user_id)."


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


class MetadataFiltersField(forms.Field):
    """`meta=key` (has the key) or `meta=key:value`, once or more: MetadataFilter items."""

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
    sort = forms.CharField(required=False, max_length=120)
    meta = MetadataFiltersField(required=False, label="metadata")
    column = forms.CharField(required=False, max_length=120, label="metadata column")
    size = forms.TypedChoiceField(required=False, coerce=int, choices=[(n, str(n)) for n in PAGE_SIZES],
                                  empty_value=PAGE_SIZES[0], label="per page")

    def filters(self) -> SessionFilters:
        data = self.valid()
        return SessionFilters(
            q=data.get("q", ""),
            project=data.get("project", ""),
            tag=data.get("tag", ""),
            has_checkpoints=data.get("has_checkpoints", False),
            failed=data.get("failed", False),
            lost_facts=data.get("lost_facts", False),
            since=self.since(),
            until=self.until(),
            sort=data.get("sort") or "activity",
            meta=data.get("meta", ()),
            column=data.get("column") or (),
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


class MessageSearchForm(DayRangeForm):
    q = forms.CharField(required=False, max_length=200, label="search")
    project = forms.CharField(required=False, max_length=100)
    role = forms.ChoiceField(required=False, choices=[("", "any role"), *Role.choices])
    has_checkpoint = forms.BooleanField(required=False, label="in a session with checkpoints")

    def query(self) -> str:
        return self.valid().get("q", "")

    def filters(self, project_ids: list[int]) -> SearchFilters:
        """The search's filters over the projects `project_ids` (those the reader sees, or the one chosen)."""
        data = self.valid()
        return SearchFilters(
            project_ids=project_ids,
            role=data.get("role") or None,
            since=self.since(),
            until=self.until(),
            has_checkpoint=data.get("has_checkpoint", False),
        )


class CompactionSettingsForm(forms.Form):
    """Compaction settings a person tries on the session page ("What if…", "Compact now"): each left
    empty keeps the session's own. An error names its field."""

    max_tokens = forms.IntegerField(min_value=0, max_value=100_000_000, required=False)
    keep_recent_tokens = forms.IntegerField(min_value=0, max_value=100_000_000, required=False)
    summarizer = forms.ChoiceField(choices=[("", "")] + [(name, name) for name in SUMMARIZERS], required=False)
    force = forms.BooleanField(required=False)

    def overrides(self) -> dict:
        """The settings given, for sessions.context.what_if / compaction_runs (call once the form is valid)."""
        data = self.cleaned_data
        return {name: data[name] for name in ("max_tokens", "keep_recent_tokens", "summarizer") if data.get(name) not in (None, "")}

    def problem(self) -> str:
        """The errors, each after the name of its field."""
        return " ".join(f"{name}: {' '.join(errors)}" for name, errors in self.errors.items())
