"""Real background workers for the queue tests: `compaction_worker` in a process forked from the test
process, so it starts at once, sees the test's settings and monkeypatched summarizers, and can be
SIGKILLed mid-run. Tests that use one need `transactional_db` (the worker reads committed rows) and
the `real_queue` marker (the database task backend)."""

import os
import signal
import time
from contextlib import contextmanager

from django.core.management import call_command
from django.db import connections

_inherited = []  # the parent's database connections, never closed by the child (that would end them)


def _detach_connections() -> None:
    for wrapper in connections.all(initialized_only=True):
        if wrapper.connection is not None:
            _inherited.append(wrapper.connection)
            wrapper.connection = None


def start_worker() -> int:
    """Fork a process running `manage.py compaction_worker`; returns its pid."""
    pid = os.fork()
    if pid == 0:  # the worker
        code = 1
        try:
            _detach_connections()
            call_command("compaction_worker", "--no-reload", "--no-startup-delay", "--interval", "0.05", verbosity=0)
            code = 0
        finally:
            os._exit(code)
    return pid


def kill(pid: int) -> None:
    """SIGKILL: the worker gets no chance to finish or clean up."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


@contextmanager
def worker():
    pid = start_worker()
    try:
        yield pid
    finally:
        kill(pid)


def wait_until(condition, seconds: float = 5.0, pause: float = 0.02):
    """Poll `condition` until it returns something true; fail after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {seconds}s for {condition.__doc__ or condition}")
        time.sleep(pause)
