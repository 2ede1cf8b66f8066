"""Process isolation: ``@server.tool(isolation="process")`` runs each call in a worker process.

Python cannot stop a thread, and a C extension that holds the GIL (a catastrophic ``re``
match, a long numpy or regex call) stops every other thread of the server too: its deadline
never fires, pings go unanswered, stdin EOF is not noticed. A call of an isolated tool runs in
a worker process instead; the server's thread waits on a pipe (without the GIL), so the server
keeps serving, and at the call's deadline the worker is killed, the call answered E_TIMEOUT,
and a fresh worker takes its place.

Constraints (checked at registration where possible):

- the handler is a module-level function, reachable by pickle as ``module.qualname``
  (no lambda, no closure, no bound method of a local object);
- it takes no ``Context`` (the session lives in the server process) and cannot call other tools;
- its arguments and its return value are pickled: plain JSON values, paths (SandboxPath
  included) and dataclasses are fine; open files and sockets are not;
- a worker starts by ``fork`` on POSIX (the handler's module is already loaded in the server
  process, so ``mcpkit serve file.py`` works as is), ``spawn`` elsewhere;
  ``MCPKIT_ISOLATION_START=spawn|forkserver`` picks another start method (the handler's
  module must then be importable by name);
- state a handler keeps in globals stays in its worker, which may be replaced at any time;
- the workers are ``MCPKIT_ISOLATION_WORKERS`` processes (default: min(4, CPUs)), started on
  first use and kept; more concurrent isolated calls wait for one, within their deadline.

A worker keeps only fds 0-2 (stdin /dev/null, stdout = stderr: it can never write on a stdio
server's protocol wire) and its pipe; every other descriptor it inherited (listening sockets,
the audit log) is replaced by /dev/null, and on Linux it dies with the server.

The cost is a pickle round trip and two pipe writes per call (bench/isolation_overhead.py
measures it): use it for CPU-bound handlers, handlers that parse untrusted input with
engines that can blow up, and C extensions that hold the GIL, not for every tool.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
from typing import TYPE_CHECKING, Any

from ..protocol.errors import E_INTERNAL, E_TIMEOUT, ToolError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = ["MODES", "call", "check_handler", "isolated_targets", "shutdown"]

log = logging.getLogger("mcpkit.policy")

#: the values ``isolation=`` accepts (None: in the server process, the default)
MODES = ("process",)

_ENV_WORKERS = "MCPKIT_ISOLATION_WORKERS"
_ENV_START = "MCPKIT_ISOLATION_START"
#: how often a waiting call looks at its cancellation flag
_POLL = 0.1


def check_mode(value: Any) -> str | None:
    """``isolation=`` as given to a tool: "process" or None; anything else is a one-line error."""
    if value in (None, False):
        return None
    if value not in MODES:
        raise ValueError(f"isolation={value!r} is not supported: use isolation='process' (or None)")
    return str(value)


def check_handler(func: Any, name: str, context_param: str | None) -> None:
    """Refuse at registration a handler a worker could not run (see the module docstring)."""
    if context_param is not None:
        raise TypeError(f"tool {name!r}: isolation='process' handlers cannot take a Context (it lives in the "
                        f"server process); drop the {context_param!r} parameter or the isolation")
    qualname = getattr(func, "__qualname__", "")
    if not getattr(func, "__module__", None) or "<" in qualname or not qualname:
        raise TypeError(f"tool {name!r}: isolation='process' needs a module-level function (pickled by name), "
                        f"not {qualname or func!r}; define the handler at the top level of a module")


def isolated_targets(server: Any, tool: Any) -> frozenset[str | None] | None:
    """Which targets of ``tool`` run isolated: None for the tool itself, an action's name for
    an action of a manager tool whose function is also registered as an isolated tool (an
    action runs as itself). None when nothing does: the common case costs one test."""
    own = getattr(tool.options, "isolation", None) if tool.options is not None else None
    found: set[str | None] = set()
    if own is not None and tool.actions is None:
        found.add(None)
    if tool.actions is not None:
        isolated = {id(t.handler) for t in server._tools.values()
                    if t.options is not None and getattr(t.options, "isolation", None) is not None}
        for name, act in tool.actions.items():
            if own is not None or id(act.handler) in isolated:
                if act.context_param is None:
                    found.add(name)
    return frozenset(found) if found else None


# -------------------------------------------------------------------------- the call's side


def call(cc: Any, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], is_async: bool) -> Any:
    """The pipeline's runner (server/terminals.py run_tool) for an isolated call: the handler's
    value, or an awaitable of it in an async chain; a worker killed at the deadline is an
    E_TIMEOUT ToolError, answered (and audited) by the outermost step like any failure."""
    timeout = cc.settings.timeout
    if target.is_async or is_async:
        return _call_async(cc, target, args, kwargs, timeout)
    return _call_sync(cc, target, args, kwargs, timeout)


def _shape(cc: Any, value: Any) -> Any:
    return value if cc.raw else cc.item.to_result(value)


def _call_sync(cc: Any, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None) -> Any:
    from ..server.pipeline import CORRELATION_ID

    before_block = getattr(cc.session, "before_block", None)
    if before_block is not None:
        before_block()  # on stdio, reading moves to another thread while this call waits
    # the request's cancellation flag (the outer request's, for a nested call): set when the
    # client cancels it, and then the worker is killed too
    outer = cc.outer_context
    cancelled = outer.cancelled if outer is not None else (
        cc.session.context(cc.request).cancelled if hasattr(cc.session, "context") else None)
    token = CORRELATION_ID.set(cc.correlation_id)
    try:
        value = _pool().call(target.handler, args, kwargs, timeout, cancelled)
    except _Cancelled:
        cc.state["cancelled"] = True
        return None  # the client forgot the request: no answer goes out
    except _Expired:
        raise _timeout_error(cc, timeout) from None
    finally:
        CORRELATION_ID.reset(token)
    return _shape(cc, value)


async def _call_async(cc: Any, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                      timeout: float | None) -> Any:
    import asyncio

    from ..server.pipeline import CORRELATION_ID

    cancelled = threading.Event()
    token = CORRELATION_ID.set(cc.correlation_id)
    try:
        value = await asyncio.to_thread(_pool().call, target.handler, args, kwargs, timeout, cancelled)
    except asyncio.CancelledError:
        cancelled.set()  # the client cancelled the call: its worker is killed
        raise
    except _Cancelled:
        raise asyncio.CancelledError() from None
    except _Expired:
        raise _timeout_error(cc, timeout) from None
    finally:
        CORRELATION_ID.reset(token)
    return _shape(cc, value)


def _timeout_error(cc: Any, timeout: float | None) -> ToolError:
    name = cc.item.name if cc.action is None else f"{cc.item.name}.{cc.action}"
    return ToolError(
        f"Tool {name!r} did not finish within {timeout:g} s; its worker process was stopped.",
        code=E_TIMEOUT,
        details={"timeoutMs": int((timeout or 0) * 1000)},
        suggested_fix="Retry with a smaller request, or later if the system is busy.",
    )


class _Expired(Exception):
    """The call's deadline passed (its worker, if it had one, is killed)."""


class _Cancelled(Exception):
    """The call was cancelled while it ran (its worker is killed)."""


class _RemoteError(Exception):
    """An exception a handler raised in its worker that could not be sent back as itself;
    its message names the original type and carries the worker's traceback."""


# -------------------------------------------------------------------------- the pool


class _Worker:
    __slots__ = ("process", "conn")

    def __init__(self, process: Any, conn: Connection) -> None:
        self.process = process
        self.conn = conn

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.join(2.0)
        except Exception:  # noqa: BLE001 - already gone
            pass
        try:
            self.conn.close()
        except OSError:
            pass


class _WorkerPool:
    """At most ``size`` worker processes, started on demand and reused until one is killed."""

    def __init__(self, size: int, start_method: str) -> None:
        import multiprocessing

        self.size = size
        self._context = multiprocessing.get_context(start_method)
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._live: set[_Worker] = set()
        self._spawner: threading.Thread | None = None

    def call(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None,
             cancelled: threading.Event | None) -> Any:
        """``fn(*args, **kwargs)`` in a worker; _Expired when ``timeout`` seconds pass first."""
        deadline = None if not timeout else time.monotonic() + timeout
        try:
            payload = pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - PicklingError, TypeError, AttributeError
            raise ToolError(f"The call cannot be sent to a worker process: {exc}.", code=E_INTERNAL) from None
        if not self._slots.acquire(timeout=None if deadline is None else max(0.0, deadline - time.monotonic())):
            raise _Expired()
        worker: _Worker | None = None
        try:
            worker = self._take()
            worker.conn.send_bytes(payload)
            conn = worker.conn
            while True:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                if cancelled is not None:
                    wait = _POLL if wait is None else min(wait, _POLL)
                if conn.poll(wait):
                    break
                if cancelled is not None and cancelled.is_set():
                    raise _Cancelled()
                if deadline is not None and time.monotonic() >= deadline:
                    raise _Expired()
            reply = conn.recv_bytes()
        except (EOFError, OSError):
            code = worker.process.exitcode if worker is not None else None
            raise ToolError(f"The worker process running the call died (exit code {code}).",
                            code=E_INTERNAL) from None
        else:
            self._give_back(worker)
            worker = None
        finally:
            if worker is not None:
                self._discard(worker)
            self._slots.release()
        status, value = pickle.loads(reply)
        if status == "ok":
            return value
        if status == "tool_error":
            message, code, details, retryable, fix = value
            raise ToolError(message, code=code, details=details, retryable=retryable, suggested_fix=fix)
        if status == "raised":
            exc, trace = value
            exc.add_note(f"in the worker process:\n{trace}")
            raise exc
        kind, text, trace = value
        raise _RemoteError(f"{kind}: {text}\nin the worker process:\n{trace}")

    def _take(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.process.is_alive():
                    return worker
                self._live.discard(worker)
                worker.kill()
        return self._start()

    def _start(self) -> _Worker:
        # Workers are started by one long-lived thread: on Linux a worker dies with the thread
        # that forked it (PR_SET_PDEATHSIG), which must therefore live as long as the server.
        import queue

        with self._lock:
            if self._spawner is None:
                self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
                self._spawner = threading.Thread(target=self._spawn_loop, name="mcpkit-isolation", daemon=True)
                self._spawner.start()
        reply: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._requests.put(reply)
        outcome = reply.get()
        if isinstance(outcome, BaseException):
            raise outcome
        worker: _Worker = outcome
        with self._lock:
            self._live.add(worker)
        return worker

    def _spawn_loop(self) -> None:
        while True:
            reply = self._requests.get()
            try:
                parent, child = self._context.Pipe(duplex=True)
                process = self._context.Process(target=_worker_main, args=(child,), name="mcpkit-isolated",
                                                daemon=True)
                process.start()
                child.close()
                reply.put(_Worker(process, parent))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                reply.put(exc)

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)

    def _discard(self, worker: _Worker) -> None:
        """Kill a worker (deadline, cancellation, or it died) and start its replacement in the
        background, so the next call does not pay for the start."""
        with self._lock:
            self._live.discard(worker)
        worker.kill()
        threading.Thread(target=self._replace, name="mcpkit-isolation-respawn", daemon=True).start()

    def _replace(self) -> None:
        try:
            worker = self._start()
        except Exception:  # noqa: BLE001 - the next call starts one itself
            log.warning("could not start a replacement worker process", exc_info=True)
            return
        self._give_back(worker)

    def workers(self) -> list[int]:
        """The process ids of the live workers (for tests and diagnostics)."""
        with self._lock:
            return [w.process.pid for w in self._live if w.process.is_alive()]

    def close(self) -> None:
        with self._lock:
            live, self._live, self._idle = list(self._live), set(), []
        for worker in live:
            worker.kill()


_POOL: _WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> _WorkerPool:
    global _POOL
    pool = _POOL
    if pool is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = _new_pool()
            pool = _POOL
    return pool


def _new_pool() -> _WorkerPool:
    from ..switches import read

    size = read(_ENV_WORKERS, default=min(4, os.cpu_count() or 1))
    method = read(_ENV_START, default="fork" if os.name == "posix" else "spawn")
    import atexit
    import multiprocessing.util  # noqa: F401 - its exit hook (joining children) is registered first

    pool = _WorkerPool(size, method)
    atexit.register(pool.close)  # so this one, killing the workers, runs before it
    return pool


def shutdown() -> None:
    """Kill every worker process (a later isolated call starts new ones)."""
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None:
        pool.close()


# -------------------------------------------------------------------------- the worker's side


def _worker_main(conn: Connection) -> None:
    _detach(conn.fileno())
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the server closed the pipe: it is done with this worker
        conn.send_bytes(_execute(data))


def _execute(data: bytes) -> bytes:
    import traceback

    try:
        fn, args, kwargs = pickle.loads(data)
        value = fn(*args, **kwargs)
        if hasattr(value, "__await__"):
            import asyncio

            value = asyncio.run(_awaited(value))
        return pickle.dumps(("ok", value), protocol=pickle.HIGHEST_PROTOCOL)
    except ToolError as exc:
        reply: tuple[str, Any] = ("tool_error", (exc.message, exc.code, _plain(exc.details), exc.retryable,
                                                 exc.suggested_fix))
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the server
        trace = traceback.format_exc()
        try:
            copy = pickle.loads(pickle.dumps(exc))
            reply = ("raised", (exc, trace)) if type(copy) is type(exc) and copy.args == exc.args \
                else ("remote", (type(exc).__name__, str(exc), trace))
        except Exception:  # noqa: BLE001 - an exception that cannot travel is described instead
            reply = ("remote", (type(exc).__name__, str(exc), trace))
    try:
        return pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001
        return pickle.dumps(("remote", (type(exc).__name__, f"the reply cannot be pickled: {exc}", "")))


async def _awaited(value: Any) -> Any:
    return await value


def _plain(details: Any) -> Any:
    try:
        pickle.dumps(details)
        return details
    except Exception:  # noqa: BLE001
        return repr(details)


def _detach(keep: int) -> None:
    """The worker keeps fds 0-2 and its pipe; stdout becomes stderr (a stdio server's wire must
    never see a stray line, ST-02), every other inherited descriptor /dev/null (a handler
    cannot reach the server's sockets or audit log through them, and an fd number a stale
    object closes later is never one the handler opened)."""
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's: it stops the workers
    for name in ("SIGTERM", "SIGHUP"):  # not the server's handlers, inherited by fork
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.dup2(2, 1)
    except OSError:
        pass
    sys.stdout = sys.stderr
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        names = []
    if names:
        null = os.open(os.devnull, os.O_RDWR)
        for name in names:
            fd = int(name)
            if fd > 2 and fd not in (keep, null):
                try:
                    os.dup2(null, fd)
                except OSError:
                    pass
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the server
            if os.getppid() == 1:
                os._exit(0)  # the server is already gone
        except Exception:  # noqa: BLE001 - best effort; the pipe's EOF ends the worker too
            pass
