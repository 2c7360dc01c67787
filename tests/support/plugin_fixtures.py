"""Third-party plugin distributions from tests/fixtures/, pip-installed as a user would.

Each goes into a private ``--target`` directory, never into the venv: only
processes given that directory on ``PYTHONPATH`` (``with_site``) have it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EXAMPLE_ROUTE = FIXTURES / "mmo-example-route"
EXAMPLE_HOST = FIXTURES / "mmo-example-host"

ECHO_FRAGMENT = """\
schema_version = 1
[routes.echo]
name = "Echo"
driver = "example_echo"
api_operator = "me"
access_product = "local"
options = { greeting = "Ahoy from the echo route" }

[models.echo__echo_small]
route = "echo"
upstream_id = "echo-small"
maker = "me"
"""
"""A catalog fragment whose ``echo`` route runs on the example route plugin."""


def pip_install(fixture: Path, target: Path, build: Path) -> Path:
    """pip-install ``fixture`` into ``target``, built from a copy under ``build`` (so
    setuptools' build/ and egg-info never land in tests/fixtures/)."""
    build.mkdir(parents=True, exist_ok=True)
    source = build / fixture.name
    shutil.copytree(fixture, source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(source)],
        check=True, stdin=subprocess.DEVNULL, cwd=build,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    return target


def with_site(site: Path | None) -> dict[str, str]:
    """This process's environment, with ``site`` as the only ``PYTHONPATH`` entry (or none)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return env
