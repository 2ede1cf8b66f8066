"""Layering: protocol <- server <- policy / transports / auth / stores <- cli.

The imports of every module under src/mcpkit are read with ast (function-level imports
included, ``if TYPE_CHECKING:`` blocks left out: they never run), and folded into a graph of
packages. server/ (nor protocol/ or transports/) must not import policy/ (the policy reaches the
server through the pipeline's steps, given by a Policy or by the package root), not even by
name (``importlib.import_module("mcpkit.policy...")``), and no two packages may import each
other, directly or around a loop.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "mcpkit"


#: top-level modules (and the ``mcpkit dev`` command's package) that belong to a layer rather than
#: standing alone
_GROUPS = {"commands": "cli", "cli_auth": "cli", "cli_serving": "cli", "cli_target": "cli", "skills_cli": "cli",
           "__main__": "cli", "publish": "cli", "dev": "cli"}
#: modules of a package that belong to the command line (``mcpkit proxy``'s argument handling)
_MODULE_GROUPS = {"mcpkit.proxy.cli": "cli"}


def _package(module: str) -> str:
    """mcpkit.server.dispatch -> server; mcpkit._json -> _json; mcpkit -> mcpkit (the facade);
    the command-line modules (cli.py, commands.py, publish.py, __main__.py) are one layer, cli."""
    if module in _MODULE_GROUPS:
        return _MODULE_GROUPS[module]
    parts = module.split(".")
    if len(parts) == 1:
        return "mcpkit"
    if not (SRC / parts[1]).is_dir() and not (SRC / f"{parts[1]}.py").is_file():
        return "mcpkit"  # an attribute of the package itself (``from .. import __version__``)
    return _GROUPS.get(parts[1], parts[1])


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every import node except those under ``if TYPE_CHECKING:``."""
    out: list[ast.AST] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def _imports(path: Path) -> list[tuple[str, int]]:
    """The mcpkit modules ``path`` imports at run time, with line numbers."""
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names if alias.name.split(".")[0] == "mcpkit"]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module and node.module.split(".")[0] == "mcpkit":
                    found.append((node.module, node.lineno))
                continue
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            target = ".".join([*base, node.module] if node.module else base)
            if node.module is None:  # from . import x, y: each name may be a submodule
                found += [(f"{target}.{alias.name}", node.lineno) for alias in node.names]
            else:
                found.append((target, node.lineno))
    return found


@functools.lru_cache(maxsize=1)
def _graph() -> dict[str, dict[str, list[str]]]:
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(SRC.rglob("*.py")):
        source = _package(_module_name(path))
        for target, line in _imports(path):
            dest = _package(target)
            if dest != source and dest != "mcpkit":
                graph.setdefault(source, {}).setdefault(dest, []).append(f"{path.relative_to(SRC.parent)}:{line}")
    return graph


#: what finds a module by its name at run time: ``importlib.import_module``, ``__import__``,
#: ``importlib.util.find_spec`` and server.py's ``_entry(module, name)``
_BY_NAME = {"import_module", "__import__", "find_spec", "_entry"}


def _named_imports(path: Path) -> list[tuple[str, int]]:
    """The mcpkit modules ``path`` finds by name (a string) at run time, with line numbers."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        first = node.args[0]
        if called in _BY_NAME and isinstance(first, ast.Constant) and isinstance(first.value, str) and \
                first.value.split(".")[0] == "mcpkit":
            found.append((first.value, node.lineno))
    return found


def _named_edges(package: str, dest: str) -> list[str]:
    return [f"{path.relative_to(SRC.parent)}:{line}" for path in sorted((SRC / package).rglob("*.py"))
            for target, line in _named_imports(path) if _package(target) == dest]


#: the layers below the policy: none of them imports it, statically or by name
_BELOW_POLICY = ("protocol", "server", "transports")


def test_server_does_not_import_policy() -> None:
    edges = [edge for package in _BELOW_POLICY for edge in _graph().get(package, {}).get("policy", [])]
    assert edges == [], "imports policy/ (ask the policy layer through server/pipeline.py): " + ", ".join(edges)


def test_server_does_not_find_policy_by_name() -> None:
    """The policy layer is given (by a Policy, or by the package root through mcpkit/_wiring.py),
    never looked up by its name from below."""
    edges = [edge for package in _BELOW_POLICY for edge in _named_edges(package, "policy")]
    assert edges == [], "finds policy/ by name (take the layer from the Policy, or server/pipeline.py " \
        "policy_layer()): " + ", ".join(edges)


def test_protocol_imports_nothing_above_it() -> None:
    above = {dest: where for dest, where in _graph().get("protocol", {}).items() if not dest.startswith("_")}
    assert above == {}, above


#: cycles known and not yet inverted: hosts.py (what each host accepts) compiles schemas with the
#: server's validator, and the server flattens schemas and warns with hosts.py's knowledge
_KNOWN_CYCLES = [["hosts", "server", "hosts"]]


def test_no_import_cycle_between_packages() -> None:
    graph = _graph()
    cycles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        for dest in graph.get(node, {}):
            if dest in path:
                cycle = path[path.index(dest):] + [dest]
                if min(cycle[:-1]) == cycle[0]:  # each cycle once, from its smallest member
                    cycles.append(cycle)
            else:
                walk(dest, [*path, dest])

    for start in sorted(graph):
        walk(start, [start])
    cycles = [c for c in cycles if c not in _KNOWN_CYCLES]
    described = []
    for cycle in cycles:
        hops = [f"{a} -> {b} ({graph[a][b][0]})" for a, b in zip(cycle, cycle[1:])]
        described.append("; ".join(hops))
    assert cycles == [], "import cycles between packages:\n" + "\n".join(described)


def test_the_walk_sees_imports() -> None:
    """The walker is not blind: it finds known edges, relative and function-level ones included."""
    graph = _graph()
    assert "protocol" in graph["server"]
    assert "server" in graph["policy"]  # policy/chain.py builds on the pipeline
    # the scope step, imported inside McpHttpApp.__init__
    assert "mcpkit.server.scopes" in {target for target, _ in _imports(SRC / "transports" / "http.py")}
    # and by name: server.run() finds the stdio transport when called
    assert _named_edges("server", "transports") != []


#: what building and running steps is made of: the pipeline's (pipeline.py, pipes.py, terminals.py)
_RUNNING = {"chain", "steps_for", "any_async", "hooks_of", "in_worker", "build_pipe", "run_tool", "TERMINALS",
            "TOOL_OUTCOME", "plain_call"}


def test_dispatch_reads_and_the_pipeline_runs() -> None:
    """One owner per stage: server/dispatch.py reads a request, finds its item and asks the item's
    pipe to run it; it neither chains steps nor runs a handler (server/pipes.py, terminals.py do)."""
    path = SRC / "server" / "dispatch.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    imported = {alias.asname or alias.name for node in _runtime_nodes(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                           ast.ClassDef))}
    handlers = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "handler"
                and isinstance(node.ctx, ast.Load)]
    assert imported & _RUNNING == set(), f"dispatch.py builds or runs steps with {sorted(imported & _RUNNING)}"
    assert defined & _RUNNING == set(), f"dispatch.py defines {sorted(defined & _RUNNING)}"
    assert handlers == [], f"dispatch.py runs an item's handler itself (lines {handlers})"
