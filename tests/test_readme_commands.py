"""The commands of README.md and docs/*.md run as pasted on a fresh clone: a management command from a
development shell carries DEBUG=1 (without it, or a SECRET_KEY, settings refuse to load), and the
deployment (docs/deployment.md) installs what it runs."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEXT = "\n".join(document.read_text() for document in DOCUMENTS)
SH_BLOCKS = re.findall(r"```sh\n(.*?)```", TEXT, re.DOTALL)


def test_every_management_command_of_a_development_shell_sets_debug():
    commands = [span for span in re.findall(r"`([^`\n]*python manage\.py[^`\n]*)`", TEXT)]
    for block in SH_BLOCKS:
        if re.search(r"^export (?!CTXWEB_URL|CTXWEB_KEY)", block, re.MULTILINE):
            continue  # a deployment's block: it exports its environment (SECRET_KEY, DATABASE_URL, …)
        commands += [line for line in block.splitlines() if "manage.py" in line]
    assert len(commands) >= 5
    missing = [c for c in commands if "DEBUG=1" not in c]
    assert not missing, missing


def test_the_deployment_installs_gunicorn_through_the_deploy_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(requirement.startswith("gunicorn") for requirement in extras["deploy"])
    deployment = next(block for block in SH_BLOCKS if "gunicorn ctxweb.wsgi" in block)
    install = deployment.index("pip install '.[deploy]'")
    assert install < deployment.index("gunicorn ctxweb.wsgi")
    assert "export SECRET_KEY" in deployment


def test_the_documents_are_read():
    """README.md and the docs it links to, the deployment's block among them."""
    names = {document.relative_to(ROOT).as_posix() for document in DOCUMENTS}
    assert {"README.md", "docs/deployment.md"} <= names
    assert "gunicorn ctxweb.wsgi" in (ROOT / "docs" / "deployment.md").read_text()
