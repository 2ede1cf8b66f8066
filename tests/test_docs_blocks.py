"""Every fenced block of README.md and docs/**/*.md, run as a reader would run it.

One test per block, named by its file and the line of its opening fence (``README.md:49``).

What runs, in a fresh directory holding a copy of ``examples/`` and the document's ``file=``
blocks, with ``HOME`` inside it (``mcpkit install ... --write`` writes there), no ``MCPKIT_*``
variables and stdin closed (a stdio server reads end of file and stops):

- a ``python`` block: saved to a file and run with ``python FILE``;
- a ``sh`` (``bash``, ``shell``) block: each command line, ``\\``-continued lines joined, run
  with bash; a ``console`` block: the same for the lines after ``$ `` (the rest is output).
  ``python`` and ``mcpkit`` are the interpreter running the tests and its ``-m mcpkit``.

Each must exit 0 within 30 s. What does not run is said on the fence's info string, after
the language: GitHub and other renderers read only the first word, so none of it shows.

- ``test="skip" reason="..."``: the block is not run (a fragment, an output sample, JSON, a
  configuration file, a command that needs a real Claude Desktop, a remote ``npx`` package or a
  fixed port). Any block that is neither ``python`` nor a shell block needs it.
- ``skip="TEXT" reason="..."`` (``skip`` may repeat): in a shell block, the commands containing
  TEXT are not run; each TEXT must match one.
- ``file="NAME"``: a python block that is also the file NAME for the document's other blocks
  (README's ``weather.py`` is its "Ten lines" block); it runs as ``python NAME``.

A block neither run nor marked fails, so a new page cannot skip silently.

The fences are found by markdown-it-py, the CommonMark parser: fences inside list items, tildes
and longer fences are found where GitHub finds them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import site
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

PYTHON = {"python", "py", "python3"}
SHELL = {"sh", "bash", "shell", "console"}
ATTRIBUTES = {"test", "reason", "skip", "file"}
#: for each command or script (they take well under 3 s): a server left serving fails in time
TIMEOUT = 30.0


@dataclass
class Block:
    doc: Path
    line: int  # the opening fence's line, 1-based
    lang: str
    text: str
    attrs: dict[str, list[str]] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT).as_posix()}:{self.line}"

    def attr(self, name: str) -> str | None:
        values = self.attrs.get(name)
        return values[-1] if values else None


def blocks_of(doc: Path, text: str | None = None) -> list[Block]:
    """The fenced blocks of one Markdown file, with the attributes of their info strings."""
    source = doc.read_text(encoding="utf-8") if text is None else text
    blocks = []
    for token in MarkdownIt("commonmark").parse(source):
        if token.type != "fence" or token.map is None:
            continue
        block = Block(doc, token.map[0] + 1, "", token.content)
        try:
            words = shlex.split(token.info)
        except ValueError as exc:  # an unbalanced quote: reported by check_marks
            block.attrs["?"] = [f"{token.info!r}: {exc}"]
            words = token.info.split()[:1]
        if words:
            block.lang = words[0].lower()
        for word in words[1:]:
            key, _, value = word.partition("=")
            block.attrs.setdefault(key, []).append(value)
        blocks.append(block)
    return blocks


def commands(block: Block) -> list[tuple[int, str]]:
    """A shell block's command lines as (line in the file, command), continuations joined."""
    out: list[tuple[int, str]] = []
    start, pending = 0, ""
    for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
        if not pending:
            if block.lang == "console":
                if not line.startswith("$ "):
                    continue  # output, or a comment between commands
                line = line[2:]
            elif not line.strip() or line.lstrip().startswith("#"):
                continue
            start = number
        pending += line
        if line.rstrip().endswith("\\"):
            pending += "\n"
            continue
        out.append((start, pending))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def check_marks(block: Block) -> list[str]:
    """What is wrong with a block's marks; empty when it runs or is skipped as the convention says."""
    problems = [f"cannot read the info string {v}" for v in block.attrs.get("?", [])]
    unknown = sorted(set(block.attrs) - ATTRIBUTES - {"?"})
    if unknown:
        problems.append(f"unknown attribute(s) {', '.join(unknown)} (known: {', '.join(sorted(ATTRIBUTES))})")
    test, reason = block.attr("test"), block.attr("reason")
    if test is not None and test != "skip":
        problems.append(f'test="{test}": the only value is test="skip"')
    if (test is not None or "skip" in block.attrs) and not reason:
        problems.append('say why it is not run: reason="..."')
    if "skip" in block.attrs:
        if block.lang not in SHELL:
            problems.append('skip="TEXT" picks commands of a shell block; skip a whole block with test="skip"')
        else:
            lines = [cmd for _, cmd in commands(block)]
            for text in block.attrs["skip"]:
                if not text or not any(text in cmd for cmd in lines):
                    problems.append(f'skip="{text}" matches no command of the block')
            if lines and all(any(t in cmd for t in block.attrs["skip"]) for cmd in lines):
                problems.append('every command is skipped: mark the block test="skip"')
    if "file" in block.attrs and (block.lang not in PYTHON or not block.attr("file")):
        problems.append('file="NAME" names the file a python block is saved as')
    if test is None and block.lang not in PYTHON | SHELL:
        problems.append(f"a {block.lang or 'plain'} block does not run: "
                        'mark it test="skip" reason="..." (see tests/test_docs_blocks.py)')
    if test is None and block.lang in SHELL and not commands(block):
        problems.append('a shell block with no command: mark it test="skip" reason="..."')
    return problems


ALL = [block for doc in DOCS for block in blocks_of(doc)]
#: the blocks to run, and those whose marks are wrong (their test says what is wrong); a block
#: marked test="skip" as the convention says is no test at all, so a run's summary is not a list
#: of every output sample in the docs
TESTED = [block for block in ALL if block.attr("test") != "skip" or check_marks(block)]


# ------------------------------------------------------------------------------------ the reader's place


def reader_dir(tmp: Path, doc: Path) -> dict[str, str]:
    """``tmp`` made the directory a reader of ``doc`` works in; the environment of their shell."""
    shutil.copytree(ROOT / "examples", tmp / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    for block in ALL:
        name = block.attr("file")
        if block.doc == doc and name:
            (tmp / name).write_text(block.text, encoding="utf-8")
    bin_dir = tmp / ".bin"
    bin_dir.mkdir()
    # `python` and `mcpkit` are the interpreter under test (shims, not symlinks: a venv's python
    # finds its site-packages from where it is)
    for name, argv in (("python", [sys.executable]), ("mcpkit", [sys.executable, "-m", "mcpkit"])):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n')
        shim.chmod(0o755)
    (tmp / ".home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPKIT_", "XDG_"))}
    env["PYTHONUSERBASE"] = site.getuserbase()  # HOME moves; the user's site-packages stay
    env["HOME"] = str(tmp / ".home")
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    return env


def run(argv: list[str], cwd: Path, env: dict[str, str], where: str, shown: str) -> None:
    # a group of its own: a timed-out command is killed with whatever it started
    with subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
            outcome = f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            outcome = f"still running after {TIMEOUT:.0f} s"
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # nothing it started outlives it
        except ProcessLookupError:
            pass
    if outcome != "exit 0":
        pytest.fail(f"{where}: {outcome}\n$ {shown}\n--- stdout\n{out}\n--- stderr\n{err}", pytrace=False)


# ----------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("block", [pytest.param(b, id=b.where) for b in TESTED])
def test_block(block: Block, tmp_path: Path) -> None:
    problems = check_marks(block)
    if problems:
        pytest.fail(f"{block.where}: " + "; ".join(problems), pytrace=False)
    env = reader_dir(tmp_path, block.doc)
    if block.lang in PYTHON:
        name = block.attr("file") or f"{block.doc.stem}_{block.line}.py"
        (tmp_path / name).write_text(block.text, encoding="utf-8")
        run([sys.executable, name], tmp_path, env, f"{block.where} (its first line is line {block.line + 1})",
            f"python {name}")
        return
    skipped = block.attrs.get("skip", [])
    for line, command in commands(block):
        if not any(text in command for text in skipped):
            run(["bash", "-c", command], tmp_path, env, f"{block.doc.relative_to(ROOT).as_posix()}:{line}", command)


def test_the_convention_catches_unmarked_and_stale_marks() -> None:
    """The collector itself: what fails, what is skipped, which lines a shell block runs."""
    doc = ROOT / "README.md"
    text = "\n".join([
        "```json", "{}", "```",
        '```json test="skip" reason="a sample"', "{}", "```",
        '```sh skip="serve" reason="waits"', "mcpkit list a.py   # tools", "mcpkit serve --http x \\", "  --json",
        "# a comment", "```",
        "```console", "# what it prints", "$ mcpkit list a.py", "Tools (1)", "```",
        '```sh skip="nothing" reason="stale"', "mcpkit list a.py", "```",
        '- in a list', '  ```python file="w.py"', "  print(1)", "  ```",
        '```python skip="x" reason="y"', "pass", "```",
    ])
    unmarked, sample, shell, console, stale, listed, wrong = blocks_of(doc, text)
    assert "does not run" in check_marks(unmarked)[0]
    assert check_marks(sample) == [] and sample.attr("reason") == "a sample"
    assert commands(shell) == [(8, "mcpkit list a.py   # tools"), (9, "mcpkit serve --http x \\\n  --json")]
    assert check_marks(shell) == []
    assert commands(console) == [(15, "mcpkit list a.py")]
    assert check_marks(stale) == ['skip="nothing" matches no command of the block']
    assert (listed.lang, listed.line, listed.attr("file"), listed.text) == ("python", 22, "w.py", "print(1)\n")
    assert any("shell block" in p for p in check_marks(wrong))
