"""The gateway's async fast path: pooled upstream connections, framing, failures, fallback.

Each test runs a raw loopback upstream (a real socket server whose replies
the test scripts byte for byte) behind a real gateway.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.gateway_harness import Gateway, make_model, make_route

from mmo_kernel.config.catalog import Route
from mmo_kernel.gateway.request_log import RequestLog
from mmo_kernel.gateway.server import GatewayServer, GatewayThread
from mmo_kernel.gateway.sources import StaticCatalog
from mmo_kernel.plugin.manager import get_driver

KEY = "sk-fast-path-0123456789"
DONE = (b'event: response.completed\ndata: {"type":"response.completed","response":'
        b'{"id":"r1","usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}}\n\n')
DELTA = (b'event: response.output_text.delta\n'
         b'data: {"type":"response.output_text.delta","delta":"hi"}\n\n')


def chunked(*parts: bytes, end: bool = True) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
    return body + (b"0\r\n\r\n" if end else b"")


STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")


class RawUpstream:
    """Accepts connections; ``reply(conn_index, request_index, sock)`` answers each request."""

    def __init__(self, reply: Callable[[int, int, socket.socket], bool]) -> None:
        self.reply = reply
        self.connections = 0
        self.requests: list[bytes] = []
        self.closed_by_peer = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._threads: list[threading.Thread] = []
        self._stop = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def _accept(self) -> None:
        while not self._stop:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            index = self.connections
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(sock, index), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, sock: socket.socket, index: int) -> None:
        buffer, served = b"", 0
        with sock:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = sock.recv(65536)
                    if not data:
                        self.closed_by_peer.set()
                        return
                    buffer += data
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                while len(rest) < length:
                    rest += sock.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + rest[:length])
                buffer = rest[length:]
                keep = self.reply(index, served, sock)
                served += 1
                if not keep:
                    return

    def __enter__(self) -> RawUpstream:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._listener.close()


@pytest.fixture
def gateway(mmo_env, tmp_path, monkeypatch) -> Callable[..., Any]:
    monkeypatch.setenv("FAST_KEY", KEY)

    def serve(routes: list[Route], driver_for: Callable[[str], Any] | None = None):
        models = [make_model(r.id) for r in routes]
        server = GatewayServer(StaticCatalog(routes, models), RequestLog(tmp_path / "log.jsonl"),
                               driver_for=driver_for or (lambda n: get_driver("route_drivers", n)))
        return _running(server, tmp_path)

    return serve


def _running(server: GatewayServer, tmp_path) -> Any:
    from contextlib import contextmanager

    @contextmanager
    def run() -> Iterator[Gateway]:
        with GatewayThread(server) as thread:
            yield Gateway(thread.url, tmp_path / "log.jsonl")
    return run()


def body(route_id: str) -> dict[str, Any]:
    return {"model": f"{route_id}__m1", "input": "hi", "stream": True}


def responses_route(url: str, **options: Any) -> Route:
    return make_route("fast", "openai_responses", url, credential_env="FAST_KEY",
                      options=options or {})


def test_keep_alive_connection_is_reused_and_bytes_pass_through(gateway):
    def reply(conn: int, req: int, sock: socket.socket) -> bool:
        sock.sendall(STREAM_HEAD + chunked(DELTA, DELTA + DONE))
        return True

    with RawUpstream(reply) as up, gateway([responses_route(up.url)]) as gw:
        first = gw.responses("fast", body("fast"))
        second = gw.responses("fast", body("fast"))
        records = gw.log()
    assert first.status == second.status == 200
    assert first.body == second.body == DELTA + DELTA + DONE
    assert up.connections == 1 and len(up.requests) == 2
    head = up.requests[0].split(b"\r\n\r\n")[0].decode()
    assert f"Authorization: Bearer {KEY}" in head and "Host: 127.0.0.1:" in head
    assert json.loads(up.requests[0].split(b"\r\n\r\n", 1)[1])["model"] == "upstream-m1"
    assert [r["usage"]["total_tokens"] for r in records] == [7, 7]


def test_a_pooled_connection_the_upstream_closed_is_replaced_transparently(gateway):
    def reply(conn: int, req: int, sock: socket.socket) -> bool:
        sock.sendall(STREAM_HEAD + chunked(DONE))
        return False  # closes after every answer, without saying so

    with RawUpstream(reply) as up, gateway([responses_route(up.url)]) as gw:
        answers = [gw.responses("fast", body("fast")) for _ in range(3)]
    assert [a.status for a in answers] == [200, 200, 200]
    assert all(a.body == DONE for a in answers)
    assert up.connections == 3


@pytest.mark.parametrize("framing", ["content-length", "close-delimited", "extensions+trailers"])
def test_every_body_framing_is_relayed_whole(gateway, framing):
    payload = DELTA * 3 + DONE

    def reply(conn: int, req: int, sock: socket.socket) -> bool:
        if framing == "content-length":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload))
            return True
        if framing == "close-delimited":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + payload)
            return False
        sock.sendall(STREAM_HEAD + b"%x;ext=1\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n"
                     % (len(payload), payload))
        return True

    with RawUpstream(reply) as up, gateway([responses_route(up.url)]) as gw:
        answers = [gw.responses("fast", body("fast")) for _ in range(2)]
    assert [a.body for a in answers] == [payload, payload]
    assert up.connections == (2 if framing == "close-delimited" else 1)


def test_upstream_dying_mid_stream_ends_the_response_with_a_failure_event(gateway):
    def reply(conn: int, req: int, sock: socket.socket) -> bool:
        sock.sendall(STREAM_HEAD + chunked(DELTA, end=False) + b"40\r\npartial")
        return False

    with RawUpstream(reply) as up, gateway([responses_route(up.url)]) as gw:
        res = gw.responses("fast", body("fast"))
        [record] = gw.log()
    frames = res.frames()
    assert res.status == 200 and frames[0]["delta"] == "hi"
    assert frames[-1]["type"] == "response.failed"
    assert "upstream stream broke" in frames[-1]["response"]["error"]["message"]
    assert "upstream stream broke" in record["error"]


def test_a_silent_upstream_times_out_as_504(gateway):
    release = threading.Event()
    upstream_spoke = threading.Event()

    def reply(conn: int, req: int, sock: socket.socket) -> bool:
        sock.sendall(STREAM_HEAD)
        release.wait(60)  # silent far longer than the route's timeout
        upstream_spoke.set()
        return False

    with RawUpstream(reply) as up, gateway([responses_route(
            up.url, upstream_timeout_seconds=0.3)]) as gw:
        started = time.monotonic()
        res = gw.responses("fast", body("fast"))
        elapsed = time.monotonic() - started
        answered_while_silent = not upstream_spoke.is_set()
        release.set()
    assert res.status == 504 and res.json()["error"]["message"] == "upstream stream timed out"
    # the gateway's timeout ended it, not the upstream (still silent when the 504 came)
    assert answered_while_silent
    assert elapsed > 0.25  # and not before the route's timeout


def test_a_client_leaving_mid_stream_drops_the_upstream_connection(gateway):
    gone = threading.Event()

    def reply(conn: int, req: int, sock: socket.socket) -> bool:
        try:
            sock.sendall(STREAM_HEAD)
            for _ in range(6000):  # a long answer (2 min), still streaming when the client leaves
                sock.sendall(chunked(DELTA, end=False))
                time.sleep(0.02)
        except OSError:
            gone.set()  # the gateway closed our connection
        return False

    with RawUpstream(reply) as up, gateway([responses_route(up.url)]) as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        client = socket.create_connection((host, int(port)))
        raw = json.dumps(body("fast")).encode()
        client.sendall(b"POST /routes/fast/v1/responses HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (len(raw), raw))
        assert b"200 OK" in client.recv(65536)
        client.close()
        assert gone.wait(90)  # dropped before the answer would have ended
        assert up.connections == 1


def test_drivers_without_an_async_method_still_stream_through_a_worker_thread(gateway):
    from mmo_codex_custom.driver import CodexCustomRoute

    class BlockingOnly:
        """A third-party style driver: only the blocking interface."""

        def serve_responses(self, route, model, body, env):
            return CodexCustomRoute().serve_responses(route, model, body, env)

    def reply(conn: int, req: int, sock: socket.socket) -> bool:
        sock.sendall(STREAM_HEAD + chunked(DELTA, DONE))
        return True

    with RawUpstream(reply) as up, gateway([responses_route(up.url)],
                                           driver_for=lambda name: BlockingOnly()) as gw:
        res = gw.responses("fast", body("fast"))
        [record] = gw.log()
    assert res.status == 200 and res.body == DELTA + DONE
    assert record["usage"]["total_tokens"] == 7 and record["status"] == 200
    assert not hasattr(BlockingOnly(), "serve_responses_async")


def test_an_upstream_error_status_keeps_its_classification(gateway):
    def reply(conn: int, req: int, sock: socket.socket) -> bool:
        error = json.dumps({"error": {"message": "slow down"}}).encode()
        sock.sendall(b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(error), error))
        return True

    with RawUpstream(reply) as up, gateway([responses_route(up.url)]) as gw:
        res = gw.responses("fast", body("fast"))
    assert res.status == 429 and res.json()["error"]["message"] == "slow down"


def test_credentials_env_edits_and_permission_changes_are_seen_on_the_next_request(
        gateway, mmo_env, monkeypatch):
    monkeypatch.delenv("FAST_KEY", raising=False)
    creds = mmo_env.config_dir / "credentials.env"
    creds.parent.mkdir(parents=True, exist_ok=True)

    def reply(conn: int, req: int, sock: socket.socket) -> bool:
        sock.sendall(STREAM_HEAD + chunked(DONE))
        return True

    def sent_key(request: bytes) -> str:
        head = request.split(b"\r\n\r\n")[0].decode()
        return next(line for line in head.split("\r\n") if line.startswith("Authorization"))

    with RawUpstream(reply) as up, gateway([responses_route(up.url)]) as gw:
        creds.write_text("FAST_KEY=sk-first-0123456789\n")
        creds.chmod(0o600)
        assert gw.responses("fast", body("fast")).status == 200
        creds.write_text("FAST_KEY=sk-second-0123456789-longer\n")
        assert gw.responses("fast", body("fast")).status == 200
        creds.chmod(0o644)
        refused = gw.responses("fast", body("fast"))
    assert [sent_key(r) for r in up.requests] == [
        "Authorization: Bearer sk-first-0123456789",
        "Authorization: Bearer sk-second-0123456789-longer"]
    assert refused.status == 502 and "PermissionError" in refused.json()["error"]["message"]


def test_a_large_request_reaches_the_upstream_verbatim_but_for_model_and_stream(gateway):
    def reply(conn: int, req: int, sock: socket.socket) -> bool:
        sock.sendall(STREAM_HEAD + chunked(DONE))
        return True

    history = [{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": f"tour {i} — café ✓ \"q\"\n"}]}
               for i in range(400)]
    big = {"model": "fast__m1", "input": history, "stream": False, "tools": [],
           "store": False, "nested": {"model": "not-this-one"}}
    with RawUpstream(reply) as up, gateway([responses_route(up.url)]) as gw:
        raw = json.dumps(big, indent=1).encode()
        assert len(raw) > 16 * 1024
        host, port = gw.url.removeprefix("http://").split(":")
        client = http.client.HTTPConnection(host, int(port), timeout=10)
        client.request("POST", "/routes/fast/v1/responses", body=raw)
        answer = client.getresponse()
        # "stream": false: the JSON response of the upstream's response.completed
        assert answer.status == 200 and answer.getheader("content-type") == "application/json"
        assert json.loads(answer.read()) == json.loads(DONE.split(b"data: ")[1])["response"]
        client.close()
    sent_raw = up.requests[0].split(b"\r\n\r\n", 1)[1]
    assert json.loads(sent_raw) == {**big, "model": "upstream-m1", "stream": True}
    assert b'\n  {\n   "type": "message"' in sent_raw  # Codex's own text, not re-serialised
