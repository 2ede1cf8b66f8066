#!/usr/bin/env python3
"""sessions_memory: does the server's memory stay flat when clients never end their sessions?

    python bench/sessions_memory.py                      # 10,000 sessions, SSE answers
    python bench/sessions_memory.py --accept json        # JSON answers (no SSE event ids stored)
    python bench/sessions_memory.py --sessions 2000 --serve-arg=--json
    python bench/sessions_memory.py --serve-arg=--stateless   # the floor: no sessions at all
    python bench/sessions_memory.py --serve-arg=--session-idle-timeout=5 --settle 12   # abandoned, then evicted

Starts ``mcpkit serve --http 127.0.0.1:PORT`` (the reference server) on a free port, then opens
sessions that never send DELETE: each is ``initialize``, ``notifications/initialized`` and one
``tools/call`` (``add``), over a few keep-alive connections. The server's resident memory
(VmRSS of /proc/PID/status) is read after the first ``--warmup`` sessions and after all of
them (plus a checkpoint every tenth of the run). Exit status 1 when the final RSS exceeds the
warm-up RSS by more than ``--threshold`` (default 10 %): sessions that are never deleted must
not make the server grow without bound (they are capped by ``max_sessions`` and evicted when
idle; the event store is bounded too).

Standard library only, plus this repository's ``mcpkit`` (Linux: reads /proc).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "sessions-memory", "version": "1.0.0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc status")


def wait_listening(proc: subprocess.Popen, port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"sessions_memory: the server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"sessions_memory: nothing listens on 127.0.0.1:{port}")


class Worker:
    """One keep-alive connection that opens sessions one after another."""

    def __init__(self, port: int, accept: str) -> None:
        self.port = port
        self.accept = accept
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(self, message: dict, session_id: str | None, expect: int) -> http.client.HTTPResponse:
        headers = {"Content-Type": "application/json", "Accept": self.accept}
        if message is not INIT:
            headers["MCP-Protocol-Version"] = "2025-11-25"
        if session_id:
            headers["Mcp-Session-Id"] = session_id
        for attempt in range(2):
            try:
                self.conn.request("POST", "/mcp", body=json.dumps(message), headers=headers)
                response = self.conn.getresponse()
                body = response.read()
                break
            except (http.client.HTTPException, OSError):
                if attempt:
                    raise
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        if response.status != expect:
            raise SystemExit(f"sessions_memory: {message.get('method')} got HTTP {response.status}: {body[:300]!r}")
        if expect == 200 and b'"result"' not in body:
            raise SystemExit(f"sessions_memory: {message.get('method')} got no result: {body[:300]!r}")
        return response

    def session(self) -> None:
        response = self.post(INIT, None, 200)
        session_id = response.getheader("mcp-session-id")  # None in stateless mode: every POST alone
        self.post(INITIALIZED, session_id, 202)
        self.post(CALL, session_id, 200)


def open_sessions(workers: list[Worker], count: int) -> None:
    """``count`` sessions spread over the workers' connections (small concurrency)."""
    shares = [count // len(workers) + (1 if i < count % len(workers) else 0) for i in range(len(workers))]
    errors: list[BaseException] = []

    def run(worker: Worker, n: int) -> None:
        try:
            for _ in range(n):
                worker.session()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w, n)) for w, n in zip(workers, shares) if n]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions to open in all (default 10000)")
    parser.add_argument("--warmup", type=int, default=100, help="sessions before the first measurement (default 100)")
    parser.add_argument("--concurrency", type=int, default=4, help="parallel connections (default 4)")
    parser.add_argument("--accept", choices=("sse", "json", "both"), default="both",
                        help="what the client accepts: both (the server answers SSE), sse, or json")
    parser.add_argument("--threshold", type=float, default=0.10, help="allowed growth of RSS (default 0.10)")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra argument for mcpkit serve (repeatable)")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="after the last session, wait this long (idle eviction) before the final reading")
    args = parser.parse_args(argv)
    accept = {"sse": "text/event-stream", "json": "application/json", "both": "application/json, text/event-stream"}[args.accept]

    port = free_port()
    command = [sys.executable, "-m", "mcpkit", "serve", "--http", f"127.0.0.1:{port}", *args.serve_arg]
    with tempfile.TemporaryFile() as errlog:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog)
        try:
            wait_listening(proc, port)
            workers = [Worker(port, accept) for _ in range(max(1, args.concurrency))]
            started = time.monotonic()
            print(f"server: {' '.join(command[1:])} (pid {proc.pid}); idle RSS {rss_kib(proc.pid) / 1024:.1f} MiB")

            open_sessions(workers, args.warmup)
            time.sleep(0.2)
            first = rss_kib(proc.pid)
            print(f"after {args.warmup:>6} sessions: RSS {first / 1024:8.1f} MiB")

            done = args.warmup
            step = max(1, (args.sessions - args.warmup) // 10)
            while done < args.sessions:
                n = min(step, args.sessions - done)
                open_sessions(workers, n)
                done += n
                print(f"after {done:>6} sessions: RSS {rss_kib(proc.pid) / 1024:8.1f} MiB   ({time.monotonic() - started:5.1f} s)")
            time.sleep(0.2)
            final = rss_kib(proc.pid)
            if args.settle > 0:
                print(f"all sessions open: RSS {final / 1024:8.1f} MiB; waiting {args.settle:.0f} s for idle eviction")
                time.sleep(args.settle)
                final = rss_kib(proc.pid)
                print(f"after idle eviction:  RSS {final / 1024:8.1f} MiB")
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            errlog.seek(0)
            stderr = errlog.read().decode(errors="replace").strip()
            if stderr:
                print(f"--- server stderr ---\n{stderr[-3000:]}", file=sys.stderr)

    ratio = final / first
    print(f"RSS after {args.warmup} sessions: {first / 1024:.1f} MiB; after {args.sessions}: {final / 1024:.1f} MiB; "
          f"ratio {ratio:.3f} (limit {1 + args.threshold:.2f})")
    if ratio > 1 + args.threshold:
        print(f"FAIL: RSS grew by {100 * (ratio - 1):.1f} % (more than {100 * args.threshold:.0f} %)")
        return 1
    print("OK: memory stays flat")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
