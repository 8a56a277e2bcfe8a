"""Issue 42, item 4: a project of many sessions on PostgreSQL (10,000,000 messages in 100,000 sessions in
the full run): the sessions list with each of its filters, search across the project, and the
lost-facts filter, each at p50 and p99 against 300 ms and 1 s; what the database holds per million
messages.

The project is stored the fast way a bulk loader would, and the product reads it as it is:
- TEMPLATES conversations of 20 to 180 messages are made once by the app's own parser
  (bench.measures.Corpus, rows as sessions/ingest/append.py stores them) in a project of their own;
- the project's sessions are copied in (COPY), each with its own title, metadata and figures;
- each session's messages are its template's, copied by the database itself (INSERT ... SELECT, two
  connections at once), so the full-text column is computed by PostgreSQL as on any insert;
- each session gets one message of its own ("order R000123 for customer c0421"), so a search can find
  one session among all of them; checkpoints (a share with facts lost), tags, reviews and notes are
  copied in.
Then ANALYZE, as autovacuum would have run long before anyone reads the project.
"""

import random
import statistics
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

import psycopg
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from psycopg.types.json import Jsonb

from bench.measures import INSTRUCTIONS, concrete_row, paragraph, sentence
from bench.report import percentile, progress
from sessions.access.api_keys import create_api_key
from sessions.access.members import set_member
from sessions.context.model_input import summary_message_tokens
from sessions.models import Checkpoint, Message, Note, Project, Review, Role, Session, Tag
from sessions.wire.tokens import count_message
from sessions.wire.validation import parse_message

TEMPLATES = 48
SESSIONS_A_STATEMENT = 1000
CUSTOMERS = 997
P50_TARGET_MS, P99_TARGET_MS = 300, 1000


@dataclass
class Template:
    session_id: int
    count: int
    tokens: list[int]  # cumulative: tokens[n] is the tokens of messages 1..n
    turn_starts: list[int]


def reference(i: int) -> str:
    return f"R{i:06d}"


def customer(i: int) -> str:
    return f"c{i % CUSTOMERS:04d}"


def own_message(i: int) -> dict:
    return {"role": "user", "id": f"own-{i}",
            "content": f"Please check order {reference(i)} for customer {customer(i)}: the refund has not arrived."}


class ProjectBuilder:
    def __init__(self, bench, sessions: int):
        self.bench = bench
        self.count = sessions
        self.rng = random.Random("project")
        self.now = timezone.now()

    # --- the pieces -----------------------------------------------------------------------------

    def templates(self) -> list[Template]:
        project = Project.objects.create(name="bench-project-templates", title="benchmark: conversations copied")
        made = []
        for t in range(TEMPLATES):
            rng = random.Random(f"template-{t}")
            wanted = rng.randint(20, 180)
            session = Session.objects.create(project=project, key=f"template-{t}", auto_compact=False)
            rows, cumulative, starts = [], [0], []
            for c in self.bench.corpus.conversation(rng):
                if c.turn_start and c.n > wanted:
                    break  # a template ends at a turn boundary: every tool call answered
                row = concrete_row(session, c, self.now)
                rows.append(row)
                cumulative.append(cumulative[-1] + row.tokens)
                if c.turn_start:
                    starts.append(c.n)
            Message.objects.bulk_create(rows, batch_size=2000)
            made.append(Template(session.pk, len(rows), cumulative, starts))
        return made

    def session_rows(self, project: Project, templates: list[Template]) -> tuple[list[tuple], dict]:
        """The sessions' rows (COPY) and, by session number, its template and checkpoint plan."""
        fields = [f for f in Session._meta.concrete_fields if not f.primary_key]
        instructions_tokens = count_message(Role.SYSTEM, INSTRUCTIONS).total
        own_tokens = {i: parse_message(own_message(i)).tokens for i in range(self.count)}
        plans, rows = {}, []
        rng = self.rng
        for i in range(self.count):
            template = templates[i % TEMPLATES]
            count = template.count + 1
            raw = template.tokens[-1] + own_tokens[i]
            # 40% of the sessions long enough have one or two checkpoints, each ending before a turn.
            cuts = []
            if template.count >= 40 and rng.random() < 0.4:
                starts = [s - 1 for s in template.turn_starts if 10 <= s - 1 <= template.count - 10]
                cuts = sorted(rng.sample(starts, min(len(starts), rng.choice((1, 2)))))
            summary_tokens = summary_message_tokens(SUMMARIES[i % len(SUMMARIES)], cuts[-1]) if cuts else 0
            last = cuts[-1] if cuts else 0
            plans[i] = (template, cuts, summary_tokens)
            active = self.now - timedelta(minutes=i * 1.3 + rng.random())
            values = {
                "project_id": project.pk, "key": f"s-{i:06d}",
                "title": f"{sentence(rng, 2, 6).rstrip('.')} ({customer(i)})",
                "metadata": Jsonb({"customer": customer(i), "env": ("prod", "staging", "dev")[i % 3],
                                   "reward": round(rng.random(), 3), "model": ("gpt-4o", "claude", "llama")[i % 3]}),
                "instructions": INSTRUCTIONS, "instructions_tokens": instructions_tokens,
                "max_tokens": None, "keep_recent_tokens": None, "auto_compact": False, "summarizer": "",
                "pinned_facts": Jsonb([]),
                "created_at": active - timedelta(minutes=count), "updated_at": active, "last_activity_at": active,
                "message_count": count, "raw_tokens": raw,
                "input_tokens": instructions_tokens + summary_tokens + raw - template.tokens[last],
                "input_messages": count - last, "input_left_out": Jsonb([]),
                "checkpoint_last_seq": last, "checkpoint_count": len(cuts),
                "failed_compactions": int(i % 50 == 7),
                "import_source": "export.jsonl" if i % 10 == 3 else "", "written_by_application": False,
                "being_imported": False, "request_count": 3 if i % 20 == 5 else 0,
                "pinned_key": "", "pinned_through": 0, "pinned_lost": int(i % 100 == 11),
            }
            rows.append(tuple(values[f.attname] for f in fields))
        return rows, plans

    def copy(self, model_or_table, columns: list[str], rows) -> None:
        table = model_or_table if isinstance(model_or_table, str) else model_or_table._meta.db_table
        with connection.cursor() as cursor:
            quoted = ", ".join(f'"{c}"' for c in columns)
            with cursor.cursor.copy(f'COPY "{table}" ({quoted}) FROM STDIN') as copy:
                for row in rows:
                    copy.write_row(row)

    def copy_messages(self, database_url: str, ids: list[int]) -> None:
        """Each session's template messages, copied by the database, SESSIONS_A_STATEMENT sessions a
        statement, on two connections."""
        fields = [f.column for f in Message._meta.concrete_fields if not f.primary_key]
        columns = ", ".join(f'"{c}"' for c in fields)
        chosen = ", ".join("s.created_at + m.seq * interval '20 seconds'" if c == "created_at"
                           else "map.session_id" if c == "session_id" else f'm."{c}"' for c in fields)
        statement = (f'INSERT INTO "ctx_sessions_message" ({columns}) SELECT {chosen} '
                     f'FROM bench_session_template map JOIN "ctx_sessions_message" m ON m.session_id = map.template_id '
                     f'JOIN "ctx_sessions_session" s ON s.id = map.session_id '
                     f'WHERE map.session_id >= %s AND map.session_id <= %s')
        chunks = [ids[k:k + SESSIONS_A_STATEMENT] for k in range(0, len(ids), SESSIONS_A_STATEMENT)]
        failures = []

        def work(part):
            try:
                with psycopg.connect(database_url, autocommit=True) as conn:
                    for chunk in part:
                        conn.execute(statement, (chunk[0], chunk[-1]))
            except Exception as exc:  # noqa: BLE001 - reported below, in this thread's caller
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(chunks[k::2],)) for k in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]

    def build(self) -> Project:
        started = time.perf_counter()
        templates = self.templates()
        project = Project.objects.create(name="bench-project", title="benchmark: a project of many sessions")
        rows, plans = self.session_rows(project, templates)
        fields = [f.column for f in Session._meta.concrete_fields if not f.primary_key]
        self.copy(Session, fields, rows)
        ids = dict(Session.objects.filter(project=project).values_list("key", "pk"))
        session_of = {i: ids[f"s-{i:06d}"] for i in range(self.count)}
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS bench_session_template")
            cursor.execute("CREATE UNLOGGED TABLE bench_session_template (session_id bigint PRIMARY KEY, template_id bigint)")
        self.copy("bench_session_template", ["session_id", "template_id"],
                  ((session_of[i], plans[i][0].session_id) for i in range(self.count)))
        progress(f"  {self.count:,} sessions copied in {time.perf_counter() - started:.1f} s")
        copied = time.perf_counter()
        self.copy_messages(self.bench.database_url, sorted(session_of.values()))
        progress(f"  their template messages copied in {time.perf_counter() - copied:.1f} s")
        self.own_messages(session_of, plans)
        self.checkpoints(session_of, plans)
        self.annotations(project, session_of)
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE bench_session_template")
            cursor.execute("ANALYZE")
        self.seconds = time.perf_counter() - started
        return project

    def own_messages(self, session_of: dict, plans: dict) -> None:
        fields = [f for f in Message._meta.concrete_fields if not f.primary_key]
        from bench.measures import message_row

        def rows():
            for i, pk in session_of.items():
                template = plans[i][0]
                new = parse_message(own_message(i))
                row = message_row(Session(pk=pk), template.count + 1, new, client_id=f"own-{i}",
                                  created_at=self.now - timedelta(minutes=i * 1.3))
                yield tuple(f.get_db_prep_save(getattr(row, f.attname), connection) for f in fields)

        self.copy(Message, [f.column for f in fields], rows())

    def checkpoints(self, session_of: dict, plans: dict) -> None:
        fields = [f for f in Checkpoint._meta.concrete_fields if not f.primary_key]
        columns = [f.column for f in fields]
        made: dict[int, int] = {}
        for number in (1, 2):
            rows = []
            for i, pk in session_of.items():
                template, cuts, _ = plans[i]
                if len(cuts) < number:
                    continue
                cut = cuts[number - 1]
                first = cuts[number - 2] + 1 if number == 2 else 1
                summary = SUMMARIES[i % len(SUMMARIES)]
                latest = number == len(cuts)
                lost = latest and i % 3 == 0  # a third of the latest summaries lost facts
                values = {
                    "session_id": pk, "previous_id": made.get(pk), "summary": summary, "first_seq": first,
                    "last_seq": cut, "created_at_seq": min(template.count, cut + 8), "number": number,
                    "summary_tokens": summary_message_tokens(summary, cut),
                    "replaced_tokens": template.tokens[cut], "tokens_before": template.tokens[cut],
                    "tokens_after": 0, "summarizer": "extractive", "trigger": "auto",
                    "created_at": self.now - timedelta(minutes=i * 1.3 + 1), "facts_kept": 4,
                    "facts_lost": 2 if lost else 0,
                    "lost_facts": Jsonb([{"text": f"INV-{i}-{k}", "kind": "identifier", "count": 1, "seqs": [first]}
                                         for k in range(2)] if lost else []),
                }
                rows.append(tuple(values[f.attname] for f in fields))
            self.copy(Checkpoint, columns, rows)
            made = dict(Checkpoint.objects.filter(session_id__in=session_of.values(), number=number)
                        .values_list("session_id", "pk"))

    def annotations(self, project: Project, session_of: dict) -> None:
        tags = {name: Tag.objects.create(project=project, name=name).pk for name in ("needs-review", "bug", "vip")}
        through = Session.tags.through
        names = list(tags)
        self.copy(through, ["session_id", "tag_id"],
                  ((pk, tags[names[i % 3]]) for i, pk in session_of.items() if i % 7 == 0))
        review_fields = ["session_id", "reviewer", "verdict", "labels", "score", "comment", "seqs", "created_at"]
        verdicts = ("ok", "ok", "problem", "unsure")
        self.copy(Review, review_fields, (
            (pk, "user:bench", verdicts[i % 4], Jsonb([]), 1 + i % 5, f"Checked {reference(i)}.", Jsonb([1]),
             self.now - timedelta(minutes=i)) for i, pk in session_of.items() if i % 20 == 1))
        self.copy(Note, ["session_id", "seq", "text", "created_at", "updated_at"], (
            (pk, 1, f"Customer {customer(i)} called back about {reference(i)}.", self.now, self.now)
            for i, pk in session_of.items() if i % 50 == 9))


SUMMARIES = [paragraph(random.Random(f"summary-{k}"), 6) for k in range(16)]


def database_size() -> tuple[int, int, int]:
    """Bytes of the messages table (its partitions), of its indexes, and of the whole database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(pg_table_size(relid)), 0), COALESCE(SUM(pg_indexes_size(relid)), 0) "
            "FROM pg_partition_tree('ctx_sessions_message')")
        table, indexes = cursor.fetchone()
        cursor.execute("SELECT pg_database_size(current_database())")
        return int(table), int(indexes), int(cursor.fetchone()[0])


def measure(bench) -> None:
    report = bench.report
    if not bench.postgres:
        report.note("project: PostgreSQL only (issue 42 item 4); skipped on SQLite")
        return
    sessions = bench.sizes.project_sessions
    builder = ProjectBuilder(bench, sessions)
    project = builder.build()
    messages = Message.objects.filter(session__project=project).count()
    report.check("project: every session has its messages", messages == sum(
        Session.objects.filter(project=project).values_list("message_count", flat=True)),
        f"{messages:,} messages stored")
    progress(f"  built {sessions:,} sessions, {messages:,} messages in {builder.seconds:.1f} s")
    report.figure(f"project: {sessions:,} sessions, {messages:,} messages, stored in", "s", [builder.seconds])
    table, indexes, whole = database_size()
    per_million = 1_000_000 / max(messages, 1) / 2**20
    report.figure("project: messages table per million messages", "MB", [table * per_million])
    report.figure("project: its indexes per million messages", "MB", [indexes * per_million])
    report.figure("project: the whole database per million messages", "MB", [whole * per_million])

    username = "project-viewer"
    get_user_model().objects.create_user(username, f"{username}@example.com", None)
    set_member(project, username, "viewer")
    viewer = Client(HTTP_HOST="127.0.0.1")
    viewer.force_login(get_user_model().objects.get(username=username))
    _, secret = create_api_key(project, "project-bench")
    api = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {secret}")
    middle = sessions // 2
    day = (timezone.localdate() - timedelta(days=max(1, sessions * 1.3 / 1440 / 2))).isoformat()
    listed = reverse("sessions")
    asks = {
        "sessions list, no filter": (viewer, listed, {}),
        "sessions list, page 40": (viewer, listed, {"page": 40}),
        "sessions list, q = one session's order reference": (viewer, listed, {"q": reference(middle)}),
        "sessions list, q = a customer id (metadata, titles, messages)": (viewer, listed, {"q": customer(middle)}),
        "sessions list, q = a word in every session": (viewer, listed, {"q": "refund"}),
        "sessions list, tag": (viewer, listed, {"tag": "vip"}),
        "sessions list, has checkpoints": (viewer, listed, {"has_checkpoints": "on"}),
        "sessions list, had a failed compaction": (viewer, listed, {"failed": "on"}),
        "sessions list, latest summary lost facts": (viewer, listed, {"lost_facts": "on"}),
        "sessions list, pinned fact lost": (viewer, listed, {"pinned_lost": "on"}),
        "sessions list, active from a day": (viewer, listed, {"from": day}),
        "sessions list, active to a day": (viewer, listed, {"to": day}),
        "sessions list, metadata key:value": (viewer, listed, {"meta": "env:staging"}),
        "sessions list, metadata key>number": (viewer, listed, {"meta": "reward>0.99"}),
        "sessions list, source = recorded requests": (viewer, listed, {"source": "requests"}),
        "sessions list, source = imports": (viewer, listed, {"source": "import"}),
        "sessions list, reviewed": (viewer, listed, {"reviewed": "yes"}),
        "sessions list, not reviewed": (viewer, listed, {"reviewed": "no"}),
        "sessions list, latest verdict problem": (viewer, listed, {"verdict": "problem"}),
        "sessions list, sorted by tokens": (viewer, listed, {"sort": "tokens"}),
        "sessions list, sorted by a metadata number": (viewer, listed, {"sort": "meta:reward"}),
        "API sessions list": (api, "/api/v1/sessions", {}),
        "API sessions list, q = one session's order reference": (api, "/api/v1/sessions", {"q": reference(middle)}),
        "API sessions list, lost facts": (api, "/api/v1/sessions", {"lost_facts": "true"}),
        "API sessions list, pinned fact lost": (api, "/api/v1/sessions", {"pinned_lost": "true"}),
        "search the project: one session's order reference": (viewer, reverse("search"), {"q": reference(middle)}),
        "search the project: a customer id": (viewer, reverse("search"), {"q": customer(middle)}),
        "search the project: a word in every session": (viewer, reverse("search"), {"q": "refund"}),
        "search the project: two common words": (viewer, reverse("search"), {"q": "database timeout"}),
        "search the project: a phrase": (viewer, reverse("search"), {"q": '"the refund has not arrived"'}),
    }
    reps = bench.sizes.project_reps
    for name, (client, path, params) in asks.items():
        url = f"{path}?{urlencode(params)}" if params else path
        response = client.get(url)
        if not report.check(f"project: {name}: HTTP 200", response.status_code == 200,
                            f"{url}: HTTP {response.status_code}"):
            continue
        samples, statuses = [], set()
        for _ in range(reps):
            began = time.perf_counter()
            statuses.add(client.get(url).status_code)
            samples.append((time.perf_counter() - began) * 1000)
        report.check(f"project: {name}: every timed request HTTP 200", statuses == {200}, f"{url}: HTTP {statuses}")
        p50, p99 = statistics.median(samples), percentile(samples, 99)
        report.figure(f"project: {name}, p50", "ms", [p50])
        report.figure(f"project: {name}, p99", "ms", [p99])
        report.target(f"project: {name}, p50", p50, "<", P50_TARGET_MS, " ms", "issue 42 item 4: p50 under 300 ms")
        report.target(f"project: {name}, p99", p99, "<", P99_TARGET_MS, " ms", "issue 42 item 4: p99 under 1 s")
    found = viewer.get(f"{listed}?{urlencode({'q': reference(middle)})}").content.decode()
    report.check("project: the order reference finds its one session", f"s-{middle:06d}" in found
                 and found.count('class="key"') == 1, "the list does not show exactly that session")
