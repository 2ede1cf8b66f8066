"""The event loop the upstream connections live on: one per process, in a daemon thread.

An upstream Client belongs to one loop, while the sessions it serves run on theirs (stdio's
handler loop, uvicorn's, a test's). Keeping every upstream on a loop of its own means a proxy
works the same under any transport, can connect before serving starts (so its tools are listed
from the first ``tools/list``), and a slow upstream never stalls a downstream loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["UpstreamLoop", "upstream_loop"]

T = TypeVar("T")


class UpstreamLoop:
    """An asyncio loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.loop.call_soon(started.set)
        self.thread = threading.Thread(target=self.loop.run_forever, name="mcpkit-upstream", daemon=True)
        self.thread.start()
        started.wait()

    def on_loop(self) -> bool:
        return threading.current_thread() is self.thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it, from any other thread."""
        if self.on_loop():
            coro.close()
            raise RuntimeError("UpstreamLoop.run() would wait for the loop from its own thread")
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    async def run_here(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` run on the upstream loop, from a coroutine on another loop (or this one).
        Cancelling the caller cancels ``coro``."""
        if self.on_loop():
            return await coro
        return await asyncio.wrap_future(self.submit(coro))


_LOOP: UpstreamLoop | None = None
_LOCK = threading.Lock()


def upstream_loop() -> UpstreamLoop:
    """The process's upstream loop, started on first use."""
    global _LOOP
    with _LOCK:
        if _LOOP is None or not _LOOP.thread.is_alive():
            _LOOP = UpstreamLoop()
        return _LOOP
