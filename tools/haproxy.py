"""A throwaway HAProxy in front of several `mcpkit serve --http` processes, for the scale-out
tests and bench/: round robin per request, no session affinity, timeouts long enough for SSE.

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
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout tunnel 60s
    option http-keep-alive
frontend mcp
    bind 127.0.0.1:{port}
    default_backend mcpkit
backend mcpkit
    balance roundrobin
{servers}
"""


class HAProxy:
    """``haproxy`` on ``port`` balancing over ``backends`` (``host:port`` strings)."""

    def __init__(self, port: int, backends: list[str]) -> None:
        self.port = port
        self.backends = backends
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.mkdtemp(prefix="mcpkit-haproxy-")

    def start(self, timeout: float = 15.0) -> None:
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        if not Path(binary).exists():
            raise RuntimeError("haproxy is not installed (apt-get install haproxy)")
        servers = "\n".join(f"    server s{i} {b}" for i, b in enumerate(self.backends))
        config = Path(self._dir, "haproxy.cfg")
        config.write_text(CONFIG.format(port=self.port, servers=servers))
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
