"""The background worker: django-tasks-db's `db_worker`, plus the sweep that keeps compaction runs and
import jobs alive (sessions/context/compaction_runs.py, sessions/ingest/import_jobs.py): at start, and every
CTXWEB_COMPACTION_SWEEP_INTERVAL seconds, runs and jobs cut off by a killed worker go back to the queue.
Run as many as you like, on as many machines as you like, against one database: a run is claimed by one of
them only.

A database that is locked (SQLite, while a long write holds it) or lost makes db_worker's loop raise, and
the process would exit with queued runs waiting for someone to start it again: the worker waits instead,
longer each time up to RETRY_MAX seconds, and goes on (a task cut off by the error is taken up again by
the sweep, once its lease has passed). What stops it is a signal, --batch or --max-tasks."""

import logging
import os
import threading
import time

from django.conf import settings
from django.db import DatabaseError, connection, connections
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV
from django_tasks_db.management.commands import db_worker

from sessions.context.compaction_runs import sweep_compaction_runs
from sessions.ingest.import_jobs import sweep_import_jobs

logger = logging.getLogger("sessions.context.compaction_runs")
RETRY_FIRST, RETRY_MAX = 1.0, 30.0  # seconds the worker waits after a database error, doubling


def sweep_forever(stopped: threading.Event) -> None:
    while True:
        try:
            acted = sweep_compaction_runs()
            if acted:
                logger.warning("compaction sweep: %d run(s) put back in the queue", acted)
            acted = sweep_import_jobs()
            if acted:
                logger.warning("import sweep: %d job(s) whose worker stopped put back in the queue", acted)
        except Exception:  # a locked or lost database: try again at the next interval
            logger.exception("compaction sweep failed")
        finally:
            connection.close()
        if stopped.wait(settings.CTXWEB_COMPACTION_SWEEP_INTERVAL):
            return


class Command(db_worker.Command):
    help = "Run the background worker (tasks of the database backend) with the compaction-run sweep"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--sweep-only", action="store_true",
                            help="only sweep compaction runs (beside a worker of another backend, e.g. RQ)")

    def handle(self, *args, sweep_only: bool = False, **options):
        reloading_parent = options.get("reload") and not options.get("batch") and os.environ.get(DJANGO_AUTORELOAD_ENV) != "true"
        stopped = threading.Event()
        if sweep_only:
            sweep_forever(stopped)
            return
        if not reloading_parent:  # the reloader's child process does the work
            threading.Thread(target=sweep_forever, args=(stopped,), name="compaction-sweep", daemon=True).start()
        try:
            self.work(*args, **options)
        finally:
            stopped.set()

    def work(self, *args, **options):
        pause = RETRY_FIRST
        while True:
            try:
                return super().handle(*args, **options)
            except DatabaseError as exc:  # locked or lost: wait, then take up the queue again
                logger.warning("worker: database error (%s); going on in %.0f s", exc, pause)
                connections.close_all()
                time.sleep(pause)
                pause = min(pause * 2, RETRY_MAX)
