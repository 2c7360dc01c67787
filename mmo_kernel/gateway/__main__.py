"""``python -m mmo_kernel.gateway``: the gateway process that ``ensure_gateway`` starts."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys

from mmo_kernel.gateway.process import lifetime_checks, new_record, read_record, record_path
from mmo_kernel.gateway.request_log import gateway_dir
from mmo_kernel.gateway.server import GatewayServer
from mmo_kernel.state.files import atomic_write_json
from mmo_kernel.state.paths import ensure_private_dir
from mmo_kernel.state.processes import process_start_token


class ListenError(Exception):
    """The configured address cannot be bound."""


async def _serve(host: str, port: int, prefer_port: int | None) -> None:
    server = GatewayServer()
    try:
        bound = await server.start(host, prefer_port) if prefer_port else None
    except OSError:
        bound = None
    if bound is None:
        try:
            bound = await server.start(host, port)
        except OSError as exc:
            raise ListenError(str(exc)) from None
    ensure_private_dir(gateway_dir())
    # Start-up objects (modules, drivers, catalog) live for the whole process;
    # freezing them keeps the cyclic GC from re-scanning them mid-stream.
    gc.freeze()
    token = process_start_token(os.getpid()) or ""
    atomic_write_json(record_path(), new_record(os.getpid(), token, bound[0], bound[1]))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    serving = asyncio.create_task(server.serve_forever())
    watching = asyncio.create_task(server.watch_lifetime(stop, **lifetime_checks(os.getpid())))
    await stop.wait()
    watching.cancel()
    serving.cancel()
    server.close()
    record = read_record()
    if server.exit_reason is None and record is not None and record.get("pid") == os.getpid():
        record_path().unlink(missing_ok=True)  # stopped; an idle exit keeps it for the port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mmo_kernel.gateway")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--prefer-port", type=int, default=None)
    args = parser.parse_args(argv)
    # Stream chunks cross from driver threads to the loop thread; the default 5 ms
    # GIL switch interval would add up to 5 ms to each hand-off.
    sys.setswitchinterval(0.0002)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"mmo gateway: refusing to bind non-loopback host {args.host!r}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(args.host, args.port, args.prefer_port))
    except ListenError as exc:
        print(f"mmo gateway: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
