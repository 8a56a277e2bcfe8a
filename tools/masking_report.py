"""How well masking finds personal data, and what it costs: precision and recall of
sessions/access/masking.py on the labelled corpus (tests/pii/corpus.jsonl) by kind, and the time
to mask 1,000 real chat messages (tau-bench's airline conversations in tests/data: each message's text
and each tool call's arguments, in order), the median of --runs runs.

    .venv/bin/python tools/masking_report.py [--runs 5] [--misses]

--misses also prints each labelled span not found and each span found where none is labelled.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sessions.access.masking import mask  # noqa: E402
from tests.masking_corpus import corpus, score, tau_bench_messages  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--misses", action="store_true")
    args = parser.parse_args()

    records = corpus()
    result = score(records)
    print(f"corpus: {len(records)} records, {result.labelled.total()} labelled spans")
    print(result.table())
    if args.misses:
        for text, span in result.missed:
            print(f"missed {span['kind']}: {text[span['start'] : span['end']]!r} in {text!r}")
        for text, found in result.wrong:
            print(f"wrong {found.kind}: {text[found.start : found.end]!r} in {text!r}")

    messages = tau_bench_messages()[:1000]
    mask(messages[0])  # the first call loads libphonenumber's and stdnum's data
    times = []
    for _ in range(args.runs):
        started = time.perf_counter()
        for message in messages:
            mask(message)
        times.append(time.perf_counter() - started)
    characters = sum(map(len, messages))
    print(f"\nmasking {len(messages):,} tau-bench messages ({characters:,} characters): "
          f"{statistics.median(times):.3f} s (median of {args.runs}; fastest {min(times):.3f} s)")


if __name__ == "__main__":
    main()
