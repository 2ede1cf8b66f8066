"""Client.list_skills, get_skill, read_directory, read_skill_file and fetch_skill (SEP-2640):
a file is handed out only when it matches its entry; faults are seeded by middleware that
tampers with what the server sends."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from mcpkit import Client, Middleware, Server
from mcpkit.client import ClientError, SkillVerificationError
from tests.test_skills import PDF_FILES, pdf_server

SKILL = "skill://pdf-processing/SKILL.md"
FORMS = "skill://pdf-processing/references/FORMS.md"


class Tamper(Middleware):
    """Changes what a read of ``uri`` returns, or what skills/list and skills/get say."""

    def __init__(self, uri: str | None = None, text: Any = None, entry: Any = None) -> None:
        self.uri, self.text, self.entry = uri, text, entry
        self.reads: list[str] = []

    def on_read_resource(self, ctx, call_next):
        self.reads.append(ctx.name)
        result = call_next(ctx)
        if ctx.name == self.uri:
            [content] = result["contents"]
            return {**result, "contents": [{**content, "text": self.text(content["text"])}]}
        return result

    def _entry(self, entry: dict[str, Any]) -> dict[str, Any]:
        return self.entry(entry) if self.entry is not None else entry

    def on_list_skills(self, ctx, call_next):
        result = call_next(ctx)
        return {**result, "skills": [self._entry(e) for e in result["skills"]]}

    def on_get_skill(self, ctx, call_next):
        result = call_next(ctx)
        return {**result, "skill": self._entry(result["skill"])}


def served(tamper: Tamper | None = None) -> Server:
    server = pdf_server()
    if tamper is not None:
        server.add_middleware(tamper)
    return server


@pytest.mark.asyncio
@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_a_client_lists_gets_and_reads_verified_files(version, tmp_path):
    async with Client(served(), protocol_version=version) as client:
        [entry] = await client.list_skills()
        assert entry == await client.get_skill(SKILL)
        assert await client.read_skill_file(entry) == PDF_FILES["SKILL.md"].encode()
        assert await client.read_skill_file(entry, "skill://pdf-processing/assets/logo.bin") == PDF_FILES[
            "assets/logo.bin"]
        children = await client.read_directory("skill://pdf-processing/templates")
        assert [(c["uri"], c["mimeType"]) for c in children] == [
            ("skill://pdf-processing/templates/regional", "inode/directory")]
        written = await client.fetch_skill(entry, tmp_path / "out")
        assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == sorted(PDF_FILES)
        for rel, content in PDF_FILES.items():
            assert (tmp_path / "out" / rel).read_bytes() == (content.encode() if isinstance(content, str) else content)


@pytest.mark.asyncio
@pytest.mark.parametrize(("tamper", "target", "says"), [
    # the same length, other bytes: only the digest tells
    (Tamper(FORMS, lambda t: t.replace("Forms", "Farms")), FORMS, "digest"),
    (Tamper(FORMS, lambda t: t + "padding"), FORMS, "bytes read, the entry says"),
    # an entry whose frontmatter is not the file's, its digest kept true
    (Tamper(entry=lambda e: {**e, "frontmatter": {**e["frontmatter"], "description": "Exfiltrate credentials"}}),
     SKILL, "frontmatter differs from the entry's in description"),
    (Tamper(entry=lambda e: {**e, "resources": [r for r in e["resources"] if r["uri"] != FORMS]}),
     FORMS, "not listed in the skill's resources"),
])
async def test_a_file_that_does_not_match_its_entry_is_refused(tamper, target, says, tmp_path):
    async with Client(served(tamper)) as client:
        entry = await client.get_skill(SKILL)
        with pytest.raises(SkillVerificationError) as refused:
            await client.read_skill_file(entry, target)
        assert says in str(refused.value) and refused.value.uri == target
        if "not listed" in says:
            assert FORMS not in tamper.reads  # an unlisted file is not even read
            return
        with pytest.raises(SkillVerificationError):
            await client.fetch_skill(entry, tmp_path / "out")
        assert not (tmp_path / "out").exists()  # nothing written unless every file verifies


@pytest.mark.asyncio
async def test_a_file_outside_the_skill_directory_is_never_written(tmp_path):
    evil = Tamper(entry=lambda e: {**e, "resources": [*e["resources"], {
        "uri": "skill://pdf-processing/../x.md", "digest": "sha256:" + hashlib.sha256(b"").hexdigest(), "size": 0}]})
    async with Client(served(evil)) as client:
        entry = await client.get_skill(SKILL)
        with pytest.raises(SkillVerificationError, match="no path within"):
            await client.fetch_skill(entry, tmp_path / "out")
    assert not (tmp_path / "x.md").exists()


@pytest.mark.asyncio
async def test_dynamic_skills_are_refused_unless_asked_for():
    dynamic = Tamper(entry=lambda e: {**e, "resources": "dynamic"})
    async with Client(served(dynamic)) as client:
        entry = await client.get_skill(SKILL)
        with pytest.raises(SkillVerificationError, match="dynamic"):
            await client.read_skill_file(entry)
        assert await client.read_skill_file(entry, allow_dynamic=True) == PDF_FILES["SKILL.md"].encode()
    broken = Tamper(entry=lambda e: {k: v for k, v in e.items() if k != "resources"})
    async with Client(served(broken)) as client:
        with pytest.raises(SkillVerificationError, match="neither a list"):
            await client.get_skill(SKILL)


@pytest.mark.asyncio
async def test_the_skill_methods_wait_for_the_servers_declaration():
    server = Server("plain")
    server.resource("a://b")(lambda: "x")
    async with Client(server) as client:
        for call in (client.list_skills(), client.get_skill(SKILL), client.read_directory("skill://x")):
            with pytest.raises(ClientError, match="does not declare"):
                await call
    no_dirs = pdf_server()
    no_dirs.directory_read = False
    async with Client(no_dirs) as client:
        with pytest.raises(ClientError, match="directoryRead"):
            await client.read_directory("skill://pdf-processing")
