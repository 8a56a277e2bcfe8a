"""Import memory (issue 15): peak RSS of a process importing a generated JSON Lines conversation, for a
file ten times larger than another. Each import runs in a fresh subprocess (`python -m bench.imports
FILE PROJECT`, on the benchmark's database) so its peak is its own; flat memory means the larger file's
peak is about the smaller one's. Both files take the streaming path (CTXWEB_IMPORT_STREAM_ABOVE=0), as
every chat-format file above 1 MiB does.
"""

import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.report import progress

TOOLS = ("get_weather", "lookup_order", "search_docs")


def write_conversation(path: Path, lines: int, seed: int = 15) -> int:
    """A JSON Lines OpenAI conversation of `lines` messages (questions, tool calls, results, answers),
    written line by line; returns its size in bytes."""
    rng = random.Random(seed)
    with path.open("w") as out:
        out.write(json.dumps({"role": "system", "content": "You are a support assistant. Be brief."}) + "\n")
        for n in range(1, lines):
            step = n % 4
            if step == 1:
                line = {"role": "user", "content": f"Question {n}: where is order {rng.randrange(10**6)}? "
                                                   + "Please check the shipping status and the invoice." * rng.randint(1, 3)}
            elif step == 2:
                arguments = json.dumps({"order_id": rng.randrange(10**6), "verbose": rng.random() < 0.5})
                line = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"call_{n}", "type": "function",
                     "function": {"name": rng.choice(TOOLS), "arguments": arguments}}]}
            elif step == 3:
                line = {"role": "tool", "tool_call_id": f"call_{n - 1}",
                        "content": json.dumps({"status": "shipped", "eta_days": rng.randint(1, 9)})}
            else:
                line = {"role": "assistant", "content": f"Order shipped; it arrives in {rng.randint(1, 9)} days."}
            out.write(json.dumps(line) + "\n")
    return path.stat().st_size


def import_in_subprocess(path: Path, project: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "bench.imports", str(path), project],
                          capture_output=True, text=True,
                          env={**os.environ, "DEBUG": "1", "CTXWEB_IMPORT_STREAM_ABOVE": "0"})
    if done.returncode != 0:
        raise RuntimeError(f"the import subprocess failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(bench) -> None:
    small, large = bench.sizes.import_lines
    results = {}
    for lines in (small, large):
        path = bench.tmp / f"import-{lines}.jsonl"
        size = write_conversation(path, lines)
        progress(f"  importing {lines:,} lines ({size / 2**20:.0f} MB) in a subprocess")
        project = f"bench-import-{lines}"
        bench.project.__class__.objects.create(name=project)
        results[lines] = outcome = import_in_subprocess(path, project)
        path.unlink()
        bench.report.check(f"import: {lines:,} lines stored", outcome["error"] is None and outcome["stored"] == lines,
                           f"{outcome}")
        bench.report.figure(f"import: peak RSS, {lines:,}-line JSONL ({size / 2**20:.0f} MB)", "MB", [outcome["peak_mb"]])
        bench.report.figure(f"import: rate, {lines:,}-line JSONL", "messages/s", [outcome["rate"]])
    ratio = results[large]["peak_mb"] / results[small]["peak_mb"]
    bench.report.figure(f"import: peak RSS {large:,} lines / {small:,} lines", "x", [ratio])
    bench.report.target("import memory flat: peak RSS for 10x the lines", ratio, "<=", 1.25, "x",
                        "issue 15: a 1,000,000-line JSONL import with flat memory")


def main(path: str, project_name: str) -> None:
    import django

    django.setup()
    from django.conf import settings

    from sessions.ingest.importers import import_path
    from sessions.models import Project

    settings.DEBUG = False
    started = time.perf_counter()
    report = import_path(Project.objects.get(name=project_name), Path(path))
    seconds = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"error": report.error, "stored": report.messages, "seconds": seconds,
                      "rate": report.messages / seconds, "peak_mb": peak_kb / 1024}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
