"""Pinning: the defence against a rug pull (docs/security.md).

An upstream we did not write can list a harmless tool, get it approved, then change what the
tool says (its description is read by the model as instructions) or what it takes. A lockfile
holds, for each upstream, a hash of every field of each tool, prompt and resource template the
model reads; on every listing (the first, each ``list_changed``, each reconnection) an item whose
fields no longer match is **withheld**: a tool is not listed and a call of it is refused with a
message naming the change, a prompt or template is not mirrored. Unchanged items keep working.

The check runs when a list arrives, never per call: a withheld tool is registered behind a
:class:`Hold`, a requirement that is never up (the policy's bridge step, which every mirrored
tool already has, refuses it), so an unchanged tool's call path is exactly that of an unpinned
one.

The file is JSON with sorted keys, one entry per item, grouped by upstream and kind, and holds
each description in full so a drift can be shown as a diff and reviewed in version control::

    {"upstreams": {"files": {"tools": {"read": {"description": "...", "hashes": {...}}}}}, "version": 1}
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import logging
import os
import tempfile
import threading
from typing import Any

from ..protocol.errors import E_PERMISSION_DENIED, ToolError

__all__ = ["FIELDS", "Hold", "Holds", "Lockfile", "Pin", "PinError", "changed_fields", "describe_drift", "drift",
           "entry_of"]

log = logging.getLogger("mcpkit.proxy")

VERSION = 1
#: per kind, the fields a model or a user reads: a change in any of them is a drift
FIELDS: dict[str, tuple[str, ...]] = {
    "tools": ("name", "title", "description", "inputSchema", "outputSchema", "annotations"),
    "prompts": ("name", "title", "description", "arguments"),
    "resourceTemplates": ("uriTemplate", "name", "title", "description", "mimeType", "annotations"),
}
#: the field that names an item of each kind
KEYS = {"tools": "name", "prompts": "name", "resourceTemplates": "uriTemplate"}
SINGULAR = {"tools": "tool", "prompts": "prompt", "resourceTemplates": "resource template"}
_DIFF_LINES = 12


class PinError(ValueError):
    """A lockfile that cannot be read or written; the message names the file and the fix."""


def _hash(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def entry_of(kind: str, desc: dict[str, Any]) -> dict[str, Any]:
    """The lockfile entry of one listed item: a hash per field (absent: the hash of null) and
    the description in full, for a readable diff when it changes."""
    entry: dict[str, Any] = {"hashes": {f: _hash(desc.get(f)) for f in FIELDS[kind]}}
    if isinstance(desc.get("description"), str):
        entry["description"] = desc["description"]
    return entry


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The fields whose hashes differ, in FIELDS order (a field a newer mcpkit hashes counts as changed)."""
    before, after = old.get("hashes") or {}, new.get("hashes") or {}
    return sorted((f for f in set(before) | set(after) if before.get(f) != after.get(f)), key=_field_order)


def _field_order(field: str) -> tuple[int, str]:
    order = {f: i for fields in FIELDS.values() for i, f in enumerate(fields)}
    return order.get(field, 99), field


def describe_drift(kind: str, name: str, old: dict[str, Any], new: dict[str, Any]) -> str:
    """One message: which fields of ``name`` changed since it was pinned, and a short diff of
    the description."""
    fields = changed_fields(old, new)
    text = f"{SINGULAR[kind]} {name!r} changed since it was pinned: {', '.join(fields)}"
    if "description" in fields:
        text += "\n" + short_diff(old.get("description") or "", new.get("description") or "")
    return text


def short_diff(before: str, after: str) -> str:
    """A unified diff of two texts, at most _DIFF_LINES lines (a long one says how many were cut)."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), "pinned", "now", n=1, lineterm=""))
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], f"... ({len(lines) - _DIFF_LINES} more lines)"]
    return "\n".join(lines)


def drift(pinned: dict[str, Any], listed: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """What differs between two ``{kind: {name: entry}}`` maps: ``{"added"|"changed"|"removed":
    [(kind, name)]}``, each sorted."""
    out: dict[str, list[tuple[str, str]]] = {"added": [], "changed": [], "removed": []}
    for kind in FIELDS:
        before, after = pinned.get(kind) or {}, listed.get(kind) or {}
        for name in sorted(set(before) | set(after)):
            if name not in before:
                out["added"].append((kind, name))
            elif name not in after:
                out["removed"].append((kind, name))
            elif changed_fields(before[name], after[name]):
                out["changed"].append((kind, name))
    return out


class Lockfile:
    """The pins of one file, shared by every upstream of a proxy; thread-safe (each upstream
    lists on its own loop). ``load`` reads it (missing: empty); ``save`` writes it atomically."""

    def __init__(self, path: str, data: dict[str, Any] | None = None, *, exists: bool = False) -> None:
        self.path = path
        self.data: dict[str, Any] = data if data is not None else {"upstreams": {}, "version": VERSION}
        self.exists = exists
        self.lock = threading.Lock()

    @classmethod
    def load(cls, path: str) -> Lockfile:
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            return cls(path)
        except OSError as exc:
            raise PinError(f"cannot read the lockfile {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise PinError(f"the lockfile {path} is not JSON ({exc}); fix it, or delete it and pin again") from None
        if not isinstance(data, dict) or not isinstance(data.get("upstreams"), dict):
            raise PinError(f'the lockfile {path} has no "upstreams" object; delete it and pin again')
        if data.get("version") != VERSION:
            raise PinError(f"the lockfile {path} is version {data.get('version')!r}; this mcpkit reads version "
                           f"{VERSION}: pin again with `mcpkit pin`")
        return cls(path, data, exists=True)

    def upstream(self, key: str) -> dict[str, Any]:
        """``{kind: {name: entry}}`` pinned for ``key`` (a copy)."""
        with self.lock:
            pinned = self.data["upstreams"].get(key) or {}
            return {kind: dict(pinned.get(kind) or {}) for kind in FIELDS}

    def pin(self, key: str, kind: str, name: str, entry: dict[str, Any]) -> None:
        with self.lock:
            self.data["upstreams"].setdefault(key, {}).setdefault(kind, {})[name] = entry

    def replace(self, key: str, listed: dict[str, Any]) -> None:
        """Pin exactly what ``key`` lists now (``mcpkit pin``): its removed items go too."""
        with self.lock:
            self.data["upstreams"][key] = {kind: dict(items) for kind, items in listed.items() if items}

    def save(self) -> None:
        """Write the file whole or not at all: a temporary file in the same directory, renamed
        over the old one, so a crash never leaves half a lockfile (which would unpin everything)."""
        with self.lock:
            text = json.dumps(self.data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
            folder = os.path.dirname(os.path.abspath(self.path))
            try:
                fd, tmp = tempfile.mkstemp(prefix=".pin-", suffix=".tmp", dir=folder)
                try:
                    with os.fdopen(fd, "w", encoding="utf-8") as fh:
                        fh.write(text)
                        fh.flush()
                        os.fsync(fh.fileno())
                    os.replace(tmp, self.path)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
            except OSError as exc:
                raise PinError(f"cannot write the lockfile {self.path}: {exc.strerror or exc}") from None
            self.exists = True


class Hold:
    """A requirement that is never up: what keeps a drifted tool out of tools/list and refuses
    its calls (the policy's bridge step calls :meth:`not_connected_error`). One per tool name,
    reused across listings, so a server's set of watched requirements stays bounded."""

    up = False

    def __init__(self, upstream: str, tool: str) -> None:
        self.name = f"the pin of {tool}"
        self.upstream = upstream
        self.tool = tool
        self.message = ""
        self.fields: list[str] = []
        self.hidden_reason = ""

    def on_change(self, callback: Any) -> None:
        """Never changes: a later listing registers the tool again, held or not."""

    def not_connected_error(self) -> ToolError:
        # the first line only: the diff would put the changed description, which may be the
        # attack itself, before the model; the operator reads it in the log and the audit line
        summary = self.message.splitlines()[0] if self.message else "withheld"
        where = " (the proxy's log and audit trail show the diff)" if "\n" in self.message else ""
        return ToolError(f"Tool {self.tool!r} is withheld: {summary}{where}.", code=E_PERMISSION_DENIED,
                         details={"tool": self.tool, "upstream": self.upstream, "changed": self.fields},
                         retryable=False,
                         suggested_fix="Ask the operator to review the change and pin it again (mcpkit pin).")


class Holds:
    """One Hold per withheld tool name, reused across listings (a screen's ``hold``: Pin, and
    the poisoning scan's Scan); ``hold_class`` is the kind of Hold it makes."""

    hold_class: type[Hold] = Hold
    key: str

    def __init__(self) -> None:
        self._holds: dict[str, Hold] = {}

    def hold(self, tool: str, message: str, fields: list[str]) -> Hold:
        """The Hold of ``tool`` (its listed name), saying ``message``."""
        hold = self._holds.get(tool)
        if hold is None:
            hold = self._holds[tool] = self.hold_class(self.key, tool)
        hold.message = message
        hold.fields = fields
        hold.hidden_reason = f"withheld: {message.splitlines()[0]}"
        return hold


class Pin(Holds):
    """The pins of one upstream (``key`` in the lockfile). :meth:`screen` splits a listing into
    what may be mirrored and what is withheld, pinning new items on first sight unless
    ``strict``, and logs and audits each change once."""

    def __init__(self, lockfile: Lockfile, key: str, *, strict: bool = False) -> None:
        super().__init__()
        self.lockfile = lockfile
        self.key = key
        self.strict = strict
        self.audit: Any = None  # set by the upstream: the server's audit log, if it writes one
        self._told: dict[tuple[str, str], str] = {}  # (kind, name) -> the message last logged
        self._listed: dict[str, set[str]] = {}

    def screen(self, kind: str, items: list[dict[str, Any]]
               ) -> tuple[list[dict[str, Any]], dict[str, tuple[str, list[str]]]]:
        """(the items that match their pins or were pinned now, {name: (why withheld, the fields changed)})."""
        if kind not in FIELDS:
            return items, {}  # relayed skills are not pinned (the scan reads them: scan.py)
        key_field = KEYS[kind]
        pinned = self.lockfile.upstream(self.key)[kind]
        kept: list[dict[str, Any]] = []
        withheld: dict[str, tuple[str, list[str]]] = {}
        added = False
        names: set[str] = set()
        for desc in items:
            name = desc.get(key_field)
            if not isinstance(name, str):
                continue
            names.add(name)
            entry = entry_of(kind, desc)
            old = pinned.get(name)
            if old is None and not self.strict:
                self.lockfile.pin(self.key, kind, name, entry)
                added = True
                log.info("upstream %s: %s %r pinned on first sight in %s", self.key, SINGULAR[kind], name,
                         self.lockfile.path)
                kept.append(desc)
            elif old is None:
                withheld[name] = (f"{SINGULAR[kind]} {name!r} is not in the lockfile {self.lockfile.path}, and "
                                  "--pin-strict withholds what is not pinned", [])
                self._tell(kind, name, *withheld[name])
            elif changed_fields(old, entry):
                withheld[name] = (describe_drift(kind, name, old, entry), changed_fields(old, entry))
                self._tell(kind, name, *withheld[name])
            else:
                self._told.pop((kind, name), None)
                kept.append(desc)
        for name in sorted(set(pinned) - names):
            if name not in self._listed.get(kind, set()) and kind in self._listed:
                continue  # gone before: said once
            log.warning("upstream %s: pinned %s %r is no longer listed", self.key, SINGULAR[kind], name)
        self._listed[kind] = names
        if added:
            try:
                self.lockfile.save()
            except PinError as exc:  # the pins hold in memory; the listing goes on
                log.error("upstream %s: %s; what was pinned now holds until the proxy stops", self.key, exc)
        return kept, withheld

    def _tell(self, kind: str, name: str, message: str, fields: list[str]) -> None:
        """Log and audit a withheld item once per distinct change, not on every listing."""
        if self._told.get((kind, name)) == message:
            return
        self._told[(kind, name)] = message
        log.warning("upstream %s: %s withheld: %s", self.key, SINGULAR[kind], message)
        audit = self.audit
        if audit is not None:
            from ..server.session import new_correlation_id

            try:
                audit.record({"correlationId": new_correlation_id(), "principal": None, "event": "pin-drift",
                              "upstream": self.key, "kind": SINGULAR[kind], SINGULAR[kind].split()[-1]: name,
                              "changed": fields, "outcome": "withheld", "code": E_PERMISSION_DENIED,
                              "reason": message[:2000], "durationMs": 0.0})
            except Exception:  # noqa: BLE001 - a full disk must not stop the listing
                log.exception("could not write the audit line of the withheld %s %r", SINGULAR[kind], name)
