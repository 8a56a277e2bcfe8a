"""A backlog worked off while a client keeps appending (issue 15), shared by `make bench`
(`compaction_backlog`) and `make reliability` (`backlog`). Imported after django.setup().

A session holds a long history with automatic compaction off. A client thread appends one small batch
after another through the server; automatic compaction is then turned on, and the background worker
beside the server works the backlog off, one budgeted run after another, until the model input is under
max_tokens. Each append is timed and set against the runs' running intervals, so the latency of the
appends that overlapped a running compaction can be compared with that of the others, from the same
stream on the same server.
"""

import random
import threading
import time
from dataclasses import dataclass, field

from bench.client import Server
from bench.report import Report, percentile, progress
from bench.writers import append_until_acknowledged, batch, new_log


def append_stream(port: int, secret: str, key: str, done: threading.Event, log: dict, pause: float = 0.1) -> None:
    """Append one small batch after another until `done`, each answer a 200; records every append's
    wall-clock start and end (to compare with the runs' started_at/finished_at) in log["timed"]."""
    rng = random.Random(7)
    n = 0
    while not done.is_set():
        messages = batch(rng, f"backlog-{n}-", 1)
        began = time.time()
        data = append_until_acknowledged(lambda: port, secret, key, messages, timeout=60,
                                         deadline=time.monotonic() + 120, log=log)
        if data is None:
            return
        log["timed"].append((began, time.time(), log["latencies"][-1]))
        log["acks"].append({"ids": [m["id"] for m in messages], "compaction": (data.get("compaction") or {}).get("status")})
        n += 1
        time.sleep(pause)


def split_by_runs(timed: list[tuple[float, float, float]], runs: list[tuple[float, float]]) -> tuple[list, list]:
    """The latencies of the appends (began, ended, latency) whose time overlaps a run's (started,
    finished), and those of the others."""
    during, outside = [], []
    for began, ended, latency in timed:
        overlaps = any(began < finished and ended > started for started, finished in runs)
        (during if overlaps else outside).append(latency)
    return during, outside


@dataclass
class Backlog:
    """What one backlog run measured."""

    before: int  # model input tokens when automatic compaction was turned on
    after: int  # model input tokens at the end
    seconds: float  # from turning automatic compaction on until the input was under max_tokens
    finished: bool  # the input got under max_tokens, and no run was left, within the time bound
    runs: int
    completed: int
    log: dict
    during: list[float] = field(default_factory=list)  # latencies (s) of appends overlapping a running compaction
    outside: list[float] = field(default_factory=list)  # latencies (s) of the other appends

    @property
    def per_minute(self) -> float:
        return (self.before - self.after) / self.seconds * 60


def work_off(project, secret: str, key: str, server: Server, *, max_tokens: int, keep_recent_tokens: int,
             seconds: float, lead: float = 0.0, pause: float = 0.1) -> Backlog:
    """Stream appends to `key` (a session of `project` with a long history and automatic compaction off)
    through `server`; after `lead` seconds, turn automatic compaction on; wait until the worker has
    brought the model input under `max_tokens` and no run is left (at most `seconds`), then stop the
    stream."""
    from sessions.ingest.session_store import update_session
    from sessions.models import CompactionRun, Session

    session = Session.objects.filter(project=project, key=key)
    runs = CompactionRun.objects.filter(session__in=session)
    log = new_log()
    log["timed"] = []
    done = threading.Event()
    writer = threading.Thread(target=append_stream, args=(server.port, secret, key, done, log, pause))
    writer.start()
    try:
        time.sleep(lead)
        before = session.get().input_tokens
        began = time.monotonic()
        update_session(project, key, {"compaction": {"auto": True, "max_tokens": max_tokens,
                                                     "keep_recent_tokens": keep_recent_tokens}})
        deadline = began + seconds
        finished = False
        while time.monotonic() < deadline and writer.is_alive():
            time.sleep(0.2)
            if runs.exists() and not runs.filter(state__in=CompactionRun.ACTIVE).exists() \
                    and session.get().input_tokens <= max_tokens:
                finished = True
                break
        worked_off = time.monotonic() - began
    finally:
        done.set()
        writer.join(timeout=120)
    intervals = [(r.started_at.timestamp(), r.finished_at.timestamp() if r.finished_at else float("inf"))
                 for r in runs.exclude(started_at=None)]
    result = Backlog(before=before, after=session.get().input_tokens, seconds=worked_off, finished=finished,
                     runs=runs.count(), completed=runs.filter(state=CompactionRun.State.COMPLETED).count(), log=log)
    result.during, result.outside = split_by_runs(log["timed"], intervals)
    progress(f"  worked off {result.before - result.after:,} tokens in {worked_off:.1f} s, {result.runs} runs; "
             f"{len(result.during)} appends during a run, {len(result.outside)} outside")
    return result


def report_backlog(report: Report, name: str, backlog: Backlog, max_tokens: int) -> None:
    """The checks and figures both callers report, under `name` ("backlog", "compaction backlog")."""
    log = backlog.log
    check = report.check
    check(f"{name}: every append answered without error", not log["problems"], "; ".join(log["problems"][:3]))
    check(f"{name}: no 5xx", log["server_errors"] == 0, f"{log['server_errors']} answers were 5xx")
    check(f"{name}: the model input ends under max_tokens", backlog.after <= max_tokens,
          f"{backlog.after:,} > {max_tokens:,}")
    check(f"{name}: worked off within the time bound", backlog.finished,
          f"after {backlog.seconds:.0f} s the input was {backlog.after:,} tokens or a run was left")
    report.figure(f"{name}: model input before", "tokens", [backlog.before])
    report.figure(f"{name}: model input after", "tokens", [backlog.after])
    report.figure(f"{name}: worked off in", "s", [backlog.seconds])
    report.figure(f"{name}: backlog worked off per minute", "tokens/min", [backlog.per_minute])
    report.figure(f"{name}: compaction runs (completed)", "runs", [backlog.completed])
    report.figure(f"{name}: appends while compacting", "appends", [len(backlog.during)])
    for label, samples in (("while compacting", backlog.during), ("with no compaction running", backlog.outside)):
        if samples:
            report.figure(f"{name}: append latency {label} p50", "ms", [percentile(samples, 50) * 1000])
            report.figure(f"{name}: append latency {label} p95", "ms", [percentile(samples, 95) * 1000])
            report.figure(f"{name}: append latency {label} max", "ms", [max(samples) * 1000])
    if backlog.during and backlog.outside:
        for p in (50, 95):
            report.figure(f"{name}: append latency p{p}, while compacting / with none running", "x",
                          [percentile(backlog.during, p) / percentile(backlog.outside, p)])
