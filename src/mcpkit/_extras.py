"""The optional dependencies (pyproject.toml's extras), and the one line that names the extra
when a package of one is not installed.

Every import of an optional package is made under :func:`needs`, so that a package that is
missing, or a module it imports in turn (uvicorn's h11), raises :class:`MissingExtra` whose text
is the fix (``... needs uvicorn, which is not installed: pip install 'mcpkit[http]'``), whichever
path reached it. ``mcpkit`` prints that line and exits 2, as ``server.run()`` does;
tests/test_extras.py checks that no import of an optional package escapes :func:`needs`, and
tests/test_core_install.py runs every command that needs an extra in an install without any.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["EXTRAS", "MissingExtra", "extra_of", "needs", "require"]


@dataclass(frozen=True)
class Extra:
    #: (import name, distribution) of each package the extra installs
    packages: tuple[tuple[str, str], ...]
    #: what uses it, as ``mcpkit doctor`` lists it
    used_by: str


#: pyproject.toml's extras (``dev`` aside); tests/test_extras.py checks that the two agree
EXTRAS: dict[str, Extra] = {
    "http": Extra((("uvicorn", "uvicorn"),), "serve --http, dev, proxy --http"),
    # uvicorn picks uvloop and httptools by itself when they are installed; --loop uvloop asks
    "fast": Extra((("uvicorn", "uvicorn"), ("uvloop", "uvloop")), "a faster event loop for serve --http"),
    "client": Extra((("httpx", "httpx"),), "URL targets, proxy of a URL"),
    "bridge": Extra((("httpx", "httpx"),), "mcpkit.bridge.Upstream"),
    "openapi": Extra((("openapi_spec_validator", "openapi-spec-validator"), ("referencing", "referencing"),
                      ("httpx", "httpx")), "server.openapi (tools from an OpenAPI document)"),
    "websocket": Extra((("websockets", "websockets"),), "mcpkit.bridge.WebSocket"),
    "auth": Extra((("jwt", "PyJWT"), ("cryptography", "cryptography")), "--auth jwt"),
    "redis": Extra((("redis", "redis"),), "MCPKIT_STORE=redis://"),
    "reload": Extra((("watchfiles", "watchfiles"),), "dev --reload"),
    "metrics": Extra((("prometheus_client", "prometheus-client"),), "serve --metrics"),
    "otel": Extra((("opentelemetry", "opentelemetry-api"),), "serve --otel"),
    "otel-sdk": Extra((("opentelemetry", "opentelemetry-api"), ("opentelemetry.sdk", "opentelemetry-sdk")),
                      "serve --otel-console"),
    "regex": Extra((("re2", "google-re2"),), "servers matching user-given patterns"),
    "pydantic": Extra((("pydantic", "pydantic"),), "pydantic models"),
    "search": Extra((("bm25s", "bm25s"),), "tool search (Server(tool_search=...), proxy --tool-search)"),
}


class MissingExtra(ModuleNotFoundError):
    """An optional package (or a module it imports) is not installed; the text names the extra
    that installs it. ``extras`` are the extras named, ``name`` the module that failed."""

    def __init__(self, message: str, extras: tuple[str, ...], name: str | None) -> None:
        super().__init__(message, name=name)
        self.extras = extras


def _missing(extra: str) -> list[str]:
    """The distributions of ``extra`` whose package is not installed at all."""
    out = []
    for module, distribution in EXTRAS[extra].packages:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(distribution)
    return out


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _pip(extras: list[str]) -> str:
    return f"pip install 'mcpkit[{','.join(extras)}]'"


def _explained(needed: list[tuple[str, str, ImportError]]) -> MissingExtra:
    """One MissingExtra for every (what, extra, error): the packages not installed, or, for a
    package that is installed and still does not import, the module missing or the error."""
    whats = list(dict.fromkeys(what for what, _, _ in needed))
    extras = list(dict.fromkeys(extra for _, extra, _ in needed))
    absent = list(dict.fromkeys(d for extra in extras for d in _missing(extra)))
    if not absent:  # installed, but a module under it is missing or broken
        exc = needed[0][2]
        absent = [exc.name] if type(exc) is ModuleNotFoundError and exc.name else []
    verb = "needs" if len(whats) == 1 else "need"
    if absent:
        which = "is" if len(absent) == 1 else "are"
        text = f"{_and(whats)} {verb} {_and(absent)}, which {which} not installed: {_pip(extras)}"
    else:
        exc = needed[0][2]
        packages = [d for extra in extras for _, d in EXTRAS[extra].packages]
        text = f"{_and(whats)} {verb} {_and(packages)}, which cannot be imported ({exc}): {_pip(extras)}"
    return MissingExtra(text, tuple(extras), needed[0][2].name)


@contextlib.contextmanager
def needs(extra: str, what: str) -> Iterator[None]:
    """Import an optional package under this: an ImportError becomes a :class:`MissingExtra`
    saying that ``what`` needs ``extra``. A module of mcpkit's own that fails is a bug, and left
    as it is."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    try:
        yield
    except MissingExtra:
        raise
    except ImportError as exc:
        if (exc.name or "").split(".")[0] == "mcpkit":
            raise
        raise _explained([(what, extra, exc)]) from exc


def require(*needed: tuple[str, str]) -> None:
    """Each ``(what, extra)`` (what a command was asked for, the extra it needs): import the
    extra's packages now, and raise one MissingExtra naming every one that is missing, so that a
    command refuses at once, before it starts anything, and names them all in one line."""
    failed: list[tuple[str, str, ImportError]] = []
    for what, extra in needed:
        for module, _ in EXTRAS[extra].packages:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                if (exc.name or "").split(".")[0] == "mcpkit":
                    raise
                failed.append((what, extra, exc))
                break
    if failed:
        raise _explained(failed)


def extra_of(module: str) -> str | None:
    """The extra that installs the top-level package of ``module`` (the first, when several do),
    for a missing module no :func:`needs` explained: one a server's own code imports."""
    top = module.split(".")[0]
    for name, extra in EXTRAS.items():
        if any(top == package for package, _ in extra.packages):
            return name
    return None
