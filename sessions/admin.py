"""The Django admin. Raw messages, checkpoints and events are read-only, since editing them would break
the invariants the model input depends on (gapless seqs, stored token counts, coverage). A session's
figures are read-only too; its fields are validated and saved through the same functions as the API and
the dashboard (clean_session_fields, update_session, set_tags), so the admin saves nothing the API
refuses, the figures are recounted and the change is an event. A project's compaction defaults are
validated by the API's schema of a session's compaction settings (CompactionSettingsIn); each refusal is
shown on the field it is about."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from sessions.context.summarizers import SUMMARIZERS
from sessions.errors import DomainError
from sessions.http.schemas import CompactionSettingsIn
from sessions.ingest.session_store import clean_session_fields, update_session
from sessions.models import AuthFailure, Checkpoint, Event, Message, Project, Session, Tag
from sessions.store.events import actor
from sessions.store.notes import set_tags
from sessions.wire.validation import check_text, validated

# Model field -> the key of update_session's `compaction` object.
COMPACTION_FIELDS = {"max_tokens": "max_tokens", "keep_recent_tokens": "keep_recent_tokens",
                     "auto_compact": "auto", "summarizer": "summarizer"}
DERIVED_FIELDS = [
    "instructions_tokens", "message_count", "raw_tokens", "input_tokens", "input_messages", "input_left_out",
    "checkpoint_last_seq", "checkpoint_count", "failed_compactions", "created_at", "updated_at",
    "last_activity_at",
]


def threshold_field() -> forms.IntegerField:
    # No bounds of its own: the API's rule (CompactionSettingsIn, 1 to 100,000,000) says what is allowed.
    return forms.IntegerField(required=False)


def summarizer_field(empty: str) -> forms.ChoiceField:
    return forms.ChoiceField(required=False, choices=[("", empty), *((name, name) for name in SUMMARIZERS)])


def domain_check(form: forms.Form, names, check) -> None:
    """Run `check(name)` (a domain rule of the API) for each field `name` the form cleaned; a refusal
    (DomainError) becomes an error on that field, in the API's words."""
    for name in names:
        if name in form.cleaned_data:
            try:
                check(name)
            except DomainError as exc:
                form.add_error(name, ValidationError(exc.detail, code=exc.code))


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ProjectForm(forms.ModelForm):
    """A project's compaction defaults pass the rules a session's own settings pass in the API (a threshold
    of 1 to 100,000,000 tokens, a known summarizer): the API has no project endpoint, so this is the one
    place they are set."""

    max_tokens = threshold_field()
    keep_recent_tokens = threshold_field()
    summarizer = summarizer_field("(the server's)")

    class Meta:
        model = Project
        fields = ["name", "title", "max_tokens", "keep_recent_tokens", "auto_compact", "summarizer"]

    def clean(self):
        cleaned = super().clean()
        domain_check(self, ["title"], lambda name: check_text(cleaned[name], None, name))
        domain_check(self, COMPACTION_FIELDS, lambda name: validated(
            CompactionSettingsIn, {COMPACTION_FIELDS[name]: cleaned[name] if cleaned[name] != "" else None}))
        return cleaned


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    form = ProjectForm
    list_display = ["name", "title", "max_tokens", "keep_recent_tokens", "auto_compact", "summarizer", "created_at"]
    search_fields = ["name", "title"]
    readonly_fields = ["created_at"]


def session_changes(cleaned: dict, names) -> dict:
    """Form fields as update_session takes them (the API's PUT body): an empty summarizer is null there,
    as every other setting left empty."""
    data = {name: cleaned[name] for name in names if name not in COMPACTION_FIELDS and name != "tags"}
    compaction = {COMPACTION_FIELDS[name]: cleaned[name] if cleaned[name] != "" else None
                  for name in names if name in COMPACTION_FIELDS}
    if compaction:
        data["compaction"] = compaction
    return data


class SessionForm(forms.ModelForm):
    # Instructions are sent to the model as they are: not stripped, unlike a form's usual text.
    instructions = forms.CharField(required=False, strip=False, widget=admin.widgets.AdminTextareaWidget)
    max_tokens = threshold_field()
    keep_recent_tokens = threshold_field()
    summarizer = summarizer_field("(the project's or server's)")

    class Meta:
        model = Session
        fields = ["title", "metadata", "instructions", "tags", "max_tokens", "keep_recent_tokens", "auto_compact",
                  "summarizer"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "tags" in self.fields:
            self.fields["tags"].queryset = Tag.objects.filter(project_id=self.instance.project_id)

    def clean_metadata(self):
        # The form always sends the whole value: null would not clear it (the API reads null as "not given").
        if self.cleaned_data["metadata"] is None:
            raise ValidationError("metadata must be an object ({} for none)", code="invalid_field")
        return self.cleaned_data["metadata"]

    def clean_instructions(self) -> str:
        # A browser sends a textarea's line breaks as CRLF; applications send LF.
        return self.cleaned_data["instructions"].replace("\r\n", "\n")

    def clean(self):
        cleaned = super().clean()
        if self.instance.being_imported:
            raise ValidationError("This session is being imported: it can be changed once its import has "
                                  "stored every message.", code="session_being_imported")
        # Every field shown, not only those changed: the form saves nothing the API would refuse.
        domain_check(self, [name for name in self.Meta.fields if name != "tags"],
                     lambda name: clean_session_fields(session_changes(cleaned, [name])))
        return cleaned


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    form = SessionForm
    list_display = ["key", "project", "title", "message_count", "raw_tokens", "input_tokens", "checkpoint_count", "last_activity_at"]
    list_filter = ["project"]
    search_fields = ["key", "title"]
    list_select_related = ["project"]
    readonly_fields = ["project", "key", *DERIVED_FIELDS]
    fieldsets = [
        (None, {"fields": ["project", "key", "title", "metadata", "instructions", "tags"]}),
        ("Compaction settings (empty: the project's, then the server's)",
         {"fields": ["max_tokens", "keep_recent_tokens", "auto_compact", "summarizer"]}),
        ("Figures kept by ctxweb", {"fields": DERIVED_FIELDS}),
    ]

    def has_add_permission(self, request):
        return False

    def save_model(self, request, obj, form, change):
        data = session_changes(form.cleaned_data, form.changed_data)
        update_session(obj.project, obj.key, data, actor(request))
        obj.refresh_from_db()

    def save_related(self, request, form, formsets, change):
        if "tags" in form.changed_data:
            set_tags(form.instance, request.user, sorted(tag.name for tag in form.cleaned_data["tags"]))
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["session", "seq", "role", "short_text", "tokens", "include_in_messages", "created_at"]
    list_filter = ["role", "include_in_messages"]
    search_fields = ["session__key", "client_id"]
    list_select_related = ["session__project"]
    ordering = ["session", "seq"]

    @admin.display(description="text")
    def short_text(self, obj):
        return obj.text[:80]


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "number", "first_seq", "last_seq", "created_at_seq", "summary_tokens", "replaced_tokens", "summarizer", "created_at"]
    list_select_related = ["session__project"]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "type", "actor", "created_at"]
    list_filter = ["type"]
    list_select_related = ["session__project"]


@admin.register(AuthFailure)
class AuthFailureAdmin(ReadOnlyAdmin):
    """Failed log-ins and API keys by address, username or key prefix. Deleting a subject's rows lifts
    its block early."""

    list_display = ["subject", "scope", "created_at"]
    list_filter = ["scope"]
    search_fields = ["subject"]

    def has_delete_permission(self, request, obj=None):
        return admin.ModelAdmin.has_delete_permission(self, request, obj)
