"""ctxweb against Arize Phoenix on the same conversations (issue 20): `make bench-phoenix ARGS="--turns 50 200"`.

Each product is used as its users use it, one model call a turn of four messages, synchronously:
- ctxweb (gunicorn, as bench/ serves it): POST the turn's 4 messages with their ids, then GET the model
  input in the openai format;
- Phoenix (its own server, SQLite in a temporary working directory): one OpenInference LLM span whose
  input holds the whole conversation so far (llm.input_messages.N..., session.id), sent with the official
  OTLP HTTP exporter and force_flush()ed, so each call is exported before the next.

Per repetition, interleaved (ctxweb, Phoenix, ctxweb, ...), each in a new session on a server started once:
ingest wall time (for Phoenix until every span is queryable, as ctxweb's append is when it answers), disk
added (database files after a WAL checkpoint, or pg_database_size on PostgreSQL), time to open the session
(ctxweb: the dashboard session page through a logged-in test client, in process; Phoenix: one GraphQL query of the
session with its traces' root spans and their inputs, the data of its session page), and peak RSS of each
server's process tree (psutil, sampled every 50 ms). Medians of the repetitions.

Then the spans as they come (issue 42, item 6; SpanIngest below): both products receive the same OTLP/HTTP
exports of OpenInference spans, 512 a batch as the SDK sends them, from many agents at once; spans and
bytes a second until every span can be read, how soon the last one shows, peak RSS and disk added.
`--turns 0` runs only that; `--spans 0 0` skips it.

Runs under the project's .venv; Phoenix, its exporter and psutil live in .venv-phoenix (`make bench-phoenix`
makes it). The same file is the Phoenix client, the span maker and the RSS sampler, run there
(`--phoenix-client`, `--make-spans`, `--sample-rss`): nothing here imports Django or the app at module level.
"""

import argparse
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHOENIX_PYTHON = Path(os.environ.get("PHOENIX_PYTHON", ROOT / ".venv-phoenix" / "bin" / "python"))
TURN = 4
BATCH = 512  # spans an OTLP export carries: BatchSpanProcessor's max_export_batch_size default
OPENS = 5  # session opens timed per repetition: the first, then the median of the rest


# --- run in .venv-phoenix ------------------------------------------------------------------------------


def span_attributes(messages: list[dict], upto: int, session_id: str) -> dict:
    """An OpenInference LLM span's attributes: the first `upto` messages as its input, in its session."""
    from openinference.semconv.trace import MessageAttributes, SpanAttributes, ToolCallAttributes

    out = {SpanAttributes.OPENINFERENCE_SPAN_KIND: "LLM", SpanAttributes.SESSION_ID: session_id}
    for n, m in enumerate(messages[:upto]):
        prefix = f"{SpanAttributes.LLM_INPUT_MESSAGES}.{n}."
        out[prefix + MessageAttributes.MESSAGE_ROLE] = m["role"]
        if m.get("content") is not None:
            out[prefix + MessageAttributes.MESSAGE_CONTENT] = m["content"]
        if m.get("tool_call_id"):
            out[prefix + MessageAttributes.MESSAGE_TOOL_CALL_ID] = m["tool_call_id"]
        for c, call in enumerate(m.get("tool_calls") or ()):
            call_prefix = f"{prefix}{MessageAttributes.MESSAGE_TOOL_CALLS}.{c}."
            out[call_prefix + ToolCallAttributes.TOOL_CALL_ID] = call["id"]
            out[call_prefix + ToolCallAttributes.TOOL_CALL_FUNCTION_NAME] = call["name"]
            out[call_prefix + ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON] = call["arguments"]
    return out


def phoenix_client(port: int, data_path: str, session_id: str) -> None:
    """Send one LLM span a turn, flushed per turn; print the seconds taken as JSON on stdout."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    messages = json.loads(Path(data_path).read_text())
    # The SDK keeps 128 attributes a span by default and evicts the oldest (session.id first): past 12 turns
    # Phoenix would get neither the whole input nor the session. No limit, so it gets what ctxweb gets.
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": "default"}),
                              span_limits=SpanLimits(max_span_attributes=SpanLimits.UNSET,
                                                     max_attributes=SpanLimits.UNSET))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")))
    tracer = provider.get_tracer("versus_phoenix")

    turns = len(messages) // TURN
    began = time.time()  # wall clock, compared with the caller's
    started = time.perf_counter()
    for t in range(turns):
        with tracer.start_as_current_span("ChatCompletion", attributes=span_attributes(messages, (t + 1) * TURN, session_id)):
            pass
        if not provider.force_flush(60_000):
            raise SystemExit(f"turn {t}: force_flush timed out")
    exported = time.perf_counter() - started
    provider.shutdown()
    print(json.dumps({"exported": exported, "began": began}))


def make_spans(data_path: str, out_dir: str) -> None:
    """The spans of --spans, made once and written as the bodies the SDK's OTLP/HTTP exporter sends: for
    each turn, one OpenInference LLM span per conversation whose input holds that conversation so far (as
    many agents running at once would produce), in batches of BATCH (BatchSpanProcessor's default
    max_export_batch_size), each encoded by the exporter's own encoder. Prints {"batches", "spans", "bytes"}."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    data = json.loads(Path(data_path).read_text())
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": "default",
                                                        "service.name": "versus-phoenix-spans"}),
                              span_limits=SpanLimits(max_span_attributes=SpanLimits.UNSET,
                                                     max_attributes=SpanLimits.UNSET))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("versus_phoenix")
    conversations = data["conversations"]
    for t in range(data["turns"]):
        for session_id, messages in conversations.items():
            with tracer.start_as_current_span("ChatCompletion",
                                              attributes=span_attributes(messages, (t + 1) * TURN, session_id)):
                pass
    spans = memory.get_finished_spans()
    out, total = Path(out_dir), 0
    out.mkdir(parents=True, exist_ok=True)
    batches = [spans[i:i + BATCH] for i in range(0, len(spans), BATCH)]
    for n, batch in enumerate(batches):
        body = encode_spans(batch).SerializePartialToString()  # what OTLPSpanExporter posts
        (out / f"batch-{n:05d}.bin").write_bytes(body)
        total += len(body)
    print(json.dumps({"batches": len(batches), "spans": len(spans), "bytes": total}))


def sample_rss(pids: list[int]) -> None:
    """Until stdin closes: every 50 ms, the RSS of each process tree; then print the peak of the sum."""
    import psutil

    roots = [psutil.Process(pid) for pid in pids]
    peak, done = 0, threading.Event()

    def watch():
        nonlocal peak
        while not done.is_set():
            total = 0
            for root in roots:
                try:
                    tree = [root, *root.children(recursive=True)]
                except psutil.NoSuchProcess:
                    continue
                for process in tree:
                    try:
                        total += process.memory_info().rss
                    except psutil.NoSuchProcess:
                        pass
            peak = max(peak, total)
            done.wait(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    sys.stdin.read()
    done.set()
    thread.join()
    print(peak, flush=True)


class RSS:
    """The sampler above, in .venv-phoenix (psutil), over the given process trees."""

    def __init__(self, pids: list[int]):
        self.process = subprocess.Popen(
            [str(PHOENIX_PYTHON), "-m", "bench.versus_phoenix", "--sample-rss", *map(str, pids)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def peak_mb(self) -> float:
        out, _ = self.process.communicate("", timeout=60)
        return int(out.strip()) / 2**20


# --- the comparison, in the project's .venv ----------------------------------------------------------


def file_bytes(*paths: Path) -> int:
    return sum(p.stat().st_size for p in paths if p.exists())


def sqlite_bytes(path: Path) -> int:
    """The database's size once its WAL is written back (as far as readers allow), WAL included."""
    conn = sqlite3.connect(path, timeout=20)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return file_bytes(path, Path(f"{path}-wal"))


class Phoenix:
    """`phoenix serve` on free ports, its working directory (and SQLite database) in `workdir`."""

    def __init__(self, workdir: Path):
        from bench.client import free_port

        self.workdir = workdir
        self.port, self.grpc_port = free_port(), free_port()
        self.process: subprocess.Popen | None = None

    def launch(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PHOENIX_WORKING_DIR": str(self.workdir), "PHOENIX_PORT": str(self.port),
               "PHOENIX_GRPC_PORT": str(self.grpc_port), "PHOENIX_HOST": "127.0.0.1",
               "PHOENIX_TELEMETRY_ENABLED": "false"}
        env.pop("PHOENIX_SQL_DATABASE_URL", None)
        log = open(self.workdir / "phoenix.log", "ab")  # noqa: SIM115 - the server writes to it until stop()
        self.launched = time.perf_counter()
        self.process = subprocess.Popen([str(PHOENIX_PYTHON), "-m", "phoenix.server.main", "serve"], cwd=self.workdir,
                                        env=env, stdout=log, stderr=log, start_new_session=True)
        log.close()

    def wait(self, timeout: float = 600) -> float:
        """Seconds from launch() until it answers its health check."""
        from bench.client import call

        while time.perf_counter() - self.launched < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(f"phoenix exited with {self.process.returncode}; see {self.workdir / 'phoenix.log'}")
            try:
                if call(self.port, "GET", "/healthz", timeout=5)[0] == 200:
                    return time.perf_counter() - self.launched
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"phoenix did not answer within {timeout:.0f} s")

    def stop(self) -> None:
        from bench.client import stop_process

        stop_process(self.process, timeout=30)

    def graphql(self, query: str, variables: dict) -> tuple[dict, float]:
        from bench.client import call

        status, data, seconds = call(self.port, "POST", "/graphql",
                                     json.dumps({"query": query, "variables": variables}).encode())
        body = json.loads(data)
        if status != 200 or body.get("errors"):
            raise RuntimeError(f"phoenix GraphQL: HTTP {status}: {data[:500]!r}")
        return body["data"], seconds

    def session_node(self, session_id: str) -> tuple[str, int] | None:
        data, _ = self.graphql(SESSIONS_QUERY, {})
        for project in data["projects"]["edges"]:
            for edge in project["node"]["sessions"]["edges"]:
                if edge["node"]["sessionId"] == session_id:
                    return edge["node"]["id"], edge["node"]["numTraces"]
        return None

    def bytes(self) -> int:
        return sqlite_bytes(self.workdir / "phoenix.db")


# The newest sessions first: a run makes more than a page of them (the spans' 512 a repetition).
SESSIONS_QUERY = """query { projects(first: 10) { edges { node { name
  sessions(first: 1000, sort: {col: startTime, dir: desc}) { edges { node { id sessionId numTraces } } } } } } }"""
# What Phoenix's session page shows (its SessionDetailsQuery and SessionDetailsTraceListQuery, reduced to the
# session's figures and each trace's root span with its input and output).
SESSION_QUERY = """query ($id: ID!, $first: Int!) { session: node(id: $id) { ... on ProjectSession {
  sessionId numTraces tokenUsage { total } latencyP50: traceLatencyMsQuantile(probability: 0.5)
  traces(first: $first) { edges { trace: node { id traceId rootSpan { id name spanKind attributes
    input { value mimeType } output { value mimeType } latencyMs startTime endTime
    cumulativeTokenCountTotal } } } } } id } }"""


class Comparison:
    def __init__(self, report, bench, tmp: Path, reps: int):
        self.report, self.bench, self.tmp, self.reps = report, bench, tmp, reps
        # The server shares this process's SECRET_KEY (main() sets it), so the login cookie holds there.
        self.phoenix = Phoenix(tmp / "phoenix")
        progress("  starting phoenix")
        self.phoenix.launch()  # it takes a while: gunicorn starts meanwhile
        self.server = bench.server = bench.serve("gunicorn.log")
        report.figure("phoenix: server start", "s", [self.phoenix.wait()])
        self.warm_phoenix()

    def close(self) -> None:
        self.phoenix.stop()
        self.bench.stop_server()

    def warm_phoenix(self) -> None:
        messages = self.bench.corpus.api_messages(TURN, random.Random("warm"), "w")
        self.run_phoenix_client(messages, "warm-up")
        self.wait_for_traces("warm-up", 1, time.perf_counter())

    def run_phoenix_client(self, messages: list[dict], session_id: str) -> dict:
        path = self.tmp / f"{session_id}.json"
        path.write_text(json.dumps(messages))
        out = subprocess.run([str(PHOENIX_PYTHON), "-m", "bench.versus_phoenix", "--phoenix-client",
                              str(self.phoenix.port), str(path), session_id],
                             cwd=ROOT, capture_output=True, text=True, timeout=3600)
        if out.returncode != 0:
            raise RuntimeError(f"phoenix client failed: {out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def wait_for_traces(self, session_id: str, count: int, started: float, timeout: float = 600) -> tuple[str, float]:
        while time.perf_counter() - started < timeout:
            found = self.phoenix.session_node(session_id)
            if found and found[1] >= count:
                return found[0], time.perf_counter()
            time.sleep(0.05)
        raise RuntimeError(f"phoenix: {session_id} did not reach {count} traces within {timeout:.0f} s")

    def database_bytes(self) -> int:
        from django.db import connection

        if connection.vendor == "sqlite":
            return sqlite_bytes(Path(connection.settings_dict["NAME"]))
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return cursor.fetchone()[0]

    def page(self, path: str) -> tuple[int, bytes, float]:
        """A GET of the dashboard page through the logged-in test client, in this process (DEBUG off, as
        bench.measures' page figures: the server's DEBUG=0 pages need collected static files)."""
        started = time.perf_counter()
        response = self.bench.client.get(path)
        return response.status_code, response.content, time.perf_counter() - started

    def ctxweb(self, turns: int, rep: int, messages: list[dict]) -> dict:
        key = f"vs-{turns}-{rep}"
        before = self.database_bytes()
        rss = RSS([self.server.process.pid, *(p.pid for p in self.server.task_processes)])
        started = time.perf_counter()
        first_calls = []
        for t in range(turns):
            began = time.perf_counter()
            status, data, _ = self.bench.api("POST", f"/sessions/{key}/messages",
                                             {"messages": messages[t * TURN:(t + 1) * TURN]})
            if not self.report.check("ctxweb: append HTTP 200", status == 200, f"HTTP {status}: {str(data)[:300]}"):
                break
            status, data, _ = self.bench.api("GET", f"/sessions/{key}/model-input?format=openai")
            if not self.report.check("ctxweb: model input HTTP 200", status == 200, f"HTTP {status}: {str(data)[:300]}"):
                break
            if t < 3:
                first_calls.append(time.perf_counter() - began)
        ingest = time.perf_counter() - started
        peak = rss.peak_mb()
        self.report.check("ctxweb: the last model input holds the conversation",
                          len(data.get("messages", [])) >= min(len(messages), TURN), f"{str(data)[:300]}")
        self.bench.check_log("ctxweb", key, [m["id"] for m in messages])
        added = self.database_bytes() - before
        page = f"/p/{self.bench.project.name}/s/{key}/"
        opens = []
        for _ in range(OPENS):
            status, body, seconds = self.page(page)
            opens.append(seconds)
        self.report.check("ctxweb: the session page shows the newest message",
                          status == 200 and f'id="m-{len(messages)}"'.encode() in body, f"{page}: HTTP {status}")
        api_opens = []
        for _ in range(OPENS):
            began = time.perf_counter()
            s1, _, _ = self.bench.api("GET", f"/sessions/{key}")
            s2, _, _ = self.bench.api("GET", f"/sessions/{key}/messages?limit=500")
            api_opens.append(time.perf_counter() - began)
            self.report.check("ctxweb: session and messages API 200", s1 == s2 == 200, f"HTTP {s1}, {s2}")
        return {"ingest": ingest, "disk": added / 2**20, "open": opens[0], "open_again": statistics.median(opens[1:]),
                "api_open": statistics.median(api_opens), "rss": peak, "first_calls": first_calls}

    def phoenix_run(self, turns: int, rep: int, messages: list[dict]) -> dict:
        session_id = f"vs-{turns}-{rep}"
        before = self.phoenix.bytes()
        rss = RSS([self.phoenix.process.pid])
        timing = self.run_phoenix_client(messages, session_id)
        # From the client's first span (after its imports) until every span can be queried, as ctxweb's
        # append can be once it has answered.
        node, _ = self.wait_for_traces(session_id, turns, time.perf_counter())
        ingest = time.time() - timing["began"]
        peak = rss.peak_mb()
        added = self.phoenix.bytes() - before
        opens = []
        for _ in range(OPENS):
            data, seconds = self.phoenix.graphql(SESSION_QUERY, {"id": node, "first": turns})
            opens.append(seconds)
        edges = data["session"]["traces"]["edges"]
        self.report.check("phoenix: the session holds every model call", len(edges) == turns,
                          f"{session_id}: {len(edges)} traces, {turns} sent")
        last = max(edges, key=lambda e: e["trace"]["rootSpan"]["startTime"])["trace"]["rootSpan"]
        self.report.check("phoenix: the last span's input holds the whole conversation",
                          len(json.loads(last["attributes"]).get("llm", {}).get("input_messages", [])) == len(messages),
                          f"{session_id}: {str(last)[:300]}")
        return {"ingest": ingest, "ingest_export": timing["exported"], "disk": added / 2**20, "open": opens[0],
                "open_again": statistics.median(opens[1:]), "rss": peak}

    def run(self, sizes: list[int]) -> None:
        for turns in sizes:
            messages = self.bench.corpus.api_messages(turns * TURN, random.Random(f"versus-{turns}"), "v")
            ctx, phx = [], []
            for rep in range(self.reps):
                ctx.append(self.ctxweb(turns, rep, messages))
                progress(f"  {turns} turns, rep {rep + 1}: ctxweb {ctx[-1]['ingest']:.2f} s")
                phx.append(self.phoenix_run(turns, rep, messages))
                progress(f"  {turns} turns, rep {rep + 1}: phoenix {phx[-1]['ingest']:.2f} s")
            self.summarize(turns, ctx, phx)

    def summarize(self, turns: int, ctx: list[dict], phx: list[dict]) -> None:
        r = self.report
        for name, unit, key, scale in (("ingest", "s", "ingest", 1), ("disk added", "MB", "disk", 1),
                                       ("open the session (first)", "ms", "open", 1000),
                                       ("open the session (again, median)", "ms", "open_again", 1000),
                                       ("peak RSS of the server's processes", "MB", "rss", 1)):
            c = r.figure(f"{turns} turns: ctxweb {name}", unit, [x[key] * scale for x in ctx])
            p = r.figure(f"{turns} turns: phoenix {name}", unit, [x[key] * scale for x in phx])
            r.figure(f"{turns} turns: phoenix / ctxweb, {name}", "x", [p.median / c.median] if c.median else [0])
        r.figure(f"{turns} turns: ctxweb open via the API (session + messages, median)", "ms",
                 [x["api_open"] * 1000 for x in ctx])
        r.figure(f"{turns} turns: phoenix spans exported (client's force_flush loop)", "s", [x["ingest_export"] for x in phx])
        for i in range(3):
            r.figure(f"{turns} turns: ctxweb call {i + 1} (append + model input)", "ms",
                     [x["first_calls"][i] * 1000 for x in ctx if len(x["first_calls"]) > i])


class SpanIngest:
    """--spans: OTLP/HTTP ingestion of the same exported spans by each product (issue 42, item 6).

    The spans of CONVERSATIONS agents running at once, TURNS model calls each (bench.versus_phoenix.make_spans
    makes them, in .venv-phoenix, with the SDK and the exporter's encoder), are POSTed batch after batch to
    /v1/traces, one export at a time as one BatchSpanProcessor does. Per repetition, interleaved, each
    product gets the same bytes under new session ids. The clock runs from the first POST until every span
    can be read: for ctxweb when the last POST has answered (it stores before it answers) and the last span's
    session shows its messages; for Phoenix, which queues what it accepts, when its span count reaches the
    number sent. "Shown after" is the time from the last POST's start until its last span can be read."""

    def __init__(self, comparison: "Comparison", conversations: int, turns: int):
        self.c, self.conversations, self.turns = comparison, conversations, turns
        self.report, self.bench = comparison.report, comparison.bench

    def make(self, rep: int) -> tuple[list[bytes], list[str]]:
        ids = [f"spans-{rep}-{n}" for n in range(self.conversations)]
        data = {"turns": self.turns, "conversations": {
            session_id: self.bench.corpus.api_messages(self.turns * TURN, random.Random(f"spans-{n}"), f"s{n}-")
            for n, session_id in enumerate(ids)}}
        path, out = self.c.tmp / f"spans-{rep}.json", self.c.tmp / f"spans-{rep}"
        path.write_text(json.dumps(data))
        made = subprocess.run([str(PHOENIX_PYTHON), "-m", "bench.versus_phoenix", "--make-spans", str(path), str(out)],
                              cwd=ROOT, capture_output=True, text=True, timeout=3600)
        if made.returncode != 0:
            raise RuntimeError(f"making the spans failed: {made.stderr[-2000:]}")
        return [f.read_bytes() for f in sorted(out.glob("batch-*.bin"))], ids

    def post(self, port: int, body: bytes, secret: str = "") -> tuple[int, bytes, float]:
        from bench.client import call

        return call(port, "POST", "/v1/traces", body, secret, timeout=600, content_type="application/x-protobuf")

    def rejected(self, body: bytes) -> int:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        answer = ExportTraceServiceResponse()
        answer.ParseFromString(body)
        return answer.partial_success.rejected_spans

    def ctxweb(self, batches: list[bytes], ids: list[str]) -> dict:
        from sessions.models import RecordedRequest, Session

        server = self.c.server
        rss = RSS([server.process.pid, *(p.pid for p in server.task_processes)])
        before = self.c.database_bytes()
        posts, spans = [], len(ids) * self.turns
        started = time.perf_counter()
        for body in batches:
            last_post = time.perf_counter()
            status, data, seconds = self.post(server.port, body, self.bench.secret)
            posts.append(seconds)
            if not self.report.check("spans: ctxweb answers each export 200 with no span rejected",
                                     status == 200 and self.rejected(data) == 0, f"HTTP {status}: {data[:300]!r}"):
                break
        status, data, _ = self.bench.api("GET", f"/sessions/{ids[-1]}")
        shown = data.get("message_count") == self.turns * TURN
        done = time.perf_counter()
        peak = rss.peak_mb()
        self.report.check("spans: ctxweb shows the last span's messages in its session once it has answered", shown,
                          f"HTTP {status}: {str(data)[:300]}")
        sessions = Session.objects.filter(project=self.bench.project, key__in=ids)
        counts = sorted({s.message_count for s in sessions})
        self.report.check("spans: ctxweb holds every conversation, each with every message once",
                          sessions.count() == len(ids) and counts == [self.turns * TURN], f"{sessions.count()} sessions, counts {counts}")
        recorded = RecordedRequest.objects.filter(session__in=sessions).count()
        self.report.check("spans: ctxweb recorded every span as a request", recorded == spans, f"{recorded} of {spans}")
        return {"wall": done - started, "shown": done - last_post, "post_p50": statistics.median(posts),
                "rss": peak, "disk": (self.c.database_bytes() - before) / 2**20}

    def phoenix(self, batches: list[bytes], ids: list[str]) -> dict:
        phoenix, spans = self.c.phoenix, len(ids) * self.turns
        rss = RSS([phoenix.process.pid])
        before_bytes, before = phoenix.bytes(), self.count()
        posts = []
        started = time.perf_counter()
        for body in batches:
            last_post = time.perf_counter()
            status, data, seconds = self.post(phoenix.port, body)
            posts.append(seconds)
            if not self.report.check("spans: phoenix answers each export 200 with no span rejected",
                                     status == 200 and self.rejected(data) == 0, f"HTTP {status}: {data[:300]!r}"):
                break
        while self.count() < before + spans:
            if time.perf_counter() - started > 1800:
                raise RuntimeError(f"phoenix: {spans} spans not all readable within 1800 s")
            time.sleep(0.05)
        done = time.perf_counter()
        peak = rss.peak_mb()
        node = phoenix.session_node(ids[-1])
        self.report.check("spans: phoenix shows the last span's session with every call",
                          node is not None and node[1] == self.turns, f"{ids[-1]}: {node}")
        return {"wall": done - started, "shown": done - last_post, "post_p50": statistics.median(posts),
                "rss": peak, "disk": (phoenix.bytes() - before_bytes) / 2**20}

    def count(self) -> int:
        data, _ = self.c.phoenix.graphql("query { projects(first: 10) { edges { node { recordCount } } } }", {})
        return sum(edge["node"]["recordCount"] for edge in data["projects"]["edges"])

    def run(self, reps: int) -> None:
        r, ctx, phx = self.report, [], []
        spans = self.conversations * self.turns
        for rep in range(reps):
            batches, ids = self.make(rep)
            size = sum(map(len, batches))
            ctx.append(self.ctxweb(batches, ids))
            progress(f"  spans, rep {rep + 1}: ctxweb {spans / ctx[-1]['wall']:,.0f} spans/s")
            phx.append(self.phoenix(batches, ids))
            progress(f"  spans, rep {rep + 1}: phoenix {spans / phx[-1]['wall']:,.0f} spans/s")
        label = f"spans ({spans:,} in {len(batches)} exports of up to {BATCH}, {size / 2**20:.1f} MB)"
        rates = {}
        for name, runs in (("ctxweb", ctx), ("phoenix", phx)):
            rates[name] = r.figure(f"{label}: {name} spans a second", "spans/s", [spans / x["wall"] for x in runs])
            r.figure(f"{label}: {name} MB a second", "MB/s", [size / 2**20 / x["wall"] for x in runs])
            r.figure(f"{label}: {name} export answered, p50", "ms", [x["post_p50"] * 1000 for x in runs])
            r.figure(f"{label}: {name} last span shown after", "ms", [x["shown"] * 1000 for x in runs])
            r.figure(f"{label}: {name} peak RSS of the server's processes", "MB", [x["rss"] for x in runs])
            r.figure(f"{label}: {name} disk added", "MB", [x["disk"] for x in runs])
        r.target(f"{label}: ctxweb / phoenix spans a second", rates["ctxweb"].median / rates["phoenix"].median,
                 ">=", SPANS_RATE_TARGET, "x", "issue 42 item 6: at least 5x Phoenix's rate")
        ctx_rss, phx_rss = statistics.median(x["rss"] for x in ctx), statistics.median(x["rss"] for x in phx)
        r.target(f"{label}: ctxweb / phoenix peak RSS", ctx_rss / phx_rss, "<=", SPANS_MEMORY_TARGET, "x",
                 "issue 42 item 6: a tenth of Phoenix's memory")


SPANS_RATE_TARGET = 5.0
SPANS_MEMORY_TARGET = 0.1


def progress(message: str) -> None:
    from bench.report import progress as report_progress

    report_progress(message)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.versus_phoenix", description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite",
                        help="ctxweb's database; postgresql: a database of its own on DATABASE_URL's server "
                             "(named ctxweb_versus_phoenix, or $CTXWEB_BENCH_DATABASE). Phoenix always uses SQLite.")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--spans", type=int, nargs=2, default=[512, 6], metavar=("CONVERSATIONS", "TURNS"),
                        help="OTLP ingestion: the spans of CONVERSATIONS agents at once, TURNS calls each (0 0: skip)")
    parser.add_argument("--spans-reps", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the databases afterwards")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop both servers on the way out
    if not PHOENIX_PYTHON.exists():
        parser.error(f"{PHOENIX_PYTHON} is missing: `make bench-phoenix` installs Phoenix there")
    given = os.environ.get("DATABASE_URL", "") if args.database == "postgresql" else ""
    if args.database == "postgresql" and not given.startswith(("postgres:", "postgresql:")):
        parser.error("--database postgresql needs DATABASE_URL=postgres://... (the server to use)")

    from bench.report import Report
    from bench.run import Database, close_django, start_django

    database = Database(given, args.keep, name=os.environ.get("CTXWEB_BENCH_DATABASE", "ctxweb_versus_phoenix"))
    report = Report()
    comparison = None
    try:
        start_django(database, report)
        report.machine["loadavg_at_start"] = Path("/proc/loadavg").read_text().strip()
        from bench.measures import Bench

        bench = Bench(report, quick=True, database_url=database.url, tmp=database.tmp)
        report.notes.clear()
        report.sizes.clear()
        report.sizes.update(turns="/".join(map(str, args.turns)), messages_a_turn=TURN, repetitions=args.reps,
                            ctxweb_database=args.database, phoenix_database="sqlite")
        comparison = Comparison(report, bench, database.tmp, args.reps)
        comparison.run([t for t in args.turns if t])
        if all(args.spans):
            SpanIngest(comparison, *args.spans).run(args.spans_reps)
    finally:
        if comparison is not None:
            comparison.close()
        close_django()
        if args.keep:
            progress(f"kept {database.tmp}")
        database.drop()
    report.machine["loadavg_at_end"] = Path("/proc/loadavg").read_text().strip()
    report.print()
    return 1 if report.failed_checks else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--make-spans"]:
        make_spans(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["--phoenix-client"]:
        phoenix_client(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif sys.argv[1:2] == ["--sample-rss"]:
        sample_rss([int(pid) for pid in sys.argv[2:]])
    else:
        sys.exit(main())
