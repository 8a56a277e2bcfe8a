"""The Django admin. Raw messages, checkpoints and events are read-only, since editing them would break
the invariants the model input depends on (gapless seqs, stored token counts, coverage). A session's
figures are read-only too; its fields are saved through the same functions as the API and the
dashboard (update_session, set_tags), so the figures are recounted and the change is an event."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from .errors import DomainError
from .events import actor
from .models import AuthFailure, Checkpoint, Event, Message, Project, Session, Tag
from .notes import set_tags
from .session_store import clean_session_fields, update_session
from .summarizers import SUMMARIZERS

# Model field -> the key of update_session's `compaction` object.
COMPACTION_FIELDS = {"max_tokens": "max_tokens", "keep_recent_tokens": "keep_recent_tokens",
                     "auto_compact": "auto", "summarizer": "summarizer"}
DERIVED_FIELDS = [
    "instructions_tokens", "message_count", "raw_tokens", "input_tokens", "input_messages", "input_left_out",
    "checkpoint_last_seq", "checkpoint_count", "failed_compactions", "created_at", "updated_at",
    "last_activity_at",
]


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "title", "max_tokens", "keep_recent_tokens", "auto_compact", "summarizer", "created_at"]
    search_fields = ["name", "title"]


def session_changes(cleaned: dict, names) -> dict:
    """Changed form fields as update_session takes them (the API's PUT body)."""
    data = {name: cleaned[name] for name in names if name not in COMPACTION_FIELDS and name != "tags"}
    compaction = {COMPACTION_FIELDS[name]: cleaned[name] for name in names if name in COMPACTION_FIELDS}
    if compaction:
        data["compaction"] = compaction
    return data


class SessionForm(forms.ModelForm):
    # Instructions are sent to the model as they are: not stripped, unlike a form's usual text.
    instructions = forms.CharField(required=False, strip=False, widget=admin.widgets.AdminTextareaWidget)
    summarizer = forms.ChoiceField(required=False, choices=[("", "(the project's or server's)"),
                                                            *((name, name) for name in SUMMARIZERS)])

    class Meta:
        model = Session
        fields = ["title", "metadata", "instructions", "tags", "max_tokens", "keep_recent_tokens", "auto_compact",
                  "summarizer"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "tags" in self.fields:
            self.fields["tags"].queryset = Tag.objects.filter(project_id=self.instance.project_id)

    def clean_instructions(self) -> str:
        # A browser sends a textarea's line breaks as CRLF; applications send LF.
        return self.cleaned_data["instructions"].replace("\r\n", "\n")

    def clean(self):
        cleaned = super().clean()
        try:
            clean_session_fields(session_changes(cleaned, [n for n in self.changed_data if n in cleaned]))
        except DomainError as exc:
            raise ValidationError(exc.detail) from exc
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
