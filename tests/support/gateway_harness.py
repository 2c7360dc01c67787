"""A gateway on a loopback port serving test routes, and an HTTP client for it."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmo_kernel.config.catalog import Model, Route
from mmo_kernel.gateway.request_log import RequestLog, read_log
from mmo_kernel.gateway.server import GatewayServer, GatewayThread
from mmo_kernel.gateway.sources import StaticCatalog
from mmo_kernel.plugin.manager import get_driver


def make_route(route_id: str, wire: str, base_url: str, **fields: Any) -> Route:
    return Route(id=route_id, name=f"{route_id} test route", driver="codex_custom",
                 api_operator="test", access_product="test", wire_protocol=wire,
                 base_url=base_url, **fields)


def make_model(route_id: str, slug: str = "m1", **fields: Any) -> Model:
    return Model(id=f"{route_id}__{slug}", route=route_id, upstream_id=f"upstream-{slug}",
                 maker="test", **fields)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def frames(self) -> list[dict[str, Any]]:
        frames = []
        for block in self.body.decode().split("\n\n"):
            data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
            if data:
                frames.append(json.loads("\n".join(data)))
        return frames


@dataclass
class Gateway:
    url: str
    log_path: Path

    def request(self, method: str, path: str, body: Any = None,
                headers: dict[str, str] | None = None) -> Response:
        host, port = self.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=20)
        raw = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=raw, headers={"Content-Type": "application/json",
                                                      **(headers or {})})
        response = conn.getresponse()
        result = Response(response.status, {k.lower(): v for k, v in response.getheaders()},
                          response.read())
        conn.close()
        return result

    def responses(self, route_id: str, body: dict[str, Any], **headers: str) -> Response:
        return self.request("POST", f"/routes/{route_id}/v1/responses", body, headers)

    def log(self) -> list[dict[str, Any]]:
        return read_log(self.log_path)


@contextmanager
def serve_gateway(routes: list[Route], models: list[Model], log_path: Path) -> Iterator[Gateway]:
    """Run a gateway (its own loop thread) serving exactly ``routes``/``models``."""
    server = GatewayServer(StaticCatalog(routes, models), RequestLog(log_path),
                           driver_for=lambda name: get_driver("route_drivers", name))
    with GatewayThread(server) as thread:
        yield Gateway(thread.url, log_path)
