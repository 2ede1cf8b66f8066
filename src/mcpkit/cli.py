"""The ``mcpkit`` command.

    mcpkit serve                      the bundled reference server, on stdio
    mcpkit serve path/to/server.py    a user's server (the Server found in the file)
    mcpkit serve package.module:app   a Server attribute of an importable module
    mcpkit dev TARGET                 HTTP on loopback plus a browser inspector (dev/)
    mcpkit list|call|read|prompt|docs TARGET   talk to any server (commands.py)
    mcpkit skills TARGET [show NAME | fetch NAME DIR]   a server's skills (skills_cli.py)
    mcpkit install CLIENT TARGET      the MCP client configuration entry for a server (alias: config)
    mcpkit doctor [TARGET]            check this installation and a server's start-up
    mcpkit check TARGET               the compliance checker (check/)
    mcpkit pin FILE TARGET            a lockfile of a server's tool definitions (proxy/pincli.py)

TARGET is the same everywhere (targets.py). A user's mistake is one line on stderr and exit code
2; ``-v`` shows the traceback (errors.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from .cli_target import revision as _revision  # noqa: F401 - proxy/cli.py still reads it here
from .targets import load_server
from .transports import SHUTDOWN_TIMEOUT

__all__ = ["main", "load_server"]


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT or PORT, got {value!r}")
    if int(port) > 65535:  # the socket layer would take it modulo 65536 and bind another port
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {value!r}")
    return host, int(port)


def _trusted_proxies(value: str) -> list[str]:
    """--forwarded-allow-ips (argparse type): addresses, networks or *, comma-separated."""
    from .transports.forwarded import trusted_proxies

    try:
        return trusted_proxies(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(value: str) -> int:
    """A count (argparse type): 0 or less would be ignored, or refuse every session."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return number


def _seconds(zero: bool) -> Callable[[str], float]:
    """A duration (argparse type): finite, and positive (or, with ``zero``, 0 as well)."""
    wanted = "0 or more seconds" if zero else "a positive number of seconds"

    def parse(value: str) -> float:
        try:
            seconds = float(value)
        except ValueError:
            seconds = float("nan")
        if not (0 <= seconds if zero else 0 < seconds) or not seconds < float("inf"):
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {value!r}")
        return seconds

    return parse


_positive_seconds = _seconds(zero=False)
_seconds_or_zero = _seconds(zero=True)


def _policy_env(args: argparse.Namespace) -> None:
    """Policy switches on the command line are the environment switches the policy reads
    (mcpkit.policy), set before the user's module builds its server; a refusal names the flag."""
    from .switches import given_as

    if args.root:
        os.environ["MCPKIT_ROOT"] = os.pathsep.join(os.path.abspath(r) for r in args.root)
        given_as("MCPKIT_ROOT", "--root")
    if args.read_only:
        os.environ["MCPKIT_READ_ONLY"] = "1"
        given_as("MCPKIT_READ_ONLY", "--read-only")
    if args.policy:
        os.environ["MCPKIT_POLICY"] = "1"


def _auth(args: argparse.Namespace, *, warn: bool = True) -> Any:
    """The ResourceServer the --auth options describe (docs/auth.md), or None (cli_auth.py)."""
    from .cli_auth import resource_server

    return resource_server(args, warn=warn and _log_level(args) <= logging.WARNING)


#: serve options that only mean something over HTTP, with their "not given" value
_HTTP_ONLY = {"json": False, "stateless": False, "allow_host": None, "allow_origin": None, "cors_origin": None,
              "max_sessions": None, "workers": None, "session_idle_timeout": None,
              "root_path": None, "metrics": False, "loop": None, "forwarded_allow_ips": None,
              "header_timeout": None, "keep_alive_timeout": None, "max_connections": None, "max_header_bytes": None}


def _refuse_misplaced(args: argparse.Namespace) -> None:
    """Options that do not apply to the chosen transport, or to the chosen --auth mode, are
    refused, not silently ignored."""
    from .cli_auth import refuse_misplaced

    if args.http is None:
        for dest, unset in _HTTP_ONLY.items():
            if getattr(args, dest, unset) != unset:
                flag = "--" + dest.replace("_", "-")
                raise SystemExit(f"mcpkit: {flag} applies to HTTP only; add --http HOST:PORT or drop {flag}")
    else:
        from .transports.serve import event_loop

        args.loop = event_loop(args.loop)  # an unknown or missing loop is refused before anything starts
    refuse_misplaced(args)


def _announce(line: str, args: argparse.Namespace) -> None:
    if _log_level(args) <= logging.WARNING:
        from .startup import announce

        announce(line)


def needed_extras(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(option, extra) for every serving option given that needs an optional package
    (_extras.EXTRAS): serve and proxy require them all at once, before anything starts."""
    needed = [("--http", "http")] if args.http is not None else []
    if args.metrics:
        needed.append(("--metrics", "metrics"))
    otel = _otel(args)
    if otel is not None:
        needed.append((otel, "otel"))
    if (args.auth or "").partition(":")[0] == "jwt":
        from .cli_auth import named

        needed.append((named(args, "auth", value=True), "auth"))
    return needed


def _otel(args: argparse.Namespace) -> str | None:
    """What turned OpenTelemetry on: --otel, or MCPKIT_OTEL read as every boolean switch is
    ('true' turns it on, 'maybe' is a mistake); None when neither did."""
    from .switches import claim, read

    claim("MCPKIT_OTEL")
    return "--otel" if args.otel else "MCPKIT_OTEL=" + os.environ["MCPKIT_OTEL"] if read("MCPKIT_OTEL") else None


def _serve(args: argparse.Namespace) -> int:
    _refuse_misplaced(args)
    from ._extras import require

    require(*needed_extras(args))
    _policy_env(args)
    auth = _auth(args)
    from .startup import announce, startup_line, stdio_terminal_hint
    from .targets import resolve

    target = resolve(args.target)
    if target.loadable() is None:
        raise SystemExit(f"mcpkit: serve runs an mcpkit server (a .py file or package.module:ATTR); "
                         f"{args.target!r} is {'a URL' if target.is_url else 'another command'}: run it as it is, "
                         f"or talk to it with: mcpkit list {args.target!r}")
    if args.http is None:
        from .transports.stdio import guard_stdout, run_stdio

        # ST-02: guard fd 1 before the user's module runs, so even output at import time
        # goes to stderr
        out_fd = guard_stdout()
        server = _observed(target.load(), args)
        options: dict[str, Any] = {"drain_timeout": args.shutdown_timeout}
        if args.max_message_bytes:
            options["max_message_bytes"] = args.max_message_bytes
        _announce(startup_line(server, "stdio"), args)
        hint = stdio_terminal_hint(target.text)
        if hint:
            announce(hint)
        run_stdio(server, out_fd=out_fd, **options)
        return 0
    host, port = args.http
    if (args.workers or 1) > 1:
        return _serve_workers(args, host, port)
    limits = _limits(args)
    server = _observed(target.load(), args)
    from .transports.serve import serve_http

    http_options = _http_options(args, auth)
    app = server.http_app(**http_options)
    path = (args.root_path or "") + app_path(app)

    def ready(base: str) -> None:
        _announce(startup_line(server, "http", base + path), args)

    serve_http(server, host=host, port=port, timeout_graceful_shutdown=args.shutdown_timeout, app=app,
               on_ready=ready, limits=limits, loop=args.loop)
    return 0


def app_path(app: Any) -> str:
    """The MCP endpoint's path of an app from ``http_app()`` (through any middleware)."""
    while not hasattr(app, "path") and hasattr(app, "app"):
        app = app.app
    return getattr(app, "path", "/mcp")


def _limits(args: argparse.Namespace) -> Any:
    """The connection limits of the serve options (transports/connections.py)."""
    from .transports.connections import ConnectionLimits

    given = {name: getattr(args, name) for name in ("header_timeout", "keep_alive_timeout", "max_connections",
                                                     "max_header_bytes") if getattr(args, name) is not None}
    try:
        return ConnectionLimits(**given)
    except ValueError as exc:
        raise SystemExit(f"mcpkit: --{str(exc).replace('_', '-')}") from None


def _policy_flags_apply(server: Any, args: argparse.Namespace) -> None:
    """--read-only and --root set the policy's switches; a server without a policy reads none
    of them, so it would serve every tool as if they had not been given: refused, not ignored,
    as the variables are (Server.check_environment, which names the flags _policy_env set).
    Under --read-only the refusals name --read-only, not the MCPKIT_READ_ONLY it sets."""
    server.check_environment()  # before the start-up line, which would say it serves
    policy = getattr(server, "policy", None)
    if policy is None or not getattr(args, "read_only", False):
        return
    gates = policy.gates
    if gates is None or not gates.read_only:
        where = gates.switch("read_only") if gates is not None else None
        how = (f"reads read-only mode from {where}: set {where}=1" if where not in (None, "MCPKIT_READ_ONLY") else
               "sets read-only mode in its code: change it there" if gates is not None else
               "has no gates: give it Gates (or Policy.secure())")
        raise SystemExit(f"mcpkit: --read-only would change nothing: the policy of the server {server.name!r} "
                         f"{how}, or drop --read-only")
    if gates.switch("read_only") == "MCPKIT_READ_ONLY":
        import dataclasses

        switches = tuple((name, "--read-only" if name == "read_only" else where) for name, where in gates.switches)
        server.policy = dataclasses.replace(policy, gates=dataclasses.replace(gates, switches=switches))


def _observed(server: Any, args: argparse.Namespace) -> Any:
    """--otel: OpenTelemetry spans and metrics to the providers configured globally (by the
    OpenTelemetry SDK or auto-instrumentation). And the policy's audit file is opened now: one
    that cannot be written is a mistake at start-up, not a lost line on every call."""
    otel = _otel(args)  # first: the environment check knows then that MCPKIT_OTEL was read
    _policy_flags_apply(server, args)
    policy = getattr(server, "policy", None)
    open_audit = getattr(getattr(policy, "audit", None), "open", None)
    if callable(open_audit):
        try:
            open_audit()
        except OSError as exc:
            raise SystemExit(f"mcpkit: {exc.strerror or exc}") from None
    if otel is not None:
        from .observe.otel import OpenTelemetry

        others = getattr(server.observer, "observers", [server.observer] if server.observer else [])
        server.observe(*others, OpenTelemetry())
    return server


def _http_options(args: argparse.Namespace, auth: Any) -> dict[str, Any]:
    http_options: dict[str, Any] = {"json_response": args.json, "stateless": args.stateless,
                                    "shutdown_timeout": args.shutdown_timeout}
    if args.allow_host:
        http_options["allowed_hosts"] = args.allow_host
    if args.allow_origin:
        http_options["allowed_origins"] = args.allow_origin
    if args.cors_origin:
        http_options["cors_origins"] = args.cors_origin
    if args.root_path:
        http_options["root_path"] = args.root_path
    if args.max_message_bytes:
        http_options["max_body_bytes"] = args.max_message_bytes
    if args.max_sessions:
        http_options["max_sessions"] = args.max_sessions
    if args.session_idle_timeout:
        http_options["session_idle_timeout"] = args.session_idle_timeout
    if args.max_sessions_per_client:
        http_options["max_sessions_per_client"] = args.max_sessions_per_client
    if args.forwarded_allow_ips:
        http_options["forwarded_allow_ips"] = args.forwarded_allow_ips
    if args.body_timeout is not None:
        if not args.body_timeout > 0:
            raise SystemExit("mcpkit: --body-timeout must be a positive number of seconds")
        http_options["body_timeout"] = args.body_timeout
    if auth is not None:
        http_options["auth"] = auth
    if args.metrics:
        http_options["metrics"] = True
    return http_options


def _serve_workers(args: argparse.Namespace, host: str, port: int) -> int:
    """``--workers N``: N uvicorn worker processes on one port, sharing state through
    MCPKIT_STORE (docs/deployment.md); each worker rebuilds the app from this command line."""
    if not os.environ.get("MCPKIT_STORE", "").startswith(("redis://", "rediss://", "unix://")):
        raise SystemExit("mcpkit: --workers needs MCPKIT_STORE=redis://...: separate processes share sessions, "
                         "events, rate limits and tasks only through a shared store")
    import json

    from ._extras import needs

    with needs("http", "--workers"):
        from uvicorn.supervisors import Multiprocess

    os.environ["MCPKIT_SERVE_ARGV"] = json.dumps(sys.argv[1:] if args.argv is None else args.argv)
    from .transports.serve import bind, uvicorn_config

    config = uvicorn_config("mcpkit.cli:worker_app", _limits(args), factory=True, host=host, port=port,
                            workers=args.workers, shutdown_timeout=args.shutdown_timeout, loop=args.loop)
    # bound as by one process (a taken port or another machine's address is one line with the
    # fix); the workers accept from it, and inherit its TCP_NODELAY on Linux (no answer waits
    # ~40 ms for a delayed ACK)
    sock = bind(host, port)
    Multiprocess(config, sockets=[sock]).run()
    return 0


def worker_app() -> Any:
    """The ASGI app of one ``--workers`` process, built from the parent's command line."""
    from .switches import read

    parser = _parser()
    args = parser.parse_args(read("MCPKIT_SERVE_ARGV"))
    _policy_env(args)
    auth = _auth(args, warn=False)  # the parent said what there was to say about it
    return _observed(load_server(args.target), args).http_app(**_http_options(args, auth))


def _proxy(args: argparse.Namespace) -> int:
    from .proxy.cli import run

    return run(args)


#: how the mcpkit command logs on stderr (the root handler, when nothing else configured one)
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _log_level(args: argparse.Namespace) -> int:
    if getattr(args, "verbose", False):
        return logging.DEBUG
    return _LEVELS[getattr(args, "log_level", None) or "warning"]


def main(argv: list[str] | None = None) -> int:
    """Run the ``mcpkit`` command; the exit code: 0 done, 1 a failure reported by the command,
    2 a usage or configuration mistake (one line on stderr; ``-v`` for the traceback)."""
    parser = _parser(argv)
    words = sys.argv[1:] if argv is None else argv
    tail = None
    if words and words[0] in ("proxy", "pin") and "--" in words:  # `mcpkit proxy [OPTIONS] -- COMMAND ...`
        cut = words.index("--")
        words, tail = words[:cut], words[cut + 1:]
    args, extra = parser.parse_known_args(words)
    if extra:
        # `call TOOL --json '{...}' b=2`: argparse takes a positional list in one run, so
        # key=value pairs after an option come back unparsed; they are still pairs
        if args.command in ("call", "prompt"):
            pairs = [w for w in extra if "=" in w and not w.startswith("-")]
            extra = [w for w in extra if w not in pairs]
            args.arguments = [*args.arguments, *pairs]
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if tail is not None:
        args.command_tail = tail
    args.argv = argv
    level = _log_level(args)
    if getattr(args, "verbose", False) or getattr(args, "log_level", None):
        logging.getLogger("mcpkit").setLevel(level)
    last_resort = logging.lastResort
    kept = (last_resort.formatter, last_resort.level) if last_resort is not None else None
    if args.command in ("serve", "dev"):
        # a server's own module configures logging as it likes: serve leaves the root to it. Until
        # something configures it, a record goes to logging.lastResort, which prints the bare
        # message: a warning logged while the module is imported (a bridge that cannot connect)
        # reads like every later one with mcpkit's format given to it
        if last_resort is not None:
            last_resort.setFormatter(logging.Formatter(LOG_FORMAT))
            last_resort.setLevel(min(level, logging.WARNING))
    elif not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format=LOG_FORMAT)
    try:
        if args.command in ("serve", "dev", "proxy"):
            from .switches import check

            check()  # every MCPKIT_* value is read before anything starts: a bad one is one line, exit 2
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code if exc.code.startswith("mcpkit") else f"mcpkit: {exc.code}", file=sys.stderr)
            return 2
        raise
    except Exception as exc:  # noqa: BLE001 - the user sees one line; -v shows the traceback
        if level <= logging.DEBUG:
            raise
        from .errors_cli import describe_unexpected, explain

        line = explain(exc)
        if line is not None:
            print(f"mcpkit: {line}  (run with -v for the traceback)", file=sys.stderr)
            return 2
        print(f"mcpkit: unexpected error: {describe_unexpected(exc)}  (run with -v for the traceback)",
              file=sys.stderr)
        return 1
    finally:
        if last_resort is not None and kept is not None:
            last_resort.setFormatter(kept[0])
            last_resort.setLevel(kept[1])


def _add_common(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """-v and --log-level, accepted before or after the subcommand."""
    default: Any = None if top else argparse.SUPPRESS
    parser.add_argument("-v", "--verbose", action="store_true", default=False if top else argparse.SUPPRESS,
                        help="debug logging, and tracebacks for errors")
    parser.add_argument("--log-level", choices=sorted(_LEVELS, key=_LEVELS.__getitem__), default=default,
                        help="stderr logging level (default warning; error also hides the start-up line)")


class OneLineParser(argparse.ArgumentParser):
    """A mistake on the command line is one line, the option and its fix, and exit 2: not the
    usage block of every option before it (``--help`` shows that). Subcommands inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    from . import __version__

    parser = OneLineParser(prog="mcpkit", description="Build, serve and check MCP servers.")
    parser.add_argument("--version", action="version", version=f"mcpkit {__version__}")
    _add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="serve an MCP server (default: the bundled reference server)")
    serve.add_argument("target", nargs="?", help="path/to/server.py[:ATTR], package.module[:ATTR], or a command "
                       "line running one, e.g. \"python server.py\" (default: the bundled reference server)")
    serve.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                       help="HTTP: N worker processes on one port (needs MCPKIT_STORE=redis://...)")
    serve.add_argument("--root", action="append", metavar="DIR",
                       help="policy: a sandbox root for path parameters (repeatable; sets MCPKIT_ROOT)")
    serve.add_argument("--read-only", action="store_true",
                       help="policy: only tools declared read-only are listed and run (sets MCPKIT_READ_ONLY)")
    serve.add_argument("--policy", action="store_true",
                       help="turn on the secure-by-default policy for a server built without one (MCPKIT_POLICY)")
    _add_serving_options(serve)
    serve.set_defaults(func=_serve)
    words = sys.argv[1:] if argv is None else argv
    if not words or words[0] != "serve":  # serving stays light: the client commands load only when asked
        from .commands import register
        from .dev import register as register_dev
        from .proxy.cli import add_arguments
        from .proxy.pincli import register as register_pin
        from .skills_cli import register as register_skills

        register_dev(sub)
        register(sub)
        register_skills(sub)
        register_pin(sub)
        proxy = sub.add_parser("proxy", help="serve MCP servers written elsewhere behind mcpkit's guard rails")
        add_arguments(proxy)
        _add_serving_options(proxy)
        proxy.set_defaults(func=_proxy, command_tail=None)
    seen: set[int] = set()
    for command in sub.choices.values():
        if id(command) not in seen:
            seen.add(id(command))
            _add_common(command)
    return parser


def _add_serving_options(parser: argparse.ArgumentParser) -> None:
    """The options of how a server is served (stdio or HTTP, and HTTP authorization), shared by
    ``mcpkit serve`` and ``mcpkit proxy``."""
    serve = parser
    serve.add_argument("--max-message-bytes", type=_positive_int, default=None, help="largest accepted message (bytes)")
    serve.add_argument("--http", type=_host_port, metavar="HOST:PORT", help="serve Streamable HTTP (and legacy SSE) instead of stdio")
    serve.add_argument("--json", action="store_true", help="HTTP: answer POSTs with one JSON body instead of an SSE stream")
    serve.add_argument("--stateless", action="store_true", help="HTTP: no sessions; every POST stands alone")
    serve.add_argument("--allow-host", action="append", metavar="HOST", help="HTTP: also accept this Host (repeatable; '*' for any)")
    serve.add_argument("--allow-origin", action="append", metavar="ORIGIN", help="HTTP: also accept this Origin (repeatable)")
    serve.add_argument("--cors-origin", action="append", metavar="ORIGIN",
                       help="HTTP: let browser pages from this origin call the server (CORS; repeatable; '*' for any)")
    serve.add_argument("--root-path", metavar="PREFIX",
                       help="HTTP: the path prefix a reverse proxy serves this app under, e.g. /api")
    serve.add_argument("--max-sessions", type=_positive_int, default=None, help="HTTP: most sessions kept (default 1000)")
    serve.add_argument("--max-sessions-per-client", type=_positive_int, default=None, metavar="N",
                       help="HTTP: most sessions of one principal, or one address without auth (default: a tenth "
                       "of --max-sessions); past it the client's own idle sessions end first, then 429")
    serve.add_argument("--forwarded-allow-ips", type=_trusted_proxies, default=None, metavar="IPS",
                       help="HTTP: the proxies or balancers (addresses or networks, comma-separated; * for any "
                       "peer) whose X-Forwarded-For names the client that quotas, rate limits and audit lines "
                       "count (default: none, every client is its TCP peer; docs/deployment.md)")
    limits = serve.add_argument_group("connection limits (HTTP only; docs/deployment.md)")
    limits.add_argument("--header-timeout", type=float, default=None, metavar="SECONDS",
                        help="close a connection whose request headers have not arrived in time (default 10)")
    limits.add_argument("--body-timeout", type=float, default=None, metavar="SECONDS",
                        help="answer 408 to a request whose body has not arrived whole in time (default 30)")
    limits.add_argument("--keep-alive-timeout", type=float, default=None, metavar="SECONDS",
                        help="close an idle keep-alive connection after this long (default 5)")
    limits.add_argument("--max-connections", type=int, default=None, metavar="N",
                        help="most connections served at once; past it requests get 503 (default 1000)")
    limits.add_argument("--max-header-bytes", type=int, default=None, metavar="BYTES",
                        help="largest request head accepted (default 65536)")
    serve.add_argument("--shutdown-timeout", type=_seconds_or_zero, default=SHUTDOWN_TIMEOUT, metavar="SECONDS",
                       help="on SIGTERM or Ctrl-C (and on stdio at the end of input), how long requests in flight "
                       "may take to finish before they are cancelled; open SSE streams end at once (default 5)")
    serve.add_argument("--session-idle-timeout", type=_positive_seconds, default=None, metavar="SECONDS",
                       help="HTTP: end sessions idle this long (default 1800)")
    from .switches import LOOPS

    serve.add_argument("--loop", choices=LOOPS, default=None,
                       help="HTTP: the event loop; auto is uvloop when installed (mcpkit[fast]), else asyncio "
                       "(default: MCPKIT_LOOP, else auto)")
    serve.add_argument("--metrics", action="store_true",
                       help="HTTP: serve Prometheus metrics at /metrics (needs prometheus-client: mcpkit[metrics])")
    serve.add_argument("--otel", action="store_true",
                       help="trace and measure every request with OpenTelemetry, to the globally configured "
                       "providers (needs opentelemetry-api: mcpkit[otel]; also MCPKIT_OTEL=1)")
    from .cli_auth import add_arguments as add_auth_arguments

    add_auth_arguments(serve)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
