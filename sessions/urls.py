from django.urls import path, register_converter

from . import views


class SessionKeyConverter:
    regex = r"[A-Za-z0-9._:@-]{1,200}"

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(SessionKeyConverter, "key")

S = "p/<slug:project>/s/<key:key>/"

urlpatterns = [
    path("", views.session_list, name="sessions"),
    path(S, views.session_detail, name="session"),
    path(S + "log/", views.raw_log_fragment, name="session_log"),
    path(S + "input/", views.model_input_fragment, name="session_input"),
    path(S + "live/", views.live_fragment, name="session_live"),
    path(S + "chart/", views.chart_fragment, name="session_chart"),
    path(S + "events/", views.events_fragment, name="session_events"),
    path(S + "checkpoints/<int:checkpoint_id>/", views.checkpoint_diff, name="checkpoint_diff"),
    path(S + "requests/<int:event_id>/", views.request_view, name="request_view"),
    path(S + "compact/", views.compact_now, name="session_compact"),
    path(S + "messages/<int:seq>/include/", views.toggle_include, name="message_include"),
    path(S + "export.<str:fmt>", views.export_download, name="session_export"),
    path("api-keys/", views.api_keys, name="api_keys"),
    path("api-keys/<int:key_id>/revoke/", views.api_key_revoke, name="api_key_revoke"),
]

urlpatterns += [
    path("search/", views.search, name="search"),
    path(S + "notes/", views.note_add, name="note_add"),
    path(S + "notes/<int:note_id>/", views.note_edit, name="note_edit"),
    path(S + "tags/", views.tags_set, name="tags_set"),
    path("p/<slug:project>/members/", views.members, name="members"),
]

from . import import_views  # noqa: E402

urlpatterns += [path("import/", import_views.import_upload, name="import")]
