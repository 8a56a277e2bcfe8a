"""The client side of the reliability runs (bench/reliability.py): message batches, and a writer that
posts them over real HTTP and retries what was not acknowledged. Nothing here imports Django, so the
writer processes (multiprocessing, spawn) start without it."""

import http.client
import json
import random
import time

from bench.client import call

WORDS = (
    "invoice refund order flight seat baggage delay hotel booking customer account password email "
    "shipment address warehouse payment card receipt schedule meeting report summary deploy build test "
    "error timeout retry queue worker database index migration cache token context window checkpoint"
).split()


def words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def turn(rng: random.Random, prefix: str) -> list[dict]:
    """A user question, then an answer, or a tool call, its result and an answer. Ids start with
    `prefix`, which is unique per batch, so every id of a run is unique."""
    question = {"id": f"{prefix}u", "role": "user", "content": words(rng, 5, 40).capitalize() + "?"}
    if rng.random() < 0.4:
        return [question, {"id": f"{prefix}a", "role": "assistant", "content": words(rng, 10, 120)}]
    call_id = f"{prefix}call"
    return [
        question,
        {"id": f"{prefix}c", "role": "assistant", "content": None,
         "tool_calls": [{"id": call_id, "name": "lookup", "arguments": json.dumps({"q": words(rng, 1, 4)})}]},
        {"id": f"{prefix}r", "role": "tool", "tool_call_id": call_id,
         "content": json.dumps({"status": "ok", "items": [words(rng, 3, 12) for _ in range(rng.randint(1, 30))]})},
        {"id": f"{prefix}a", "role": "assistant", "content": words(rng, 10, 80)},
    ]


def batch(rng: random.Random, prefix: str, turns: int) -> list[dict]:
    return [m for t in range(turns) for m in turn(rng, f"{prefix}t{t}-")]


def post(port: int, secret: str, path: str, body: bytes, timeout: float) -> tuple[str, int, dict]:
    """("ok"|"http"|"refused"|"failed", status, parsed body). "refused": no server listening, nothing
    was carried out. "failed": no answer (reset, timed out, or cut off mid-answer): the request may or
    may not have been carried out."""
    try:
        status, data, _ = call(port, "POST", path, body, secret, timeout=timeout)
    except ConnectionRefusedError as exc:
        return "refused", 0, {"error": f"{type(exc).__name__}: {exc}"}
    except (OSError, http.client.HTTPException) as exc:
        return "failed", 0, {"error": f"{type(exc).__name__}: {exc}"}
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        parsed = {"raw": data[:300].decode(errors="replace")}
    return ("ok" if status == 200 else "http"), status, parsed


def append_until_acknowledged(port_of, secret: str, key: str, messages: list[dict], *, timeout: float,
                              deadline: float, log: dict) -> dict | None:
    """POST one batch until the server acknowledges it (HTTP 200), retrying the very same body after
    every failure, as a client that lost its answer must. `port_of()` gives the server's current port.
    Returns the acknowledged response, or None when `deadline` (monotonic) passed first."""
    body = json.dumps({"messages": messages}).encode()
    attempts = 0
    while time.monotonic() < deadline:
        attempts += 1
        started = time.monotonic()
        outcome, status, data = post(port_of(), secret, f"/api/v1/sessions/{key}/messages", body, timeout)
        if outcome == "ok":
            log["latencies"].append(time.monotonic() - started)
            log["retries"] += attempts - 1
            return data
        if outcome == "http":
            if status < 500:
                log["problems"].append(f"{key}: HTTP {status} {str(data)[:300]}")
                return None
            log["server_errors"] += 1
        else:
            log[outcome] += 1
        time.sleep(0.05)
    log["problems"].append(f"{key}: batch not acknowledged before the deadline after {attempts} attempts")
    return None


def new_log() -> dict:
    return {"latencies": [], "retries": 0, "refused": 0, "failed": 0, "server_errors": 0, "problems": [], "acks": [],
            "compactions": []}


def load_writer(writer: int, port: int, secret: str, shared: list[str], batches: int, compact_every: int,
                seed: int, seconds: float, start, results) -> None:
    """One of the load run's writer processes: `batches` batches of 1-3 turns, each to one of the
    shared sessions or to the writer's own, with a compaction request every `compact_every` batches.
    Reports every acknowledgement (session, ids, seqs, stored flags) on `results`."""
    rng = random.Random(seed * 1000 + writer)
    log = new_log()
    own = f"solo-{writer}"
    start.wait()
    began = time.monotonic()
    deadline = began + seconds
    for b in range(batches):
        if time.monotonic() > deadline:
            log["problems"].append(f"writer {writer}: stopped at batch {b} of {batches}: time bound reached")
            break
        key = rng.choice(shared) if rng.random() < 0.6 else own
        messages = batch(rng, f"w{writer}-b{b}-", rng.randint(1, 3))
        data = append_until_acknowledged(lambda: port, secret, key, messages, timeout=120, deadline=deadline, log=log)
        if data is not None:
            log["acks"].append({
                "key": key, "ids": [m["id"] for m in messages],
                "seqs": [m["seq"] for m in data["messages"]], "stored": [m["stored"] for m in data["messages"]],
                "compaction": (data.get("compaction") or {}).get("status"),
            })
        if compact_every and b % compact_every == compact_every - 1:
            target = rng.choice([*shared, own])
            request = {"force": rng.random() < 0.5, "keep_recent_tokens": rng.choice([300, 800, 1500])}
            outcome, status, data = post(port, secret, f"/api/v1/sessions/{target}/compact",
                                         json.dumps(request).encode(), 120)
            if outcome == "ok" or status == 202:  # 202: the run is still on the worker after the wait bound
                log["compactions"].append({"key": target, "status": data.get("status"), "reason": data.get("reason")})
            elif status == 409 and data.get("code") == "compaction_in_progress":
                log["compactions"].append({"key": target, "status": "in_progress", "reason": None})
            else:
                log["problems"].append(f"compact {target}: {outcome} HTTP {status} {str(data)[:300]}")
    log["began"], log["ended"], log["writer"] = began, time.monotonic(), writer
    results.put(log)
