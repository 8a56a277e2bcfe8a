"""PostgreSQL through pgbouncer in transaction mode (issue 20.6): with CTXWEB_PGBOUNCER=1 the app's
appends, model-input fetches, raw-log pages and a compaction work when a server connection belongs to a
client for one transaction only. pgbouncer runs on a free port in front of the local PostgreSQL
(CTXWEB_PGBOUNCER_TEST_SERVER, default 127.0.0.1:5432, user postgres, trust authentication) with a pool
of two server connections shared by four workload processes, so a client's next transaction often lands
on another server connection: anything that outlives a transaction (a server-side cursor, a prepared
statement, a session setting) is lost. Without CTXWEB_PGBOUNCER this test fails with 'cursor
"_django_curs_..." does not exist' (the raw log's chunked read), which is what it guards.

Skipped when the pgbouncer binary is missing (Debian: apt-get install pgbouncer), failed instead under
CI=true (.ci/run installs it)."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("CTXWEB_PGBOUNCER_TEST_SERVER", "127.0.0.1:5432")
DATABASE = "ctxweb_pgbouncer_test"
WORKERS = 4  # client processes, on a pool of 2 server connections


def pgbouncer_binary() -> str:
    found = shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None)
    if found is None:
        message = "pgbouncer is not installed (apt-get install -y pgbouncer)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + ": CI installs it (.ci/run)")
        pytest.skip(message)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def admin(statement: str) -> None:
    host, port = SERVER.rsplit(":", 1)
    with psycopg.connect(host=host, port=int(port), user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(statement)


@pytest.fixture
def bouncer():
    binary = pgbouncer_binary()
    # Not pytest's tmp_path: its parents are private to this user, and pgbouncer runs as postgres when
    # started by root.
    with tempfile.TemporaryDirectory(prefix="ctxweb-pgbouncer-") as folder:
        yield from run_bouncer(binary, Path(folder))


def run_bouncer(binary: str, tmp_path: Path):
    host, port = SERVER.rsplit(":", 1)
    try:
        admin(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        admin(f'CREATE DATABASE "{DATABASE}"')
    except psycopg.OperationalError as exc:
        message = f"no PostgreSQL at {SERVER} for the pgbouncer test: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    direct = f"postgres://postgres@{SERVER}/{DATABASE}"
    env = {**os.environ, "DATABASE_URL": direct, "DEBUG": "1"}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True,
                   timeout=600)
    listen = free_port()
    tmp_path.chmod(0o777)  # pgbouncer drops root for the postgres user, who writes its log here
    (tmp_path / "userlist.txt").write_text('"postgres" ""\n')
    (tmp_path / "pgbouncer.ini").write_text(f"""[databases]
{DATABASE} = host={host} port={port} dbname={DATABASE}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {tmp_path / "userlist.txt"}
pool_mode = transaction
default_pool_size = 2
max_client_conn = 20
logfile = {tmp_path / "pgbouncer.log"}
pidfile = {tmp_path / "pgbouncer.pid"}
""")
    for name in ("userlist.txt", "pgbouncer.ini"):
        (tmp_path / name).chmod(0o644)
    # pgbouncer refuses to run as root; -u switches to the postgres user first.
    user = ["-u", "postgres"] if os.geteuid() == 0 else []
    process = subprocess.Popen([binary, *user, str(tmp_path / "pgbouncer.ini")], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", listen), timeout=1):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                log = (tmp_path / "pgbouncer.log").read_text() if (tmp_path / "pgbouncer.log").exists() else ""
                pytest.fail(f"pgbouncer did not start: {process.stdout.read().decode()}\n{log}")
            time.sleep(0.1)
    try:
        yield f"postgres://postgres@127.0.0.1:{listen}/{DATABASE}", tmp_path
    finally:
        process.terminate()
        process.wait(timeout=10)
        admin(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')


def test_appends_model_input_and_compaction_through_pgbouncer_in_transaction_mode(bouncer):
    url, tmp_path = bouncer
    env = {**os.environ, "DATABASE_URL": url, "CTXWEB_PGBOUNCER": "1", "DEBUG": "1",
           "CTXWEB_TASKS_BACKEND": "django_tasks.backends.immediate.ImmediateBackend",
           "CTXWEB_RATE_LIMIT_REQUESTS_PER_MINUTE": "0", "CTXWEB_RATE_LIMIT_BYTES_PER_MINUTE": "0"}
    workers = [subprocess.Popen([sys.executable, "tests/pgbouncer_workload.py", f"bounced-{n}"], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for n in range(WORKERS)]
    outputs = [worker.communicate(timeout=600)[0] for worker in workers]
    log = (tmp_path / "pgbouncer.log").read_text() if (tmp_path / "pgbouncer.log").exists() else ""
    for worker, output in zip(workers, outputs, strict=True):
        assert worker.returncode == 0 and output.strip().endswith("OK"), f"{output[-3000:]}\n\npgbouncer log:\n{log[-2000:]}"
    with psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        count = conn.execute("SELECT count(*) FROM ctx_sessions_message").fetchone()[0]
    assert count == WORKERS * 15 * 4
