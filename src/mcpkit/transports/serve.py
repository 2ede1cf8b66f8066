"""Running the HTTP app on uvicorn (the ``http`` extra)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..server.server import Server
    from .connections import ConnectionLimits

__all__ = ["serve_http", "uvicorn_config"]


def uvicorn_config(app: Any, limits: ConnectionLimits | None = None, **options: Any) -> Any:
    """A uvicorn Config with the connection limits (transports/connections.py) applied."""
    import uvicorn

    from .connections import ConnectionLimits

    limits = limits if limits is not None else ConnectionLimits()
    # access_log off: a log line per request costs more than the request itself
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            **limits.uvicorn_options(), **options)
    config.mcpkit_header_timeout = limits.header_timeout  # read by HeaderDeadlineH11
    return config


def serve_http(server: Server, *, host: str = "127.0.0.1", port: int = 8000,
               timeout_graceful_shutdown: float | None = 30.0, limits: ConnectionLimits | None = None,
               **options: Any) -> None:
    """Serve until SIGTERM/SIGINT; then stop accepting connections, let the requests in flight
    finish for at most ``timeout_graceful_shutdown`` seconds, and end the sessions.

    ``limits`` bounds connections (header deadline, keep-alive, how many at once, head size);
    the defaults of :class:`~mcpkit.transports.connections.ConnectionLimits` apply without it.
    """
    try:
        import uvicorn
    except ImportError:  # pragma: no cover - depends on the environment
        raise SystemExit("mcpkit: serving HTTP needs uvicorn: pip install 'mcpkit[http]'") from None
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app = server.http_app(**options)
    config = uvicorn_config(app, limits, host=host, port=port, timeout_graceful_shutdown=timeout_graceful_shutdown)
    uvicorn.Server(config).run()
