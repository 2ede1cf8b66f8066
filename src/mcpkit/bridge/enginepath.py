"""``EnginePath``: a declared parameter type for engine paths, resolved, confined and audited.

    projects = Projects(roots, EnginePaths.godot(), argument="projectPath", default=editor_project)
    server.add_middleware(projects)                       # picks each call's project, once

    Scene = engine_path(scheme="res://", suffix=".tscn")

    @server.tool
    async def open_scene(path: Scene, projectPath: str | None = None) -> dict:
        path.uri, path.project.root, path.read_text()     # "res://levels/one.tscn", the real file

The client sends a string (the inputSchema says ``type: string``). Before the handler runs it
becomes an :class:`EngineFile`: the real path the engine path names inside the call's project
(a :class:`mcpkit.policy.ConfinedPath`, so its file operations go through the project's sandbox
too), with ``.uri`` (the canonical engine path) and ``.project``. What is refused, as
:meth:`Project.resolve` refuses it (TL-11, RT-03): ``..`` or a symlink out of the scheme's
directory and absolute paths (E_PERMISSION_DENIED), the server's own directories
(``.godot_mcp``), a path without a known prefix, another ``scheme`` than declared or another
``suffix`` (E_SCHEMA_VALIDATION), a missing file with ``must_exist`` (E_NOT_FOUND).

The project is picked once per call by the :class:`Projects` middleware, by the rule of
bridge/paths.py (the named ``argument``, else the open project, else the only one, else the
client's roots), before any argument is bound; a handler that needs the project without a path
reads :meth:`Projects.current`. A server of one project gives it as the only root, or as
``default`` (the project an editor has open).

Audit: every engine path bound in a call is listed in its audit line as ``paths``, the engine
path the client sent beside the real path it resolved to (``null`` when refused), with the
project's root as ``project``; :class:`ProjectAudit` writes the line into that project.
"""

from __future__ import annotations

import contextvars
import inspect
import pathlib
import typing
from typing import Annotated, Any

from ..policy.paths import ConfinedPath
from ..protocol.errors import E_INTERNAL, E_SCHEMA_VALIDATION, ToolError
from .paths import CURRENT_PROJECT, Project, Projects

__all__ = ["EngineFile", "EnginePath", "engine_path", "picking"]

#: the call's audit record of bound paths (a list the middleware put in ``cc.state["audit"]``)
_BOUND: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar("mcpkit_engine_paths",
                                                                                      default=None)


class EngineFile(ConfinedPath):
    """The real path an engine path names inside a project; ``uri`` and ``project`` say which."""

    @property
    def project(self) -> Project:
        return self._box().project  # type: ignore[no-any-return]

    @property
    def uri(self) -> str:
        """The canonical engine path (``res://a/../b.tscn`` -> ``res://b.tscn``)."""
        return self.project.uri(self)

    def glob(self, pattern: str) -> Any:  # type: ignore[override]
        """Project.glob under this directory: the server's own and dot-folders left out."""
        project = self.project
        return [_file(project, uri, project.resolve(uri)) for uri in project.glob(pattern, self.uri)]

    def rglob(self, pattern: str) -> Any:  # type: ignore[override]
        return self.glob("**/" + pattern)


class _EngineHook:
    """The ``__mcp_load__`` of an engine path parameter (server/schema.py binds through it)."""

    __slots__ = ("scheme", "suffix", "must_exist")

    def __init__(self, scheme: str | None = None, suffix: str | tuple[str, ...] | None = None,
                 must_exist: bool = False) -> None:
        self.scheme, self.must_exist = scheme, must_exist
        self.suffix = (suffix,) if isinstance(suffix, str) else suffix

    def __repr__(self) -> str:
        return f"engine_path(scheme={self.scheme!r}, suffix={self.suffix!r}, must_exist={self.must_exist})"

    def __mcp_load__(self, value: Any) -> EngineFile:
        bound = _BOUND.get()
        record: dict[str, Any] = {"engine": value if isinstance(value, str) else repr(value)[:160], "resolved": None}
        if bound is not None:
            bound.append(record)  # a refused path is evidence too: it stays with resolved null
        project = CURRENT_PROJECT.get()
        if project is None:
            raise ToolError("No project was picked for this engine path.", code=E_INTERNAL,
                            suggested_fix="The server's author must add its Projects as middleware "
                            "(server.add_middleware(projects)).")
        if self.scheme is not None and not (isinstance(value, str) and value.startswith(self.scheme)):
            raise ToolError(f"Path {str(value)[:160]!r} must start with {self.scheme}.", code=E_SCHEMA_VALIDATION,
                            details={"path": str(value)[:160]},
                            suggested_fix=f"Use a path such as '{self.scheme}dir/file{(self.suffix or ('',))[0]}'.")
        real = project.resolve(value, must_exist=self.must_exist)
        if self.suffix and not real.name.endswith(self.suffix):
            raise ToolError(f"Path {value[:160]!r} does not end with {' or '.join(self.suffix)}.",
                            code=E_SCHEMA_VALIDATION, details={"path": value[:160]},
                            suggested_fix=f"Name a {' or '.join(self.suffix)} file.")
        record["resolved"] = str(real)
        return _file(project, value, real)


def _file(project: Project, uri: str, real: pathlib.Path) -> EngineFile:
    """``real`` as an EngineFile whose file operations go through the sandbox of ``uri``'s scheme."""
    return EngineFile._make(real, project._box(project.paths.split(uri)[0]))  # type: ignore[no-any-return]


def engine_path(*, scheme: str | None = None, suffix: str | tuple[str, ...] | None = None,
                must_exist: bool = False) -> Any:
    """``Annotated[Path, ...]``: an engine path parameter in the project the call picked,
    limited to one ``scheme`` and ``suffix`` when given; ``must_exist``: E_NOT_FOUND if missing."""
    return Annotated[pathlib.Path, _EngineHook(scheme, suffix, must_exist)]


#: an engine path of any scheme the project's EnginePaths know, in the call's project
EnginePath = engine_path()


def _declares(target: Any, argument: str) -> bool:
    """Whether a tool or action declares an engine path parameter or the project argument."""
    handler = getattr(target, "handler", None)
    try:
        if argument in inspect.signature(handler).parameters:  # type: ignore[arg-type]
            return True
    except (TypeError, ValueError):
        return False  # not a function (a raw tool's callable object): nothing declared
    try:
        hints = typing.get_type_hints(handler, include_extras=True)
    except Exception:  # noqa: BLE001 - e.g. a name imported inside a function: look at each annotation
        hints = {}
    for hint in hints.values():
        if any(isinstance(meta, _EngineHook) for meta in getattr(hint, "__metadata__", ())):
            return True
    return False


async def picking(projects: Projects, cc: Any, call_next: Any) -> Any:
    """Projects' middleware hook: pick the project of a call that needs one, then bind and run."""
    target = cc.target
    key = getattr(target, "handler", None)
    wants = projects._wants.get(key)
    if wants is None:
        wants = projects._wants[key] = _declares(target, projects.argument)
    if not wants:
        return await _passed(call_next(cc))
    named = cc.arguments.get(projects.argument) if isinstance(cc.arguments, dict) else None
    project = projects.find(named) if isinstance(named, str) and named else projects.default()
    if project is None:
        # the client's roots (RT-01) are asked only when nothing else decides
        project = await projects.pick(cc.session.context(cc.request), None)
    bound: list[dict[str, Any]] = []
    cc.state["audit"] = {"project": str(project.root), "paths": bound}
    # reset after: a nested ctx.call_tool must not change the project of the call around it
    tokens = CURRENT_PROJECT.set(project), _BOUND.set(bound)
    try:
        return await _passed(call_next(cc))  # the arguments are bound in there, in this task
    finally:
        CURRENT_PROJECT.reset(tokens[0])
        _BOUND.reset(tokens[1])


async def _passed(out: Any) -> Any:
    return await out if inspect.isawaitable(out) else out
