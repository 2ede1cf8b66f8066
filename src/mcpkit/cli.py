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
from typing import Any, NoReturn

from .cli_serving import (
    LEVELS,
    LOG_FORMAT,
    add_serving_options,
    announce_line,
    app_path,
    auth_of,
    connection_limits,
    http_options_of,
    log_level,
    needed_extras,
    observed,
    policy_env,
    positive_int,
    refuse_misplaced,
)
from .targets import load_server

__all__ = ["main", "load_server", "worker_app"]


def _serve(args: argparse.Namespace) -> int:
    refuse_misplaced(args)
    from ._extras import require

    require(*needed_extras(args))
    policy_env(args)
    auth = auth_of(args)
    from .startup import announce, startup_line, stdio_terminal_hint
    from .targets import resolve

    target = resolve(args.target)
    if getattr(args, "verbose", False):
        from .server.details import show

        show()  # -v: internal errors name the exception and its line (server/details.py)
    if target.loadable() is None:
        raise SystemExit(f"mcpkit: serve runs an mcpkit server (a .py file or package.module:ATTR); "
                         f"{args.target!r} is {'a URL' if target.is_url else 'another command'}: run it as it is, "
                         f"or talk to it with: mcpkit list {args.target!r}")
    if args.http is None:
        from .transports.stdio import guard_stdout, run_stdio

        # ST-02: guard fd 1 before the user's module runs, so even output at import time
        # goes to stderr
        out_fd = guard_stdout()
        server = observed(target.load(), args)
        options: dict[str, Any] = {"drain_timeout": args.shutdown_timeout}
        if args.max_message_bytes:
            options["max_message_bytes"] = args.max_message_bytes
        announce_line(startup_line(server, "stdio"), args)
        hint = stdio_terminal_hint(target.text)
        if hint:
            announce(hint)
        run_stdio(server, out_fd=out_fd, **options)
        return 0
    host, port = args.http
    if (args.workers or 1) > 1:
        return _serve_workers(args, host, port)
    limits = connection_limits(args)
    server = observed(target.load(), args)
    from .transports.serve import serve_http

    http_options = http_options_of(args, auth)
    app = server.http_app(**http_options)
    path = (args.root_path or "") + app_path(app)

    def ready(base: str) -> None:
        announce_line(startup_line(server, "http", base + path), args)

    serve_http(server, host=host, port=port, timeout_graceful_shutdown=args.shutdown_timeout, app=app,
               on_ready=ready, limits=limits, loop=args.loop)
    return 0


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

    config = uvicorn_config("mcpkit.cli:worker_app", connection_limits(args), factory=True, host=host, port=port,
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
    policy_env(args)
    auth = auth_of(args, warn=False)  # the parent said what there was to say about it
    return observed(load_server(args.target), args).http_app(**http_options_of(args, auth))


def _proxy(args: argparse.Namespace) -> int:
    from .proxy.cli import run

    return run(args)


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
    level = log_level(args)
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
    except BrokenPipeError:
        # the reader of stdout went (`mcpkit list X | head`): nothing to say, but stdout must not
        # be flushed again at exit (that would print the error); 141 as for a SIGPIPE death
        _stdout_gone()
        return 141
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


def _stdout_gone() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _add_common(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """-v and --log-level, accepted before or after the subcommand."""
    default: Any = None if top else argparse.SUPPRESS
    parser.add_argument("-v", "--verbose", action="store_true", default=False if top else argparse.SUPPRESS,
                        help="debug logging, and tracebacks for errors")
    parser.add_argument("--log-level", choices=sorted(LEVELS, key=LEVELS.__getitem__), default=default,
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
    serve.add_argument("--workers", type=positive_int, default=None, metavar="N",
                       help="HTTP: N worker processes on one port (needs MCPKIT_STORE=redis://...)")
    serve.add_argument("--root", action="append", metavar="DIR",
                       help="policy: a sandbox root for path parameters (repeatable; sets MCPKIT_ROOT)")
    serve.add_argument("--read-only", action="store_true",
                       help="policy: only tools declared read-only are listed and run (sets MCPKIT_READ_ONLY)")
    serve.add_argument("--policy", action="store_true",
                       help="turn on the secure-by-default policy for a server built without one (MCPKIT_POLICY)")
    add_serving_options(serve)
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
        add_serving_options(proxy)
        proxy.set_defaults(func=_proxy, command_tail=None)
    seen: set[int] = set()
    for command in sub.choices.values():
        if id(command) not in seen:
            seen.add(id(command))
            _add_common(command)
    return parser


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
