"""The Makefile's `run`: HOST and PORT choose where it serves, and a busy port is said first, before
the install, the migrations and the demo data. Run in a scratch directory holding only the Makefile
and pyproject.toml, so nothing is installed whatever happens."""

import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@pytest.fixture
def scratch(tmp_path) -> Path:
    for name in ("Makefile", "pyproject.toml", "clients/python/pyproject.toml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def make(scratch: Path, *args: str, dry_run: bool = False) -> subprocess.CompletedProcess:
    command = ["make", "--no-print-directory", *(["-n"] if dry_run else []), *args]
    return subprocess.run(command, cwd=scratch, capture_output=True, text=True, timeout=60)


def test_a_busy_port_is_said_before_anything_else(scratch):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = make(scratch, "run", f"PORT={port}")
    assert result.returncode != 0
    assert result.stderr.splitlines()[0] == f"port {port} is in use; run make run PORT={port + 1}"
    assert result.stdout == ""  # no venv, pip, migrate or banner first
    assert not (scratch / ".venv").exists()


def test_a_port_that_is_not_a_number_is_refused(scratch):
    result = make(scratch, "check-port", "PORT=http")
    assert result.returncode != 0
    assert "PORT is a number" in result.stderr


def test_a_free_port_passes_the_check(scratch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert make(scratch, "check-port", f"PORT={port}").returncode == 0


def test_run_serves_and_announces_host_and_port(scratch):
    commands = make(scratch, "run", "HOST=0.0.0.0", "PORT=8100", dry_run=True).stdout
    assert "manage.py runserver 0.0.0.0:8100" in commands
    assert "manage.py demo_data --url http://0.0.0.0:8100/" in commands
    assert ":8000" not in commands


def test_run_defaults_to_127_0_0_1_port_8000(scratch):
    commands = make(scratch, "run", dry_run=True).stdout
    assert "manage.py runserver 127.0.0.1:8000" in commands
    assert "manage.py demo_data --url http://127.0.0.1:8000/" in commands


def test_the_install_shows_its_progress(scratch):
    commands = make(scratch, "install", dry_run=True).stdout
    installs = [line for line in commands.splitlines() if "pip install" in line]
    assert len(installs) == 2 and not any("--quiet" in line or " -q" in line for line in installs)


def test_run_starts_the_worker_again_when_it_exits_and_stops_it_with_the_server(scratch):
    """Security issue 37, item 6: a worker that exited (a locked database, an out-of-memory kill) left
    queued runs waiting for someone to start it. `make run` starts it again, and stops it with the server.
    A stand-in python in the scratch's .venv: the worker exits at once, the server serves for 3.5 s."""
    stamp = subprocess.run("cksum < pyproject.toml | cut -d' ' -f1", shell=True, cwd=scratch, capture_output=True,
                           text=True, check=True).stdout.strip()
    bin_dir = scratch / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (scratch / ".venv" / f".installed-{stamp}").touch()
    python = bin_dir / "python"
    python.write_text('#!/bin/sh\ncase "$*" in\n'
                      '  *compaction_worker*) echo started >> "$(dirname "$0")/../../worker.log"; exit 1 ;;\n'
                      '  *runserver*) sleep 3.5 ;;\nesac\nexit 0\n')
    python.chmod(0o755)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    result = make(scratch, "run", f"PORT={port}")

    assert result.returncode == 0, result.stderr
    starts = (scratch / "worker.log").read_text().count("started")
    assert starts >= 3, f"the worker was started {starts} time(s) in 3.5 s"
    assert "the background worker stopped (exit 1); starting it again" in result.stderr
    import time

    time.sleep(1.5)  # the loop stopped with the server: no more starts
    assert (scratch / "worker.log").read_text().count("started") == starts
