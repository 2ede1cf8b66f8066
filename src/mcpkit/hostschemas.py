"""Each host's copy of a tool: the name and inputSchema that host accepts, made from the one enforced.

mcpkit/hosts.py says what each host refuses; this module rewrites a tools/list entry so that it
passes those limits, for ``Server(..., host_schemas=...)`` and ``mcpkit proxy --host-schemas``.
Only the listing changes: calls are still validated against the tool's own schema, so what a
copy no longer expresses (a dropped ``pattern``, the branches of a flattened root ``oneOf``) is
still refused, with the usual invalid-arguments answer naming it.

    from mcpkit.hostschemas import served_tool
    served_tool({"name": "files.read", "inputSchema": schema}, "openai-strict")

What each target does (docs/hosts.md):

- every target: a root ``oneOf``/``anyOf``/``allOf`` is flattened (hosts.flatten), and a name the
  host refuses is rewritten (``files.read`` -> ``files_read``; over 64 characters, cut and ended
  by a short hash of the whole name); :func:`original_name` maps it back.
- ``gemini`` (``parametersJsonSchema``): local ``$ref`` inlined, ``$defs`` and ``$schema`` dropped.
- ``portable``: the same, with names and descriptions OpenAI and Claude take: one copy that passes
  claude, openai and gemini at once, served under ``auto`` to a client this module does not know.
- ``gemini-openapi`` (legacy ``parameters``): also only the OpenAPI-subset fields, one type per node
  (``["string", "null"]`` -> ``"string"`` + ``nullable``), ``anyOf`` of one type and null folded.
- ``openai-strict``: every property required, an optional one made nullable (``"type": ["string",
  "null"]``), ``additionalProperties: false`` on every object, keywords strict mode refuses dropped.
  A host in strict mode sends ``null`` for what it means to leave out: :func:`restore_arguments`
  turns such a ``null`` back into an absent argument before the call is validated.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from .hosts import GEMINI_OPENAPI_KEYWORDS, OPENAI_STRICT_FORMATS, OPENAI_STRICT_KEYWORDS, flatten, root_combinators

__all__ = ["SETTINGS", "TARGETS", "host_of_client", "original_name", "parse_setting", "restore_arguments",
           "served_call", "served_name", "served_schema", "served_tool", "target_for"]

#: the hosts a schema can be made for (ids of mcpkit.hosts.HOSTS), and ``portable``: one copy that
#: passes the default hosts of ``mcpkit check`` at once (claude, openai and gemini)
TARGETS = ("portable", "claude", "openai", "openai-strict", "gemini", "gemini-openapi")
#: what ``host_schemas=`` takes: a target, or ``auto``: each client its host's copy, from its
#: clientInfo, and the portable copy to a client not known here (Cursor, VS Code, the Inspector...)
SETTINGS = ("auto", *TARGETS)

#: clientInfo.name prefixes of the hosts whose API is known (as those clients send them), and what
#: each is served under ``auto``; a client not named here is served the tools as registered
_CLIENTS = (
    ("claude-code", "claude"), ("claude-ai", "claude"),   # Claude Code; Claude Desktop and claude.ai
    ("gemini-cli", "gemini"),                             # gemini-cli-mcp-client: parametersJsonSchema
    ("codex-mcp-client", "openai"), ("openai-mcp", "openai"),  # Codex; ChatGPT connectors
)

_NAME_RULES = {
    "portable": (re.compile(r"[a-zA-Z0-9_-]{1,64}"), re.compile(r"[^a-zA-Z0-9_-]")),
    "claude": (re.compile(r"[a-zA-Z0-9_-]{1,64}"), re.compile(r"[^a-zA-Z0-9_-]")),
    "openai": (re.compile(r"[a-zA-Z0-9_-]{1,64}"), re.compile(r"[^a-zA-Z0-9_-]")),
    "gemini": (re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}"), re.compile(r"[^a-zA-Z0-9_.:-]")),
}


def parse_setting(value: Any) -> str | None:
    """``host_schemas=`` as given -> a target, ``"auto"``, or None (off); ValueError naming the choices."""
    if value is None or value is False or value == "off":
        return None
    if isinstance(value, str) and value.strip().lower() in SETTINGS:
        return value.strip().lower()
    raise ValueError(f"host_schemas takes {', '.join(SETTINGS)} or off, not {value!r}")


def host_of_client(client_info: Mapping[str, Any] | None) -> str | None:
    """The target for a client, from the name its clientInfo gives (None: not a host known here)."""
    name = str((client_info or {}).get("name") or "").lower()
    return next((host for prefix, host in _CLIENTS if name.startswith(prefix)), None)


def target_for(setting: str | None, client_info: Mapping[str, Any] | None) -> str | None:
    if setting == "auto":
        return host_of_client(client_info) or "portable"
    return setting


# ------------------------------------------------------------------ names


def served_name(name: str, target: str, server_name: str | None = None) -> str:
    """``name`` as ``target`` accepts it: itself when it already does. For Claude, whose Claude Code
    shows the model ``mcp__<server>__<name>`` within the same 64 characters (hosts.py), the room
    left by ``server_name`` is what the name may take."""
    valid, bad = _NAME_RULES["gemini" if target.startswith("gemini") else target.split("-")[0]]
    room = 64
    if target in ("claude", "portable") and server_name and valid.fullmatch(server_name.replace(" ", "_")):
        room = max(16, 64 - len(f"mcp__{server_name}__"))
    if valid.fullmatch(name) and len(name) <= room:
        return name
    out = bad.sub("_", name) or "tool"
    if target.startswith("gemini") and not re.match(r"[a-zA-Z_]", out):
        out = f"_{out}"
    if len(out) > room:  # cut, and told apart from another name cut the same way by a hash of the whole
        out = f"{out[:room - 9]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return out


def original_name(name: str, target: str, names: list[str], server_name: str | None = None) -> str | None:
    """The registered tool among ``names`` that ``target`` is shown as ``name`` (None: none is)."""
    return next((n for n in names if served_name(n, target, server_name) == name), None)


# ------------------------------------------------------------------ schemas


def served_tool(tool: Mapping[str, Any], target: str, server_name: str | None = None) -> dict[str, Any]:
    """A copy of a tools/list entry with ``target``'s name and inputSchema."""
    out = dict(tool)
    out["name"] = served_name(str(tool.get("name", "")), target, server_name)
    text = tool.get("description")
    if target in ("portable", "openai", "openai-strict") and isinstance(text, str) and len(text) > 1024:
        out["description"] = text[:1023] + "\u2026"  # OpenAI refuses a longer one (hosts.py)
    schema = tool.get("inputSchema")
    if isinstance(schema, dict):
        out["inputSchema"] = served_schema(schema, target)
    return out


def served_schema(schema: Mapping[str, Any], target: str) -> dict[str, Any]:
    """``schema`` as ``target`` accepts it (a new dict; the original is not changed)."""
    out: dict[str, Any] = dict(schema)
    if root_combinators(out, ("oneOf", "anyOf", "allOf")):
        out = flatten(inline_refs(out))  # the branches' properties, merged (hosts.flatten)
    if target in ("claude", "openai"):
        return out
    out = inline_refs(out)
    out.pop("$schema", None)
    if target in ("gemini", "portable"):
        return out
    if target == "gemini-openapi":
        return _openapi(out)
    return _strict(out)


def inline_refs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with every local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) replaced by what it
    names and the definitions dropped. A recursive reference is cut at its second visit (an empty
    schema, described as such): the calls are validated against the original anyway."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            key = ref.rsplit("/", 1)[-1]
            if ref.startswith(("#/$defs/", "#/definitions/")) and key in defs:
                siblings = {k: v for k, v in node.items() if k != "$ref"}
                if key in seen:
                    return {**siblings, "description": siblings.get("description") or f"A {key} (recursive)."}
                return {**walk(defs[key], (*seen, key)), **walk(siblings, seen)}
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k in ("$defs", "definitions"):
                continue
            if k in ("properties", "patternProperties", "dependentSchemas") and isinstance(v, dict):
                out[k] = {name: walk(sub, seen) for name, sub in v.items()}  # names, not keywords
            else:
                out[k] = v if k in ("enum", "const", "default", "examples", "required") else walk(v, seen)
        return out

    return walk(dict(schema), ())


#: left out of the legacy Gemini copy: what the subset cannot say, and bounds Gemini ignores (hosts.py)
_OPENAPI_DROPPED = frozenset({"$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf", "additionalProperties",
                              "pattern", "minimum", "maximum", "minLength", "maxLength"})


def _openapi(node: Any) -> Any:
    """The legacy Gemini ``parameters`` subset (hosts.GEMINI_OPENAPI_KEYWORDS)."""
    if not isinstance(node, dict):
        return node
    node = dict(node)
    nullable = False
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            kept = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            nullable = nullable or len(kept) < len(branches)
            del node[key]
            if kept:
                first = dict(kept[0]) if isinstance(kept[0], dict) else {}
                if len(kept) > 1:  # one branch is what the subset can say; the rest is in words
                    first["description"] = _also(first.get("description"), kept[1:])
                node = {**first, **{k: v for k, v in node.items() if k != "type"}}
    node.pop("allOf", None)
    if "const" in node:
        node.setdefault("enum", [node["const"]])
    kind = node.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        nullable = nullable or len(types) < len(kind)
        node["type"] = types[0] if types else "string"
    if "enum" in node:
        values = [v for v in node["enum"] if v is not None]
        nullable = nullable or len(values) < len(node["enum"])
        if values and all(isinstance(v, str) for v in values):
            node["enum"] = values
            node.setdefault("type", "string")
        else:  # the subset's enum is of strings only
            del node["enum"]
            node["description"] = _joined(node.get("description"), f"One of: {', '.join(map(repr, values))}.")
    if nullable:
        node["nullable"] = True
    out = {k: v for k, v in node.items() if k in GEMINI_OPENAPI_KEYWORDS and k not in _OPENAPI_DROPPED}
    if out.get("format") not in (None, "date-time", "enum", "float", "double", "int32", "int64"):
        del out["format"]  # the formats the subset names; another one fails the request
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _openapi(v) for k, v in out["properties"].items()}
        out.setdefault("type", "object")
    if isinstance(out.get("items"), dict):
        out["items"] = _openapi(out["items"])
    else:  # a tuple (items as a list, prefixItems) has no form in the subset: an array of anything
        out.pop("items", None)
    return out


def _strict(node: Any) -> Any:
    """OpenAI strict mode: every object closed and every property required, an optional one nullable."""
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k in OPENAI_STRICT_KEYWORDS}
    if out.get("format") is not None and out["format"] not in OPENAI_STRICT_FORMATS:
        del out["format"]
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            out["anyOf"] = [_strict(b) for b in node[key]]  # strict mode has anyOf, not oneOf
    if isinstance(out.get("items"), dict):
        out["items"] = _strict(out["items"])
    props = out.get("properties")
    if isinstance(props, dict) or out.get("type") == "object":
        props = props if isinstance(props, dict) else {}
        required = [k for k in node.get("required") or () if k in props]
        out["properties"] = {k: _strict(v) if k in required else _nullable(_strict(v)) for k, v in props.items()}
        out["required"] = list(props)
        out["additionalProperties"] = False
        out["type"] = "object"
    return out


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` that also accepts null: the host's way of saying "left out" in strict mode."""
    kind = node.get("type")
    if isinstance(kind, str) and "anyOf" not in node:
        out = {**node, "type": [kind, "null"]}
        if "const" in out:
            out["enum"] = [out.pop("const")]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        return out
    if isinstance(kind, list):
        return node if "null" in kind else {**node, "type": [*kind, "null"]}
    if kind is None and isinstance(node.get("enum"), list) and "anyOf" not in node:
        return node if None in node["enum"] else {**node, "enum": [*node["enum"], None]}
    branches = node.get("anyOf")
    if isinstance(branches, list):
        if any(b.get("type") == "null" for b in branches if isinstance(b, dict)):
            return node
        return {**node, "anyOf": [*branches, {"type": "null"}]}
    described = {k: v for k, v in node.items() if k in ("description", "title")}
    rest = {k: v for k, v in node.items() if k not in described}
    return {**described, "anyOf": [rest, {"type": "null"}]}


def _also(text: Any, others: list[Any]) -> str:
    kinds = [str(o.get("type", "another form")) if isinstance(o, dict) else "another form" for o in others]
    return _joined(text, f"Also accepts: {', '.join(kinds)}.")


def _joined(text: Any, more: str) -> str:
    return f"{text} {more}" if text else more


# ------------------------------------------------------------------ calls


def restore_arguments(arguments: Any, schema: Mapping[str, Any]) -> Any:
    """``arguments`` with each ``null`` the original ``schema`` does not accept and does not require
    removed (recursively through objects and arrays): strict mode sends null for "left out"."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}

    def resolve(node: Any) -> Any:
        for _ in range(32):  # a chain of refs; a cycle ends here
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                break
            node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
        return node

    def walk(value: Any, node: Any) -> Any:
        node = resolve(node)
        if not isinstance(node, dict):
            return value
        if isinstance(value, dict):
            props = node.get("properties") or {}
            for branch in node.get("oneOf") or node.get("anyOf") or node.get("allOf") or ():
                branch = resolve(branch)
                if isinstance(branch, dict):
                    props = {**(branch.get("properties") or {}), **props}
            required = set(node.get("required") or ())
            out = {}
            for key, item in value.items():
                sub = props.get(key)
                if item is None and sub is not None and key not in required and not _takes_null(resolve(sub)):
                    continue
                out[key] = walk(item, sub) if sub is not None else item
            return out
        if isinstance(value, list) and isinstance(node.get("items"), dict):
            return [walk(v, node["items"]) for v in value]
        return value

    return walk(arguments, schema)


def _takes_null(node: Any) -> bool:
    if not isinstance(node, dict) or not node:
        return True
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind) or node.get("nullable") is True:
        return True
    if "const" in node and node["const"] is None or None in (node.get("enum") or ()):
        return True
    if kind is None and not any(k in node for k in ("anyOf", "oneOf", "enum", "const", "$ref")):
        return True  # no type: anything, null included
    return any(_takes_null(b) for k in ("anyOf", "oneOf") for b in node.get(k) or ())


def served_call(server: Any, client_info: Mapping[str, Any] | None, tool: Any, name: str, params: dict[str, Any]
                ) -> tuple[Any, str, dict[str, Any]]:
    """A tools/call from a client shown ``server``'s host copies, read as a call of the tool itself:
    (tool, registered name, params). The host's name is mapped back (the pipeline, the policy and
    the audit see the registered one), and so is each null of the strict variant; the arguments are
    then validated against the tool's own schema, unchanged. The server finds this by name: it sits
    below this module (server/server.py ``_entry``)."""
    host = server.schema_host(client_info)
    if host is None:
        return tool, name, params
    if tool is None:
        # the host's name for it; a registered name is never shadowed by another tool's copy
        found = original_name(name, host, list(server.tools), server.name)
        if found is None:
            return None, name, params
        tool, name = server.tools[found], found
        params = {**params, "name": found}
    arguments = params.get("arguments")
    if host == "openai-strict" and isinstance(arguments, dict):
        schema = tool.enforced_schema if tool.enforced_schema is not None else tool.input_schema
        params = {**params, "arguments": restore_arguments(arguments, schema)}
    return tool, name, params
