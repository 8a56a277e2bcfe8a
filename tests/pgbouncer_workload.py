"""The workload tests/test_pgbouncer.py runs through pgbouncer in transaction mode, in a process of its own
(DATABASE_URL points at pgbouncer, CTXWEB_PGBOUNCER=1): appends with ids, model-input fetches, raw-log
pages and a compaction through the API, as an application sends them. Prints OK at the end.

`python tests/pgbouncer_workload.py NAME` (NAME: the project this process writes to)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from sessions.access.api_keys import create_api_key  # noqa: E402
from sessions.models import Project  # noqa: E402


def main(name: str) -> None:
    # The settings pgbouncer's transaction mode needs.
    assert connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] is True, connection.settings_dict
    assert connection.get_connection_params().get("prepare_threshold") is None, "prepared statements are on"
    project = Project.objects.create(name=name)
    secret = create_api_key(project, "pgbouncer")[1]
    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {secret}")

    def call(method, path, body=None):
        kwargs = {"content_type": "application/json", "data": body} if body is not None else {}
        response = getattr(client, method)("/api/v1" + path, **kwargs)
        assert response.status_code in (200, 201), (method, path, response.status_code, response.content[:500])
        return response.json()

    call("put", "/sessions/bounced", {"compaction": {"auto": False}})
    for turn in range(15):
        messages = [
            {"id": f"{turn}-u", "role": "user", "content": f"question {turn} " + "words " * 40},
            {"id": f"{turn}-a", "role": "assistant", "content": None,
             "tool_calls": [{"id": f"call{turn}", "name": "lookup", "arguments": "{\"n\": 1}"}]},
            {"id": f"{turn}-t", "role": "tool", "tool_call_id": f"call{turn}", "content": "result " * 30},
            {"id": f"{turn}-b", "role": "assistant", "content": f"answer {turn} " + "words " * 40},
        ]
        stored = call("post", "/sessions/bounced/messages", {"messages": messages})
        assert [m["seq"] for m in stored["messages"]] == list(range(4 * turn + 1, 4 * turn + 5)), stored
        again = call("post", "/sessions/bounced/messages", {"messages": messages[-2:]})  # a retry: duplicates
        assert all(m["duplicate"] for m in again["messages"]), again
        model_input = call("get", "/sessions/bounced/model-input?format=openai")
        assert model_input["messages"][-1]["content"].startswith(f"answer {turn}"), model_input["messages"][-1]
    page = call("get", "/sessions/bounced/messages?after=10&limit=20")  # the raw log reads in chunks
    assert [m["seq"] for m in page["items"]] == list(range(11, 31)), page
    compacted = call("post", "/sessions/bounced/compact",
                     {"max_tokens": 500, "keep_recent_tokens": 200, "force": True})
    assert compacted["status"] == "completed", compacted
    model_input = call("get", "/sessions/bounced/model-input")
    assert model_input["checkpoint"] is not None, model_input
    print("OK")


if __name__ == "__main__":
    main(sys.argv[1])
