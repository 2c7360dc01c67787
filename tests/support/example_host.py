"""The fixture execution host ``example_host`` (tests/fixtures/mmo-example-host), pip-installed.

It goes into a private ``--target`` directory, never into the venv: only processes
given that directory on ``PYTHONPATH`` have the host installed.
"""

from __future__ import annotations

from pathlib import Path

from support.plugin_fixtures import EXAMPLE_HOST, pip_install, with_site

HOST_NAME = "example_host"
LAUNCH_LOG = "example-host.jsonl"
"""One JSON line per launch, beside the job's record."""


def install_example_host(target: Path, build: Path) -> Path:
    """pip-install the fixture host into ``target``."""
    pip_install(EXAMPLE_HOST, target, build)
    assert list(target.glob("mmo_example_host-0.4.0.dist-info"))
    return target


__all__ = ["HOST_NAME", "LAUNCH_LOG", "install_example_host", "with_site"]
