"""Added latency and throughput of the MMO gateway against a loopback upstream.

Run: ``.venv/bin/python benchmarks/gateway.py [--requests 1000] [--concurrency 16]``

Starts a streaming Responses upstream (its own process) and the real gateway
process (``python -m mmo_kernel.gateway``, catalog fragment pointing at the
upstream, openai_responses pass-through), then streams the same requests
directly and through the gateway, alternating the two so background load on
a shared machine hits both alike. The report gives medians over ``--repeat``
rounds of: time to first byte and total time (p50/p99) for both, the added
latency and the ratio to direct, the gateway process's CPU time per request
(less sensitive to other load), 16-stream throughput as a ratio of the
direct baseline measured in the same round, and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from _bench import machine_line, summary

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


def latencies(ports: list[int], paths: list[str], body: bytes, count: int
              ) -> list[list[tuple[float, float]]]:
    """(ttfb, total) per request for each target (direct, then gateways), interleaved.

    Alternating the targets on a shared machine exposes them to the same
    background load, so their differences are the gateways' own costs.
    """
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for port in ports]
    for _ in range(50):  # warm-up: connections, pools, caches
        for conn, path in zip(conns, paths, strict=True):
            stream_once(conn, path, body)
    series: list[list[tuple[float, float]]] = [[] for _ in ports]
    for _ in range(count):
        for conn, path, out in zip(conns, paths, series, strict=True):
            out.append(stream_once(conn, path, body))
    for conn in conns:
        conn.close()
    return series


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


# ---------------------------------------------------------------- rounds ---

PATHS = ("/v1/responses", "/routes/bench_route/v1/responses")


def _percentiles(row: dict[str, float], prefix: str, d: list[tuple[float, float]],
                 g: list[tuple[float, float]]) -> None:
    for index, name in ((0, "ttfb"), (1, "total")):
        for q, label in ((.5, "p50"), (.99, "p99")):
            direct = pct([x[index] for x in d], q)
            through = pct([x[index] for x in g], q)
            row[f"{prefix}{name}_{label}_direct"] = direct
            row[f"{prefix}{name}_{label}_gateway"] = through
            row[f"{prefix}{name}_{label}_added"] = through - direct
            row[f"{prefix}{name}_{label}_ratio"] = through / direct


def measure_round(args: argparse.Namespace, up_port: int, gw_ports: list[int], body: bytes,
                  gateway: psutil.Process) -> dict[str, float]:
    """One round: interleaved latencies, gateway CPU per request, then both throughputs.

    ``gw_ports[0]`` is the gateway as shipped; ``gw_ports[1]`` (if any) the same
    gateway with every upstream request on httpx2 (the proxied path).
    """
    load_before = os.getloadavg()[0]
    cpu = gateway.cpu_times()
    series = latencies([up_port, *gw_ports], [PATHS[0]] + [PATHS[1]] * len(gw_ports), body,
                       args.requests)
    d, g = series[0], series[1]
    spent = gateway.cpu_times()
    cpu_ms = (spent.user + spent.system - cpu.user - cpu.system) * 1000 / (args.requests + 50)
    per = max(20, args.requests // args.concurrency)
    d_rps = throughput(up_port, PATHS[0], body, args.concurrency, per)
    g_rps = throughput(gw_ports[0], PATHS[1], body, args.concurrency, per)
    row = {"load": (load_before + os.getloadavg()[0]) / 2, "gateway_cpu_ms": cpu_ms,
           "direct_rps": d_rps, "gateway_rps": g_rps, "ratio": g_rps / d_rps}
    _percentiles(row, "", d, g)
    if len(series) > 2:
        _percentiles(row, "httpx2_", d, series[2])
    row["mean_total_direct"] = statistics.mean(x[1] for x in d)
    row["mean_total_gateway"] = statistics.mean(x[1] for x in g)
    return row


def report(args: argparse.Namespace, rounds: list[dict[str, float]]) -> None:
    med = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    print(f"{args.requests} interleaved streamed requests per round ({EVENTS + 1} SSE events "
          f"each, request input {f'{args.input_kb} KiB' if args.input_kb else 'tiny'}), "
          f"{len(rounds)} rounds; "
          "medians over rounds")
    print("load average (1 min) per round: " + ", ".join(f"{r['load']:.2f}" for r in rounds))
    print(f"{'':22}{'direct':>9}{'gateway':>9}{'added':>8}{'ratio':>7}")
    for name in ("ttfb", "total"):
        for label in ("p50", "p99"):
            key = f"{name}_{label}"
            print(f"{name + ' ' + label + ' ms':22}{med[key + '_direct']:9.3f}"
                  f"{med[key + '_gateway']:9.3f}{med[key + '_added']:8.3f}"
                  f"{med[key + '_ratio']:7.2f}")
    print("added total p50 per round: " + ", ".join(f"{r['total_p50_added']:.3f}" for r in rounds))
    print("added total p99 per round: " + ", ".join(f"{r['total_p99_added']:.3f}" for r in rounds))
    print(f"gateway CPU per request: {med['gateway_cpu_ms']:.3f} ms")
    print(f"throughput, {args.concurrency} concurrent streams: direct {med['direct_rps']:.0f} "
          f"req/s, gateway {med['gateway_rps']:.0f} req/s, ratio {med['ratio']:.2f} "
          "(per round: " + ", ".join(f"{r['ratio']:.2f}" for r in rounds) + ")")
    if "httpx2_total_p50_added" in med:
        print("same gateway, every upstream request on httpx2 (the proxied path):")
        for label in ("p50", "p99"):
            key = f"httpx2_total_{label}"
            print(f"{'total ' + label + ' ms':22}{med[key + '_direct']:9.3f}"
                  f"{med[key + '_gateway']:9.3f}{med[key + '_added']:8.3f}"
                  f"{med[key + '_ratio']:7.2f}")
    met = med["total_p50_added"] <= 1.0 and med["total_p99_added"] <= 5.0
    print(f"targets (added p50 <= 1 ms, p99 <= 5 ms): {'met' if met else 'NOT met'}")
    summary("gateway", "added_total_p50_ms", med["total_p50_added"], "<=1",
            med["total_p50_added"] <= 1.0)
    summary("gateway", "added_total_p99_ms", med["total_p99_added"], "<=5",
            med["total_p99_added"] <= 5.0)
    summary("gateway", "throughput16_x_direct", med["ratio"])


# ----------------------------------------------------------------- main ---

def wait_for_file(path: Path, seconds: float = 20.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise RuntimeError(f"{path} did not appear")


def _start_gateway(procs: list[subprocess.Popen[bytes]], env: dict[str, str],
                   state: Path) -> dict[str, int]:
    """Start a real gateway process for ``state``; its ``gateway.json`` record."""
    procs.append(subprocess.Popen([sys.executable, "-m", "mmo_kernel.gateway"], env=env,
                                  start_new_session=True))
    return json.loads(wait_for_file(state / "gateway" / "gateway.json"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians are reported")
    parser.add_argument("--input-kb", type=int, default=0,
                        help="pad the request's input to this many KiB (Codex sends history)")
    parser.add_argument("--fast-only", action="store_true",
                        help="skip the side-by-side httpx2 (proxied path) gateway")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        run_upstream(args.upstream)
        return 0
    if args.quick:
        args.requests, args.repeat, args.concurrency = 20, 1, 2
    print(machine_line(), flush=True)
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
        gateways = [_start_gateway(procs, env, work / "state")]
        if not args.fast_only:
            gateways.append(_start_gateway(procs, {**env, "MMO_STATE_DIR": str(work / "state2"),
                                                   "MMO_GATEWAY_UPSTREAM_CLIENT": "httpx2"},
                                           work / "state2"))
        text = "hi " * (args.input_kb * 1024 // 3) if args.input_kb else "hi"
        body = json.dumps({"model": "bench_route__m", "input": text, "stream": True}).encode()
        gateway = psutil.Process(gateways[0]["pid"])
        ports = [record["port"] for record in gateways]
        rounds = [measure_round(args, up_port, ports, body, gateway) for _ in range(args.repeat)]
        report(args, rounds)
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
