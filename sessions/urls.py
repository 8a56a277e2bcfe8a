from django.urls import include, path, register_converter

from sessions.dashboard import import_views, preferences, review_views, views


class SessionKeyConverter:
    regex = r"[A-Za-z0-9._:@-]{1,200}"

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(SessionKeyConverter, "key")

# Every page and fragment of one session, under p/<project>/s/<key>/ (Session.url and the session_url
# template tag build them).
session_patterns = [
    path("", views.session_detail, name="session"),
    path("log/", views.raw_log_fragment, name="session_log"),
    path("input/", views.model_input_fragment, name="session_input"),
    path("live/", views.live_fragment, name="session_live"),
    path("chart/", views.chart_fragment, name="session_chart"),
    path("events/", views.events_fragment, name="session_events"),
    path("events/<int:event_id>/", views.event_record, name="event_record"),
    path("trace/", views.trace_fragment, name="session_trace"),
    path("checkpoints/<int:checkpoint_id>/", views.checkpoint_diff, name="checkpoint_diff"),
    path("requests/<int:event_id>/", views.request_view, name="request_view"),
    path("recorded/<int:number>/", views.recorded_request_diff, name="recorded_request_diff"),
    path("compact/", views.compact_now, name="session_compact"),
    path("compaction-run/", views.compaction_run_fragment, name="session_compaction_run"),
    path("what-if/", views.what_if, name="session_what_if"),
    path("what-if/settings/", views.save_compaction_settings, name="session_save_compaction"),
    path("messages/<int:seq>/", views.message_full, name="message_full"),
    path("messages/<int:seq>/include/", views.toggle_include, name="message_include"),
    path("export.<str:fmt>", views.export_download, name="session_export"),
    path("notes/", views.note_add, name="note_add"),
    path("notes/<int:note_id>/", views.note_edit, name="note_edit"),
    path("tags/", views.tags_set, name="tags_set"),
    path("reviews/", review_views.review_add, name="review_add"),
    path("reveal/", review_views.reveal, name="reveal"),
    path("pinned-facts/", review_views.session_pinned_facts, name="pinned_facts"),
]

urlpatterns = [
    path("", views.session_list, name="sessions"),
    path("p/<slug:project>/s/<key:key>/", include(session_patterns)),
    path("tags/", views.bulk_tags, name="bulk_tags"),
    path("search/", views.search, name="search"),
    path("compare/", views.compare_page, name="compare"),
    path("compare/ticked/", views.compare_ticked, name="compare_ticked"),
    path("queues/", review_views.queue_list, name="queues"),
    path("queues/<int:queue_id>/", review_views.queue_detail, name="queue"),
    path("queues/<int:queue_id>/next/", review_views.queue_next, name="queue_next"),
    path("queues/<int:queue_id>/reviews.csv", review_views.queue_csv, name="queue_csv"),
    path("preferences/panels/", preferences.panel_state, name="panel_state"),
    path("p/<slug:project>/members/", views.members, name="members"),
    path("p/<slug:project>/settings/", review_views.project_settings, name="project_settings"),
    path("api-keys/", views.api_keys, name="api_keys"),
    path("api-keys/<int:key_id>/revoke/", views.api_key_revoke, name="api_key_revoke"),
    path("import/", import_views.import_upload, name="import"),
    path("import/<int:job_id>/", import_views.import_job, name="import_job"),
    path("import/<int:job_id>/retry/", import_views.import_job_retry, name="import_job_retry"),
]
