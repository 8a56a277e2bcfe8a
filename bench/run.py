"""ctxweb benchmarks: `python -m bench.run [--quick] [--only NAMES] [--keep] [--write-doc [PATH]]`.

Generates its own data in a database of its own: a SQLite file in a temporary directory, or, when
DATABASE_URL points at PostgreSQL, a database named ctxweb_bench (or $CTXWEB_BENCH_DATABASE) on that
server (created and dropped here; the database named in the URL is only used to issue CREATE/DROP
DATABASE). Progress goes to stderr; the table and a final line of JSON go to stdout. Failed
correctness checks make the exit status non-zero; timings never do. With --write-doc (`make bench`), a
run whose checks all passed also writes its table, dated, into docs/performance.md (or PATH).
"""

import argparse
import os
import platform
import shlex
import shutil
import sys
import tempfile
import traceback
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bench.client import UNLIMITED
from bench.report import Report, progress

BENCH_DATABASE = "ctxweb_bench"
# Where `make bench` writes its latest table: between these two markers, which the document must hold.
DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
TABLE_START = "<!-- bench:table:start -->"
TABLE_END = "<!-- bench:table:end -->"


class DocMarkersError(ValueError):
    """The document has no place for the table: its markers are missing, repeated or out of order."""


def write_doc(path: Path, report_text: str, *, database: str, cpus: int | None, command: str,
              when: datetime | None = None) -> None:
    """Replace the text between the bench:table markers of `path` with a line giving the date (UTC), the
    database, the CPU count and the command, then the report's table as a code block. The rest of the
    document is kept as it is; without its markers nothing is written and DocMarkersError says why."""
    text = Path(path).read_text()
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if text.count(TABLE_START) != 1 or text.count(TABLE_END) != 1 or end < start:
        raise DocMarkersError(
            f"{path} must hold the line {TABLE_START} once, then the line {TABLE_END} once: "
            "the benchmark table is written between them, and nothing was written")
    when = (when or datetime.now(UTC)).astimezone(UTC)
    fence = "```"
    while fence in report_text:
        fence += "`"
    block = (f"{when:%Y-%m-%d %H:%M} UTC, {database}, {cpus} CPU{'' if cpus == 1 else 's'}: `{command}`\n\n"
             f"{fence}text\n{report_text.strip(chr(10))}\n{fence}\n")
    updated = text[:start + len(TABLE_START)] + "\n" + block + text[end:]
    scratch = Path(path).with_name(Path(path).name + ".tmp")
    scratch.write_text(updated)
    scratch.replace(path)


def command_line(argv: list[str], postgres: bool) -> str:
    """The command as a reader would type it again: `make bench` when make ran it with its own options,
    else the module's; the database URL only as its scheme (it may hold a password)."""
    if os.environ.get("MAKELEVEL") and argv == ["--write-doc"]:
        command = "make bench"
    else:
        command = shlex.join(["python", "-m", "bench.run", *argv])
    return f"DATABASE_URL=postgres://... {command}" if postgres else command


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
    parser.add_argument("--write-doc", nargs="?", const=str(DOC), default=None, metavar="PATH",
                        help="after a run whose checks all pass, write its dated table between the bench:table "
                             f"markers of PATH (default {DOC.relative_to(DOC.parent.parent)})")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else list(argv)

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
    text = report.print()
    if report.failed_checks:
        return 1
    if args.write_doc:
        try:
            write_doc(Path(args.write_doc), text, database=report.machine.get("database", "unknown database"),
                      cpus=report.machine.get("cores"), command=command_line(argv, database.postgres))
        except (DocMarkersError, OSError) as exc:
            print(f"bench: the table was not written: {exc}", file=sys.stderr)
            return 2
        progress(f"wrote the table into {args.write_doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
