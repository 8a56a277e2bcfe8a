"""The GET parameters of the dashboard's list and search pages, read through Django forms. A value that
does not parse (`from=2026-13-45`, an unknown sort) is a form error shown on the page; the page is then
filtered by the parameters that did parse."""

from datetime import datetime, time

from django import forms
from django.utils import timezone

from .listing import SORTS, SessionFilters
from .models import Role
from .search import SearchFilters
from .summarizers import SUMMARIZERS

PAGE_SIZES = (25, 50, 100)
SORT_LABELS = {"activity": "last activity", "tokens": "raw tokens", "input": "model-input tokens",
               "messages": "messages"}
DATE_ERROR = "Enter a date as YYYY-MM-DD."


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


class SessionListForm(DayRangeForm):
    day_labels = ("active from", "active to")
    q = forms.CharField(required=False, max_length=200, label="search")
    project = forms.CharField(required=False, max_length=100)
    tag = forms.CharField(required=False, max_length=50)
    has_checkpoints = forms.BooleanField(required=False, label="has checkpoints")
    failed = forms.BooleanField(required=False, label="had a failed compaction")
    lost_facts = forms.BooleanField(required=False, label="latest summary lost facts")
    sort = forms.ChoiceField(required=False, choices=[(name, SORT_LABELS[name]) for name in SORTS])
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
        )

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
        """The settings given, for sessions.what_if / compaction_runs (call once the form is valid)."""
        data = self.cleaned_data
        return {name: data[name] for name in ("max_tokens", "keep_recent_tokens", "summarizer") if data.get(name) not in (None, "")}

    def problem(self) -> str:
        """The errors, each after the name of its field."""
        return " ".join(f"{name}: {' '.join(errors)}" for name, errors in self.errors.items())
