"""README's seed table: the glue lines of each seed port, counted by tools/seed_lines.py's rule."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "seed_lines.py"


def load_tool() -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("seed_lines", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readmes_seed_table_is_the_current_count() -> None:
    done = subprocess.run([sys.executable, str(TOOL), "--check", str(ROOT / "README.md")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_rule_counts_glue_outside_docstrings_comments_and_handlers(tmp_path: Path) -> None:
    seed = tmp_path / "seed.py"
    seed.write_text(textwrap.dedent('''\
        """A seed.

        Its docstring is not glue.
        """

        import os                                  # glue 1
        from mcpkit import Server                  # glue 2

        # a comment is not glue
        server = Server("s")                       # glue 3
        scene = server.manager("scene")            # glue 4


        def helper(path: str) -> str:              # glue 5: a helper is glue
            """Not glue."""
            return path.strip()                    # glue 6


        @server.tool(read_only=True)
        def read(path: str) -> str:
            """A tool: none of it is glue."""
            return helper(path)


        if os.environ.get("X"):                    # glue 7
            @scene.action(
                destructive=True,
            )
            async def delete(path: str) -> None:
                await server.forget(path)

        if __name__ == "__main__":                 # glue 8
            server.run()                           # glue 9
    '''))
    counts = load_tool().count(seed)  # type: ignore[attr-defined]
    assert counts == {"lines": 33, "code": 17, "handlers": 8, "glue": 9}


def test_a_stale_table_is_found_and_rewritten(tmp_path: Path) -> None:
    tool = load_tool()
    doc = tmp_path / "README.md"
    doc.write_text(f"# x\n\n{tool.BEGIN}\n| old |\n{tool.END}\n\nafter\n")  # type: ignore[attr-defined]
    check = [sys.executable, str(TOOL), "--check", str(doc)]
    stale = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert stale.returncode == 1 and "--write" in stale.stderr
    subprocess.run([sys.executable, str(TOOL), "--write", str(doc)], check=True, timeout=60)
    assert subprocess.run(check, timeout=60).returncode == 0
    text = doc.read_text()
    assert "| old |" not in text and "examples/godot/server.py" in text and text.endswith("\nafter\n")
