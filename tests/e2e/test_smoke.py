"""`mmo smoke` passing on the real Codex: the marker comes back from the scripted model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MMO = Path(sys.executable).parent / "mmo"
pytestmark = pytest.mark.real_codex


def test_an_offline_root_smoke_passes_on_real_codex(workspace):
    proc = subprocess.run(
        [str(MMO), "smoke", "access-efficient-escalation-lab",
         "--offline", "--root-only", "--cwd", str(workspace), "--wall", "120", "--json"],
        capture_output=True, text=True, timeout=180, env=dict(os.environ),
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] is True
    (root,) = report["results"]
    assert root["agent"] == "escalation_lead"
    assert root["marker_present"] is True and root["error"] is None
