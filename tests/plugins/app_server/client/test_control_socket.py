"""The host control socket: paths, one-line exchanges, lost replies, generation safety."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mmo_kernel.errors import ControlDeliveryUnknown
from mmo_kernel.hosts.control_socket import (
    MAX_SOCKET_PATH_BYTES,
    ControlNotDelivered,
    ControlRequestRejected,
    ControlServer,
    app_server_socket_path,
    send_control_request,
)


@pytest.fixture
def control_path(mmo_env: Any, request: pytest.FixtureRequest) -> Any:
    path = app_server_socket_path(f"control:job:{request.node.name}")
    yield path
    for leftover in (path, path.with_name(path.name + ".generation")):
        leftover.unlink(missing_ok=True)


def test_socket_path_is_short_private_and_deterministic(mmo_env: Any, monkeypatch: Any,
                                                        tmp_path: Path) -> None:
    long_job = "20260101-000000-" + "a-very-long-slug-" * 12 + "x1y2z3"
    path = app_server_socket_path(f"control:job:{long_job}")
    assert len(os.fsencode(path)) < MAX_SOCKET_PATH_BYTES
    assert path == app_server_socket_path(f"control:job:{long_job}")
    assert path != app_server_socket_path("control:job:other")
    info = os.lstat(path.parent)
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
    assert mmo_env.state_dir not in path.parents  # not in the (possibly long) state dir

    deep_state = tmp_path / ("state-dir-with-a-long-name-" * 6)
    monkeypatch.setenv("MMO_STATE_DIR", str(deep_state))
    other = app_server_socket_path(f"control:job:{long_job}")
    assert len(os.fsencode(other)) < MAX_SOCKET_PATH_BYTES
    assert other != path  # another state dir never shares a host's socket


def test_socket_path_rejects_bad_names(mmo_env: Any) -> None:
    for bad in ("", "   ", "a\0b", None):
        with pytest.raises(ValueError, match="socket name"):
            app_server_socket_path(bad)  # type: ignore[arg-type]


def test_long_socket_path_is_refused_before_binding(tmp_path: Path) -> None:
    long_path = tmp_path / ("s" * 120 + ".sock")
    with pytest.raises(ValueError, match="shorter than 104"):
        ControlServer(long_path, lambda request: {})
    with pytest.raises(ValueError, match="shorter than 104"):
        send_control_request(long_path, {"action": "inspect"})
    assert not long_path.exists()


def test_exchange_returns_result_and_typed_refusals(control_path: Path) -> None:
    def handler(request: dict[str, Any]) -> Any:
        if request["action"] == "respond":
            raise RuntimeError("invalid fields: response must carry decision")
        return {"control_revision": 3, "echo": request}

    with ControlServer(control_path, handler):
        assert stat.S_IMODE(os.lstat(control_path).st_mode) == 0o600
        reply = send_control_request(control_path, {"action": "inspect", "n": 1})
        assert reply == {"result": {"control_revision": 3,
                                    "echo": {"action": "inspect", "n": 1}}}
        with pytest.raises(ControlRequestRejected, match="invalid fields") as refused:
            send_control_request(control_path, {"action": "respond"})
        assert refused.value.kind == "RuntimeError"
        with pytest.raises(ValueError, match="action"):
            send_control_request(control_path, {"no_action": True})


def test_concurrent_clients_each_get_their_own_reply(control_path: Path) -> None:
    seen: list[int] = []

    def handler(request: dict[str, Any]) -> Any:
        seen.append(request["n"])
        time.sleep(0.002)
        return {"n": request["n"]}

    with ControlServer(control_path, handler):
        with ThreadPoolExecutor(max_workers=16) as pool:
            replies = list(pool.map(
                lambda n: send_control_request(control_path, {"action": "inspect", "n": n}),
                range(64)))
    assert [reply["result"]["n"] for reply in replies] == list(range(64))
    assert sorted(seen) == list(range(64))


def test_nothing_listening_is_not_delivered(control_path: Path) -> None:
    with pytest.raises(ControlNotDelivered, match="not delivered"):
        send_control_request(control_path, {"action": "interrupt"})
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.fspath(control_path))  # a dead host's file: bound, never listening
    stale.close()
    with pytest.raises(ControlNotDelivered, match="no host is listening"):
        send_control_request(control_path, {"action": "interrupt"})


def test_reply_lost_after_send_is_delivery_unknown(control_path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(os.fspath(control_path))
    listener.listen(1)
    received: list[bytes] = []

    def read_then_hang_up() -> None:
        conn, _ = listener.accept()
        received.append(conn.recv(65536))
        conn.close()

    worker = threading.Thread(target=read_then_hang_up)
    worker.start()
    try:
        with pytest.raises(ControlDeliveryUnknown, match="may or may not have been applied"):
            send_control_request(control_path, {"action": "steer", "expected_revision": 4})
    finally:
        worker.join()
        listener.close()
    assert b'"expected_revision":4' in received[0]


def test_slow_host_times_out_as_delivery_unknown(control_path: Path) -> None:
    release = threading.Event()
    applied: list[str] = []

    def handler(request: dict[str, Any]) -> Any:
        release.wait(5)
        applied.append(request["action"])
        return {}

    with ControlServer(control_path, handler):
        with pytest.raises(ControlDeliveryUnknown, match="reply was lost"):
            send_control_request(control_path, {"action": "continue"}, timeout=0.3)
        release.set()
    assert applied == ["continue"]  # it *was* applied: exactly why the caller cannot say


HOST_THAT_DIES = """
import os, sys
from mmo_kernel.hosts.control_socket import ControlServer
def handler(request):
    if request["action"] == "die":
        os._exit(9)
    return {"alive": True}
server = ControlServer(sys.argv[1], handler).start()
print("ready", flush=True)
sys.stdin.read()
"""


def test_host_dying_mid_request_is_delivery_unknown(control_path: Path) -> None:
    host = subprocess.Popen([sys.executable, "-c", HOST_THAT_DIES, os.fspath(control_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert host.stdout is not None and host.stdout.readline() == b"ready\n"
        assert send_control_request(control_path, {"action": "inspect"}) == {
            "result": {"alive": True}}
        with pytest.raises(ControlDeliveryUnknown):
            send_control_request(control_path, {"action": "die"})
        assert host.wait(timeout=5) == 9
    finally:
        host.kill()
        host.wait()
    # its socket file is left behind; the next generation replaces it
    with ControlServer(control_path, lambda request: "next"):
        assert send_control_request(control_path, {"action": "inspect"})["result"] == "next"


HOST_THAT_STOPS = """
import sys, threading, time
from mmo_kernel.hosts.control_socket import ControlServer
stopping = threading.Event()
def handler(request):
    stopping.set()  # the host's main thread starts retiring now...
    time.sleep(0.5)  # ...while this reply is still being written (a record update)
    return {"pausing": True}
server = ControlServer(sys.argv[1], handler).start()
print("ready", flush=True)
stopping.wait()
server.close()
"""


def test_a_control_that_ends_the_host_still_gets_its_reply(control_path: Path) -> None:
    host = subprocess.Popen([sys.executable, "-c", HOST_THAT_STOPS, os.fspath(control_path)],
                            stdout=subprocess.PIPE)
    try:
        assert host.stdout is not None and host.stdout.readline() == b"ready\n"
        assert send_control_request(control_path, {"action": "pause"}) == {
            "result": {"pausing": True}}
        assert host.wait(timeout=10) == 0
    finally:
        host.kill()
        host.wait()


def test_retiring_server_never_unlinks_a_newer_generation(control_path: Path) -> None:
    old = ControlServer(control_path, lambda request: "old").start()
    with pytest.raises(RuntimeError, match="served by a live host"):
        ControlServer(control_path, lambda request: "rival").start()
    new = ControlServer(control_path, lambda request: "new").start(replace_live=True)
    assert not old.owns_path() and new.owns_path()
    old.close()
    assert control_path.exists()
    assert send_control_request(control_path, {"action": "inspect"})["result"] == "new"
    new.close()
    assert not control_path.exists()
    assert not control_path.with_name(control_path.name + ".generation").exists()


def test_server_refuses_to_replace_a_non_socket(control_path: Path) -> None:
    control_path.write_text("not a socket", encoding="utf-8")
    with pytest.raises(RuntimeError, match="not a socket"):
        ControlServer(control_path, lambda request: {}).start()
    assert control_path.read_text(encoding="utf-8") == "not a socket"


def test_garbage_request_line_gets_a_clear_refusal(control_path: Path) -> None:
    with ControlServer(control_path, lambda request: {}):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(os.fspath(control_path))
            conn.sendall(b"{not json\n")
            reply = conn.makefile("rb").readline()
    assert b'"type":"ValueError"' in reply and b"invalid control request" in reply
