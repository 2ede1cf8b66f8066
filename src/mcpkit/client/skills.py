"""What a client does with a skill entry (SEP-2640 "Integrity and verification"): a file is
used only when it is listed in the entry's ``resources``, its byte length equals the entry's
``size`` and its SHA-256 the entry's ``digest``; a SKILL.md's frontmatter must also equal the
entry's, field by field. Anything else is a :class:`SkillVerificationError`, and the content is
not handed out.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from ..protocol.skills import SKILL_FILE, SkillError, content_bytes, digest_of, parse_frontmatter
from .errors import ClientError

__all__ = ["SkillVerificationError", "check_entry", "file_path_of", "listed", "verified_bytes", "write_file"]


class SkillVerificationError(ClientError):
    """A skill file that is not what its entry promised (unlisted, another size or digest, other
    frontmatter). Its content must not be used: get the entry again (``client.get_skill``)."""

    def __init__(self, message: str, uri: str) -> None:
        super().__init__(message)
        self.uri = uri


def check_entry(entry: Any) -> dict[str, Any]:
    """The entry, when it has the shape SEP-2640 requires (uri, frontmatter, resources); hosts
    MUST NOT load an entry whose ``resources`` is neither an array nor ``"dynamic"``."""
    if not isinstance(entry, dict) or not isinstance(entry.get("uri"), str) \
            or not isinstance(entry.get("frontmatter"), dict):
        raise SkillVerificationError("the skill entry lacks its uri or frontmatter", str(entry)[:200])
    resources = entry.get("resources")
    if resources != "dynamic" and not isinstance(resources, list):
        raise SkillVerificationError(f"{entry['uri']}: the entry's resources is neither a list nor \"dynamic\"",
                                     entry["uri"])
    return entry


def listed(entry: dict[str, Any], uri: str) -> dict[str, Any]:
    """The entry's ``{uri, digest, size}`` for ``uri``; an unlisted file is a verification failure."""
    for item in entry["resources"]:
        if isinstance(item, dict) and item.get("uri") == uri:
            return item
    raise SkillVerificationError(f"{uri} is not listed in the skill's resources: the skill changed since its "
                                 "entry was fetched; get the entry again", uri)


def _bytes_of(result: dict[str, Any], uri: str) -> bytes:
    data = content_bytes(result)
    if data is None:
        raise SkillVerificationError(f"{uri}: resources/read did not return the one file as text or blob", uri)
    return data


def verified_bytes(entry: dict[str, Any], uri: str, result: dict[str, Any], *, allow_dynamic: bool) -> bytes:
    """The bytes of ``uri`` as ``resources/read`` returned them, once they match the entry."""
    data = _bytes_of(result, uri)
    if entry["resources"] == "dynamic":
        if not allow_dynamic:
            raise SkillVerificationError(f"{entry['uri']}: the skill's resources are \"dynamic\": nothing to "
                                         "verify its files against (pass allow_dynamic=True to use them anyway)",
                                         uri)
    else:
        item = listed(entry, uri)
        if len(data) != item.get("size"):
            raise SkillVerificationError(f"{uri}: {len(data)} bytes read, the entry says {item.get('size')}", uri)
        actual = digest_of(data)
        if actual != item.get("digest"):
            raise SkillVerificationError(f"{uri}: the content's digest {actual} is not the entry's "
                                         f"{item.get('digest')}", uri)
    if uri == entry["uri"]:
        try:
            front = parse_frontmatter(data.decode("utf-8"))
        except (UnicodeDecodeError, SkillError) as exc:
            raise SkillVerificationError(f"{uri}: its frontmatter does not parse ({exc})", uri) from None
        if front != entry["frontmatter"]:
            fields = sorted(k for k in {*(front or {}), *entry["frontmatter"]}
                            if (front or {}).get(k) != entry["frontmatter"].get(k))
            raise SkillVerificationError(f"{uri}: its frontmatter differs from the entry's in "
                                         f"{', '.join(fields) or 'its presence'}", uri)
    return data


def file_path_of(entry: dict[str, Any], uri: str) -> str:
    """The path of ``uri`` relative to the skill's root directory, refused when it would leave it."""
    root = entry["uri"][: -len(SKILL_FILE)]
    if not uri.startswith(root):
        raise SkillVerificationError(f"{uri} is not within the skill's directory {root.rstrip('/')}", uri)
    rel = uri[len(root):]
    parts = PurePosixPath(rel).parts
    if not rel or rel.startswith("/") or "\\" in rel or any(p in (".", "..") for p in parts) or \
            any(p != p.strip() or os.sep in p for p in parts):
        raise SkillVerificationError(f"{uri}: {rel!r} is no path within the skill's directory", uri)
    return rel


def write_file(directory: Path, rel: str, data: bytes) -> Path:
    target = directory.joinpath(*PurePosixPath(rel).parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target
