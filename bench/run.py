"""ctxweb benchmarks: `python -m bench.run [--quick] [--only NAMES] [--keep]`.

Generates its own data in a database of its own: a SQLite file in a temporary directory, or, when
DATABASE_URL points at PostgreSQL, a database named ctxweb_bench (or $CTXWEB_BENCH_DATABASE) on that
server (created and dropped here; the database named in the URL is only used to issue CREATE/DROP
DATABASE). Progress goes to stderr; the table and a final line of JSON go to stdout. Failed
correctness checks make the exit status non-zero; timings never do.
"""

import argparse
import os
import platform
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bench.client import UNLIMITED
from bench.report import Report, progress

BENCH_DATABASE = "ctxweb_bench"


class Database:
    """The benchmark's own database, made fresh and removed afterwards."""

    def __init__(self, given_url: str, keep: bool, name: str = BENCH_DATABASE):
        self.given_url = given_url
        self.keep = keep
        self.name = name
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{name.replace('_', '-')}-"))
        self.url = ""
        self.admin_url = ""

    @property
    def postgres(self) -> bool:
        return urlsplit(self.given_url).scheme in ("postgres", "postgresql", "pgsql")

    def create(self) -> str:
        if not self.given_url or self.given_url.startswith("sqlite:"):
            self.url = f"sqlite:///{self.tmp / (self.name + '.sqlite3')}"
        elif self.postgres:
            parts = urlsplit(self.given_url)
            admin_db = parts.path.lstrip("/") or "postgres"
            if admin_db == self.name:
                admin_db = "postgres"
            self.admin_url = urlunsplit(parts._replace(path="/" + admin_db))
            self.url = urlunsplit(parts._replace(path="/" + self.name))
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            self._admin(f'CREATE DATABASE "{self.name}"')
        else:
            raise SystemExit(f"bench: DATABASE_URL must be SQLite or PostgreSQL, not {urlsplit(self.given_url).scheme}")
        return self.url

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(statement)

    def drop(self) -> None:
        if self.keep:
            progress(f"kept the benchmark database: DATABASE_URL={self.url}")
            if not self.postgres:
                return
        elif self.admin_url:
            try:
                self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            except Exception as exc:  # cleanup must not hide the run's outcome
                progress(f"could not drop {self.name}: {exc}")
        shutil.rmtree(self.tmp, ignore_errors=True)


def machine(report: Report) -> None:
    from django import get_version
    from django.db import connection

    if connection.vendor == "sqlite":
        import sqlite3

        version = f"SQLite {sqlite3.sqlite_version}"
    else:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            version = f"PostgreSQL {cursor.fetchone()[0]}"
    report.machine.update(
        cores=os.cpu_count(),
        load_at_start="/".join(f"{x:.1f}" for x in os.getloadavg()),
        database=version,
        python=platform.python_version(),
        django=get_version(),
        platform=platform.platform(terse=True),
    )


def start_django(database: Database, report: Report) -> None:
    """Create the run's database, set Django up on it in this process and migrate it."""
    os.environ["DATABASE_URL"] = database.create()
    os.environ["DEBUG"] = "1"  # to load the settings; switched off below, and the server runs with it off
    os.environ["ALLOWED_HOSTS"] = "127.0.0.1"
    os.environ.update(UNLIMITED)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    import django
    from django.core.management import call_command

    django.setup()
    from django.conf import settings

    # Measure as deployed: DEBUG off in this process too (no query log, no template debug info).
    # DEBUG=1 above only lets the settings load with the development secret and static files.
    settings.DEBUG = False
    progress(f"migrating {'PostgreSQL database ' + database.name if database.postgres else database.url}")
    call_command("migrate", verbosity=0, interactive=False)
    machine(report)


def close_django() -> None:
    try:
        from django.db import connections

        connections.close_all()
    except Exception:  # Django may not have started
        pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="about 10x smaller sizes and fewer repetitions (CI)")
    parser.add_argument("--only", default="", help="comma-separated measurements to run (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    args = parser.parse_args(argv)

    database = Database(os.environ.get("DATABASE_URL", ""), args.keep,
                        name=os.environ.get("CTXWEB_BENCH_DATABASE", BENCH_DATABASE))
    report = Report()
    try:
        start_django(database, report)
        progress("machine: " + ", ".join(f"{k} {v}" for k, v in report.machine.items()))

        from bench.measures import MEASUREMENTS, Bench

        only = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = set(only) - set(MEASUREMENTS)
        if unknown:
            parser.error(f"unknown measurement(s) {', '.join(sorted(unknown))}; choose from {', '.join(MEASUREMENTS)}")
        bench = Bench(report, quick=args.quick, database_url=database.url, tmp=database.tmp)
        try:
            bench.run(only or list(MEASUREMENTS))
        except Exception as exc:  # report what was measured, then fail the run
            traceback.print_exc()
            report.check("the run completed", False, f"{type(exc).__name__}: {exc}")
        finally:
            bench.close()
    finally:
        close_django()
        database.drop()
    report.machine["load_at_end"] = "/".join(f"{x:.1f}" for x in os.getloadavg())
    report.print()
    return 1 if report.failed_checks else 0


if __name__ == "__main__":
    sys.exit(main())
