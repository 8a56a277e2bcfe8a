"""The README's API walk-through, run as written against a live server over real HTTP with curl."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest

from sessions.access.api_keys import create_api_key
from sessions.models import Session

README = Path(__file__).resolve().parents[2] / "README.md"
STEP_MARK = "<<<ctxweb-walkthrough-step>>>"

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="the walk-through needs curl")


def walkthrough() -> str:
    text = README.read_text()
    block = re.search(r"<!-- walkthrough:start -->\s*```sh\n(.*?)```\s*<!-- walkthrough:end -->", text, re.DOTALL)
    assert block, "README.md has no ```sh block between the walkthrough markers"
    return block.group(1)


def script(url: str, key: str) -> tuple[str, int]:
    """The walk-through with our server and key, printing a mark after each step; and its step count."""
    chunks = [c.strip() for c in walkthrough().split("\n\n") if c.strip()]
    exports, steps = chunks[0].splitlines(), chunks[1:]
    assert [line.split("=")[0] for line in exports] == ["export CTXWEB_URL", "export CTXWEB_KEY"], exports
    lines = ["set -euo pipefail", f"export CTXWEB_URL={url}", f"export CTXWEB_KEY={key}"]
    for step in steps + [steps[2]]:  # and step 3 once more, as the README suggests after step 4
        lines += [step, f"printf '\\n{STEP_MARK}\\n'"]
    return "\n".join(lines) + "\n", len(steps) + 1


def test_the_readme_walkthrough_does_what_it_promises(live_server, project, settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, urlparse(live_server.url).hostname]
    settings.SECURE_SSL_REDIRECT = False
    key = create_api_key(project, "readme-walkthrough")[1]
    text, count = script(f"{live_server.url}/api/v1", key)

    result = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60,
                            cwd=README.parent, env={**os.environ, "LC_ALL": "C.UTF-8"})

    assert result.returncode == 0, result.stderr
    outputs = [o.strip() for o in result.stdout.split(STEP_MARK)][:-1]
    assert len(outputs) == count == 7, result.stdout
    created, appended, model_input, compaction, events, native, model_input_after = [json.loads(o) for o in outputs]

    # 1. The session, with its instructions and small threshold.
    assert created["key"] == "readme-demo"
    assert created["title"] == "README walk-through"
    assert created["instructions"] == "You are a weather assistant."
    assert created["compaction"] | {"summarizer": None} == {"max_tokens": 120, "keep_recent_tokens": 60,
                                                             "auto": False, "summarizer": None}
    assert created["message_count"] == 0

    # 2. Five messages stored, in order, with the client's ids.
    assert appended["session"] == "readme-demo"
    assert [(m["seq"], m["id"], m["stored"], m["duplicate"]) for m in appended["messages"]] == [
        (1, "m1", True, False), (2, "m2", True, False), (3, "m3", True, False), (4, "m4", True, False),
        (5, "m5", True, False)]
    assert appended["compaction"] is None

    # 3. The model input in OpenAI format, the instructions first.
    assert model_input["format"] == "openai"
    messages = model_input["messages"]
    assert messages[0] == {"role": "system", "content": "You are a weather assistant."}
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert messages[2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}
    assert messages[3]["tool_call_id"] == "call_1"

    # 4. Compaction completed: a checkpoint covering messages 1-4.
    assert compaction["status"] == "completed"
    assert (compaction["checkpoint"]["first_seq"], compaction["checkpoint"]["last_seq"]) == (1, 4)
    assert [e["type"] for e in compaction["events"]] == ["COMPACTION_STARTED", "COMPACTION_COMPLETED"]

    # 5. The events of that compaction.
    assert [e["type"] for e in events["items"]] == ["COMPACTION_STARTED", "COMPACTION_COMPLETED"]
    assert events["items"][1]["data"]["covered_seq_range"] == [1, 4]
    assert all(e["actor"] == "api:readme-walkthrough" for e in events["items"])

    # And afterwards the model input starts with the summary and holds only message 5.
    after = model_input_after["messages"]
    assert after[0] == {"role": "system", "content": "You are a weather assistant."}
    assert after[1]["role"] == "user"
    assert after[1]["content"].startswith("Summary of the earlier conversation, covering messages 1–4:")
    assert after[2:] == [{"role": "user", "content": "And in Porto?"}]
    assert model_input_after["checkpoint"]["id"] == compaction["checkpoint"]["id"]

    # 6. The same kind of conversation sent in OpenAI's own shape: its system message stored and made the
    # instructions, the image part and the tool call read into ctxweb's shape.
    assert native["session"] == "readme-openai" and native["compaction"] is None
    assert [m["stored"] for m in native["messages"]] == [True] * 5
    stored = Session.objects.get(key="readme-openai")
    assert stored.instructions == "You are a travel assistant."
    rows = list(stored.messages.order_by("seq").values_list("role", "content", "tool_calls"))
    assert [role for role, _, _ in rows] == ["system", "user", "assistant", "tool", "assistant"]
    assert rows[1][1][1]["type"] == "image" and rows[1][1][1]["url"].startswith("data:image/png;base64,")
    assert rows[2][2] == [{"id": "call_gate", "name": "flight_status", "arguments": '{"flight": "TP1351"}'}]


def test_without_a_key_the_walkthrough_stops_before_sending_anything(live_server, project, settings):
    """The steps are one && list: a missing key stops it at step 1, and no session is made."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, urlparse(live_server.url).hostname]
    settings.SECURE_SSL_REDIRECT = False
    chunks = [c.strip() for c in walkthrough().split("\n\n") if c.strip()]
    text = f"export CTXWEB_URL={live_server.url}/api/v1\nexport CTXWEB_KEY=\n" + "\n\n".join(chunks[1:]) + "\n"
    result = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60, cwd=README.parent,
                            env={**os.environ, "LC_ALL": "C.UTF-8"})
    assert result.returncode != 0
    assert "no API key" in result.stderr and result.stdout == ""
    assert not Session.objects.exists()
