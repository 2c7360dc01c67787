"""Per-route figures over the window, from rows the gateway's own writer appended."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from mmo_kernel.gateway.request_log import RequestLog
from mmo_kernel.views.routes import RouteWindow

SID = "20261202-101500-team-abc123"


def _row(route: str, age: float, status: int = 200, latency: float = 10.0, **more) -> dict:
    at = datetime.fromtimestamp(time.time() - age, UTC).isoformat(timespec="milliseconds")
    return {"at": at.replace("+00:00", "Z"), "route": route, "status": status,
            "latency_ms": latency, "ttfb_ms": latency / 2,
            "usage": {"input_tokens": 100, "output_tokens": 7}, **more}


def test_requests_in_the_window_are_counted_per_route_and_per_session(mmo_env):
    log = RequestLog()
    for latency in (10.0, 20.0, 30.0, 40.0):
        log.write(_row("fast", 5, latency=latency, session_id=SID))
    log.write(_row("fast", 400))  # older than the window
    log.write(_row("slow", 3, status=502, error="upstream failed"))
    log.write(_row("slow", 2, fault="status_503", status=503))
    log.close()
    window = RouteWindow(window=300)
    window.refresh(time.time())

    fast, slow = window.figures()
    assert (fast.route, fast.requests, fast.errors, fast.input_tokens) == ("fast", 4, 0, 400)
    assert fast.latency_p50_ms == 25.0 and fast.ttfb_p50_ms == 12.5
    assert 30.0 < fast.latency_p95_ms <= 40.0
    assert (slow.route, slow.requests, slow.errors, slow.faults) == ("slow", 2, 2, 1)
    assert [f.route for f in window.figures(session_id=SID)] == ["fast"]

    read = window.bytes_read
    window.refresh(time.time())
    assert window.bytes_read == read  # nothing new: nothing read


def test_rows_age_out_and_torn_or_foreign_lines_are_skipped(mmo_env):
    log = RequestLog()
    log.write(_row("fast", 1))
    log.close()
    with log.path.open("ab") as out:
        out.write(b'not json\n{"route": 5}\n{"at":"2026-')
    window = RouteWindow(window=60)
    window.refresh(time.time())
    assert [f.requests for f in window.figures()] == [1]
    window.refresh(time.time() + 120)
    assert window.figures() == []
