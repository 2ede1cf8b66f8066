"""A throwaway HAProxy in front of several `mcpkit serve --http` processes, for the scale-out
tests and bench/: round robin per request, no session affinity, timeouts long enough for SSE.

Each request carries its client's address in ``X-Forwarded-For`` (``option forwardfor``; one a
client sent itself is dropped first, this being the edge): serve the backends with
``--forwarded-allow-ips 127.0.0.1`` so that each client has its own session quota, rate limits
and audit name rather than all being the balancer's one address. A backend is checked every
second with a GET of its ``/healthz`` (``health``; transports/health.py), and a request whose
connection to a backend fails (a process killed, its port closed) is sent to another at once
(``option redispatch 1``, ``retries``) instead of being retried on the dead one and answered 503.

    python tools/haproxy.py 8000 127.0.0.1:9001 127.0.0.1:9002   # serves until interrupted

Installs nothing: .ci/run installs the Debian package `haproxy`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """\
global
    maxconn 4096
    stats socket {admin}
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout tunnel 60s
    option http-keep-alive
    option forwardfor
    retries 2
    option redispatch 1
frontend mcp
    bind 127.0.0.1:{port}
    http-request del-header X-Forwarded-For
    default_backend mcpkit
backend mcpkit
    balance roundrobin
    option httpchk
    http-check send meth GET uri {health} ver HTTP/1.1 hdr Host 127.0.0.1
    http-check expect status 200
    default-server check inter 1s fall 1 rise 1
{servers}
"""


class HAProxy:
    """``haproxy`` on ``port`` balancing over ``backends`` (``host:port`` strings), checking
    each with a GET of ``health`` (``/healthz``: 200 while the process serves, with no session or
    token; ``/readyz`` also takes a process out once its graceful shutdown begins)."""

    def __init__(self, port: int, backends: list[str], *, health: str = "/healthz") -> None:
        self.port = port
        self.backends = backends
        self.health = health
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.mkdtemp(prefix="mcpkit-haproxy-")
        self.admin = str(Path(self._dir, "admin.sock"))  # the runtime API: state()

    def start(self, timeout: float = 15.0) -> None:
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        if not Path(binary).exists():
            raise RuntimeError("haproxy is not installed (apt-get install haproxy)")
        servers = "\n".join(f"    server s{i} {b}" for i, b in enumerate(self.backends))
        config = Path(self._dir, "haproxy.cfg")
        config.write_text(CONFIG.format(port=self.port, servers=servers, health=self.health, admin=self.admin))
        self.proc = subprocess.Popen([binary, "-f", str(config), "-db"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited: {self.proc.stderr.read().decode(errors='replace')[-800:]}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"haproxy did not listen on {self.port} within {timeout} s")

    def state(self, server: str) -> str:
        """What the health checks say of backend ``server`` (``s0``, ``s1``...): ``UP``,
        ``DOWN``... as HAProxy's ``show stat`` reports it."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(self.admin)
            sock.sendall(b"show stat\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        for line in data.decode().splitlines():
            fields = line.split(",")
            if len(fields) > 17 and fields[0] == "mcpkit" and fields[1] == server:
                return fields[17]  # status
        raise KeyError(server)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        shutil.rmtree(self._dir, ignore_errors=True)


if __name__ == "__main__":
    proxy = HAProxy(int(sys.argv[1]), sys.argv[2:])
    proxy.start()
    try:
        proxy.proc.wait()  # type: ignore[union-attr]
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
