"""Skills relayed from an upstream (SEP-2640, ``io.modelcontextprotocol/skills``): docs/proxy.md.

An upstream that declares the extension has its ``skills/list`` entries registered in the
proxy's Server as :class:`RelayedSkill` s, so the Server's own skill methods answer for them
(``skills/list``, ``skills/get``, ``resources/directory/read``), with the same pipeline, scopes
and hiding as its own skills. Only the entries are kept: each file is a resource of the Server
whose read is forwarded upstream when asked, never fetched ahead (the proxy keeps no upstream's
content, docs/proxy.md "How it works").

Names. A skill's name is the last segment of its path and the ``name`` of its SKILL.md
frontmatter, which its digest covers: renaming it would break the digest a client verifies. So
a skill is namespaced by its path, as every resource URI of the upstream is (compose.Names):
``skill://acme/refunds/SKILL.md`` of upstream ``files`` is ``skill://files/acme/refunds/SKILL.md``,
still named ``refunds``, its files' URIs rewritten the same way, their digests and sizes as the
upstream listed them. A path's first segment is then the prefix, which no upstream chooses:
two upstreams' skills cannot meet, whatever their names.

What a read passes on is checked against the digest the upstream listed: a client that does not
verify (the official SDKs do not) is not handed a file that differs from its entry, and the
upstream's skills are listed again, as the change it most likely is.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from ..client import ClientError, RpcError
from ..protocol.errors import INTERNAL_ERROR, McpError
from ..protocol.skills import (
    MAX_DESCRIPTION,
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    SKILL_FILE,
    SKILLS_EXTENSION,
    SkillError,
    check_skill_name,
    content_bytes,
    digest_of,
)
from ..server.context import Context
from ..server.skills import Skill, check_skill_path
from .hub import changing
from .mirroring import is_server

__all__ = ["RelayedSkill", "SkillRelay", "relayable"]

log = logging.getLogger("mcpkit.proxy")
_SCHEME = "skill://"


class RelayedSkill(Skill):
    """An upstream's skill as the proxy serves it: its entry (URIs rewritten) and, per file,
    the upstream's URI that a read is forwarded to. ``files`` maps each file to its digest:
    what tells a changed file from an unchanged one when the skill is registered again."""

    __slots__ = ("upstream", "items", "sizes", "sources", "directory_read")

    def __init__(self, upstream: Any, path: str, entry: dict[str, Any], files: dict[str, dict[str, Any]], *,
                 scopes: tuple[str, ...] = (), directory_read: bool = True) -> None:
        # Skill.__init__ reads bytes, which a relayed skill does not hold: its entry was checked
        # by relayable()
        self.upstream = upstream
        self.path = path
        self.frontmatter = entry["frontmatter"]
        self.name = self.frontmatter["name"]
        self.scopes = scopes
        self.root = f"{_SCHEME}{path}"
        self.uri = f"{self.root}/{SKILL_FILE}"
        self.directory_read = directory_read
        ordered = [SKILL_FILE, *sorted(rel for rel in files if rel != SKILL_FILE)]
        self.files = {rel: files[rel]["digest"] for rel in ordered}  # type: ignore[assignment]
        self.sizes = {rel: files[rel]["size"] for rel in ordered}
        self.sources = {rel: files[rel]["uri"] for rel in ordered}
        self.items = [{**files[rel], "uri": self.uri_of(rel)} for rel in ordered]
        self._digests = dict(self.files)

    def resources(self) -> list[dict[str, Any]]:
        return [dict(item) for item in self.items]

    def same(self, other: RelayedSkill) -> bool:
        return (self.frontmatter, self.items, self.sources, self.scopes, self.directory_read) == \
            (other.frontmatter, other.items, other.sources, other.scopes, other.directory_read)

    def size_of(self, rel: str) -> int:
        return int(self.sizes[rel])

    def reader(self, rel: str) -> Any:
        upstream, source, digest, size = self.upstream, self.sources[rel], self.files[rel], self.sizes[rel]

        async def read(ctx: Context) -> Any:
            contents = await upstream._read(ctx, source)
            data = content_bytes({"contents": contents})
            if data is not None and (len(data), digest_of(data)) == (size, digest):
                return contents
            if upstream.redaction is not None and data is not None and b"[redacted:" in data:
                # masked (proxy/redaction.py): a copy that no longer matches its digest is no file
                # of the skill, and the client would refuse it; say why here instead
                raise McpError(INTERNAL_ERROR, f"The skill file {self.uri_of(rel)[:200]} from upstream "
                               f"{upstream.name!r} was withheld: it holds a secret, and a masked copy would not "
                               "match its digest.", {"uri": self.uri_of(rel)})
            upstream.skills_changed()
            raise McpError(INTERNAL_ERROR, f"upstream {upstream.name} answered {source[:200]} with content that does "
                           "not match the digest and size its skill entry lists; the proxy lists its skills again: "
                           "get the entry again (skills/get) before reading it", {"uri": self.uri_of(rel)})

        return read


def relayable(entry: Any, mapped: Any) -> tuple[str, dict[str, dict[str, Any]]]:
    """(the skill's path served here, {file path: {uri, digest, size}}) of one skills/list
    entry, or a SkillError saying why it is not relayed. ``mapped``: the URI here of an
    upstream's URI (compose.Names.uri). The rules are the ones mcpkit's own skills obey
    (server/skills.py), since the proxy serves them as its own; a file listed outside the
    skill's directory would have the proxy forward reads of any URI the upstream names."""
    if not isinstance(entry, dict) or not isinstance(entry.get("uri"), str):
        raise SkillError("an entry without a uri")
    uri = entry["uri"]
    front = entry.get("frontmatter")
    if not isinstance(front, dict):
        raise SkillError(f"{uri[:200]}: the entry has no frontmatter object")
    if entry.get("resources") == "dynamic":
        raise SkillError(f"{uri[:200]}: its resources are \"dynamic\" (no manifest), which the proxy does not relay")
    tail = "/" + SKILL_FILE
    if not uri.startswith(_SCHEME) or not uri.endswith(tail) or len(uri) <= len(_SCHEME) + len(tail):
        raise SkillError(f"{uri[:200]}: not a skill://<skill-path>/SKILL.md URI")
    own = uri[len(_SCHEME):-len(tail)]
    why = check_skill_name(front.get("name"))
    if why is not None:
        raise SkillError(f"{uri[:200]}: frontmatter name {why}")
    if own.rsplit("/", 1)[-1] != front["name"]:
        raise SkillError(f"{uri[:200]}: the last segment of its path is not its frontmatter name {front['name']!r}")
    description = front.get("description")
    if not isinstance(description, str) or not description.strip() or len(description) > MAX_DESCRIPTION:
        raise SkillError(f"{uri[:200]}: the frontmatter description is not 1 to {MAX_DESCRIPTION} characters")
    served = mapped(uri)[len(_SCHEME):-len(tail)]
    check_skill_path(served)
    resources = entry.get("resources")
    if not isinstance(resources, list):
        raise SkillError(f"{uri[:200]}: the entry's resources is not a list")
    root = f"{_SCHEME}{own}/"
    files: dict[str, dict[str, Any]] = {}
    for item in resources:
        if not isinstance(item, dict) or not isinstance(item.get("uri"), str) or not item["uri"].startswith(root):
            raise SkillError(f"{uri[:200]}: a listed file is not under {root[:200]}")
        rel = item["uri"][len(root):]
        digest, size = item.get("digest"), item.get("size")
        if any(part in ("", ".", "..") for part in rel.split("/")) or rel in files:
            raise SkillError(f"{uri[:200]}: the listed file path {rel[:200]!r} is empty, repeated, or has '.' or '..'")
        if not isinstance(digest, str) or not digest.startswith("sha256:") or isinstance(size, bool) \
                or not isinstance(size, int) or size < 0:
            raise SkillError(f"{uri[:200]}: {rel[:200]!r} is listed without a sha256 digest and a size")
        files[rel] = dict(item)
    if SKILL_FILE not in files:
        raise SkillError(f"{uri[:200]}: its resources do not list its {SKILL_FILE}")
    if len(files) > MAX_SKILL_FILES or sum(f["size"] for f in files.values()) > MAX_SKILL_BYTES:
        # SEP-2640 "Limits": servers SHOULD NOT serve more, and the proxy serves it as its own
        raise SkillError(f"{uri[:200]}: over the limits of {MAX_SKILL_FILES} files and {MAX_SKILL_BYTES} bytes")
    return served, files


class SkillRelay:
    """The skills half of an :class:`~mcpkit.proxy.upstream.Upstream` (a mixin, using its
    server, names, pin, tool policy and forwarding)."""

    server: Any
    target: Any
    names: Any
    pin: Any
    tool_policy: Any
    name: str
    redaction: Any
    _relayed_skills: dict[str, RelayedSkill]
    _dirty: set[str]

    def skills_settings(self, client: Any) -> dict[str, Any] | None:
        """The upstream's settings of the extension, None when it does not declare it. A Server
        upstream (a profile's hub) is asked now: what it relays may have come after this
        connection's initialize."""
        if is_server(self.target):
            settings = self.target.skills_capability()
        elif client is None:
            return None
        else:
            settings = ((client.server_capabilities or {}).get("extensions") or {}).get(SKILLS_EXTENSION)
        return settings if isinstance(settings, dict) else None

    def relays_skill_file(self, client: Any, desc: Any) -> bool:
        """Whether a resource the upstream lists is a file of its skills, served as such (not
        mirrored as a plain resource: a skill that policy hides would show through it)."""
        return isinstance(desc, dict) and isinstance(desc.get("uri"), str) and desc["uri"].startswith(_SCHEME) \
            and self.skills_settings(client) is not None

    async def _list_skills(self, client: Any) -> tuple[dict[str, Any] | None, list[Any]]:
        """(the upstream's settings of the extension, every entry of its skills/list)."""
        settings = self.skills_settings(client)
        entries: list[Any] = []
        if settings is None:
            return None, entries
        try:
            # not list_skills(): a Server upstream (a profile's hub) may declare the extension
            # only after this connection's initialize; _paginate refuses a repeated cursor
            entries = await client._paginate("skills/list", "skills")
        except (RpcError, ClientError) as exc:
            log.warning("upstream %s: skills/list failed (%s); its skills are not relayed until it lists them",
                        self.name, exc)
            entries = []
        return settings, entries

    def _apply_skills(self, settings: dict[str, Any] | None, entries: list[Any]) -> None:
        with changing(self.server):
            self._apply_skills_locked(settings, entries)

    def _apply_skills_locked(self, settings: dict[str, Any] | None, entries: list[Any]) -> None:
        server = self.server
        if settings is not None and "skills" in self._declared(frozenset({"skills"})):
            server._skill_relays[id(self)] = settings.get("directoryRead") is True
        else:
            server._skill_relays.pop(id(self), None)
            entries = []
        directory = server._skill_relays.get(id(self), False)
        entries = [e for e in entries if isinstance(e, dict) and isinstance(e.get("uri"), str)]
        if self.pin is not None:  # the scan reads each frontmatter; one it withholds is not relayed
            entries = self.pin.screen("skills", entries)[0]
        wanted: dict[str, RelayedSkill] = {}
        for entry in entries:
            try:
                path, files = relayable(entry, self.names.uri)
            except SkillError as exc:
                log.warning("upstream %s: skill not relayed: %s", self.name, exc)
                continue
            rule = self.tool_policy.skill_settings(path) if self.tool_policy is not None else {}
            if rule.get("hidden"):
                continue  # not registered at all: invisible on every route, resources/* included
            scopes = tuple(dict.fromkeys([*self._skill_scopes(entry["uri"]), *rule.get("scopes", ())]))
            skill = RelayedSkill(self, path, entry, files, scopes=scopes, directory_read=directory)
            wanted[skill.uri] = skill
        for uri in [u for u in self._relayed_skills if u not in wanted]:
            del self._relayed_skills[uri]
            with contextlib.suppress(KeyError):
                server.remove_skill(uri)
        for uri, skill in wanted.items():
            old = self._relayed_skills.get(uri)
            if old is not None and old.same(skill):
                continue
            if old is None and uri in server._skills:
                log.warning("upstream %s: skill %s is already served by something else; not relayed (use %s prefix)",
                            self.name, uri, "a" if self.names.prefix is None else "another")
                continue
            try:
                server.add_skill(skill.path, skill, replace=True)
            except SkillError as exc:
                log.warning("upstream %s: skill %s cannot be served: %s", self.name, uri, exc)
                continue
            self._relayed_skills[uri] = skill

    def _skill_scopes(self, upstream_uri: str) -> tuple[str, ...]:
        """A mounted Server's own skill's scopes: the child, driven without the caller's token,
        cannot check them; the parent's pipeline does (as for its tools, upstream._scopes)."""
        child = self.target
        skill = child._skills.get(upstream_uri) if is_server(child) else None
        return tuple(skill.scopes) if skill is not None else ()

    def _withdraw_skills(self, *, declared: bool) -> None:
        """The relayed skills go (the upstream is down or closed); ``declared=False`` also stops
        declaring the extension for it (closed: it is not coming back)."""
        for uri in list(self._relayed_skills):
            self._relayed_skills.pop(uri, None)
            with contextlib.suppress(KeyError):
                self.server.remove_skill(uri)
        if not declared:
            self.server._skill_relays.pop(id(self), None)

    def skills_changed(self) -> None:
        """List the upstream's skills again, as a resources list_changed of its would."""
        self._loop.loop.call_soon_threadsafe(self._mark_dirty, "resources")

    if TYPE_CHECKING:  # provided by Upstream
        _loop: Any

        def _declared(self, kinds: frozenset[str]) -> frozenset[str]: ...
        def _mark_dirty(self, kind: str) -> None: ...
        async def _read(self, ctx: Context, upstream_uri: str) -> Any: ...
