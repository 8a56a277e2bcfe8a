"""Floors (issue 20): each figure of the hot path next to the least the same work could cost, measured in
the same run, interleaved so load from elsewhere on the machine falls on both alike.

- physical floor of an append: the same rows' tokens counted with tiktoken and the rows inserted with the
  database driver's `executemany` (sqlite3, or psycopg on PostgreSQL): no HTTP, no ORM, no validation;
- HTTP floor: `GET /api/v1/ping` on the same gunicorn, through the same API-key authentication;
- durable-write floor (issue 42, item 1): `POST /api/v1/floor/write` (bench/floor_urls.py, on the
  benchmark's server only), the same authentication, then the body committed as one row, durably; the
  appends of one and of four messages are timed against it, interleaved;
- the application pattern: T turns of four messages, each an append with client ids (as the Python
  client sends) and a fetch of the model input in the `openai` format, per call; the fetch's own floor
  adds the time to serialize its JSON body (`json.dumps` of the body it received).

Every ratio is printed with its target (issue 20, item 2); a missed target is reported, never a failure.
"""

import json
import random
import sqlite3
import statistics
import time

from django.db import connection

from bench.report import percentile, progress
from sessions.models import Message, Session
from sessions.wire.tokens import encoding
from sessions.wire.validation import parse_message

BULK_BATCH = 500
TURN = 4  # messages a model call appends

# Issue 20, item 2.
BULK_TARGET = {"sqlite": 0.3, "postgresql": 0.2}
APPEND_TARGET = 2.0  # x the HTTP floor at p50
DURABLE_TARGET = 1.5  # x the durable-write floor at p50 (issue 42, item 1)
FETCH_TARGET = 2.0  # x the HTTP floor at p50, plus the body's own serialization
FLAT_TARGET = 1.25  # last 10% / first 10% of the per-call cost, net of serialization


def texts(message: dict) -> list[str]:
    """What a token count reads of a message as the API receives it."""
    content = message.get("content")
    out = [content] if isinstance(content, str) else [p.get("text", "") for p in content or [] if isinstance(p, dict)]
    for call in message.get("tool_calls") or ():
        out += [call["name"], call["arguments"] if isinstance(call["arguments"], str) else json.dumps(call["arguments"])]
    return out


class PhysicalFloor:
    """Counting the tokens with tiktoken and inserting prepared rows with the driver's executemany, one
    transaction per chunk, on a connection of its own to the benchmark's database."""

    def __init__(self, database_url: str, *, bare: bool = False):
        """bare: into a table of the same columns with no index, constraint or trigger (the issue's
        floor), instead of the messages table itself (its indexes and full-text upkeep included)."""
        self.fields = [f for f in Message._meta.concrete_fields if not f.primary_key]
        columns = ", ".join(f'"{f.column}"' for f in self.fields)
        table = Message._meta.db_table
        if connection.vendor == "sqlite":
            self.conn = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, timeout=20)
            # As the app's connection: WAL, synced at every commit.
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            marks = ", ".join("?" for _ in self.fields)
        else:
            import psycopg

            self.conn = psycopg.connect(database_url)
            marks = ", ".join("%s" for _ in self.fields)
        if bare:
            self.conn.execute('DROP TABLE IF EXISTS "bench_bare_message"')
            self.conn.execute(f'CREATE TABLE "bench_bare_message" AS SELECT {columns} FROM "{table}" WHERE 1 = 0')
            if not isinstance(self.conn, sqlite3.Connection):
                self.conn.commit()
            table = "bench_bare_message"
        self.insert = f'INSERT INTO "{table}" ({columns}) VALUES ({marks})'
        self.encoding = encoding()

    def rows(self, session: Session, messages: list[dict], first_seq: int) -> list[tuple]:
        """The rows the app would store, prepared for the driver (before the clock starts)."""
        from bench.measures import message_row

        prepared, calls = [], {}
        for i, data in enumerate(messages):
            new = parse_message(data, i)
            seq = first_seq + i
            calls.update((call_id, seq) for call_id in new.call_ids)
            row = message_row(session, seq, new, call_seq=calls.get(new.tool_call_id), client_id=data["id"])
            prepared.append(tuple(f.get_db_prep_save(getattr(row, f.attname), connection) for f in self.fields))
        return prepared

    def run(self, messages: list[dict], rows: list[tuple]) -> float:
        started = time.perf_counter()
        for message in messages:
            for text in texts(message):
                self.encoding.encode(text, disallowed_special=())
        if isinstance(self.conn, sqlite3.Connection):
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(self.insert, rows)
            self.conn.execute("COMMIT")
        else:
            with self.conn.transaction(), self.conn.cursor() as cursor:
                cursor.executemany(self.insert, rows)
        return time.perf_counter() - started

    def close(self) -> None:
        self.conn.close()


def median_of_slice(samples: list[float], first: bool) -> float:
    n = max(1, len(samples) // 10)
    return statistics.median(samples[:n] if first else samples[-n:])


def measure(bench) -> None:
    """bench: the running bench.measures.Bench (its server, corpus, report and sizes)."""
    report = bench.report
    bench.start_server()
    vendor = connection.vendor
    quick = bench.sizes.reps < 10
    # Physical floor against bulk appends over HTTP, in pairs of chunks of BULK_BATCH messages.
    chunks = 3 if quick else 12
    key = "floors-bulk"
    bench.new_api_session(key)
    messages = bench.corpus.api_messages(chunks * BULK_BATCH, random.Random("floors"), "fb")
    floor_session = Session.objects.create(project=bench.project, key="floors-physical", auto_compact=False)
    floor = PhysicalFloor(bench.database_url)
    bare = PhysicalFloor(bench.database_url, bare=True)
    ratios, bare_ratios, api_rates, floor_rates, bare_rates = [], [], [], [], []
    try:
        for c in range(chunks):
            chunk = messages[c * BULK_BATCH:(c + 1) * BULK_BATCH]
            rows = floor.rows(floor_session, chunk, c * BULK_BATCH + 1)
            body = json.dumps({"messages": chunk}).encode()
            status, data, seconds = bench.api("POST", f"/sessions/{key}/messages", body)
            report.check("floors: bulk append HTTP 200", status == 200, f"HTTP {status}: {str(data)[:300]}")
            floor_seconds = floor.run(chunk, rows)
            bare_seconds = bare.run(chunk, rows)
            api_rates.append(len(chunk) / seconds)
            floor_rates.append(len(chunk) / floor_seconds)
            bare_rates.append(len(chunk) / bare_seconds)
            ratios.append(floor_seconds / seconds)
            bare_ratios.append(bare_seconds / seconds)
    finally:
        floor.close()
        bare.close()
    bench.check_log("floors", key, [m["id"] for m in messages])
    report.check("floors: the physical floor stored every row",
                 Message.objects.filter(session=floor_session).count() == len(messages), "executemany lost rows")
    driver = "sqlite3" if vendor == "sqlite" else "psycopg"
    report.figure(f"floor: tiktoken + {driver} executemany into a bare table, chunks of {BULK_BATCH}", "messages/s",
                  bare_rates)
    report.figure(f"floor: tiktoken + {driver} executemany into the messages table, chunks of {BULK_BATCH}",
                  "messages/s", floor_rates)
    report.figure(f"bulk append over HTTP with ids, batches of {BULK_BATCH}", "messages/s", api_rates)
    bulk = report.figure("bulk append / physical floor, bare table (paired chunks)", "x", bare_ratios)
    report.figure("bulk append / physical floor, messages table (paired chunks)", "x", ratios)
    report.target(f"bulk append / physical floor, bare table ({vendor})", bulk.median, ">=", BULK_TARGET[vendor], "x",
                  "bulk append over HTTP at least 0.3 of the physical floor on SQLite, 0.2 on PostgreSQL")

    # The application pattern, with the HTTP floor measured between its calls.
    turns = 60 if quick else 1000
    key = "floors-pattern"
    # As applications run it: automatic compaction on (default settings, the extractive summarizer on the
    # background worker), so the model input grows up to max_tokens and no further.
    status, data, _ = bench.api("PUT", f"/sessions/{key}", {"compaction": {"auto": True}})
    report.check("api: session created", status == 201, f"PUT {key}: HTTP {status} {data}")
    messages = bench.corpus.api_messages(turns * TURN, random.Random("pattern"), "fp")
    pings, appends, fetches, serializations, net = [], [], [], [], []
    sent = []
    started = time.perf_counter()
    for t in range(turns):
        status, data, seconds = bench.api("GET", "/ping")
        report.check("floors: ping answers 200 with its project",
                     status == 200 and data.get("project") == bench.project.name, f"HTTP {status}: {data}")
        pings.append(seconds)
        batch = messages[t * TURN:(t + 1) * TURN]
        status, data, append_seconds = bench.api("POST", f"/sessions/{key}/messages", {"messages": batch})
        if not report.check("floors: append HTTP 200", status == 200, f"HTTP {status}: {str(data)[:300]}"):
            break
        sent += [m["id"] for m in batch]
        status, body, fetch_seconds = bench.api("GET", f"/sessions/{key}/model-input?format=openai")
        if not report.check("floors: model input HTTP 200", status == 200, f"HTTP {status}: {str(body)[:300]}"):
            break
        report.check("floors: the model input holds messages", bool(body.get("messages")), f"turn {t}: {str(body)[:300]}")
        began = time.perf_counter()
        json.dumps(body)
        serialize = time.perf_counter() - began
        appends.append(append_seconds)
        fetches.append(fetch_seconds)
        serializations.append(serialize)
        net.append(append_seconds + fetch_seconds - serialize)
        status, _, seconds = bench.api("GET", "/ping")
        pings.append(seconds)
    progress(f"  {turns} turns of {TURN} messages in {time.perf_counter() - started:.1f} s")
    bench.check_log("floors pattern", key, sent)
    session = Session.objects.get(project=bench.project, key=key)
    report.note(f"application pattern: {turns} turns, model input at the end {session.input_tokens:,} tokens "
                f"({session.checkpoint_count} checkpoints, automatic compaction on, default settings)")

    def p(samples, q):
        return percentile(samples, q) * 1000

    ping50, ping99 = p(pings, 50), p(pings, 99)
    report.figure("HTTP floor: GET /ping p50", "ms", [ping50])
    report.figure("HTTP floor: GET /ping p99", "ms", [ping99])
    report.figure(f"append of {TURN} messages with ids p50", "ms", [p(appends, 50)])
    report.figure(f"append of {TURN} messages with ids p99", "ms", [p(appends, 99)])
    report.figure("model input (openai) fetch p50", "ms", [p(fetches, 50)])
    report.figure("model input (openai) fetch p99", "ms", [p(fetches, 99)])
    report.figure("model input: json.dumps of its own body p50", "ms", [p(serializations, 50)])
    report.figure(f"append of {TURN} / HTTP floor, p50", "x", [p(appends, 50) / ping50])
    report.figure(f"append of {TURN} / HTTP floor, p99", "x", [p(appends, 99) / ping99])
    report.figure("model input fetch / HTTP floor, p50", "x", [p(fetches, 50) / ping50])
    report.figure("model input fetch / HTTP floor, p99", "x", [p(fetches, 99) / ping99])
    report.target(f"append of {TURN} messages / HTTP floor, p50", p(appends, 50) / ping50, "<=", APPEND_TARGET, "x",
                  "a one-to-four-message append at most 2x the HTTP floor at p50")
    report.target("model input fetch / (2x HTTP floor + its serialization), p50",
                  p(fetches, 50) / (FETCH_TARGET * ping50 + p(serializations, 50)), "<=", 1, "x",
                  "a model-input fetch at most 2x the HTTP floor plus the time to serialize its own JSON body")
    # The floor too, first and last 10%: whether the machine, rather than the calls, drifted during the run.
    for name, samples in (("HTTP floor", pings), ("append", appends), ("model input fetch", fetches),
                          ("per call, net of serialization", net)):
        first, last = median_of_slice(samples, True) * 1000, median_of_slice(samples, False) * 1000
        report.figure(f"{name}: first 10% of {turns} turns (median)", "ms", [first])
        report.figure(f"{name}: last 10% of {turns} turns (median)", "ms", [last])
        growth = last / first
        if name.startswith("per call"):
            report.target(f"per call, net of serialization: last / first 10% of {turns} turns", growth, "<=",
                          FLAT_TARGET, "x", "per-call cost flat from the first to the last 10% (within 1.25x)")
        else:
            report.figure(f"{name}: last / first 10%", "x", [growth])
    report.note("floors: the physical floors count the tokens with tiktoken and insert rows prepared before the "
                "clock starts (their JSON and digests made), into a bare table of the same columns (the target's "
                "floor) and into the messages table itself (indexes and full-text upkeep included); each chunk "
                "is timed right after the HTTP append of the same messages, and the ratio is the median of the pairs")
    durable_write(bench, 100 if quick else 600)


def durable_write(bench, rounds: int) -> None:
    """Issue 42, item 1: an acknowledged message is on disk, so a small append's floor is an authenticated
    request that commits one row durably (bench/floor_urls.py), not a read. Rounds of the floor, an append
    of one message and an append of four, interleaved, each append's body also the floor's."""
    from bench import floor_urls

    report = bench.report
    floor_urls.create_table()
    messages = bench.corpus.api_messages(rounds * 5, random.Random("durable"), "dw")
    bench.new_api_session("floors-durable")
    before = floor_urls.rows()
    floor, one, four = [], [], []
    for r in range(rounds):
        single = messages[r * 5:r * 5 + 1]
        batch = messages[r * 5 + 1:r * 5 + 5]
        body = json.dumps({"messages": single}).encode()
        status, data, seconds = bench.api("POST", "/floor/write", body)
        if not report.check("floors: the durable-write floor answers 200", status == 200, f"HTTP {status}: {data}"):
            return
        floor.append(seconds)
        status, data, seconds = bench.api("POST", "/sessions/floors-durable/messages", body)
        report.check("floors: one-message append HTTP 200", status == 200, f"HTTP {status}: {str(data)[:300]}")
        one.append(seconds)
        status, data, seconds = bench.api("POST", "/sessions/floors-durable/messages", {"messages": batch})
        report.check("floors: four-message append HTTP 200", status == 200, f"HTTP {status}: {str(data)[:300]}")
        four.append(seconds)
    report.check("floors: the durable-write floor stored a row a request", floor_urls.rows() - before == rounds,
                 f"{floor_urls.rows() - before} rows for {rounds} requests")
    bench.check_log("floors durable", "floors-durable", [m["id"] for m in messages])

    def p(samples, q):
        return percentile(samples, q) * 1000

    report.figure("durable-write floor: POST one row, committed p50", "ms", [p(floor, 50)])
    report.figure("durable-write floor: POST one row, committed p99", "ms", [p(floor, 99)])
    for label, samples in (("1 message", one), ("4 messages", four)):
        report.figure(f"append of {label} p50 (durable-write rounds)", "ms", [p(samples, 50)])
        report.figure(f"append of {label} p99 (durable-write rounds)", "ms", [p(samples, 99)])
        report.target(f"append of {label} / durable-write floor, p50", p(samples, 50) / p(floor, 50), "<=",
                      DURABLE_TARGET, "x", "issue 42 item 1: a 1-to-4-message append at most 1.5x an authenticated "
                      "request that commits one row durably, at p50")
