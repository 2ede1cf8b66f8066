"""The rule registry: each module under ``check/rules/`` registers its rules with :func:`rule`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .model import SEVERITIES, Finding, Rule

__all__ = ["rule", "all_rules", "get_rule"]

_RULES: dict[str, Rule] = {}

Check = Callable[[Any], Awaitable[list[Finding]]]


def rule(
    rule_id: str,
    *,
    severity: str,
    requirements: tuple[str, ...],
    title: str,
    fix: str,
    scope: str = "connection",
    transports: tuple[str, ...] = (),
    default: bool = True,
    order: int = 0,
) -> Callable[[Check], Check]:
    """Register ``async def check(ctx) -> list[Finding]`` as the rule ``rule_id``."""
    if severity not in SEVERITIES:
        raise ValueError(f"{rule_id}: severity must be one of {SEVERITIES}")
    if scope not in ("connection", "server"):
        raise ValueError(f"{rule_id}: scope must be 'connection' or 'server'")

    def register(check: Check) -> Check:
        if rule_id in _RULES:
            raise ValueError(f"rule {rule_id!r} is registered twice")
        _RULES[rule_id] = Rule(
            id=rule_id, severity=severity, requirements=requirements, title=title, fix=fix, check=check,
            scope=scope, transports=transports, default=default, order=order,
        )
        return check

    return register


def all_rules() -> dict[str, Rule]:
    """Every rule, by id (importing the rule modules on first use)."""
    from . import rules  # noqa: F401 - registers the rules

    return dict(_RULES)


def get_rule(rule_id: str) -> Rule:
    return all_rules()[rule_id]
