"""The command line of redaction in transit (proxy/redaction.py): ``mcpkit proxy --redact``.

``--redact mask|refuse`` is every upstream's mode, ``--redact-kinds`` what is looked for; an
upstream's ``"redact"`` in the ``--config`` file applies over both (its mode, kinds, directions
and per-tool overrides). Nothing is imported or wrapped for an upstream with redaction off.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_proxy_arguments", "redaction_for"]


def add_proxy_arguments(parser: argparse.ArgumentParser) -> None:
    """``mcpkit proxy``'s redaction options."""
    group = parser.add_argument_group("secrets in transit (docs/security.md)")
    group.add_argument("--redact", choices=("mask", "refuse"),
                       help="mask ([redacted:KIND]) or refuse secrets in tool arguments sent upstream and in results "
                       "coming back, for every upstream (a \"redact\" entry in --config overrides it)")
    group.add_argument("--redact-kinds", metavar="KINDS",
                       help="comma-separated kinds or groups to look for (default: secrets; also pii, all, email, "
                       "phone, iban, us-ssn, ...: docs/security.md)")


def redaction_for(args: argparse.Namespace, spec: Any, specs: list[Any], fail: Any) -> Any:
    """The ``redact=`` of the upstream ``spec``: None when redaction is off for it."""
    mode, kinds = getattr(args, "redact", None), getattr(args, "redact_kinds", None)
    if mode is None and kinds is None and spec.redact is None:
        return None
    from ..policy.detectors import expand_kinds
    from .redaction import RedactPolicy, RedactRule

    # an upstream's own "redact" entry turns it on (mask) unless the entry says otherwise
    base = RedactRule(mode=mode or ("mask" if spec.redact is not None else "off"))
    if kinds is not None:
        if mode is None and all(s.redact is None for s in specs):
            raise fail("--redact-kinds needs --redact mask or --redact refuse (or a \"redact\" entry in --config)")
        try:
            base = RedactRule(mode=base.mode, kinds=expand_kinds(k.strip() for k in kinds.split(",") if k.strip()))
        except ValueError as exc:
            raise fail(f"--redact-kinds: {exc}") from None
    try:
        policy = RedactPolicy.of(spec.redact if spec.redact is not None else {}, "redact", base)
    except ValueError as exc:  # checked when the file was read; a mistake here is still one line
        raise fail(str(exc)) from None
    return policy if policy.on else None
