"""The session page's timeline axis reads in order whatever the session's length."""

from __future__ import annotations

import re

import pytest

from mmo_kernel.views.model import AgentView, SessionView
from mmo_kernel.webui.render import timeline


def _view(seconds: float) -> SessionView:
    span = {"kind": "turn", "label": "turn 1", "start": 1_000.0, "end": 1_000.0 + seconds,
            "status": "completed"}
    root = AgentView(key="root", session_id="s", agent="lead", status="completed",
                     stored_status="completed", timeline=[span])
    return SessionView(session_id="s", status="completed", stored_status="completed",
                       agents=[root])


@pytest.mark.parametrize("seconds, ticks", [
    (3.2, ["0.0s", "0.8s", "1.6s", "2.4s", "3.2s"]),  # whole seconds would repeat "0s 0s 1s"
    (40, ["0s", "10s", "20s", "30s", "40s"]),
    (600, ["0s", "2m30s", "5m00s", "7m30s", "10m00s"]),
])
def test_the_five_ticks_are_distinct_and_increasing(seconds, ticks):
    svg = timeline(_view(seconds), now=2_000_000.0)
    assert re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg) == ticks
