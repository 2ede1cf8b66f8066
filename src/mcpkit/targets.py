"""TARGET: the one way every ``mcpkit`` command names a server.

    weather.py                 a Python file holding an mcpkit Server (``weather.py:ATTR`` picks one)
    weather.app:server         an importable module's Server attribute (``package.module[:ATTR]``)
    "python weather.py"        a command line in quotes: any stdio server, mcpkit or not
    "node build/index.js"      (the same)
    .venv/bin/mcp-server-time  a path to a script or program that is not a .py file: run as itself
                               (an executable by its own path, another script by its ``#!`` line)
    http://127.0.0.1:8000/mcp  a URL: Streamable HTTP (legacy HTTP+SSE with ``--sse``)

``serve`` and ``dev`` need an mcpkit Server they can load (a file, a module, or a command line that
runs one, such as ``"python weather.py"``); the client commands (``list``, ``call``, ``read``,
``prompt``, ``doctor``, ``check``) launch a file or module as ``python -m mcpkit serve FILE`` and
talk to it like to any other server; ``docs`` loads an mcpkit server in-process so that it can
document every tool, whatever the gates; ``install`` writes each kind in the form an MCP client's
configuration accepts.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Target", "TargetError", "resolve", "load_server", "is_mcpkit_file"]

Kind = Literal["reference", "file", "module", "command", "url"]

#: attribute names tried, in order, when a file or module holds several Servers
_PREFERRED = ("server", "mcp", "app")
_PYTHONS = ("python", "python3", "py")


class TargetError(SystemExit):
    """A TARGET that names nothing usable; its text is the one line shown to the user."""

    def __init__(self, message: str) -> None:
        super().__init__(f"mcpkit: {message}")


@dataclass(frozen=True)
class Target:
    """A resolved TARGET. ``kind`` is one of reference, file, module, command, url."""

    kind: Kind
    text: str
    #: file: the absolute path; module: the module name
    location: str = ""
    #: the ``:ATTR`` part, when given
    attribute: str | None = None
    #: command: the argv
    argv: tuple[str, ...] = ()

    # -------------------------------------------------------------- what it is

    @property
    def is_url(self) -> bool:
        return self.kind == "url"

    def loadable(self) -> Target | None:
        """This target as a loadable mcpkit Server (file, module or the reference server), or
        None. A command line ``python FILE.py`` and ``python -m mcpkit serve T`` count: they run
        one (the file may still hold no Server: :meth:`load` says so)."""
        if self.kind in ("reference", "file", "module"):
            return self
        if self.kind != "command":
            return None
        argv = list(self.argv)
        if not argv or os.path.basename(argv[0]).split(".exe")[0].rstrip("0123456789.") not in _PYTHONS:
            return None
        rest = argv[1:]
        if rest[:3] == ["-m", "mcpkit", "serve"]:
            served = [a for a in rest[3:] if not a.startswith("-")]
            return resolve(served[0]) if served else Target("reference", "")
        if rest and rest[0].endswith(".py") and os.path.isfile(rest[0]) and is_mcpkit_file(rest[0]):
            return resolve(rest[0])
        return None

    def runs_own_code(self) -> bool:
        """Whether this runs the user's own server: a file, a module, the reference server, or a
        command line that runs an mcpkit server (see :meth:`loadable`). Such a server sees the
        whole environment, as ``mcpkit serve`` would; any other command line is a program we may
        not have written, and sees an allow-list of it (mcpkit.client.environment)."""
        return self.kind != "url" and (self.kind != "command" or self.loadable() is not None)

    def is_mcpkit(self) -> bool:
        """Whether this names an mcpkit server: the reference server, a module (``module:ATTR``
        names a Server), or a file that imports mcpkit (read, never run, to tell)."""
        return self.kind in ("reference", "module") or (self.kind == "file" and is_mcpkit_file(self.location))

    @property
    def label(self) -> str:
        return self.text or "the reference server"

    # -------------------------------------------------------------- how to reach it

    def load(self) -> Any:
        """The mcpkit Server this target names, imported in this process."""
        found = self.loadable()
        if found is None:
            raise TargetError(f"{self.text!r} is not an mcpkit server this process can load; "
                              "give a server.py file or package.module:ATTR")
        return _load(found)

    def command(self) -> list[str]:
        """The command line that runs this target on stdio (not for URLs)."""
        if self.kind == "url":
            raise TargetError(f"{self.text} is a URL, not a command")
        if self.kind == "command":
            return list(self.argv)
        if self.kind == "file" and not self.is_mcpkit():
            return [sys.executable, self.location]  # a server built on another SDK runs as itself
        served = [] if self.kind == "reference" else [self.text]
        return [sys.executable, "-m", "mcpkit", "serve", *served]

    def client_target(self, *, sse: bool = False) -> tuple[Any, str]:
        """(target, transport) for :class:`mcpkit.Client`."""
        if self.kind == "url":
            return self.text, "sse" if sse else "http"
        return self.command(), "stdio"


def resolve(text: str | None) -> Target:
    """Read TARGET. Rules, in order: nothing is the bundled reference server; ``http(s)://`` is a
    URL; an existing file that is not ``.py`` and is executable or starts with ``#!`` is a command
    that runs it as itself; an existing file or a ``.py`` path is a file; a text with spaces is a command line; a
    single word with ``:`` is ``module:attr``; a single word found on PATH is a command (a
    server's executable, like ``mcp-server-time``); any other single word is a module."""
    text = (text or "").strip()
    if not text:
        return Target("reference", "")
    if text.startswith(("http://", "https://")):
        return Target("url", text)
    path, _, attribute = text.rpartition(":") if _has_attribute(text) else (text, "", "")
    if os.path.isfile(text) and not text.endswith(".py"):
        argv = _script_argv(text)
        if argv is not None:
            return Target("command", text, argv=tuple(argv))
    if os.path.isfile(text) or (" " not in text and (path.endswith(".py") or os.path.isfile(path))):
        file = text if os.path.isfile(text) else path
        if not os.path.isfile(file):
            raise TargetError(f"no such file: {file}")
        return Target("file", text, os.path.abspath(file), attribute or None if file == path else None)
    if any(c.isspace() for c in text):
        try:
            argv = shlex.split(text)
        except ValueError as exc:
            raise TargetError(f"cannot read the command line {text!r} ({exc}); check its quotes") from None
        return Target("command", text, argv=tuple(argv))
    if attribute:
        if not _importable(path):
            raise TargetError(f"no module named {path!r}; run from the directory that holds it, or give a path/to/"
                              "server.py")
        return Target("module", text, path, attribute)
    if shutil.which(text):
        return Target("command", text, argv=(text,))
    if "/" in text or os.sep in text:
        raise TargetError(f"no such file: {text}")
    if not _importable(text):
        raise TargetError(f"{text!r} is no file, command on PATH or importable module; give a path/to/server.py, "
                          "package.module:ATTR, a command line in quotes, or a URL")
    return Target("module", text, text)


def _script_argv(path: str) -> list[str] | None:
    """How a file that is not Python source runs as itself, or None: an executable (a venv's
    console script, a Node package's bin script, a binary) by its own path, since its ``#!`` line
    names the interpreter that has its modules (mcpkit's own Python does not); a script that is
    not executable by the interpreter its ``#!`` line names."""
    full = os.path.abspath(path)
    if os.access(full, os.X_OK):
        return [full]
    try:
        with open(full, "rb") as file:
            first = file.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    try:
        interpreter = shlex.split(first[2:].decode("utf-8", "replace").strip())
    except ValueError:
        return None
    return [*interpreter, full] if interpreter else None


def _importable(module: str) -> bool:
    """Whether the top-level package of ``module`` can be found (nothing is imported)."""
    top = module.split(".")[0]
    if not top.isidentifier():
        return False
    if top in sys.modules:
        return True
    if os.getcwd() not in sys.path and importlib.util.find_spec is not None:
        here = os.path.join(os.getcwd(), top)
        if os.path.isdir(here) or os.path.isfile(here + ".py"):
            return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


_MCPKIT_IMPORT = re.compile(r"^\s*(from\s+mcpkit[\s.]|import\s+mcpkit\b)", re.MULTILINE)


def is_mcpkit_file(path: str) -> bool:
    """Whether a Python file imports mcpkit (read, not run: looking must not execute it)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return bool(_MCPKIT_IMPORT.search(file.read()))
    except OSError:
        return False


def _has_attribute(text: str) -> bool:
    # "C:\\server.py" is a drive letter, not an attribute; "pkg.mod:app" and "s.py:srv" are
    head, sep, tail = text.rpartition(":")
    return bool(sep) and bool(head) and tail.isidentifier() and not (len(head) == 1 and head.isalpha())


def load_server(target: str | None) -> Any:
    """The mcpkit Server TARGET names (the reference server when None)."""
    return resolve(target).load()


def _load(target: Target) -> Any:
    if target.kind == "reference":
        from .reference import server

        return server
    if target.kind == "file":
        full = target.location
        sys.path.insert(0, os.path.dirname(full))
        spec = importlib.util.spec_from_file_location("__mcpkit_target__", full)
        if spec is None or spec.loader is None:
            raise TargetError(f"cannot import {full}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return _find_server(vars(module), target.attribute, os.path.relpath(full))
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(target.location)
    except ModuleNotFoundError as exc:
        if exc.name and target.location.split(".")[0] == exc.name.split(".")[0]:
            raise TargetError(f"no module named {target.location!r} (and no such file or command); "
                              "give a path/to/server.py, package.module:ATTR, a command line in quotes, "
                              "or a URL") from None
        raise
    return _find_server(vars(module), target.attribute, target.location)


def _find_server(namespace: dict[str, Any], attribute: str | None, origin: str) -> Any:
    from .server.server import Server

    if attribute:
        obj = namespace.get(attribute)
        if obj is None:
            raise TargetError(f"{origin} has no attribute {attribute!r}")
        if callable(obj) and not isinstance(obj, Server):
            obj = obj()  # a factory
        if not isinstance(obj, Server):
            raise TargetError(f"{origin}:{attribute} is a {type(obj).__name__}, not an mcpkit Server")
        return obj
    found = {k: v for k, v in namespace.items() if isinstance(v, Server)}
    for name in _PREFERRED:
        if name in found:
            return found[name]
    if len(found) == 1:
        return next(iter(found.values()))
    if not found:
        raise TargetError(f"no mcpkit Server instance found in {origin}; name one with {origin}:ATTRIBUTE")
    raise TargetError(f"several Servers in {origin} ({', '.join(sorted(found))}); name one with :ATTRIBUTE")
