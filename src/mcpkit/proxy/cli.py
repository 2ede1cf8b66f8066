"""``mcpkit proxy``: every guard rail of mcpkit in front of MCP servers written elsewhere.

    mcpkit proxy -- npx -y @modelcontextprotocol/server-filesystem /srv      stdio in, stdio out
    mcpkit proxy --read-only --http 127.0.0.1:8000 --audit audit.log -- npx ... /srv
    mcpkit proxy https://mcp.example.com/mcp --http :8000 --auth tokens:tokens.txt
    mcpkit proxy --config ~/.cursor/mcp.json --http :8000                    several, prefixed
    mcpkit proxy files="npx ... /srv" web=https://example.com/mcp             several, named

Words after ``--`` are one command line; each other TARGET is a URL or a quoted command line,
``NAME=TARGET`` to name it. Several upstreams are prefixed by name (``files_read_file``), and one
that fails is hidden while down without taking the others with it. The serving options (--http,
--auth, --json, ...) are those of ``mcpkit serve`` (docs/proxy.md).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
from collections.abc import Iterator
from typing import Any

__all__ = ["add_arguments", "quiet_start", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..cli_serving import positive_seconds as _seconds  # 0 or less would fail every connection
    from ..cli_target import revision
    from ..hostschemas import SETTINGS as HOST_SCHEMAS

    parser.add_argument("targets", nargs="*", metavar="TARGET",
                        help="[NAME=]URL, [NAME=]\"command line\" or [NAME=]PATH (a server.py, a program, a script); "
                             "or give one command after --")
    parser.add_argument("--config", metavar="FILE", help="an mcpServers JSON file (Claude Desktop, Cursor)")
    parser.add_argument("--name", help="the proxy's server name (default: the upstream's, or mcpkit-proxy)")
    parser.add_argument("--prefix", help="prefix a single upstream's names with this (several are prefixed by name)")
    parser.add_argument("--separator", default="_", help="between a prefix and a name (default _)")
    parser.add_argument("--keep-uris", action="store_true",
                        help="do not prefix resource URIs (they must then be unique across upstreams)")
    guards = parser.add_argument_group("guard rails (docs/policy.md)")
    guards.add_argument("--read-only", action="store_true",
                        help="only tools declared (or made, by --tool-policy) read-only are listed and run")
    guards.add_argument("--deny-destructive", action="store_true", help="hide and refuse destructive tools")
    guards.add_argument("--deny-open-world", action="store_true", help="hide and refuse open-world tools")
    guards.add_argument("--audit", metavar="FILE", help="append one JSON line per tool call to FILE")
    guards.add_argument("--rate-limit", metavar="RATE", help="calls per client, e.g. 60/min")
    guards.add_argument("--tool-policy", metavar="FILE",
                        help="TOML overriding the upstream tools' annotations, scopes, rate limits, timeouts")
    from .pincli import add_proxy_arguments

    add_proxy_arguments(parser)
    from ..cli_serving import positive_int
    from .sandboxcli import add_arguments as add_sandbox_arguments

    add_sandbox_arguments(parser, positive_int)
    from .scancli import add_proxy_arguments as add_scan_arguments

    add_scan_arguments(parser)
    from .redactcli import add_proxy_arguments as add_redact_arguments

    add_redact_arguments(parser)
    from .searchcli import add_proxy_arguments as add_search_arguments

    add_search_arguments(parser, positive_int)
    upstream = parser.add_argument_group("upstream connections")
    upstream.add_argument("--header", action="append", metavar="'NAME: VALUE'",
                          help="an HTTP header for URL targets (repeatable)")
    upstream.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                          help="pass this variable of the proxy's environment to command upstreams (repeatable; "
                          "they get only HOME, PATH, the locale and a few more, and their own env, docs/proxy.md)")
    upstream.add_argument("--flatten-schemas", action="store_true",
                          help="list tools whose schema has a root oneOf/anyOf/allOf (refused by the Anthropic, "
                          "OpenAI and Gemini APIs) as a flat copy; calls are still validated against the original")
    upstream.add_argument("--host-schemas", choices=HOST_SCHEMAS, metavar="HOST",
                          help="list each client the tools as its host accepts them (names, refs inlined, "
                          "unsupported keywords dropped, a strict variant for openai-strict); calls are still "
                          "validated against the upstream's schema. auto: from the client's clientInfo; or one of "
                          f"{', '.join(HOST_SCHEMAS[1:])} (docs/hosts.md)")
    upstream.add_argument("--protocol-version", type=revision, metavar="V",
                          help="the revision to speak upstream (default: the newest handshake revision)")
    upstream.add_argument("--timeout", type=_seconds, default=300.0, metavar="SECONDS",
                          help="longest wait for one upstream answer (default 300)")
    upstream.add_argument("--connect-timeout", type=_seconds, default=30.0, metavar="SECONDS",
                          help="longest wait for one connection attempt (default 30)")
    upstream.add_argument("--probe-interval", type=_seconds, default=5.0, metavar="SECONDS",
                          help="how often each upstream is pinged (default 5)")
    upstream.add_argument("--max-response-bytes", type=positive_int, metavar="BYTES",
                          help="refuse an upstream answer larger than this, read past without holding it "
                          "(default 16 MiB, or \"max_response_bytes\" in --config)")


def _fail(message: str) -> SystemExit:
    return SystemExit(f"mcpkit proxy: {message}")


@contextlib.contextmanager
def quiet_start(quiet: bool) -> Iterator[None]:
    """A single upstream that does not start is the proxy's one line of failure: the bridge's
    and the upstream's warnings about it (which a proxy of several keeps) would repeat it."""
    if not quiet:
        yield
        return
    loggers = [logging.getLogger(name) for name in ("mcpkit.bridge", "mcpkit.proxy")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _specs(args: argparse.Namespace) -> list[Any]:
    from .config import ConfigError, specs_of

    try:
        specs = specs_of(args.targets, args.command_tail, args.config, args.header, args.pass_env)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    if len(specs) > 1:
        unnamed = [s for s in specs if not s.name]
        if unnamed:
            raise _fail("several upstreams need a name each, as their prefix: NAME=TARGET, or --config")
        names = [s.name for s in specs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise _fail(f"upstream name(s) used twice: {', '.join(twice)}")
    from .sandboxcli import apply

    apply(args, specs, _fail)
    _refuse_unrunnable(specs)
    return specs


def _refuse_unrunnable(specs: list[Any]) -> None:
    """One line for every stdio upstream whose command cannot be started at all: a command
    missing from PATH (or a file that is not executable) is a mistake in the configuration, which
    retrying in the background would never mend. An upstream that starts and then fails, or a URL
    that is down, is retried instead (docs/proxy.md)."""
    names_by_problem: dict[str, list[str]] = {}
    for spec in specs:
        problem = _unrunnable(spec)
        if problem is not None:
            names_by_problem.setdefault(problem, []).append(spec.name)
    parts = []
    for problem, names in names_by_problem.items():
        named = [repr(n) for n in names if n]
        who = ("cannot start the upstream" if not named else f"upstream {named[0]} cannot start" if len(named) == 1
               else f"upstreams {', '.join(named[:-1])} and {named[-1]} cannot start")
        parts.append(f"{who}: {problem}")
    if parts:
        raise _fail("; ".join(parts))


def _unrunnable(spec: Any) -> str | None:
    """Why a stdio upstream's command cannot be started at all, with the fix; None for a URL or
    a command that can be started (whether it then serves is for the upstream to show)."""
    if spec.transport != "stdio":
        return None
    command = str(spec.target[0])
    if spec.cwd and not os.path.isdir(spec.cwd):
        return f"its cwd {spec.cwd} is not a directory; give an existing one"
    if spec.sandbox is not None:  # asked for and unavailable: never run it unconfined instead
        problem = spec.sandbox.problem()
        if problem is not None:
            return problem
    if os.sep in command or (os.altsep and os.altsep in command):
        path = os.path.join(spec.cwd or os.getcwd(), command)
        if not os.path.exists(path):
            return f"{command!r} does not exist; give the path of the server's program"
        if os.path.isdir(path):
            return f"{command!r} is a directory; give the path of the server's program in it"
        if not os.access(path, os.X_OK):
            return (f"{command!r} is not executable; chmod +x it, or start it with its interpreter "
                    f"(e.g. \"node {command}\" or \"python {command}\")")
        return None
    from ..client.environment import child_environment

    # looked up on the PATH the command will get, as the child's exec looks it up
    env = child_environment(spec.env, spec.inherit_env)
    if shutil.which(command, path=env.get("PATH", os.defpath)) is None:
        return f"{command!r} is not a command on PATH; install it, or give its full path"
    return None


def _profiles(args: argparse.Namespace, specs: list[Any]) -> list[Any]:
    """The profiles of the --config file (proxy/profiles.py): served over HTTP only."""
    if not args.config:
        return []
    from .config import ConfigError
    from .pincli import key_of
    from .profiles import load_profiles

    try:
        profiles = load_profiles(args.config, [key_of(spec.name) for spec in specs])
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    if profiles and args.http is None:
        raise _fail(f'the "profiles" of {args.config} are HTTP endpoints: add --http HOST:PORT')
    if profiles and args.metrics:
        raise _fail(f'--metrics is not served with the "profiles" of {args.config}: drop --metrics')
    return profiles


def _profiles_app(server: Any, profiles: list[Any], ready: Any, keys: dict[str, Any], options: dict[str, Any]) -> Any:
    """The HTTP app of a proxy with profiles: theirs, /healthz and /readyz (transports/health.py)."""
    from ..transports.health import HealthRoutes
    from ..transports.http_guard import HostGuard
    from .profiles import ProfilesApp, build_profiles

    auth = options.pop("auth", None)
    tool_search = options.pop("tool_search", None)
    try:
        apps = build_profiles(server, profiles, {id(u): key for key, u in keys.items()}, auth, options,
                              tool_search)
    except (ValueError, OSError) as exc:
        raise _fail(str(exc)) from None
    guard = HostGuard(options.get("allowed_hosts"), [*(options.get("allowed_origins") or ()),
                                                     *(options.get("cors_origins") or ())])
    return HealthRoutes(ProfilesApp(apps), guard, ready)


def _announce_profiles(server: Any, profiles: list[Any], root: str | None) -> Any:
    from ..startup import announce

    def ready(base: str) -> None:
        urls = ", ".join(f"{base}{root or ''}{p.path} ({p.name})" for p in profiles)
        announce(f"mcpkit proxy: serving {server.name} as {len(profiles)} profile(s): {urls}")

    return ready


def build_policy(args: argparse.Namespace) -> Any:
    """The Policy the guard-rail options describe, or None when none is asked for."""
    from ..policy.gates import env_flag

    read_only = args.read_only or env_flag("MCPKIT_READ_ONLY", False)
    from .profiles import guard_policy

    # the messages name what would change the answer: the proxy's own flags, or the variable
    switches = (("read_only", "--read-only" if args.read_only else "MCPKIT_READ_ONLY"),
                ("allow_destructive", "--deny-destructive"), ("allow_open_world", "--deny-open-world"))
    try:
        return guard_policy(read_only=read_only, deny_destructive=args.deny_destructive,
                            deny_open_world=args.deny_open_world, audit=args.audit, rate_limit=args.rate_limit,
                            switches=switches)
    except OSError as exc:
        raise _fail(exc.strerror or str(exc)) from None
    except (ValueError, TypeError) as exc:
        raise _fail(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from .. import cli_serving as cli

    cli.refuse_misplaced(args)  # an HTTP option on stdio is refused, as by `mcpkit serve`
    specs = _specs(args)
    profiles = _profiles(args, specs)
    from .config import ConfigError
    from .searchcli import tool_search_of
    from .sizecap import max_response_bytes

    try:
        cap = max_response_bytes(args.max_response_bytes, args.config)
        tool_search = tool_search_of(args)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    from .._extras import require

    # every optional package the options and the upstreams need, named at once before any starts
    needed = cli.needed_extras(args)
    if tool_search is not None or any(p.tool_search not in (None, "inherit") for p in profiles):
        needed.append(("--tool-search", "search"))
    if any(spec.transport != "stdio" for spec in specs):
        needed.append(("a URL upstream", "client"))
    require(*needed)
    limits = cli.connection_limits(args) if args.http is not None else None
    try:
        auth = cli.auth_of(args)
    except (ValueError, OSError) as exc:  # an unusable tokens file, say: one line, the fix in it
        raise _fail(str(exc)) from None
    out_fd = None
    if args.http is None:
        from ..transports.stdio import guard_stdout

        out_fd = guard_stdout()  # ST-02: nothing but protocol messages on stdout, from here on
    tool_policy = None
    if args.tool_policy:
        from .toolpolicy import ToolPolicy, ToolPolicyError

        try:
            tool_policy = ToolPolicy.from_file(args.tool_policy)
        except ToolPolicyError as exc:
            raise _fail(str(exc)) from None
    from .pincli import key_of, lockfile_for_proxy

    lock = lockfile_for_proxy(args, _fail)
    from ..server.server import Server
    from ..startup import announce

    server = cli.observed(Server(args.name or "mcpkit-proxy", policy=build_policy(args),
                                 host_schemas=args.host_schemas), args)
    sock = None
    if args.http is not None:
        from ..transports.serve import bind

        # before any upstream starts: an address that cannot be served is one line, and no
        # upstream command has been run (or left behind) for it
        sock = bind(*args.http)
    from .scan import Shadows
    from .scancli import screen_for

    shadows = Shadows()  # the upstreams' tool names, for the scan's security.tool-shadowing
    upstreams = []
    for spec in specs:
        prefix = spec.name if len(specs) > 1 else args.prefix
        pin = None
        if lock is not None:
            from .pin import Pin

            pin = Pin(lock, key_of(spec.name), strict=args.pin_strict)
        from .redactcli import redaction_for

        redact = redaction_for(args, spec, specs, _fail)
        try:
            with quiet_start(len(specs) == 1 and not getattr(args, "verbose", False)):
                upstream = server.mount(
                    spec.target, prefix=prefix, name=spec.name, separator=args.separator,
                    prefix_uris=not args.keep_uris, tool_policy=tool_policy, protocol_version=args.protocol_version,
                    timeout=args.timeout, connect_timeout=args.connect_timeout, probe_interval=args.probe_interval,
                    flatten_schemas=args.flatten_schemas, pin=screen_for(args, spec, pin, shadows), redact=redact,
                    max_response_bytes=cap,
                    **spec.options(),
                )
        except ValueError as exc:
            raise _fail(str(exc)) from None
        upstreams.append(upstream)
    keys = {key_of(spec.name): upstream for spec, upstream in zip(specs, upstreams)}
    if tool_search is not None and not profiles:  # with profiles, each profile's endpoint searches
        try:
            server.tool_search = tool_search
        except ValueError as exc:
            raise _fail(str(exc)) from None
    optional = frozenset(key_of(spec.name) for spec in specs if not spec.required)
    try:
        if len(upstreams) == 1:
            only = upstreams[0]
            if not only.up:
                why = only.connect_error or only.last_error or "no reason given"
                raise _fail(f"upstream {only.name!r} did not start: {why}")
            info = only.server_info
            if not args.name and isinstance(info.get("name"), str):
                server.name = info["name"]
                server.version = str(info.get("version") or server.version)
            server.instructions = only.instructions
        else:
            for upstream in upstreams:
                if not upstream.up:
                    announce(f"mcpkit proxy: {upstream.last_error}; retrying in the background")
        if args.http is None:
            from ..transports.stdio import run_stdio

            options: dict[str, Any] = {"drain_timeout": args.shutdown_timeout}
            if args.max_message_bytes:
                options["max_message_bytes"] = args.max_message_bytes
            run_stdio(server, out_fd=out_fd, **options)
        else:
            from .readiness import readiness

            host, port = args.http
            options = cli.http_options_of(args, auth)
            if profiles:
                options = {"app": _profiles_app(server, profiles, readiness(keys, optional), keys,
                                                {**options, "tool_search": tool_search}),
                           "on_ready": _announce_profiles(server, profiles, args.root_path)}
            server.run("http", host=host, port=port, timeout_graceful_shutdown=args.shutdown_timeout,
                       limits=limits, sock=sock, loop=args.loop, readiness=readiness(keys, optional), **options)
    finally:
        if sock is not None:
            sock.close()  # served and closed by uvicorn, or never served: an upstream did not start
        for upstream in upstreams:
            upstream.close()
        if server.policy is not None and server.policy.audit is not None:
            server.policy.audit.close()
    return 0

