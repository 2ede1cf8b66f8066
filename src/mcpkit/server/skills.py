"""Agent Skills served over MCP: the Skills extension (SEP-2640, ``io.modelcontextprotocol/skills``).

A skill is a directory with a ``SKILL.md`` (YAML frontmatter, then Markdown) and the files it
refers to. Each file is an ordinary resource at ``skill://<skill-path>/<file-path>``, read with
``resources/read`` through the one request pipeline like any other resource; the extension adds
``skills/list`` and ``skills/get`` (an entry: the ``SKILL.md`` URI, the frontmatter verbatim as
JSON, and ``{uri, digest, size}`` for every file) and, with ``directoryRead``,
``resources/directory/read`` (the direct children of a directory, subdirectories as
``inode/directory``).

What a skill must be is checked once, when it is registered, with one error naming the fix:
the Agent Skills naming rules for the name (SEP-2640 "Resource Mapping"), the final
``<skill-path>`` segment equal to the frontmatter ``name``, a ``SKILL.md`` that begins with
frontmatter holding ``name`` and ``description`` ("Skill Format"), and the per-skill limits of
512 files and 16 MiB ("Limits": servers SHOULD NOT serve more; mcpkit refuses to).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar, Union

from ..protocol.errors import INVALID_PARAMS, McpError
from ..protocol.skills import (  # noqa: F401 - SkillError and the format's names are this module's API too
    DIRECTORY_MIME_TYPE,
    MAX_DESCRIPTION,
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    SKILL_FILE,
    SKILLS_EXTENSION,
    SkillError,
    check_skill_name,
    digest_of,
    parse_frontmatter,
)

__all__ = [
    "DIRECTORY_MIME_TYPE",
    "MAX_SKILL_BYTES",
    "MAX_SKILL_FILES",
    "SKILLS_EXTENSION",
    "Skill",
    "SkillError",
    "SkillRegistrations",
    "check_skill_name",
    "check_skill_path",
    "digest_of",
    "parse_frontmatter",
]

Source = Union[str, "os.PathLike[str]", Mapping[str, Union[str, bytes]]]
F = TypeVar("F", bound=Callable[..., Any])
#: RFC 3986 reg-name (unreserved, sub-delims, pct-encoded): the first <skill-path> segment is
#: the URI's authority (SEP-2640 "Resource Mapping": SHOULD; mcpkit builds the URI, so it must)
_REG_NAME = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+$")
_SEGMENT = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+$")


def _check_path(path: str) -> list[str]:
    if not isinstance(path, str) or not path or path.startswith("/") or path.endswith("/"):
        raise SkillError(f"skill path {path!r}: give segments separated by '/', e.g. 'acme/billing/refunds'")
    segments = path.split("/")
    for i, seg in enumerate(segments):
        if seg in ("", ".", "..") or not (_REG_NAME if i == 0 else _SEGMENT).match(seg):
            raise SkillError(f"skill path {path!r}: the segment {seg!r} is not a valid URI "
                             + ("authority (RFC 3986 reg-name)" if i == 0 else "path segment"))
    return segments


#: a skill path's segments, or a SkillError naming the segment (a relayed skill's path: proxy/skills.py)
check_skill_path = _check_path


def _check_file_path(skill: str, rel: str) -> str:
    pure = PurePosixPath(rel)
    if not rel or rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in rel.split("/")):
        raise SkillError(f"skill {skill!r}: the file path {rel!r} must be relative to the skill root, "
                         "'/'-separated, without '.' or '..'")
    return str(pure)


def _mime(rel: str) -> str | None:
    if rel.endswith(".md"):
        return "text/markdown"  # SEP-2640 "Resource Metadata": SKILL.md SHOULD be text/markdown
    import mimetypes  # reads the system's tables: only for a server with skills

    return mimetypes.guess_type(rel, strict=False)[0]


class Skill:
    """One skill: its path in the server's skill namespace, its files and its frontmatter."""

    __slots__ = ("path", "name", "frontmatter", "files", "scopes", "uri", "root", "_digests")

    #: whether resources/directory/read lists this skill's files (a skill relayed from an upstream
    #: that does not declare directoryRead is not listed there: proxy/skills.py)
    directory_read = True

    def __init__(self, path: str, files: Mapping[str, str | bytes], *, scopes: Sequence[str] = ()) -> None:
        segments = _check_path(path)
        self.path = path
        raw: dict[str, bytes] = {}
        for rel, content in files.items():
            rel = _check_file_path(path, rel)
            if isinstance(content, str):
                content = content.encode("utf-8")
            elif not isinstance(content, (bytes, bytearray)):
                raise SkillError(f"skill {path!r}: the content of {rel!r} is str or bytes, "
                                 f"not {type(content).__name__}")
            raw[rel] = bytes(content)
        if SKILL_FILE not in raw:
            raise SkillError(f"skill {path!r}: every skill has a {SKILL_FILE} at its root (SEP-2640 Skill Format)")
        try:
            text = raw[SKILL_FILE].decode("utf-8")
        except UnicodeDecodeError:
            raise SkillError(f"skill {path!r}: {SKILL_FILE} is not UTF-8 text") from None
        try:
            front = parse_frontmatter(text)
        except SkillError as exc:
            raise SkillError(f"skill {path!r}: {SKILL_FILE}: {exc}") from None
        if front is None:
            raise SkillError(f"skill {path!r}: {SKILL_FILE} must begin with YAML frontmatter between '---' "
                             "lines, with at least name and description")
        name, description = front.get("name"), front.get("description")
        why = check_skill_name(name)
        if why is not None:
            raise SkillError(f"skill {path!r}: frontmatter name {why}")
        if not isinstance(description, str) or not description.strip():
            raise SkillError(f"skill {path!r}: the frontmatter needs a non-empty description: what the skill "
                             "does and when to use it")
        if len(description) > MAX_DESCRIPTION:
            raise SkillError(f"skill {path!r}: the description has {len(description)} characters; "
                             f"the Agent Skills specification allows {MAX_DESCRIPTION}")
        if segments[-1] != name:
            raise SkillError(f"skill {path!r}: the last segment of the skill path must equal the frontmatter "
                             f"name {name!r} (SEP-2640 Resource Mapping); rename one of them")
        if len(raw) > MAX_SKILL_FILES:
            raise SkillError(f"skill {path!r}: {len(raw)} files; a skill has at most {MAX_SKILL_FILES} "
                             "(SEP-2640 Limits)")
        total = sum(len(b) for b in raw.values())
        if total > MAX_SKILL_BYTES:
            raise SkillError(f"skill {path!r}: {total} bytes of files; a skill has at most {MAX_SKILL_BYTES} "
                             "(16 MiB, SEP-2640 Limits)")
        self.name: str = name  # type: ignore[assignment]
        self.frontmatter = front
        # SKILL.md first, the rest in path order: the manifest reads the same every time
        self.files = {SKILL_FILE: raw[SKILL_FILE], **{k: raw[k] for k in sorted(raw) if k != SKILL_FILE}}
        self.scopes = tuple(scopes)
        self.root = f"skill://{path}"
        self.uri = f"{self.root}/{SKILL_FILE}"
        self._digests = {rel: digest_of(data) for rel, data in self.files.items()}

    @classmethod
    def from_directory(cls, path: str, directory: str | os.PathLike[str], *, scopes: Sequence[str] = ()) -> Skill:
        """The skill in ``directory``: every regular file under it, but for hidden ones (a name
        starting with ".", in any folder) and ``__pycache__``; symbolic links to files inside it
        are followed, anything leading outside it is refused."""
        root = Path(directory)
        if not (root / SKILL_FILE).is_file():
            raise SkillError(f"skill {path!r}: {os.fspath(root)!r} has no {SKILL_FILE}; point at the skill's "
                             "directory")
        real = root.resolve()
        files: dict[str, bytes] = {}
        for file in sorted(root.rglob("*")):
            rel = file.relative_to(root)
            if not file.is_file() or any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                continue  # what a checkout or an editor leaves beside the skill is not of it (.git, .DS_Store)
            resolved = file.resolve()
            if real not in resolved.parents:
                raise SkillError(f"skill {path!r}: {os.fspath(file)!r} leads outside the skill's directory")
            files[rel.as_posix()] = file.read_bytes()
        return cls(path, files, scopes=scopes)

    def uri_of(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    # what the server registers for each file (a relayed skill answers these otherwise: proxy/skills.py)

    def reader(self, rel: str) -> Callable[..., Any]:
        """The handler of the file's resource: its bytes, as text when they are UTF-8, so the
        bytes a client reads are the bytes the digest covers."""
        data = self.files[rel]
        try:
            value: str | bytes = data.decode("utf-8")
        except UnicodeDecodeError:
            value = data
        return lambda: value

    def size_of(self, rel: str) -> int:
        return len(self.files[rel])

    def mime_of(self, rel: str) -> str | None:
        return _mime(rel)

    def resources(self) -> list[dict[str, Any]]:
        """SEP-2640 "Resources": every file once, SKILL.md included, with its digest and size."""
        return [{"uri": self.uri_of(rel), "digest": self._digests[rel], "size": len(data)}
                for rel, data in self.files.items()]

    def entry(self) -> dict[str, Any]:
        """The skill entry of skills/list and skills/get (identical in both)."""
        return {"uri": self.uri, "frontmatter": self.frontmatter, "resources": self.resources()}

    def __repr__(self) -> str:
        return f"<Skill {self.uri}>"


def _find_skills(root: Path) -> list[Path]:
    """Every directory under ``root`` (``root`` included) holding a SKILL.md, outermost first;
    hidden folders are not looked into, as Skill.from_directory does not serve them."""
    found = [p.parent for p in root.rglob(SKILL_FILE) if p.is_file()
             and not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(root).parts)]
    return sorted(found, key=lambda p: (len(p.parts), p))


class SkillRegistrations:
    """The skill half of Server's registrations (mixed into Server)."""

    _skills: dict[str, Skill]
    #: id of each upstream whose skills are relayed here and that declares the extension -> its
    #: directoryRead (proxy/skills.py); the extension is declared while one is there
    _skill_relays: dict[int, bool]
    #: serve resources/directory/read and declare ``directoryRead: true`` (SEP-2640 "Directory Listing")
    directory_read: bool = True

    if TYPE_CHECKING:  # provided by Server and Registrations, which Server mixes this into
        _resources: dict[str, Any]
        _installed: dict[str, Any]

        def add_resource(self, *args: Any, **kwargs: Any) -> Any: ...
        def batch_changes(self, *, notify: bool = True) -> Any: ...
        def notify_resource_updated(self, uri: str) -> None: ...
        def subscriptions_forget(self, uri: str) -> None: ...
        def _changed(self, *kinds: str) -> None: ...
        def _install_step(self, key: str, step: Any) -> None: ...

    def add_skill(self, path: str, source: Source | Skill, *, scopes: Sequence[str] = (),
                  replace: bool = False) -> Skill:
        """Serve the skill at ``skill://<path>/SKILL.md`` from ``source``: its directory, or a
        mapping of file path to content (str or bytes). The last segment of ``path`` is the
        skill's name and must equal the frontmatter's. ``scopes``: the OAuth scopes a token
        needs to see it at all (listing, get, directory reads and its files' reads).
        ``replace=True`` swaps a served skill for its new content: the files that changed are
        announced with ``notifications/resources/updated``, added and removed ones with
        ``notifications/resources/list_changed``."""
        if isinstance(source, Skill):
            skill = source
        elif isinstance(source, Mapping):
            skill = Skill(path, source, scopes=scopes)
        elif isinstance(source, (str, os.PathLike)):
            skill = Skill.from_directory(path, source, scopes=scopes)
        else:
            raise SkillError(f"skill {path!r}: give its directory or a mapping of file path to content, "
                             f"not {type(source).__name__}")
        self._register_skills([skill], replace)
        return skill

    def skill(self, path: str, *, scopes: Sequence[str] = (), replace: bool = False) -> Callable[[F], F]:
        """Decorator: the function returns the skill's directory (a path) or its files (a
        mapping), and the skill is registered at once, as :meth:`add_skill` would::

            @server.skill("acme/billing/refunds")     # skill://acme/billing/refunds/SKILL.md
            def refunds():
                return Path(__file__).parent / "skills" / "refunds"
        """

        def deco(func: F) -> F:
            self.add_skill(path, func(), scopes=scopes, replace=replace)
            return func

        return deco

    def skills_from(self, root: str | os.PathLike[str], *, prefix: str | None = None, scopes: Sequence[str] = (),
                    replace: bool = False) -> list[Skill]:
        """Serve every skill under ``root``: each directory holding a ``SKILL.md``, at its path
        relative to ``root`` (``prefix/`` before it, when given). ``root`` itself may be a skill.
        A nested skill is served on its own too, and its files stay files of the skill around
        it (SEP-2640 "Nested skills")."""
        base = Path(root)
        if not base.is_dir():
            raise SkillError(f"skills_from: {os.fspath(root)!r} is not a directory")
        if prefix is not None:
            _check_path(prefix)
        skills = []
        for directory in _find_skills(base):
            rel = directory.relative_to(base).as_posix()
            if rel == ".":
                rel = directory.resolve().name
            path = rel if prefix is None else f"{prefix}/{rel}"
            skills.append(Skill.from_directory(path, directory, scopes=scopes))
        if not skills:
            raise SkillError(f"skills_from: no {SKILL_FILE} under {os.fspath(root)!r}")
        self._register_skills(skills, replace)
        return skills

    def remove_skill(self, path_or_uri: str) -> None:
        """Stop serving a skill (by its path or its SKILL.md URI) and the files no other skill lists."""
        skill = self._skill_named(path_or_uri)
        if skill is None:
            raise KeyError(f"no skill {path_or_uri!r}")
        with self.batch_changes():
            del self._skills[skill.uri]
            kept = self._skill_uris()
            for rel in skill.files:
                uri = skill.uri_of(rel)
                if uri not in kept and self._resources.pop(uri, None) is not None:
                    self.subscriptions_forget(uri)
            self._changed("resources")

    @property
    def skills(self) -> dict[str, Skill]:
        """The skills served, by the URI of their SKILL.md."""
        return dict(self._skills)

    # ------------------------------------------------------------------ internals

    def _skill_named(self, path_or_uri: str) -> Skill | None:
        found = self._skills.get(path_or_uri)
        if found is None:
            found = self._skills.get(f"skill://{path_or_uri}/{SKILL_FILE}")
        return found

    def _skill_uris(self, skills: Iterable[Skill] | None = None) -> dict[str, bytes]:
        return {s.uri_of(rel): data for s in (self._skills.values() if skills is None else skills)
                for rel, data in s.files.items()}

    def _register_skills(self, skills: list[Skill], replace: bool) -> None:
        new = {s.uri: s for s in skills}
        if len(new) < len(skills):
            raise SkillError("two skills share one path")
        clash = [uri for uri in new if uri in self._skills]
        if clash and not replace:
            raise SkillError(f"a skill {clash[0]!r} is already served (pass replace=True to replace it)")
        owned = self._skill_uris()
        for uri in self._skill_uris(skills):
            if uri in self._resources and uri not in owned:
                raise SkillError(f"{uri!r} is already a resource of this server that no skill serves")
        old = self._skill_uris([self._skills[u] for u in clash])
        with self.batch_changes():
            for skill in skills:
                self._skills[skill.uri] = skill
            served = self._skill_uris()
            for uri in set(old) - set(served):
                self._resources.pop(uri, None)
                self.subscriptions_forget(uri)
            for skill in skills:
                for rel, data in skill.files.items():
                    uri = skill.uri_of(rel)
                    existing = self._resources.get(uri)
                    if old.get(uri) == data and existing is not None and existing.scopes == skill.scopes:
                        continue  # unchanged: not announced as updated
                    self._add_skill_file(skill, rel)
            if self._skills and "skills" not in self._installed:
                self._install_step("skills", SkillGuard(self))
                self._install_step("skills-listing", SkillListing(self))
            self._changed("resources")
        for uri, data in old.items():  # after the batch: a subscriber re-reads the new content
            if uri in served and served[uri] != data:
                self.notify_resource_updated(uri)

    def _add_skill_file(self, skill: Skill, rel: str) -> None:
        is_manifest = rel == SKILL_FILE
        item = self.add_resource(
            skill.uri_of(rel), skill.reader(rel),
            # SEP-2640 "Resource Metadata": SKILL.md is named and described by its frontmatter
            name=skill.name if is_manifest else rel.rsplit("/", 1)[-1],
            description=skill.frontmatter["description"] if is_manifest else None,
            mime_type=skill.mime_of(rel), size=skill.size_of(rel), replace=True, scopes=skill.scopes,
        )
        item.skill = skill.uri

    # ------------------------------------------------------------------ what the methods answer

    def skill_visible(self, skill: Skill, missing: Callable[[tuple[str, ...]], bool] | None) -> bool:
        return not skill.scopes or missing is None or not missing(skill.scopes)

    def skills_page(self, cursor: Any, missing: Callable[[tuple[str, ...]], bool] | None,
                    page_size: int | None) -> dict[str, Any]:
        from .registration import _decode_cursor, _encode_cursor

        entries = [s.entry() for s in list(self._skills.values()) if self.skill_visible(s, missing)]
        start = 0 if cursor is None else _decode_cursor("skills", cursor)
        if start > len(entries) or (start and page_size is None):
            raise McpError(INVALID_PARAMS, "Invalid or expired cursor.", {"cursor": cursor})
        out: dict[str, Any]
        if page_size is None:
            out = {"skills": entries}
        else:  # an entry is atomic: a page holds whole entries (SEP-2640 "Enumeration")
            out = {"skills": entries[start:start + page_size]}
            if start + page_size < len(entries):
                out["nextCursor"] = _encode_cursor("skills", start + page_size)
        return out

    def skill_entry(self, uri: Any, missing: Callable[[tuple[str, ...]], bool] | None) -> dict[str, Any]:
        """skills/get: the entry, or -32602 for a URI that is not a skill served to this caller
        (SEP-2640 "Retrieval via skills/get"; a hidden skill reads as one that does not exist)."""
        if not isinstance(uri, str):
            raise McpError(INVALID_PARAMS, "skills/get needs a string 'uri' parameter.")
        skill = self._skills.get(uri)
        if skill is None or not self.skill_visible(skill, missing):
            raise McpError(INVALID_PARAMS, f"No skill at {uri[:256]}: skills/get takes the URI of a SKILL.md "
                                           "that skills/list shows.", {"uri": uri[:256]})
        return {"skill": skill.entry()}

    def directory_page(self, uri: Any, cursor: Any, missing: Callable[[tuple[str, ...]], bool] | None,
                       page_size: int | None) -> dict[str, Any]:
        """resources/directory/read: the direct children of a directory of the skill namespace,
        subdirectories as ``inode/directory``; -32602 for anything that is not one."""
        from .registration import _decode_cursor, _encode_cursor

        if not isinstance(uri, str):
            raise McpError(INVALID_PARAMS, "resources/directory/read needs a string 'uri' parameter.")
        children: dict[str, dict[str, Any]] = {}
        prefix = uri + "/"
        for skill in list(self._skills.values()):
            if not skill.directory_read or not self.skill_visible(skill, missing):
                continue
            for rel in skill.files:
                file_uri = skill.uri_of(rel)
                if not file_uri.startswith(prefix):
                    continue
                head, sep, _ = file_uri[len(prefix):].partition("/")
                child = prefix + head
                if sep:
                    children.setdefault(child, {"uri": child, "name": head, "mimeType": DIRECTORY_MIME_TYPE})
                elif child not in children:
                    resource = self._resources.get(child)
                    children[child] = resource.describe() if resource is not None else {"uri": child, "name": head}
        if not children:
            raise McpError(INVALID_PARAMS, f"{uri[:256]} is not a directory this server serves.", {"uri": uri[:256]})
        items = [children[k] for k in sorted(children)]
        kind = "directory-" + hashlib.sha256(uri.encode()).hexdigest()[:16]
        start = 0 if cursor is None else _decode_cursor(kind, cursor)
        if start > len(items) or (start and page_size is None):
            raise McpError(INVALID_PARAMS, "Invalid or expired cursor.", {"cursor": cursor})
        if page_size is None:
            return {"resources": items}
        out: dict[str, Any] = {"resources": items[start:start + page_size]}
        if start + page_size < len(items):
            out["nextCursor"] = _encode_cursor(kind, start + page_size)
        return out

    def skills_capability(self) -> dict[str, Any] | None:
        """The extension's settings in capabilities.extensions, or None when no skill is served
        and no upstream whose skills this server relays declares the extension (proxy/skills.py:
        ``_skill_relays``, its directoryRead by upstream)."""
        relays = self._skill_relays
        if not self._skills and not relays:
            return None
        directory = any(s.directory_read for s in self._skills.values()) or any(relays.values())
        return {"directoryRead": True} if self.directory_read and directory else {}


class SkillGuard:
    """A guard of the one pipeline: a file of a skill whose scopes the caller's token lacks
    reads (and subscribes, and completes) as a resource that does not exist, not as one the
    caller may not see: the skill is invisible on every route, resources/* included.
    skills/list, skills/get and resources/directory/read ask :func:`missing_scopes`
    themselves. Without a token (stdio, HTTP without auth) nothing is hidden."""

    order = 9  # before the scope check (10), which would name the scope a hidden file needs

    def __init__(self, server: Any) -> None:
        self.server = server

    def applies(self, kind: str, item: Any) -> bool:
        return kind in ("read_resource", "subscribe", "complete") and getattr(item, "skill", None) is not None \
            and bool(getattr(item, "scopes", ()))

    def check(self, cc: Any) -> None:
        missing = missing_scopes(cc)
        if missing is not None and missing(cc.item.scopes):
            raise self.server.not_found(cc.name, cc.request.revision)


class SkillListing:
    """The step that leaves the files of skills hidden from the caller out of resources/list."""

    order = 9
    passes_through = True

    def __init__(self, server: Any) -> None:
        self.server = server

    def applies(self, kind: str, item: Any) -> bool:
        return kind == "list_resources" and any(s.scopes for s in self.server._skills.values())

    def _hidden(self, cc: Any) -> set[str]:
        missing = missing_scopes(cc)
        if missing is None:
            return set()
        skills = list(self.server._skills.values())
        shown = {s.uri_of(rel) for s in skills if self.server.skill_visible(s, missing) for rel in s.files}
        return {s.uri_of(rel) for s in skills for rel in s.files} - shown

    @staticmethod
    def _without(result: Any, hidden: set[str]) -> Any:
        if not hidden or not isinstance(result, dict):
            return result
        return {**result, "resources": [r for r in result.get("resources", []) if r.get("uri") not in hidden]}

    def on_list_resources(self, cc: Any, call_next: Callable[[Any], Any]) -> Any:
        return self._without(call_next(cc), self._hidden(cc))

    async def on_list_resources_async(self, cc: Any, call_next: Callable[[Any], Any]) -> Any:
        import inspect

        result = call_next(cc)
        if inspect.isawaitable(result):
            result = await result
        return self._without(result, self._hidden(cc))


def missing_scopes(cc: Any) -> Callable[[tuple[str, ...]], bool] | None:
    """For a request with a verified token: a test of whether it lacks any of some scopes;
    None when there is no token to hold scopes against (stdio, HTTP without auth)."""
    step = cc.session.server._installed.get("scopes")
    token = cc.access_token
    if step is None or token is None:
        return None
    auth = step.auth
    return lambda scopes: bool(auth.missing(token, list(scopes)))
