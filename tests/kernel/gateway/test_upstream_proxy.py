"""Upstream HTTP honours the standard proxy and CA-store variables, like every HTTP tool.

The proxy is proxy.py from PyPI (a real forward proxy nobody here wrote, as
its own process); the upstream is a real loopback server, over TLS with a
self-signed certificate where the CA store matters.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.fake_upstream import FakeUpstream, chat_text_reply
from support.gateway_harness import make_model, make_route
from support.waiting import wait_until

KEY = "sk-proxy-test-0123456789"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE",
              "SSL_CERT_DIR")


@dataclass
class Proxy:
    url: str
    log: Path

    def seen(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@pytest.fixture(autouse=True)
def _clean_proxy_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("CHAT_KEY", KEY)


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Proxy]:
    port_file, log = tmp_path / "proxy.port", tmp_path / "proxy.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--hostname", "127.0.0.1", "--port", "0",
             "--port-file", str(port_file), "--num-workers", "1", "--num-acceptors", "1",
             "--timeout", "1"],  # an idle connection ends (and is logged) after 1 s, not 10
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path)
    try:
        wait_until(lambda: port_file.exists() and port_file.read_text().strip(), timeout=60,
                   what="proxy.py to listen")
        yield Proxy(f"http://127.0.0.1:{port_file.read_text().strip()}", log)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (no system CA trusts it)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def _tls_upstream(tls_files: tuple[Path, Path]) -> FakeUpstream:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls_files)
    return FakeUpstream(tls=context)


def _ask(serve, upstream: FakeUpstream, text: str = "through") -> tuple[int, str]:
    route = make_route("chat_r", "openai_chat", upstream.url + "/v1", credential_env="CHAT_KEY")
    model = make_model("chat_r")
    upstream.replies.clear()  # an earlier refused request left its reply queued
    upstream.queue(chat_text_reply(text))
    with serve([route], [model]) as gw:
        res = gw.responses("chat_r", {"model": model.id, "stream": True, "input": [
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "hi"}]}]})
    return res.status, res.body.decode("utf-8", errors="replace")


def _port(upstream: FakeUpstream) -> str:
    return upstream.url.rsplit(":", 1)[1]


def test_http_proxy_carries_the_request(serve, proxy, monkeypatch):
    with FakeUpstream() as upstream:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        status, body = _ask(serve, upstream)
        assert status == 200 and "through" in body
        assert upstream.seen[0].headers["authorization"] == f"Bearer {KEY}"
    wait_until(lambda: f"POST 127.0.0.1:{_port(upstream)}/v1/chat/completions" in proxy.seen(),
               timeout=30, what="the proxy's access log line")


def test_no_proxy_sends_the_request_direct(serve, monkeypatch, tmp_path):
    with FakeUpstream() as upstream:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        status, body = _ask(serve, upstream, "direct")
        assert status == 200 and "direct" in body and len(upstream.seen) == 1


def test_all_proxy_covers_https_via_connect_and_ssl_cert_file_is_trusted(
        serve, proxy, tls_files, monkeypatch):
    with _tls_upstream(tls_files) as upstream:
        monkeypatch.setenv("ALL_PROXY", proxy.url)
        monkeypatch.setenv("SSL_CERT_FILE", str(tls_files[0]))
        status, body = _ask(serve, upstream, "tunnelled")
        assert status == 200 and "tunnelled" in body
    wait_until(lambda: f"CONNECT 127.0.0.1:{_port(upstream)}" in proxy.seen(), timeout=30,
               what="the proxy's CONNECT line")


def test_ssl_cert_file_is_trusted_on_the_direct_path(serve, tls_files, monkeypatch):
    with _tls_upstream(tls_files) as upstream:
        status, body = _ask(serve, upstream)
        assert status == 502 and "upstream_transport" in body  # the system store rejects it
        monkeypatch.setenv("SSL_CERT_FILE", str(tls_files[0]))
        status, body = _ask(serve, upstream, "trusted")
        assert status == 200 and "trusted" in body


def test_a_dead_proxy_is_a_retryable_transport_error_naming_the_proxy(serve, monkeypatch):
    with FakeUpstream() as upstream:
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        status, body = _ask(serve, upstream)
        assert status == 502 and "proxy" in body and "upstream_transport" in body
        assert upstream.seen == []
