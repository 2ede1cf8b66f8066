"""The optional dependencies: every import of one names its extra when it is missing (_extras.py).

tests/test_core_install.py runs the commands in an install without any extra; these check the
rules that make that hold for every path, not only the commands it runs.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

from mcpkit._extras import EXTRAS, MissingExtra, needs, require
from mcpkit.errors_cli import explain

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "mcpkit"
#: what `pip install mcpkit` installs (pyproject.toml's dependencies), and mcpkit itself
CORE = {"mcpkit", "orjson", "jsonschema_rs", "yaml", "__future__"}


def _imports_outside_needs(path: Path) -> list[str]:
    """``line: module`` for each import of a package that is neither the standard library's nor
    the core's, made outside a ``with needs(...)`` block (``if TYPE_CHECKING:`` never runs)."""
    found: list[str] = []

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child, guarded)
            return
        if isinstance(node, ast.With | ast.AsyncWith) and any(
                isinstance(item.context_expr, ast.Call)
                and ast.unparse(item.context_expr.func).split(".")[-1] == "needs" for item in node.items):
            guarded = True
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        for name in names:
            top = name.split(".")[0]
            if not guarded and top not in sys.stdlib_module_names and top not in CORE:
                found.append(f"{path}:{node.lineno}: {name}")
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def test_every_import_of_an_optional_package_names_its_extra():
    # `import h11` at the top of transports/connections.py was "unexpected error:
    # ModuleNotFoundError: No module named 'h11'" and exit 1 in an install without mcpkit[http]
    outside = [line for path in sorted(SRC.rglob("*.py")) for line in _imports_outside_needs(path)]
    assert outside == [], "optional packages imported outside _extras.needs(...):\n" + "\n".join(outside)


def test_the_walk_sees_an_unguarded_import(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text("import httpx\nfrom mcpkit._extras import needs\nwith needs('client', 'x'):\n"
                      "    import httpx as h\ndef f():\n    from redis import Redis\n")
    assert [line.split(": ", 1)[1] for line in _imports_outside_needs(module)] == ["httpx", "redis"]


def test_the_extras_table_is_pyprojects():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    declared.pop("dev")
    assert set(EXTRAS) == set(declared)
    for extra, spec in EXTRAS.items():
        names = {requirement.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower()
                 for requirement in declared[extra]}
        assert {distribution.lower() for _, distribution in spec.packages} == names, extra


def test_a_missing_package_names_the_extra_and_what_needs_it():
    with pytest.raises(MissingExtra) as info, needs("http", "serving HTTP"):
        import mcpkit_test_no_such_module  # noqa: F401
    # uvicorn is installed here: the module that is missing is named, with the extra to reinstall
    assert str(info.value) == ("serving HTTP needs mcpkit_test_no_such_module, which is not installed: "
                               "pip install 'mcpkit[http]'")
    assert info.value.extras == ("http",)
    assert explain(info.value) == str(info.value)


def test_a_package_that_does_not_import_is_named_with_its_error(monkeypatch):
    with pytest.raises(MissingExtra) as info, needs("otel", "--otel"):
        raise ImportError("blocked")
    assert str(info.value) == "--otel needs opentelemetry-api, which cannot be imported (blocked): pip install " \
                              "'mcpkit[otel]'"


def test_mcpkits_own_missing_module_is_a_bug_not_an_extra():
    with pytest.raises(ModuleNotFoundError) as info, needs("http", "serving HTTP"):
        import mcpkit.no_such_module  # noqa: F401
    assert not isinstance(info.value, MissingExtra)


def test_require_names_every_missing_extra_in_one_line(monkeypatch):
    import importlib

    real = importlib.import_module

    def fake(name: str, *args: object) -> object:
        if name in ("uvicorn", "prometheus_client"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", fake)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingExtra) as info:
        require(("--http", "http"), ("--metrics", "metrics"), ("--otel", "otel"))
    assert str(info.value) == ("--http and --metrics need uvicorn and prometheus-client, which are not installed: "
                               "pip install 'mcpkit[http,metrics]'")


@pytest.mark.parametrize(("module", "extra"), [("re2", "regex"), ("pydantic.main", "pydantic"), ("httpx", "client")])
def test_a_server_importing_a_package_of_an_extra_is_told_the_extra(module, extra):
    # a server's own `import re2` (examples/workspace.py) was an "unexpected error", exit 1
    line = explain(ModuleNotFoundError(f"No module named {module!r}", name=module))
    assert line == f"{module} is not installed: pip install 'mcpkit[{extra}]'"
