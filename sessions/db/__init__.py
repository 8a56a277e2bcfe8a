"""Every hand-written SQL statement of the product, one module per table (messages, sessions, api keys,
auth failures, recorded requests, the message search index) plus the generic row helpers (rows.py) and
the sizes a bounded read asks the database for (message_sizes.py). Each statement says why it is SQL
rather than the ORM's, with what was measured, and is compared with the ORM's result by a test
(tests/test_hot_path_sql.py, tests/test_auth_sql.py, tests/test_recorded_request_sql.py,
tests/test_query_plans.py, tests/api/test_rate_limits.py). No module outside this package writes SQL
(tests/test_layers.py); migrations write the schema.

May import: sessions.models, sessions.errors."""
