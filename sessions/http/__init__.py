"""The HTTP API v1 (django-ninja): one router per resource (sessions, messages, model_input,
compactions, requests, keys, compare, reviews), assembled in api.py and mounted by ctxweb/api.py at /api/v1/, and the
response shapes of schemas.py. A view reads its arguments, calls the layers below, and shapes the answer.

May import: sessions.ingest, sessions.context, sessions.store, sessions.access, sessions.wire,
sessions.db, sessions.models, sessions.errors. Never sessions.dashboard (the two faces are independent)."""
