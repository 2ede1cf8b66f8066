"""Running the HTTP app on uvicorn (the ``http`` extra)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..server.server import Server

__all__ = ["serve_http"]


def serve_http(server: Server, *, host: str = "127.0.0.1", port: int = 8000,
               timeout_graceful_shutdown: float | None = 30.0, **options: Any) -> None:
    """Serve until SIGTERM/SIGINT; then stop accepting connections, let the requests in flight
    finish for at most ``timeout_graceful_shutdown`` seconds, and end the sessions."""
    try:
        import uvicorn
    except ImportError:  # pragma: no cover - depends on the environment
        raise SystemExit("mcpkit: serving HTTP needs uvicorn: pip install 'mcpkit[http]'") from None
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app = server.http_app(**options)
    # access_log off: a log line per request costs more than the request itself
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on",
                timeout_graceful_shutdown=timeout_graceful_shutdown)
