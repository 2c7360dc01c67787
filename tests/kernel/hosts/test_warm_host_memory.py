"""A forked host starts with what keeps its own memory small (issue 15: <= 10 MiB).

It shares the warm host's frozen heap, finds the modules every host needs already
imported (a module imported after the fork is private to each host), and has its
collector on: the warm host imports with it off, and a host left without one would
never free a reference cycle.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.waiting import wait_until

from mmo_kernel.hosts import warm_host

PROBE = '''
import gc, json, sys
from pathlib import Path

if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps({
        "gc_enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
        "imported": sorted(name for name in sys.argv[2:] if name in sys.modules)}))
'''


@pytest.fixture
def probe(mmo_env, tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    (code / "memory_probe.py").write_text(PROBE, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(code))
    yield tmp_path
    warm_host.stop()


def _run(tmp_path: Path, name: str) -> dict:
    out = tmp_path / f"{name}.json"
    warm_host.spawn_module("memory_probe", [str(out), *warm_host.ALSO_IMPORTED],
                                    env=dict(os.environ), log_path=tmp_path / f"{name}.log")
    wait_until(out.exists, what=f"{name} to report")
    return json.loads(out.read_text())


def test_a_forked_host_shares_the_frozen_heap_and_collects_its_own_garbage(probe):
    for name in ("first", "second"):  # the second: the warm host kept its collector on too
        seen = _run(probe, name)
        assert seen["frozen"] > 0  # forked: a fresh interpreter has frozen nothing
        assert seen["gc_enabled"] is True
        assert seen["imported"] == sorted(warm_host.ALSO_IMPORTED)
