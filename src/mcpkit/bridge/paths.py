"""Engine paths: ``res://``, ``user://`` (Godot) and ``Assets/`` (Unity), inside a project root.

    projects = Projects(["/srv/games"], EnginePaths.godot(), argument="projectPath")

    @server.tool
    async def open_scene(scene: str, ctx: Context, projectPath: str | None = None) -> dict:
        proj = await projects.pick(ctx, projectPath)
        path = proj.resolve(scene, must_exist=True)   # a real Path inside the project
        uri = proj.uri(path)                          # "res://levels/one.tscn", normalised

(or, declared: ``scene: EnginePath`` with ``server.add_middleware(projects)``; bridge/enginepath.py).

An engine names files by its own URIs, relative to the project. A model may write
``res://../../etc/passwd`` or ``Assets/../../secrets``: every such path is resolved to a real
path (``..`` and symlinks followed) and must stay under the directory its scheme maps to, or the
call is refused with E_PERMISSION_DENIED (TL-11, RT-03). The checks are
:class:`mcpkit.policy.Sandbox`'s, one sandbox per scheme root. Directories the server keeps for
itself (``hidden``, e.g. ``.godot_mcp`` with the audit trail) are refused too, and
:meth:`Project.glob` lists neither them nor, unless asked, other dot-folders (``.git``).

The project of a call is picked per call (:meth:`Projects.pick`), in this order:

1. the one the caller names in the ``argument`` (``project`` by default; ``projectPath`` for
   the godot-mcp contract): inside one of the allowed roots, carrying the engine's marker
   file (e.g. ``project.godot``);
2. else ``default``, the project the editor has open, when the server was given one;
3. else the only project the allowed roots hold (a root that is a project, or the one project
   directly inside the roots);
4. else the one the client's ``roots/list`` offers (RT-01), where it offers exactly one;
5. else E_SCHEMA_VALIDATION naming the argument the client should send.
"""

from __future__ import annotations

import contextvars
import inspect
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..policy.sandbox import Sandbox
from ..protocol.errors import E_NOT_FOUND, E_PERMISSION_DENIED, E_SCHEMA_VALIDATION, ToolError

__all__ = ["CURRENT_PROJECT", "EnginePaths", "Project", "Projects", "ProjectBox"]

#: the project the running call picked (read by ProjectAudit when the arguments do not say)
CURRENT_PROJECT: contextvars.ContextVar[Project | None] = contextvars.ContextVar("mcpkit_project", default=None)


@dataclass(frozen=True)
class EnginePaths:
    """How an engine names a project's files: URI prefix -> directory under the project root.

    ``marker`` is the file (relative to the root) that makes a directory a project;
    ``hidden`` are top-level directories no path may reach.
    """

    schemes: Mapping[str, str]
    marker: str | None = None
    hidden: Sequence[str] = ()

    @classmethod
    def godot(cls, *, user_dir: str = ".godot_mcp/user", hidden: Sequence[str] = (".godot_mcp", ".import")) -> EnginePaths:
        """``res://`` is the project root; ``user://`` a directory under it (Godot's own lives in
        the user's data directory, which a server should not hand out)."""
        return cls({"res://": ".", "user://": user_dir}, marker="project.godot", hidden=hidden)

    @classmethod
    def unity(cls, *, hidden: Sequence[str] = ("Library", "Temp", ".mcp")) -> EnginePaths:
        """``Assets/`` and ``Packages/`` of a Unity project."""
        return cls({"Assets/": "Assets", "Packages/": "Packages"},
                   marker="ProjectSettings/ProjectVersion.txt", hidden=hidden)

    def split(self, uri: str) -> tuple[str, str]:
        """(prefix, rest) of ``uri`` by its longest matching prefix; E_SCHEMA_VALIDATION if none."""
        if not isinstance(uri, str) or not uri or "\0" in uri:
            raise ToolError("An engine path must be a non-empty string.", code=E_SCHEMA_VALIDATION,
                            details={"path": uri if isinstance(uri, str) else repr(uri)},
                            suggested_fix=f"Use a path such as {self._example()}.")
        for prefix in sorted(self.schemes, key=len, reverse=True):
            if uri.startswith(prefix) or uri == prefix.rstrip("/"):
                return prefix, uri[len(prefix):]
        raise ToolError(f"Path {uri[:160]!r} does not start with {' or '.join(self.schemes)}.",
                        code=E_SCHEMA_VALIDATION, details={"path": uri[:160]},
                        suggested_fix=f"Name project files by their engine path, e.g. {self._example()}.")

    def _example(self) -> str:
        return repr(next(iter(self.schemes)) + "scenes/main.tscn")


class Project:
    """One project root and its engine paths."""

    def __init__(self, root: str | os.PathLike[str], paths: EnginePaths) -> None:
        self.root = Path(os.path.realpath(root))
        if not self.root.is_dir():
            raise ValueError(f"project root {str(root)!r} is not a directory")
        self.paths = paths
        self._boxes: dict[str, Sandbox] = {}

    def __repr__(self) -> str:
        return f"Project({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Project) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def _box(self, prefix: str) -> ProjectBox:
        box = self._boxes.get(prefix)
        if box is None:
            base = self.root / self.paths.schemes[prefix]
            base.mkdir(parents=True, exist_ok=True)  # e.g. user:// on first use
            box = self._boxes[prefix] = ProjectBox([base], project=self)
        return box

    def glob(self, pattern: str, under: str | None = None, *, hidden: bool = False) -> list[str]:
        """The engine paths under ``under`` (the first scheme's root by default) matching
        ``pattern`` (``*``, ``**``; the sandbox's confined glob, which never enters a symlinked
        directory). Nothing in the server's own directories (``hidden``: ``.godot_mcp`` holds
        the audit trail) is listed; dot-folders and dot-files (``.git``) only with ``hidden=True``."""
        under = under or next(iter(self.paths.schemes))
        base = self.resolve(under, must_exist=True)
        found = []
        for path in self._box(self.paths.split(under)[0]).glob(base, pattern):
            parts = path.relative_to(base).parts  # user:// lives in .godot_mcp: judged from its own root
            if any(p in self.paths.hidden for p in parts) or (not hidden and any(p.startswith(".") for p in parts)):
                continue
            try:
                found.append(self.uri(path))
            except ValueError:
                continue  # a symlink listed as an entry, leading out of the project: not ours to name
        return found

    def resolve(self, uri: str, *, must_exist: bool = False) -> Path:
        """The real path ``uri`` names inside this project, or ToolError (escape, hidden, missing)."""
        prefix, rest = self.paths.split(uri)
        if rest.startswith(("/", "\\")) or os.path.isabs(rest):
            raise ToolError(f"Path {uri[:160]!r} is absolute after {prefix}; engine paths are relative.",
                            code=E_PERMISSION_DENIED, details={"path": uri[:160]},
                            suggested_fix=f"Write it as {prefix}dir/file.")
        try:
            real = self._box(prefix).resolve(rest or ".", must_exist=must_exist)
        except ToolError as exc:
            exc.details = {"path": uri[:160]}
            exc.message = exc.message.replace(repr(rest or "."), repr(uri[:160]))
            raise
        inside = real.relative_to(self.root).parts
        own = Path(self.paths.schemes[prefix]).parts  # user:// may live in a hidden directory
        if inside and inside[0] in self.paths.hidden and (not own or own[0] != inside[0]):
            raise ToolError(f"Path {uri[:160]!r} is reserved for the server.", code=E_PERMISSION_DENIED,
                            details={"path": uri[:160]}, suggested_fix="Use a path elsewhere in the project.")
        return real

    def uri(self, path: str | os.PathLike[str]) -> str:
        """The engine path of a real path inside the project (the most specific scheme)."""
        real = Path(os.path.realpath(path))
        best: tuple[int, str] | None = None
        for prefix, sub in self.paths.schemes.items():
            base = (self.root / sub).resolve()
            if real == base or base in real.parents:
                depth = len(base.parts)
                if best is None or depth > best[0]:
                    rel = real.relative_to(base).as_posix()
                    best = (depth, prefix + ("" if rel == "." else rel))
        if best is None:
            raise ValueError(f"{str(path)!r} is not inside project {str(self.root)!r}")
        return best[1]

    def normalize(self, uri: str, *, must_exist: bool = False) -> str:
        """``uri`` checked and in canonical form (``res://a/../b.tscn`` -> ``res://b.tscn``)."""
        return self.uri(self.resolve(uri, must_exist=must_exist))


class ProjectBox(Sandbox):
    """The sandbox of one scheme root of a project; knows its project (EngineFile.uri)."""

    __slots__ = ("project",)

    def __init__(self, roots: Iterable[str | os.PathLike[str]], *, project: Project) -> None:
        super().__init__(roots)
        self.project = project


class Projects:
    """The projects calls may work on: directories under ``roots`` carrying the marker file.

    ``argument`` is the name of the tool argument a client names a project with (``project``;
    ``projectPath`` in the godot-mcp contract); ``default`` the project an editor has open.
    Added as middleware (``server.add_middleware(projects)``), it picks the project of every
    tool call that declares engine paths or takes ``argument`` (bridge/enginepath.py).
    """

    def __init__(self, roots: Iterable[str | os.PathLike[str]], paths: EnginePaths, *, argument: str = "project",
                 default: Project | None = None) -> None:
        self.paths = paths
        self.sandbox = Sandbox(list(roots))
        if not self.sandbox.roots:
            raise ValueError("Projects needs at least one allowed root directory")
        self.argument = argument
        self._default = default
        self._wants: dict[Any, bool] = {}

    @property
    def roots(self) -> tuple[Path, ...]:
        return self.sandbox.roots

    def _is_project(self, path: Path) -> bool:
        return self.paths.marker is None or (path / self.paths.marker).is_file()

    def find(self, name: str) -> Project:
        """The project ``name`` (a path, absolute or relative to the first root), or ToolError."""
        real = self.sandbox.resolve(name, must_exist=True)
        if not real.is_dir() or not self._is_project(real):
            raise ToolError(f"{name[:160]!r} is not a project (no {self.paths.marker}).", code=E_NOT_FOUND,
                            details={self.argument: name[:160]},
                            suggested_fix="Name a project directory inside the allowed roots.")
        return Project(real, self.paths)

    def default(self) -> Project | None:
        """The project a call that names none works on: the editor's (``default=``), else the
        only project the allowed roots hold (a root that is one, or the one directly inside)."""
        if self._default is not None:
            return self._default
        found: set[Path] = set()
        for root in self.roots:
            if self._is_project(root):
                found.add(root)
                continue
            try:
                found.update(d for d in root.iterdir() if d.is_dir() and not d.is_symlink() and self._is_project(d))
            except OSError:
                continue  # an unreadable root holds no project we can use
        return Project(found.pop(), self.paths) if len(found) == 1 else None

    async def pick(self, ctx: Any = None, requested: str | None = None) -> Project:
        """The project of this call, by the rule of the module docstring."""
        project = self.find(requested) if requested else self.default()
        if project is None and ctx is not None:
            project = await self._from_client(ctx)
        if project is None:
            arg = self.argument
            raise ToolError(f"Which project? Name it with the {arg!r} argument.", code=E_SCHEMA_VALIDATION,
                            details={"argument": arg, "allowedRoots": len(self.roots)},
                            suggested_fix=f"Pass {arg}='<directory>' (a project inside the allowed roots).")
        CURRENT_PROJECT.set(project)
        return project

    def current(self) -> Project:
        """The project the running call picked (as middleware, before the handler runs)."""
        project = CURRENT_PROJECT.get()
        if project is None:
            raise RuntimeError("no project was picked for this call: add the Projects as middleware "
                               "(server.add_middleware(projects)) or call projects.pick(ctx, name)")
        return project

    async def on_call_tool(self, cc: Any, call_next: Any) -> Any:
        """As middleware: pick the project of a call that needs one, before its arguments are bound."""
        from .enginepath import picking

        return await picking(self, cc, call_next)

    async def _from_client(self, ctx: Any) -> Project | None:
        """RT-01/RT-03: the client's roots that are projects inside the allowed roots."""
        if "roots" not in (ctx.client_capabilities or {}):
            return None
        try:
            answer = ctx.roots()
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception:  # noqa: BLE001 - a client that cannot answer gives no project
            return None
        found: list[Project] = []
        for root in (answer or {}).get("roots", []):
            uri = root.get("uri") if isinstance(root, dict) else None
            if not isinstance(uri, str) or not uri.startswith("file:"):
                continue
            try:
                found.append(self.find(unquote(urlsplit(uri).path)))
            except ToolError:
                continue  # outside the allowed roots, or not a project: not ours to use
        return found[0] if len(set(found)) == 1 else None
