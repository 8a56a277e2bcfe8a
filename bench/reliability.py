"""Reliability runs (issue 9): `python -m bench.reliability [--quick] [--only kill,load] [--keep]`.

On PostgreSQL, against gunicorn on 127.0.0.1, over real HTTP, in a database of its own
(ctxweb_reliability, created and dropped here on the server of DATABASE_URL, by default
postgres://postgres@127.0.0.1:5432/postgres):

- kill: writers stream batches while the whole server (master and workers) is SIGKILLed again and
  again and restarted; every batch without an answer is retried as it was until acknowledged.
  Afterwards each raw log holds every message exactly once, in the order sent, seqs 1..N, and a
  retried batch was stored whole or not at all.
- load: 8 writer processes append to shared and separate sessions through gunicorn with 4 workers,
  while automatic and requested compactions run. Afterwards: nothing lost or duplicated, seqs
  gapless and in each writer's order, every COMPACTION_STARTED closed by exactly one terminal event,
  no two checkpoints extending the same base, stored model-input figures equal to a full rebuild.
- hostile: 8 other tenants' applications append and fetch their model input through gunicorn with 4
  workers and 2 task workers, first alone, then while one member of another project sends every hostile
  input of security issue 37 (bench/hostile.py). Every tenant's p99 stays under a second, and nobody
  gets a 5xx.

Every run is bounded in time. Progress goes to stderr; the figures, the checks and a line of JSON go
to stdout. A failed check makes the exit status non-zero.
"""

import argparse
import gzip
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

from bench.backlog import report_backlog, work_off
from bench.client import Server
from bench.report import Report, progress
from bench.run import Database, close_django, start_django
from bench.writers import append_until_acknowledged, batch, load_writer, new_log
from tests.openai_stub import OpenAIStub

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
SCENARIOS = ("kill", "load", "backlog", "hostile")
TERMINAL = {"COMPACTION_COMPLETED", "COMPACTION_SKIPPED", "COMPACTION_FAILED"}


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Run:
    def __init__(self, report: Report, *, quick: bool, database_url: str, tmp: Path):
        from sessions.access.api_keys import create_api_key
        from sessions.models import Project

        self.report = report
        self.quick = quick
        self.database_url = database_url
        self.tmp = tmp
        self.project = Project.objects.get_or_create(name="reliability")[0]
        _, self.secret = create_api_key(self.project, "reliability")

    # --- checks on what the database holds ---------------------------------------------------------

    def check_raw_log(self, scenario: str, key: str, expected: list[str] | None, sent: set[str]) -> int:
        """Seqs 1..N, every sent id exactly once and nothing else; `expected`, when given, is the exact
        order the ids must have. Returns N."""
        from sessions.models import Message, Session

        session = Session.objects.get(project=self.project, key=key)
        rows = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "client_id"))
        seqs, ids = [s for s, _ in rows], [i for _, i in rows]
        check = self.report.check
        check(f"{scenario}: seqs gapless", seqs == list(range(1, len(rows) + 1)), f"{key}: seqs are not 1..{len(rows)}")
        duplicated = [i for i, n in Counter(ids).items() if n > 1]
        check(f"{scenario}: nothing duplicated", not duplicated, f"{key}: {len(duplicated)} ids stored twice, e.g. {duplicated[:3]}")
        lost = sent - set(ids)
        check(f"{scenario}: nothing lost", not lost, f"{key}: {len(lost)} acknowledged messages missing, e.g. {sorted(lost)[:3]}")
        extra = set(ids) - sent
        check(f"{scenario}: nothing unexpected stored", not extra, f"{key}: {len(extra)} stored ids were never sent")
        if expected is not None:
            check(f"{scenario}: raw log in the order sent", ids == expected, f"{key}: stored order differs from the sent order")
        check(f"{scenario}: message_count", session.message_count == len(rows),
              f"{key}: message_count {session.message_count}, {len(rows)} rows")
        return len(rows)

    def check_model_input_figures(self, scenario: str, key: str) -> None:
        from sessions.context.model_input import build_model_input
        from sessions.models import Session

        session = Session.objects.select_related("project").get(project=self.project, key=key)
        rebuilt = build_model_input(session)
        self.report.check(f"{scenario}: stored model-input figures equal a rebuild", session.input_tokens == rebuilt.tokens,
                          f"{key}: stored {session.input_tokens} tokens, rebuilt {rebuilt.tokens}")

    def check_compactions(self, scenario: str, key: str) -> Counter:
        """Every COMPACTION_STARTED closed by exactly one terminal event; no two checkpoints extend the
        same base; the checkpoints form one chain. Returns the terminal events by type/trigger."""
        from sessions.models import Checkpoint, Event, Session

        session = Session.objects.get(project=self.project, key=key)
        events = list(Event.objects.filter(session=session, type__startswith="COMPACTION_").order_by("pk"))
        started = {e.pk for e in events if e.type == "COMPACTION_STARTED"}
        closed = Counter(e.data.get("run") for e in events if e.type in TERMINAL)
        check = self.report.check
        check(f"{scenario}: every COMPACTION_STARTED closed once",
              all(closed[pk] == 1 for pk in started), f"{key}: runs not closed exactly once: "
              f"{sorted(pk for pk in started if closed[pk] != 1)[:5]}")
        check(f"{scenario}: no terminal event without its start", set(closed) <= started,
              f"{key}: terminal events of unknown runs {sorted(set(closed) - started)[:5]}")
        checkpoints = list(Checkpoint.objects.filter(session=session).order_by("pk"))
        bases = Counter(c.previous_id for c in checkpoints)
        check(f"{scenario}: no two checkpoints extend the same base", all(n == 1 for n in bases.values()),
              f"{key}: bases extended twice: {[b for b, n in bases.items() if n > 1]}")
        by_id = {c.pk: c for c in checkpoints}
        chain_ok = all(
            c.first_seq == (by_id[c.previous_id].last_seq + 1 if c.previous_id else 1) and c.last_seq >= c.first_seq
            for c in checkpoints
        )
        check(f"{scenario}: checkpoints form one chain", chain_ok, f"{key}: a checkpoint does not continue its base")
        completed = sum(1 for e in events if e.type == "COMPACTION_COMPLETED")
        check(f"{scenario}: one checkpoint per completed compaction", completed == len(checkpoints),
              f"{key}: {completed} completed, {len(checkpoints)} checkpoints")
        return Counter(f"{e.data.get('trigger')} {e.type.removeprefix('COMPACTION_').lower()}" for e in events if e.type in TERMINAL)

    def wait_for_compaction_runs(self, scenario: str, keys: list[str], seconds: float = 120) -> None:
        """Let the background workers finish every queued or running compaction run of these sessions
        (runs cut off by a kill come back through the sweep), then check none is left."""
        from sessions.models import CompactionRun

        runs = CompactionRun.objects.filter(session__project=self.project, session__key__in=keys)
        deadline = time.monotonic() + seconds
        while runs.filter(state__in=CompactionRun.ACTIVE).exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        left = runs.filter(state__in=CompactionRun.ACTIVE).count()
        self.report.check(f"{scenario}: the workers finish every compaction run", left == 0,
                          f"{left} runs still queued or running after {seconds:.0f} s")
        retried = runs.filter(attempts__gt=1).count()
        self.report.figure(f"{scenario}: compaction runs", "runs", [runs.count()])
        self.report.figure(f"{scenario}: compaction runs retried (worker killed or summarizer failed)", "runs", [retried])

    # --- backlog --------------------------------------------------------------------------------

    def backlog(self) -> None:
        """The operator's scenario of issue 15: a session with a large history and automatic compaction
        turned on afterwards, against gunicorn with its default 30 s worker timeout. Appends go on while
        the worker compacts the backlog: every one is answered promptly, none with a 5xx, and the model
        input ends under max_tokens."""
        from sessions.ingest.append import append_messages
        from sessions.ingest.session_store import update_session

        key, messages, per_batch = "backlog", (6_000 if self.quick else 60_000), 500
        max_tokens = 20_000
        progress(f"backlog: {messages:,} stored messages, then auto compaction at max_tokens {max_tokens:,}")
        update_session(self.project, key, {"compaction": {"auto": False}})
        rng = random.Random(15)
        for start in range(0, messages, per_batch):
            append_messages(self.project, key, batch(rng, f"history-{start}-", per_batch // 2)[:per_batch], "setup")
        server = Server(self.database_url, 2, self.tmp / "gunicorn-backlog.log", timeout=None)
        server.start(self.secret)
        try:
            backlog = work_off(self.project, self.secret, key, server, max_tokens=max_tokens, keep_recent_tokens=5_000,
                               seconds=300 if self.quick else 900, lead=3)
        finally:
            self.wait_for_compaction_runs("backlog", [key])
            server.stop()
        report_backlog(self.report, "backlog", backlog, max_tokens)
        latencies = backlog.log["latencies"]
        # Far under gunicorn's 30 s. A run still plans its whole backlog under the session's row lock,
        # which appends wait for: the per-run budget (issue 15 item 3) bounds that wait.
        self.report.check("backlog: appends answered promptly while compacting (under 10 s)",
                          latencies and max(latencies) < 10.0, f"slowest append {max(latencies or [0]):.2f} s")
        self.check_compactions("backlog", key)

    # --- kill -----------------------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL the whole server during a stream of batch appends, restart it, retry every batch
        that got no answer; then every raw log is whole, once, in order, and every compaction run is
        closed."""
        from sessions.context.compaction_runs import compact
        from sessions.ingest.session_store import update_session
        from sessions.models import Event, Session

        writers, batches, kills = (3, 12, 4) if self.quick else (4, 60, 20)
        progress(f"kill: {writers} writers x {batches} batches of 10-300 messages, {kills} SIGKILLs of gunicorn")
        keys = [f"durable-{w}" for w in range(writers)]
        for key in keys:
            # Automatic compaction often, so kills also land between a compaction's transactions.
            update_session(self.project, key, {"compaction": {"auto": True, "max_tokens": 8000, "keep_recent_tokens": 2000}})
        # The `openai` summarizer against a local endpoint that takes 0.8 s to answer: compactions take
        # long enough that kills land between their STARTED and their end.
        summarizer = OpenAIStub()
        summarizer.delay = 0.8
        summarizer.reply = "Earlier: the user asked about orders and bookings; tools were called; answers given."
        summarizer.start()
        server = Server(self.database_url, 2, self.tmp / "gunicorn-kill.log", env={
            "CTXWEB_SUMMARIZER": "openai", "CTXWEB_OPENAI_BASE_URL": summarizer.base_url,
            "CTXWEB_OPENAI_API_KEY": "sk-local", "CTXWEB_OPENAI_TIMEOUT": "3", "CTXWEB_SUMMARIZER_TIMEOUT": "4",
            # Runs cut off by a kill come back quickly: short leases, frequent sweeps, quick retries.
            "CTXWEB_COMPACTION_LEASE_SECONDS": "4", "CTXWEB_COMPACTION_SWEEP_INTERVAL": "0.5",
            "CTXWEB_COMPACTION_RETRY_DELAY": "0.5",
        })
        server.start(self.secret)
        up = threading.Event()
        up.set()
        done = threading.Event()
        logs = [new_log() for _ in keys]
        sent: list[list[list[dict]]] = [[] for _ in keys]
        deadline = time.monotonic() + (240 if self.quick else 900)

        def port_of():
            up.wait(60)
            return server.port

        def writer(w: int) -> None:
            rng = random.Random(w)
            for b in range(batches):
                messages = batch(rng, f"w{w}-b{b}-", rng.randint(5, 75))
                sent[w].append(messages)
                data = append_until_acknowledged(port_of, self.secret, keys[w], messages, timeout=60,
                                                 deadline=deadline, log=logs[w])
                if data is None:
                    return
                logs[w]["acks"].append({"ids": [m["id"] for m in messages], "seqs": [m["seq"] for m in data["messages"]],
                                        "stored": [m["stored"] for m in data["messages"]]})
                with progressed:
                    acknowledged[0] += 1
                    progressed.notify_all()

        killed = []
        acknowledged = [0]
        progressed = threading.Condition()

        def killer() -> None:
            # Each kill waits for its share of the stream to be acknowledged, then a moment more, so the
            # kills land while batches are in flight however fast the machine stores them (waiting a fixed
            # 0.4-2 s, the writers of a fast machine had finished before the first kill).
            rng = random.Random(99)
            for k in range(kills):
                with progressed:
                    progressed.wait_for(lambda k=k: done.is_set()
                                        or acknowledged[0] >= (k + 1) * writers * batches // (kills + 1))
                if done.wait(rng.uniform(0.0, 0.05)):
                    return
                up.clear()
                server.kill()
                killed.append(time.monotonic())
                server.start(self.secret)
                up.set()

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        chaos = threading.Thread(target=killer)
        began = time.monotonic()
        for thread in threads:
            thread.start()
        chaos.start()
        for thread in threads:
            thread.join()
        with progressed:
            done.set()
            progressed.notify_all()
        chaos.join()
        elapsed = time.monotonic() - began
        self.wait_for_compaction_runs("kill", keys)
        server.stop()
        summarizer.stop()

        # Runs cut off by a kill were swept by the workers once their lease passed (4 s here); a run still
        # left running with its lease passed is closed by the session's next compaction.
        if killed:
            time.sleep(max(0.0, killed[-1] + 5 - time.monotonic()))
        interrupted = 0
        for key in keys:
            session = Session.objects.get(project=self.project, key=key)
            outcome = compact(session, force=True)
            interrupted += sum(1 for e in Event.objects.filter(session=session, type="COMPACTION_FAILED")
                               if e.data.get("error", "").startswith("interrupted"))
            self.report.check("kill: a compaction after the kills runs", outcome.status in ("completed", "skipped"),
                              f"{key}: {outcome.status} {outcome.reason or outcome.error}")
            self.check_compactions("kill", key)

        check = self.report.check
        problems = [p for log in logs for p in log["problems"]]
        check("kill: every batch acknowledged", not problems, "; ".join(problems[:3]))
        check("kill: the server was killed during the stream", len(killed) >= kills // 2,
              f"only {len(killed)} kills before the writers finished")
        whole = True
        replayed = 0
        for w, key in enumerate(keys):
            expected = [m["id"] for messages in sent[w] for m in messages]
            self.check_raw_log("kill", key, expected, set(expected))
            self.check_model_input_figures("kill", key)
            for ack in logs[w]["acks"]:
                if len(set(ack["stored"])) != 1:
                    whole = False  # part of a batch stored before the retry: never
                elif not ack["stored"][0]:
                    replayed += 1  # stored before the kill, its answer lost: the retry stored nothing
                if ack["seqs"] != list(range(ack["seqs"][0], ack["seqs"][0] + len(ack["seqs"]))):
                    whole = False
        check("kill: a batch is stored whole or not at all", whole, "a batch's messages were stored in part or not contiguous")
        total = sum(len(log["acks"]) for log in logs)
        messages = sum(len(m) for s in sent for m in s)
        unanswered = sum(log["failed"] for log in logs)
        self.report.sizes.update(kill_writers=writers, kill_batches=total, kill_messages=messages)
        self.report.figure("kill: SIGKILLs of the server", "kills", [len(killed)])
        self.report.figure("kill: requests cut off without an answer", "requests", [unanswered])
        self.report.figure("kill: requests refused while the server was down", "requests",
                           [sum(log["refused"] for log in logs)])
        self.report.figure("kill: batches stored before a kill whose answer was lost", "batches", [replayed],
                           note="the retry answered duplicate for every message")
        self.report.figure("kill: batches retried", "batches", [sum(log["retries"] for log in logs)])
        self.report.figure("kill: 5xx answers", "responses", [sum(log["server_errors"] for log in logs)])
        self.report.figure("kill: compaction runs cut off by a kill, closed as interrupted", "runs", [interrupted])
        self.report.figure("kill: run time", "s", [elapsed])
        check("kill: some requests were cut off by a kill", unanswered > 0, "no request was in flight at any kill")

    # --- load -----------------------------------------------------------------------------------

    def load(self) -> None:
        """8 writer processes, shared and separate sessions, automatic and requested compactions."""
        from sessions.ingest.session_store import update_session

        writers, batches, seconds = (8, 25, 240) if self.quick else (8, 400, 900)
        shared = ["shared-0", "shared-1"]
        # Low thresholds, so automatic compactions run often, concurrently with the appends.
        for key in shared:
            update_session(self.project, key, {"compaction": {"auto": True, "max_tokens": 6000, "keep_recent_tokens": 1500}})
        for w in range(writers):
            auto = w % 2 == 0
            update_session(self.project, f"solo-{w}", {"compaction": {"auto": auto, "max_tokens": 4000, "keep_recent_tokens": 1000}})
        workers = 4
        progress(f"load: {writers} writer processes x {batches} batches, gunicorn with {workers} workers")
        server = Server(self.database_url, workers, self.tmp / "gunicorn-load.log")
        server.start(self.secret)
        context = multiprocessing.get_context("spawn")
        start = context.Barrier(writers + 1)
        results = context.Queue()
        processes = [
            context.Process(target=load_writer, args=(w, server.port, self.secret, shared, batches, 7, 1, seconds, start, results))
            for w in range(writers)
        ]
        for process in processes:
            process.start()
        start.wait()
        began = time.monotonic()
        logs = [results.get(timeout=seconds + 120) for _ in processes]
        elapsed = time.monotonic() - began
        for process in processes:
            process.join(timeout=30)
        self.wait_for_compaction_runs("load", [*shared, *(f"solo-{w}" for w in range(writers))])
        server.stop()

        check = self.report.check
        problems = [p for log in logs for p in log["problems"]]
        check("load: every request answered without error", not problems, "; ".join(problems[:3]))
        check("load: no 5xx", sum(log["server_errors"] for log in logs) == 0, "the server answered 5xx")
        sent: dict[str, set[str]] = defaultdict(set)
        order_ok, whole = True, True
        for log in logs:
            last_seq: dict[str, int] = {}
            for ack in log["acks"]:
                sent[ack["key"]].update(ack["ids"])
                if not all(ack["stored"]):
                    whole = False  # nothing is retried here, so every message is new
                if ack["seqs"] != list(range(ack["seqs"][0], ack["seqs"][0] + len(ack["seqs"]))):
                    whole = False
                if ack["seqs"][0] <= last_seq.get(ack["key"], 0):
                    order_ok = False
                last_seq[ack["key"]] = ack["seqs"][-1]
        check("load: each batch stored whole with consecutive seqs", whole, "a batch was split or partly duplicate")
        check("load: each writer's batches in the order sent", order_ok, "a writer's later batch got an earlier seq")
        terminals: Counter = Counter()
        stored = 0
        for key in sorted(sent):
            stored += self.check_raw_log("load", key, None, sent[key])
            self.check_model_input_figures("load", key)
            terminals += self.check_compactions("load", key)
        latencies = [s for log in logs for s in log["latencies"]]
        requested = Counter(c["status"] for log in logs for c in log["compactions"])
        self.report.sizes.update(load_writers=writers, load_workers=workers, load_sessions=len(sent), load_messages=stored)
        self.report.figure("load: messages stored", "messages", [stored])
        self.report.figure("load: append rate", "msg/s", [stored / elapsed])
        self.report.figure("load: append latency p50", "ms", [statistics.median(latencies) * 1000])
        self.report.figure("load: append latency p95", "ms", [percentile(latencies, 95) * 1000])
        self.report.figure("load: append latency max", "ms", [max(latencies) * 1000])
        for name, n in sorted(terminals.items()):
            self.report.figure(f"load: compactions {name}", "runs", [n])
        self.report.figure("load: compaction requests answered", "requests", [sum(requested.values())])
        self.report.figure("load: run time", "s", [elapsed])
        check("load: automatic compactions ran", any(k.startswith("auto completed") for k in terminals),
              f"no automatic compaction completed: {dict(terminals)}")
        check("load: requested compactions ran", any(k.startswith("request ") for k in terminals),
              f"no requested compaction: {dict(terminals)}")


    # --- hostile ---------------------------------------------------------------------------------

    def hostile(self) -> None:
        """Other tenants' p99 while one member sends every hostile input of issue 37 (bench/hostile.py)."""
        from django.contrib.auth import get_user_model

        from bench.hostile import ATTACKER_PASSWORD, BACKTRACKING, attack, tenant
        from sessions.access.api_keys import create_api_key
        from sessions.ingest.append import append_messages
        from sessions.models import ImportJob, Membership, Project
        from tests.otlp.spans import export, openinference, span

        seconds = 60 if self.quick else 180
        attacker = Project.objects.get_or_create(name="hostile")[0]
        _, attacker_key = create_api_key(attacker, "hostile")
        member = get_user_model().objects.create_user("hostile-member", password=ATTACKER_PASSWORD)
        Membership.objects.create(user=member, project=attacker, role=Membership.Role.EDITOR)
        for key in ("bait", "bait-0", "bait-1", "bait-2", "bait-3"):
            append_messages(attacker, key, [
                {"role": "user", "content": BACKTRACKING}, {"role": "assistant", "content": "a" * 100_000},
                {"role": "user", "content": "and now?"}, {"role": "assistant", "content": "done"}], "setup")
        append_messages(attacker, "live", [{"role": "user", "content": "the application's own session"}], "setup")
        keys = []
        for w in range(8):
            tenant_project = Project.objects.get_or_create(name=f"tenant-{w}")[0]
            keys.append(create_api_key(tenant_project, "app")[1])
        same = {"role": "user", "content": "the same question"}
        flood = gzip.compress(export(span(openinference([same] * 30_000, [{"role": "assistant", "content": "ok"}],
                                                        session="flood"))).SerializeToString())
        # The server as deployed: its static files collected (the dashboard's pages need their manifest
        # with DEBUG off), the API keys' rate limits and the dashboard's at their defaults.
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
                       cwd=Path(__file__).resolve().parent.parent, check=True,
                       env={**os.environ, "DEBUG": "0", "SECRET_KEY": "collectstatic-only-" + "x" * 40})
        server = Server(self.database_url, 4, self.tmp / "gunicorn-hostile.log", task_workers=2, env={
            "CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE": "1200", "CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE": "20000000"})
        server.start(self.secret)
        context = multiprocessing.get_context("spawn")
        phases = {}
        try:
            for phase in ("alone", "under attack"):
                progress(f"hostile: 8 tenants for {seconds} s, {phase}")
                start = context.Barrier(9)
                results = context.Queue()
                processes = [context.Process(target=tenant, args=(w, server.port, keys[w], seconds, start, results))
                             for w in range(8)]
                for process in processes:
                    process.start()
                start.wait()
                answers = None
                if phase == "under attack":
                    time.sleep(3)
                    answers = attack(server.port, attacker_key, "hostile", "bait", "live", flood, member.username)
                logs = [results.get(timeout=seconds + 300) for _ in processes]
                for process in processes:
                    process.join(timeout=30)
                phases[phase] = (logs, answers)
            deadline = time.monotonic() + 300
            while ImportJob.objects.exclude(state__in=["completed", "failed"]).exists() and time.monotonic() < deadline:
                time.sleep(1)
        finally:
            server.stop()

        check = self.report.check
        for phase, (logs, answers) in phases.items():
            latencies = [s for log in logs for s in log["latencies"]]
            statuses = Counter()
            for log in logs:
                statuses.update({int(k): v for k, v in log["statuses"].items()})
            p99 = percentile(latencies, 99)
            self.report.figure(f"hostile ({phase}): tenants' calls", "calls", [len(latencies)])
            self.report.figure(f"hostile ({phase}): tenants' latency p50", "ms", [statistics.median(latencies) * 1000])
            self.report.figure(f"hostile ({phase}): tenants' latency p99", "ms", [p99 * 1000])
            self.report.figure(f"hostile ({phase}): tenants' latency max", "ms", [max(latencies) * 1000])
            check(f"hostile ({phase}): every tenant's p99 under 1 s",
                  all(percentile(log["latencies"], 99) < 1.0 for log in logs),
                  ", ".join(f"tenant {log['writer']}: {percentile(log['latencies'], 99) * 1000:.0f} ms" for log in logs))
            check(f"hostile ({phase}): no 5xx for the tenants", all(s < 500 for s in statuses),
                  f"statuses {dict(statuses)}")
            if answers is not None:
                for kind, got in answers.items():
                    self.report.figure(f"hostile: {kind}", "answers", [len(got)],
                                       note=", ".join(f"{s}x{n}" for s, n in sorted(Counter(got).items())))
                check("hostile: no 5xx for the member's hostile inputs",
                      all(s < 500 for got in answers.values() for s in got),
                      "; ".join(f"{k}: {sorted(set(v))}" for k, v in answers.items() if any(s >= 500 for s in v)))
                check("hostile: the anonymous upload refused from its headers",
                      all(s in (302, 403, 413) for s in answers.get("anonymous 200 MB upload", [0])),
                      f"{answers.get('anonymous 200 MB upload')}")
                check("hostile: the gzip bomb refused", answers.get("OTLP gzip bomb (512 MiB of zeros)") == [413],
                      f"{answers.get('OTLP gzip bomb (512 MiB of zeros)')}")
        jobs = {job.file_name: job for job in ImportJob.objects.filter(project__name="hostile")}
        check("hostile: the nested brackets import failed with a sentence",
              "nested.json" in jobs and jobs["nested.json"].state == "failed" and "levels deep" in jobs["nested.json"].error,
              f"{jobs.get('nested.json') and (jobs['nested.json'].state, jobs['nested.json'].error[:200])}")
        check("hostile: the forged request log wrote nothing into the live session",
              "forged.jsonl" in jobs and jobs["forged.jsonl"].state == "failed"
              and Project.objects.get(name="hostile").sessions.get(key="live").message_count == 1,
              f"{jobs.get('forged.jsonl') and (jobs['forged.jsonl'].state, jobs['forged.jsonl'].error[:200])}")
        check("hostile: the large import completed", "big.json" in jobs and jobs["big.json"].state == "completed",
              f"{jobs.get('big.json') and (jobs['big.json'].state, jobs['big.json'].error[:200])}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller and shorter (CI)")
    parser.add_argument("--only", default="", help=f"comma-separated scenarios (default: {','.join(SCENARIOS)})")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args(argv)
    only = [name.strip() for name in args.only.split(",") if name.strip()] or list(SCENARIOS)
    unknown = set(only) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(sorted(unknown))}; choose from {', '.join(SCENARIOS)}")
    given = os.environ.get("DATABASE_URL") or DEFAULT_URL
    database = Database(given, args.keep, name=os.environ.get("CTXWEB_RELIABILITY_DATABASE", "ctxweb_reliability"))
    if not database.postgres:
        parser.error("the reliability runs need PostgreSQL: set DATABASE_URL=postgres://...")
    report = Report()
    try:
        start_django(database, report)
        run = Run(report, quick=args.quick, database_url=database.url, tmp=database.tmp)
        for name in only:
            try:
                getattr(run, name)()
            except Exception as exc:  # report what was measured, then fail the run
                traceback.print_exc()
                report.check(f"{name}: the run completed", False, f"{type(exc).__name__}: {exc}")
    finally:
        close_django()
        database.drop()
    report.print()
    return 1 if report.failed_checks else 0


if __name__ == "__main__":
    sys.exit(main())
