"""Where the time of an API request goes: an append of 1-4 messages and a model-input fetch (200 and 304),
through Django's test client in this process, against a database of its own (a temporary SQLite file, or
DATABASE_URL's server with a test database created and dropped).

Each request is timed whole; its queries and the time of named steps are attributed to the innermost
step running (authentication: the key read with the counts of failed attempts, and the rate-limit
UPDATE; body parsing and validation; the session row lock; the duplicate-id check; the insert; the
stored figures; the event row; the auto-compaction check; building and rendering the model input;
serializing the response). Prints one table per request kind: the median per request of each step's own
time and its queries.

    .venv/bin/python tools/where_time_goes.py [--requests 200] [--profile append|model-input]
    .venv/bin/python tools/where_time_goes.py --pattern 50 [--sql]
    DATABASE_URL=postgres://USER@HOST:5432/DB .venv/bin/python tools/where_time_goes.py

It serves as a deployment does (DEBUG off), with the rate limits at their defaults.

--profile prints a pyinstrument profile (a dev dependency) of that request kind instead.

--pattern T runs the application pattern of bench/versus_phoenix.py instead: a new session, created by its
first append (default settings), then T turns of 4 benchmark-corpus messages, each an append with ids and a
model-input fetch in the openai format; one table for the first call, one for calls 2-3 and one for the rest
(--sql also prints the statements of the first call and of the last one).
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (label, module, attribute): each wrapped so that its time and queries are its own (less nested steps').
STEPS = [
    ("request: ninja's parameters and body schema", "ninja.operation.Operation", "_get_values"),
    ("response: schema check and JSON", "ninja.operation.Operation", "_result_to_response"),
    ("auth: key + failed-attempt counts", "ctxweb.api", "keys_with_prefix"),
    ("auth: over the limit: retry time", "sessions.access.throttle", "check"),
    ("auth: hash comparison", "ctxweb.api", "authenticate"),
    ("auth: rate-limit UPDATE", "sessions.access.rate_limits", "admit"),
    ("body: JSON parse", "ctxweb.api", "load_json_body"),
    ("body: validate and count tokens", "sessions.ingest.append", "parse_batch"),
    ("session row (append: locked)", "sessions.ingest.session_store", "get_session"),
    ("session row (append: locked)", "sessions.ingest.session_store", "get_or_create_locked"),
    ("session row", "sessions.http.messages", "get_session"),
    ("session row", "sessions.http.model_input", "get_session"),
    ("append: duplicate-id check, session UPDATE", "sessions.ingest.append", "_store"),
    ("append: calls answered", "sessions.ingest.append", "_stored_calls"),
    ("insert messages", "sessions.ingest.append", "insert_messages"),
    ("stored figures", "sessions.ingest.append", "input_figures_after_append"),
    ("event row", "sessions.ingest.append", "record"),
    ("auto-compaction check", "sessions.http.messages", "compact_if_needed"),
    ("model input: checkpoint", "sessions.http.model_input", "latest_checkpoint"),
    ("model input: from the stored renderings", "sessions.http.model_input", "stored_openai_response"),
    ("model input: build", "sessions.http.model_input", "build_model_input"),
    ("model input: render", "sessions.http.model_input", "model_input_response"),
    ("response: the model input's schema and JSON", "sessions.http.model_input", "model_input_json"),
    ("model input: tag", "sessions.http.model_input", "model_input_tag"),
]


def setup_django(database_url: str | None):
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", "where-time-goes-" + "x" * 40)
    os.environ["ALLOWED_HOSTS"] = "127.0.0.1"
    os.environ["SECURE_SSL_REDIRECT"] = "0"
    if database_url is None:
        database_url = f"sqlite:///{tempfile.mkdtemp(prefix='ctxweb-profile-')}/db.sqlite3"
    os.environ["DATABASE_URL"] = database_url
    import django

    django.setup()
    from django.conf import settings
    from django.test.utils import setup_databases
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}
    return setup_databases(verbosity=0, interactive=False) if "postgres" in database_url else None


class Attribution:
    """Time and queries of each step, its nested steps' taken out."""

    def __init__(self):
        self.stack: list[str] = []
        self.own_time = defaultdict(float)
        self.queries = defaultdict(int)
        self.started: list[float] = []

    def wrap(self, label, function):
        def wrapped(*args, **kwargs):
            now = time.perf_counter()
            if self.stack:
                self.own_time[self.stack[-1]] += now - self.started[-1]
            self.stack.append(label)
            self.started.append(now)
            try:
                return function(*args, **kwargs)
            finally:
                end = time.perf_counter()
                self.own_time[label] += end - self.started.pop()
                self.stack.pop()
                if self.started:
                    self.started[-1] = end
        return wrapped

    def query(self, execute, sql, params, many, context):
        self.queries[self.stack[-1] if self.stack else "other (transaction BEGIN)"] += 1
        return execute(sql, params, many, context)

    def reset(self):
        self.own_time.clear()
        self.queries.clear()


def install(attribution: Attribution):
    import importlib

    from django.db import connections

    for label, module_name, attribute in STEPS:
        if module_name.endswith(".Operation"):
            module = importlib.import_module(module_name.rsplit(".", 1)[0]).Operation
            function = getattr(module, attribute)
            wrapped = attribution.wrap(label, function)
            setattr(module, attribute, lambda self, *a, _w=wrapped, **k: _w(self, *a, **k))
            continue
        module = importlib.import_module(module_name)
        if hasattr(module, attribute):
            setattr(module, attribute, attribution.wrap(label, getattr(module, attribute)))
    database = connections["default"]
    database.commit = attribution.wrap("commit (the append's transaction)", database.commit)


def conversation(rng: random.Random, turns: int, prefix: str) -> list[list[dict]]:
    """Turns of 1-4 messages (a question; a tool call, its result, an answer), every message with an id."""
    from bench.writers import words

    out = []
    for t in range(turns):
        p = f"{prefix}{t}-"
        turn = [{"id": p + "u", "role": "user", "content": words(rng, 5, 40)}]
        if rng.random() < 0.5:
            turn += [
                {"id": p + "c", "role": "assistant", "content": None,
                 "tool_calls": [{"id": p + "call", "name": "lookup", "arguments": '{"q": "x"}'}]},
                {"id": p + "r", "role": "tool", "tool_call_id": p + "call",
                 "content": " ".join(words(rng, 3, 12) for _ in range(rng.randint(1, 60)))},
            ]
        turn.append({"id": p + "a", "role": "assistant", "content": words(rng, 10, 240)})
        out.append(turn)
    return out


def measure(client, attribution, send, count: int):
    """Per request: whole time, and each step's own time and queries."""
    from django.db import connection

    rows = []
    with connection.execute_wrapper(attribution.query):
        for i in range(count):
            attribution.reset()
            start, cpu = time.perf_counter(), time.process_time()
            response = send(i)
            total = time.perf_counter() - start
            attribution.own_time["cpu"] = time.process_time() - cpu
            assert response.status_code in (200, 304), (response.status_code, response.content[:300])
            rows.append((total, dict(attribution.own_time), dict(attribution.queries)))
    return rows


def calls_per_request(send, start: int, count: int) -> float:
    """Function calls (cProfile's count, builtins included) per request, over `count` requests."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    for i in range(start, start + count):
        send(i)
    profile.disable()
    return pstats.Stats(profile).total_calls / count


def table(title: str, rows) -> str:
    labels = [*dict.fromkeys(label for label, _, _ in STEPS), "commit (the append's transaction)", "other (transaction BEGIN)"]
    total = statistics.median(r[0] for r in rows) * 1000
    cpu = statistics.median(r[1]["cpu"] for r in rows) * 1000
    lines = [f"\n{title}: {len(rows)} requests, median {total:.2f} ms ({cpu:.2f} ms of CPU in this process), "
             f"{statistics.median(sum(r[2].values()) for r in rows):.0f} queries",
             f"{'step':44} {'own ms (median)':>16} {'queries':>8}"]
    accounted = 0.0
    for label in labels:
        times = [r[1].get(label, 0.0) * 1000 for r in rows]
        queries = [r[2].get(label, 0) for r in rows]
        if not any(times) and not any(queries):
            continue
        median = statistics.median(times)
        accounted += median
        lines.append(f"{label:44} {median:16.2f} {statistics.median(queries):8.0f}")
    lines.append(f"{'rest (Django: middleware, routing)':44} {max(0.0, total - accounted):16.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--profile", choices=["append", "model-input"])
    parser.add_argument("--pattern", type=int, metavar="TURNS", help="the append + model-input pattern of T turns")
    parser.add_argument("--sql", action="store_true", help="with --pattern: the statements of the first and last call")
    args = parser.parse_args(argv)
    databases = setup_django(os.environ.get("DATABASE_URL") if "postgres" in os.environ.get("DATABASE_URL", "") else None)
    try:
        return run(args)
    finally:
        if databases is not None:
            from django.test.utils import teardown_databases

            teardown_databases(databases, verbosity=0)


def pattern(args, client, attribution) -> int:
    """A new session through its first T calls: per turn an append of 4 messages and a model-input fetch."""
    import json

    from django.db import connection

    from bench.measures import Corpus

    turns = args.pattern
    key = f"pattern-{time.time_ns()}"
    messages = Corpus().api_messages(turns * 4, random.Random(f"versus-{turns}"), "v")
    statements: dict[tuple[str, int], list[str]] = defaultdict(list)
    current = ["", 0]

    def logged(execute, sql, params, many, context):
        if args.sql and current[1] in (0, turns - 1):
            statements[tuple(current)].append(sql)
        return attribution.query(execute, sql, params, many, context)

    rows = {"append": [], "model input": []}
    with connection.execute_wrapper(logged):
        for t in range(turns):
            for kind, send in (
                ("append", lambda t=t: client.post(f"/api/v1/sessions/{key}/messages",
                                                   json.dumps({"messages": messages[t * 4:(t + 1) * 4]}),
                                                   content_type="application/json")),
                ("model input", lambda: client.get(f"/api/v1/sessions/{key}/model-input", {"format": "openai"})),
            ):
                current[:] = [kind, t]
                attribution.reset()
                start, cpu = time.perf_counter(), time.process_time()
                response = send()
                total = time.perf_counter() - start
                attribution.own_time["cpu"] = time.process_time() - cpu
                assert response.status_code == 200, (response.status_code, response.content[:300])
                rows[kind].append((total, dict(attribution.own_time), dict(attribution.queries)))
    print(f"{connection.vendor}; a new session, {turns} turns of 4 messages (append with ids + model input, openai)")
    for kind, kind_rows in rows.items():
        for name, part in (("call 1", kind_rows[:1]), ("calls 2-3", kind_rows[1:3]), (f"calls 4-{turns}", kind_rows[3:])):
            if part:
                print(table(f"{kind}, {name}", part))
    whole = [a[0] + m[0] for a, m in zip(rows["append"], rows["model input"], strict=True)]
    print(f"\nper call (append + model input): call 1 {whole[0] * 1000:.2f} ms, median of calls 2-{turns} "
          f"{statistics.median(whole[1:]) * 1000:.2f} ms, sum {sum(whole):.3f} s")
    for (kind, t), sqls in statements.items():
        print(f"\n-- {kind}, call {t + 1}: {len(sqls)} statements")
        for sql in sqls:
            print("   ", sql[:220])
    return 0


def run(args) -> int:

    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    if connection.vendor == "sqlite":
        call_command("migrate", verbosity=0)
    from sessions.access.api_keys import create_api_key
    from sessions.ingest.session_store import update_session
    from sessions.models import Project

    project = Project.objects.get_or_create(name="default")[0]
    secret = create_api_key(project, "where-time-goes")[1]
    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {secret}")
    rng = random.Random(20)

    def post(key, messages):
        import json
        return client.post(f"/api/v1/sessions/{key}/messages", json.dumps({"messages": messages}),
                           content_type="application/json")

    # The append session: grows by one turn (1-4 messages) a request; auto compaction on, threshold far away.
    update_session(project, "appends", {"compaction": {"auto": True, "max_tokens": 50_000_000}})
    turns = conversation(rng, args.requests + 40, "a")
    for turn in turns[:20]:
        post("appends", turn)
    # The model-input session: about 720 messages and 90,000 tokens, no checkpoint.
    update_session(project, "big", {"instructions": "You are a benchmark.", "compaction": {"auto": False}})
    big = [m for turn in conversation(rng, 240, "b") for m in turn]
    for start in range(0, len(big), 200):
        post("big", big[start:start + 200])
    big_turns = turns[20:]

    attribution = Attribution()
    install(attribution)
    if args.pattern:
        return pattern(args, client, attribution)

    def append(i):
        return post("appends", big_turns[i])

    def model_input(i):
        return client.get("/api/v1/sessions/big/model-input", {"format": "openai"})

    tag = model_input(0).get("ETag", "")

    def not_modified(i):
        return client.get("/api/v1/sessions/big/model-input", {"format": "openai"}, HTTP_IF_NONE_MATCH=tag)

    if args.profile:
        from pyinstrument import Profiler

        send = append if args.profile == "append" else model_input
        with Profiler(interval=0.0002) as profiler:
            for i in range(args.requests):
                send(i)
        print(profiler.output_text(unicode=True, color=False, show_all=False))
        return 0

    from sessions.models import Session
    session = Session.objects.get(project=project, key="big")
    print(f"{connection.vendor}; model-input session: {session.message_count} messages, "
          f"{session.input_tokens} tokens")
    kinds = [("append (1-4 messages, with ids)", append), ("model input, openai, 200", model_input)]
    if tag:
        kinds.append(("model input, openai, 304", not_modified))
    for name, send in kinds:
        for i in range(3):
            send(i) if send is not append else None  # warm
        count = args.requests if send is not model_input else max(20, args.requests // 5)
        print(table(name, measure(client, attribution, send, count)))
        print(f"{'Python function calls per request':44} {calls_per_request(send, count, 10):16,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
