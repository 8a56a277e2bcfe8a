"""The Django admin: raw messages, checkpoints and events are read-only, since editing them would
break the invariants the model input depends on (gapless seqs, stored token counts, coverage)."""

from django.contrib import admin

from .models import AuthFailure, Checkpoint, Event, Message, Project, Session


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


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["key", "project", "title", "message_count", "raw_tokens", "input_tokens", "checkpoint_count", "last_activity_at"]
    list_filter = ["project"]
    search_fields = ["key", "title"]
    list_select_related = ["project"]
    readonly_fields = [
        "project", "key", "instructions_tokens", "created_at", "updated_at", "last_activity_at",
        "message_count", "raw_tokens", "input_tokens", "checkpoint_count", "failed_compactions",
    ]

    def has_add_permission(self, request):
        return False


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
    list_display = ["id", "session", "first_seq", "last_seq", "created_at_seq", "summary_tokens", "replaced_tokens", "summarizer", "created_at"]
    list_select_related = ["session__project"]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "type", "actor", "created_at"]
    list_filter = ["type"]
    list_select_related = ["session__project"]


@admin.register(AuthFailure)
class AuthFailureAdmin(ReadOnlyAdmin):
    """Failed log-ins and API keys by address. Deleting an address's rows lifts its block early."""

    list_display = ["address", "scope", "created_at"]
    list_filter = ["scope"]
    search_fields = ["address"]

    def has_delete_permission(self, request, obj=None):
        return admin.ModelAdmin.has_delete_permission(self, request, obj)
