"""``mcpkit dev TARGET [--port N] [--reload]``: the inspector page on loopback, in front of any
server: an mcpkit server loaded here (served over Streamable HTTP next to the page), or, through
the proxy (dev/attach.py), a command of any language, a URL, or (``--reload``) the developer's own
server run by dev/child.py and restarted behind the page when one of its files changes
(watchfiles, the ``reload`` extra, imported only then)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading
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
    p = sub.add_parser("dev", help="a browser inspector on loopback in front of any server (--reload to restart "
                       "yours on changes)")
    p.add_argument("target", nargs="?", metavar="TARGET",
                   help="server.py, package.module:ATTR, a command line in quotes (any stdio server), or a URL "
                   "(default: the reference server)")
    p.add_argument("--port", type=_port_number, default=None, help=f"the port on 127.0.0.1 (default {DEFAULT_PORT}, or a free "
                   "one when that is taken)")
    p.add_argument("--reload", action="store_true", help="restart the server when a file of the folder it imported "
                   "changes (the page stays)")
    p.add_argument("--open", action="store_true", help="open the inspector in the default web browser")
    p.add_argument("--root", action="append", metavar="DIR", help="policy: a sandbox root (as for serve)")
    p.add_argument("--read-only", action="store_true", help="policy: only read-only tools (as for serve)")
    p.add_argument("--policy", action="store_true", help="turn on the secure-by-default policy (as for serve)")
    p.add_argument("--header", action="append", metavar="'NAME: VALUE'", help="an HTTP header for a URL target "
                   "(repeatable)")
    p.add_argument("--sse", action="store_true", help="the URL is a legacy HTTP+SSE endpoint")
    p.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                   help="pass this variable to a command line's server (repeatable, as for list and call)")
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
    from ..targets import resolve

    require(("mcpkit dev", "http"), *([("--reload", "reload")] if args.reload else []))
    target = resolve(args.target)
    loadable = target.loadable()
    if loadable is None:
        return _attach(args, target)
    for flag, given in (("--header", args.header), ("--sse", args.sse), ("--pass-env", args.pass_env)):
        if given:
            raise SystemExit(f"mcpkit: dev {flag} applies to a URL or a command line; {args.target!r} is an mcpkit "
                             "server served here")
    if args.reload:
        return _reload(args, target, loadable)
    from ..cli_serving import policy_env, policy_flags_apply
    from ..server.details import show

    show()  # the developer is the client: internal errors name the exception and its line
    policy_env(args)
    server = target.load()
    policy_flags_apply(server, args)  # --read-only and --root refused where they change nothing, as by serve
    from .app import DevApp

    mcp_app = server.http_app(**_as_on_stdio(server))
    _serve(args, server, DevApp(server, mcp_app))
    return 0


def _serve(args: argparse.Namespace, server: Any, app: Any, sock: Any = None) -> None:
    from ..startup import announce, startup_line
    from ..transports.serve import serve_http

    def ready(base: str) -> None:
        announce(startup_line(server, "http", base + app.mcp_app.path))
        announce(f"mcpkit dev: inspector at {base}/  (Ctrl-C to stop)")
        if args.open:
            import webbrowser

            webbrowser.open(base + "/")

    serve_http(server, host="127.0.0.1", port=_port(args) if sock is None else 0, timeout_graceful_shutdown=1.0,
               app=app, on_ready=ready, bind_option="--port", sock=sock)


def _attach(args: argparse.Namespace, target: Any) -> int:
    """Any other server, through the proxy: a command line of any language, or a URL."""
    from ..cli_target import headers_of, inherit_env_of, target_of
    from .app import DevApp
    from .attach import Attachment

    for flag, given in (("--reload", args.reload), ("--read-only", args.read_only), ("--policy", args.policy),
                        ("--root", args.root)):
        if given:
            fix = ("restart it yourself: the page stays and reconnects" if flag == "--reload" else
                   f"put the guard rails of mcpkit proxy {flag} in front of it instead")
            raise SystemExit(f"mcpkit: dev {flag} applies to an mcpkit server (a .py file or package.module:ATTR); "
                             f"{args.target!r} is {'a URL' if target.is_url else 'another command'}: {fix}")
    client_target, transport = target_of(args)  # --header and --sse refused for a command line
    if transport in ("http", "sse"):
        from .._extras import require

        require(("a URL target", "client"))
    attachment = Attachment(client_target, transport=transport, headers=headers_of(args) or None,
                            inherit_env=inherit_env_of(args))
    try:
        if not attachment.start():
            # its stderr was shown as it came: the one line says how it ended
            why = str(attachment.error).split("; stderr:")[0].split(" (its stderr ends:")[0]
            raise SystemExit(f"mcpkit: dev: {args.target!r} did not start: {why}")
        _serve(args, attachment.server, DevApp(attachment.server, attachment.server.http_app(),
                                               events=attachment.events, attached=args.target))
    finally:
        attachment.stop()
    return 0


def _reload(args: argparse.Namespace, target: Any, loadable: Any) -> int:
    """The page and its port in this process; the server in dev/child.py behind the proxy,
    started again when a file it imported changes."""
    from .._extras import needs

    with needs("reload", "dev --reload"):
        import watchfiles
    from ..transports.serve import bind
    from .app import DevApp
    from .attach import Attachment, child_command, state_file

    watched = os.path.dirname(loadable.location) if loadable.kind == "file" else os.getcwd()
    # bound before the server starts: a taken port is one line, and no server was started for it
    sock = bind("127.0.0.1", _port(args), option="--port")
    state = state_file()
    attachment = Attachment(child_command(target.text, watched, state, args), transport="stdio", inherit_env=True,
                            state_file=state)
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(watchfiles, watched, attachment, stop), name="mcpkit-dev-watch",
                               daemon=True)
    try:
        if not attachment.start():
            if attachment.refused:  # a mistake in the asking (--read-only on a server without gates): one line, 2
                raise SystemExit(f"mcpkit: {attachment.error}")
            print(f"mcpkit dev: the server did not load: {attachment.error}; waiting for a change to {watched}",
                  file=sys.stderr, flush=True)
        print(f"mcpkit dev: watching the files of {watched} that the server imports", file=sys.stderr, flush=True)
        watcher.start()
        _serve(args, attachment.server, DevApp(attachment.server, attachment.server.http_app(), reload=True,
                                               events=attachment.events), sock=sock)
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join(5)
        attachment.stop()
        sock.close()
        os.unlink(state)
    return 0


def _watch(watchfiles: Any, watched: str, attachment: Any, stop: threading.Event) -> None:
    """Restart the server when a file it imported changes (on this thread: the page is served
    meanwhile, and shows the restart)."""
    for changes in watchfiles.watch(watched, watch_filter=lambda _change, path: attachment.owns(path),
                                    stop_event=stop, raise_interrupt=False):
        names = sorted({os.path.relpath(path, watched) for _, path in changes})
        print(f"mcpkit dev: {', '.join(names)} changed; restarting the server", file=sys.stderr, flush=True)
        if attachment.restart(names):
            print("mcpkit dev: the server is up again", file=sys.stderr, flush=True)
        else:
            print(f"mcpkit dev: the server did not load: {attachment.error}", file=sys.stderr, flush=True)


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

