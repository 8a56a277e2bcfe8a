"""The dashboard: server-rendered pages and the htmx fragments that refresh them (views.py,
import_views.py, login_views.py), the read models a page shows (inspection.py, session_metadata.py,
request_timeline.py, chart.py), the forms of its query strings, and its error pages.

May import: sessions.ingest, sessions.context, sessions.store, sessions.access, sessions.wire,
sessions.db, sessions.models, sessions.errors. Never sessions.http. Views leave queries to the layers
below (tests/test_layers.py)."""
