"""The shell blocks marked `<!-- runnable -->` in README.md and in every docs/*.md, run as written (bash,
at the repository root, stopping at the first failing command) against a live server, with the variables
they expect (`CTXWEB_URL`, `CTXWEB_KEY`) already set, as the README says a reader may have them."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest

from sessions.access.api_keys import create_api_key

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
# The marker, then possibly other HTML comments (the walk-through's own markers), then the block.
RUNNABLE = re.compile(r"<!-- runnable -->\s*(?:<!--[^>]*-->\s*)*```sh\n(.*?)```", re.DOTALL)

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="the documents' blocks use curl")


def runnable_blocks(document: Path = README) -> list[str]:
    return RUNNABLE.findall(document.read_text())


def every_runnable_block() -> list[tuple[str, int]]:
    """(document, index) of every marked block of README.md and docs/*.md, the document relative to the root."""
    return [(str(document.relative_to(ROOT)), index)
            for document in DOCUMENTS for index in range(len(runnable_blocks(document)))]


def run(block: str, url: str, key: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LC_ALL": "C.UTF-8", "CTXWEB_URL": url, "CTXWEB_KEY": key}
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env)


@pytest.fixture
def server(live_server, project, settings) -> tuple[str, str]:
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, urlparse(live_server.url).hostname]
    settings.SECURE_SSL_REDIRECT = False
    return f"{live_server.url}/api/v1", create_api_key(project, "readme-walkthrough")[1]


def test_the_readme_marks_the_walkthrough_runnable():
    blocks = runnable_blocks()
    assert blocks, "README.md has no block marked <!-- runnable -->"
    assert any("curl" in block and "$CTXWEB_URL/sessions/readme-demo" in block for block in blocks)


@pytest.mark.parametrize(("document", "index"), every_runnable_block(),
                         ids=[f"{document}-{index}" for document, index in every_runnable_block()])
def test_each_runnable_block_exits_0_and_again_when_run_twice(server, document, index):
    block = runnable_blocks(ROOT / document)[index]
    for attempt in ("first", "second"):
        result = run(block, *server)
        assert result.returncode == 0, f"{attempt} run: {result.stderr}\n{result.stdout}"


def test_the_walkthrough_prints_each_answer_on_its_own_line(server):
    block = next(b for b in runnable_blocks() if "readme-demo" in b)
    result = run(block, *server)
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert len(answers) == block.count("curl ") == 6
    assert answers[0]["key"] == "readme-demo" and answers[-2]["items"]  # step 5: the events
    assert answers[-1]["session"] == "readme-openai"  # step 6: the append in OpenAI's own shape


def test_a_failing_request_stops_the_walkthrough_with_the_apis_error(server):
    url, _ = server
    block = next(b for b in runnable_blocks() if "readme-demo" in b)
    result = run(block, url, "ctx_not-a-key")
    assert result.returncode != 0
    assert json.loads(result.stdout.splitlines()[0])["code"] == "invalid_api_key"
    assert len(result.stdout.splitlines()) == 1  # the first failing step stops the rest
