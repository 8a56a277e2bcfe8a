"""Who may do what, and how much: object access per role (permissions.py), project members, API
keys, brute-force throttling, rate limits of API keys and of dashboard users, and the middleware that
refuses a request before it costs anything (body size, NUL characters, CSP).

May import: sessions.db, sessions.models, sessions.errors. Independent of sessions.wire."""
