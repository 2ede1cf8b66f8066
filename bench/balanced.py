#!/usr/bin/env python3
"""Streamable HTTP behind HAProxy: throughput and p99 of one session-ful deployment shape after
another, in one run, on this machine.

  python bench/balanced.py                      # every setup, 2 rounds, 8 s of load each
  python bench/balanced.py --rounds 1 --duration 4

Setups (all stateful, JSON answers, sessions shared through MCPKIT_STORE where there is one):
  direct-memory     one process, in-memory stores, no balancer (the reference)
  direct-redis      one process on one redis-server, no balancer
  haproxy-redis-N   N processes on one redis-server behind HAProxy, round robin, no affinity
  haproxy-cluster-N N processes on a three-master Redis Cluster behind HAProxy

The load is bench/mcp-bench's: 32 keep-alive connections doing back-to-back `tools/call add`
(each connection its own session), every answer checked. Needs redis-server, redis-cli and
haproxy (Debian packages) and uvicorn. Prints a Markdown table; --json keeps every run.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tools.haproxy import HAProxy  # noqa: E402

BENCH = os.path.join(HERE, "mcp-bench")
FIXTURE = os.path.join(HERE, "servers", "mcpkit_server.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {timeout} s")


def start_redis(tmp: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
    wait_port(port)
    return proc, f"redis://127.0.0.1:{port}/0"


def start_cluster(tmp: str) -> str:
    env = {**os.environ, "TMPDIR": tmp}
    out = subprocess.run(["bash", os.path.join(ROOT, "tools", "start-redis-cluster.sh")], env=env,
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


def stop_cluster(tmp: str) -> None:
    env = {**os.environ, "TMPDIR": tmp}
    subprocess.run(["bash", os.path.join(ROOT, "tools", "start-redis-cluster.sh"), "--stop"], env=env, timeout=30)


def start_servers(count: int, store: str | None) -> list[tuple[subprocess.Popen[bytes], int]]:
    env = {**os.environ}
    env.pop("MCPKIT_STORE", None)
    if store is not None:
        glue = "&" if "?" in store else "?"
        env["MCPKIT_STORE"] = f"{store}{glue}prefix=bench{secrets.token_hex(3)}:"
        env["MCPKIT_STATE_KEY"] = secrets.token_hex(32)
    started = []
    for _ in range(count):
        port = free_port()
        proc = subprocess.Popen([sys.executable, FIXTURE, "--transport", "http", "--port", str(port),
                                 "--http-mode", "stateful-json"], env=env, stdout=subprocess.DEVNULL)
        started.append((proc, port))
    for _, port in started:
        wait_port(port)
    return started


def load(port: int, duration: float, out: str) -> dict:
    subprocess.run([sys.executable, BENCH, "--http", f"http://127.0.0.1:{port}/mcp", "--phases", "http",
                    "--duration", str(duration), "--http-warmup", "2", "--json", out, "--quiet"],
                   check=False, timeout=duration + 120, capture_output=True)
    with open(out) as f:
        return json.load(f)


def median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    setups = ["direct-memory", "direct-redis", "haproxy-redis-2", "haproxy-redis-4",
              "haproxy-cluster-2", "haproxy-cluster-4"]
    tmp = tempfile.mkdtemp(prefix="mcpkit-balanced-")
    redis_proc, redis_url = start_redis(tmp)
    cluster_url = start_cluster(tmp)
    results: dict[str, list[dict]] = {s: [] for s in setups}
    try:
        for r in range(args.rounds):
            order = setups if r % 2 == 0 else list(reversed(setups))
            for setup in order:
                store = None if setup == "direct-memory" else cluster_url if "cluster" in setup else redis_url
                count = int(setup.rsplit("-", 1)[1]) if setup.startswith("haproxy") else 1
                servers = start_servers(count, store)
                proxy = None
                try:
                    port = servers[0][1]
                    if setup.startswith("haproxy"):
                        proxy = HAProxy(free_port(), [f"127.0.0.1:{p}" for _, p in servers])
                        proxy.start()
                        port = proxy.port
                    res = load(port, args.duration, os.path.join(tmp, f"{setup}-{r}.json"))
                    results[setup].append(res)
                    print(f"[{r + 1}/{args.rounds}] {setup}: {res.get('http_rps', 0):,.0f} req/s, "
                          f"p99 {res.get('http_p99_ms', 0):.2f} ms, errors {res.get('http_errors')}",
                          file=sys.stderr, flush=True)
                finally:
                    if proxy is not None:
                        proxy.stop()
                    for proc, _ in servers:
                        proc.terminate()
                        proc.wait(10)
    finally:
        redis_proc.terminate()
        redis_proc.wait(10)
        stop_cluster(tmp)
    print("| setup | req/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|")
    for setup in setups:
        runs = [r for r in results[setup] if r.get("http_rps")]
        if not runs:
            print(f"| {setup} | - | - | - | no data |")
            continue
        rps = [r["http_rps"] for r in runs]
        p50 = [r["http_p50_ms"] for r in runs]
        p99 = [r["http_p99_ms"] for r in runs]
        errors = sum(sum((r.get("http_errors") or {}).values()) for r in runs)
        print(f"| {setup} | {median(rps):,.0f} [{min(rps):,.0f}–{max(rps):,.0f}] | {median(p50):.2f} | "
              f"{median(p99):.2f} [{min(p99):.2f}–{max(p99):.2f}] | {errors} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
