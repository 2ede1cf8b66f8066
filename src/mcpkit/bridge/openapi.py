"""Tools from an OpenAPI 3.0/3.1 document: one tool per operation, called through :class:`Upstream`.

    server.openapi("https://api.example.com/openapi.json", auth=api_key,
                   include=["tag:designs"], exclude=["deleteAccount"], rename={"listDesigns": "designs"})

* **Loading.** ``document`` is a dict, a file path or an http(s) URL, JSON or YAML. It is
  validated as OpenAPI 3.0 or 3.1 (openapi-spec-validator, ``pip install mcpkit[openapi]``);
  a document that is not one is :class:`OpenApiError`, one line naming the place.
* **Names.** The ``operationId`` (``method_path`` without one), made host-safe as
  ``host_schemas="portable"`` makes names (mcpkit/hostschemas.py: ``designs.export`` ->
  ``designs_export``, 64 characters at most with Claude Code's prefix counted); ``rename=``
  (operationId -> name) chooses another.
* **Input schema.** Path, query and header parameters and the JSON request body's properties, as
  one object (the body under ``body`` when it is not an object or a name collides); every
  ``$ref`` is resolved and inlined (``referencing``), recursion cut at its second visit, OpenAPI
  3.0's ``nullable`` and boolean ``exclusiveMinimum`` rewritten as JSON Schema 2020-12 says them,
  ``readOnly`` properties left out of what is sent. An operation whose required body is not JSON
  (a form, an upload) is left out, with a warning. The 2xx ``application/json`` response's
  object schema is the ``outputSchema``.
* **Hints** (TL-14). GET and HEAD are read-only; every other method is destructive (PUT and
  DELETE idempotent), so the policy's gates keep them off until allowed (docs/policy.md); every
  operation is open-world. ``annotations=`` (operationId -> hints) overrides them.
* **Calls** go through ``upstream`` (retries, 429 ``Retry-After``, the breaker, statuses as
  contract codes): a 4xx is an ``isError`` result quoting the API's message.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urldefrag, urljoin, urlsplit

from .._extras import needs
from ..hostschemas import served_name
from .upstream import Upstream

log = logging.getLogger("mcpkit.bridge")

__all__ = ["OpenApiError", "tools_from"]

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_READ = frozenset({"GET", "HEAD"})
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
#: OpenAPI 3.x §4.8.12.1: these header parameters are ignored (the client sets them)
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
#: Schema Object fields of OpenAPI that are not JSON Schema validation keywords
_OPENAPI_ONLY = frozenset({"discriminator", "xml", "externalDocs", "example", "nullable"})
_HINTS = ("read_only", "destructive", "idempotent", "open_world", "title")


class OpenApiError(ValueError):
    """The document cannot be loaded or read, or an option names what it does not have."""


def tools_from(
    server: Any,
    document: Mapping[str, Any] | str | os.PathLike[str],
    *,
    base_url: str | None = None,
    upstream: Upstream | None = None,
    auth: str | Callable[[Any], str | None] | None = None,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    rename: Mapping[str, str] | None = None,
    annotations: Mapping[str, Mapping[str, Any]] | None = None,
    prefix: str | None = None,
    **tool_options: Any,
) -> list[Any]:
    """Register a tool on ``server`` for each selected operation of ``document``; returns the Tools.

    ``base_url`` defaults to the document's first ``servers`` entry (resolved against the
    document's URL). The key goes where the document's first header security scheme says (an
    ``apiKey`` header, or a bearer token). ``upstream`` is an :class:`Upstream` to call through
    (its auth header, retries and breaker); without it one is made for ``base_url``. ``auth`` is the API key sent
    with each call: a string, or a function of the call's Context (:func:`mcpkit.auth.api_key`
    passes each caller's own). ``include``/``exclude`` patterns: an operationId glob,
    ``tag:NAME``, a path glob (``/designs/*``) or a method and a path glob (``DELETE /designs/*``).
    ``tool_options`` (``rate_limit=``, ``timeout=``, ``scopes=``...) are :meth:`Server.add_tool`'s,
    for every tool."""
    doc, source = _load(document)
    _validate(doc, source, "the document" if isinstance(document, Mapping) else os.fspath(document))
    legacy = str(doc.get("openapi", "")).startswith("3.0")
    resolver = _resolver(doc, source)
    if upstream is None:
        upstream = Upstream(_base_url(doc, source, base_url), name=str(doc["info"].get("title") or "API"),
                            **_key_placement(doc))
    elif base_url is not None:
        raise OpenApiError("openapi: give base_url= or upstream=, not both (the Upstream has its base URL)")
    rename = dict(rename or {})
    overrides = {k: dict(v) for k, v in (annotations or {}).items()}
    for key, hints in overrides.items():
        unknown = sorted(set(hints) - set(_HINTS))
        if unknown:
            raise OpenApiError(f"openapi: annotations[{key!r}] has {', '.join(unknown)}; "
                               f"the hints are {', '.join(_HINTS)}")
    matched: set[str] = set()
    planned: list[tuple[str, _Operation, dict[str, Any]]] = []
    taken = set(server.tools)
    for method, path, item, op in _operations(doc):
        op_id = str(op.get("operationId") or f"{method}_{path}")
        if not _selected(op_id, method, path, op, include, exclude):
            continue
        operation = _Operation(method.upper(), path, item, op, resolver, legacy)
        if operation.unsendable:
            matched.update(k for k in (op_id,) if k in rename or k in overrides)
            log.warning("openapi: %s %s (%s) left out: its request body is %s, and only JSON bodies are sent",
                        method.upper(), path, op_id, operation.unsendable)
            continue
        name = rename.get(op_id) or served_name(op_id, "portable", getattr(server, "name", None))
        if prefix:
            name = served_name(f"{prefix}_{name}", "portable", getattr(server, "name", None))
        if name in taken:
            raise OpenApiError(f"openapi: {method.upper()} {path} would be tool {name!r}, a name already taken; "
                               f"give it another with rename={{{op_id!r}: ...}}")
        taken.add(name)
        matched.update(k for k in (op_id, name) if k in rename or k in overrides)
        hints: dict[str, Any] = {"read_only": operation.method in _READ, "open_world": True,
                                 "idempotent": operation.method in _IDEMPOTENT}
        if operation.method not in _READ:
            hints["destructive"] = True
        hints.update(overrides.get(op_id, overrides.get(name, {})))
        planned.append((name, operation, hints))
    stray = sorted((set(rename) | set(overrides)) - matched)
    if stray:
        raise OpenApiError(f"openapi: rename/annotations name {', '.join(stray)}, which no selected operation has")
    # registered only once every operation was read: a mistake leaves the server as it was
    return [server.add_tool(name, _caller(operation, upstream, auth), input_schema=operation.input_schema,
                            output_schema=operation.output_schema, description=operation.description,
                            **hints, **tool_options)
            for name, operation, hints in planned]


# ------------------------------------------------------------------ loading


def _load(document: Mapping[str, Any] | str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """The document as a dict, and the URI its relative ``$ref`` and server URLs are read against."""
    if isinstance(document, Mapping):
        return dict(document), "urn:mcpkit:openapi"
    text_source = os.fspath(document)
    if urlsplit(text_source).scheme in ("http", "https"):
        return _parse(_fetch(text_source), text_source), text_source
    path = Path(text_source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise OpenApiError(f"openapi: cannot read {text_source}: {exc.strerror or exc}") from None
    return _parse(text, text_source), path.resolve().as_uri()


def _fetch(url: str) -> str:
    with needs("bridge", "an OpenAPI document at a URL"):
        import httpx

    try:
        response = httpx.get(url, timeout=30.0, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise OpenApiError(f"openapi: cannot fetch {url}: {exc}") from None
    if response.status_code != 200:
        raise OpenApiError(f"openapi: {url} answered {response.status_code}")
    return response.text


def _parse(text: str, source: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        import yaml  # a core dependency (pyproject.toml), imported only for a YAML document

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise OpenApiError(f"openapi: {source} is neither JSON nor YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise OpenApiError(f"openapi: {source} is not an OpenAPI document (not a mapping)")
    return data


def _validate(doc: dict[str, Any], source: str, label: str) -> None:
    version = str(doc.get("openapi", ""))
    if not re.match(r"3\.[01]\.", version):
        found = f"openapi: {version}" if version else ("swagger: 2.0" if "swagger" in doc else "no openapi field")
        raise OpenApiError(f"openapi: {label} is not an OpenAPI 3.0 or 3.1 document ({found})")
    with needs("openapi", "tools from an OpenAPI document"):
        from openapi_spec_validator import validate
        from openapi_spec_validator.validation.exceptions import OpenAPIValidationError
        from referencing.exceptions import Unresolvable

    try:
        validate(doc, base_uri=source if "://" in source else "")
    except Unresolvable as exc:
        raise OpenApiError(f"openapi: {label}: cannot resolve $ref {_ref_of(exc)}") from None
    except OpenAPIValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the root"
        said = exc.message.splitlines()[0] if exc.message else "invalid"
        raise OpenApiError(f"openapi: {label} is not valid OpenAPI {version}: {said} (at {where})") from None


def _ref_of(exc: Exception) -> str:
    """The reference an Unresolvable names (its text quotes the whole document: too long for a line)."""
    ref = str(getattr(exc, "ref", None) or type(exc).__name__)
    return f"#{ref}" if ref.startswith("/") else ref  # a PointerToNowhere names the bare pointer


def _base_url(doc: dict[str, Any], source: str, given: str | None) -> str:
    if given:
        return given
    servers = doc.get("servers") or []
    url = servers[0].get("url") if servers and isinstance(servers[0], dict) else None
    if not url or (url.startswith("/") and "://" not in source) or "{" in url:
        raise OpenApiError("openapi: the document names no absolute server URL; give base_url=")
    return urljoin(source, url)


def _key_placement(doc: dict[str, Any]) -> dict[str, Any]:
    """Where the API takes ``auth``'s key, from its first security scheme that takes a key in a
    header: an ``apiKey`` header (its name, the key alone) or HTTP ``bearer``; else a bearer token."""
    for scheme in ((doc.get("components") or {}).get("securitySchemes") or {}).values():
        if not isinstance(scheme, dict):
            continue
        if scheme.get("type") == "apiKey" and scheme.get("in") == "header" and scheme.get("name"):
            return {"auth_header": str(scheme["name"]), "auth_scheme": None}
        if scheme.get("type") == "http" and str(scheme.get("scheme", "")).lower() == "bearer":
            return {}
    return {}


def _resolver(doc: dict[str, Any], source: str) -> Any:
    with needs("openapi", "tools from an OpenAPI document"):
        from referencing import Registry, Resource

    def retrieve(uri: str) -> Any:
        # a $ref to another file of the API's, read as the document itself was (JSON or YAML)
        if uri.startswith("file:"):
            return Resource.opaque(_parse(Path(urlsplit(uri).path).read_text(encoding="utf-8"), uri))
        if urlsplit(uri).scheme in ("http", "https"):
            return Resource.opaque(_parse(_fetch(uri), uri))
        raise OpenApiError(f"openapi: cannot resolve $ref to {uri}")

    registry = Registry(retrieve=retrieve).with_resource(source, Resource.opaque(doc))  # type: ignore[call-arg]
    return registry.resolver(source)


# ------------------------------------------------------------------ operations


def _operations(doc: dict[str, Any]) -> Iterable[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    for path, item in (doc.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        for method in _METHODS:
            if isinstance(item.get(method), dict):
                yield method, path, item, item[method]


def _selected(op_id: str, method: str, path: str, op: dict[str, Any], include: Sequence[str] | None,
              exclude: Sequence[str]) -> bool:
    def matches(pattern: str) -> bool:
        if pattern.startswith("tag:"):
            return any(fnmatch.fnmatchcase(str(t), pattern[4:]) for t in op.get("tags") or ())
        verb, _, glob = pattern.partition(" ")
        if glob and verb.upper() == verb and verb.lower() in _METHODS:
            return verb.lower() == method and fnmatch.fnmatchcase(path, glob)
        if pattern.startswith("/"):
            return fnmatch.fnmatchcase(path, pattern)
        return fnmatch.fnmatchcase(op_id, pattern)

    if isinstance(include, str) or isinstance(exclude, str):
        raise OpenApiError("openapi: include= and exclude= take a list of patterns, not one string")
    if include is not None and not any(matches(p) for p in include):
        return False
    return not any(matches(p) for p in exclude)


class _Operation:
    """One operation, read: where each argument goes, and the schemas."""

    def __init__(self, method: str, path: str, item: dict[str, Any], op: dict[str, Any], resolver: Any,
                 legacy: bool) -> None:
        self.method, self.path = method, path
        self.legacy = legacy
        summary, text = (op.get("summary") or "").strip(), (op.get("description") or "").strip()
        parts = [summary] + ([text] if text and text != summary else [])
        self.description = "\n\n".join(p for p in parts if p) or f"{method} {path}"
        #: argument name -> (where: path/query/header/body/field, name in the request)
        self.places: dict[str, tuple[str, str]] = {}
        properties: dict[str, Any] = {}
        required: list[str] = []
        params: dict[tuple[str, str], dict[str, Any]] = {}
        for raw in [*(item.get("parameters") or []), *(op.get("parameters") or [])]:
            param, base = self._deref(raw, resolver)
            params[(param.get("in"), param.get("name"))] = (param, base)  # the operation's win (§4.8.10.1)
        for (where, pname), (param, base) in params.items():
            if where not in ("path", "query", "header") or (where == "header" and pname.lower() in _IGNORED_HEADERS):
                continue  # cookies are not sent by this client
            schema = param.get("schema")
            if schema is None:
                media = next(iter((param.get("content") or {}).values()), {})
                schema = media.get("schema", {})
            prop = self._schema(schema, base, "in")
            if param.get("description") and "description" not in prop:
                prop = {**prop, "description": param["description"]}
            arg = pname if pname not in properties else f"{pname}_{where}"
            properties[arg] = prop
            self.places[arg] = (where, pname)
            if param.get("required") or where == "path":
                required.append(arg)
        body, base = self._deref(op.get("requestBody") or {}, resolver)
        media = _json_media(body.get("content") or {})
        #: a required body this client cannot send (form, multipart, binary): the media types, else ""
        self.unsendable = ", ".join(body.get("content") or {}) if media is None and body.get("required") else ""
        if media is not None:
            schema = self._schema(media.get("schema", {}), base, "in")
            fields = schema.get("properties") if schema.get("type") == "object" else None
            if isinstance(fields, dict) and not set(fields) & set(properties) and "body" not in fields:
                properties.update(fields)
                self.places.update({f: ("field", f) for f in fields})
                if body.get("required"):  # a field the body requires is required when a body is
                    required += [f for f in schema.get("required", []) if f in fields]
            else:
                properties["body"] = schema
                self.places["body"] = ("body", "body")
                if body.get("required"):
                    required.append("body")
        self.input_schema: dict[str, Any] = {"type": "object", "properties": properties,
                                             "additionalProperties": False}
        if required:
            self.input_schema["required"] = required
        self.output_schema = self._output(op, resolver)

    def _output(self, op: dict[str, Any], resolver: Any) -> dict[str, Any] | None:
        responses = op.get("responses") or {}
        for status, raw in sorted(responses.items(), key=lambda kv: str(kv[0])):
            if not str(status).startswith("2"):  # 200..299 and 2XX; the first is the answer
                continue
            answer, base = self._deref(raw, resolver)
            media = _json_media(answer.get("content") or {})
            if media is None or "schema" not in media:
                return None
            schema = self._schema(media["schema"], base, "out")
            # MCP: structuredContent is an object, so only an object schema can be an outputSchema
            return schema if schema.get("type") == "object" else None
        return None

    def _deref(self, node: Any, resolver: Any) -> tuple[dict[str, Any], Any]:
        seen = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            try:
                resolved = resolver.lookup(node["$ref"])
            except Exception as exc:  # referencing's Unresolvable, or a retrieve failure
                raise OpenApiError(f"openapi: {self.method} {self.path}: cannot resolve $ref {node['$ref']} "
                                   f"({type(exc).__name__})") from None
            node, resolver = resolved.contents, resolved.resolver
            seen += 1
            if seen > 32:
                raise OpenApiError(f"openapi: {self.method} {self.path}: $ref loops")
        return (node if isinstance(node, dict) else {}), resolver

    def _schema(self, node: Any, resolver: Any, direction: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        """``node`` as JSON Schema 2020-12 with every reference inlined (a tool's schema stands alone)."""
        if not isinstance(node, dict):
            return {} if node is True or node is None else {"not": {}}
        if isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            key = urljoin(getattr(resolver, "_base_uri", ""), ref)
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if key in seen:  # recursion: cut here, the rest is described
                label = urldefrag(ref)[1].rsplit("/", 1)[-1] or ref
                return {**self._schema(siblings, resolver, direction, seen),
                        "description": siblings.get("description") or f"A {label} (recursive)."}
            try:
                resolved = resolver.lookup(ref)
            except Exception as exc:  # referencing's Unresolvable, or a retrieve failure
                raise OpenApiError(f"openapi: {self.method} {self.path}: cannot resolve $ref {ref} "
                                   f"({type(exc).__name__})") from None
            out = self._schema(resolved.contents, resolved.resolver, direction, (*seen, key))
            return {**out, **self._schema(siblings, resolver, direction, seen)} if siblings else out
        out: dict[str, Any] = {}
        hidden: set[str] = set()
        for k, v in node.items():
            if k in _OPENAPI_ONLY or k.startswith("x-") or k in ("$schema", "$id"):
                continue
            if k in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas") \
                    and isinstance(v, dict):
                kept = {name: sub for name, sub in v.items()
                        if not (k == "properties" and _hidden(sub, resolver, direction))}
                hidden.update(set(v) - set(kept))
                out[k] = {name: self._schema(sub, resolver, direction, seen) for name, sub in kept.items()}
            elif k in ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
                       "unevaluatedProperties", "unevaluatedItems", "additionalItems") and isinstance(v, dict):
                out[k] = self._schema(v, resolver, direction, seen)
            elif k in ("allOf", "anyOf", "oneOf", "prefixItems") and isinstance(v, list):
                out[k] = [self._schema(s, resolver, direction, seen) for s in v]
            else:
                out[k] = v
        if hidden and isinstance(out.get("required"), list):  # a readOnly id is required in answers only
            out["required"] = [r for r in out["required"] if r not in hidden]
            if not out["required"]:
                del out["required"]
        if "example" in node and "examples" not in node:
            out["examples"] = [node["example"]]
        if self.legacy:
            _from_openapi30(node, out)
        return out


def _hidden(schema: Any, resolver: Any, direction: str) -> bool:
    """A readOnly property is not sent, a writeOnly one not answered (OpenAPI 3.x Schema Object)."""
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        try:
            schema = resolver.lookup(schema["$ref"]).contents
        except Exception:
            return False
    return isinstance(schema, dict) and bool(schema.get("readOnly" if direction == "in" else "writeOnly"))


def _from_openapi30(node: dict[str, Any], out: dict[str, Any]) -> None:
    """OpenAPI 3.0's dialect, said as 2020-12: ``nullable`` and boolean exclusive bounds."""
    for bound, exclusive in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
        if isinstance(node.get(exclusive), bool):
            if node[exclusive] and bound in out:
                out[exclusive] = out.pop(bound)
            else:
                out.pop(exclusive, None)
    if node.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
            if isinstance(out.get("enum"), list) and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        elif kind is None:
            inner = dict(out)
            out.clear()
            out["anyOf"] = [inner, {"type": "null"}]


def _json_media(content: Mapping[str, Any]) -> dict[str, Any] | None:
    for media_type, media in content.items():
        kind = media_type.split(";")[0].strip().lower()
        if kind == "application/json" or kind.endswith("+json"):
            return media if isinstance(media, dict) else {}
    return None


# ------------------------------------------------------------------ calls


def _caller(operation: _Operation, upstream: Upstream, auth: Any) -> Callable[..., Any]:
    async def call(arguments: dict[str, Any], ctx: Any) -> Any:
        path, query, headers = operation.path, {}, {}
        body: Any = None
        for arg, value in arguments.items():
            where, name = operation.places[arg]
            if where == "path":
                text = json.dumps(value) if isinstance(value, bool) else str(value)
                path = path.replace("{" + name + "}", quote(text, safe=""))
            elif where == "query":
                query[name] = value
            elif where == "header":
                headers[name] = json.dumps(value) if isinstance(value, bool) else str(value)
            elif where == "body":
                body = value
            else:
                body = {**(body or {}), name: value}
        key = auth(ctx) if callable(auth) else auth
        return await upstream.request(operation.method, path, key=key, json=body, params=query or None,
                                      headers=headers or None)

    return call
