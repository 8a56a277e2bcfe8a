"""Memory per request on a session of big messages (issue 16): `python bench/memory.py [--quick]`.

Builds, in a temporary SQLite database, one session of N messages of M characters each (quick: 60 x
1 MB; full: 300 x 1 MB; --messages and --chars change them), then runs each request in a process of
its own (a fresh interpreter with Django set up, logged in, one warm-up request on a small session) and
prints that process's peak RSS (getrusage of the child), its RSS before the request, the response's
bytes and the time it took. A streamed response is read chunk by chunk and thrown away, as a client
downloading it would. Nothing is timed against a limit: the figures are for the table of docs/security.md.
With --max-growth-mb N (CI runs `make memory-quick`, which gives 40) a request whose peak RSS grows
more than N MB above its RSS before the request, or that does not answer 200, fails the run: before
issue 16 the quick session's exports grew by about 180 MB.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEY = "big"
SESSION = f"/p/default/s/{KEY}/"
REQUESTS = {
    "export json": SESSION + "export.json",
    "export jsonl": SESSION + "export.jsonl",
    "export markdown": SESSION + "export.markdown",
    "session page": SESSION,
    "show all (#1)": SESSION + "messages/1/",
    "search (50 hits)": "/search/?q=lorem+ipsum",
    "API raw log (500)": f"/api/v1/sessions/{KEY}/messages?limit=500",
    "API export json": f"/api/v1/sessions/{KEY}/export",
}


def setup_django(db: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{db}"
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def rss_now_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def build(db: Path, messages: int, chars: int) -> None:
    setup_django(db)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from sessions.access.api_keys import create_api_key
    from sessions.ingest.append import append_messages
    from sessions.models import Membership, Project

    call_command("migrate", verbosity=0)
    project = Project.objects.get_or_create(name="default")[0]
    user = get_user_model().objects.create_user("bench", password="bench-password-not-used")
    Membership.objects.create(user=user, project=project, role=Membership.Role.ADMIN)
    append_messages(project, "small", [{"role": "user", "content": "hello"}], "bench")
    db.with_suffix(".key").write_text(create_api_key(project, "bench")[1])
    started = time.monotonic()
    for n in range(1, messages + 1):
        # Words, not one repeated character, so token counting sees ordinary text.
        text = (f"message {n} " + "lorem ipsum dolor sit amet " * (chars // 27 + 1))[:chars]
        append_messages(project, KEY, [{"role": "user" if n % 2 else "assistant", "content": text}], "bench")
        if n % 20 == 0:
            print(f"  built {n}/{messages} messages ({time.monotonic() - started:.0f} s)", file=sys.stderr)


def measure(db: Path, path: str) -> dict:
    """Run in the child: one request, then this process's figures as a line of JSON."""
    setup_django(db)
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(get_user_model().objects.get(username="bench"))
    client.get("/p/default/s/small/")  # warm-up: templates, URL resolvers, the connection
    before = rss_now_kb()
    started = time.monotonic()
    headers = {"Authorization": f"Bearer {db.with_suffix('.key').read_text()}"} if path.startswith("/api/") else {}
    response = client.get(path, headers=headers)
    size = 0
    streamed = response.streaming
    if streamed:
        for chunk in response.streaming_content:
            size += len(chunk)
    else:
        size = len(response.content)
    elapsed = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"status": response.status_code, "bytes": size, "streamed": streamed, "seconds": round(elapsed, 2),
            "rss_before_mb": round(before / 1024, 1), "peak_rss_mb": round(peak / 1024, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="60 messages instead of 300")
    parser.add_argument("--messages", type=int, help="messages in the session")
    parser.add_argument("--chars", type=int, default=1_000_000, help="characters per message (default 1,000,000)")
    parser.add_argument("--max-growth-mb", type=float, help="fail when a request's peak RSS grows more than this")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    messages = args.messages or (60 if args.quick else 300)
    if args.build:
        build(Path(args.db), messages, args.chars)
        return 0
    if args.measure is not None:
        print(json.dumps(measure(Path(args.db), args.measure)))
        return 0
    with tempfile.TemporaryDirectory(prefix="ctxweb-memory-") as tmp:
        db = Path(tmp) / "bench.sqlite3"
        print(f"building a session of {messages} messages of {args.chars:,} characters in {db}", file=sys.stderr)
        # The build runs in a child too, so this process stays small and holds no connection.
        subprocess.run([sys.executable, __file__, "--db", str(db), "--build",
                        "--messages", str(messages), "--chars", str(args.chars)], check=True, timeout=3600)
        print(f"\n{messages} messages x {args.chars:,} characters (SQLite)")
        print(f"{'request':<18} {'status':>6} {'response':>12} {'streamed':>8} {'RSS before':>11} {'peak RSS':>9} {'time':>7}")
        failed = False
        for name, path in REQUESTS.items():
            out = subprocess.run([sys.executable, __file__, "--db", str(db), "--measure", path],
                                 capture_output=True, text=True, timeout=1800)
            if out.returncode != 0:
                print(f"{name:<18} failed:\n{out.stderr[-2000:]}")
                failed = True
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{name:<18} {r['status']:>6} {r['bytes'] / 1e6:>9.1f} MB {'yes' if r['streamed'] else 'no':>8} "
                  f"{r['rss_before_mb']:>8.0f} MB {r['peak_rss_mb']:>6.0f} MB {r['seconds']:>6.1f}s")
            growth = r["peak_rss_mb"] - r["rss_before_mb"]
            if args.max_growth_mb is not None and (r["status"] != 200 or growth > args.max_growth_mb):
                print(f"  FAILED: status {r['status']}, peak RSS grew {growth:.0f} MB (bound {args.max_growth_mb:.0f} MB)")
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
