"""The Skills extension (SEP-2640) in the server: skills from directories and from code,
skills/list, skills/get, resources/directory/read, the capability, limits, live changes,
scopes on every route and the 2026-07-28 cache hints."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.auth.tokens import AccessToken
from mcpkit.server.skills import SKILLS_EXTENSION, SkillError
from tests.harness import RpcError, connect

SKILL_MD = """\
---
name: pdf-processing
description: Extract, fill, and assemble PDF documents
license: Apache-2.0
released: 2026-09-13
metadata:
  version: "2.1.0"
  tags: [pdf, forms]
---
# PDF processing

See references/FORMS.md.
"""


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_skill(root: Path, rel: str, files: dict[str, str | bytes]) -> Path:
    base = root / rel
    for name, content in files.items():
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return base


def md(name: str, description: str = "Does a thing") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n"


PDF_FILES: dict[str, str | bytes] = {
    "SKILL.md": SKILL_MD,
    "references/FORMS.md": "# Forms\n",
    "templates/regional/eu.md": "EU\r\nline endings kept\r\n",
    "assets/logo.bin": b"\x89PNG\x00\xff",
}


def pdf_server(**kw: Any) -> Server:
    server = Server("skills", **kw)
    server.add_skill("pdf-processing", PDF_FILES)
    return server


@pytest.mark.asyncio
async def test_a_directory_skill_is_listed_with_its_frontmatter_verbatim_and_every_file_digested(tmp_path, wire):
    directory = write_skill(tmp_path, "pdf-processing", PDF_FILES)
    server = Server("skills")
    skill = server.add_skill("pdf-processing", directory)
    assert skill.uri == "skill://pdf-processing/SKILL.md"
    async with connect(server, wire) as c:
        listed = await c.request("skills/list", {})
        [entry] = listed["skills"]
        assert entry["uri"] == "skill://pdf-processing/SKILL.md"
        # verbatim: every field the author wrote, the date as written (not a datetime), lists kept
        assert entry["frontmatter"] == {
            "name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents",
            "license": "Apache-2.0", "released": "2026-09-13",
            "metadata": {"version": "2.1.0", "tags": ["pdf", "forms"]},
        }
        expected = {f"skill://pdf-processing/{rel}": (content.encode() if isinstance(content, str) else content)
                    for rel, content in PDF_FILES.items()}
        assert entry["resources"][0]["uri"] == entry["uri"]  # SKILL.md's own digest and size
        assert {r["uri"]: (r["digest"], r["size"]) for r in entry["resources"]} == {
            uri: (sha(data), len(data)) for uri, data in expected.items()}
        # what resources/read serves are the bytes the digests cover: text as text, the rest as blobs
        for uri, data in expected.items():
            [content] = (await c.request("resources/read", {"uri": uri}))["contents"]
            if "text" in content:
                assert content["text"].encode() == data
            else:
                import base64

                assert base64.b64decode(content["blob"]) == data
        # SEP-2640 "Resource Metadata": SKILL.md named and described by its frontmatter, as Markdown
        resources = {r["uri"]: r for r in (await c.request("resources/list", {}))["resources"]}
        manifest = resources["skill://pdf-processing/SKILL.md"]
        assert (manifest["name"], manifest["description"], manifest["mimeType"]) == (
            "pdf-processing", "Extract, fill, and assemble PDF documents", "text/markdown")
        assert set(resources) == set(expected)
        got = await c.request("skills/get", {"uri": entry["uri"]})
        assert got == {"skill": entry}


@pytest.mark.asyncio
async def test_skills_from_serves_every_skill_under_a_folder_and_nested_files_stay_the_outer_skills(tmp_path, wire):
    write_skill(tmp_path, "git-workflow", {"SKILL.md": md("git-workflow"), "inner/helper/SKILL.md": md("helper"),
                                            "inner/helper/notes.md": "n"})
    write_skill(tmp_path, "acme/billing/refunds", {"SKILL.md": md("refunds"), "examples/email.md": "e"})
    write_skill(tmp_path, ".trash/old", {"SKILL.md": md("old")})  # a hidden folder is not looked into
    server = Server("skills")
    skills = server.skills_from(tmp_path, prefix="team")
    assert [s.uri for s in skills] == [
        "skill://team/git-workflow/SKILL.md",
        "skill://team/acme/billing/refunds/SKILL.md",
        "skill://team/git-workflow/inner/helper/SKILL.md",
    ]
    async with connect(server, wire) as c:
        entries = {e["uri"]: e for e in (await c.request("skills/list", {}))["skills"]}
        assert set(entries) == {s.uri for s in skills}
        outer = {r["uri"] for r in entries["skill://team/git-workflow/SKILL.md"]["resources"]}
        # SEP-2640 "Nested skills": the nested skill's files are supporting files of the outer one too
        assert outer == {"skill://team/git-workflow/SKILL.md", "skill://team/git-workflow/inner/helper/SKILL.md",
                         "skill://team/git-workflow/inner/helper/notes.md"}
        inner = {r["uri"] for r in entries["skill://team/git-workflow/inner/helper/SKILL.md"]["resources"]}
        assert inner == {"skill://team/git-workflow/inner/helper/SKILL.md",
                         "skill://team/git-workflow/inner/helper/notes.md"}


def test_a_skill_declared_in_code_with_the_decorator(tmp_path):
    server = Server("skills")
    directory = write_skill(tmp_path, "x", {"SKILL.md": md("refunds")})

    @server.skill("acme/billing/refunds")
    def refunds() -> Path:
        return directory

    assert list(server.skills) == ["skill://acme/billing/refunds/SKILL.md"]
    assert server.skills["skill://acme/billing/refunds/SKILL.md"].name == "refunds"


@pytest.mark.parametrize(("path", "files", "says"), [
    ("Bad_Name", {"SKILL.md": md("Bad_Name")}, "lowercase letters, digits and hyphens"),
    ("a--b", {"SKILL.md": md("a--b")}, "twice in a row"),
    ("-ab", {"SKILL.md": md("-ab")}, "no hyphen first"),
    ("x" * 65, {"SKILL.md": md("x" * 65)}, "at most 64 characters"),
    ("refunds", {"SKILL.md": md("returns")}, "must equal the frontmatter name 'returns'"),
    ("refunds", {"notes.md": "n"}, "every skill has a SKILL.md"),
    ("refunds", {"SKILL.md": "# no frontmatter\n"}, "must begin with YAML frontmatter"),
    ("refunds", {"SKILL.md": "---\nname: refunds\n---\n"}, "needs a non-empty description"),
    ("refunds", {"SKILL.md": md("refunds", "d" * 1025)}, "allows 1024"),
    ("refunds", {"SKILL.md": "---\nname: [unclosed\n---\n"}, "not valid YAML"),
    ("refunds", {"SKILL.md": "---\n- a list\n---\n"}, "not a YAML mapping"),
    ("refunds", {"SKILL.md": md("refunds"), "../escape.md": "x"}, "without '.' or '..'"),
    ("refunds", {"SKILL.md": md("refunds"), **{f"f{i}.md": "" for i in range(512)}}, "at most 512"),
    ("refunds", {"SKILL.md": md("refunds"), "big.bin": b"\0" * (16 * 1024 * 1024)}, "16 MiB"),
    ("a b/refunds", {"SKILL.md": md("refunds")}, "not a valid URI authority"),
])
def test_a_skill_that_breaks_a_rule_is_refused_at_registration_with_one_clear_error(path, files, says):
    server = Server("skills")
    with pytest.raises(SkillError) as refused:
        server.add_skill(path, files)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert server.skills == {} and server._resources == {}


def test_the_limits_are_inclusive():
    """SEP-2640 "Limits": 512 entries and 16 MiB are allowed, SKILL.md counted."""
    server = Server("skills")
    text = md("refunds")
    server.add_skill("refunds", {"SKILL.md": text, **{f"f{i}.md": "" for i in range(510)},
                                 "big.bin": b"\0" * (16 * 1024 * 1024 - len(text))})
    assert len(server.skills["skill://refunds/SKILL.md"].resources()) == 512


@pytest.mark.asyncio
@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_the_extension_is_declared_with_resources_and_its_methods_answer_on_every_revision(version, wire):
    async with connect(pdf_server(), wire, version) as c:
        caps = c.initialize_result["capabilities"]
        assert caps["extensions"][SKILLS_EXTENSION] == {"directoryRead": True}
        assert "resources" in caps  # the extension requires the resources capability
        assert len((await c.request("skills/list", {}))["skills"]) == 1
        assert "ttlMs" not in await c.request("skills/list", {})  # cache hints are 2026-07-28's


@pytest.mark.asyncio
async def test_a_server_without_skills_declares_no_extension_and_has_no_skill_methods(wire):
    server = Server("plain")
    server.resource("a://b")(lambda: "x")
    async with connect(server, wire) as c:
        assert "extensions" not in c.initialize_result["capabilities"]
        for method in ("skills/list", "skills/get", "resources/directory/read"):
            with pytest.raises(RpcError) as refused:
                await c.request(method, {"uri": "skill://a/SKILL.md"})
            assert refused.value.code == -32601


@pytest.mark.asyncio
async def test_skills_get_answers_minus_32602_for_a_uri_that_is_no_skill(wire):
    async with connect(pdf_server(), wire) as c:
        for uri in ("skill://nope/SKILL.md", "skill://pdf-processing/references/FORMS.md", "skill://pdf-processing"):
            with pytest.raises(RpcError) as refused:
                await c.request("skills/get", {"uri": uri})
            assert refused.value.code == -32602
        with pytest.raises(RpcError) as refused:
            await c.request("skills/get", {})
        assert refused.value.code == -32602


@pytest.mark.asyncio
async def test_directory_read_lists_direct_children_with_subdirectories_as_directories(wire):
    async with connect(pdf_server(), wire) as c:
        root = await c.request("resources/directory/read", {"uri": "skill://pdf-processing"})
        assert [(r["uri"], r.get("mimeType")) for r in root["resources"]] == [
            ("skill://pdf-processing/SKILL.md", "text/markdown"),
            ("skill://pdf-processing/assets", "inode/directory"),
            ("skill://pdf-processing/references", "inode/directory"),
            ("skill://pdf-processing/templates", "inode/directory"),
        ]
        nested = await c.request("resources/directory/read", {"uri": "skill://pdf-processing/templates"})
        assert nested == {"resources": [{"uri": "skill://pdf-processing/templates/regional", "name": "regional",
                                         "mimeType": "inode/directory"}]}
        leaf = await c.request("resources/directory/read", {"uri": "skill://pdf-processing/templates/regional"})
        assert [r["uri"] for r in leaf["resources"]] == ["skill://pdf-processing/templates/regional/eu.md"]
        for uri in ("skill://pdf-processing/SKILL.md", "skill://nope", "skill://pdf-processing/templ"):
            with pytest.raises(RpcError) as refused:
                await c.request("resources/directory/read", {"uri": uri})
            assert refused.value.code == -32602, uri


@pytest.mark.asyncio
async def test_without_directory_read_the_setting_is_not_declared_and_the_method_is_absent(wire):
    server = pdf_server()
    server.directory_read = False
    async with connect(server, wire) as c:
        assert c.initialize_result["capabilities"]["extensions"][SKILLS_EXTENSION] == {}
        with pytest.raises(RpcError) as refused:
            await c.request("resources/directory/read", {"uri": "skill://pdf-processing"})
        assert refused.value.code == -32601


@pytest.mark.asyncio
async def test_pages_hold_whole_entries_and_cursors_round_trip(wire):
    server = Server("skills", page_size=1)
    for name in ("alpha", "beta", "gamma"):
        server.add_skill(name, {"SKILL.md": md(name), "a.md": "a", "b.md": "b"})
    async with connect(server, wire) as c:
        seen, cursor = [], None
        while True:
            page = await c.request("skills/list", {"cursor": cursor} if cursor else {})
            assert len(page["skills"]) == 1 and len(page["skills"][0]["resources"]) == 3  # atomic
            seen.append(page["skills"][0]["uri"])
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        assert seen == ["skill://alpha/SKILL.md", "skill://beta/SKILL.md", "skill://gamma/SKILL.md"]
        first = await c.request("resources/directory/read", {"uri": "skill://alpha"})
        second = await c.request("resources/directory/read", {"uri": "skill://alpha", "cursor": first["nextCursor"]})
        assert [r["uri"] for r in first["resources"] + second["resources"]][:2] == [
            "skill://alpha/SKILL.md", "skill://alpha/a.md"]
        with pytest.raises(RpcError) as refused:  # a skills/list cursor is not a directory's
            await c.request("resources/directory/read", {"uri": "skill://beta", "cursor": first["nextCursor"]})
        assert refused.value.code == -32602


@pytest.mark.asyncio
async def test_2026_07_28_results_carry_cache_hints():
    from mcpkit import Client

    server = pdf_server(cache_ttl_ms=60_000, cache_scope="private")
    async with Client(server, protocol_version="2026-07-28") as client:
        listed = await client.request("skills/list", {})
        got = await client.request("skills/get", {"uri": "skill://pdf-processing/SKILL.md"})
        directory = await client.request("resources/directory/read", {"uri": "skill://pdf-processing"})
        for result in (listed, got, directory):
            assert (result["ttlMs"], result["cacheScope"]) == (60_000, "private")
        assert "nextCursor" not in got


@pytest.mark.asyncio
async def test_a_replaced_skill_announces_the_files_that_changed_and_a_removed_one_leaves(wire):
    server = pdf_server()
    async with connect(server, wire) as c:
        await c.request("resources/subscribe", {"uri": "skill://pdf-processing/references/FORMS.md"})
        await c.request("resources/subscribe", {"uri": "skill://pdf-processing/SKILL.md"})
        changed = {**PDF_FILES, "references/FORMS.md": "# Forms, second edition\n", "new.md": "new"}
        del changed["assets/logo.bin"]
        server.add_skill("pdf-processing", changed, replace=True)
        [updated] = await c.wait_notification("notifications/resources/updated")
        assert updated["params"]["uri"] == "skill://pdf-processing/references/FORMS.md"
        await c.wait_notification("notifications/resources/list_changed")
        await c.settle()
        assert len(c.notifications_of("notifications/resources/updated")) == 1  # SKILL.md did not change
        [entry] = (await c.request("skills/list", {}))["skills"]
        digests = {r["uri"]: r["digest"] for r in entry["resources"]}
        assert digests["skill://pdf-processing/references/FORMS.md"] == sha(b"# Forms, second edition\n")
        assert "skill://pdf-processing/assets/logo.bin" not in digests
        listed = {r["uri"] for r in (await c.request("resources/list", {}))["resources"]}
        assert "skill://pdf-processing/new.md" in listed and "skill://pdf-processing/assets/logo.bin" not in listed
        with pytest.raises(SkillError):
            server.add_skill("pdf-processing", changed)  # not without replace=True
        server.remove_skill("pdf-processing")
        await c.wait_notification("notifications/resources/list_changed", 2)
        assert (await c.request("resources/list", {}))["resources"] == []
        assert "extensions" not in server.capabilities(c.session.revision)


def test_a_skill_file_never_takes_over_a_resource_of_the_server():
    server = Server("skills")
    server.resource("skill://pdf-processing/references/FORMS.md")(lambda: "mine")
    with pytest.raises(SkillError, match="already a resource"):
        server.add_skill("pdf-processing", PDF_FILES)


# ------------------------------------------------------------------ scopes: invisible everywhere


class _Auth:
    def missing(self, access: Any, required: Any) -> list[str]:
        return sorted(set(required) - set(access.scopes))


READER = AccessToken(subject="reader", client_id="c", scopes=frozenset({"skills:read"}))
NOBODY = AccessToken(subject="nobody", client_id="c")


@pytest.mark.asyncio
async def test_a_skill_hidden_by_scopes_is_invisible_on_every_route(wire):
    from mcpkit.server.scopes import ScopeStep

    server = Server("skills")
    server.add_skill("pdf-processing", PDF_FILES, scopes=["skills:read"])
    server.add_skill("open", {"SKILL.md": md("open")})
    server._install_step("scopes", ScopeStep(_Auth()))
    async with connect(server, wire) as c:
        c.session.access_token, c.session.principal = NOBODY, "nobody"
        assert [e["uri"] for e in (await c.request("skills/list", {}))["skills"]] == ["skill://open/SKILL.md"]
        assert {r["uri"] for r in (await c.request("resources/list", {}))["resources"]} == {"skill://open/SKILL.md"}
        refusals = [("skills/get", {"uri": "skill://pdf-processing/SKILL.md"}),
                    ("resources/directory/read", {"uri": "skill://pdf-processing"}),
                    ("resources/read", {"uri": "skill://pdf-processing/SKILL.md"}),
                    ("resources/subscribe", {"uri": "skill://pdf-processing/SKILL.md"})]
        for method, params in refusals:
            with pytest.raises(RpcError) as refused:
                await c.request(method, params)
            # read as what does not exist: no word of a scope that would say it does
            assert refused.value.code in (-32602, -32002) and "scope" not in refused.value.message, method
            assert "pdf-processing" not in str(refused.value.data or "").replace(params["uri"], ""), method
        c.session.access_token, c.session.principal = READER, "reader"
        assert len((await c.request("skills/list", {}))["skills"]) == 2
        assert (await c.request("skills/get", {"uri": "skill://pdf-processing/SKILL.md"}))["skill"]
        assert (await c.request("resources/read", {"uri": "skill://pdf-processing/SKILL.md"}))["contents"]
        assert len((await c.request("resources/list", {}))["resources"]) == 5


@pytest.mark.asyncio
async def test_middleware_sees_every_skill_method_on_the_one_pipeline(wire):
    from mcpkit import Middleware

    seen: list[tuple[str, str | None]] = []

    class Watch(Middleware):
        def on_request(self, ctx, call_next):
            seen.append((ctx.method, ctx.name))
            return call_next(ctx)

        def on_list_skills(self, ctx, call_next):
            result = call_next(ctx)
            return {**result, "skills": [s for s in result["skills"] if s["frontmatter"]["name"] != "beta"]}

    server = Server("skills", middleware=[Watch()])
    for name in ("alpha", "beta"):
        server.add_skill(name, {"SKILL.md": md(name)})
    async with connect(server, wire) as c:
        assert [s["uri"] for s in (await c.request("skills/list", {}))["skills"]] == ["skill://alpha/SKILL.md"]
        await c.request("skills/get", {"uri": "skill://alpha/SKILL.md"})
        await c.request("resources/directory/read", {"uri": "skill://alpha"})
    assert seen == [("skills/list", None), ("skills/get", "skill://alpha/SKILL.md"),
                    ("resources/directory/read", "skill://alpha")]


def test_the_start_up_line_counts_the_skills_beside_their_files():
    from mcpkit.startup import startup_line

    server = pdf_server()
    server.add_skill("open", {"SKILL.md": md("open")})
    assert "| 0 tools, 5 resources, 0 prompts, 2 skills |" in startup_line(server, "stdio")
    assert ", 0 prompts |" in startup_line(Server("plain"), "stdio")


@pytest.mark.asyncio
async def test_replacing_a_skill_with_other_scopes_rescopes_its_unchanged_files(wire):
    from mcpkit.server.scopes import ScopeStep

    server = pdf_server()
    server._install_step("scopes", ScopeStep(_Auth()))
    server.add_skill("pdf-processing", PDF_FILES, scopes=["skills:read"], replace=True)
    async with connect(server, wire) as c:
        c.session.access_token, c.session.principal = NOBODY, "nobody"
        with pytest.raises(RpcError):
            await c.request("resources/read", {"uri": "skill://pdf-processing/references/FORMS.md"})
        assert c.notifications_of("notifications/resources/updated") == []


def test_hidden_files_and_caches_beside_a_skill_are_not_served(tmp_path):
    directory = write_skill(tmp_path, "refunds", {"SKILL.md": md("refunds"), "notes.md": "n", ".DS_Store": b"x",
                                                   ".git/config": "[core]", "scripts/__pycache__/a.pyc": b"\0",
                                                   "scripts/run.py": "print(1)\n"})
    server = Server("skills")
    skill = server.add_skill("refunds", directory)
    assert list(skill.files) == ["SKILL.md", "notes.md", "scripts/run.py"]


def test_a_link_out_of_the_skill_directory_is_refused(tmp_path):
    directory = write_skill(tmp_path, "refunds", {"SKILL.md": md("refunds")})
    (tmp_path / "secret.txt").write_text("secret")
    (directory / "leak.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(SkillError, match="leads outside the skill's directory"):
        Server("skills").add_skill("refunds", directory)
