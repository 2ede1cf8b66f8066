"""Every ``MCPKIT_*`` environment switch in one table (docs/environment.md): its name, how its
value is read, and who reads it.

The readers (the policy, the stores, the isolation pool, the ``mcpkit`` command) get a switch's
value through :func:`read`, and :func:`check`, run when a server starts serving
(``Server.check_environment``), reads every switch that is set, whether or not anything would:

- a value that does not parse stops the server with one line naming the variable, the value and
  what it takes, so that a typo never opens a gate (``MCPKIT_READ_ONLY=maybe``);
- a switch only a policy reads, set to anything but its off value, is refused on a server without
  a policy: it would change nothing (``MCPKIT_READ_ONLY=1`` on a server that runs every tool);
- a switch only the ``mcpkit`` command reads (``MCPKIT_AUTH``, ``MCPKIT_OTEL``) is refused where
  that command did not read it: ``python server.py`` or ``mcpkit dev`` would serve without it.

A bad value is a :class:`SwitchError` (a ValueError), one line; ``mcpkit`` and ``server.run()``
print it and exit 2. Nothing here is imported by ``import mcpkit``; the parsers that need another
layer's rules (a rate, a state key) find them by name when such a value is set.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LOOPS", "SWITCHES", "Switch", "SwitchError", "check", "claim", "env_flag", "given_as", "read"]


class SwitchError(ValueError):
    """An environment switch with a value it does not take, or that nothing here would read."""


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def _boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("is not a boolean: use 1/true/yes/on or 0/false/no/off")


def _whole(minimum: int, unit: str = "") -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip().replace("_", ""))
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise ValueError(f"is not a whole number{unit}: give {minimum} or more")
        return value

    return parse


def _limit(raw: str) -> int | None:
    """A size in bytes; 0 is no limit (None)."""
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError("is not a number of bytes: give a whole number, or 0 for no limit")
    return value or None


def _seconds(raw: str) -> float | None:
    """A timeout; 0 is none (None)."""
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("is not a number of seconds: give a positive number of seconds, or 0 for no timeout") \
            from None
    if not 0 <= value < float("inf"):  # -1, nan, inf: a mistake
        raise ValueError("is not a usable timeout: give a positive number of seconds, or 0 for no timeout")
    return value or None


def _rate(raw: str) -> Any:
    """A rate such as ``600/min`` (policy/ratelimit.py's grammar), or off/none/0 (None)."""
    if raw.strip().lower() in ("off", "none", "0"):
        return None
    rate = getattr(importlib.import_module("mcpkit.policy.ratelimit"), "Rate")
    try:
        return rate.parse(raw)
    except ValueError:
        raise ValueError("is not a rate: give calls per period such as 600/min, 5/s or 100/30s, or off") from None


def _start_method(raw: str) -> str:
    if raw.strip() not in ("fork", "spawn", "forkserver"):
        raise ValueError("is not a start method: use fork, spawn or forkserver")
    return raw.strip()


#: the event loops HTTP serving takes (``--loop``, MCPKIT_LOOP): ``auto`` is uvloop when it is
#: installed (``mcpkit[fast]``, ``uvicorn[standard]``), else asyncio, as uvicorn itself decides
LOOPS = ("auto", "asyncio", "uvloop")


def _loop(raw: str) -> str:
    if raw.strip() not in LOOPS:
        raise ValueError("is not an event loop: use auto, asyncio or uvloop")
    return raw.strip()


def _store(raw: str) -> str:
    url = raw.strip()
    if url == "memory":
        return url
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError("is not a store: use memory, or a redis://, rediss:// or unix:// URL")
    from ._extras import require

    require(("MCPKIT_STORE=redis://", "redis"))
    # its query (prefix, task lease, redis-py's arguments) as the store will read it, on stdio too
    getattr(importlib.import_module("mcpkit.stores.redis"), "parse_url")(url)
    return url


def _state_key(raw: str) -> str:
    sealer = getattr(importlib.import_module("mcpkit.protocol.sealed"), "Sealer")
    try:
        sealer(raw)
    except ValueError as exc:
        raise ValueError(f"is not a usable state key ({exc}): give 16 bytes or more, in hex or urlsafe base64") \
            from None
    return raw


def _text(raw: str) -> str:
    return raw


def _paths(raw: str) -> list[str]:
    return [p for p in raw.split(os.pathsep) if p]


def _argv(raw: str) -> list[str]:
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(word, str) for word in value):
        raise ValueError("is not a command line: give a JSON list of strings (mcpkit sets it for its workers)")
    return value


#: who reads a switch: ``server`` (any server that uses the feature), ``policy`` (only a policy:
#: refused on a server without one), ``command`` (only the ``mcpkit`` command: refused where it
#: did not read it), ``check`` (``mcpkit check``, which serves nothing), ``internal`` (set by
#: mcpkit for its own child processes)
Reader = str


@dataclass(frozen=True)
class Switch:
    name: str
    #: the value from its text; a ValueError saying what it takes ("is not a boolean: use ...")
    parse: Callable[[str], Any]
    reader: Reader
    #: the parsed values that ask for nothing (a policy or command switch so set is not refused);
    #: None: every value asks for something
    off: tuple[Any, ...] | None = (False, None)
    #: its value is a secret (or may hold one): never shown in a message
    secret: bool = False
    #: for a command switch: which commands read it, and how to get the same without them
    read_where: str = ""
    instead: str = ""


_AUTH_WHERE = "mcpkit serve --http and mcpkit proxy --http"
_AUTH_INSTEAD = "serve with mcpkit serve SERVER --http HOST:PORT (docs/auth.md)"


def _table() -> dict[str, Switch]:
    boolean, policy, command = _boolean, "policy", "command"
    switches = [
        Switch("MCPKIT_POLICY", boolean, "server"),
        Switch("MCPKIT_READ_ONLY", boolean, policy),
        Switch("MCPKIT_ALLOW_DESTRUCTIVE", boolean, policy),
        Switch("MCPKIT_ALLOW_OPEN_WORLD", boolean, policy),
        Switch("MCPKIT_ROOT", _paths, policy, off=([],)),
        Switch("MCPKIT_CONTRACT", boolean, policy),
        Switch("MCPKIT_AUDIT_LOG", _text, policy, off=None),
        Switch("MCPKIT_AUDIT_MAX_BYTES", _whole(0), policy, off=None),
        Switch("MCPKIT_AUDIT_BACKUPS", _whole(0), policy, off=None),
        Switch("MCPKIT_AUDIT_MAX_ARGUMENT_BYTES", _whole(0), policy, off=None),
        Switch("MCPKIT_AUDIT_KEEP_RECENT", _whole(0, " of seconds"), policy, off=None),
        Switch("MCPKIT_AUDIT_MAX_BACKUPS", _whole(0), policy, off=None),
        Switch("MCPKIT_ISOLATION_WORKERS", _whole(1, " of worker processes"), "server"),
        Switch("MCPKIT_ISOLATION_START", _start_method, "server"),
        Switch("MCPKIT_RATE_LIMIT", _rate, policy),
        Switch("MCPKIT_TOOL_TIMEOUT", _seconds, policy),
        Switch("MCPKIT_MAX_ARGUMENT_BYTES", _limit, policy),
        Switch("MCPKIT_MAX_RESULT_BYTES", _limit, policy),
        Switch("MCPKIT_STORE", _store, "server", secret=True),
        Switch("MCPKIT_LOOP", _loop, "server"),
        Switch("MCPKIT_STATE_KEY", _state_key, "server", secret=True),
        # the caller's API key on stdio, read by a server served with ApiKeyAuth (auth/apikey.py)
        Switch("MCPKIT_API_KEY", _text, "auth", off=None, secret=True),
        Switch("MCPKIT_OTEL", boolean, command, read_where="mcpkit serve and mcpkit proxy",
               instead="observe in code with server.observe(OpenTelemetry()) (docs/observability.md)"),
        Switch("MCPKIT_INTROSPECTION_CLIENT_SECRET", _text, command, off=None, secret=True,
               read_where=_AUTH_WHERE + " with --auth introspection", instead=_AUTH_INSTEAD),
        Switch("MCPKIT_AUTH_TOKENS", _text, command, off=None, secret=True,
               read_where=_AUTH_WHERE + " with --auth tokens", instead=_AUTH_INSTEAD),
        Switch("MCPKIT_CONFORMANCE", _text, "check"),
        Switch("MCPKIT_SERVE_ARGV", _argv, "internal"),
    ]
    # each stands for an --auth option (cli_auth.ENVIRONMENT) and is parsed as that option is, with
    # the same message for the option and the variable
    for name in ("MCPKIT_AUTH", "MCPKIT_AUTH_RESOURCE", "MCPKIT_AUTH_ISSUER", "MCPKIT_AUTH_AUDIENCE",
                 "MCPKIT_AUTH_JWT_TYPES", "MCPKIT_AUTH_JWKS_URI", "MCPKIT_AUTH_INTROSPECTION_URL",
                 "MCPKIT_AUTH_CLIENT_ID"):
        switches.append(Switch(name, _text, command, off=None, read_where=_AUTH_WHERE, instead=_AUTH_INSTEAD))
    return {switch.name: switch for switch in switches}


#: every MCPKIT_* switch; docs/environment.md has a row for each (tests/test_switches.py)
SWITCHES: dict[str, Switch] = _table()

#: command switches the running mcpkit command has read (claim), and switches it set from one of
#: its flags (given_as): a message names what the user wrote
_claimed: set[str] = set()
_flags: dict[str, str] = {}
#: switches something in this process has read from os.environ (read, env_flag): a policy built
#: by hand, or with its own environ or gate names, reads none of them, and :func:`check` refuses
#: a policy switch set for a policy that never read it
_read_here: set[str] = set()


def _shown(switch: Switch, raw: str) -> str:
    if name := _flags.get(switch.name):
        return name
    return f"{switch.name} (its value is not shown)" if switch.secret else f"{switch.name}={raw!r}"


def _parse(switch: Switch, raw: str) -> Any:
    try:
        return switch.parse(raw)
    except SwitchError:
        raise
    except ValueError as exc:
        raise SwitchError(f"{_shown(switch, raw)} {exc}") from None


def read(name: str, environ: Mapping[str, str] | None = None, default: Any = None) -> Any:
    """The value of the switch ``name`` in ``environ`` (os.environ by default), parsed; ``default``
    when it is unset or empty. A bad value is a SwitchError naming it and what it takes."""
    if environ is None or environ is os.environ:
        _read_here.add(name)
    raw = (os.environ if environ is None else environ).get(name, "")
    if not raw.strip():
        return default
    return _parse(SWITCHES[name], raw)


def env_flag(name: str, default: bool = False, environ: Mapping[str, str] | None = None) -> bool:
    """A yes/no switch from the environment, the table's or a server's own (``READ_ONLY_MODE``):
    a value that is neither is a SwitchError at start-up rather than a silent default."""
    if environ is None or environ is os.environ:
        _read_here.add(name)
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None:
        return default
    try:
        return _boolean(raw)
    except ValueError as exc:
        raise SwitchError(f"{name}={raw!r} {exc}") from None


def claim(*names: str) -> None:
    """The running ``mcpkit`` command has read these command switches (they are not refused)."""
    _claimed.update(names)


def given_as(name: str, flag: str) -> None:
    """The ``mcpkit`` command set ``name`` from its option ``flag`` (--read-only): refusals name
    the flag."""
    _flags[name] = flag


def _asks(switch: Switch, value: Any) -> bool:
    return switch.off is None or all(value != off for off in switch.off)


def _misspelled(env: Mapping[str, str]) -> None:
    """An ``MCPKIT_*``-like name that is no switch but close to one (READONLY for READ_ONLY, a
    lower-case name) is refused: the switch it was meant to be is off, and a gate the user
    believes closed would be open. Names far from every switch (a tool's own settings) pass."""
    import difflib

    def key(name: str) -> str:
        return name[len("MCPKIT_"):].replace("_", "").lower()

    known = {key(name): name for name in SWITCHES}
    for name in env:
        if name in SWITCHES or not name.upper().startswith("MCPKIT_") or not env[name].strip():
            continue
        close = difflib.get_close_matches(key(name), known, n=1, cutoff=0.85)
        if close:
            meant = known[close[0]]
            raise SwitchError(f"{name} is not an mcpkit switch, so it would change nothing; did you mean {meant}? "
                              f"Rename it to {meant} or unset it (docs/environment.md lists the switches)")


def check(*, server: str | None = None, policy: bool = False, environ: Mapping[str, str] | None = None,
          key_variable: str | None = None) -> None:
    """Read every switch that is set (a SwitchError for the first bad value). With ``server``
    (its name; ``policy``: whether it has one), a server is about to serve: a misspelled switch,
    a policy switch that asks for something and that no policy will read (none, or one built
    without reading it), or a command switch the mcpkit command did not read, is refused too."""
    env = os.environ if environ is None else environ
    values = {}
    for switch in SWITCHES.values():
        raw = env.get(switch.name, "")
        if raw.strip():
            values[switch.name] = (switch, raw, _parse(switch, raw))
    if server is None:
        return
    _misspelled(env)
    unread = [(s, raw) for s, raw, value in values.values()
              if s.reader == "policy" and not policy and _asks(s, value)]
    if unread:
        named = [_shown(s, raw) if s.name in _flags or s.secret else f"{s.name}={raw}" for s, raw in unread]
        plural = len(named) > 1
        variables = [s.name for s, _ in unread if s.name not in _flags]
        fix = (f"set MCPKIT_POLICY=1 (mcpkit serve --policy, or build the Server with policy=...), or unset "
               f"{' and '.join(variables)}" if variables else "add --policy (or build the Server with policy=...)")
        raise SwitchError(f"{' and '.join(named)} need{'' if plural else 's'} a policy, and the server {server!r} "
                          f"has none, so {'they' if plural else 'it'} would change nothing; {fix}")
    # what this process read is known of os.environ only
    ignored = [] if environ is not None and environ is not os.environ else [
        (s, raw) for s, raw, value in values.values()
        if s.reader == "policy" and policy and s.name not in _read_here and _asks(s, value)]
    if ignored:
        named = [_shown(s, raw) if s.name in _flags or s.secret else f"{s.name}={raw}" for s, raw in ignored]
        plural = len(named) > 1
        undo = [f"drop {_flags[s.name]}" if s.name in _flags else f"unset {s.name}" for s, _ in ignored]
        raise SwitchError(f"{' and '.join(named)} {'are' if plural else 'is'} set, but the policy of the server "
                          f"{server!r} was built without reading {'them' if plural else 'it'} (by hand, with its "
                          f"own environ or switch names, or the setting given in code), so "
                          f"{'they' if plural else 'it'} would change nothing; build the policy with "
                          f"Policy.secure(), which reads the MCPKIT_* switches, or {' and '.join(undo)}")
    for switch, raw, value in values.values():
        # an API key the server's auth does not read (none, or ApiKeyAuth(env=another)): its
        # calls would run without the identity the user meant to give them
        if switch.reader == "auth" and switch.name != key_variable:
            reads = f"its ApiKeyAuth reads {key_variable}" if key_variable else "it has no ApiKeyAuth to read it"
            raise SwitchError(f"{switch.name} (its value is not shown) is set, but the server {server!r} does not "
                              f"read it: {reads}, so it would change nothing; give the key in the variable the "
                              f"server reads, or unset {switch.name}")
        if switch.reader == "command" and switch.name not in _claimed and _asks(switch, value):
            shown = f"{switch.name} (its value is not shown)" if switch.secret else f"{switch.name}={raw}"
            raise SwitchError(f"{shown} is read only by {switch.read_where}, not here, so it would change nothing; "
                              f"{switch.instead}, or unset {switch.name}")
