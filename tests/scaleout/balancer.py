"""N processes of app.py on one store (a Redis or a Redis Cluster URL), behind the shipped
HAProxy (tools/haproxy.py): what test_balancer.py and test_forwarded.py start."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import component_missing
from tests.test_http import free_port, start_server, stop_server
from tools.haproxy import HAProxy

APP = str(Path(__file__).resolve().parent / "app.py")


def behind_haproxy(store_url: str, count: int, *extra: str) -> tuple[HAProxy, list[tuple[Any, int]]]:
    """(the balancer, [(process, port)...]): ``count`` processes of app.py served with the
    options ``extra``, sharing one key prefix of ``store_url``, once HAProxy listens."""
    if shutil.which("haproxy") is None and not os.path.exists("/usr/sbin/haproxy"):
        component_missing("haproxy is not installed: bash tools/install-debian.sh haproxy")
    glue = "&" if "?" in store_url else "?"
    env = {"MCPKIT_STORE": f"{store_url}{glue}prefix=lb{secrets.token_hex(4)}:",
           "MCPKIT_STATE_KEY": secrets.token_hex(32)}
    started: list[tuple[Any, int]] = []
    try:
        for _ in range(count):
            started.append(start_server(APP, *extra, env=env))
        proxy = HAProxy(free_port(), [f"127.0.0.1:{port}" for _, port in started])
        proxy.start()
    except BaseException:
        for proc, _ in started:
            stop_server(proc)
        raise
    return proxy, started


def stop_all(proxy: HAProxy, started: list[tuple[Any, int]]) -> str:
    """Stop the balancer and the processes; what the processes wrote to stderr."""
    proxy.stop()
    return "".join(stop_server(proc) for proc, _ in started)
