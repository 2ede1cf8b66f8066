"""The environment a spawned MCP server process starts with.

A stdio server is a program we may not have written. Handing it our whole environment hands it
every secret in it: another upstream's token, an OAuth client secret, a cloud key. So, as the
official SDKs do (the Python SDK's ``get_default_environment()``), a child gets only the names
below that are set here, then what its caller opts in to (``inherit_env``: names, or True for
everything), then its own ``env``, which wins (a None value there removes a name).

This stops environment variables leaking; it does not stop file reads: the child still runs as
the same user, with the same files and network.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping

__all__ = ["INHERITED", "child_environment", "inherited_names", "misnamed"]

#: what a server needs to start and behave as it would in a terminal, and no secret: the
#: Python SDK's POSIX list (the first six), then names it lacks that carry no credential
INHERITED_POSIX: dict[str, str] = {
    "HOME": "where npm, uv, pip and most programs keep their caches and settings",
    "LOGNAME": "the user's name, for programs that ask who runs them",
    "PATH": "where `node`, `npx`, `uvx`, `python` and the commands they run are found",
    "SHELL": "the user's shell, for servers that run commands",
    "TERM": "the terminal type, for programs that color or lay out their stderr",
    "USER": "the user's name (LOGNAME's BSD spelling)",
    "LANG": "the locale: how file names and text are decoded (Python's UTF-8 mode, node's Intl)",
    "LANGUAGE": "the order of languages for messages",
    "TZ": "the time zone a server's dates are given in",
    "TMPDIR": "where temporary files go (TEMP's POSIX spelling)",
    "SSL_CERT_FILE": "a CA bundle's path (no secret): uv and OpenSSL reach registries behind a TLS proxy",
    "SSL_CERT_DIR": "a CA directory's path, as SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS": "a CA bundle's path, for node and npx, as SSL_CERT_FILE",
}
#: the Python SDK's Windows list
INHERITED_WINDOWS: dict[str, str] = {
    "APPDATA": "per-user settings (npm's global folder)",
    "HOMEDRIVE": "the drive of the user's home",
    "HOMEPATH": "the user's home on HOMEDRIVE",
    "LOCALAPPDATA": "per-user caches (uv, pip)",
    "PATH": "where commands are found",
    "PROCESSOR_ARCHITECTURE": "which binaries node and Python pick",
    "SYSTEMDRIVE": "the Windows drive",
    "SYSTEMROOT": "the Windows folder, without which sockets and DLLs fail to load",
    "TEMP": "where temporary files go",
    "USERNAME": "the user's name",
    "USERPROFILE": "the user's home",
}
INHERITED = INHERITED_WINDOWS if sys.platform == "win32" else INHERITED_POSIX


def inherited_names(environ: Mapping[str, str]) -> list[str]:
    """The names of ``environ`` a child gets by default: the list above and every ``LC_*``
    locale category (as LANG)."""
    return [k for k in environ if k in INHERITED or (sys.platform != "win32" and k.startswith("LC_"))]


def misnamed(names: Iterable[str]) -> str | None:
    """What is wrong with ``--pass-env`` names, for the one line a command prints; None if nothing."""
    for name in names:
        if not name or "=" in name:
            return f"--pass-env takes a variable's name, got {name!r}; it passes the value this process has"
    return None


def child_environment(
    env: Mapping[str, str | None] | None = None,
    inherit_env: bool | Iterable[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of a spawned server: the default names of ``environ`` (this
    process's by default; a value starting with ``()``, a shell function, is skipped as the SDK
    does), plus ``inherit_env`` (True: all of ``environ``; names: those of them that are set; an
    unset name is skipped, as the default names are), plus ``env`` on top (None removes)."""
    source = os.environ if environ is None else environ
    if inherit_env is True:
        out = dict(source)
    else:
        out = {k: source[k] for k in inherited_names(source) if not source[k].startswith("()")}
        if inherit_env:
            if isinstance(inherit_env, str):
                raise TypeError("inherit_env is True or a list of names, not one string")
            out.update({k: source[k] for k in inherit_env if k in source})
    for key, value in (env or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out
