"""Everything that writes what a conversation holds: appending messages (append.py), sessions
created and updated (session_store.py), a message's flag and attributes changed (message_edits.py), the
next request built (next_request.py), sessions rebuilt from recorded requests (recorded_requests.py),
OpenTelemetry traces turned into requests (otlp/: decode, conventions, requests), transcript importers (importers/) and import jobs
(import_jobs.py), and the demo data built through the same functions.

May import: sessions.context (a write refreshes the model input's figures and may enqueue a compaction),
sessions.store, sessions.access, sessions.wire, sessions.db, sessions.models, sessions.errors."""
