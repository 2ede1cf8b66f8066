"""Skills (SEP-2640, ``io.modelcontextprotocol/skills``): what a server that declares the
extension must hold to. Each rule is skipped for a server that does not declare it.

spec/requirements.md numbers no item of the extension: the rules cite VN-05 (a side that
declares an extension follows it) and, where the base protocol is involved, its own items.
"""

from __future__ import annotations

from typing import Any

from ...protocol.skills import (
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    SKILL_FILE,
    SKILLS_EXTENSION,
    SkillError,
    check_skill_name,
    content_bytes,
    digest_of,
    parse_frontmatter,
    skill_name_of,
)
from ..context import CheckContext, describe
from ..model import Finding
from ..registry import rule

#: how many skills, and files of them, the checker reads back: enough to judge, bounded for
#: servers with large catalogs
MAX_SKILLS_READ = 20
MAX_FILES_READ = 100
_SOURCE = "SEP-2640 (modelcontextprotocol.io/seps/2640-skills-extension)"
_NOT_DECLARED = "the server does not declare the io.modelcontextprotocol/skills extension"


def _declared(ctx: CheckContext) -> Any:
    extensions = ctx.capability("extensions")
    if not isinstance(extensions, dict) or SKILLS_EXTENSION not in extensions:
        raise ctx.skip(_NOT_DECLARED)
    return extensions[SKILLS_EXTENSION]


async def _entries(ctx: CheckContext) -> list[dict[str, Any]]:
    _declared(ctx)
    entries = await ctx.listing("skills/list", "skills")
    if not entries:
        raise ctx.skip("skills/list is empty (allowed): no entry to judge")
    return entries


def _label(entry: dict[str, Any], index: int) -> str:
    return entry["uri"] if isinstance(entry.get("uri"), str) else f"skills[{index}]"


_FIXES_BUILT_IN = "built in: server.add_skill / skills_from compute it from the files"


@rule(
    "skills.capability", example="skills_no_resources",
    keyword="MUST", requirements=("VN-05", "RS-01", "LC-06"),
    title="a server declaring the skills extension declares resources, a settings object, and serves "
    "skills/list and skills/get (and resources/directory/read with directoryRead)",
    fix="declare capabilities.extensions[\"io.modelcontextprotocol/skills\"] as an object ({} or "
    "{\"directoryRead\": true}) next to the resources capability, and answer skills/list, skills/get "
    "(-32602 for an unknown URI) and, when directoryRead is declared, resources/directory/read",
    quote="A server that declares this extension MUST implement skills/list and skills/get. [...] A server "
    "that additionally declares directoryRead: true MUST implement resources/directory/read. [...] A server "
    "declaring this extension therefore MUST also declare the resources capability. [...] If the URI does "
    "not identify a skill the server serves, the server MUST return error -32602 (Invalid params).",
    source=_SOURCE + " Capability Declaration, Retrieval via skills/get",
    fixes={
        "mcpkit": "built in: registering a skill declares the extension and serves its methods",
        "sdk": "declare the extension in the initialization options' capabilities and register custom "
        "request handlers for skills/list and skills/get",
        "fastmcp": "FastMCP's SkillsProvider predates SEP-2640: serve skills/list and skills/get yourself",
        "ts": "declare capabilities.extensions and setRequestHandler for skills/list and skills/get",
    },
)
async def check_capability(ctx: CheckContext) -> list[Finding]:
    settings = _declared(ctx)
    out: list[Finding] = []
    if not isinstance(settings, dict):
        out.append(ctx.fail(f"the extension's settings are {type(settings).__name__}, not an object ({{}} for none)"))
        settings = {}
    if not ctx.has("resources"):
        out.append(ctx.fail("the server declares the skills extension but not the resources capability, "
                            "through which its skill files are read"))
    try:
        listed = await ctx.read_list("skills/list", "skills")
    except Exception as exc:  # noqa: BLE001
        return [*out, ctx.fail(f"skills/list failed: {describe(exc)}", method="skills/list")]
    probe = next((e["uri"] for e in listed if isinstance(e, dict) and isinstance(e.get("uri"), str)), None)
    if probe is not None:
        try:
            got = await ctx.request("skills/get", {"uri": probe})
            if not isinstance(got, dict) or not isinstance(got.get("skill"), dict) or got["skill"].get("uri") != probe:
                out.append(ctx.fail(f"skills/get of {probe} did not return its entry", method="skills/get"))
            elif "nextCursor" in got:
                out.append(ctx.fail("skills/get carries a nextCursor: a single entry is not a list"))
        except Exception as exc:  # noqa: BLE001
            out.append(ctx.fail(f"skills/get of the listed {probe} failed: {describe(exc)}", method="skills/get"))
    try:
        await ctx.request("skills/get", {"uri": "skill://mcpkit-check-no-such-skill/SKILL.md"})
        out.append(ctx.fail("skills/get of a skill nobody serves returned a result; expected -32602"))
    except Exception as exc:  # noqa: BLE001
        if getattr(exc, "code", None) != -32602:
            out.append(ctx.fail(f"skills/get of an unknown skill got {describe(exc)}; expected -32602"))
    if settings.get("directoryRead") is True and probe is not None:
        root = probe[: -len("/" + SKILL_FILE)] if probe.endswith("/" + SKILL_FILE) else probe
        try:
            await ctx.request("resources/directory/read", {"uri": root})
        except Exception as exc:  # noqa: BLE001
            out.append(ctx.fail(f"directoryRead is declared but resources/directory/read of {root} failed: "
                                f"{describe(exc)}", method="resources/directory/read"))
    directory = " and directory reads" if settings.get("directoryRead") is True else ""
    return out or [ctx.ok(f"declared with resources; skills/list, skills/get{directory} answer")]


@rule(
    "skills.names", example="skills_bad_name",
    keyword="MUST", requirements=("VN-05",),
    title="each skill's URI ends in <name>/SKILL.md, and the name keeps the Agent Skills naming rules",
    fix="serve each skill at <scheme>://<path>/<name>/SKILL.md where <name> is its frontmatter name: 1-64 "
    "lowercase letters, digits and hyphens, no hyphen first, last or twice in a row",
    quote="The final segment of <skill-path> MUST equal the skill's name as declared in its SKILL.md "
    "frontmatter. [...] The final segment, being the skill name, MUST satisfy the Agent Skills "
    "specification's naming rules.",
    source=_SOURCE + " Resource Mapping",
    fixes={"mcpkit": "built in: a skill whose path and name disagree, or whose name breaks the rules, is "
                     "refused when it is registered",
           "sdk": "name each skill's directory after its frontmatter name", "fastmcp": "name each skill's "
           "directory after its frontmatter name", "ts": "name each skill's directory after its frontmatter name"},
)
async def check_names(ctx: CheckContext) -> list[Finding]:
    out = []
    for i, entry in enumerate(await _entries(ctx)):
        uri, front = entry.get("uri"), entry.get("frontmatter")
        name = front.get("name") if isinstance(front, dict) else None
        if not isinstance(uri, str) or skill_name_of(uri) is None:
            out.append(ctx.fail(f"{_label(entry, i)}: the entry's uri does not end in /<name>/{SKILL_FILE}"))
            continue
        why = check_skill_name(skill_name_of(uri))
        if why is not None:
            out.append(ctx.fail(f"{uri}: {why}", uri=uri))
        elif skill_name_of(uri) != name:
            out.append(ctx.fail(f"{uri}: the last path segment {skill_name_of(uri)!r} is not the frontmatter "
                                f"name {name!r}", uri=uri))
    return out or [ctx.ok("every skill's URI ends in its valid name")]


@rule(
    "skills.frontmatter", example="skills_frontmatter_differs",
    keyword="MUST", requirements=("VN-05",),
    title="each entry's frontmatter is the SKILL.md's own YAML frontmatter, with name and description",
    fix="render the SKILL.md's frontmatter verbatim as the entry's frontmatter (every field, unchanged), "
    "and begin every SKILL.md with YAML frontmatter holding at least name and description",
    quote="SKILL.md MUST begin with YAML frontmatter containing at minimum the name and description fields "
    "[...] The frontmatter object MUST be identical in content to the frontmatter of the SKILL.md it describes.",
    source=_SOURCE + " Skill Format, Frontmatter",
    fixes={"mcpkit": "built in: the entry's frontmatter is parsed from the SKILL.md served",
           "sdk": "yaml.safe_load the frontmatter block of the file you serve, never a hand-kept copy",
           "fastmcp": "yaml.safe_load the frontmatter block of the file you serve",
           "ts": "parse the frontmatter of the file you serve (the yaml package), never a hand-kept copy"},
)
async def check_frontmatter(ctx: CheckContext) -> list[Finding]:
    out = []
    for i, entry in enumerate((await _entries(ctx))[:MAX_SKILLS_READ]):
        front, uri = entry.get("frontmatter"), entry.get("uri")
        if not isinstance(front, dict) or not all(isinstance(front.get(k), str) and front[k] for k in
                                                  ("name", "description")):
            out.append(ctx.fail(f"{_label(entry, i)}: the entry's frontmatter lacks a name or description"))
            continue
        if not isinstance(uri, str):
            continue  # skills.names says so
        try:
            data = content_bytes(await ctx.request("resources/read", {"uri": uri}))
        except Exception as exc:  # noqa: BLE001
            out.append(ctx.fail(f"{uri}: resources/read of the SKILL.md failed: {describe(exc)}", uri=uri))
            continue
        try:
            parsed = parse_frontmatter(data.decode("utf-8")) if data is not None else None
        except (UnicodeDecodeError, SkillError) as exc:
            out.append(ctx.fail(f"{uri}: its frontmatter does not parse ({exc})", uri=uri))
            continue
        if parsed is None:
            out.append(ctx.fail(f"{uri}: the SKILL.md does not begin with --- delimited YAML frontmatter", uri=uri))
        elif parsed != front:
            fields = sorted(k for k in {*parsed, *front} if parsed.get(k) != front.get(k))
            out.append(ctx.fail(f"{uri}: the entry's frontmatter differs from the file's in {', '.join(fields)}",
                                uri=uri, fields=fields))
    return out or [ctx.ok("every entry's frontmatter is its SKILL.md's")]


@rule(
    "skills.digests", example="skills_wrong_digest",
    keyword="MUST", requirements=("VN-05", "RS-04"),
    title="each skill's resources list every file once, SKILL.md included, with sha256 digests and sizes "
    "that match what resources/read returns",
    fix="list every file of the skill once in resources, each {uri, digest: \"sha256:<64 lowercase hex>\", "
    "size} computed from the bytes resources/read serves (or \"resources\": \"dynamic\" for generated content)",
    quote="When present, resources MUST be complete: it lists every file of the skill, each exactly once, "
    "including an entry matching the skill's top-level uri [...] Each uri MUST be the skill's SKILL.md or a "
    "file within the skill's directory. Each entry MUST carry size [...] Digests are SHA-256 hashes of an "
    "artifact's raw bytes, formatted as sha256:{hex} where {hex} is 64 lowercase hexadecimal characters.",
    source=_SOURCE + " Resources, Integrity and verification",
    fixes={"mcpkit": _FIXES_BUILT_IN, "sdk": "hashlib.sha256(raw_bytes).hexdigest() of the bytes you serve",
           "fastmcp": "hashlib.sha256(raw_bytes).hexdigest() of the bytes you serve",
           "ts": "createHash('sha256').update(bytes).digest('hex') of the bytes you serve"},
)
async def check_digests(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    budget = MAX_FILES_READ
    for i, entry in enumerate(await _entries(ctx)):
        uri, resources = entry.get("uri"), entry.get("resources")
        label = _label(entry, i)
        if resources == "dynamic":
            continue
        if not isinstance(resources, list):
            out.append(ctx.fail(f"{label}: resources is {resources!r:.40}, neither a list nor \"dynamic\""))
            continue
        uris = [r.get("uri") for r in resources if isinstance(r, dict)]
        if uri not in uris:
            out.append(ctx.fail(f"{label}: resources has no entry for the SKILL.md itself"))
        if len(set(map(str, uris))) != len(uris) or len(uris) != len(resources):
            out.append(ctx.fail(f"{label}: resources lists a file twice, or an entry that is not an object"))
        root = uri[: -len(SKILL_FILE)] if isinstance(uri, str) and uri.endswith("/" + SKILL_FILE) else None
        for item in resources:
            if not isinstance(item, dict):
                continue
            file_uri, digest, size = item.get("uri"), item.get("digest"), item.get("size")
            if not isinstance(file_uri, str) or (root is not None and not file_uri.startswith(root)):
                out.append(ctx.fail(f"{label}: {file_uri!r} is not a file within the skill's directory"))
                continue
            if not (isinstance(digest, str) and len(digest) == 71 and digest.startswith("sha256:")
                    and all(c in "0123456789abcdef" for c in digest[7:])):
                out.append(ctx.fail(f"{file_uri}: digest {digest!r} is not sha256:<64 lowercase hex>", uri=file_uri))
                continue
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                out.append(ctx.fail(f"{file_uri}: size {size!r} is not a byte count", uri=file_uri))
                continue
            if budget <= 0:
                continue
            budget -= 1
            try:
                data = content_bytes(await ctx.request("resources/read", {"uri": file_uri}))
            except Exception as exc:  # noqa: BLE001
                out.append(ctx.fail(f"{file_uri}: listed, but resources/read failed: {describe(exc)}", uri=file_uri))
                continue
            if data is None:
                out.append(ctx.fail(f"{file_uri}: resources/read returned no single text or blob", uri=file_uri))
            elif len(data) != size:
                out.append(ctx.fail(f"{file_uri}: {len(data)} bytes served, {size} listed", uri=file_uri))
            elif digest_of(data) != digest:
                out.append(ctx.fail(f"{file_uri}: the served bytes' digest is {digest_of(data)}, {digest} listed",
                                    uri=file_uri))
    return out or [ctx.ok("every listed file is served as its digest and size say")]


@rule(
    "skills.limits", example="skills_no_resources",
    keyword="SHOULD", requirements=("VN-05",),
    title="no skill has more than 512 files or 16 MiB of them",
    fix="split a skill that has more than 512 files or more than 16 MiB (16,777,216 bytes) of them",
    quote="Servers SHOULD NOT serve a skill that exceeds either limit; a skill that does is not guaranteed to "
    "be loadable by any conforming host. (Resources per skill: 512 entries; total file size per skill: "
    "16 MiB (16,777,216 bytes).)",
    source=_SOURCE + " Limits",
    fixes={"mcpkit": "built in: such a skill is refused when it is registered", "sdk": "split the skill",
           "fastmcp": "split the skill", "ts": "split the skill"},
)
async def check_limits(ctx: CheckContext) -> list[Finding]:
    out = []
    for i, entry in enumerate(await _entries(ctx)):
        resources = entry.get("resources")
        if not isinstance(resources, list):
            continue
        total = sum(r.get("size") for r in resources if isinstance(r, dict) and isinstance(r.get("size"), int))
        if len(resources) > MAX_SKILL_FILES:
            out.append(ctx.fail(f"{_label(entry, i)}: {len(resources)} files (at most {MAX_SKILL_FILES})"))
        if total > MAX_SKILL_BYTES:
            out.append(ctx.fail(f"{_label(entry, i)}: {total} bytes of files (at most {MAX_SKILL_BYTES})"))
    return out or [ctx.ok("every skill is within 512 files and 16 MiB")]
