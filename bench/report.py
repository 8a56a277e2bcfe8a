"""Figures, ratios against the targets, correctness checks, and how they are printed: a table
for people, then one line of JSON with every figure so two runs can be compared."""

import io
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass, field

STARTED = time.perf_counter()


def progress(message: str) -> None:
    print(f"[{time.perf_counter() - STARTED:7.1f}s] {message}", file=sys.stderr, flush=True)


@dataclass
class Figure:
    name: str
    unit: str
    samples: list[float]
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def as_dict(self) -> dict:
        return {
            "unit": self.unit,
            "median": self.median,
            "min": min(self.samples),
            "max": max(self.samples),
            "n": len(self.samples),
            **({"note": self.note} if self.note else {}),
        }


@dataclass
class Target:
    name: str
    value: float
    op: str  # "<=", ">=", "<", "=="
    limit: float
    unit: str = ""
    spec: str = ""  # the target's wording

    @property
    def met(self) -> bool:
        return {
            "<=": self.value <= self.limit,
            ">=": self.value >= self.limit,
            "<": self.value < self.limit,
            "==": self.value == self.limit,
        }[self.op]

    def as_dict(self) -> dict:
        return {"value": self.value, "target": f"{self.op} {self.limit:g}", "met": self.met, "spec": self.spec}


@dataclass
class Report:
    machine: dict = field(default_factory=dict)
    sizes: dict = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)
    targets: dict[str, Target] = field(default_factory=dict)
    checks: dict[str, str] = field(default_factory=dict)  # name -> "ok" or what went wrong
    notes: list[str] = field(default_factory=list)

    def figure(self, name: str, unit: str, samples: list[float], note: str = "") -> Figure:
        figure = Figure(name, unit, list(samples), note)
        self.figures[name] = figure
        progress(f"  {name}: median {fmt(figure.median)} {unit} (min {fmt(min(samples))}, max {fmt(max(samples))})")
        return figure

    def target(self, name: str, value: float, op: str, limit: float, unit: str = "", spec: str = "") -> Target:
        target = Target(name, value, op, limit, unit, spec)
        self.targets[name] = target
        progress(f"  target {name}: {fmt(value)}{unit} {op} {limit:g}{unit}: {'met' if target.met else 'MISSED'}")
        return target

    def check(self, name: str, ok: bool, problem: str = "") -> bool:
        """A correctness check: a failed one makes the run exit non-zero. Timings never do."""
        if ok:
            self.checks.setdefault(name, "ok")
        else:
            if self.checks.get(name, "ok") == "ok":  # the first problem is the one worth reading
                self.checks[name] = problem or "failed"
            progress(f"  CHECK FAILED {name}: {problem}")
        return ok

    def note(self, text: str) -> None:
        self.notes.append(text)
        progress(f"  note: {text}")

    @property
    def failed_checks(self) -> dict[str, str]:
        return {name: problem for name, problem in self.checks.items() if problem != "ok"}

    def print(self, out=sys.stdout) -> str:
        """Print the table for people, then the line of JSON; return the table as printed (for the docs)."""
        duration = time.perf_counter() - STARTED
        text = self.text(duration)
        print("\n" + text, file=out)
        print(json.dumps(self.as_dict(duration), separators=(",", ":")), file=out, flush=True)
        return text

    def text(self, duration: float) -> str:
        """The machine, the sizes, the figures and targets tables, the notes and the checks."""
        out = io.StringIO()
        print("ctxweb benchmark  " + "  ".join(f"{k}: {v}" for k, v in self.machine.items()), file=out)
        print("sizes  " + "  ".join(f"{k}={v}" for k, v in self.sizes.items()), file=out)
        print("", file=out)
        table(out, ("measurement", "median", "min", "max", "n", "unit"), [
            (f.name, fmt(f.median), fmt(min(f.samples)), fmt(max(f.samples)), str(len(f.samples)), f.unit)
            for f in self.figures.values()
        ], min_width=20)
        if self.targets:
            print("", file=out)
            table(out, ("target", "value", "target", "result"), [
                (t.name, fmt(t.value) + t.unit, t.op + " " + format(t.limit, "g") + t.unit, "met" if t.met else "MISSED")
                for t in self.targets.values()
            ])
        print("", file=out)
        for text in self.notes:
            print(f"note: {text}", file=out)
        failed = self.failed_checks
        print(
            f"correctness checks: {len(self.checks) - len(failed)} of {len(self.checks)} passed"
            + "".join(f"\n  FAILED {name}: {problem}" for name, problem in failed.items()),
            file=out,
        )
        print(f"run took {duration:.1f} s", file=out, end="")
        return out.getvalue()

    def as_dict(self, duration: float) -> dict:
        return {
            "machine": self.machine,
            "sizes": self.sizes,
            "figures": {name: f.as_dict() for name, f in self.figures.items()},
            "targets": {name: t.as_dict() for name, t in self.targets.items()},
            "checks": self.checks,
            "notes": self.notes,
            "duration_s": round(duration, 2),
        }


def table(out, header: tuple, rows: list[tuple], min_width: int = 0) -> None:
    """A plain-text table: the first column left-aligned, the others right-aligned, the last as it is."""
    width = max([len(row[0]) for row in rows] + [len(header[0]), min_width])
    widths = [width] + [12] * (len(header) - 2)

    def line(cells):
        head = "  ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(cells, widths, strict=False)))
        return f"{head}  {cells[-1]}"

    print(line(header), file=out)
    print("-" * (sum(widths) + 2 * len(widths) + 6), file=out)
    for row in rows:
        print(line(row), file=out)


def fmt(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def percentile(samples: list[float], p: float) -> float:
    """The p-th percentile (0-100) by nearest rank."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]
