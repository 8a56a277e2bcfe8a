"""A small OpenAI-compatible Chat Completions endpoint on 127.0.0.1, served from a thread.

The `openai` summarizer talks to it through the real client library over real HTTP; the stub records
what it received and answers with a summary, an error status, or after a delay.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def do_POST(self):
        stub = self.server.stub
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        stub.received.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        if stub.delay:
            stub.release.wait(stub.delay)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
        elif stub.status != 200:
            self._send(stub.status, {"error": {"message": "the stub was told to fail", "type": "server_error"}})
        else:
            self._send(200, {
                "id": f"chatcmpl-stub-{len(stub.received)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "stub"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": stub.reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            })

    def _send(self, status: int, payload: dict):
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
            pass

    def log_message(self, format, *args):
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: "OpenAIStub"


class OpenAIStub:
    def __init__(self):
        self.reply = "Stub summary of the earlier conversation."
        self.status = 200
        self.delay = 0.0  # seconds to wait before answering
        self.received: list[dict] = []
        self.release = threading.Event()  # ends a delay early, so teardown never waits for it
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self):
        self._thread.start()

    def stop(self):
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def user_prompts(self) -> list[str]:
        """The text of every user message the stub received, in order."""
        return [
            m["content"]
            for request in self.received
            for m in request["body"].get("messages", [])
            if m.get("role") == "user" and isinstance(m.get("content"), str)
        ]
