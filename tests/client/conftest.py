"""The Python client against a live server (pytest-django's live_server, a real HTTP server in a
thread), and a tiny HTTP proxy that can hold a response back to simulate a timeout."""

import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ctxweb_client import Client

from sessions.access.api_keys import create_api_key
from sessions.models import Project

LIVE = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api_secret(transactional_db) -> str:
    project = Project.objects.get_or_create(name="default")[0]
    return create_api_key(project, "client-tests")[1]


@pytest.fixture
def client(live_server, api_secret) -> Client:
    return Client(live_server.url, api_secret, timeout=10, retries=2, backoff=0.05)


class SlowProxy:
    """Forwards every request to `upstream`. The first `hold` responses to requests whose path contains
    `path` are held `delay` seconds after the server answered, so the client gives up although the
    server did the work (a timeout on the way back)."""

    def __init__(self, upstream: str, path: str, delay: float, hold: int = 1):
        self.upstream, self.path, self.delay, self.hold = upstream.rstrip("/"), path, delay, hold
        self.forwarded: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                request = urllib.request.Request(proxy.upstream + self.path, data=body, method=self.command,
                                                 headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        status, payload, kind = response.status, response.read(), response.headers["Content-Type"]
                except urllib.error.HTTPError as error:
                    status, payload, kind = error.code, error.read(), error.headers["Content-Type"]
                proxy.forwarded.append(f"{self.command} {self.path}")
                if proxy.path in self.path and proxy.hold > 0:
                    proxy.hold -= 1
                    time.sleep(proxy.delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind or "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up waiting

            do_GET = do_POST = do_PUT = do_PATCH = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
