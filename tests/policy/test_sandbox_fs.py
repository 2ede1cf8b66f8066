"""File operations through a sandbox: glob patterns cannot climb out (hostile review item 8),
a parent directory swapped for a symlink mid-operation fails closed (item 9), and hard links to
outside files are refused (item 19). ``SandboxPath`` values do the same through their own methods.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.policy import Sandbox, confined
from mcpkit.protocol.errors import E_NOT_FOUND, E_PERMISSION_DENIED, ToolError


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    base = tmp_path.resolve()
    root, outside = base / "root", base / "outside"
    (root / "docs").mkdir(parents=True)
    outside.mkdir()
    (root / "docs" / "a.txt").write_text("inside a")
    (root / "top.txt").write_text("top")
    (outside / "secret.txt").write_text("OUTSIDE")
    (outside / "only-outside.txt").write_text("")
    return {"base": base, "root": root, "outside": outside}


def load(sandbox: Sandbox, value: str) -> Any:
    """What a ``confined(sandbox)`` parameter receives for ``value``."""
    return typing.get_args(confined(sandbox))[1].__mcp_load__(value)


def names(paths: Iterator[Any], root: Path) -> list[str]:
    return sorted(str(Path(p).relative_to(root)) for p in paths)


# ------------------------------------------------------------------------------ 8: glob


@pytest.mark.parametrize("pattern", ["../outside/*", "../../../../etc/pass*", "docs/../../outside/*", "/etc/*",
                                     "*/../../outside/secret.txt", "**/../../outside/*"])
def test_a_glob_pattern_cannot_climb_out_of_the_sandbox(tree, pattern):
    sb = Sandbox([tree["root"]])
    root = load(sb, ".")
    for listing in (lambda: list(sb.glob(tree["root"], pattern)), lambda: list(root.glob(pattern)),
                    lambda: list(root.rglob(pattern))):
        with pytest.raises(ToolError) as info:
            listing()
        assert info.value.code == E_PERMISSION_DENIED
        assert "leaves the directory" in info.value.message


def test_a_glob_matches_inside_and_never_follows_a_symlinked_directory(tree):
    os.symlink(tree["outside"], tree["root"] / "link")
    sb = Sandbox([tree["root"]])
    root = load(sb, ".")
    assert names(root.glob("*"), tree["root"]) == ["docs", "link", "top.txt"]
    assert names(root.glob("*/*.txt"), tree["root"]) == ["docs/a.txt"]  # not link/secret.txt
    assert names(root.rglob("*.txt"), tree["root"]) == ["docs/a.txt", "top.txt"]
    assert names(sb.glob(tree["root"], "**/*"), tree["root"]) == ["docs", "docs/a.txt", "link", "top.txt"]
    assert names(root.glob("link/*"), tree["root"]) == []
    assert all(p._sandbox is sb for p in root.glob("**/*"))  # results are confined paths too


# ------------------------------------------------------------------------------ 19: hard links


def test_a_hard_link_to_an_outside_file_is_refused(tree):
    os.link(tree["outside"] / "secret.txt", tree["root"] / "hard.txt")
    sb = Sandbox([tree["root"]])
    path = load(sb, "hard.txt")
    for read in (lambda: sb.open("hard.txt", "rb").read(), lambda: sb.read_text("hard.txt"),
                 path.read_text, path.read_bytes, lambda: path.open().read(),
                 lambda: path.write_text("clobbered"), lambda: sb.open("hard.txt", "a").write("x")):
        with pytest.raises(ToolError) as info:
            read()
        assert info.value.code == E_PERMISSION_DENIED and "hard link" in info.value.message
    assert (tree["outside"] / "secret.txt").read_text() == "OUTSIDE"  # not truncated by the refused write
    allowed = Sandbox([tree["root"]], allow_hardlinks=True)
    assert allowed.read_text("hard.txt") == "OUTSIDE"


def test_a_fifo_is_refused_instead_of_hanging_the_call(tree):
    os.mkfifo(tree["root"] / "pipe")
    sb = Sandbox([tree["root"]])
    for mode in ("r", "w"):
        with pytest.raises(ToolError) as info:
            sb.open("pipe", mode)
        assert info.value.code == E_PERMISSION_DENIED and "not a regular file" in info.value.message


# ------------------------------------------------------------------------------ 9: races


class Flipper:
    """Flips ``root/race`` between a directory and a symlink to the outside directory."""

    def __init__(self, root: Path, outside: Path) -> None:
        self.race, self.parked, self.outside = root / "race", root / ".race-dir", outside
        self.race.mkdir()
        (self.race / "secret.txt").write_text("inside race")
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        try:
            self.flip()
        except BaseException as exc:  # noqa: BLE001 - reported by __exit__
            self.error = exc

    def flip(self) -> None:
        while not self.stop.is_set():
            os.rename(self.race, self.parked)
            os.symlink(self.outside, self.race)
            time.sleep(0)  # each state lasts a thread switch: the other thread gets to use it
            os.unlink(self.race)
            os.rename(self.parked, self.race)
            time.sleep(0)

    def __enter__(self) -> Flipper:
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)  # switch threads often, so checks and uses interleave with flips
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)
        sys.setswitchinterval(self._interval)
        assert self.error is None, f"the flipping thread failed: {self.error!r}"


ROUNDS = 400


def race_reads(sb: Sandbox) -> list[Any]:
    return [lambda: load(sb, "race/secret.txt").read_text(),
            lambda: sb.open("race/secret.txt").read(),
            lambda: " ".join(p.name for p in load(sb, "race").iterdir())]


def race_writes(sb: Sandbox, root: Path, i: int) -> list[Any]:
    (root / f"m{i}.txt").write_text("moved")
    return [lambda: load(sb, f"m{i}.txt").rename(load(sb, f"race/m{i}.txt")),
            lambda: load(sb, f"race/w{i}.txt").write_text("written")]


def flip_and_try(tree: dict[str, Path], make: Any) -> list[Any]:
    """Run the operations ``make(i)`` gives while ``race`` flips; what succeeded."""
    results: list[Any] = []
    with Flipper(tree["root"], tree["outside"]):
        for i in range(ROUNDS):
            for operation in make(i):
                try:
                    results.append(operation())
                except (ToolError, OSError):
                    pass  # refused, or missing mid-flip: fails closed
    assert results, "no operation ever succeeded: the race did not run"
    return results


def test_reads_through_a_parent_swapped_for_a_symlink_fail_closed(tree):
    sb = Sandbox([tree["root"]])
    seen = flip_and_try(tree, lambda i: race_reads(sb))
    assert not [text for text in seen if "OUTSIDE" in text or "only-outside" in text]


def test_writes_and_moves_through_a_parent_swapped_for_a_symlink_fail_closed(tree):
    sb = Sandbox([tree["root"]])
    flip_and_try(tree, lambda i: race_writes(sb, tree["root"], i))
    assert sorted(os.listdir(tree["outside"])) == ["only-outside.txt", "secret.txt"]


def test_the_sandbox_operations_fail_closed_in_the_same_race(tree):
    sb = Sandbox([tree["root"]])
    seen = flip_and_try(tree, lambda i: [
        lambda: sb.read_text("race/secret.txt"),
        lambda: " ".join(p.name for p in load(sb, "race").glob("*")),
        lambda: " ".join(p.name for p in sb.glob(tree["root"], "race/*")),
        lambda: ("size", sb.stat("race/secret.txt").st_size),
        lambda: sb.write_bytes(f"race/b{i}.txt", b"written"),
        lambda: load(sb, f"race/d{i}").mkdir(),
    ])
    assert not [text for text in seen if isinstance(text, str) and ("OUTSIDE" in text or "only-outside" in text)]
    assert ("size", len("OUTSIDE")) not in seen  # the outside file's stat
    assert sorted(os.listdir(tree["outside"])) == ["only-outside.txt", "secret.txt"]


def test_operations_report_what_went_wrong(tree):
    sb = Sandbox([tree["root"]])
    with pytest.raises(ToolError) as info:
        sb.read_text("docs/missing.txt")
    assert info.value.code == E_NOT_FOUND
    with pytest.raises(ToolError) as info:
        sb.write_bytes("top.txt", b"x", overwrite=False)
    assert info.value.code == E_PERMISSION_DENIED
    assert sb.read_text("top.txt") == "top"
    sb.mkdir("new/deeper", parents=True)
    sb.write_text("new/deeper/f.txt", "f")
    sb.rename("new/deeper/f.txt", "new/g.txt")
    assert names(sb.iterdir("new"), tree["root"]) == ["new/deeper", "new/g.txt"]
    sb.unlink("new/g.txt")
    sb.rmdir("new/deeper")
    assert sb.stat("new").st_nlink >= 2 and not load(sb, "new/g.txt").exists()
    os.symlink(tree["outside"] / "secret.txt", tree["root"] / "out.txt")
    link = load(sb, ".") / "out.txt"
    assert link.is_symlink() and not link.exists() and not link.is_file()  # like a dangling link
    with pytest.raises(ToolError):
        link.read_text()
