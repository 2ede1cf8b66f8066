"""The format half of the Skills extension (SEP-2640, ``io.modelcontextprotocol/skills``), shared
by the server that serves skills, the client that verifies them and the checker that judges a
server's: identifiers, limits, the Agent Skills naming rules, the frontmatter parser, digests.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
from typing import Any

__all__ = [
    "DIRECTORY_MIME_TYPE",
    "MAX_DESCRIPTION",
    "MAX_SKILL_BYTES",
    "MAX_SKILL_FILES",
    "SKILLS_EXTENSION",
    "SKILL_FILE",
    "SkillError",
    "check_skill_name",
    "content_bytes",
    "digest_of",
    "parse_frontmatter",
    "skill_name_of",
]

#: the extension's identifier in capabilities.extensions (SEP-2640 "Capability Declaration")
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
#: a directory resource (SEP-2640 "Directory resources")
DIRECTORY_MIME_TYPE = "inode/directory"
#: SEP-2640 "Limits": per skill, counted over its resources, SKILL.md included
MAX_SKILL_FILES = 512
MAX_SKILL_BYTES = 16 * 1024 * 1024
SKILL_FILE = "SKILL.md"
#: Agent Skills "name field": 1-64 characters, lowercase letters, digits and hyphens, no hyphen
#: first, last or twice in a row
_NAME = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
#: Agent Skills "description field": 1-1024 characters
MAX_DESCRIPTION = 1024
_FRONTMATTER = re.compile(r"^\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.S)


class SkillError(ValueError):
    """A skill that breaks a rule of the extension or of the Agent Skills format; the message
    names the skill and the fix."""


def digest_of(data: bytes) -> str:
    """SEP-2640 "Integrity and verification": ``sha256:`` and 64 lowercase hex digits of the raw bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_skill_name(name: Any) -> str | None:
    """Why ``name`` breaks the Agent Skills naming rules, or None when it keeps them."""
    if not isinstance(name, str) or not name:
        return "a skill name is a non-empty string"
    if len(name) > 64:
        return f"{name[:20]!r}...: a skill name has at most 64 characters"
    if not _NAME.match(name):
        return (f"{name!r}: a skill name has only lowercase letters, digits and hyphens, "
                "with no hyphen first, last or twice in a row")
    return None


def _yaml_loader() -> Any:
    import yaml  # only when a skill is read: serving without skills never imports it

    class Loader(yaml.SafeLoader):
        """SafeLoader without the timestamp type: ``date: 2026-09-13`` stays the string the
        author wrote, so the frontmatter is JSON as it is (SEP-2640 "Frontmatter": verbatim)."""

    Loader.yaml_implicit_resolvers = {
        key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return Loader


def _json_value(value: Any, where: str) -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SkillError(f"{where}: {value!r} has no JSON form; quote it")
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            _json_value(v, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise SkillError(f"{where}: the key {k!r} is not a string; quote it")
            _json_value(v, f"{where}.{k}")
        return
    raise SkillError(f"{where}: a {type(value).__name__} has no JSON form")


def parse_frontmatter(text: str) -> dict[str, Any] | None:
    """The YAML frontmatter that begins ``text`` as a JSON-ready dict, or None when ``text`` does
    not begin with a ``---`` block. Raises SkillError for YAML that does not parse or is not
    a mapping of JSON values."""
    match = _FRONTMATTER.match(text)
    if match is None:
        return None
    import yaml

    try:
        data = yaml.load(match.group(1), Loader=_yaml_loader())  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise SkillError(f"the frontmatter is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise SkillError("the frontmatter is not a YAML mapping of fields")
    _json_value(data, "frontmatter")
    return data


def skill_name_of(uri: str) -> str | None:
    """The skill name a SKILL.md URI carries (its last <skill-path> segment), or None when the
    URI does not end in ``/<segment>/SKILL.md`` after a scheme (SEP-2640 "Resource Mapping")."""
    _, sep, rest = uri.partition("://")
    segments = [s for s in rest.split("/") if s] if sep else []
    if len(segments) < 2 or segments[-1] != SKILL_FILE:
        return None
    return segments[-2]


def content_bytes(result: Any) -> bytes | None:
    """The raw bytes of a ReadResourceResult holding one file (its text as UTF-8, or its blob
    decoded): what a skill entry's digest and size cover. None for any other shape."""
    contents = result.get("contents") if isinstance(result, dict) else None
    if not isinstance(contents, list) or len(contents) != 1 or not isinstance(contents[0], dict):
        return None
    content = contents[0]
    if isinstance(content.get("text"), str):
        return bytes(content["text"].encode("utf-8"))
    if isinstance(content.get("blob"), str):
        try:
            return base64.b64decode(content["blob"], validate=True)
        except (ValueError, binascii.Error):
            return None
    return None
