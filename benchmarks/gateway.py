"""Added latency and throughput of the MMO gateway against a loopback upstream.

Run: ``.venv/bin/python benchmarks/gateway.py [--requests 1000] [--concurrency 16]``

Starts a streaming Responses upstream (its own process) and the real gateway
process (``python -m mmo_kernel.gateway``, catalog fragment pointing at the
upstream, openai_responses pass-through), then streams the same requests
directly and through the gateway. Prints time to first byte and total time
(p50/p99) for both, the added latency, and 16-stream throughput as a ratio
of the direct baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

EVENTS = 12
FRAME = (b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
         b'"delta":"token "}\n\n')
COMPLETED = (b'event: response.completed\ndata: {"type":"response.completed","response":'
             b'{"id":"r1","usage":{"input_tokens":5,"output_tokens":12,"total_tokens":17}}}\n\n')


# ------------------------------------------------------------- upstream ---

async def _upstream_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            for _ in range(EVENTS):
                writer.write(b"%x\r\n%s\r\n" % (len(FRAME), FRAME))
                await writer.drain()
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(COMPLETED), COMPLETED))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


def run_upstream(port_file: str) -> None:
    async def main() -> None:
        server = await asyncio.start_server(_upstream_conn, "127.0.0.1", 0)
        Path(port_file).write_text(str(server.sockets[0].getsockname()[1]))
        await server.serve_forever()
    asyncio.run(main())


# --------------------------------------------------------------- client ---

def stream_once(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[float, float]:
    """(time to first body byte, total) in milliseconds for one streamed request."""
    start = time.perf_counter()
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
    response.read1(65536)
    first = time.perf_counter()
    while response.read1(65536):
        pass
    end = time.perf_counter()
    return (first - start) * 1000, (end - start) * 1000


def latencies(port: int, path: str, body: bytes, count: int) -> tuple[list[float], list[float]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(50):  # warm-up: connections, pools, caches
        stream_once(conn, path, body)
    ttfb, total = [], []
    for _ in range(count):
        a, b = stream_once(conn, path, body)
        ttfb.append(a)
        total.append(b)
    conn.close()
    return ttfb, total


def throughput(port: int, path: str, body: bytes, streams: int, per_stream: int) -> float:
    """Completed streamed requests per second with ``streams`` concurrent clients."""
    barrier = threading.Barrier(streams + 1)

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        stream_once(conn, path, body)
        barrier.wait()
        for _ in range(per_stream):
            stream_once(conn, path, body)
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(streams)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return streams * per_stream / (time.perf_counter() - start)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# ----------------------------------------------------------------- main ---

def wait_for_file(path: Path, seconds: float = 20.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise RuntimeError(f"{path} did not appear")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        run_upstream(args.upstream)
        return 0
    work = Path(tempfile.mkdtemp(prefix="mmo-gw-bench-"))
    env = {**os.environ, "MMO_STATE_DIR": str(work / "state"), "MMO_CONFIG_DIR": str(work / "cfg"),
           "BENCH_KEY": "sk-bench-0123456789"}
    procs = []
    try:
        port_file = work / "upstream.port"
        procs.append(subprocess.Popen([sys.executable, __file__, "--upstream", str(port_file)],
                                      env=env, start_new_session=True))
        up_port = int(wait_for_file(port_file))
        (work / "cfg" / "catalog.d").mkdir(parents=True)
        (work / "cfg" / "catalog.d" / "bench.toml").write_text(
            'schema_version = 1\n[routes.bench_route]\nname = "Bench"\ndriver = "codex_custom"\n'
            'api_operator = "bench"\naccess_product = "bench"\nwire_protocol = "openai_responses"\n'
            f'base_url = "http://127.0.0.1:{up_port}/v1"\ncredential_env = "BENCH_KEY"\n'
            '[models.bench_route__m]\nroute = "bench_route"\nupstream_id = "m"\nmaker = "bench"\n')
        procs.append(subprocess.Popen([sys.executable, "-m", "mmo_kernel.gateway"], env=env,
                                      start_new_session=True))
        record = json.loads(wait_for_file(work / "state" / "gateway" / "gateway.json"))
        gw_port = record["port"]
        body = json.dumps({"model": "bench_route__m", "input": "hi", "stream": True}).encode()
        direct_path, gw_path = "/v1/responses", "/routes/bench_route/v1/responses"

        d_ttfb, d_total = latencies(up_port, direct_path, body, args.requests)
        g_ttfb, g_total = latencies(gw_port, gw_path, body, args.requests)
        per = max(20, args.requests // args.concurrency)
        d_rps = throughput(up_port, direct_path, body, args.concurrency, per)
        g_rps = throughput(gw_port, gw_path, body, args.concurrency, per)

        print(f"{args.requests} sequential streamed requests ({EVENTS + 1} SSE events each)")
        print(f"{'':22}{'direct p50':>12}{'gateway p50':>13}{'added p50':>11}"
              f"{'direct p99':>12}{'gateway p99':>13}{'added p99':>11}")
        for name, d, g in (("time to first byte ms", d_ttfb, g_ttfb), ("total ms", d_total, g_total)):
            print(f"{name:22}{pct(d, .5):12.3f}{pct(g, .5):13.3f}{pct(g, .5) - pct(d, .5):11.3f}"
                  f"{pct(d, .99):12.3f}{pct(g, .99):13.3f}{pct(g, .99) - pct(d, .99):11.3f}")
        print(f"mean total ms: direct {statistics.mean(d_total):.3f}, "
              f"gateway {statistics.mean(g_total):.3f}")
        print(f"throughput, {args.concurrency} concurrent streams: direct {d_rps:.0f} req/s, "
              f"gateway {g_rps:.0f} req/s, ratio {g_rps / d_rps:.2f}")
        added50 = pct(g_total, .5) - pct(d_total, .5)
        added99 = pct(g_total, .99) - pct(d_total, .99)
        verdict = "met" if added50 <= 1.0 and added99 <= 5.0 else "NOT met"
        print(f"targets (added p50 <= 1 ms, p99 <= 5 ms): {verdict}")
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
            proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
