"""``mcpkit docs``: a Markdown reference of a server's tools, resources and prompts.

Each parameter shows its type, whether it is required, its default and its allowed values; a
manager tool (one tool, several actions) documents each action with its own parameters. An mcpkit
server loaded in-process is documented whole: tools the current gates hide are included and
marked, so the reference does not depend on the environment it was generated in.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["markdown", "server_listing", "first_line"]


def first_line(text: str | None, width: int = 70) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def server_listing(server: Any) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """(serverInfo, listing) of an in-process Server, every tool included; a tool or action the
    gates or a missing bridge hide carries ``x-mcpkit-hidden`` with the reason."""
    from .protocol.revisions import LATEST_HANDSHAKE, get

    rev = get(LATEST_HANDSHAKE)
    tools = []
    for tool in server.tools.values():
        described = tool.describe()
        if getattr(tool, "actions", None) is not None:
            described["x-mcpkit-actions"] = [_action_entry(server, act) for act in tool.actions.values()]
        if not server.tool_visible(tool) and not described.get("x-mcpkit-actions"):
            described["x-mcpkit-hidden"] = _hidden_reason(server, tool.annotations)
        tools.append(described)
    listing = {
        "tools": tools,
        "resources": server.list_page("resources", rev, None)["resources"],
        "resourceTemplates": server.list_page("resourceTemplates", rev, None)["resourceTemplates"],
        "prompts": server.list_page("prompts", rev, None)["prompts"],
    }
    return server.server_info(rev), listing


def _hidden_reason(server: Any, annotations: Any) -> str:
    gates = server.gates
    reason = gates.refusal(annotations) if gates is not None else None
    return reason or "hidden while a bridge it requires is down"


def _action_entry(server: Any, act: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": act.name, "description": act.description or "",
                             "annotations": act.annotations or {}, "inputSchema": act.schema}
    gates = server.gates
    if gates is not None and not gates.permits(act.annotations):
        entry["x-mcpkit-hidden"] = gates.refusal(act.annotations) or "gated"
    return entry


# ---------------------------------------------------------------------------------------- rendering

_HINTS = (("read-only", "readOnlyHint"), ("destructive", "destructiveHint"), ("idempotent", "idempotentHint"),
          ("open-world", "openWorldHint"))


def _type_of(prop: Any) -> str:
    if not isinstance(prop, dict):
        return ""
    kind = prop.get("type")
    if isinstance(kind, list):
        return " \\| ".join(kind)
    if kind == "array" and isinstance(prop.get("items"), dict) and prop["items"].get("type"):
        return f"array of {_type_of(prop['items'])}"
    if kind:
        return str(kind)
    for key in ("anyOf", "oneOf"):
        if isinstance(prop.get(key), list):
            return " \\| ".join(t for t in (_type_of(b) for b in prop[key]) if t)
    if "const" in prop:
        return "const"
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    return ""


def _values(prop: Any) -> str:
    """The allowed values (enum, const, or an anyOf of those) as inline code."""
    if not isinstance(prop, dict):
        return ""
    values: list[Any] = []
    if isinstance(prop.get("enum"), list):
        values = prop["enum"]
    elif "const" in prop:
        values = [prop["const"]]
    elif isinstance(prop.get("items"), dict):
        return _values(prop["items"])
    else:
        for key in ("anyOf", "oneOf"):
            for branch in prop.get(key) or ():
                if isinstance(branch, dict) and ("enum" in branch or "const" in branch):
                    values += branch.get("enum") or [branch.get("const")]
    return ", ".join(f"`{json.dumps(v, ensure_ascii=False)}`" for v in values)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _parameters(schema: dict[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    props = {k: v for k, v in (schema.get("properties") or {}).items() if k not in skip}
    if not props:
        return []
    required = set(schema.get("required") or ())
    out = ["| parameter | type | required | default | values | description |", "|---|---|---|---|---|---|"]
    for name, prop in props.items():
        default = f"`{json.dumps(prop['default'], ensure_ascii=False)}`" if isinstance(prop, dict) and \
            "default" in prop else ""
        desc = first_line(prop.get("description"), 200) if isinstance(prop, dict) else ""
        out.append(f"| `{name}` | {_cell(_type_of(prop))} | {'yes' if name in required else 'no'} | "
                   f"{_cell(default)} | {_cell(_values(prop))} | {_cell(desc)} |")
    return [*out, ""]


def _hints(annotations: Any) -> list[str]:
    hints = [h for h, k in _HINTS if (annotations or {}).get(k)]
    return [f"*{', '.join(hints)}*", ""] if hints else []


def _actions_from_schema(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """A manager-style schema seen over the wire: one ``oneOf`` branch per ``action`` const."""
    out = []
    for branch in schema.get("oneOf") or ():
        action = ((branch.get("properties") or {}).get("action") or {}) if isinstance(branch, dict) else {}
        if "const" not in action:
            return []
        out.append({"name": action["const"], "description": branch.get("description", ""), "inputSchema": branch})
    return out


def _tool(tool: dict[str, Any]) -> list[str]:
    out = [f"### `{tool['name']}`", ""]
    if tool.get("x-mcpkit-hidden"):
        out += [f"> **Gated:** not listed or callable in the current configuration: {tool['x-mcpkit-hidden']}", ""]
    if tool.get("description"):
        out += [tool["description"].strip(), ""]
    schema = tool.get("inputSchema") or {}
    actions = tool.get("x-mcpkit-actions") or _actions_from_schema(schema)
    if not actions:
        return out + _hints(tool.get("annotations")) + _parameters(schema)
    # a manager's own hints summarise the actions the gates let through: each action says its own
    out += ["Actions (pass `action` and that action's parameters):", ""]
    for act in actions:
        out += [f"#### `{tool['name']}` action `{act['name']}`", ""]
        if act.get("x-mcpkit-hidden"):
            out += [f"> **Gated:** {act['x-mcpkit-hidden']}", ""]
        if act.get("description"):
            out += [act["description"].strip(), ""]
        out += _hints(act.get("annotations"))
        out += _parameters(act.get("inputSchema") or {}, skip=("action",))
    return out


def markdown(info: dict[str, Any], found: dict[str, list[dict[str, Any]]], failures: dict[str, str] | None = None) -> str:
    name = info.get("title") or info.get("name", "server")
    out = [f"# {name}", ""]
    if info.get("version"):
        out += [f"Version {info['version']}.", ""]
    if found["tools"]:
        out += ["## Tools", ""]
        for tool in found["tools"]:
            out += _tool(tool)
    if found["resources"] or found["resourceTemplates"]:
        out += ["## Resources", ""]
        for res in found["resources"]:
            about = first_line(res.get("description") or res.get("name"), 200)
            out.append(f"- `{res['uri']}` ({res.get('mimeType', 'no mime type')}): {about}")
        for tpl in found["resourceTemplates"]:
            about = first_line(tpl.get("description") or tpl.get("name"), 200)
            out.append(f"- `{tpl['uriTemplate']}` (template): {about}")
        out.append("")
    if found["prompts"]:
        out += ["## Prompts", ""]
        for prompt in found["prompts"]:
            args_ = ", ".join(f"`{a['name']}`" + ("" if a.get("required") else " (optional)")
                              for a in prompt.get("arguments") or ())
            about = first_line(prompt.get("description"), 200)
            out.append(f"- `{prompt['name']}`{': ' + args_ if args_ else ''}: {about}")
        out.append("")
    if failures:
        out += ["## Not documented", ""]
        out += [f"- `{method}` failed: {why}" for method, why in failures.items()]
        out.append("")
    return "\n".join(out).rstrip() + "\n"
