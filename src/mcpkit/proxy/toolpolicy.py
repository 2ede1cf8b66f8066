"""Tool policy files: what the proxy believes about an upstream's tools, whatever they claim.

An upstream's annotations are hints from a server we did not write, not facts (TL-14). A tool
policy file (TOML) overrides them, and sets what mcpkit enforces per tool; the gates, scopes,
rate limits and timeouts then read the overridden values::

    # every tool of the upstream: assume it reaches the network unless said otherwise below
    [tools."*"]
    open_world = true

    [tools."read_*"]            # a glob (fnmatch) ...
    read_only = true
    open_world = false

    [tools.write_file]          # ... or a name
    read_only = false
    destructive = true
    scopes = ["files:write"]
    rate_limit = "10/min"
    timeout = 30

Keys: ``read_only``, ``destructive``, ``idempotent``, ``open_world`` (booleans, become the
tool's readOnlyHint... annotations, as listed and as the gates read them); ``scopes`` (OAuth
scopes a token needs to call it); ``rate_limit`` ("N/sec|min|hour", or false); ``timeout``
(seconds, or false); ``hidden`` (true: not mirrored at all). A pattern is matched against the
names the proxy lists for the upstream's tools (prefixed); one that matches none of them is
matched against the upstream's own names instead. So with prefix ``files``, ``files_read`` is
the upstream's ``read`` and never also an upstream tool named ``files_read`` (listed
``files_files_read``). Every matching entry applies, in file order, so later entries override
earlier ones; entries naming a tool exactly apply last.

Several upstreams sharing one policy: an upstream chooses its names, not its prefix, so a pattern
that could match a name under another such upstream's prefix (``files_read``, ``files_*``, ``f*``
next to upstream ``files``) is matched against listed names only, in every upstream, whatever
that upstream lists: upstream ``tickets``'s own ``files_read`` is reached as ``tickets_files_read``
only. That takes in every pattern matching a name another upstream lists.

Relayed skills (proxy/skills.py) have entries of their own, ``[skills."GLOB"]`` with ``hidden``
and ``scopes``, matched against the skill's path as the proxy lists it (``files/acme/refunds``
for ``skill://files/acme/refunds/SKILL.md``): a path's first segment is the upstream's prefix,
which no upstream chooses, so these rules need no reading against upstreams' own names.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolPolicy", "ToolRule", "ToolPolicyError"]

_HINTS = {"read_only": "readOnlyHint", "destructive": "destructiveHint", "idempotent": "idempotentHint",
          "open_world": "openWorldHint"}
_KEYS = frozenset({*_HINTS, "scopes", "rate_limit", "timeout", "hidden"})


class ToolPolicyError(ValueError):
    """A tool policy file that cannot be used; the message names the file, the entry and the fix."""


@dataclass(frozen=True)
class ToolRule:
    pattern: str
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return not any(c in self.pattern for c in "*?[")

    def matches(self, *names: str) -> bool:
        return any(fnmatch.fnmatchcase(n, self.pattern) for n in names)


@dataclass(frozen=True)
class ToolPolicy:
    """The rules of a tool policy file, applied to each mirrored tool by :meth:`resolve`."""

    rules: tuple[ToolRule, ...] = ()
    #: the ``[skills.GLOB]`` entries (``hidden``, ``scopes``), for relayed skills
    skill_rules: tuple[ToolRule, ...] = ()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ToolPolicy:
        import tomllib

        where = os.fspath(path)
        try:
            with open(where, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ToolPolicyError(f"cannot read the tool policy {where}: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ToolPolicyError(f"{where} is not valid TOML: {exc}") from None
        return cls.from_dict(data, where)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "the tool policy") -> ToolPolicy:
        unknown = sorted(set(data) - {"tools", "skills"})
        if unknown:
            raise ToolPolicyError(f"{where}: unknown section(s) {', '.join(unknown)}; put entries under [tools.NAME] "
                                  "or [skills.PATH]")
        tools = data.get("tools", {})
        if not isinstance(tools, dict):
            raise ToolPolicyError(f"{where}: 'tools' must be a table of [tools.NAME] entries")
        skills = data.get("skills", {})
        if not isinstance(skills, dict):
            raise ToolPolicyError(f"{where}: 'skills' must be a table of [skills.PATH] entries")
        rules = []
        for pattern, settings in tools.items():
            rules.append(ToolRule(pattern, _check(where, pattern, settings)))
        skill_rules = [ToolRule(pattern, _check_skill(where, pattern, settings)) for pattern, settings in skills.items()]
        return cls(tuple(rules), tuple(skill_rules))

    def skill_settings(self, path: str) -> dict[str, Any]:
        """The settings of the relayed skill at ``path`` (as the proxy lists it): every matching
        ``[skills.GLOB]`` in file order, then the exact paths."""
        ordered = [r for r in self.skill_rules if not r.exact] + [r for r in self.skill_rules if r.exact]
        return self._settings(rule for rule in ordered if rule.matches(path))

    def resolve(self, name: str, upstream_name: str, listed: Any = None, others: Any = ()) -> dict[str, Any]:
        """The settings for one tool: every matching rule, globs in file order, then exact names.

        ``listed``: every name the proxy lists for this upstream's tools (default: ``name``);
        ``others``: the heads (prefix and separator, "" for none) of the other upstreams that
        share this policy. A rule matching a listed name, or able to match a name beginning
        with one of ``others``, names listed tools and matches ``name`` only; any other rule
        names upstream tools and matches ``upstream_name``. For many tools, use
        :meth:`resolver` (the rules are classified once)."""
        return self.resolver([name] if listed is None else listed, others)(name, upstream_name)

    def resolver(self, listed: Any, others: Any = ()) -> Any:
        """``resolve`` for the tools of one upstream listing: ``listed`` is every name the proxy
        lists for them (hidden ones included), ``others`` as for :meth:`resolve`; returns
        ``f(name, upstream_name) -> settings``."""
        listed = list(listed)
        heads = list(others)
        ordered = [r for r in self.rules if not r.exact] + [r for r in self.rules if r.exact]
        # an upstream chooses its own names but not its prefix: a rule that may be meant for a
        # tool under another upstream's prefix must not reach one of this upstream's own names
        # that merely looks like it (a tool named files_read here, next to upstream files), even
        # while that upstream lists nothing yet
        # (a rule matching another such upstream's listed name can match a name under its
        # prefix: what the others list, or whether they are up, does not change the reading)
        own = [rule.matches(*listed) for rule in ordered]
        by_listed = [(rule, on or any(_reaches(rule.pattern, h) for h in heads)) for rule, on in zip(ordered, own)]

        def resolve(name: str, upstream_name: str) -> dict[str, Any]:
            return self._settings(rule for rule, on_listed in by_listed
                                  if rule.matches(name if on_listed else upstream_name))

        def passed_over(name: str, upstream_name: str) -> list[str]:
            """The patterns that would have matched ``upstream_name`` but for another upstream's
            prefix: worth a word to whoever wrote them for this upstream's own name."""
            return [rule.pattern for (rule, on_listed), on in zip(by_listed, own)
                    if on_listed and not on and rule.matches(upstream_name) and not rule.matches(name)]

        resolve.passed_over = passed_over  # type: ignore[attr-defined]
        return resolve

    @staticmethod
    def _settings(rules: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for rule in rules:
            out.update(rule.settings)
            if rule.settings.get("destructive") is True and "read_only" not in rule.settings:
                # a tool that destroys writes: an earlier rule's (or the upstream's) read-only
                # claim must not survive it, or the read-only gate would let it through
                out["read_only"] = False
        return out

    @staticmethod
    def annotate(annotations: dict[str, Any] | None, settings: dict[str, Any]) -> dict[str, Any] | None:
        """The tool's annotations with the policy's hints written over the upstream's."""
        out = dict(annotations or {})
        for key, hint in _HINTS.items():
            if key in settings:
                out[hint] = settings[key]
        if settings.get("destructive") is True and settings.get("read_only") is not True:
            # the gates read readOnlyHint first (TL-14: destructiveHint means nothing for a
            # read-only tool), so the upstream's readOnlyHint must not outlive "destructive"
            out["readOnlyHint"] = False
        return out or None


def toml_key(text: str) -> str:
    """``text`` as a key of ``[tools.KEY]``: bare when it can be (tool names can), quoted
    otherwise (globs)."""
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _reaches(pattern: str, head: str) -> bool:
    """Whether the glob ``pattern`` matches some name that begins with ``head``: its tokens are
    walked along ``head``; a ``*`` (or ``head`` used up) means yes. An unclosed ``[`` is a
    literal, as in fnmatch."""
    i = 0
    for ch in head:
        if i >= len(pattern):
            return False
        token = pattern[i]
        if token == "*":
            return True
        if token == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "!":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            j = pattern.find("]", j)
            if j >= 0:
                token = pattern[i:j + 1]
                i = j
        if not fnmatch.fnmatchcase(ch, token):  # "?" matches any one; a literal only itself
            return False
        i += 1
    return True


def _check(where: str, pattern: str, settings: Any) -> dict[str, Any]:
    entry = f"{where}: [tools.{pattern!r}]"
    if not isinstance(settings, dict):
        raise ToolPolicyError(f"{entry} must be a table, e.g. read_only = true")
    unknown = sorted(set(settings) - _KEYS)
    if unknown:
        raise ToolPolicyError(f"{entry}: unknown key(s) {', '.join(unknown)}; use {', '.join(sorted(_KEYS))}")
    for key in (*_HINTS, "hidden"):
        if key in settings and not isinstance(settings[key], bool):
            raise ToolPolicyError(f"{entry}: {key} must be true or false")
    if settings.get("read_only") is True and settings.get("destructive") is True:
        raise ToolPolicyError(f"{entry}: a tool cannot be both read_only and destructive; "
                              "say read_only = false for a destructive tool")
    scopes = settings.get("scopes")
    if scopes is not None and (not isinstance(scopes, list) or not all(isinstance(s, str) and s for s in scopes)):
        raise ToolPolicyError(f"{entry}: scopes must be a list of strings, e.g. scopes = [\"files:write\"]")
    if "rate_limit" in settings and settings["rate_limit"] is not False:
        from ..policy.ratelimit import Rate

        if not isinstance(settings["rate_limit"], (str, Rate, type(None))):  # TOML: a number, true, a table
            raise ToolPolicyError(f"{entry}: rate_limit must be a string such as \"10/min\" (or false), "
                                  f"got {settings['rate_limit']!r}")

        try:
            Rate.coerce(settings["rate_limit"])
        except (TypeError, ValueError) as exc:
            raise ToolPolicyError(f"{entry}: rate_limit: {exc}") from None
    timeout = settings.get("timeout")
    if timeout is not None and timeout is not False and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        raise ToolPolicyError(f"{entry}: timeout must be a positive number of seconds (or false)")
    return dict(settings)


def _check_skill(where: str, pattern: str, settings: Any) -> dict[str, Any]:
    entry = f"{where}: [skills.{pattern!r}]"
    if not isinstance(settings, dict) or set(settings) - {"hidden", "scopes"}:
        raise ToolPolicyError(f"{entry} takes hidden = true|false and scopes = [\"...\"] only")
    if "hidden" in settings and not isinstance(settings["hidden"], bool):
        raise ToolPolicyError(f"{entry}: hidden must be true or false")
    scopes = settings.get("scopes")
    if scopes is not None and (not isinstance(scopes, list) or not all(isinstance(s, str) and s for s in scopes)):
        raise ToolPolicyError(f"{entry}: scopes must be a list of strings, e.g. scopes = [\"billing\"]")
    return dict(settings)
