"""The server behind the inspector page when it is not loaded in the dev process: a proxy (the
``mcpkit proxy`` Upstream, proxy/upstream.py) in front of any TARGET, a command of any language or
a URL, and, under ``--reload``, in front of the developer's own server run by dev/child.py.

The page's session is the proxy's, in the dev process, and it outlives every restart of the
server behind it: the page's port never closes, a restart withdraws the old tools and lists the
new ones (``list_changed`` on the page's GET stream), and :class:`DevEvents` tells the page what
happened (restarting, up again, or the load error to show until it is fixed).

What passes through is what passes through ``mcpkit proxy`` (docs/proxy.md): calls with their
progress, log messages and cancellation; the server's requests of its client (sampling,
elicitation, roots) asked of the page's session; list changes and resource updates.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Attachment", "DevEvents"]


class DevEvents:
    """The state of the server behind the page, pushed to every open ``/dev/events`` stream."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {"state": "starting", "error": None, "generation": 0}
        self._lock = threading.Lock()
        self._queues: set[asyncio.Queue[dict[str, Any]]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def publish(self, **state: Any) -> None:
        """From any thread: the new state, to every listener."""
        with self._lock:
            self.state = {**state, "generation": self.state["generation"] + 1}
            current, loop, queues = self.state, self._loop, list(self._queues)
        if loop is None or not queues:
            return
        with contextlib.suppress(RuntimeError):  # the loop ended: nobody listens any more
            loop.call_soon_threadsafe(lambda: [q.put_nowait(current) for q in queues])

    @contextlib.contextmanager
    def listening(self) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        """On the serving loop: a queue holding the current state, then each new one."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._queues.add(queue)
            queue.put_nowait(self.state)
        try:
            yield queue
        finally:
            with self._lock:
                self._queues.discard(queue)


def _echo(text: str) -> None:
    """The server's own stderr (its start-up line, its logs, its prints), shown as it comes."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(text)
        sys.stderr.flush()


class Attachment:
    """One server behind the page: ``target`` (an argv or a URL) mirrored into :attr:`server`.

    ``state_file``: the server is dev/child.py, which writes there the files it imported and its
    load error; :meth:`restart` starts it again and :meth:`owns` says which changes matter."""

    def __init__(self, target: Any, *, transport: str = "auto", headers: dict[str, str] | None = None,
                 inherit_env: bool | list[str] | None = None, state_file: str | None = None,
                 events: DevEvents | None = None) -> None:
        from ..server.server import Server

        self.target = target
        self.options: dict[str, Any] = {"transport": transport, "headers": headers, "inherit_env": inherit_env}
        self.state_file = state_file
        self.events = events or DevEvents()
        self.server = Server("mcpkit-dev")
        self.upstream: Any = None
        self.files: frozenset[str] = frozenset()
        self.error: str | None = None
        #: the last load failed on a one-line refusal (a flag that cannot apply), not in the code
        self.refused = False
        self._restarting = threading.Lock()

    def start(self) -> bool:
        """Start (or start again) the server behind the page; False when it did not come up
        (:attr:`error` says why, and the page shows it)."""
        from ..proxy.upstream import Upstream

        class Shown(Upstream):
            def _new_client(self) -> Any:
                client = super()._new_client()
                if hasattr(client.transport, "on_stderr"):
                    client.transport.on_stderr = _echo
                return client

        with self._restarting:
            self.events.publish(state="starting", error=None)
            if self.state_file is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.state_file)
            from ..proxy.cli import quiet_start

            # a server that does not start is said once, by the dev command or the page
            with quiet_start(True):
                upstream = Shown(self.server, self.target, name="server", **self.options)
                if self.state_file is None:
                    upstream.start()  # a server that drops is started (or reached) again, as by mcpkit proxy
                else:
                    # one attempt: a server that does not load is started again by the next
                    # change to its files, not by a retry loop printing its error every few seconds
                    upstream.bridge.step()
                    if upstream.up:
                        upstream.bridge.start()
            loaded = self._read_state()
            if not upstream.up:
                self.error = loaded or upstream.connect_error or upstream.last_error or "it did not start"
                if self.state_file is not None:
                    upstream.close()
                    upstream = None
                self.upstream = upstream
                self.events.publish(state="down", error=self.error)
                return False
            self.upstream, self.error = upstream, None
            info = upstream.server_info
            if isinstance(info.get("name"), str):
                self.server.name = info["name"]
                self.server.version = str(info.get("version") or self.server.version)
                self.server.title = info.get("title") if isinstance(info.get("title"), str) else None
            self.server.instructions = upstream.instructions
            self.events.publish(state="up", error=None, name=self.server.name, version=self.server.version)
            return True

    def restart(self, changed: list[str]) -> bool:
        """Stop the server behind the page and start it again (its files changed)."""
        self.events.publish(state="restarting", error=None, changed=changed)
        self.stop()
        return self.start()

    def stop(self) -> None:
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            upstream.close()

    def _read_state(self) -> str | None:
        """The child's account of itself: the files it imported, and its load error."""
        if self.state_file is None:
            return None
        try:
            with open(self.state_file, encoding="utf-8") as f:
                state = json.load(f)
        except (OSError, ValueError):
            return None  # it did not get that far (a bad interpreter): its stderr says why
        if state.get("files"):
            self.files = frozenset(state["files"])  # after a failure: what it imported until then
        self.refused = bool(state.get("refused"))
        return state.get("error")

    def owns(self, path: str) -> bool:
        """Whether a change to ``path`` restarts the server: a file it imported."""
        return os.path.realpath(path) in self.files


def child_command(target_text: str, watched: str, state_file: str, args: Any) -> list[str]:
    """The command line of dev/child.py serving ``target_text`` with the policy flags given."""
    command = [sys.executable, "-m", "mcpkit.dev.child", "--state", state_file, "--watched", watched]
    for flag, on in (("--read-only", args.read_only), ("--policy", args.policy)):
        if on:
            command.append(flag)
    for root in args.root or ():
        command += ["--root", root]
    return [*command, *([target_text] if target_text else [])]


def state_file() -> str:
    """A fresh file for the child's account of itself (removed by the caller)."""
    handle, path = tempfile.mkstemp(prefix="mcpkit-dev-", suffix=".json")
    os.close(handle)
    return path
