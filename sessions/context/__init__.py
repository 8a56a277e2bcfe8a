"""What the model sees and why: the model input built by ctxweb's rules (model_input.py) or from
what the application sent (recorded_input.py), its figures stored on the session (figures.py), the
explanation of every stored message (explain.py), compaction and its runs on the task queue
(compaction.py, compaction_runs.py, waiting.py), checkpoints made elsewhere, summarizers, salient facts,
trace a fact, what-if previews, the input rendered for a provider (provider_input.py), exports and
recorded requests as the API shows them.

May import: sessions.store, sessions.access, sessions.wire, sessions.db, sessions.models,
sessions.errors. Never the layers that write (sessions.ingest) or show (http, dashboard)."""
