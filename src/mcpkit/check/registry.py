"""The rule registry: each module under ``check/rules/`` registers its rules with :func:`rule`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol.revisions import SUPPORTED_VERSIONS
from .model import FRAMEWORKS, KEYWORDS, Finding, Rule

__all__ = ["rule", "all_rules", "get_rule", "resolve", "since", "LEGACY", "MODERN"]

_RULES: dict[str, Rule] = {}

Check = Callable[[Any], Awaitable[list[Finding]]]

#: the handshake revisions and the stateless one, for ``revisions=``
LEGACY = tuple(v for v in SUPPORTED_VERSIONS if v < "2026")
MODERN = tuple(v for v in SUPPORTED_VERSIONS if v >= "2026")


def since(version: str) -> tuple[str, ...]:
    """The revisions from ``version`` on."""
    return SUPPORTED_VERSIONS[SUPPORTED_VERSIONS.index(version):]


def rule(
    rule_id: str,
    *,
    keyword: str,
    requirements: tuple[str, ...],
    title: str,
    fix: str,
    quote: str,
    source: str,
    fixes: dict[str, str],
    revisions: tuple[str, ...] = (),
    keywords: dict[str, str] | None = None,
    scope: str = "connection",
    transports: tuple[str, ...] = (),
    default: bool = True,
    order: int = 0,
    example: str = "",
    reproduce: str = "",
) -> Callable[[Check], Check]:
    """Register ``async def check(ctx) -> list[Finding]`` as the rule ``rule_id``."""
    for word in (keyword, *(keywords or {}).values()):
        if word not in KEYWORDS:
            raise ValueError(f"{rule_id}: keyword {word!r} is not one of {tuple(KEYWORDS)}")
    if scope not in ("connection", "server"):
        raise ValueError(f"{rule_id}: scope must be 'connection' or 'server'")
    unknown = set(revisions) | set(keywords or {})
    if unknown - set(SUPPORTED_VERSIONS):
        raise ValueError(f"{rule_id}: unknown revisions {sorted(unknown - set(SUPPORTED_VERSIONS))}")
    if set(fixes) - set(FRAMEWORKS):
        raise ValueError(f"{rule_id}: fixes for unknown frameworks {sorted(set(fixes) - set(FRAMEWORKS))}")

    def register(check: Check) -> Check:
        if rule_id in _RULES:
            raise ValueError(f"rule {rule_id!r} is registered twice")
        _RULES[rule_id] = Rule(
            id=rule_id, keyword=keyword, requirements=requirements, title=title, fix=fix, check=check,
            quote=" ".join(quote.split()), source=source, revisions=revisions, keywords=dict(keywords or {}),
            fixes=fixes, scope=scope, transports=transports, default=default, order=order, example=example,
            reproduce=" ".join(reproduce.split()),
        )
        return check

    return register


def all_rules() -> dict[str, Rule]:
    """Every rule, by id (importing the rule modules on first use)."""
    from . import rules  # noqa: F401 - registers the rules

    return dict(_RULES)


def get_rule(rule_id: str) -> Rule:
    return all_rules()[rule_id]


def resolve(names: list[str] | set[str] | None) -> set[str] | None:
    """Rule ids from ``--rule``/``--skip`` values: an id, or a family ("http" or "http.*").
    Raises ValueError naming what is unknown."""
    if names is None:
        return None
    rules = all_rules()
    out: set[str] = set()
    unknown: list[str] = []
    for name in names:
        family = name[:-2] if name.endswith(".*") else name
        if name in rules:
            out.add(name)
        elif any(r.family == family for r in rules.values()):
            out.update(r.id for r in rules.values() if r.family == family)
        else:
            unknown.append(name)
    if unknown:
        raise ValueError(f"unknown rule {', '.join(map(repr, unknown))}; see mcpkit check --list-rules")
    return out
