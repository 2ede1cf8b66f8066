"""What the commands that serve share (``mcpkit serve``, ``mcpkit proxy``, ``mcpkit dev``): the
argparse types of their options, the serving options themselves, and how the options given are
applied to a server (its policy switches, authorization, OpenTelemetry, HTTP and connection
limits). A module of its own so that every command reads them from one place, below cli.py."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from typing import Any

from .transports import SHUTDOWN_TIMEOUT

#: how the mcpkit command logs on stderr (the root handler, when nothing else configured one)
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def log_level(args: argparse.Namespace) -> int:
    if getattr(args, "verbose", False):
        return logging.DEBUG
    return LEVELS[getattr(args, "log_level", None) or "warning"]


def host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT or PORT, got {value!r}")
    if int(port) > 65535:  # the socket layer would take it modulo 65536 and bind another port
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {value!r}")
    return host, int(port)


def trusted_proxies(value: str) -> list[str]:
    """--forwarded-allow-ips (argparse type): addresses, networks or *, comma-separated."""
    from .transports.forwarded import trusted_proxies

    try:
        return trusted_proxies(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(value: str) -> int:
    """A count (argparse type): 0 or less would be ignored, or refuse every session."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return number


def seconds(zero: bool) -> Callable[[str], float]:
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


positive_seconds = seconds(zero=False)
seconds_or_zero = seconds(zero=True)


def policy_env(args: argparse.Namespace) -> None:
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


def auth_of(args: argparse.Namespace, *, warn: bool = True) -> Any:
    """The ResourceServer the --auth options describe (docs/auth.md), or None (cli_auth.py)."""
    from .cli_auth import resource_server

    return resource_server(args, warn=warn and log_level(args) <= logging.WARNING)


#: serve options that only mean something over HTTP, with their "not given" value
HTTP_ONLY = {"json": False, "stateless": False, "allow_host": None, "allow_origin": None, "cors_origin": None,
              "max_sessions": None, "workers": None, "session_idle_timeout": None,
              "root_path": None, "metrics": False, "loop": None, "forwarded_allow_ips": None,
              "header_timeout": None, "keep_alive_timeout": None, "max_connections": None, "max_header_bytes": None}


def refuse_misplaced(args: argparse.Namespace) -> None:
    """Options that do not apply to the chosen transport, or to the chosen --auth mode, are
    refused, not silently ignored."""
    from .cli_auth import refuse_misplaced

    if args.http is None:
        for dest, unset in HTTP_ONLY.items():
            if getattr(args, dest, unset) != unset:
                flag = "--" + dest.replace("_", "-")
                raise SystemExit(f"mcpkit: {flag} applies to HTTP only; add --http HOST:PORT or drop {flag}")
    else:
        from .transports.serve import event_loop

        args.loop = event_loop(args.loop)  # an unknown or missing loop is refused before anything starts
    refuse_misplaced(args)


def announce_line(line: str, args: argparse.Namespace) -> None:
    if log_level(args) <= logging.WARNING:
        from .startup import announce

        announce(line)


def needed_extras(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(option, extra) for every serving option given that needs an optional package
    (_extras.EXTRAS): serve and proxy require them all at once, before anything starts."""
    needed = [("--http", "http")] if args.http is not None else []
    if args.metrics:
        needed.append(("--metrics", "metrics"))
    otel = otel_asked(args)
    if getattr(args, "otel_console", False):
        needed.append(("--otel-console", "otel-sdk"))
    elif otel is not None:
        needed.append((otel, "otel"))
    if (args.auth or "").partition(":")[0] == "jwt":
        from .cli_auth import named

        needed.append((named(args, "auth", value=True), "auth"))
    return needed


def otel_asked(args: argparse.Namespace) -> str | None:
    """What turned OpenTelemetry on: --otel, or MCPKIT_OTEL read as every boolean switch is
    ('true' turns it on, 'maybe' is a mistake); None when neither did."""
    from .switches import claim, read

    claim("MCPKIT_OTEL")
    if getattr(args, "otel_console", False):
        return "--otel-console"
    return "--otel" if args.otel else "MCPKIT_OTEL=" + os.environ["MCPKIT_OTEL"] if read("MCPKIT_OTEL") else None


def app_path(app: Any) -> str:
    """The MCP endpoint's path of an app from ``http_app()`` (through any middleware)."""
    while not hasattr(app, "path") and hasattr(app, "app"):
        app = app.app
    return getattr(app, "path", "/mcp")


def connection_limits(args: argparse.Namespace) -> Any:
    """The connection limits of the serve options (transports/connections.py)."""
    from .transports.connections import ConnectionLimits

    given = {name: getattr(args, name) for name in ("header_timeout", "keep_alive_timeout", "max_connections",
                                                     "max_header_bytes") if getattr(args, name) is not None}
    try:
        return ConnectionLimits(**given)
    except ValueError as exc:
        raise SystemExit(f"mcpkit: --{str(exc).replace('_', '-')}") from None


def policy_flags_apply(server: Any, args: argparse.Namespace) -> None:
    """--read-only and --root set the policy's switches; a server without a policy reads none
    of them, so it would serve every tool as if they had not been given: refused, not ignored,
    as the variables are (Server.check_environment, which names the flags policy_env set).
    Under --read-only the refusals name --read-only, not the MCPKIT_READ_ONLY it sets."""
    policy = getattr(server, "policy", None)
    if policy is None or not getattr(args, "read_only", False):
        server.check_environment()  # before the start-up line, which would say it serves
        return
    gates = policy.gates
    if gates is None or not gates.read_only:
        where = gates.switch("read_only") if gates is not None else None
        how = (f"reads read-only mode from {where}: set {where}=1" if where not in (None, "MCPKIT_READ_ONLY") else
               "sets read-only mode in its code: change it there" if gates is not None else
               "has no gates: give it Gates (or Policy.secure())")
        raise SystemExit(f"mcpkit: --read-only would change nothing: the policy of the server {server.name!r} "
                         f"{how}, or drop --read-only")
    server.check_environment()  # after the check that names how this policy's gates read the flag
    if gates.switch("read_only") == "MCPKIT_READ_ONLY":
        import dataclasses

        switches = tuple((name, "--read-only" if name == "read_only" else where) for name, where in gates.switches)
        server.policy = dataclasses.replace(policy, gates=dataclasses.replace(gates, switches=switches))


def observed(server: Any, args: argparse.Namespace) -> Any:
    """--otel: OpenTelemetry spans and metrics to the providers configured globally (by the
    OpenTelemetry SDK or auto-instrumentation). And the policy's audit file is opened now: one
    that cannot be written is a mistake at start-up, not a lost line on every call."""
    otel = otel_asked(args)  # first: the environment check knows then that MCPKIT_OTEL was read
    policy_flags_apply(server, args)
    policy = getattr(server, "policy", None)
    open_audit = getattr(getattr(policy, "audit", None), "open", None)
    if callable(open_audit):
        try:
            open_audit()
        except OSError as exc:
            raise SystemExit(f"mcpkit: {exc.strerror or exc}") from None
    if otel is not None:
        from .observe.otel import OpenTelemetry, console_provider, sdk_configured

        if otel == "--otel-console":
            console_provider(server.name)  # the SDK, printing each span on stderr (stdout is the protocol's)
        elif not sdk_configured():
            # the API alone records into its no-op: say so once, with the ways to see something
            logging.getLogger("mcpkit").warning(
                "%s: no OpenTelemetry SDK is configured in this process, so spans and metrics go nowhere; "
                "use --otel-console to print spans on stderr, or run under opentelemetry-instrument "
                "(docs/observability.md)", otel)
        others = getattr(server.observer, "observers", [server.observer] if server.observer else [])
        server.observe(*others, OpenTelemetry())
    return server


def http_options_of(args: argparse.Namespace, auth: Any) -> dict[str, Any]:
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


def add_serving_options(parser: argparse.ArgumentParser) -> None:
    """The options of how a server is served (stdio or HTTP, and HTTP authorization), shared by
    ``mcpkit serve`` and ``mcpkit proxy``."""
    serve = parser
    serve.add_argument("--max-message-bytes", type=positive_int, default=None, help="largest accepted message (bytes)")
    serve.add_argument("--http", type=host_port, metavar="HOST:PORT", help="serve Streamable HTTP (and legacy SSE) instead of stdio")
    serve.add_argument("--json", action="store_true", help="HTTP: answer POSTs with one JSON body instead of an SSE stream")
    serve.add_argument("--stateless", action="store_true", help="HTTP: no sessions; every POST stands alone")
    serve.add_argument("--allow-host", action="append", metavar="HOST", help="HTTP: also accept this Host (repeatable; '*' for any)")
    serve.add_argument("--allow-origin", action="append", metavar="ORIGIN", help="HTTP: also accept this Origin (repeatable)")
    serve.add_argument("--cors-origin", action="append", metavar="ORIGIN",
                       help="HTTP: let browser pages from this origin call the server (CORS; repeatable; '*' for any)")
    serve.add_argument("--root-path", metavar="PREFIX",
                       help="HTTP: the path prefix a reverse proxy serves this app under, e.g. /api")
    serve.add_argument("--max-sessions", type=positive_int, default=None, help="HTTP: most sessions kept (default 1000)")
    serve.add_argument("--max-sessions-per-client", type=positive_int, default=None, metavar="N",
                       help="HTTP: most sessions of one principal, or one address without auth (default: a tenth "
                       "of --max-sessions); past it the client's own idle sessions end first, then 429")
    serve.add_argument("--forwarded-allow-ips", type=trusted_proxies, default=None, metavar="IPS",
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
    serve.add_argument("--shutdown-timeout", type=seconds_or_zero, default=SHUTDOWN_TIMEOUT, metavar="SECONDS",
                       help="on SIGTERM or Ctrl-C (and on stdio at the end of input), how long requests in flight "
                       "may take to finish before they are cancelled; open SSE streams end at once (default 5)")
    serve.add_argument("--session-idle-timeout", type=positive_seconds, default=None, metavar="SECONDS",
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
    serve.add_argument("--otel-console", action="store_true",
                       help="--otel with the OpenTelemetry SDK printing each span as a JSON line on stderr "
                       "(needs mcpkit[otel-sdk])")
    from .cli_auth import add_arguments as add_auth_arguments

    add_auth_arguments(serve)
