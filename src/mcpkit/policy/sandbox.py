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

Races (someone with write access inside a root swapping a directory for a symlink between
the check and the use): every file operation of a Sandbox (:meth:`Sandbox.open`, ``read_bytes``,
``write_bytes``, ``iterdir``, ``glob``, ``stat``, ``mkdir``, ``rename``, ``unlink``, ``rmdir``),
and of the paths ``SandboxPath`` parameters receive, walks from the root one component at a
time, each opened relative to its parent's descriptor with ``O_NOFOLLOW`` (``openat``); a
component swapped for a symlink then fails the operation (E_PERMISSION_DENIED) instead of
leading outside. Only ``resolve`` itself answers a path, which is stale as soon as it returns:
use the operations, not ``open(sandbox.resolve(p))``.

Hard links: a regular file with more than one link may be a link to a file outside the roots
(made by someone who could write inside a root), so reading or writing one is refused unless
``Sandbox(allow_hardlinks=True)``.

Glob patterns (:meth:`Sandbox.glob`) are confined like paths: a pattern is relative, has no
``..`` component, and matches only entries found by walking down from the directory it
applies to (symlinked directories are not descended into).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
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
_O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
#: descriptor-relative operations (openat, mkdirat, renameat, unlinkat, fstatat) are available:
#: every POSIX system Python supports; elsewhere operations fall back to checked paths
_AT = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd and bool(_O_NOFOLLOW)
_GLOB_MAGIC = frozenset("*?[")
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

    __slots__ = ("_env", "_keys", "_roots", "_schemes", "allow_hardlinks")

    def __init__(
        self,
        roots: Iterable[str | os.PathLike[str]] | None = None,
        *,
        schemes: Iterable[str] = ("file",),
        env: str = "MCPKIT_ROOT",
        allow_hardlinks: bool = False,
    ) -> None:
        if isinstance(schemes, str):  # schemes="file" means ("file",), not its letters
            schemes = (schemes,)
        self._schemes = tuple(dict.fromkeys(s.lower().rstrip(":") for s in schemes))
        self._env = env
        #: read and write regular files with more than one hard link (off: one may lead outside)
        self.allow_hardlinks = allow_hardlinks
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
        """Open ``path`` (as :func:`open`), every component opened relative to its parent with
        ``O_NOFOLLOW``: a directory or file swapped for a symlink after the check is refused.

        Modes with 'r' require the file to exist (E_NOT_FOUND); 'x' refuses an existing one. A
        regular file with several hard links is refused unless ``allow_hardlinks``.
        ``opener`` may not be passed.
        """
        if "opener" in kw:
            raise TypeError("Sandbox.open does not accept an opener")
        given = self._text(path)
        real = self.resolve(given, must_exist="r" in mode)
        flags = _open_flags(mode)
        try:
            if not _AT:
                fd = os.open(real, flags | _O_NOFOLLOW, 0o666)
            else:
                with self._parent_fd(real, given) as (dir_fd, name):
                    if name is None:
                        raise IsADirectoryError(errno.EISDIR, "is a directory")
                    fd = os.open(name, flags, 0o666, dir_fd=dir_fd)
        except OSError as exc:
            raise self._os_error(exc, given) from None
        try:
            st = os.fstat(fd)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                self._refuse(given, "is not a regular file (a FIFO, socket or device is never opened)")
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and not self.allow_hardlinks:
                self._refuse(given, "is a hard link (a file with several names may lead outside the roots)")
            os.set_blocking(fd, True)
            if "w" in mode and stat.S_ISREG(st.st_mode):
                os.ftruncate(fd, 0)  # only now: truncating at open would reach a refused file
            return open(fd, mode.replace("x", "w"), **kw)
        except BaseException:
            os.close(fd)
            raise

    def read_bytes(self, path: str | os.PathLike[str], limit: int | None = None) -> bytes:
        """The bytes of a file (at most ``limit`` when given), opened as :meth:`open` does."""
        with self.open(path, "rb") as f:
            return f.read() if limit is None else f.read(limit)

    def read_text(self, path: str | os.PathLike[str], encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read_bytes(path).decode(encoding, errors)

    def write_bytes(self, path: str | os.PathLike[str], data: bytes, *, overwrite: bool = True) -> int:
        """Write a file (created if missing; with ``overwrite=False`` an existing one is refused
        with E_PERMISSION_DENIED); its parent directory must exist (see :meth:`mkdir`)."""
        try:
            with self.open(path, "wb" if overwrite else "xb") as f:
                return f.write(data)
        except FileExistsError:
            given = self._text(path)
            raise ToolError(f"Path {_show(given)} already exists.", code=E_PERMISSION_DENIED,
                            details={"path": given}, suggested_fix="Choose another name.") from None

    def write_text(self, path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8",
                   overwrite: bool = True) -> int:
        return self.write_bytes(path, text.encode(encoding), overwrite=overwrite)

    def stat(self, path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> os.stat_result:
        """``os.stat`` of a path inside the roots, looked up through descriptors. Following a
        symlink that leads outside fails like a dangling one (OSError ELOOP)."""
        given = self._text(path)
        try:
            if follow_symlinks:
                real = self.resolve(given)
            else:
                real = str(self._parent_resolved(given))
        except ToolError:
            raise OSError(errno.ELOOP, "leads outside the sandbox roots", given) from None
        if not _AT:
            return os.stat(real, follow_symlinks=False)
        with self._parent_fd(real, given, refuse=False) as (dir_fd, name):
            if name is None:
                return os.fstat(dir_fd)
            return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)

    def iterdir(self, path: str | os.PathLike[str]) -> Iterator[Any]:
        """The entries of a directory as confined paths (``SandboxPath`` values), read through
        its descriptor; symlinks are listed, not followed."""
        from .paths import ConfinedPath

        given = self._text(path)
        real = self.resolve(given, must_exist=True)
        with self._dir_fd(real, given) as fd:
            names = sorted(os.listdir(fd))
        base = Path(real)
        for name in names:
            yield ConfinedPath._make(base / name, self)

    def glob(self, path: str | os.PathLike[str], pattern: str, *, recursive: bool = False) -> Iterator[Any]:
        """Entries under directory ``path`` matching ``pattern`` (``*``, ``?``, ``[...]`` within a
        name, ``**`` for any depth; ``recursive`` prefixes ``**/``), as confined paths.

        The pattern is confined like a path: absolute patterns and ``..`` components are
        refused (E_PERMISSION_DENIED); matching walks down from ``path`` through descriptors
        and never enters a symlinked directory, so every result lies inside the roots."""
        from .paths import ConfinedPath

        parts = self._pattern(pattern)
        if recursive:
            parts = ["**", *parts]
        given = self._text(path)
        real = self.resolve(given, must_exist=True)
        base = Path(real)
        with self._dir_fd(real, given) as fd:
            found = sorted(set(_match(fd, parts, ())))
        for rel in found:
            yield ConfinedPath._make(base.joinpath(*rel), self)

    def mkdir(self, path: str | os.PathLike[str], *, parents: bool = False, exist_ok: bool = False) -> None:
        """Create a directory (and with ``parents`` its missing parents), each made and entered
        relative to its parent's descriptor."""
        given = self._text(path)
        real = self.resolve(given)
        root, parts = self._locate(real, given)
        if not parts:
            if exist_ok:
                return
            raise FileExistsError(errno.EEXIST, "the root exists", given)
        if not _AT:
            os.makedirs(real, exist_ok=exist_ok) if parents else os.mkdir(real)
            return
        fd = os.open(root, _DIR_FLAGS)
        try:
            for i, name in enumerate(parts):
                last = i == len(parts) - 1
                if last or parents:
                    try:
                        os.mkdir(name, 0o777, dir_fd=fd)
                    except FileExistsError:
                        if last and not exist_ok:
                            raise
                if last:
                    return
                fd = _step(fd, name)
        except OSError as exc:
            raise self._os_error(exc, given) from None
        finally:
            os.close(fd)

    def rename(self, source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
        """``os.rename`` (an existing destination file is replaced) between two paths inside the
        roots, both named relative to their parents' descriptors: a symlink is moved itself."""
        src_given, dst_given = self._text(source), self._text(destination)
        src = str(self._parent_resolved(src_given))
        dst = str(self._parent_resolved(dst_given))
        if not _AT:
            os.rename(src, dst)
            return
        try:
            with self._parent_fd(src, src_given) as (src_fd, src_name), \
                    self._parent_fd(dst, dst_given) as (dst_fd, dst_name):
                if src_name is None or dst_name is None:
                    raise PermissionError(errno.EPERM, "a root cannot be moved or replaced")
                os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        except OSError as exc:
            raise self._os_error(exc, src_given) from None

    def unlink(self, path: str | os.PathLike[str]) -> None:
        """Remove a file (a symlink itself, never its target)."""
        self._remove(path, os.unlink)

    def rmdir(self, path: str | os.PathLike[str]) -> None:
        """Remove an empty directory."""
        self._remove(path, os.rmdir)

    def _remove(self, path: str | os.PathLike[str], remove: Any) -> None:
        given = self._text(path)
        real = str(self._parent_resolved(given))
        if not _AT:
            remove(real)
            return
        try:
            with self._parent_fd(real, given) as (dir_fd, name):
                if name is None:
                    raise PermissionError(errno.EPERM, "a root cannot be removed")
                remove(name, dir_fd=dir_fd)
        except OSError as exc:
            raise self._os_error(exc, given) from None

    # -- descriptors ----------------------------------------------------------------------

    def _parent_resolved(self, given: str) -> Path:
        """``given`` with its parent resolved and confined, its last component kept as named
        (an operation on a symlink itself: lstat, unlink, rename)."""
        head, name = os.path.split(given.rstrip(os.sep) or given)
        if name in ("", ".", ".."):
            return self.resolve(given)
        parent = self.resolve(head) if head else self.resolve(".")
        return parent / name

    def _locate(self, real: str | Path, given: str) -> tuple[str, list[str]]:
        """The root holding ``real`` and the components below it (no '..', by construction of
        resolve; refused otherwise)."""
        text = os.fspath(real)
        key = os.path.normcase(text)
        for (k, prefix), root in zip(self._keys, self.roots):
            if key == k:
                return str(root), []
            if key.startswith(prefix):
                parts = [p for p in text[len(prefix):].split(os.sep) if p and p != "."]
                if ".." in parts:
                    break
                return str(root), parts
        self._refuse(given)
        raise AssertionError  # unreachable: _refuse raises

    def _parent_fd(self, real: str | Path, given: str, refuse: bool = True) -> Any:
        """Context manager: (descriptor of the parent directory, last component) for a path
        inside a root, each directory opened relative to the previous with O_NOFOLLOW; the last
        component is None for a root itself."""
        return _Walk(self, real, given, parent=True, refuse=refuse)

    def _dir_fd(self, real: str | Path, given: str) -> Any:
        """Context manager: a descriptor of the directory ``real`` itself, walked as above."""
        return _Walk(self, real, given, parent=False, refuse=True)

    def _os_error(self, exc: OSError, given: str) -> Exception:
        """What an operation's OSError means for the caller."""
        if exc.errno == errno.ENXIO:  # a FIFO without reader, opened for writing without blocking
            try:
                self._refuse(given, "is not a regular file (a FIFO, socket or device is never opened)")
            except ToolError as refusal:
                return refusal
        if exc.errno in _NOFOLLOW_ERRNOS:
            try:
                self._refuse(given)  # a component was swapped for a symlink after the check
            except ToolError as refusal:
                return refusal
        if isinstance(exc, FileNotFoundError):
            return ToolError(
                f"Path {_show(given)} (or its parent directory) does not exist.",
                code=E_NOT_FOUND,
                details={"path": given},
                suggested_fix="Check the name, or create the parent directory first.",
            )
        if isinstance(exc, PermissionError):
            return ToolError(
                f"The server may not open {_show(given)}.",
                code=E_PERMISSION_DENIED,
                details={"path": given},
                suggested_fix="Choose a file the server can access.",
            )
        return exc

    @staticmethod
    def _pattern(pattern: object) -> list[str]:
        if not isinstance(pattern, str) or not pattern or "\0" in pattern:
            raise ToolError("A glob pattern must be a non-empty string without NUL characters.",
                            code=E_SCHEMA_VALIDATION, details={"pattern": repr(pattern)},
                            suggested_fix="Pass a pattern such as '*.py' or 'src/**/*.md'.")
        parts = [p for p in pattern.replace(os.sep, "/").split("/") if p not in ("", ".")]
        if os.path.isabs(pattern) or pattern.startswith(("/", os.sep)) or ".." in parts or not parts:
            raise ToolError(
                f"Glob pattern {_show(pattern)} leaves the directory it applies to.",
                code=E_PERMISSION_DENIED,
                details={"pattern": pattern},
                suggested_fix="Use a relative pattern without '..' (e.g. '*.py', 'src/**/*.md'); "
                              "to look elsewhere, change the directory instead.",
            )
        return parts

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


class _Walk:
    """The descriptor walk of a path inside a root (see Sandbox._parent_fd, _dir_fd)."""

    __slots__ = ("_sandbox", "_real", "_given", "_parent", "_refuse", "_fd")

    def __init__(self, sandbox: Sandbox, real: str | Path, given: str, *, parent: bool, refuse: bool) -> None:
        self._sandbox, self._real, self._given = sandbox, real, given
        self._parent, self._refuse = parent, refuse
        self._fd = -1

    def __enter__(self) -> Any:
        root, parts = self._sandbox._locate(self._real, self._given)
        name = None
        if self._parent and parts:
            parts, name = parts[:-1], parts[-1]
        if not _AT:
            raise NotImplementedError("descriptor-relative file operations need openat (POSIX)")
        fd = os.open(root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        try:
            for part in parts:
                fd = _step(fd, part)
        except OSError as exc:
            if self._refuse:
                raise self._sandbox._os_error(exc, self._given) from None
            raise
        self._fd = fd
        return (fd, name) if self._parent else fd

    def __exit__(self, *exc: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _step(fd: int, name: str) -> int:
    """Open directory ``name`` relative to ``fd`` without following a symlink; closes ``fd``
    (also when the open fails)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)


def _open_flags(mode: str) -> int:
    """os.open flags for an open() mode; never O_TRUNC (Sandbox.open truncates after its checks)."""
    plus = "+" in mode
    if "r" in mode:
        flags = os.O_RDWR if plus else os.O_RDONLY
    elif "w" in mode:
        flags = (os.O_RDWR if plus else os.O_WRONLY) | os.O_CREAT
    elif "x" in mode:
        flags = (os.O_RDWR if plus else os.O_WRONLY) | os.O_CREAT | os.O_EXCL
    elif "a" in mode:
        flags = (os.O_RDWR if plus else os.O_WRONLY) | os.O_CREAT | os.O_APPEND
    else:
        raise ValueError(f"invalid mode: {mode!r}")
    # O_NONBLOCK: opening a FIFO must not hang the call (Sandbox.open refuses it, then blocks)
    return flags | _O_NOFOLLOW | _O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


def _match(fd: int, parts: list[str], prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """Relative names under directory ``fd`` matching the pattern ``parts``; subdirectories are
    entered with O_NOFOLLOW (a symlinked directory is matched as an entry, never descended)."""
    from fnmatch import fnmatchcase

    head, rest = parts[0], parts[1:]
    if head == "**":
        if rest:
            yield from _match(fd, rest, prefix)  # zero directories
        else:
            yield prefix  # '**' alone: this directory and every one below it (as pathlib)
        for name, is_dir in _subdirs(fd):
            if not is_dir:
                continue
            sub = _enter(fd, name)
            if sub < 0:
                continue
            try:
                yield from _match(sub, parts, (*prefix, name))
            finally:
                os.close(sub)
        return
    magic = not _GLOB_MAGIC.isdisjoint(head)
    names = [n for n in _entries(fd) if fnmatchcase(n, head)] if magic else [head]
    for name in names:
        if not rest:
            if magic or _exists(fd, name):
                yield (*prefix, name)
            continue
        sub = _enter(fd, name)
        if sub < 0:
            continue
        try:
            yield from _match(sub, rest, (*prefix, name))
        finally:
            os.close(sub)


def _entries(fd: int) -> list[str]:
    return os.listdir(fd)


def _subdirs(fd: int) -> list[tuple[str, bool]]:
    with os.scandir(fd) as it:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]


def _enter(fd: int, name: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError:
        return -1  # not a directory, a symlink, gone: nothing to match below it


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
        return True
    except OSError:
        return False
