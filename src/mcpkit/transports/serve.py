"""Running the HTTP app on uvicorn (the ``http`` extra)."""

from __future__ import annotations

import errno
import logging
import os
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import SHUTDOWN_TIMEOUT

if TYPE_CHECKING:
    from ..server.server import Server
    from .connections import ConnectionLimits

__all__ = ["serve_http", "uvicorn_config", "bind", "event_loop"]



def bind(host: str, port: int, *, option: str = "--http") -> socket.socket:
    """The listening socket for HOST:PORT (port 0: any free port). Bound here rather than by
    uvicorn so that a taken port or an address of another machine is one clear line, and the real
    port is known before serving. ``option`` is the flag the fix names (``--http HOST:PORT``, or
    ``--port N`` for mcpkit dev)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise SystemExit(f"mcpkit: cannot resolve host {host!r} ({exc.strerror}); give an address such as "
                         "127.0.0.1:8000") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise SystemExit(f"mcpkit: cannot listen on {_shown(host)}:{port} ({exc.strerror}); "
                         f"{_bind_fix(exc, host, port, option)}") from None
    if family in (socket.AF_INET, socket.AF_INET6):
        # accepted connections inherit it on Linux: no answer waits ~40 ms for a delayed ACK
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _bind_fix(exc: OSError, host: str, port: int, option: str) -> str:
    """The fix for a failed bind: the address is not this machine's (EADDRNOTAVAIL), or the port
    is taken (EADDRINUSE) or privileged (EACCES below 1024)."""
    def at(address: str, number: int) -> str:
        return f"--port {number}" if option == "--port" else f"{option} {address}:{number}"

    if exc.errno == errno.EADDRNOTAVAIL:
        local, every = ("[::1]", "[::]") if ":" in host else ("127.0.0.1", "0.0.0.0")
        return (f"{host} is not an address of this machine; give one of its own, e.g. {at(local, port or 8000)} "
                f"(this machine only) or {at(every, port or 8000)} (every interface)")
    if exc.errno == errno.EACCES and 0 < port < 1024:
        return (f"a port below 1024 needs root (or CAP_NET_BIND_SERVICE); pick one from 1024 up, e.g. "
                f"{at(_shown(host), 8000)}")
    if port:
        return f"pick another port, e.g. {at(_shown(host), port + 1 if port < 65535 else 8000)}"
    return "check the address"


def event_loop(choice: str | None = None) -> str:
    """The event loop to serve on: ``choice`` (``--loop``), else ``MCPKIT_LOOP``, else ``auto``.

    A value outside ``switches.LOOPS`` is a SwitchError, ``uvloop`` when it is not installed a
    MissingExtra: one line with the fix, before anything is served."""
    from .. import switches
    from .._extras import needs

    value = choice if choice is not None else switches.read("MCPKIT_LOOP", default="auto")
    if value == "uvloop":
        with needs("fast", "--loop uvloop" if choice is not None else "MCPKIT_LOOP=uvloop"):
            import uvloop  # noqa: F401
    return value


def uvicorn_config(app: Any, limits: ConnectionLimits | None = None, *,
                   shutdown_timeout: float | None = SHUTDOWN_TIMEOUT, **options: Any) -> Any:
    """A uvicorn Config with the connection limits (transports/connections.py) applied, and
    uvicorn's wait at shutdown a little longer than ``shutdown_timeout``, the deadline of the
    requests in flight (None: none), after which the app ends them (transports/http_drain.py)."""
    from .._extras import needs

    with needs("http", "serving HTTP"):
        import uvicorn

    from .connections import ConnectionLimits
    from .graceful import BACKSTOP

    if os.environ.get("FORWARDED_ALLOW_IPS"):
        # it once made uvicorn trust those proxies; ignoring it would count every client behind
        # them as the proxy's one address without a word
        raise SystemExit("mcpkit: FORWARDED_ALLOW_IPS is uvicorn's, and mcpkit does not read it; give the proxies "
                         "with --forwarded-allow-ips (http_app(forwarded_allow_ips=...)) and unset FORWARDED_ALLOW_IPS")
    limits = limits if limits is not None else ConnectionLimits()
    wait = None if shutdown_timeout is None else shutdown_timeout + BACKSTOP
    # access_log off: a log line per request costs more than the request itself. proxy_headers
    # off: uvicorn would trust X-Forwarded-For from 127.0.0.1 and ::1 (or FORWARDED_ALLOW_IPS),
    # so any local process could name any client; the app reads it from the peers it is told
    # to trust, none by default (transports/forwarded.py)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", proxy_headers=False,
                            timeout_graceful_shutdown=wait, **limits.uvicorn_options(), **options)
    config.mcpkit_header_timeout = limits.header_timeout  # read by HeaderDeadlineH11
    return config


def serve_http(server: Server, *, host: str = "127.0.0.1", port: int = 8000,
               timeout_graceful_shutdown: float | None = SHUTDOWN_TIMEOUT, limits: ConnectionLimits | None = None,
               app: Any = None, on_ready: Callable[[str], None] | None = None, bind_option: str = "--http",
               sock: socket.socket | None = None, loop: str | None = None, **options: Any) -> None:
    """Serve until SIGTERM/SIGINT; then stop accepting connections, end the open SSE streams
    (a client holding its GET stream reconnects elsewhere), let the requests in flight finish
    for at most ``timeout_graceful_shutdown`` seconds (None: no limit), answer those still
    running with an error, end the sessions, and return (transports/graceful.py). A second
    SIGINT ends everything at once.

    ``limits`` bounds connections (header deadline, keep-alive, how many at once, head size);
    the defaults of :class:`~mcpkit.transports.connections.ConnectionLimits` apply without it.
    ``app`` replaces ``server.http_app(**options)`` (e.g. with more routes around it);
    ``on_ready(base_url)`` is called once the socket listens, with e.g. ``http://127.0.0.1:8000``;
    ``bind_option`` is the flag a failed bind's fix names (:func:`bind`); ``sock``, a socket
    :func:`bind` made already (a caller that must know the address is usable before it starts
    anything else), is served instead of binding ``host`` and ``port``; ``loop``, the event
    loop (:func:`event_loop`: ``auto``, ``asyncio`` or ``uvloop``; ``MCPKIT_LOOP`` without it)."""
    from .._extras import needs

    with needs("http", "serving HTTP"):
        from .graceful import GracefulServer
    loop = event_loop(loop)
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if app is None:
        if timeout_graceful_shutdown is not None:
            options.setdefault("shutdown_timeout", timeout_graceful_shutdown)
        app = server.http_app(**options)
    if sock is None:
        sock = bind(host, port, option=bind_option)  # a taken port is one line; port 0 gets its number now
    bound_host, bound_port = sock.getsockname()[:2]
    shown = _shown(bound_host)
    config = uvicorn_config(app, limits, shutdown_timeout=timeout_graceful_shutdown, loop=loop)
    if on_ready is not None:
        on_ready(f"http://{shown}:{bound_port}")
    GracefulServer(config, timeout_graceful_shutdown).run(sockets=[sock])
