"""The fixture execution host ``example_host`` (tests/fixtures/mmo-example-host), pip-installed.

It goes into a private ``--target`` directory, never into the venv: only processes
given that directory on ``PYTHONPATH`` have the host installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mmo-example-host"
HOST_NAME = "example_host"
LAUNCH_LOG = "example-host.jsonl"
"""One JSON line per launch, beside the job's record."""


def install_example_host(target: Path, build: Path) -> Path:
    """pip-install the fixture into ``target`` (built from a copy under ``build``)."""
    build.mkdir(parents=True, exist_ok=True)
    source = build / FIXTURE.name  # a copy: build/ and egg-info stay out of tests/
    shutil.copytree(FIXTURE, source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(source)],
        check=True, stdin=subprocess.DEVNULL, cwd=build,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert list(target.glob("mmo_example_host-0.4.0.dist-info"))
    return target


def with_site(site: Path | None) -> dict[str, str]:
    """This process's environment, with ``site`` as the only ``PYTHONPATH`` entry (or none)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return env
