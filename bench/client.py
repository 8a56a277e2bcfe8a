"""Real HTTP against a real server: gunicorn as a subprocess, a plain http.client caller, and the
client process of the concurrent-append measurement. Nothing here imports Django, so the client
processes (multiprocessing, spawn) start without it."""

import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(port: int, method: str, path: str, body: bytes | None = None, secret: str = "", timeout: float = 120,
         content_type: str = "application/json"):
    """One request on a new connection (gunicorn's sync workers close every connection anyway).
    Returns (status, body bytes, seconds)."""
    headers = {"Content-Type": content_type}
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        return response.status, data, time.perf_counter() - started
    finally:
        conn.close()


def stop_process(process: subprocess.Popen | None, timeout: float) -> None:
    """Ask a server process to exit (SIGTERM), and kill it when it has not within `timeout` seconds."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


# The measurements send far more than any one application would through their single API key; they
# measure the server, so its rate limits are off (the UPDATE that keeps the buckets still runs).
# The API's per-key limits and the dashboard's per-user ones, off: the benchmark times requests, not refusals.
UNLIMITED = {"CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE": "0", "CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE": "0",
             "CTXWEB_DASHBOARD_REQUESTS_PER_MINUTE": "0", "CTXWEB_DASHBOARD_HEAVY_PER_MINUTE": "0"}


class Server:
    """`gunicorn ctxweb.wsgi` on a free port of 127.0.0.1, with the benchmark's database."""

    def __init__(self, database_url: str, workers: int, log_path: Path, env: dict | None = None,
                 task_workers: int = 1, timeout: int | None = 300):
        self.port = free_port()
        self.timeout = timeout  # gunicorn's worker timeout; None: its default (30 s)
        self.workers = workers
        self.task_workers = task_workers  # `manage.py compaction_worker` processes beside gunicorn
        self.log_path = log_path
        # Configured like a deployment (DEBUG off: no query log, no debug pages), on plain HTTP.
        self.env = {
            **os.environ, "DATABASE_URL": database_url, "ALLOWED_HOSTS": "127.0.0.1", "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50), "SECURE_SSL_REDIRECT": "0", "SECURE_COOKIES": "0",
            "SECURE_HSTS_SECONDS": "0", "DJANGO_SETTINGS_MODULE": "bench.server_settings", **UNLIMITED, **(env or {}),
        }
        self.process: subprocess.Popen | None = None

    def start(self, secret: str, timeout: float = 60) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the server writes to it until stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "ctxweb.wsgi", "--bind", f"127.0.0.1:{self.port}",
             "--workers", str(self.workers), "--log-level", "warning",
             *(("--timeout", str(self.timeout)) if self.timeout else ())],
            cwd=ROOT, env=self.env, stdout=log, stderr=log,
            start_new_session=True,  # its own process group, so kill() takes the workers down with it
        )
        # The background workers, each in a process group of its own too: kill() takes them down as well.
        self.task_processes = [
            subprocess.Popen(
                [sys.executable, "manage.py", "compaction_worker", "--no-reload", "--no-startup-delay",
                 "--interval", "0.2", "--verbosity", "0"],
                cwd=ROOT, env=self.env, stdout=log, stderr=log, start_new_session=True,
            )
            for _ in range(self.task_workers)
        ]
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                status, _, _ = call(self.port, "GET", "/api/v1/sessions?limit=1", secret=secret, timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"gunicorn did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        for worker in getattr(self, "task_processes", ()):
            if worker.poll() is None:
                worker.terminate()  # finishes the task it is on, then exits
        for worker in getattr(self, "task_processes", ()):
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=10)
        stop_process(self.process, timeout=20)

    def kill(self) -> None:
        """SIGKILL the master and every worker at once, as a crash or an OOM kill would: no request
        finishes, no response is sent."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGKILL)
        for worker in getattr(self, "task_processes", ()):
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
        self.process.wait(timeout=20)
        for worker in getattr(self, "task_processes", ()):
            worker.wait(timeout=20)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


def append_client(port: int, secret: str, key: str, bodies: list[bytes], start, results) -> None:
    """One client process of the concurrent-append measurement: wait for the others, post every
    batch, report (first start, last end, latencies, problems) on `results`."""
    latencies, problems, stored = [], [], 0
    start.wait()
    began = time.monotonic()
    for body in bodies:
        try:
            status, data, seconds = call(port, "POST", f"/api/v1/sessions/{key}/messages", body, secret)
        except OSError as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
            continue
        latencies.append(seconds)
        if status != 200:
            problems.append(f"HTTP {status}: {data[:300]!r}")
            continue
        stored += sum(1 for m in json.loads(data)["messages"] if m["stored"])
    results.put({"began": began, "ended": time.monotonic(), "latencies": latencies, "problems": problems,
                 "stored": stored})


def app_client(port: int, secret: str, key: str, turns: list[bytes], start, results) -> None:
    """One application of the many-applications measurement (issue 42, item 5): wait for the others, then
    for every turn append its messages and fetch the model input in the openai format, as an agent does
    before each model call; report (first start, last end, latencies of each kind, problems) on `results`."""
    appends, fetches, problems, stored = [], [], [], 0
    start.wait()
    began = time.monotonic()
    for body in turns:
        try:
            status, data, seconds = call(port, "POST", f"/api/v1/sessions/{key}/messages", body, secret)
            appends.append(seconds)
            if status != 200:
                problems.append(f"append HTTP {status}: {data[:300]!r}")
                continue
            stored += sum(1 for m in json.loads(data)["messages"] if m["stored"])
            status, data, seconds = call(port, "GET", f"/api/v1/sessions/{key}/model-input?format=openai", None, secret)
            fetches.append(seconds)
            if status != 200:
                problems.append(f"model input HTTP {status}: {data[:300]!r}")
        except OSError as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
    results.put({"began": began, "ended": time.monotonic(), "appends": appends, "fetches": fetches,
                 "problems": problems, "stored": stored})


def copy_client(database_url: str, statement: str, chunks: list[bytes], start, results) -> None:
    """One connection of the many-applications floor: PostgreSQL COPY of a session's rows (COPY's text
    format, rendered before the clock starts), a turn's rows a transaction, committed as the app commits."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        start.wait()
        began = time.monotonic()
        for chunk in chunks:
            with conn.cursor() as cursor, cursor.copy(statement) as copy:
                copy.write(chunk)
            conn.commit()
        results.put({"began": began, "ended": time.monotonic()})
