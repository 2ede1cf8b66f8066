"""``mcpkit dev TARGET [--port N] [--reload]``: serve an mcpkit server over Streamable HTTP on
loopback with the inspector page next to it; ``--reload`` restarts it when its files change
(watchfiles, the ``reload`` extra, imported only then)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

__all__ = ["add_parser", "DEFAULT_PORT"]

#: the port tried first; when it is taken (and none was asked for) any free port is used
DEFAULT_PORT = 6280


def _port_number(value: str) -> int:
    """A TCP port (argparse type); the socket layer would take 99999 modulo 65536."""
    if not value.isdigit() or int(value) > 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {value!r}")
    return int(value)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dev", help="serve a server on loopback HTTP with a browser inspector (--reload to restart "
                       "on changes)")
    p.add_argument("target", nargs="?", metavar="TARGET",
                   help="server.py, package.module:ATTR, or a command line running one (default: the reference "
                   "server)")
    p.add_argument("--port", type=_port_number, default=None, help=f"the port on 127.0.0.1 (default {DEFAULT_PORT}, or a free "
                   "one when that is taken)")
    p.add_argument("--reload", action="store_true", help="restart the server when a .py file under its folder changes")
    p.add_argument("--open", action="store_true", help="open the inspector in the default web browser")
    p.add_argument("--root", action="append", metavar="DIR", help="policy: a sandbox root (as for serve)")
    p.add_argument("--read-only", action="store_true", help="policy: only read-only tools (as for serve)")
    p.add_argument("--policy", action="store_true", help="turn on the secure-by-default policy (as for serve)")
    p.set_defaults(func=_run)


def _port(args: argparse.Namespace) -> int:
    if args.port is not None:
        return args.port
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", DEFAULT_PORT))
        except OSError:
            return 0
    return DEFAULT_PORT


def _run(args: argparse.Namespace) -> int:
    from .._extras import require
    from ..cli_serving import policy_env, policy_flags_apply
    from ..targets import resolve

    require(("mcpkit dev", "http"), *([("--reload", "reload")] if args.reload else []))
    target = resolve(args.target)
    if target.loadable() is None:
        raise SystemExit(f"mcpkit: dev serves an mcpkit server (a .py file or package.module:ATTR); for "
                         f"{args.target!r} use: mcpkit list {shlex.quote(args.target)}, or the MCP Inspector")
    port = _port(args)
    if args.reload:
        return _reload(args, target, port)
    policy_env(args)
    server = target.load()
    policy_flags_apply(server, args)  # --read-only and --root refused where they change nothing, as by serve
    from ..startup import announce, startup_line
    from ..switches import read
    from ..transports.serve import serve_http
    from .app import DevApp

    mcp_app = server.http_app(**_as_on_stdio(server))
    app = DevApp(server, mcp_app, reload=read("MCPKIT_DEV_RELOADING", default=False))

    def ready(base: str) -> None:
        announce(startup_line(server, "http", base + mcp_app.path))
        announce(f"mcpkit dev: inspector at {base}/  (Ctrl-C to stop)")
        if args.open:
            import webbrowser

            webbrowser.open(base + "/")

    serve_http(server, host="127.0.0.1", port=port, timeout_graceful_shutdown=1.0, app=app, on_ready=ready,
               bind_option="--port")
    return 0


def _reload(args: argparse.Namespace, target: Any, port: int) -> int:
    from .._extras import needs

    with needs("reload", "dev --reload"):
        import watchfiles
    if port == 0:
        from ..transports.serve import bind

        sock = bind("127.0.0.1", 0)  # one port for every restart, so the page keeps working
        port = sock.getsockname()[1]
        sock.close()
    loadable = target.loadable()
    watched = os.path.dirname(loadable.location) if loadable.kind == "file" else os.getcwd()
    command = [sys.executable, "-m", "mcpkit", "dev", *([target.text] if target.text else []), "--port", str(port)]
    for flag, on in (("--read-only", args.read_only), ("--policy", args.policy)):
        if on:
            command.append(flag)
    for root in args.root or ():
        command += ["--root", root]
    print(f"mcpkit dev: watching {watched} for changes to .py files", file=sys.stderr, flush=True)
    os.environ["MCPKIT_DEV_RELOADING"] = "1"
    if args.open:  # once, not at every restart
        import threading
        import webbrowser

        threading.Timer(1.5, webbrowser.open, [f"http://127.0.0.1:{port}/"]).start()

    def restarted(changes: set[Any]) -> None:
        names = sorted({os.path.relpath(path, watched) for _, path in changes})
        print(f"mcpkit dev: {', '.join(names)} changed; restarting", file=sys.stderr, flush=True)

    try:
        watchfiles.run_process(watched, target=shlex.join(command), target_type="command",
                               watch_filter=watchfiles.PythonFilter(), callback=restarted)
    except KeyboardInterrupt:
        # Ctrl-C, or SIGTERM (which watchfiles turns into one): the way to stop, once the server
        # was stopped (run_process's finally); it may arrive outside the watch, which swallows it
        pass
    return 0


class _StdioCredential:
    """A server's API-key auth answering every request with the credential its stdio launch reads
    from the environment: the inspector page cannot send a key header, and under ``mcpkit dev``
    it stands where the developer's MCP client would, on this machine."""

    def __init__(self, auth: Any, access: Any) -> None:
        self._auth = auth
        self._access = access

    def __getattr__(self, name: str) -> Any:
        return getattr(self._auth, name)

    async def authenticate(self, value: bytes | None, resource: str) -> Any:
        return self._access


def _as_on_stdio(server: Any) -> dict[str, Any]:
    """``http_app`` options serving the page as stdio serves a client: a server whose auth reads
    its credential from the environment on stdio (``ApiKeyAuth``) gets it here too, or the same
    one line as on stdio when it is missing; other auth is the server's, unchanged."""
    auth = getattr(server, "auth", None)
    read_credential = getattr(auth, "stdio_access", None)
    if not callable(read_credential):
        return {}
    from ..switches import SwitchError

    try:
        access = read_credential()
    except SwitchError as exc:
        raise SystemExit(f"mcpkit: {exc}") from None
    return {"auth": _StdioCredential(auth, access)}

