"""The benchmark's measurements and the data they run on. Imported after django.setup().

Data is made fast and directly: message rows are bulk-created from a pool of realistic turns whose
token figures were computed once by the app's own parser (so every stored count is the one the app
would have stored), with gapless seqs, tool calls linked to their results, and the session's
denormalised figures set the way the app keeps them.
"""

import json
import multiprocessing
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from bench.client import Server, app_client, append_client, call, copy_client
from bench.report import Report, percentile, progress
from sessions.access.api_keys import create_api_key
from sessions.access.members import set_member
from sessions.context.compaction import RunBudget, plan_compaction, resolve_settings
from sessions.context.figures import refresh_input_tokens
from sessions.context.model_input import build_model_input, summary_message_tokens
from sessions.ingest.context_check import Settings as CheckSettings
from sessions.ingest.context_check import check_messages
from sessions.models import MODEL_FIELDS, Checkpoint, Event, EventType, Message, Project, Role, Session, Tag
from sessions.store.project_settings import reveal_to, set_masking
from sessions.store.search import SearchFilters, search_messages
from sessions.store.trace_blocks import index_session
from sessions.wire.grams import search_grams
from sessions.wire.tokens import count_message, encoding
from sessions.wire.validation import NewMessage, message_digest, parse_message

# Run in this order: the HTTP measurements share one server, stopped before the in-process ones.
MEASUREMENTS = ("tokens", "append", "latency", "floors", "concurrent", "compaction_backlog", "model_input", "page", "masking", "search",
                "plan", "list", "import", "context_check", "scale", "project", "many_apps")
BATCH = 100
# The compaction_backlog measurement's summarizer: the `openai` one against a local endpoint that answers
# after this many seconds, as an LLM would, so appends overlap running compactions.
SUMMARIZER_DELAY = 2.0
PER_SECOND = "messages/s"


@dataclass(frozen=True)
class Sizes:
    reps: int  # repetitions of each in-process measurement, after warm-up
    token_messages: int  # count_message calls per repetition
    append_messages: int  # per repetition, in batches of BATCH
    append_reps: int
    latency_requests: int
    concurrent_requests: int  # per client process, each a batch of concurrent_batch messages
    concurrent_batch: int
    concurrent_reps: int
    model_input: tuple[int, int, int]  # session sizes; the checkpoint is ~100 messages before the end
    page: tuple[int, int]
    plan_tokens: int  # stored tokens after the checkpoint
    list_sessions: int
    list_sizes: tuple[int, int] = (25, 100)
    import_lines: tuple[int, int] = (100_000, 1_000_000)  # JSON Lines imported, for import memory
    backlog_messages: int = 30_000  # stored history when automatic compaction is turned on
    backlog_seconds: float = 900  # time bound for working it off
    scale: tuple[int, int] = (1_000, 1_000_000)  # sessions with the checkpoints compaction made on the way
    project_sessions: int = 100_000  # a project of them, about 100 messages each (PostgreSQL)
    project_reps: int = 40  # requests of each list filter and search, for p50 and p99


FULL = Sizes(
    reps=15, token_messages=1000, append_messages=3000, append_reps=5, latency_requests=500,
    concurrent_requests=40, concurrent_batch=10, concurrent_reps=3,
    model_input=(200, 10_000, 100_000), page=(100, 100_000), plan_tokens=1_000_000, list_sessions=10_000,
)
QUICK = Sizes(
    reps=5, token_messages=200, append_messages=500, append_reps=3, latency_requests=100,
    concurrent_requests=10, concurrent_batch=10, concurrent_reps=2,
    model_input=(200, 1_000, 10_000), page=(100, 10_000), plan_tokens=100_000, list_sessions=1_000,
    import_lines=(10_000, 100_000), backlog_messages=6_000, backlog_seconds=120, scale=(1_000, 20_000),
    project_sessions=500, project_reps=5,
)

# --- realistic text --------------------------------------------------------------------------------

WORDS = """
the a to of and in is it you that for on with as this be are was have not or but can by from at your we
will if an do my all they which one so what there about would more when their up out time just like
how some could them see other than then now look only come its over think also back after use two our
work first well way even new want because any these give day most us account order refund invoice
payment shipping delivery package tracking address customer support ticket issue problem error timeout
database query index deployment server container cluster network latency cache memory disk request
response status report summary meeting schedule calendar travel flight hotel booking reservation seat
weather forecast rain wind temperature sunny cloudy humidity storm city lisbon porto madrid berlin
paris tokyo seattle boston budget price discount subscription plan upgrade cancel renew password login
email phone verify identity document contract policy warranty repair replacement product model version
release feature bug patch test build pipeline branch commit review merge rollback migration backup
restore alert monitor dashboard metric log trace incident outage recovery capacity quota limit usage
""".split()
QUESTION_STARTS = ["Can you", "Could you please", "How do I", "Why does", "What is", "Is it possible to",
                   "I need to", "Please help me", "When will", "Where can I"]
TOOLS = [("get_weather", ["city", "days"]), ("search_docs", ["query", "limit"]), ("lookup_order", ["order_id"]),
         ("run_sql", ["sql"]), ("get_user_details", ["user_id"]), ("list_incidents", ["service", "since"])]
INSTRUCTIONS = ("You are the support assistant of Example Corp. Be concise, verify the customer's identity "
                "before changing anything, and call a tool rather than guessing.")
PLANTED = "During the zanzibar quokka migration the replica fell behind by forty minutes."
PLANTED_UNSPACED = "このモデルは最新の情報を持っていません。予約番号を確認してください。"


def sentence(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(sentence(rng, 8, 22) for _ in range(sentences))


@dataclass
class Template:
    """One message of a turn, parsed once by the app so its figures are the stored ones."""

    role: str
    content: str | None
    calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments)
    answers: tuple[int, int] | None = None  # (index in the turn of the assistant message, call position)
    parsed: NewMessage | None = None


@dataclass
class Concrete:
    n: int  # 1-based position in the generated conversation: the seq when it starts a fresh session
    template: Template
    call_ids: list[str]
    tool_call_id: str
    answers_n: int | None
    turn_start: bool

    def api(self, id_prefix: str) -> dict:
        t = self.template
        data = {"id": f"{id_prefix}m{self.n}", "role": t.role, "content": t.content}
        if t.calls:
            data["tool_calls"] = [{"id": cid, "name": name, "arguments": args}
                                  for cid, (name, args) in zip(self.call_ids, t.calls, strict=True)]
        if self.tool_call_id:
            data["tool_call_id"] = self.tool_call_id
        return data


def peak_mb(call: Callable[[], object]) -> float:
    """The most Python memory `call` holds at once (tracemalloc), above what was held before it, in MB:
    the objects it builds, not the database's own buffers."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        call()
        return (tracemalloc.get_traced_memory()[1] - before) / 2**20
    finally:
        tracemalloc.stop()


class Corpus:
    """A pool of turns: a user question, then an answer, or tool calls, their results and an answer."""

    def __init__(self, seed: int = 8, size: int = 400):
        rng = random.Random(seed)
        self.turns = [self._turn(rng) for _ in range(size)]
        for turn in self.turns:
            for t in turn:
                t.parsed = parse_message(self._placeholder(t))

    @staticmethod
    def _placeholder(t: Template) -> dict:
        data = {"role": t.role, "content": t.content}
        if t.calls:
            data["tool_calls"] = [{"id": f"c{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(t.calls)]
        if t.answers:
            data["tool_call_id"] = "c0"
        return data

    @staticmethod
    def _turn(rng: random.Random) -> list[Template]:
        question = f"{rng.choice(QUESTION_STARTS)} {sentence(rng, 6, 30).lower().rstrip('.')}?"
        if rng.random() < 0.3:
            question += " " + paragraph(rng, rng.randint(1, 3))
        turn = [Template(Role.USER, question)]
        shape = rng.random()
        if shape < 0.5:
            turn.append(Template(Role.ASSISTANT, paragraph(rng, rng.randint(2, 9))))
            return turn
        calls = []
        for _ in range(1 if shape < 0.85 else 2):
            name, params = rng.choice(TOOLS)
            calls.append((name, json.dumps({p: rng.choice(WORDS) for p in params})))
        preface = "" if rng.random() < 0.6 else sentence(rng, 5, 12)
        turn.append(Template(Role.ASSISTANT, preface or None, calls))
        for position in range(len(calls)):
            # Tool output is most of a real transcript's tokens (tests/data/transcripts: mean about 140
            # tokens a message, median about 40); these results make the pool match that.
            items = rng.randint(1, 8) if rng.random() < 0.55 else rng.randint(40, 180)
            result = {"status": "ok", "items": [sentence(rng, 3, 10) for _ in range(items)]}
            turn.append(Template(Role.TOOL, json.dumps(result), answers=(1, position)))
        turn.append(Template(Role.ASSISTANT, paragraph(rng, rng.randint(1, 5))))
        return turn

    def conversation(self, rng: random.Random, id_prefix: str = ""):
        """An endless conversation of concrete messages with unique tool call ids."""
        n = 0
        while True:
            turn = rng.choice(self.turns)
            base = n
            for i, t in enumerate(turn):
                n += 1
                call_ids = [f"{id_prefix}call{n}_{p}" for p in range(len(t.calls))]
                answers_n, tool_call_id = None, ""
                if t.answers:
                    answers_n = base + t.answers[0] + 1
                    tool_call_id = f"{id_prefix}call{answers_n}_{t.answers[1]}"
                yield Concrete(n, t, call_ids, tool_call_id, answers_n, i == 0)

    def api_messages(self, count: int, rng: random.Random, id_prefix: str) -> list[dict]:
        stream = self.conversation(rng, id_prefix)
        return [next(stream).api(id_prefix) for _ in range(count)]


def concrete_row(session: Session, c: "Concrete", origin) -> Message:
    """The stored row of a generated message `c`, its calls with their ids, created c.n seconds after `origin`."""
    new = c.template.parsed
    calls = [{**call, "id": cid} for call, cid in zip(new.tool_calls, c.call_ids, strict=True)]
    digest = message_digest(new.role, new.content, new.reasoning, calls, c.tool_call_id,
                            {name: getattr(new, name) for name in MODEL_FIELDS})
    return message_row(session, c.n, new, call_seq=c.answers_n, created_at=origin + timedelta(seconds=c.n),
                       client_id=f"m{c.n}", tool_calls=calls, call_ids=c.call_ids, tool_call_id=c.tool_call_id,
                       digest=digest)


def plant_text(row: Message, text: str) -> int:
    """Make `row` a user message of `text` alone; returns its tokens."""
    row.content = row.text = text
    row.tokens = count_message(Role.USER, text).total
    row.digest = message_digest(Role.USER, text, "", [], "", dict(MODEL_FIELDS))
    return row.tokens


def copy_line(row: tuple) -> bytes:
    """One row in PostgreSQL COPY's text format: tab-separated, \\N for NULL, backslash escapes."""
    out = []
    for value in row:
        if value is None:
            out.append("\\N")
            continue
        if hasattr(value, "obj"):  # psycopg's Json/Jsonb wrapper of a JSON field
            value = json.dumps(value.obj)
        elif isinstance(value, bool):
            value = "t" if value else "f"
        elif isinstance(value, (dict, list)):
            value = json.dumps(value)
        elif hasattr(value, "isoformat"):
            value = value.isoformat()
        text = str(value)
        out.append(text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r"))
    return ("\t".join(out) + "\n").encode()


def message_row(session: Session, seq: int, new: NewMessage, *, call_seq=None, created_at=None, **changes) -> Message:
    """The Message row the app stores for a parsed message (sessions/ingest/append.py does the same)."""
    fields = {
        "content": new.content, "text": new.text, "has_content": new.has_content, "tool_calls": new.tool_calls,
        "call_ids": new.call_ids, "tool_call_id": new.tool_call_id, "tokens": new.tokens,
        "tool_call_tokens": new.tool_call_tokens, "digest": new.digest, "client_id": new.client_id,
        "openai_message": new.openai_message,
    }
    fields.update(changes)
    return Message(
        session=session, seq=seq, role=new.role, reasoning=new.reasoning, name=new.name,
        attributes=new.attributes, include_in_messages=new.include_in_messages,
        created_at=created_at or new.created_at or timezone.now(), call_seq=call_seq, reasoning_tokens=new.reasoning_tokens,
        **fields,
    )


@dataclass
class Built:
    session: Session
    count: int
    tokens: int
    checkpoint: Checkpoint | None
    planted_seq: int | None = None


# --- the measurements ------------------------------------------------------------------------------


# A measurement stops repeating once it has taken this long (with at least MIN_SAMPLES), so a slow
# regression makes the run longer, not endless.
BUDGET_SECONDS = 30
MIN_SAMPLES = 3


def timed(fn: Callable[[], object], times: int, warmup: int = 1) -> list[float]:
    return interleaved({"": fn}, times, warmup)[""]


def interleaved(fns: dict[str, Callable[[], object]], times: int, warmup: int = 1) -> dict[str, list[float]]:
    """Time several things round-robin, so load from elsewhere on the machine falls on all of them
    alike and the ratios between them stay fair."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples = {name: [] for name in fns}
    deadline = time.perf_counter() + BUDGET_SECONDS
    for round_ in range(times):
        if round_ >= MIN_SAMPLES and time.perf_counter() > deadline:
            progress(f"  (stopped after {round_} of {times} repetitions: over {BUDGET_SECONDS} s)")
            break
        for name, fn in fns.items():
            started = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - started)
    return samples


def together(target: Callable, arguments: list[tuple], timeout: float) -> list[dict]:
    """Run `target(*args, start, results)` in a process for each of `arguments`, started together (they wait
    on `start`, a barrier); what each put on `results`."""
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(len(arguments)), context.Queue()
    processes = [context.Process(target=target, args=(*args, start, results)) for args in arguments]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=timeout) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    return outcomes


def ms(samples: list[float]) -> list[float]:
    return [s * 1000 for s in samples]


@dataclass
class ManyAppsRound:
    """What one round of the many-applications measurement gave (Bench._many_apps_round)."""

    rate: float  # messages a second
    floor_rate: float  # the COPY floor's
    appends: list[float]  # seconds, each append
    fetches: list[float]  # seconds, each model-input fetch


class Bench:
    def __init__(self, report: Report, *, quick: bool, database_url: str, tmp: Path):
        self.report = report
        self.sizes = QUICK if quick else FULL
        self.database_url = database_url
        self.tmp = tmp
        self.postgres = connection.vendor == "postgresql"
        self.corpus = Corpus()
        self.project = Project.objects.create(name="bench", title="benchmark")
        self.big_project = Project.objects.create(name="bench-big", title="benchmark: the largest session")
        _, self.secret = create_api_key(self.project, "bench")
        user = get_user_model().objects.create_superuser("bench", "bench@example.com", None)
        self.client = Client(HTTP_HOST="127.0.0.1")
        self.client.force_login(user)
        self.server: Server | None = None
        self.built: dict[str, Built] = {}
        if self.postgres:
            report.note("PostgreSQL: ANALYZE runs after each bulk load, as autovacuum would have long before "
                        "anyone opens the data; SQLite gets no ANALYZE, as nothing runs it for this app")
        report.note("appends go to sessions with automatic compaction off, so the figures are the append path alone "
                    "(except compaction_backlog's)")
        sample = self.corpus.conversation(random.Random("sample"))
        sizes = [next(sample).template.parsed.tokens for _ in range(5000)]
        report.note(f"messages come from {len(self.corpus.turns)} generated turns: {statistics.mean(sizes):.0f} tokens "
                    f"a message on average, median {statistics.median(sizes):.0f} (tests/data/transcripts: 139, 39)")
        s = self.sizes
        report.sizes.update(
            quick=quick, append=f"{s.append_messages}x{s.append_reps} in batches of {BATCH}",
            model_input="/".join(f"{n:,}" for n in s.model_input), page="/".join(f"{n:,}" for n in s.page),
            plan_tokens=f"{s.plan_tokens:,}", list_sessions=f"{s.list_sessions:,}",
            import_lines="/".join(f"{n:,}" for n in s.import_lines), backlog_messages=f"{s.backlog_messages:,}",
        )

    def run(self, names: list[str]) -> None:
        for name in MEASUREMENTS:
            if name in names:
                progress(f"== {name}")
                getattr(self, "measure_" + name)()
                later = MEASUREMENTS[MEASUREMENTS.index(name) + 1:]
                if not {"append", "latency", "floors", "concurrent"} & set(later) & set(names):
                    self.stop_server()

    def close(self) -> None:
        self.stop_server()

    # --- data --------------------------------------------------------------------------------------

    def build(self, key: str, *, count: int | None = None, tokens_after_head: int | None = None,
              checkpoint: str | None = None, project: Project | None = None, plant: bool = False) -> Built:
        """A session of `count` messages (or with `tokens_after_head` tokens after a checkpoint that
        covers its first 20 turns), bulk-created, optionally with a checkpoint ~100 messages before
        the end ("end") or after the first turns ("head")."""
        if key in self.built:
            return self.built[key]
        started = time.perf_counter()
        session = Session.objects.create(
            project=project or self.project, key=key, title=f"benchmark {key}", instructions=INSTRUCTIONS,
            instructions_tokens=count_message(Role.SYSTEM, INSTRUCTIONS).total, auto_compact=False,
        )
        rng = random.Random(key)
        stream = self.corpus.conversation(rng)
        rows, token_list, turn_starts = [], [], []
        head_end, after_head = None, 0
        origin = timezone.now() - timedelta(days=30)
        while True:
            c = next(stream)
            if count is not None and c.n > count:
                break
            if c.turn_start:
                turn_starts.append(c.n)
                if tokens_after_head is not None and len(turn_starts) == 21:
                    head_end = c.n - 1
                if tokens_after_head is not None and after_head >= tokens_after_head:
                    break
            rows.append(concrete_row(session, c, origin))
            token_list.append(rows[-1].tokens)
            if head_end is not None:
                after_head += rows[-1].tokens
        planted_seq = None
        if plant:
            planted_seq = next(s for s in turn_starts if s >= len(rows) // 2)
            token_list[planted_seq - 1] = plant_text(rows[planted_seq - 1], PLANTED)
            # And a Japanese question further on, for the search of words inside an unspaced sentence.
            row = rows[next(s for s in turn_starts if s >= len(rows) * 3 // 4) - 1]
            row.search_grams = search_grams(PLANTED_UNSPACED)
            token_list[row.seq - 1] = plant_text(row, PLANTED_UNSPACED)
        n = len(rows)
        with transaction.atomic():
            Message.objects.bulk_create(rows, batch_size=2000)
            running, events = 0, []
            for first in range(1, n + 1, BATCH):
                last = min(n, first + BATCH - 1)
                added = sum(token_list[first - 1:last])
                running += added
                events.append(Event(session=session, type=EventType.MESSAGES_APPENDED, actor="api:bench",
                                    created_at=origin + timedelta(seconds=last),
                                    data={"count": last - first + 1, "first_seq": first, "last_seq": last,
                                          "tokens": added, "input_tokens": running, "duplicates": 0}))
            Event.objects.bulk_create(events, batch_size=2000)
            session.message_count = n
            session.raw_tokens = sum(token_list)
            session.last_activity_at = origin + timedelta(seconds=n)
            cut = None
            if checkpoint == "end":
                cut = next(s for s in turn_starts if s >= n - 100) - 1
            elif checkpoint == "head":
                cut = head_end
            made = None
            if cut:
                summary = paragraph(random.Random(key + "summary"), 12)
                made = Checkpoint.objects.create(
                    session=session, previous=None, summary=summary, first_seq=1, last_seq=cut, created_at_seq=n,
                    summary_tokens=summary_message_tokens(summary, cut), replaced_tokens=sum(token_list[:cut]),
                    tokens_before=session.raw_tokens, summarizer="extractive", trigger="request",
                )
                session.checkpoint_count = 1
            session.save()
            tokens = refresh_input_tokens(session)
            if made:
                made.tokens_after = tokens
                made.save(update_fields=["tokens_after"])
        self.analyze()
        built = Built(session, n, session.raw_tokens, made, planted_seq)
        self.built[key] = built
        progress(f"  built {key}: {n:,} messages, {session.raw_tokens:,} tokens"
                 f"{f', checkpoint at #{made.last_seq}' if made else ''} in {time.perf_counter() - started:.1f} s")
        return built

    def analyze(self) -> None:
        """PostgreSQL: refresh the planner's statistics after a bulk load, as autovacuum would have done
        long before anyone read a 100,000-message session. (SQLite: nothing ever runs ANALYZE for this
        app, so the benchmark does not either.)"""
        if self.postgres:
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

    def fresh(self, built: Built) -> Session:
        return Session.objects.select_related("project").get(pk=built.session.pk)

    # --- token counting ----------------------------------------------------------------------------

    def measure_tokens(self) -> None:
        text = paragraph(random.Random("tokens"), 12)  # about 230 words, an ordinary assistant answer
        enc = encoding()
        n = self.sizes.token_messages
        raw_tokens = len(enc.encode(text, disallowed_special=()))
        counted = count_message(Role.ASSISTANT, text).total
        self.report.check("tokens: count_message = raw + role + 3", counted == raw_tokens + 1 + 3,
                          f"count_message gave {counted}, raw encode {raw_tokens}")

        def with_app():
            for _ in range(n):
                count_message(Role.ASSISTANT, text)

        def with_tiktoken():
            for _ in range(n):
                enc.encode(text, disallowed_special=())

        app, raw = [], []
        with_app()
        with_tiktoken()
        for _ in range(self.sizes.reps):
            app += timed(with_app, 1, 0)
            raw += timed(with_tiktoken, 1, 0)
        self.report.figure(f"tokens: count_message ({raw_tokens}-token message)", "µs/message",
                           [s / n * 1e6 for s in app])
        self.report.figure("tokens: raw tiktoken encode, same text", "µs/message", [s / n * 1e6 for s in raw])
        self.report.figure("tokens: count_message throughput", PER_SECOND, [n / s for s in app])
        self.report.figure("tokens: count_message / raw encode", "x", [a / r for a, r in zip(app, raw, strict=True)])

    # --- HTTP --------------------------------------------------------------------------------------

    def start_server(self) -> Server:
        if self.server is None:
            self.server = self.serve("gunicorn.log")
        return self.server

    def serve(self, log_name: str, env: dict | None = None) -> Server:
        """gunicorn (4 workers on PostgreSQL, 1 on SQLite) and the background worker, started and warmed."""
        workers = 4 if self.postgres else 1
        progress(f"  starting gunicorn ctxweb.wsgi with {workers} worker(s)")
        server = Server(self.database_url, workers, self.tmp / log_name, env=env)
        server.start(self.secret)
        for i in range(4 * workers):  # every worker loads the app and the encoding before timing
            status, _, _ = call(server.port, "POST", "/api/v1/sessions/warm-up/messages",
                                json.dumps({"messages": [{"role": "user", "content": f"warm-up {i}"}]}).encode(), self.secret)
            self.report.check("api: warm-up appends answered 200", status == 200, f"warm-up: HTTP {status}")
        return server

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def api(self, method: str, path: str, body: dict | bytes | None = None) -> tuple[int, dict, float]:
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        status, data, seconds = call(self.server.port, method, "/api/v1" + path, body, self.secret)
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = {"raw": data[:500].decode(errors="replace")}
        return status, parsed, seconds

    def new_api_session(self, key: str) -> None:
        # Automatic compaction off: the figure is the append path alone, not the summarizer's work.
        status, data, _ = self.api("PUT", f"/sessions/{key}", {"compaction": {"auto": False}})
        self.report.check("api: session created", status == 201, f"PUT {key}: HTTP {status} {data}")

    def check_log(self, name: str, key: str, expected_ids: list[str]) -> None:
        """The stored raw log holds exactly the sent messages, seqs 1..N without a gap."""
        session = Session.objects.get(project=self.project, key=key)
        rows = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "client_id"))
        seqs = [seq for seq, _ in rows]
        ids = [cid for _, cid in rows]
        n = len(expected_ids)
        self.report.check(f"{name}: count equals sent", len(rows) == n, f"{key}: {len(rows)} stored, {n} sent")
        self.report.check(f"{name}: seqs gapless", seqs == list(range(1, len(rows) + 1)), f"{key}: seqs not 1..N")
        self.report.check(f"{name}: nothing lost or duplicated", sorted(ids) == sorted(expected_ids) and len(set(ids)) == len(ids),
                          f"{key}: stored ids differ from the sent ones")
        self.report.check(f"{name}: message_count", session.message_count == n,
                          f"{key}: message_count {session.message_count}, {n} sent")

    def measure_append(self) -> None:
        self.start_server()
        n, reps = self.sizes.append_messages, self.sizes.append_reps
        api_rates, orm_rates = [], []
        for rep in range(reps + 1):  # the first is the warm-up
            warmup = rep == 0
            count = min(n, 500) if warmup else n
            messages = self.corpus.api_messages(count, random.Random(f"append{rep}"), f"r{rep}")
            bodies = [json.dumps({"messages": messages[i:i + BATCH]}).encode() for i in range(0, count, BATCH)]
            key = f"append-api-{rep}"
            self.new_api_session(key)
            started = time.perf_counter()
            for body in bodies:
                status, data, _ = self.api("POST", f"/sessions/{key}/messages", body)
                if not self.report.check("append: HTTP 200", status == 200, f"HTTP {status}: {str(data)[:300]}"):
                    break
            seconds = time.perf_counter() - started
            self.check_log("append", key, [m["id"] for m in messages])
            status, data, _ = self.api("POST", f"/sessions/{key}/messages", bodies[-1])
            self.report.check("append: a retried batch stores nothing twice",
                              status == 200 and all(m["duplicate"] for m in data["messages"])
                              and Message.objects.filter(session__project=self.project, session__key=key).count() == count,
                              f"retry: HTTP {status} {str(data)[:300]}")

            # The same rows, parsed (tokens, digests) before the clock starts.
            parsed = [parse_message(m, i) for i, m in enumerate(messages)]
            call_seqs, calls = [None] * count, {}
            for i, new in enumerate(parsed):
                calls.update((call_id, i + 1) for call_id in new.call_ids)
                call_seqs[i] = calls.get(new.tool_call_id)
            session = Session.objects.create(project=self.project, key=f"append-orm-{rep}", auto_compact=False)
            started = time.perf_counter()
            for first in range(0, count, BATCH):
                with transaction.atomic():
                    Message.objects.bulk_create([
                        message_row(session, i + 1, parsed[i], call_seq=call_seqs[i])
                        for i in range(first, min(count, first + BATCH))
                    ])
            orm_seconds = time.perf_counter() - started
            self.report.check("append: bulk_create stored every row",
                              Message.objects.filter(session=session).count() == count, "bulk_create lost rows")
            if not warmup:
                api_rates.append(count / seconds)
                orm_rates.append(count / orm_seconds)
                progress(f"  run {rep}: API {count / seconds:,.0f} msg/s, bulk_create {count / orm_seconds:,.0f} msg/s")
        api = self.report.figure(f"append: HTTP API, batches of {BATCH}", PER_SECOND, api_rates)
        orm = self.report.figure(f"append: raw ORM bulk_create, batches of {BATCH}", PER_SECOND, orm_rates)
        self.report.target("append: API rate / bulk_create rate", api.median / orm.median, ">=", 0.5,
                           spec="appending through the HTTP API, batched: at least 50% of a raw ORM bulk_create")

    def measure_latency(self) -> None:
        self.start_server()
        key = "latency"
        self.new_api_session(key)
        total = self.sizes.latency_requests
        warmup = 20
        messages = self.corpus.api_messages(total + warmup, random.Random("latency"), "l")
        latencies = []
        for i, message in enumerate(messages):
            status, data, seconds = self.api("POST", f"/sessions/{key}/messages", {"messages": [message]})
            if not self.report.check("latency: HTTP 200", status == 200, f"HTTP {status}: {str(data)[:300]}"):
                break
            if i >= warmup:
                latencies.append(seconds * 1000)
        self.check_log("latency", key, [m["id"] for m in messages])
        self.report.figure("append latency, single message (all requests)", "ms", latencies)
        self.report.figure("append latency, single message p50", "ms", [percentile(latencies, 50)])
        self.report.figure("append latency, single message p99", "ms", [percentile(latencies, 99)])

    def measure_floors(self) -> None:
        from bench import floors

        floors.measure(self)

    def concurrent_run(self, key: str, clients: int, requests: int, size: int) -> tuple[float, float]:
        """`clients` processes post `requests` batches of `size` messages between them to one session
        at once; checks that nothing was lost or duplicated; returns (messages/s, p99 latency ms)."""
        self.new_api_session(key)
        bodies, sent = [], []
        for c in range(clients):
            messages = self.corpus.api_messages(requests // clients * size, random.Random(f"{key}-{c}"), f"p{c}-")
            sent += [m["id"] for m in messages]
            bodies.append([json.dumps({"messages": messages[i:i + size]}).encode() for i in range(0, len(messages), size)])
        outcomes = together(append_client, [(self.server.port, self.secret, key, bodies[c]) for c in range(clients)], 600)
        problems = [problem for o in outcomes for problem in o["problems"]]
        self.report.check("concurrent: every request answered 200", not problems, "; ".join(problems[:3]))
        self.report.check("concurrent: every message stored once",
                          sum(o["stored"] for o in outcomes) == len(sent), "stored count differs from sent")
        self.check_log("concurrent", key, sent)
        seconds = max(o["ended"] for o in outcomes) - min(o["began"] for o in outcomes)
        latencies = [s * 1000 for o in outcomes for s in o["latencies"]]
        rate, p99 = len(sent) / seconds, percentile(latencies, 99)
        progress(f"  {key}: {clients} client(s), {rate:,.0f} msg/s, p99 {p99:.1f} ms")
        return rate, p99

    def measure_concurrent(self) -> None:
        if not self.postgres:
            self.report.note("concurrent appends: skipped on SQLite (one writer at a time); run with "
                             "DATABASE_URL=postgres://... to measure them")
            return
        self.start_server()
        clients, size = 4, self.sizes.concurrent_batch
        requests = clients * self.sizes.concurrent_requests
        self.concurrent_run("concurrent-warm-up", clients, requests, size)
        single, rates, p99s = [], [], []
        for rep in range(self.sizes.concurrent_reps):
            single.append(self.concurrent_run(f"concurrent-{rep}-one", 1, requests, size)[0])
            rate, p99 = self.concurrent_run(f"concurrent-{rep}", clients, requests, size)
            rates.append(rate)
            p99s.append(p99)
        self.report.figure(f"concurrent appends: {clients} clients into one session, batches of {size}, total rate",
                           PER_SECOND, rates)
        self.report.figure(f"concurrent appends: request latency p99, {clients} clients", "ms", p99s)
        self.report.figure("concurrent appends: 1 client, same batches (for scale), rate", PER_SECOND, single)
        self.report.figure(f"concurrent appends: {clients} clients / 1 client", "x",
                           [r / s for r, s in zip(rates, single, strict=True)])

    def measure_many_apps(self) -> None:
        """Issue 42, item 5: 32 applications at once, each in its own session with the default settings
        (automatic compaction on): a turn appends 4 messages and fetches the model input (openai), against
        4 gunicorn workers and 2 task workers on PostgreSQL. Against the floor: PostgreSQL COPY of the same
        rows into the messages table from as many connections, a turn's rows a transaction. The full run
        measures both twice, alternated, in sessions of their own each time (the floor alone moved by a
        third from one run to the next): the figures are the medians, the ratio the median of each
        round's ratio to its own floor."""
        if not self.postgres:
            self.report.note("many applications: skipped on SQLite (one writer at a time); run with "
                             "DATABASE_URL=postgres://... to measure them")
            return
        clients, turns = 32, (8 if self.sizes.reps < 10 else 40)
        rounds = [self._many_apps_round(clients, turns, r) for r in range(1 if self.sizes.reps < 10 else 2)]
        self.report.figure(f"many applications: {clients} clients x {turns} turns of 4 messages + model input, "
                           "aggregate", PER_SECOND, [r.rate for r in rounds])
        self.report.figure(f"many applications: floor, PostgreSQL COPY of the same rows from {clients} connections, "
                           "a turn a transaction", PER_SECOND, [r.floor_rate for r in rounds])
        for name, kind in (("append of 4 messages", "appends"), ("model input fetch", "fetches")):
            latencies = [s * 1000 for r in rounds for s in getattr(r, kind)]
            self.report.figure(f"many applications: {name} p50", "ms", [percentile(latencies, 50)])
            self.report.figure(f"many applications: {name} p99", "ms", [percentile(latencies, 99)])
        ratio = statistics.median(r.rate / r.floor_rate for r in rounds)
        self.report.target(f"many applications: {clients} clients / COPY floor", ratio, ">=", 0.25, "x",
                           "issue 42 item 5: at least 0.25 of PostgreSQL COPY of the same rows from as many connections")

    def _many_apps_round(self, clients: int, turns: int, round_: int) -> ManyAppsRound:
        """One round of measure_many_apps, in sessions of its own, every message checked stored once."""
        from bench.floors import PhysicalFloor

        tag = f"r{round_}"
        sent, bodies, chunks = {}, [], []
        copy_rows = PhysicalFloor(self.database_url)  # only for rows(): the app's rows, prepared
        for c in range(clients):
            key = f"app-{tag}-{c}"
            messages = self.corpus.api_messages(turns * 4, random.Random(f"app-{c}"), f"a{c}-")
            sent[key] = [m["id"] for m in messages]
            bodies.append([json.dumps({"messages": messages[t * 4:t * 4 + 4]}).encode() for t in range(turns)])
            floor_session = Session.objects.create(project=self.project, key=f"copy-{tag}-{c}", auto_compact=False)
            rows = copy_rows.rows(floor_session, messages, 1)
            chunks.append([b"".join(copy_line(row) for row in rows[t * 4:t * 4 + 4]) for t in range(turns)])
        copy_rows.conn.close()
        columns = ", ".join(f'"{f.column}"' for f in copy_rows.fields)
        statement = f'COPY "{Message._meta.db_table}" ({columns}) FROM STDIN'

        server = Server(self.database_url, 4, self.tmp / "many-apps.log", task_workers=2)
        server.start(self.secret)
        try:
            for key in sent:
                status, data = call(server.port, "PUT", f"/api/v1/sessions/{key}", b"{}", self.secret)[:2]
                self.report.check("many applications: session created", status == 201, f"{key}: HTTP {status} {data[:200]!r}")
            outcomes = together(app_client, [(server.port, self.secret, key, bodies[c]) for c, key in enumerate(sent)], 900)
        finally:
            server.stop()
        problems = [problem for o in outcomes for problem in o["problems"]]
        self.report.check("many applications: every call answered 200", not problems, "; ".join(problems[:3]))
        total = sum(len(ids) for ids in sent.values())
        self.report.check("many applications: every message stored once", sum(o["stored"] for o in outcomes) == total,
                          f"{sum(o['stored'] for o in outcomes)} stored of {total}")
        for key, ids in sent.items():
            self.check_log("many applications", key, ids)
        seconds = max(o["ended"] for o in outcomes) - min(o["began"] for o in outcomes)

        floor_outcomes = together(copy_client, [(self.database_url, statement, chunks[c]) for c in range(clients)], 900)
        floor_seconds = max(o["ended"] for o in floor_outcomes) - min(o["began"] for o in floor_outcomes)
        copied = Message.objects.filter(session__project=self.project, session__key__startswith=f"copy-{tag}-").count()
        self.report.check("many applications: the COPY floor stored every row", copied == total, f"{copied} of {total}")
        progress(f"  many applications, round {round_ + 1}: {total / seconds:,.0f} messages/s, "
                 f"floor {total / floor_seconds:,.0f}")
        return ManyAppsRound(total / seconds, total / floor_seconds, [s for o in outcomes for s in o["appends"]],
                             [s for o in outcomes for s in o["fetches"]])

    def measure_compaction_backlog(self) -> None:
        """Issue 15: a session whose stored history is far over max_tokens gets automatic compaction
        turned on while a client appends one small batch after another; the background worker (a
        process of its own beside gunicorn) works the backlog off. Append latency while a run is
        running, against the appends of the same stream with none running; tokens worked off a minute."""
        from bench.backlog import report_backlog, work_off
        from sessions.models import CompactionRun
        from tests.openai_stub import OpenAIStub

        n, max_tokens, keep = self.sizes.backlog_messages, 20_000, 5_000
        built = self.build(f"backlog-{n}", count=n)
        summarizer = OpenAIStub()
        summarizer.delay = SUMMARIZER_DELAY
        summarizer.reply = "Earlier: the user asked about orders, bookings and incidents; tools were called; answers given."
        summarizer.start()
        try:
            server = self.serve("gunicorn-backlog.log", env={
                "CTXWEB_SUMMARIZER": "openai", "CTXWEB_OPENAI_BASE_URL": summarizer.base_url,
                "CTXWEB_OPENAI_API_KEY": "sk-local", "CTXWEB_OPENAI_TIMEOUT": "30",
            })
            try:
                backlog = work_off(self.project, self.secret, built.session.key, server, max_tokens=max_tokens,
                                   keep_recent_tokens=keep, seconds=self.sizes.backlog_seconds, lead=5, pause=0.05)
            finally:
                server.stop()
        finally:
            summarizer.stop()
        name = "compaction backlog"
        report_backlog(self.report, name, backlog, max_tokens)
        session = self.fresh(built)
        appended = sum(len(ack["ids"]) for ack in backlog.log["acks"])
        self.report.check(f"{name}: every appended message stored once", session.message_count == n + appended,
                          f"{session.message_count} messages, {n} stored before + {appended} appended")
        self.report.check(f"{name}: one summarizer call per completed run", len(summarizer.received) == backlog.completed,
                          f"{len(summarizer.received)} calls, {backlog.completed} completed runs")
        self.report.check(f"{name}: appends overlapped a running compaction", len(backlog.during) > 0,
                          "no append was answered while a run was running")
        left = CompactionRun.objects.filter(session=session, state__in=CompactionRun.ACTIVE).count()
        self.report.check(f"{name}: no run left queued or running", left == 0, f"{left} runs left")
        self.report.note(f"compaction backlog: {n:,} stored messages ({built.tokens:,} tokens), automatic compaction "
                         f"turned on at max_tokens {max_tokens:,}, keep_recent_tokens {keep:,}; the `openai` summarizer "
                         f"against a local endpoint answering after {SUMMARIZER_DELAY:g} s; one append of 2-4 messages "
                         "every 50 ms")

    # --- in-process --------------------------------------------------------------------------------

    def big(self) -> Built:
        """The largest session, with a checkpoint near the end, alone in its project (search corpus)."""
        n = self.sizes.model_input[-1]
        return self.build(f"mi-{n}", count=n, checkpoint="end", project=self.big_project, plant=True)

    def measure_model_input(self) -> None:
        calls, labels = {}, {}
        for n in self.sizes.model_input:
            built = self.big() if n == self.sizes.model_input[-1] else self.build(f"mi-{n}", count=n, checkpoint="end")
            session = self.fresh(built)
            model_input = build_model_input(session)
            seqs = [e.seq for e in model_input.message_entries]
            self.report.check("model input: starts after the checkpoint",
                              model_input.checkpoint is not None and seqs and min(seqs) > built.checkpoint.last_seq
                              and max(seqs) <= n, f"{n}: input seqs {seqs[:3]}…")
            self.report.check("model input: size equals the stored figure", model_input.tokens == session.input_tokens,
                              f"{n}: built {model_input.tokens} tokens, session says {session.input_tokens}")
            calls[n] = lambda s=session: build_model_input(s)
            labels[n] = f"model input: {n:,} messages ({len(seqs)} after the checkpoint)"
        samples = interleaved(calls, self.sizes.reps * 2, warmup=2)
        medians = {n: self.report.figure(labels[n], "ms", ms(samples[n])).median for n in calls}
        small, large = self.sizes.model_input[0], self.sizes.model_input[-1]
        self.report.target(f"model input: {large:,} / {small:,} messages", medians[large] / medians[small], "<=", 1.5,
                           "x", "model input for a 100,000-message session at most 1.5x a 200-message one")

    def page(self, built: Built) -> Callable[[], None]:
        """A checked first GET of the session page, and the GET to time."""
        url = reverse("session", args=[built.session.project.name, built.session.key])
        response = self.client.get(url)
        self.report.check("page: HTTP 200", response.status_code == 200, f"{url}: HTTP {response.status_code}")
        self.report.check("page: shows the newest message", f'id="m-{built.count}"'.encode() in response.content,
                          f"{url}: no #m-{built.count}")

        def get():
            if self.client.get(url).status_code != 200:
                raise RuntimeError(f"{url} stopped answering 200")

        return get

    def measure_page(self) -> None:
        small_n, large_n = self.sizes.page
        small = self.build(f"page-{small_n}", count=small_n)
        large = self.big() if large_n == self.sizes.model_input[-1] else self.build(f"page-{large_n}", count=large_n, checkpoint="end")
        bare = self.build(f"page-{large_n}-no-checkpoint", count=large_n)
        labels = {
            "small": f"session page: {small_n} messages",
            "large": f"session page: {large_n:,} messages, checkpoint near the end",
            "bare": f"session page: {large_n:,} messages, no checkpoint",
        }
        samples = interleaved({"small": self.page(small), "large": self.page(large), "bare": self.page(bare)},
                              self.sizes.reps, warmup=2)
        medians = {name: self.report.figure(labels[name], "ms", ms(samples[name])).median for name in labels}
        spec = "the session page of a 100,000-message session renders in at most 2x a 100-message one"
        self.report.target(f"session page: {large_n:,} (checkpoint near end) / {small_n}",
                           medians["large"] / medians["small"], "<=", 2, "x", spec)
        self.report.target(f"session page: {large_n:,} (no checkpoint) / {small_n}",
                           medians["bare"] / medians["small"], "<=", 2, "x", spec)

    def measure_masking(self) -> None:
        """What masking personal data costs (issue 40 item 9), on the largest session: its page for a viewer
        who sees it masked against a viewer it was revealed to (the same page, unmasked), and its model
        input over the API for a key made "masked" against the application's key. Masking is on for the
        largest session's project during this measurement only."""
        built = self.big()
        project, key = built.session.project, built.session.key
        User = get_user_model()
        clients = {}
        for name in ("bench-masked-viewer", "bench-revealed-viewer"):
            User.objects.create_user(name)
            set_member(project, name, "viewer")
            clients[name] = Client(HTTP_HOST="127.0.0.1")
            clients[name].force_login(User.objects.get(username=name))
        set_masking(project, {"enabled": True})
        reveal_to(self.fresh(built), User.objects.get(username="bench"), "bench-revealed-viewer")
        keys = {"plain": create_api_key(project, "bench-plain")[1],
                "masked": create_api_key(project, "bench-masked", masked=True)[1]}
        page_url = reverse("session", args=[project.name, key])
        input_url = f"/api/v1/sessions/{key}/model-input"

        def getter(client, url, masked: bool, **headers):
            response = client.get(url, **headers)
            self.report.check("masking: HTTP 200", response.status_code == 200, f"{url}: HTTP {response.status_code}")
            self.report.check("masking: masked exactly when it should be",
                              response.has_header("X-Personal-Data") == masked, f"{url}: masked={not masked}")

            def get():
                if client.get(url, **headers).status_code != 200:
                    raise RuntimeError(f"{url} stopped answering 200")

            return get

        api = Client(HTTP_HOST="127.0.0.1")
        calls = {
            "page": getter(clients["bench-revealed-viewer"], page_url, False),
            "page masked": getter(clients["bench-masked-viewer"], page_url, True),
            "input": getter(api, input_url, False, HTTP_AUTHORIZATION=f"Bearer {keys['plain']}"),
            "input masked": getter(api, input_url, True, HTTP_AUTHORIZATION=f"Bearer {keys['masked']}"),
        }
        n = built.count
        labels = {"page": f"session page: {n:,} messages, as a viewer, unmasked",
                  "page masked": f"session page: {n:,} messages, as a viewer, masked",
                  "input": f"model input over the API: {n:,} messages, the application's key",
                  "input masked": f"model input over the API: {n:,} messages, a masked key"}
        try:
            samples = interleaved(calls, self.sizes.reps, warmup=2)
            medians = {name: self.report.figure(labels[name], "ms", ms(samples[name])).median for name in calls}
            for what in ("page", "input"):
                self.report.figure(f"masking: {labels[what].split(':')[0]}, masked / unmasked", "x",
                                   [medians[f"{what} masked"] / medians[what]])
        finally:
            set_masking(project, {"enabled": False})

    def measure_context_check(self) -> None:
        """A context check (issue 41 item 5): a 1,000-turn conversation replayed message by message through
        the extractive summarizer's compaction, on a scratch copy, with a value pinned in its fourth turn."""
        messages = []
        for n in range(1000):
            planted = " My booking reference is QX7T2M." if n == 3 else ""
            messages += [{"role": "user", "content": f"Turn {n}: where is my parcel?{planted} " + "detail " * 20},
                         {"role": "assistant", "content": f"Answer {n}: on its way. " + "words " * 20}]
        settings = CheckSettings(max_tokens=4000, keep_recent_tokens=1000, expect=["QX7T2M"],
                                 pinned_facts=[{"name": "booking", "pattern": "[A-Z0-9]{6}"}])
        reports = []

        def run():
            reports.append(check_messages("bench", messages, settings))

        samples = timed(run, max(3, self.sizes.reps // 5), warmup=1)
        last = reports[-1]
        self.report.check("context check: the pinned value survives", last.passed and last.checkpoints > 10,
                          f"{last.as_dict()['facts'][:2]}, {last.checkpoints} checkpoints")
        self.report.figure(f"context check: 1,000 turns ({last.messages:,} messages, {last.checkpoints} checkpoints)",
                           "ms", ms(samples))

    def build_long(self, key: str, count: int, every_tokens: int = 100_000) -> Built:
        """A session of `count` messages with the checkpoints automatic compaction would have made on the
        way: one each time `every_tokens` more were stored, covering up to the turn about 50 messages back
        (each extends the one before), and the planted sentence in the middle turn. Stored a chunk at a
        time, so building a million messages holds one chunk in memory. In a project of its own, so a
        search across the project searches this session."""
        started = time.perf_counter()
        project = Project.objects.create(name=f"bench-{key}")
        session = Session.objects.create(
            project=project, key=key, title=f"benchmark {key}", instructions=INSTRUCTIONS,
            instructions_tokens=count_message(Role.SYSTEM, INSTRUCTIONS).total, auto_compact=False)
        stream = self.corpus.conversation(random.Random(key))
        origin = timezone.now() - timedelta(days=30)
        middle = count // 2
        rows, events, cuts, turn_starts, planted_seq = [], [], [], [], None
        raw = since_cut = batch_tokens = 0
        cumulative = [0]  # tokens of messages 1..n, for each cut's replaced_tokens

        def flush():
            with transaction.atomic():
                Message.objects.bulk_create(rows, batch_size=2000)
                Event.objects.bulk_create(events, batch_size=2000)
            rows.clear()
            events.clear()

        for c in stream:
            if c.n > count:
                break
            if c.turn_start:
                turn_starts = [*turn_starts[-40:], c.n]
                if since_cut >= every_tokens:
                    cut = next(s for s in reversed(turn_starts) if s <= c.n - 50) - 1
                    if cut > (cuts[-1][0] if cuts else 0):
                        cuts.append((cut, c.n - 1, cumulative[cut] if cut < len(cumulative) else raw))
                        since_cut = raw - cumulative[cut]
            row = concrete_row(session, c, origin)
            tokens = row.tokens
            if planted_seq is None and c.turn_start and c.n >= middle:
                planted_seq = c.n
                tokens = plant_text(row, PLANTED)
            rows.append(row)
            raw += tokens
            since_cut += tokens
            batch_tokens += tokens
            cumulative.append(raw)
            if c.n % BATCH == 0 or c.n == count:
                events.append(Event(session=session, type=EventType.MESSAGES_APPENDED, actor="api:bench",
                                    created_at=origin + timedelta(seconds=c.n),
                                    data={"count": BATCH, "first_seq": c.n - BATCH + 1, "last_seq": c.n,
                                          "tokens": batch_tokens, "input_tokens": raw, "duplicates": 0}))
                batch_tokens = 0
            if len(rows) >= 20_000:
                flush()
        flush()
        n = min(count, len(cumulative) - 1)
        previous = None
        with transaction.atomic():
            for number, (cut, made_at, replaced) in enumerate(cuts, start=1):
                summary = paragraph(random.Random(f"{key}-{number}"), 12)
                previous = Checkpoint.objects.create(
                    session=session, previous=previous, number=number, summary=summary,
                    first_seq=previous.last_seq + 1 if previous else 1, last_seq=cut, created_at_seq=made_at,
                    summary_tokens=summary_message_tokens(summary, cut), replaced_tokens=replaced, tokens_before=replaced,
                    summarizer="extractive", trigger="auto")
            session.message_count, session.raw_tokens = n, raw
            session.last_activity_at = origin + timedelta(seconds=n)
            session.checkpoint_count = len(cuts)
            session.save()
            refresh_input_tokens(session)
        built_in = time.perf_counter() - started
        # What the task queue does once appends fill a block of messages (sessions/store/trace_blocks.py);
        # stored here a chunk at a time, so indexed once at the end.
        started = time.perf_counter()
        blocks = index_session(session.pk)
        indexed_in = time.perf_counter() - started
        self.report.figure(f"scale: trace blocks of {n:,} messages, written in", "s", [indexed_in])
        self.analyze()
        built = Built(session, n, raw, previous, planted_seq)
        progress(f"  built {key}: {n:,} messages, {raw:,} tokens, {len(cuts):,} checkpoints "
                 f"in {built_in:.1f} s; its {blocks:,} trace blocks in {indexed_in:.1f} s")
        return built

    def measure_scale(self) -> None:
        """Issue 42, item 3: what a member does with one session, at the small size and at the large one
        (a million messages in the full run), each large figure at most 2x the small one."""
        from sessions.context.exports import export_response
        from sessions.context.trace import trace

        small_n, large_n = self.sizes.scale
        sessions = {n: self.build_long(f"scale-{n}", n) for n in (small_n, large_n)}
        for n, built in sessions.items():
            self.report.check(f"scale: {n:,} messages have checkpoints on the way",
                              built.checkpoint is not None and built.checkpoint.number >= (2 if n > 10_000 else 1),
                              f"{n}: {built.checkpoint.number if built.checkpoint else 0} checkpoints")

        def operations(built: Built) -> dict[str, Callable[[], object]]:
            session = self.fresh(built)
            middle = built.count // 2
            page = reverse("session", args=[session.project.name, session.key])

            def get(url):
                def call():
                    response = self.client.get(url)
                    if response.status_code != 200:
                        raise RuntimeError(f"{url}: HTTP {response.status_code}")
                return call

            def traced():
                found = trace(session, "zanzibar quokka")
                if [row.seq for row in found.rows] != [built.planted_seq]:
                    raise RuntimeError(f"trace found {[row.seq for row in found.rows]}, not #{built.planted_seq}")

            def searched():
                hits = search_messages("zanzibar quokka", SearchFilters([session.project_id]))
                if [hit.message.seq for hit in hits] != [built.planted_seq]:
                    raise RuntimeError(f"search found {[hit.message.seq for hit in hits]}")

            def exported():  # the first thousand messages of the JSON Lines download, streamed
                lines = 0
                for chunk in export_response(session, "jsonl").streaming_content:
                    lines += chunk.count(b"\n")
                    if lines >= 1000:
                        return
                raise RuntimeError(f"the export ended after {lines} lines")

            return {
                "session page": get(page),
                "model input": lambda: build_model_input(session),
                "session page as of the middle message": get(f"{page}?as_of={middle}"),
                "model input as of the middle message": lambda: build_model_input(session, as_of=middle),
                "trace a sentence said once": traced,
                "the session page with that trace": get(f"{page}?trace=zanzibar+quokka"),
                "search the project for it": searched,
                "export: the first 1,000 messages streamed": exported,
            }

        small, large = operations(sessions[small_n]), operations(sessions[large_n])
        for name in small:
            samples = interleaved({"small": small[name], "large": large[name]}, self.sizes.reps, warmup=1)
            a = self.report.figure(f"scale: {name}, {small_n:,} messages", "ms", ms(samples["small"])).median
            b = self.report.figure(f"scale: {name}, {large_n:,} messages", "ms", ms(samples["large"])).median
            self.report.target(f"scale: {name}, {large_n:,} / {small_n:,} messages", b / a, "<=", 2, "x",
                               "issue 42 item 3: at most 2x its time at 1,000 messages")
        # Memory, apart from the times (tracing allocations slows every call down): the most Python memory
        # one call holds at once, above what was held before it, at each size.
        for name in small:
            a, b = peak_mb(small[name]), peak_mb(large[name])
            self.report.figure(f"scale: {name}, peak Python memory, {small_n:,} messages", "MB", [a])
            self.report.figure(f"scale: {name}, peak Python memory, {large_n:,} messages", "MB", [b])
            self.report.target(f"scale: {name}, peak Python memory, {large_n:,} / {small_n:,} messages", b / a,
                               "<=", 2, "x", "issue 42 item 3: memory bounded, not growing with the session")

    def measure_project(self) -> None:
        """Issue 42, item 4: a project of 100,000 sessions and 10,000,000 messages (bench/project_scale.py)."""
        from bench import project_scale

        project_scale.measure(self)

    def measure_search(self) -> None:
        built = self.big()
        filters = SearchFilters(project_ids=[self.big_project.pk])
        total = Message.objects.count()
        hits = search_messages("quokka zanzibar", filters)
        self.report.check("search: finds the planted message first",
                          bool(hits) and hits[0].message.seq == built.planted_seq and hits[0].message.session_id == built.session.pk,
                          f"hits {[(h.message.session_id, h.message.seq) for h in hits[:3]]}, planted #{built.planted_seq}")
        common = search_messages("weather forecast", filters)
        self.report.check("search: a common query finds messages", len(common) > 0, "no hits for 'weather forecast'")
        for query in ("最新", "予約番号を確認"):
            found = search_messages(query, filters)
            self.report.check(f"search: finds '{query}' inside the planted Japanese sentence",
                              [h.message.text for h in found] == [PLANTED_UNSPACED], f"{len(found)} hits")
        size, per = self.search_index_size()
        self.report.note(f"search: the full-text index ({per}) takes {size / 2**20:,.1f} MiB for the {total:,} "
                         f"messages of the database, {size / max(1, total):,.0f} bytes a message")
        worst = 0.0
        for query, label in (("quokka zanzibar", "rare terms"), ("weather forecast", "common terms"),
                             ("database timeout", "common terms, 2"), ("最新", "two Japanese characters"),
                             ("予約番号を確認", "a Japanese phrase")):
            samples = ms(timed(lambda q=query: search_messages(q, filters), self.sizes.reps, warmup=1))
            worst = max(worst, self.report.figure(
                f"search: {label} '{query}' over {built.count:,} messages", "ms", samples).median)
        if total > built.count:
            self.report.note(f"search runs in a project of {built.count:,} messages; the database holds {total:,}")
        self.report.target("search: slowest query (median)", worst, "<", 500, " ms",
                           "search across transcripts: well under a second (read here as < 500 ms)")

    def search_index_size(self) -> tuple[int, str]:
        """The full-text index's size in bytes, and what it is made of on this database."""
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute("SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'ctx_message_fts%'")
                return cursor.fetchone()[0] or 0, "the FTS5 table's own tables"
            # The index of each partition (migration 0032): the partitioned index itself holds nothing.
            cursor.execute("SELECT (SELECT SUM(pg_relation_size(relid)) FROM pg_partition_tree('message_search_vector')), "
                           "(SELECT SUM(pg_column_size(search_vector)) FROM ctx_sessions_message)")
            index, column = cursor.fetchone()
            return int(index or 0) + int(column or 0), "the GIN index and the stored tsvector column"

    def measure_plan(self) -> None:
        built = self.build("plan", tokens_after_head=self.sizes.plan_tokens, checkpoint="head")
        session = self.fresh(built)
        after = built.tokens - built.checkpoint.replaced_tokens
        compaction = resolve_settings(session)
        plan = plan_compaction(session, compaction)
        visible = plan.tokens_before - session.instructions_tokens - built.checkpoint.summary_tokens - 3
        self.report.check("plan: measures the stored input size", plan.tokens_before == session.input_tokens,
                          f"plan says {plan.tokens_before}, session {session.input_tokens}")
        self.report.check("plan: covers something", plan.last_seq is not None and plan.first_seq == built.checkpoint.last_seq + 1,
                          f"plan {plan.first_seq}..{plan.last_seq}")
        self.report.check("plan: covered + kept = everything after the checkpoint",
                          plan.covered_tokens + plan.kept_tokens == visible,
                          f"{plan.covered_tokens} + {plan.kept_tokens} != {visible}")

        def run():
            plan_compaction(session, resolve_settings(session))

        samples = ms(timed(run, self.sizes.reps, warmup=2))
        self.report.figure(f"compaction plan: {after:,} tokens, {built.count - built.checkpoint.last_seq:,} messages "
                           "after the checkpoint", "ms", samples)
        self.report.target(f"compaction plan over {after / 1e6:.1f}M stored tokens", statistics.median(samples), "<", 100,
                           " ms", "planning a compaction over 1,000,000 stored tokens takes under 100 ms")

        # What a run plans: the same, cut to the run budget, whose bytes the database measures.
        budget = RunBudget.from_settings()
        budgeted = plan_compaction(session, compaction, budget=budget)
        self.report.check("plan: a run covers at most its budget (the bench's turns are small)",
                          0 < budgeted.covered_tokens <= budget.tokens and budgeted.covered_bytes <= budget.bytes,
                          f"{budgeted.covered_tokens} tokens, {budgeted.covered_bytes} bytes")

        def run_budgeted():
            plan_compaction(session, resolve_settings(session), budget=RunBudget.from_settings())

        samples = ms(timed(run_budgeted, self.sizes.reps, warmup=2))
        self.report.figure(f"compaction plan within the run budget ({budget.tokens:,} tokens, {budget.bytes:,} bytes)",
                           "ms", samples)
        self.report.target(f"compaction plan within the run budget over {after / 1e6:.1f}M stored tokens",
                           statistics.median(samples), "<", 100, " ms",
                           "planning a compaction over 1,000,000 stored tokens takes under 100 ms")

    def measure_import(self) -> None:
        from bench import imports

        imports.measure(self)

    def measure_list(self) -> None:
        project = Project.objects.create(name="bench-list", title="benchmark: many sessions")
        n = self.sizes.list_sessions
        started = time.perf_counter()
        now = timezone.now()
        rng = random.Random("list")
        rows = []
        for i in range(n):
            messages = rng.randint(1, 400)
            raw = messages * rng.randint(40, 160)
            rows.append(Session(
                project=project, key=f"list-{i:05d}", title=sentence(rng, 2, 6), metadata={"customer": f"c{i % 97}"},
                message_count=messages, raw_tokens=raw, input_tokens=min(raw, rng.randint(1000, 120_000)),
                checkpoint_count=rng.randint(0, 3), failed_compactions=int(i % 50 == 0),
                created_at=now - timedelta(minutes=i + 5), last_activity_at=now - timedelta(minutes=i),
                updated_at=now - timedelta(minutes=i),
            ))
        Session.objects.bulk_create(rows, batch_size=2000)
        tags = [Tag.objects.create(project=project, name=name) for name in ("needs-review", "bug", "vip")]
        ids = list(Session.objects.filter(project=project).values_list("pk", flat=True))
        Session.tags.through.objects.bulk_create(
            [Session.tags.through(session_id=pk, tag_id=tags[i % 3].pk) for i, pk in enumerate(ids) if i % 7 == 0],
            batch_size=2000,
        )
        self.analyze()
        progress(f"  built {n:,} sessions in {time.perf_counter() - started:.1f} s")
        queries = {}
        for size in self.sizes.list_sizes:
            url = reverse("sessions") + f"?size={size}"
            with CaptureQueriesContext(connection) as captured:
                response = self.client.get(url)
            queries[size] = len(captured.captured_queries)
            shown = response.content.count(b'class="key"')
            self.report.check("list: HTTP 200", response.status_code == 200, f"{url}: HTTP {response.status_code}")
            self.report.check("list: page shows as many rows as asked", shown == size, f"{url}: {shown} rows")
            samples = ms(timed(lambda u=url: self.client.get(u), self.sizes.reps, warmup=1))
            self.report.figure(f"sessions list: {n:,} sessions, page of {size}", "ms", samples)
            self.report.figure(f"sessions list: queries, page of {size}", "queries", [queries[size]])
        small, large = self.sizes.list_sizes
        self.report.target(f"sessions list: queries at {large} - at {small}", queries[large] - queries[small], "==", 0,
                           spec="the sessions list issues a constant number of queries whatever the page size")
        self.report.check("list: query count does not grow with the page size", queries[large] == queries[small],
                          f"{queries[small]} queries at {small} rows, {queries[large]} at {large}")
