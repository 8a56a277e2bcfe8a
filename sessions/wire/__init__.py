"""The shapes messages travel in, one module per format, each holding both directions: ctxweb's own
(ctxweb.py: what clients send and exports write), OpenAI Chat Completions (openai.py), Anthropic
Messages (anthropic.py) and OpenAI Responses input items (openai_responses.py), each parsed into ctxweb
messages and rendered from a model input; what every parser produces (parsed.py), what the renderers
share (parts.py), provider-shaped appends (provider_messages.py), strict JSON bodies (json_body.py), the
validation path of every client value (validation.py) and token counting (tokens.py).

May import: sessions.db, sessions.models, sessions.errors; independent of sessions.access. Knows nothing of sessions, compaction or
requests: a renderer takes any object with a model input's entries (parts.InputToRender)."""
