"""The records beside the raw log and how they are found: the append-only events and the data of
each event type, notes and tags, the leases of background work, the sessions list and search.

May import: sessions.access, sessions.wire, sessions.db, sessions.models, sessions.errors."""
