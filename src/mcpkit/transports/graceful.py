"""uvicorn's Server with the shutdown mcpkit serves with (``mcpkit serve --http``, proxy, dev).

Two changes to uvicorn's own:

- as its shutdown begins, the apps running on its loop end their open streams and give the
  requests in flight ``shutdown_timeout`` seconds (transports/http_drain.py); after a second
  Ctrl-C, when uvicorn stops waiting, they end everything at once, and their lifespan ends,
  rather than each task being cancelled with a traceback;
- once shut down, the process goes on to exit normally (code 0, exit handlers run: the audit
  log's last lines are written). uvicorn raises the signal it caught again, which ends the
  process by SIGTERM (-15, no exit handler runs) or by a KeyboardInterrupt (130).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

from .._extras import needs
from .http_drain import apps_on

with needs("http", "serving HTTP"):
    import uvicorn

__all__ = ["GracefulServer", "BACKSTOP"]

#: seconds uvicorn still waits for connections past the apps' deadline before it cancels them
#: (a client that stopped reading its stream can hold a write)
BACKSTOP = 1.0


class GracefulServer(uvicorn.Server):
    def __init__(self, config: Any, shutdown_timeout: float | None) -> None:
        super().__init__(config)
        self.shutdown_timeout = shutdown_timeout

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, without raising the caught signal again afterwards."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        apps = apps_on(asyncio.get_running_loop())
        timeout = float("inf") if self.shutdown_timeout is None else self.shutdown_timeout
        for app in apps:
            app.drain(timeout)
        await super().shutdown(sockets)
        if self.force_exit:
            # uvicorn quit waiting (a second Ctrl-C): what is left ends now, and the lifespan it
            # skipped ends too, rather than each being cancelled with a traceback at the exit
            for app in apps:
                app.expire()
            tasks = list(self.server_state.tasks)
            if tasks:
                await asyncio.wait(tasks, timeout=BACKSTOP)
            await self.lifespan.shutdown()
