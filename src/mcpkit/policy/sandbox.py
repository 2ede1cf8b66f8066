"""Sandbox: file paths and URIs a tool receives, confined to configured root directories.

A tool that reads or writes files on a model's behalf must not let the model wander the host's
filesystem (TL-11 access control; RT-03 "respect root boundaries, validate paths against the
given roots"). The check is done on *real* paths, never on strings: the requested path is joined
to its root and passed through ``os.path.realpath`` (every ``..`` and every symlink in an existing
component resolved), and the result must lie inside a root, compared component by component, so
``/srv/root2`` is not inside ``/srv/root`` and ``link/secret.txt`` is refused when ``link``
points outside.

Decisions worth knowing:

- Roots are per server: ``Sandbox(roots)``, or ``configure(roots)`` after ``--root`` is parsed, or
  lazily from ``MCPKIT_ROOT`` (``os.pathsep``-separated). With no roots every path is refused.
- A relative path is taken relative to the first root (or ``root=i``); an absolute one must fall
  inside some root (or inside root ``i`` when given). ``~`` is a literal name, never expanded. On
  POSIX, ``C:\\x`` and ``\\\\host\\share`` are ordinary (relative) names.
- An empty path, or one containing NUL, is malformed input: E_SCHEMA_VALIDATION, not a
  permission question. Escapes are E_PERMISSION_DENIED; ``must_exist`` misses are E_NOT_FOUND.
- Messages show the path as the caller gave it, never the resolved target of an escaping symlink
  (that would reveal the outside filesystem) nor the absolute location of the roots.
- A symlink loop, or a component the process may not inspect, is refused: we cannot prove where
  it leads.

Remaining TOCTOU window: between :meth:`Sandbox.resolve` and the use of the path, someone with
write access inside a root could swap a component for a symlink. :meth:`Sandbox.open` closes
this for the final component (``O_NOFOLLOW``), not for intermediate directories; full closure
needs ``openat2(RESOLVE_BENEATH)``, which the standard library does not expose.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote, urlsplit

from mcpkit.protocol.errors import (
    E_NOT_FOUND,
    E_PERMISSION_DENIED,
    E_SCHEMA_VALIDATION,
    ToolError,
)

if os.name == "nt":  # pragma: no cover - exercised on Windows only
    from nturl2path import url2pathname
else:
    # What urllib.request.url2pathname is on POSIX, without importing urllib.request (which pulls
    # in http.client and ssl: start-up cost on every server).
    url2pathname = unquote

__all__ = ["Sandbox"]

_O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
# Opening a symlink with O_NOFOLLOW fails with ELOOP (Linux, macOS) or EMLINK (FreeBSD).
_NOFOLLOW_ERRNOS = frozenset({errno.ELOOP, getattr(errno, "EMLINK", errno.ELOOP)})
_FIX_ESCAPE = (
    "Use a path inside the allowed roots, preferably relative to the root (e.g. 'docs/notes.txt'); "
    "'..' above the root and symlinks that lead outside are refused."
)
_SHOW_MAX = 160


def _show(path: str) -> str:
    """The path as given, quoted and cut short, for a one-sentence message."""
    return repr(path if len(path) <= _SHOW_MAX else path[:_SHOW_MAX] + "...")


def _real_root(root: str | os.PathLike[str]) -> Path:
    raw = os.fsdecode(os.fspath(root))
    if not raw or "\0" in raw:
        raise ValueError(f"sandbox root {raw!r} is not a usable directory name")
    real = os.path.realpath(raw)
    if not os.path.isdir(real):
        raise ValueError(f"sandbox root {raw!r} does not exist or is not a directory")
    return Path(real)


class Sandbox:
    """Paths and URIs confined to a set of root directories (TL-11, RT-03).

    ``schemes`` are the URI schemes :meth:`check_uri` accepts (``file`` by default; ``file`` URIs
    are confined like paths, others only checked for their scheme). ``env`` names the variable
    read on first use when no roots were given.
    """

    __slots__ = ("_env", "_keys", "_roots", "_schemes")

    def __init__(
        self,
        roots: Iterable[str | os.PathLike[str]] | None = None,
        *,
        schemes: Iterable[str] = ("file",),
        env: str = "MCPKIT_ROOT",
    ) -> None:
        if isinstance(schemes, str):  # schemes="file" means ("file",), not its letters
            schemes = (schemes,)
        self._schemes = tuple(dict.fromkeys(s.lower().rstrip(":") for s in schemes))
        self._env = env
        self._roots: tuple[Path, ...] | None = None
        # Per root: (normcased real path, same ending in a separator), precomputed for the hot path.
        self._keys: tuple[tuple[str, str], ...] = ()
        if roots is not None:
            self.configure(roots)

    # -- configuration ------------------------------------------------------------------------

    def configure(self, roots: Iterable[str | os.PathLike[str]] | None) -> None:
        """Set the roots (ValueError if one is missing or not a directory); None: read ``env`` again."""
        if roots is None:
            self._roots, self._keys = None, ()
            return
        if isinstance(roots, (str, bytes, os.PathLike)):
            raise TypeError("roots must be an iterable of paths, not a single path")
        real = tuple(dict.fromkeys(_real_root(r) for r in roots))
        keys = []
        for r in real:
            key = os.path.normcase(str(r))
            keys.append((key, key if key.endswith(os.sep) else key + os.sep))
        self._roots, self._keys = real, tuple(keys)

    @property
    def roots(self) -> tuple[Path, ...]:
        """The resolved root directories (read from the environment variable on first use)."""
        if self._roots is None:
            value = os.environ.get(self._env, "")
            try:
                self.configure([p for p in value.split(os.pathsep) if p])
            except ValueError as exc:
                raise ValueError(f"{self._env}: {exc}") from None
        assert self._roots is not None
        return self._roots

    @roots.setter
    def roots(self, roots: Iterable[str | os.PathLike[str]] | None) -> None:
        self.configure(roots)

    @property
    def schemes(self) -> tuple[str, ...]:
        return self._schemes

    def __repr__(self) -> str:
        state = "unconfigured" if self._roots is None else f"{len(self._roots)} root(s)"
        return f"Sandbox({state}, schemes={list(self._schemes)})"

    # -- paths --------------------------------------------------------------------------------

    def resolve(self, path: str | os.PathLike[str], *, must_exist: bool = False, root: int | None = None) -> Path:
        """The real path of ``path`` if it lies inside the roots, else ToolError.

        Relative paths are joined to the first root (or root ``root``); absolute paths must fall
        inside some root (root ``root`` when given). The result is non-strict ``realpath``: a file
        that does not exist yet resolves through its existing parents, following their symlinks.
        """
        given = self._text(path)
        roots = self.roots
        if not roots:
            raise ToolError(
                f"File access is disabled: no sandbox roots are configured, so {_show(given)} is refused.",
                code=E_PERMISSION_DENIED,
                details={"path": given},
                suggested_fix=(f"The server operator must pass roots (Sandbox(roots=[...]) or --root DIR) "
                               f"or set {self._env} to a {os.pathsep!r}-separated list of directories."),
            )
        if root is not None and not 0 <= root < len(roots):
            raise ToolError(
                f"Root index {root} does not exist; there are {len(roots)} root(s).",
                code=E_SCHEMA_VALIDATION,
                details={"path": given, "root": root},
                suggested_fix=f"Use a root index from 0 to {len(roots) - 1}.",
            )
        if os.path.isabs(given):
            joined = given
        else:
            joined = os.path.join(roots[root or 0], given)
        real = os.path.realpath(joined)
        key = os.path.normcase(real)
        keys = self._keys if root is None else (self._keys[root],)
        # Component-wise containment: both sides are normalised real paths and the prefix ends in
        # a separator, so '/srv/root2' never matches '/srv/root/' (the classic prefix bug).
        if not any(key == k or key.startswith(prefix) for k, prefix in keys):
            self._refuse(given)
        # Fast path: if the result exists, realpath followed every link in it. Otherwise a link
        # may have been left unresolved (a loop), so look at each existing component.
        if not os.path.exists(real):
            self._check_unresolved(real, given)
            if must_exist:
                raise ToolError(
                    f"Path {_show(given)} does not exist.",
                    code=E_NOT_FOUND,
                    details={"path": given},
                    suggested_fix="Check the name, or list the directory to see what exists.",
                )
        return Path(real)

    def relative(self, path: str | os.PathLike[str]) -> str:
        """Display form of a resolved path: relative to its root, POSIX separators, '.' for the root.

        The first root containing ``path`` is used (a path under a later root round-trips through
        ``resolve(..., root=i)``). ValueError if ``path`` is inside no root.
        """
        text = os.fsdecode(os.fspath(path))
        key = os.path.normcase(text)
        self.roots  # noqa: B018 - make sure lazily configured roots are loaded
        for k, prefix in self._keys:
            if key == k:
                return "."
            if key.startswith(prefix):
                return text[len(prefix):].replace(os.sep, "/")
        raise ValueError("path is not inside any sandbox root")

    def open(self, path: str | os.PathLike[str], mode: str = "r", **kw: Any) -> IO[Any]:
        """Resolve ``path`` and open it, refusing a symlink swapped in as the final component.

        Modes with 'r' require the file to exist (E_NOT_FOUND). ``O_NOFOLLOW`` is added where the
        platform has it; intermediate directories swapped after the check are not covered (see
        the module docstring). ``opener`` may not be passed.
        """
        if "opener" in kw:
            raise TypeError("Sandbox.open does not accept an opener")
        given = self._text(path)
        real = self.resolve(given, must_exist="r" in mode)

        def opener(name: str, flags: int) -> int:
            return os.open(name, flags | _O_NOFOLLOW, 0o666)

        try:
            return open(real, mode, opener=opener, **kw)
        except OSError as exc:
            if _O_NOFOLLOW and exc.errno in _NOFOLLOW_ERRNOS:
                self._refuse(given)
            if isinstance(exc, FileNotFoundError):
                raise ToolError(
                    f"Path {_show(given)} (or its parent directory) does not exist.",
                    code=E_NOT_FOUND,
                    details={"path": given},
                    suggested_fix="Check the name, or create the parent directory first.",
                ) from None
            if isinstance(exc, PermissionError):
                raise ToolError(
                    f"The server may not open {_show(given)}.",
                    code=E_PERMISSION_DENIED,
                    details={"path": given},
                    suggested_fix="Choose a file the server can access.",
                ) from None
            raise

    # -- URIs ---------------------------------------------------------------------------------

    def check_uri(self, uri: str, *, must_exist: bool = False) -> str:
        """``uri`` unchanged if its scheme is allowed and, for ``file:``, its path is inside the roots."""
        if not isinstance(uri, str) or not uri:
            raise ToolError(
                "The URI must be a non-empty string.",
                code=E_SCHEMA_VALIDATION,
                details={"uri": uri if isinstance(uri, str) else repr(uri)},
                suggested_fix="Pass a URI such as 'file:///path/inside/root'.",
            )
        parts = urlsplit(uri)
        scheme = parts.scheme.lower()
        if scheme not in self._schemes or ":" not in uri:
            raise ToolError(
                f"URI scheme {scheme + ':' if scheme else '(none)'} is not allowed here; "
                f"allowed: {', '.join(s + ':' for s in self._schemes) or 'none'}.",
                code=E_PERMISSION_DENIED,
                details={"uri": uri, "allowed_schemes": list(self._schemes)},
                suggested_fix=f"Use a URI with one of the allowed schemes: {', '.join(self._schemes) or 'none'}.",
            )
        if scheme != "file":
            return uri
        host = parts.netloc
        if host and host.lower() != "localhost":
            raise ToolError(
                f"File URI {_show(uri)} names a remote host; only local files are allowed.",
                code=E_PERMISSION_DENIED,
                details={"uri": uri},
                suggested_fix="Use a local file URI: file:///path (empty host) or file://localhost/path.",
            )
        # Percent-decoding happens before confinement, so '%2e%2e' is '..' and is resolved as such.
        path = url2pathname(parts.path)
        if not os.path.isabs(path):
            raise ToolError(
                f"File URI {_show(uri)} has no absolute path.",
                code=E_SCHEMA_VALIDATION,
                details={"uri": uri},
                suggested_fix="Write file URIs as file:///absolute/path.",
            )
        try:
            self.resolve(path, must_exist=must_exist)
        except ToolError as exc:
            exc.details = {"uri": uri}
            raise
        return uri

    # -- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _text(path: object) -> str:
        """The caller's path as text; malformed input (not a path, empty, NUL) is a schema error."""
        try:
            text = os.fsdecode(os.fspath(path))  # type: ignore[call-overload]
        except TypeError:
            raise ToolError(
                f"A path must be a string, not {type(path).__name__}.",
                code=E_SCHEMA_VALIDATION,
                details={"path": repr(path)},
                suggested_fix="Pass the path as a string.",
            ) from None
        if not text or "\0" in text:
            raise ToolError(
                "The path is empty." if not text else "The path contains a NUL character.",
                code=E_SCHEMA_VALIDATION,
                details={"path": text},
                suggested_fix="Pass a non-empty path without NUL characters, e.g. 'docs/notes.txt'.",
            )
        return text

    @staticmethod
    def _refuse(given: str, why: str = "resolves outside the allowed roots") -> None:
        raise ToolError(
            f"Path {_show(given)} {why}.",
            code=E_PERMISSION_DENIED,
            details={"path": given},
            suggested_fix=_FIX_ESCAPE,
        )

    def _check_unresolved(self, real: str, given: str) -> None:
        """Refuse ``real`` if an existing component is still a symlink or cannot be inspected.

        Non-strict realpath leaves a looping link unresolved (and keeps the rest of the path,
        '..' included, unnormalised), so the result may *look* inside while leading nowhere we
        can vouch for.
        """
        parts = real.split(os.sep)
        probe = parts[0]  # '' on POSIX, the drive on Windows
        for part in parts[1:]:
            if not part:
                continue
            probe = probe + os.sep + part
            try:
                st = os.lstat(probe)
            except (FileNotFoundError, NotADirectoryError):
                return  # nothing below exists, so no link is left to follow
            except OSError:
                self._refuse(given, "cannot be checked (a component is not accessible)")
            if stat.S_ISLNK(st.st_mode):
                self._refuse(given, "goes through a symlink that cannot be resolved (a loop)")
