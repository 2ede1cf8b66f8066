"""The lines of glue each seed port needs, counted by one rule, for README's seed table.

    python tools/seed_lines.py                  # print the table
    python tools/seed_lines.py --write README.md
    python tools/seed_lines.py --check README.md   # exit 1 when the table is stale (tests/test_seed_lines.py)

The rule, for a seed's Python file:

- a *code line* is a line that is not blank, not only a comment, and not part of a docstring
  (of the module, a class or a function);
- a *handler* is a function (``def`` or ``async def``, at any depth) with a decorator named
  ``tool``, ``action``, ``resource``, ``resource_template`` or ``prompt`` (``@server.tool``,
  ``@scene.action(...)``): its decorators, signature and body are the tool itself, what the
  original server had too;
- the *glue* is every other code line: imports, configuration, the bridge, API client, server
  and manager declarations, helpers, the ``__main__`` block.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (seed, its file): the three servers ported onto mcpkit (docs/examples/)
SEEDS = (
    ("Godot editor server", "examples/godot/server.py"),
    ("Unity editor bridge", "examples/unity_bridge.py"),
    ("Canvelete design API", "examples/design_api.py"),
)
HANDLER_DECORATORS = frozenset({"tool", "action", "resource", "resource_template", "prompt"})
BEGIN = "<!-- seed-lines: begin (python tools/seed_lines.py --write README.md) -->"
END = "<!-- seed-lines: end -->"


def _decorator_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def count(path: Path) -> dict[str, int]:
    """``lines``, ``code``, ``handlers`` (code lines of handlers) and ``glue`` of one file."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    docstrings: set[int] = set()
    handlers: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _decorator_name(d) in HANDLER_DECORATORS for d in node.decorator_list):
            start = min(d.lineno for d in node.decorator_list)
            handlers.update(range(start, (node.end_lineno or node.lineno) + 1))
    code = {n for n, line in enumerate(source.splitlines(), 1)
            if line.strip() and not line.strip().startswith("#") and n not in docstrings}
    return {"lines": len(source.splitlines()), "code": len(code), "handlers": len(code & handlers),
            "glue": len(code - handlers)}


def table() -> str:
    rows = ["| seed | file | lines | code lines | tool code | glue |", "|---|---|---|---|---|---|"]
    for seed, rel in SEEDS:
        c = count(ROOT / rel)
        rows.append(f"| {seed} | [`{rel}`]({rel}) | {c['lines']} | {c['code']} | {c['handlers']} | **{c['glue']}** |")
    return "\n".join(rows)


def _replaced(text: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"seed_lines: the document has no {BEGIN!r} ... {END!r} markers")
    return text[:start + len(BEGIN)] + "\n" + table() + "\n" + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="DOC", type=Path, help="rewrite the table between the markers of DOC")
    group.add_argument("--check", metavar="DOC", type=Path, help="exit 1 when DOC's table is not the current one")
    args = parser.parse_args(argv)
    if args.write is None and args.check is None:
        print(table())
        return 0
    doc = args.write or args.check
    text = doc.read_text(encoding="utf-8")
    new = _replaced(text)
    if args.write is not None:
        doc.write_text(new, encoding="utf-8")
        return 0
    if new != text:
        print(f"{doc}: the seed table is stale; run python tools/seed_lines.py --write {doc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
