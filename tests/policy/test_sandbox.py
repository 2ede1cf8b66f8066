"""Sandbox: paths and file URIs confined to root directories, checked on real paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpkit.policy.sandbox import Sandbox
from mcpkit.protocol.errors import (
    E_NOT_FOUND,
    E_PERMISSION_DENIED,
    E_SCHEMA_VALIDATION,
    ToolError,
)

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX symlink semantics")


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """base/root (the sandbox), base/root2 (a sibling sharing the prefix), base/outside."""
    base = tmp_path.resolve()
    root, root2, outside = base / "root", base / "root2", base / "outside"
    for d in (root / "docs" / "sub", root2, outside):
        d.mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("inside")
    (root2 / "x.txt").write_text("sibling")
    (outside / "secret.txt").write_text("secret")
    (root / "file_out").symlink_to(outside / "secret.txt")
    (root / "dir_out").symlink_to(outside)
    (root / "docs" / "deep").mkdir()
    (root / "docs" / "deep" / "up").symlink_to("../../../outside")  # relative link, at depth
    (root / "link_in").symlink_to(root / "docs")
    (root / "dangling_out").symlink_to(outside / "nope.txt")
    (root / "dangling_in").symlink_to("docs/future.txt")
    (root / "loop").symlink_to("loop")
    (root / "l1").symlink_to("l2")
    (root / "l2").symlink_to("l1")
    return {"base": base, "root": root, "root2": root2, "outside": outside}


def _refused(sb: Sandbox, path: str, code: str = E_PERMISSION_DENIED, **kw: object) -> ToolError:
    with pytest.raises(ToolError) as info:
        sb.resolve(path, **kw)  # type: ignore[arg-type]
    assert info.value.code == code
    assert info.value.suggested_fix
    return info.value


@pytest.mark.req("TL-11", "RT-03")
def test_relative_paths_inside_the_root_resolve(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"]])
    assert sb.roots == (tree["root"],)
    assert sb.resolve("docs/a.txt", must_exist=True) == tree["root"] / "docs" / "a.txt"
    assert sb.resolve("docs/./sub/../a.txt") == tree["root"] / "docs" / "a.txt"
    assert sb.resolve(Path("docs")) == tree["root"] / "docs"
    assert sb.relative(sb.resolve("docs/sub")) == "docs/sub"


@pytest.mark.req("TL-11", "RT-03")
@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "a/../../outside", "docs/sub/../../../root2/x.txt",
                                  "../root2", "../root2/x.txt"])
def test_dot_dot_escapes_are_refused(tree: dict[str, Path], path: str) -> None:
    err = _refused(Sandbox([tree["root"]]), path)
    assert err.message == f"Path {path!r} resolves outside the allowed roots."
    assert err.details == {"path": path}
    assert err.to_error()["code"] == E_PERMISSION_DENIED


@pytest.mark.req("TL-11", "RT-03")
def test_absolute_paths_must_fall_inside_a_root(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"]])
    assert sb.resolve(str(tree["root"] / "docs" / "a.txt")) == tree["root"] / "docs" / "a.txt"
    _refused(sb, str(tree["outside"] / "secret.txt"))
    _refused(sb, "/etc/passwd")
    _refused(sb, "/")
    # the sibling shares the string prefix 'root' but is not inside it
    _refused(sb, str(tree["root2"] / "x.txt"))
    _refused(sb, str(tree["root2"]))


@pytest.mark.req("TL-11", "RT-03")
@pytest.mark.parametrize("path", ["file_out", "dir_out", "dir_out/secret.txt", "docs/deep/up/secret.txt",
                                  "docs/deep/up", "link_in/deep/up/secret.txt"])
def test_symlinks_leading_outside_are_refused_at_any_depth(tree: dict[str, Path], path: str) -> None:
    err = _refused(Sandbox([tree["root"]]), path)
    # the message names the path as given, never where the link points
    assert str(tree["outside"]) not in err.message and "outside/" not in err.message
    assert str(tree["outside"]) not in repr(err.to_error())


@pytest.mark.req("TL-11", "RT-03")
def test_symlinks_staying_inside_are_followed(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"]])
    assert sb.resolve("link_in/a.txt", must_exist=True) == tree["root"] / "docs" / "a.txt"
    assert sb.relative(sb.resolve("link_in")) == "docs"
    # a dangling link whose target is inside resolves to that (future) target
    assert sb.resolve("dangling_in") == tree["root"] / "docs" / "future.txt"


@pytest.mark.req("TL-11")
def test_dangling_symlink_to_outside_is_refused_even_as_a_write_target(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"]])
    _refused(sb, "dangling_out")
    _refused(sb, "dangling_out", must_exist=True)
    with pytest.raises(ToolError) as info:
        sb.open("dangling_out", "w")
    assert info.value.code == E_PERMISSION_DENIED
    assert not (tree["outside"] / "nope.txt").exists()


@pytest.mark.req("TL-11")
@pytest.mark.parametrize("path", ["loop", "loop/x", "l1", "l1/x/y", "docs/../loop/z"])
def test_symlink_loops_are_refused_without_hanging(tree: dict[str, Path], path: str) -> None:
    err = _refused(Sandbox([tree["root"]]), path)
    assert err.details == {"path": path}


def test_write_targets_that_do_not_exist_yet_resolve_inside(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"]])
    assert sb.resolve("docs/new/deeper/file.txt") == tree["root"] / "docs" / "new" / "deeper" / "file.txt"
    assert sb.resolve("link_in/new.txt") == tree["root"] / "docs" / "new.txt"
    # a path through a regular file is a name that cannot exist, but it is still inside
    assert sb.resolve("docs/a.txt/x") == tree["root"] / "docs" / "a.txt" / "x"
    err = _refused(sb, "docs/new/file.txt", code=E_NOT_FOUND, must_exist=True)
    assert err.message == "Path 'docs/new/file.txt' does not exist."


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores directory permissions")
def test_a_component_that_cannot_be_inspected_is_refused(tree: dict[str, Path]) -> None:
    locked = tree["root"] / "locked"
    locked.mkdir()
    (locked / "inner").symlink_to(tree["outside"])
    locked.chmod(0o000)  # realpath cannot see that 'inner' is a link, so we must not vouch for it
    try:
        err = _refused(Sandbox([tree["root"]]), "locked/inner/secret.txt")
        assert err.message == "Path 'locked/inner/secret.txt' cannot be checked (a component is not accessible)."
    finally:
        locked.chmod(0o755)


def test_the_root_itself_is_allowed_and_displays_as_dot(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"]])
    for path in (".", "docs/..", str(tree["root"]), str(tree["root"]) + "/"):
        assert sb.resolve(path) == tree["root"]
        assert sb.relative(sb.resolve(path)) == "."
    with pytest.raises(ValueError):
        sb.relative(tree["outside"])
    with pytest.raises(ValueError):
        sb.relative(tree["root2"])


def test_tilde_and_windows_forms_are_plain_names_on_posix(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"]])
    assert sb.resolve("~") == tree["root"] / "~"
    assert sb.resolve("~/x") == tree["root"] / "~" / "x"
    assert sb.resolve("C:\\Windows") == tree["root"] / "C:\\Windows"
    assert sb.resolve("\\\\host\\share\\x") == tree["root"] / "\\\\host\\share\\x"
    assert sb.relative(sb.resolve("C:\\Windows")) == "C:\\Windows"


@pytest.mark.req("TL-11", "RT-03")
def test_multiple_roots(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"], tree["root2"]])
    assert sb.roots == (tree["root"], tree["root2"])
    assert sb.resolve(str(tree["root2"] / "x.txt"), must_exist=True) == tree["root2"] / "x.txt"
    assert sb.resolve("x.txt", root=1, must_exist=True) == tree["root2"] / "x.txt"
    _refused(sb, "x.txt", code=E_NOT_FOUND, must_exist=True)  # relative → first root
    assert sb.relative(tree["root2"] / "x.txt") == "x.txt"
    # an explicit root confines to that root only
    _refused(sb, "../root/docs", root=1)
    _refused(sb, str(tree["root"] / "docs"), root=1)
    assert sb.resolve("../root/docs", root=0) == tree["root"] / "docs"
    err = _refused(sb, "x", code=E_SCHEMA_VALIDATION, root=2)
    assert err.message == "Root index 2 does not exist; there are 2 root(s)."
    _refused(sb, str(tree["outside"]))


def test_roots_are_validated_and_deduplicated(tree: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        Sandbox([tree["base"] / "missing"])
    with pytest.raises(ValueError, match="not a directory"):
        Sandbox([tree["root"] / "docs" / "a.txt"])
    with pytest.raises(ValueError):
        Sandbox([""])
    with pytest.raises(TypeError):
        Sandbox(str(tree["root"]))  # type: ignore[arg-type]
    # a symlinked root is stored as its real path; duplicates collapse
    assert Sandbox([tree["root"] / "link_in", tree["root"] / "docs"]).roots == (tree["root"] / "docs",)


def test_roots_from_the_environment_are_read_lazily(tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_SANDBOX_ROOT", raising=False)
    sb = Sandbox(env="TEST_SANDBOX_ROOT")  # created before the variable is set
    monkeypatch.setenv("TEST_SANDBOX_ROOT", os.pathsep.join([str(tree["root"]), "", str(tree["root2"])]))
    assert sb.roots == (tree["root"], tree["root2"])
    assert sb.resolve("docs") == tree["root"] / "docs"
    # configured later (e.g. from --root): replaces the environment's roots
    sb.roots = [tree["root2"]]
    assert sb.roots == (tree["root2"],)
    _refused(sb, str(tree["root"]))
    sb.configure(None)  # back to the environment
    assert sb.roots == (tree["root"], tree["root2"])
    monkeypatch.setenv("BAD_SANDBOX_ROOT", str(tree["base"] / "missing"))
    with pytest.raises(ValueError, match="BAD_SANDBOX_ROOT"):
        Sandbox(env="BAD_SANDBOX_ROOT").roots  # noqa: B018


@pytest.mark.req("TL-11")
def test_without_roots_every_path_is_refused_with_a_configuration_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPKIT_ROOT", raising=False)
    for sb in (Sandbox(), Sandbox([])):
        err = _refused(sb, "docs/a.txt")
        assert err.message == "File access is disabled: no sandbox roots are configured, so 'docs/a.txt' is refused."
        assert "MCPKIT_ROOT" in (err.suggested_fix or "") and "--root" in (err.suggested_fix or "")
        with pytest.raises(ToolError) as info:
            sb.check_uri("file:///tmp/x")
        assert info.value.code == E_PERMISSION_DENIED


@pytest.mark.req("TL-11")
@pytest.mark.parametrize(("path", "message"), [("", "The path is empty."), ("docs\0/../../etc/passwd",
                                                 "The path contains a NUL character."), (42, None), (None, None)])
def test_malformed_paths_are_schema_errors(tree: dict[str, Path], path: object, message: str | None) -> None:
    err = _refused(Sandbox([tree["root"]]), path, code=E_SCHEMA_VALIDATION)  # type: ignore[arg-type]
    if message:
        assert err.message == message


@pytest.mark.req("TL-11", "RT-03")
def test_file_uris_are_decoded_then_confined(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"]])
    root = str(tree["root"])
    ok = f"file://{root}/docs/a.txt"
    assert sb.check_uri(ok) == ok
    assert sb.check_uri(f"FILE://localhost{root}/docs/a%2Etxt", must_exist=True) == f"FILE://localhost{root}/docs/a%2Etxt"
    assert sb.check_uri(f"file:{root}/docs/new%20file.txt") == f"file:{root}/docs/new%20file.txt"
    for uri in (f"file://{root}/%2e%2e/outside/secret.txt", f"file://{root}/..%2Foutside", f"file://{root}/dir_out/x",
                "file:///etc/passwd", f"file://{tree['root2']}/x.txt"):
        with pytest.raises(ToolError) as info:
            sb.check_uri(uri)
        assert info.value.code == E_PERMISSION_DENIED, uri
        assert info.value.details == {"uri": uri}
    with pytest.raises(ToolError) as info:
        sb.check_uri(f"file://evil.example{root}/docs/a.txt")
    assert info.value.code == E_PERMISSION_DENIED
    assert info.value.message == (f"File URI 'file://evil.example{root}/docs/a.txt' names a remote host; "
                                  "only local files are allowed.")
    for uri in (f"file://{root}/docs%00/x", "file:docs/a.txt"):
        with pytest.raises(ToolError) as info:
            sb.check_uri(uri)
        assert info.value.code == E_SCHEMA_VALIDATION, uri
    with pytest.raises(ToolError) as info:
        sb.check_uri(f"file://{root}/docs/missing", must_exist=True)
    assert info.value.code == E_NOT_FOUND


@pytest.mark.req("TL-11")
def test_only_listed_uri_schemes_are_allowed(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"]])
    for uri in ("https://example.com/x", "javascript:alert(1)", "data:text/plain,hi", "docs/a.txt", "c:/x"):
        with pytest.raises(ToolError) as info:
            sb.check_uri(uri)
        assert info.value.code == E_PERMISSION_DENIED
        assert info.value.details["allowed_schemes"] == ["file"]
    assert info.value.message == "URI scheme c: is not allowed here; allowed: file:."
    web = Sandbox([tree["root"]], schemes=("HTTPS", "file", "data"))
    assert web.schemes == ("https", "file", "data")
    assert Sandbox([tree["root"]], schemes="https:").schemes == ("https",)
    assert web.check_uri("https://example.com/../../etc") == "https://example.com/../../etc"  # scheme only
    assert web.check_uri("data:text/plain,hi") == "data:text/plain,hi"
    with pytest.raises(ToolError) as info:
        web.check_uri("http://example.com/")
    assert info.value.message == "URI scheme http: is not allowed here; allowed: https:, file:, data:."
    with pytest.raises(ToolError) as info:
        web.check_uri("file:///etc/passwd")
    assert info.value.code == E_PERMISSION_DENIED
    with pytest.raises(ToolError) as info:
        web.check_uri("")
    assert info.value.code == E_SCHEMA_VALIDATION


def test_open_reads_and_writes_inside(tree: dict[str, Path]) -> None:
    sb = Sandbox([tree["root"]])
    with sb.open("docs/a.txt") as f:
        assert f.read() == "inside"
    with sb.open("docs/b.bin", "wb") as f:
        f.write(b"\x00\x01")
    assert (tree["root"] / "docs" / "b.bin").read_bytes() == b"\x00\x01"
    with pytest.raises(ToolError) as info:
        sb.open("docs/missing.txt")
    assert info.value.code == E_NOT_FOUND
    with pytest.raises(ToolError) as info:
        sb.open("docs/nodir/new.txt", "w")
    assert info.value.code == E_NOT_FOUND
    with pytest.raises(ToolError) as info:
        sb.open("file_out")
    assert info.value.code == E_PERMISSION_DENIED
    with pytest.raises(TypeError):
        sb.open("docs/a.txt", opener=os.open)


@pytest.mark.req("TL-11")
@pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="needs O_NOFOLLOW")
@pytest.mark.parametrize("mode", ["r", "w", "a"])
def test_open_refuses_a_symlink_swapped_in_after_the_check(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    sb = Sandbox([tree["root"]])
    target = tree["root"] / "docs" / "a.txt"
    real_resolve = Sandbox.resolve

    def resolve_then_swap(self: Sandbox, path: str, **kw: object) -> Path:
        result = real_resolve(self, path, **kw)  # type: ignore[arg-type]
        target.unlink()  # the attacker wins the race: the checked file is now a link outside
        target.symlink_to(tree["outside"] / "secret.txt")
        return result

    monkeypatch.setattr(Sandbox, "resolve", resolve_then_swap)
    with pytest.raises(ToolError) as info:
        sb.open("docs/a.txt", mode)
    assert info.value.code == E_PERMISSION_DENIED
    assert info.value.message == "Path 'docs/a.txt' resolves outside the allowed roots."
    assert (tree["outside"] / "secret.txt").read_text() == "secret"


_COMPONENTS = ["a", "b", "..", ".", "link_out", "link_in", ""]


@pytest.fixture(scope="module")
def prop_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """root/{a,b,b/inner}; links whose targets are never shallower than the link (see below)."""
    base = tmp_path_factory.mktemp("prop").resolve()
    root, outside = base / "root", base / "outside"
    (root / "a").mkdir(parents=True)
    (root / "b" / "inner").mkdir(parents=True)
    (outside / "a").mkdir(parents=True)
    (root / "link_out").symlink_to(outside)
    (root / "a" / "link_out").symlink_to("../../outside/a")
    (root / "link_in").symlink_to("b/inner")
    (root / "a" / "link_in").symlink_to("../b/inner")
    (root / "b" / "link_in").symlink_to("inner")
    return root, outside


@pytest.mark.req("TL-11", "RT-03")
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_COMPONENTS), min_size=1, max_size=8))
def test_property_resolve_never_returns_a_path_outside(prop_tree: tuple[Path, Path], parts: list[str]) -> None:
    root, _ = prop_tree
    path = "/".join(parts)
    sb = Sandbox([root])
    try:
        result = sb.resolve(path)
    except ToolError as exc:
        assert exc.code in (E_PERMISSION_DENIED, E_SCHEMA_VALIDATION)
        refused = True
    else:
        refused = False
        assert Path(os.path.realpath(result)).is_relative_to(root)
        assert result == Path(os.path.realpath(result))
    # Every link here lands at least as deep as itself, so a path that never climbs above the root
    # lexically and never crosses link_out must be accepted (no false refusals).
    depth, crosses_out = 0, False
    for part in parts:
        if part == "..":
            depth -= 1
        elif part not in ("", "."):
            depth += 1
        crosses_out |= part == "link_out"
        if depth < 0:
            break
    if not path.startswith("/") and path and depth >= 0 and not crosses_out:
        assert not refused, path
