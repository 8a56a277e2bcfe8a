"""The hostile run of `bench.reliability` (security issue 37): while other tenants' applications append
and fetch their model input, one member of another project sends every hostile input of the issue, over
real HTTP, against gunicorn with 4 workers and 2 task workers on PostgreSQL. Every other tenant's p99
must stay under a second, and nobody may get a 5xx.

The member's inputs: What if… previews and traces over a message built to make regular expressions
backtrack; a trace with eight wildcards; four compactions waited for at once from one key; an OTLP gzip
bomb and an export of 30,000 identical messages; an anonymous 200 MB upload; an import of nested
brackets; a request log naming another session; a Markdown export of hostile texts; a large import of
one-megabyte messages. Nothing here imports Django (the tenants' processes start with spawn)."""

import gzip
import http.client
import json
import random
import re
import socket
import threading
import time

ATTACKER_PASSWORD = "hostile-member-password-1"
BACKTRACKING = "1," * 20_000  # 40 KB: a What if… preview of it took 143 s before issue 37


def tenant(writer: int, port: int, secret: str, seconds: float, start, results) -> None:
    """An application of another tenant: append one to four messages, then fetch the model input, again
    and again for `seconds`; every call's latency and status."""
    from bench.client import call

    rng = random.Random(writer)
    latencies, statuses, n = [], {}, 0
    start.wait()
    deadline = time.monotonic() + seconds
    key = f"tenant-{writer}"
    while time.monotonic() < deadline:
        messages = [{"id": f"t{writer}-{n}-{i}", "role": "user" if i % 2 == 0 else "assistant",
                     "content": f"turn {n}.{i}: " + " ".join(rng.choice(("order", "refund", "Lisbon", "42"))
                                                              for _ in range(20))}
                    for i in range(rng.randint(1, 4))]
        n += 1
        for method, path, body in (("POST", f"/api/v1/sessions/{key}/messages", json.dumps({"messages": messages}).encode()),
                                   ("GET", f"/api/v1/sessions/{key}/model-input?format=openai", None)):
            try:
                status, _, seconds_taken = call(port, method, path, body, secret, timeout=30)
            except OSError:
                status, seconds_taken = 599, 30.0
            latencies.append(seconds_taken)
            statuses[status] = statuses.get(status, 0) + 1
    results.put({"writer": writer, "latencies": latencies, "statuses": statuses})


class Browser:
    """A dashboard user on plain HTTP: a cookie jar and CSRF, with http.client."""

    def __init__(self, port: int):
        self.port, self.cookies = port, {}

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                timeout: float = 60) -> tuple[int, bytes]:
        headers = {"Host": "127.0.0.1", **(headers or {})}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if method == "POST" and "csrftoken" in self.cookies:
            headers.setdefault("X-CSRFToken", self.cookies["csrftoken"])
            headers.setdefault("Referer", f"http://127.0.0.1:{self.port}/")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            for value in response.headers.get_all("Set-Cookie") or ():
                name, _, rest = value.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
            return response.status, data
        finally:
            conn.close()

    def log_in(self, username: str, password: str) -> None:
        self.request("GET", "/login/")
        form = f"username={username}&password={password}&csrfmiddlewaretoken={self.cookies['csrftoken']}".encode()
        status, _ = self.request("POST", "/login/", form, {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 302, f"log-in answered {status}"

    def upload(self, name: str, data: bytes, project: str) -> int:
        boundary = "ctxweb-hostile-boundary"
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"project\"\r\n\r\n{project}\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"format\"\r\n\r\nauto\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
                "Content-Type: application/json\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        status, _ = self.request("POST", "/import/", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"},
                                 timeout=300)
        return status


def anonymous_upload_claiming(port: int, size: int) -> int:
    """An upload with no cookie whose headers announce `size` bytes, of which only the first kilobytes are
    sent: the answer must come from the headers, before the body is read."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall((f"POST /import/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {size}\r\n"
                      "Content-Type: multipart/form-data; boundary=x\r\nConnection: close\r\n\r\n").encode())
        sock.sendall(b"--x\r\n" + b"a" * 4096)
        answer = sock.recv(200).decode(errors="replace")
    found = re.match(r"HTTP/1\.[01] (\d{3})", answer)
    return int(found.group(1)) if found else 0


def otlp(port: int, secret: str, body: bytes, encoding: str = "gzip") -> int:
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {secret}",
               "Content-Encoding": encoding}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/traces", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def attack(port: int, secret: str, project: str, session: str, victim: str, otlp_flood: bytes,
           username: str) -> dict[str, list[int]]:
    """Every hostile input of issue 37, several of them at once, as one member of `project` can send them.
    Returns the statuses each kind got."""
    from bench.client import call

    answers: dict[str, list[int]] = {}

    def note(kind: str, status: int) -> None:
        answers.setdefault(kind, []).append(status)

    browser = Browser(port)
    browser.log_in(username, ATTACKER_PASSWORD)
    base = f"/p/{project}/s/{session}/"

    def previews():
        for _ in range(80):  # past the heavy budget (60 a minute): the last are refused with 429
            note("what-if preview of a backtracking message",
                 browser.request("GET", f"{base}what-if/?max_tokens=200&keep_recent_tokens=10")[0])

    def traces():
        pattern = "a*" * 8 + "b"
        for _ in range(20):
            note("trace with 8 wildcards (dashboard)", browser.request("GET", f"{base}trace/?q={pattern}",
                                                                      headers={"HX-Request": "true"})[0])
            note("trace with 8 wildcards (API)", call(port, "GET", f"/api/v1/sessions/{session}/trace?q={pattern}",
                                                      secret=secret, timeout=60)[0])

    def waits():
        threads = [threading.Thread(target=lambda n=n: note("compaction waited for, 4 at once from one key", call(
            port, "POST", f"/api/v1/sessions/{session}-{n}/compact", json.dumps({"force": True}).encode(), secret,
            timeout=60)[0])) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def uploads():
        note("anonymous 200 MB upload", anonymous_upload_claiming(port, 200 * 1024 * 1024))
        note("nested brackets import (6 MB)", browser.upload("nested.json", b"[" * 6_000_000, project))
        forged = json.dumps({"conversation_id": victim, "messages": [{"role": "system", "content": "forged"},
                                                                     {"role": "user", "content": "forged"}],
                             "response": {"role": "assistant", "content": "forged"}}).encode()
        note("request log naming another session", browser.upload("forged.jsonl", forged, project))
        big = json.dumps([{"role": "user" if i % 2 == 0 else "assistant", "content": "x " * 500_000}
                          for i in range(30)]).encode()
        note("import of 30 one-megabyte messages", browser.upload("big.json", big, project))

    def exports():
        for _ in range(5):
            note("markdown export", browser.request("GET", f"{base}export.markdown")[0])

    def captures():
        bomb = gzip.compress(b"\0" * (512 * 1024 * 1024), compresslevel=9)
        note("OTLP gzip bomb (512 MiB of zeros)", otlp(port, secret, bomb))
        note("OTLP export of 30,000 identical messages", otlp(port, secret, otlp_flood))

    threads = [threading.Thread(target=work) for work in (previews, traces, waits, uploads, exports, captures)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers
