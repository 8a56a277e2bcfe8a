"""How docs/capture-and-import.md has an application get the Python client: `pip install ./clients/python`,
the ctxweb-client distribution, into a fresh virtualenv (no system site-packages), then `ctxweb_client`
imported there, in a process of its own, and called against a live server. Neither Django nor the
server's packages (sessions, ctxweb) come with it. The build is pip's usual isolated one, so it fetches
setuptools from the package index (pip's cache serves it again)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.models import Message, Session
from tests.client.conftest import LIVE

ROOT = Path(__file__).resolve().parents[2]
# The client's distribution, copied, so that pip's in-tree build leaves no build/ or *.egg-info in the
# checkout.
CLIENT = ROOT / "clients" / "python"

APP = """
import json, sys
import ctxweb_client
from ctxweb_client import Client

url, key = sys.argv[1:3]
client = Client(url, key, timeout=10)
client.put_session("installed-app", title="From a fresh virtualenv")
appended = client.append("installed-app", [{"role": "user", "content": "Hello from an application"}])
model_input = client.model_input("installed-app", format="openai")
print(json.dumps({
    "client_file": ctxweb_client.__file__,
    "seqs": [m.seq for m in appended.messages],
    "messages": model_input.messages,
    "django_loaded": any(name == "django" or name.startswith("django.") for name in sys.modules),
}))
"""

pytestmark = LIVE


def pip_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.fixture(scope="module")
def app_python(tmp_path_factory) -> Path:
    """A fresh virtualenv with the client's distribution installed into it (it depends on nothing)."""
    base = tmp_path_factory.mktemp("application")
    source = base / "ctxweb-client"
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build"))
    # Without a pip of its own (ensurepip takes most of a quarter of a minute): the tests' pip installs
    # into it with --python, as the venv's own pip would.
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=pip_env(),
                   timeout=120)
    python = venv / "bin" / "python"
    result = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-v",
                             str(source)], capture_output=True, text=True, env=pip_env(), cwd=base, timeout=300)
    output = result.stdout + result.stderr
    if result.returncode != 0 and "No matching distribution found for setuptools" in output:
        # The isolated build fetches setuptools from the package index.
        if os.environ.get("CI") == "true":
            pytest.fail("the build needs setuptools>=77 from the package index, which is unreachable")
        pytest.skip("the build needs setuptools>=77 from the package index, which is unreachable")
    assert result.returncode == 0, output[-4000:]
    # The build itself warns of nothing deprecated (a `license` table did, several times).
    assert "project.license" not in output and "SetuptoolsDeprecationWarning" not in output, output[-4000:]
    return python


def test_the_installed_client_talks_to_a_live_server_without_django(app_python, live_server, api_secret,
                                                                     tmp_path):
    venv = app_python.parent.parent
    script = tmp_path / "app.py"
    script.write_text(APP)
    result = subprocess.run([str(app_python), "-I", str(script), live_server.url, api_secret],
                            capture_output=True, text=True, cwd=tmp_path, env=pip_env(), timeout=60)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)

    assert Path(seen["client_file"]).is_relative_to(venv), seen["client_file"]  # not this checkout's
    assert seen["django_loaded"] is False
    assert seen["seqs"] == [1]
    assert seen["messages"] == [{"role": "user", "content": "Hello from an application"}]
    session = Session.objects.get(key="installed-app")
    assert session.title == "From a fresh virtualenv"
    assert list(Message.objects.filter(session=session).values_list("content", flat=True)) == [
        "Hello from an application"]


@pytest.mark.parametrize("module", ["django", "sessions", "ctxweb"])
def test_neither_django_nor_the_server_comes_with_the_client(app_python, tmp_path, module):
    result = subprocess.run([str(app_python), "-I", "-c", f"import {module}"], capture_output=True, text=True,
                            env=pip_env(), cwd=tmp_path, timeout=60)
    assert result.returncode != 0 and f"No module named '{module}'" in result.stderr


def test_the_server_keeps_ctxweb_client_as_the_same_module():
    """One release more, `ctxweb.client` is `ctxweb_client` itself: the same classes under either name."""
    import ctxweb_client

    import ctxweb.client

    assert ctxweb.client is ctxweb_client and ctxweb.client.Client is ctxweb_client.Client
