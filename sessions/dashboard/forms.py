"""The GET parameters of the dashboard's search page, and the forms of the session page's compaction
actions, read through Django forms. The sessions list's own parameters are read by
sessions.store.list_query.SessionListForm (review queues read their saved filters with it too). A value
that does not parse (`from=2026-13-45`, an unknown sort) is a form error shown on the page; the page is
then filtered by the parameters that did parse."""

from django import forms

from sessions.context.summarizers import SUMMARIZERS
from sessions.models import Role
from sessions.store.list_query import PAGE_SIZES, DayRangeForm, SessionListForm
from sessions.store.search import SearchFilters

__all__ = ["PAGE_SIZES", "SORT_LABELS", "CompactionSettingsForm", "MessageSearchForm", "SessionListForm"]

SORT_LABELS = {"activity": "last activity", "tokens": "raw tokens", "input": "model-input tokens",
               "messages": "messages"}


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
