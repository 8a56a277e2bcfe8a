"""An OpenAI-compatible Chat Completions server on 127.0.0.1 with canned answers: a test queues the
assistant messages it should answer with (text or tool calls), and it records every request body."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        server = self.server.chat
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        server.received.append(body)
        message = server.answers.pop(0) if server.answers else {"role": "assistant",
                                                                  "content": f"Answer {len(server.received)}."}
        payload = json.dumps({
            "id": f"chatcmpl-{len(server.received)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "gpt-test"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 40 + len(server.received), "completion_tokens": 7, "total_tokens": 50},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args):
        pass


class ChatServer:
    def __init__(self):
        self.answers: list[dict] = []
        self.received: list[dict] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.chat = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
