"""Python signatures and type hints -> JSON Schema 2020-12; JSON arguments -> Python values.

Three walks over an annotation, kept apart because they run at different times: ``_Builder``
makes the schema (once, at registration); ``_loader`` makes a JSON -> Python converter, or None
when the JSON value already is the Python value, so that ``bind`` is the identity on the hot
path; ``_plain`` tells whether a return value needs ``_to_json`` at all.

Named classes go into the root ``$defs`` and are referenced with ``$ref``, never inlined: inlining
breaks recursive types and bloats schemas. pydantic is never imported at module level: it is
reached through a user's model class, or imported for types that declare pydantic support.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import enum
import functools
import inspect
import json
import re
import sys
import textwrap
import types
import typing
import uuid
from collections import abc
from dataclasses import dataclass
from decimal import Decimal
from pathlib import PurePath
from typing import Annotated, Any, Callable, Literal, Union, get_args, get_origin

from .._extras import needs

__all__ = ["BindError", "InputSpec", "OutputSpec", "SchemaError", "checking_bind", "function_description",
           "input_spec", "output_spec", "type_schema"]


class SchemaError(TypeError):
    """An annotation that has no JSON Schema form, or a signature that cannot take JSON args."""


class BindError(ValueError):
    """A schema-valid argument that still does not convert, e.g. a malformed date: in 2020-12
    ``format`` is an annotation, so the validator lets it through."""


@dataclass(frozen=True, slots=True)
class InputSpec:
    schema: dict
    bind: Callable[[dict], dict]
    context_param: str | None


@dataclass(frozen=True, slots=True)
class OutputSpec:
    schema: dict | None
    wrapped: bool
    dump: Callable[[Any], Any]


_NoneType = type(None)
_Conv = Callable[[Any], Any]
_MISSING = object()
_REQUIRED, _NOT_REQUIRED = object(), object()  # TypedDict key markers, reported by _strip
_UNIONS = (Union, types.UnionType)
_SEQS = (list, abc.Sequence, abc.MutableSequence, abc.Iterable, abc.Collection)
_SETS = (set, frozenset, abc.Set, abc.MutableSet)
_MAPS = (dict, abc.Mapping, abc.MutableMapping)
_BARE = {*_SEQS, *_SETS, *_MAPS, tuple}
_JSON_SCALARS = (str, int, float, bool, _NoneType)
# JSON type of a JSON value; bool before int, as bool is an int in Python
_KIND = {_NoneType: "null", bool: "boolean", int: "integer", float: "number", str: "string",
         dict: "object", list: "array", tuple: "array"}
_ALL_KINDS = frozenset(_KIND.values())
_REF = "#/$defs/"

# Order matters: bool before int, datetime before date (a datetime is a date).
_SCALARS: tuple[tuple[Any, dict], ...] = (
    (bool, {"type": "boolean"}),
    (int, {"type": "integer"}),
    ((float, Decimal), {"type": "number"}),
    (str, {"type": "string"}),
    ((bytes, bytearray), {"type": "string", "contentEncoding": "base64"}),
    (dt.datetime, {"type": "string", "format": "date-time"}),
    (dt.date, {"type": "string", "format": "date"}),
    (dt.time, {"type": "string", "format": "time"}),
    (uuid.UUID, {"type": "string", "format": "uuid"}),
    (PurePath, {"type": "string"}),
)
# annotated_types / pydantic constraint attribute -> JSON Schema keyword (numbers)
_NUMERIC = (("ge", "minimum"), ("gt", "exclusiveMinimum"), ("le", "maximum"),
            ("lt", "exclusiveMaximum"), ("multiple_of", "multipleOf"))


def _identity(value: Any) -> Any:
    return value


def _name_of(tp: Any) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)


def _strip(tp: Any) -> tuple[Any, list]:
    """Peel Annotated, Required/NotRequired/ReadOnly and NewType: (type, metadata). Required
    markers go into the metadata: 3.11 loses them in __required_keys__ for string annotations."""
    meta: list = []
    while True:
        origin = get_origin(tp)
        marker = getattr(origin, "_name", None)
        if origin is Annotated:
            meta.extend(tp.__metadata__)
            tp = tp.__origin__
        elif marker in ("Required", "NotRequired", "ReadOnly"):
            if marker != "ReadOnly":
                meta.append(_REQUIRED if marker == "Required" else _NOT_REQUIRED)
            tp = get_args(tp)[0]
        elif hasattr(tp, "__supertype__"):  # typing.NewType
            tp = tp.__supertype__
        else:
            return tp, meta


def _origin_args(tp: Any) -> tuple[Any, tuple]:
    origin = get_origin(tp)
    if origin is None and tp in _BARE:  # bare `list`, `dict`, `Sequence`... mean [Any]
        return tp, ()
    return origin, get_args(tp)


def _is_fixed_tuple(args: tuple) -> bool:
    return bool(args) and not (len(args) == 2 and args[1] is Ellipsis)


def _is_typeddict(tp: Any) -> bool:
    # duck-typed: typing_extensions.TypedDict is a different class on 3.11
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_json_schema") and hasattr(tp, "model_validate")


def _is_content(tp: Any) -> bool:
    return getattr(tp, "__mcp_content__", False) is True


def _hints(cls: type) -> dict:
    try:  # localns lets a class defined in a function refer to itself by name
        return typing.get_type_hints(cls, localns={cls.__name__: cls}, include_extras=True)
    except Exception as exc:
        raise SchemaError(f"cannot resolve the annotations of {cls.__qualname__}: {exc}") from None


# ----------------------------------------------------------------------------------------------
# Python value -> JSON value


def _to_json(v: Any) -> Any:
    t = type(v)
    if t in _JSON_SCALARS:
        return v
    if t is list or t is tuple:
        return [_to_json(x) for x in v]
    if t is dict:
        return {_key(k): _to_json(x) for k, x in v.items()}
    if isinstance(v, enum.Enum):
        return _to_json(v.value)
    if isinstance(v, (str, int, float)):
        return v
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, (uuid.UUID, PurePath)):
        return str(v)
    if isinstance(v, Decimal):
        return int(v) if v.is_finite() and v == v.to_integral_value() else float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(v).decode("ascii")
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _to_json(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if hasattr(v, "model_dump") and not isinstance(v, type):  # pydantic: by_alias, like the
        return v.model_dump(mode="json", by_alias=True)  # schema model_json_schema makes
    if isinstance(v, (set, frozenset)):
        items = [_to_json(x) for x in v]
        with contextlib.suppress(TypeError):  # deterministic output when items are comparable
            items.sort()
        return items
    if isinstance(v, abc.Mapping):
        return {_key(k): _to_json(x) for k, x in v.items()}
    if isinstance(v, abc.Sequence):
        return [_to_json(x) for x in v]
    if "pydantic_core" in sys.modules:  # pydantic-only values (Url, SecretStr...), if loaded
        with needs("pydantic", "a pydantic value"):
            from pydantic_core import to_jsonable_python
        return to_jsonable_python(v)
    raise TypeError(f"{t.__qualname__} is not JSON-serializable")


def _key(k: Any) -> str:
    if isinstance(k, enum.Enum):
        k = k.value
    return k if type(k) is str else str(_to_json(k))


def _json_default(v: Any) -> Any:
    """The JSON form of a default, or _MISSING when it has none (arbitrary objects, NaN)."""
    try:
        out = _to_json(v)
        json.dumps(out, allow_nan=False)
        return out
    except (TypeError, ValueError):
        return _MISSING


def _kind(v: Any) -> str:
    kind = _KIND.get(type(v))
    return kind or next((k for t, k in _KIND.items() if isinstance(v, t)), "array")


def _enum_schema(values: list) -> dict:
    kinds = {_kind(v) for v in values}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    return {"type": kinds.pop(), "enum": values} if len(kinds) == 1 else {"enum": values}


# ----------------------------------------------------------------------------------------------
# annotation -> schema


class _Builder:
    def __init__(self, output: bool) -> None:
        self.output = output  # output: serialization schemas, every dataclass field is present
        self.defs: dict[str, dict] = {}
        self.names: dict[Any, str] = {}  # class -> its $defs name

    def fresh(self, base: str, avoid: abc.Container = ()) -> str:
        # $defs keys end up in JSON pointers: keep them free of '/', '~' and other surprises
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", base) or "Model"
        name, n = base, 1
        while name in self.defs or name in avoid:
            n += 1
            name = f"{base}{n}"
        return name

    def schema(self, tp: Any) -> dict:
        tp, meta = _strip(tp)
        out = self.base(tp)
        return _apply_meta(out, meta) if meta else out

    def base(self, tp: Any) -> dict:
        if tp is Any or tp is object:
            return {}
        if tp is None or tp is _NoneType:
            return {"type": "null"}
        origin, args = _origin_args(tp)
        if origin in _UNIONS:
            return self.union(args)
        if origin is Literal:
            return _enum_schema([_to_json(a) for a in args])
        if origin in _SEQS or (origin is tuple and not _is_fixed_tuple(args)):
            return self.array(args[:1])
        if origin in _SETS:
            return {**self.array(args), "uniqueItems": True}
        if origin is tuple:
            return {"type": "array", "prefixItems": [self.schema(a) for a in args],
                    "items": False, "minItems": len(args), "maxItems": len(args)}
        if origin in _MAPS:
            return self.mapping(args)
        if origin is not None or not isinstance(tp, type):
            raise SchemaError(f"unsupported type {tp!r}")
        if issubclass(tp, enum.Enum):
            return _enum_schema([_to_json(m.value) for m in tp])
        if _is_pydantic_model(tp):
            return self.pydantic_model(tp)
        if dataclasses.is_dataclass(tp):
            return self.named(tp, self.dataclass_body)
        if _is_typeddict(tp):
            return self.named(tp, self.typeddict_body)
        for cls, schema in _SCALARS:
            if issubclass(tp, cls):
                return dict(schema)
        if hasattr(tp, "__get_pydantic_core_schema__"):  # pydantic-aware types (AnyUrl, ...)
            with needs("pydantic", "a pydantic-aware type"):
                from pydantic import TypeAdapter
            mode = "serialization" if self.output else "validation"
            return self.hoist(TypeAdapter(tp).json_schema(ref_template=_REF + "{model}", mode=mode))
        raise SchemaError(f"unsupported type {_name_of(tp)}")

    def union(self, args: tuple) -> dict:
        members = [a for a in args if a is not None and a is not _NoneType]
        schemas = [self.schema(a) for a in members]
        out = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
        if len(members) == len(args):
            return out
        # Optional[scalar] reads better as a type list; anything else gets anyOf [..., null]
        if len(schemas) == 1 and out.get("type") in ("string", "integer", "number", "boolean"):
            out = {**out, "type": [out["type"], "null"]}
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
            return out
        return {"anyOf": [*schemas, {"type": "null"}]}

    def array(self, args: tuple) -> dict:
        items = self.schema(args[0]) if args else {}
        return {"type": "array", "items": items} if items else {"type": "array"}

    def mapping(self, args: tuple) -> dict:
        if not args:
            return {"type": "object"}
        key = _strip(args[0])[0]
        if key is not str and key is not Any:
            raise SchemaError(f"dict keys must be str (JSON object keys), not {_name_of(key)}")
        value = self.schema(args[1])
        return {"type": "object", "additionalProperties": value} if value else {"type": "object"}

    def named(self, cls: type, body: Callable[[type], dict]) -> dict:
        name = self.names.get(cls)
        if name is None:
            name = self.names[cls] = self.fresh(cls.__name__)
            self.defs[name] = {}  # reserved now: a nested class of the same name gets another
            self.defs[name] = body(cls)
        return {"$ref": _REF + name}

    def dataclass_body(self, cls: type) -> dict:
        hints = _hints(cls)
        props: dict[str, dict] = {}
        required: list[str] = []
        for f in dataclasses.fields(cls):
            if not f.init and not self.output:
                continue  # cannot be passed to the constructor
            prop = self.schema(hints.get(f.name, Any))
            default = _MISSING if f.default is dataclasses.MISSING else _json_default(f.default)
            if default is not _MISSING:
                prop = {**prop, "default": default}
            # a dumped dataclass always has every field
            if self.output or f.default is f.default_factory is dataclasses.MISSING:
                required.append(f.name)
            props[f.name] = prop
        return _object(props, required, _class_doc(cls), closed=True)

    def typeddict_body(self, cls: type) -> dict:
        props: dict[str, dict] = {}
        required: list[str] = []
        for key, hint in _hints(cls).items():
            props[key] = self.schema(hint)
            meta = _strip(hint)[1]
            if _REQUIRED in meta or (_NOT_REQUIRED not in meta and key in cls.__required_keys__):
                required.append(key)
        # left open: extra keys are harmless in a dict, and bind passes the dict through
        return _object(props, required, _class_doc(cls), closed=False)

    def pydantic_model(self, cls: type) -> dict:
        name = self.names.get(cls)
        if name is None:
            mode = "serialization" if self.output else "validation"
            out = self.hoist(cls.model_json_schema(ref_template=_REF + "{model}", mode=mode))
            if set(out) == {"$ref"}:  # a recursive model: pydantic put it in $defs already
                name = out["$ref"][len(_REF):]
            else:
                name = self.fresh(cls.__name__)
                self.defs[name] = out
            self.names[cls] = name
        return {"$ref": _REF + name}

    def hoist(self, raw: dict) -> dict:
        """Move pydantic's $defs into ours, renaming a name taken by a different definition."""
        sub = raw.pop("$defs", {})
        rename = {n: self.fresh(n, avoid=sub) for n, body in sub.items()
                  if n in self.defs and self.defs[n] != body}
        for name, body in sub.items():
            self.defs[rename.get(name, name)] = _rewrite_refs(body, rename)
        return _rewrite_refs(raw, rename)


def _object(props: dict, required: list, description: str | None, closed: bool) -> dict:
    out: dict = {"type": "object"}
    if description:
        out["description"] = description
    out["properties"] = props
    if required:
        out["required"] = required
    if closed:
        out["additionalProperties"] = False
    return out


def _class_doc(cls: type) -> str | None:
    doc = cls.__dict__.get("__doc__")
    # dataclasses invent "Name(field: type, ...)" when there is no docstring
    return None if not doc or doc.startswith(cls.__name__ + "(") else function_description(cls)


def _rewrite_refs(node: Any, rename: dict[str, str]) -> Any:
    if not rename:
        return node
    if isinstance(node, list):
        return [_rewrite_refs(v, rename) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _rewrite_refs(v, rename) for k, v in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF) and ref[len(_REF):] in rename:
        out["$ref"] = _REF + rename[ref[len(_REF):]]
    return out


def _apply_meta(schema: dict, meta: list) -> dict:
    """Descriptions and annotated_types-style constraints, all duck-typed (nothing imported)."""
    out = dict(schema)
    kinds = out.get("type")
    kinds = {kinds} if isinstance(kinds, str) else set(kinds or ())
    length = ("minItems", "maxItems") if "array" in kinds else \
        ("minProperties", "maxProperties") if "object" in kinds else ("minLength", "maxLength")
    pending = list(meta)
    while pending:
        m = pending.pop(0)
        if isinstance(m, str):
            out["description"] = m
            continue
        for attr in ("description", "documentation"):  # pydantic Field, typing_extensions.Doc
            text = getattr(m, attr, None)
            if isinstance(text, str) and text:
                out["description"] = text
        for attr, keyword in (*_NUMERIC, *zip(("min_length", "max_length"), length, strict=True)):
            value = getattr(m, attr, None)
            if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
                out[keyword] = _to_json(value)
        pattern = getattr(m, "pattern", None)
        pattern = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
        if isinstance(pattern, str):
            out["pattern"] = pattern
        nested = getattr(m, "metadata", None)  # pydantic FieldInfo keeps its constraints here
        if isinstance(nested, list):
            pending.extend(nested)
    return out


def _refs(node: Any) -> abc.Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            yield ref[len(_REF):]
        node = list(node.values())
    if isinstance(node, list):
        for v in node:
            yield from _refs(v)


def _with_defs(root: dict, defs: dict[str, dict]) -> dict:
    """Attach the $defs reachable from root; unreferenced ones are dropped."""
    used: set[str] = set()
    todo = [root]
    while todo:
        for name in _refs(todo.pop()):
            if name not in used:
                used.add(name)
                todo.append(defs.get(name))
    kept = {k: v for k, v in defs.items() if k in used}
    return {**root, "$defs": kept} if kept else root


def _inline_root(schema: dict, defs: dict[str, dict]) -> dict:
    """A reference at the root becomes the definition itself (its $defs entry stays when the
    definition is recursive), so a dataclass/TypedDict/model root reads as type: object."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF) and ref[len(_REF):] in defs:
        return {**defs[ref[len(_REF):]], **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def type_schema(tp: Any) -> dict:
    """The schema of one annotation (input semantics) with the $defs it needs at its root."""
    builder = _Builder(output=False)
    return _with_defs(_inline_root(builder.schema(tp), builder.defs), builder.defs)


# ----------------------------------------------------------------------------------------------
# JSON value -> Python value (bind)


def _kinds(tp: Any) -> frozenset[str]:
    """The JSON types a value of `tp` can arrive as: picks the union member to convert with."""
    tp, _ = _strip(tp)
    origin, args = _origin_args(tp)
    if tp is None or tp is _NoneType:
        return frozenset({"null"})
    if origin in _UNIONS:
        return frozenset().union(*map(_kinds, args))
    if origin is Literal or (isinstance(tp, type) and issubclass(tp, enum.Enum)):
        return frozenset(_kind(_to_json(a)) for a in (args if origin is Literal else tp))
    if origin in _SEQS or origin in _SETS or origin is tuple:
        return frozenset({"array"})
    if origin in _MAPS or dataclasses.is_dataclass(tp) or _is_typeddict(tp):
        return frozenset({"object"})
    if isinstance(tp, type):
        for cls, schema in _SCALARS:  # a number may arrive as an integer (3 for 3.0)
            if issubclass(tp, cls):
                kind = schema["type"]
                return frozenset({"integer", "number"} if kind == "number" else {kind})
    return _ALL_KINDS  # Any, pydantic models (a RootModel can be anything)...


def _from_str(parse: Callable[[str], Any]) -> _Conv:
    return lambda v: parse(v) if isinstance(v, str) else v


def _b64(v: str) -> bytes:
    return base64.b64decode(v, validate=True)


def _loader(tp: Any, memo: dict, dump: bool = False) -> _Conv | None:
    """A converter for JSON values of `tp`, or None when they need no conversion. With `dump`,
    only tells whether values of `tp` may need `_to_json` (None: they already are JSON)."""
    tp, meta = _strip(tp)
    if not dump:
        # Annotated[T, hook]: a metadata object with __mcp_load__ converts the value itself
        # (mcpkit.policy.SandboxPath resolves and confines a path this way)
        for m in meta:
            hook = getattr(m, "__mcp_load__", None)
            if hook is not None:
                return hook
    if tp is Any or tp is object:
        return _to_json if dump else None  # an Any value may be anything at all
    origin, args = _origin_args(tp)
    if origin in _UNIONS:
        members = tuple((_kinds(a), _loader(a, memo, dump)) for a in args)
        if all(conv is None for _, conv in members):
            return None
        return functools.partial(_load_union, members)
    if origin is Literal:
        if not any(isinstance(a, enum.Enum) for a in args):
            return None
        table = {_to_json(a): a for a in args}
        return lambda v: table.get(v, v)
    if origin is tuple and _is_fixed_tuple(args):
        convs = [_loader(a, memo, dump) or _identity for a in args]
        return lambda v: tuple(c(x) for c, x in zip(convs, v, strict=True))
    if origin in _SEQS or origin in _SETS or origin is tuple:
        item = _loader(args[0] if args else Any, memo, dump)
        make = tuple if origin is tuple else frozenset if origin is frozenset else \
            set if origin in _SETS else None
        if make is None:  # a list stays a list
            return None if item is None else (lambda v: [item(x) for x in v])
        return make if item is None else (lambda v: make(item(x) for x in v))
    if origin in _MAPS:
        value = _loader(args[1] if args else Any, memo, dump)
        return None if value is None else (lambda v: {k: value(x) for k, x in v.items()})
    if origin is not None or not isinstance(tp, type) or tp in _JSON_SCALARS:
        return None
    if issubclass(tp, enum.Enum):
        return tp
    if _is_pydantic_model(tp):
        return tp.model_validate
    if dataclasses.is_dataclass(tp) or _is_typeddict(tp):
        return _class_loader(tp, memo, dump)
    if issubclass(tp, (dt.date, dt.time)):  # and datetime
        return _from_str(tp.fromisoformat)
    if issubclass(tp, (uuid.UUID, PurePath)):
        return _from_str(tp)
    if issubclass(tp, Decimal):
        return lambda v: tp(str(v))  # via str: Decimal(0.1) would keep the float's binary noise
    if issubclass(tp, (bytes, bytearray)):
        return _b64 if tp is bytes else (lambda v: tp(_b64(v)))
    if not issubclass(tp, (bool, int, float, str)) and hasattr(tp, "__get_pydantic_core_schema__"):
        with needs("pydantic", "a pydantic-aware type"):
            from pydantic import TypeAdapter
        return TypeAdapter(tp).validate_python
    return None


def _load_union(members: tuple, v: Any) -> Any:
    kind = _kind(v)
    error: Exception | None = None
    for kinds, conv in members:  # the first member whose JSON type fits and that converts
        if kind in kinds:
            if conv is None:
                return v
            try:
                return conv(v)
            except (ValueError, TypeError) as exc:
                error = exc
    if error is not None:
        raise error
    return v


def _class_loader(cls: type, memo: dict, dump: bool) -> _Conv | None:
    if cls in memo:
        return memo[cls]
    cell: list[_Conv] = []
    memo[cls] = lambda v: cell[0](v)  # trampoline for recursive classes, resolved below
    hints = _hints(cls)
    is_dc = dataclasses.is_dataclass(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init] if is_dc else list(hints)
    fields = tuple((n, c) for n in names if (c := _loader(hints.get(n, Any), memo, dump)) is not None)
    if not fields and not is_dc:  # a TypedDict of plain values: the dict is the value
        cell.append(_identity)
        memo[cls] = None
        return None

    def load(v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        if fields:
            v = dict(v)
            for name, conv in fields:
                if name in v:
                    v[name] = conv(v[name])
        return cls(**v) if is_dc else v

    cell.append(load)
    memo[cls] = load
    return load


# ----------------------------------------------------------------------------------------------
# public entry points


def _resolve_hints(func: Any, context_type: type | None) -> dict:
    target = func
    while isinstance(target, functools.partial):
        target = target.func
    if isinstance(target, type):
        target = target.__init__  # get_type_hints(cls) would give the class attributes
    elif not inspect.isroutine(target):
        target = type(target).__call__  # a callable object
    try:
        return typing.get_type_hints(target, include_extras=True)
    except NameError:
        if context_type is None:  # retry for `if TYPE_CHECKING: from mcpkit import Context`
            raise
        local = {context_type.__name__: context_type}
        return typing.get_type_hints(target, localns=local, include_extras=True)


def _is_context(tp: Any, context_type: type) -> bool:
    tp, _ = _strip(tp)
    if get_origin(tp) in _UNIONS:
        return any(_is_context(a, context_type) for a in get_args(tp) if a is not _NoneType)
    tp = get_origin(tp) or tp
    return isinstance(tp, type) and issubclass(tp, context_type)


def input_spec(func: Callable, *, context_type: type | None = None,
               descriptions: dict[str, str] | None = None) -> InputSpec:
    """The inputSchema of `func`, and a `bind` turning validated JSON arguments into kwargs."""
    qual = getattr(func, "__qualname__", repr(func))
    try:
        sig = inspect.signature(func)
        hints = _resolve_hints(func, context_type)
    except (NameError, TypeError, ValueError) as exc:
        raise SchemaError(f"cannot read the signature of {qual}: {exc}") from None
    doc = _param_docs(inspect.getdoc(func) or "")
    builder, memo = _Builder(output=False), {}
    props: dict[str, dict] = {}
    required: list[str] = []
    convs: list[tuple[str, _Conv]] = []
    hooked: list[tuple[str, Any]] = []
    context_param: str | None = None
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            kind = {p.VAR_POSITIONAL: "*args", p.VAR_KEYWORD: "**kwargs"}.get(p.kind, "positional-only")
            raise SchemaError(f"parameter {p.name!r} of {qual} is {kind}: tool arguments come by name "
                              "from a JSON object, so use named (keyword) parameters")
        ann = hints.get(p.name, Any)
        if context_type is not None and _is_context(ann, context_type):
            if context_param is not None:
                raise SchemaError(f"{qual} has two context parameters: {context_param!r} and {p.name!r}")
            context_param = p.name
            continue
        try:
            prop = builder.schema(ann)
            if p.default is None and not _accepts_null(prop):
                # ``tags: list[str] = None`` means "or None": a default its own schema refuses
                # would make every call that omits it look invalid to a client that checks
                ann = typing.Optional[ann]  # noqa: UP045 - a runtime type expression
                prop = builder.schema(ann)
            conv = _loader(ann, memo)
        except SchemaError as exc:
            raise SchemaError(f"parameter {p.name!r} of {qual}: {exc}") from None
        text = (descriptions or {}).get(p.name) or prop.get("description") or doc.get(p.name)
        if text:
            prop = {**prop, "description": text}
        default = _MISSING if p.default is p.empty else _json_default(p.default)
        if default is not _MISSING:
            prop = {**prop, "default": default}
        if p.default is p.empty:
            required.append(p.name)
        props[p.name] = prop
        if conv is not None:
            convs.append((p.name, conv))
            if default is not _MISSING and default is not None and getattr(conv, "__self__", None) is not None \
                    and hasattr(conv.__self__, "__mcp_load__"):
                # a checking hook (a confined path) checks the default too: "." means the sandbox
                # root, never the server's working directory
                hooked.append((p.name, default))
    root = _object(props, required, None, closed=True)
    return InputSpec(_with_defs(root, builder.defs), _make_bind(tuple(convs), tuple(hooked)), context_param)


def checking_bind(func: Callable) -> Callable[[dict], dict] | None:
    """A bind for the parameters of ``func`` whose type checks its value itself (a
    metadata object with ``__mcp_load__``: a confined path), or None when it has none. Used
    where the values are strings already (resource template variables), so nothing else of
    the parameter types converts them."""
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: nothing checks itself
        return None
    convs = []
    for name, hint in hints.items():
        if name == "return":
            continue
        _, meta = _strip(hint)
        hook = next((h for h in (getattr(m, "__mcp_load__", None) for m in meta) if h is not None), None)
        if hook is not None:
            convs.append((name, hook))
    return _make_bind(tuple(convs)) if convs else None


def _accepts_null(prop: dict) -> bool:
    if not prop or prop.get("type") == "null":
        return True
    kind = prop.get("type")
    if isinstance(kind, list):
        return "null" in kind
    if kind is not None:
        return False
    if "enum" in prop:
        return None in prop["enum"]
    branches = prop.get("anyOf") or prop.get("oneOf")
    if branches:
        return any(_accepts_null(b) for b in branches if isinstance(b, dict))
    return "$ref" not in prop and "const" not in prop


def _make_bind(convs: tuple[tuple[str, _Conv], ...], defaults: tuple[tuple[str, Any], ...] = ()) -> Callable[[dict], dict]:
    if not convs:
        return _identity  # the hot path: plain JSON values need nothing

    def bind(arguments: dict) -> dict:
        out = dict(arguments)
        for name, value in defaults:
            if name not in out:
                out[name] = value
        for name, conv in convs:
            if name in out:
                try:
                    out[name] = conv(out[name])
                except (ValueError, TypeError) as exc:
                    raise BindError(f"invalid value for argument {name!r}: {exc}") from exc
        return out

    return bind


def _unstructured(tp: Any) -> bool:
    """Returns sent as content rather than structuredContent: nothing, str, content blocks."""
    tp, _ = _strip(tp)
    if tp in (inspect.Signature.empty, None, _NoneType, str, Any, object) or _is_content(tp):
        return True
    if isinstance(tp, type) and tp.__name__ == "ToolResult" and hasattr(tp, "to_result"):
        return True  # a complete result: it says itself what is structured (content.ToolResult)
    origin, args = _origin_args(tp)
    if origin in _UNIONS:
        return all(map(_unstructured, args))
    if origin in _SEQS or origin is tuple:  # a list of blocks, not a list of strings
        items = [a for a in args if a is not Ellipsis]
        flat = [m for a in items for m in (get_args(_strip(a)[0]) or (_strip(a)[0],))]
        return bool(items) and all(map(_unstructured, items)) and any(map(_is_content, flat))
    return False


def output_spec(annotation: Any) -> OutputSpec:
    """The outputSchema of a return annotation (root always type: object) and its dump."""
    if _unstructured(annotation):
        return OutputSpec(None, False, _identity)
    builder = _Builder(output=True)
    try:
        inner = builder.schema(annotation)
    except SchemaError as exc:
        raise SchemaError(f"return type {_name_of(annotation)}: {exc}") from None
    plain = _loader(annotation, {}, dump=True) is None
    root = _inline_root(inner, builder.defs)
    if root.get("type") == "object":  # dict-like: the value is the structured content
        return OutputSpec(_with_defs(root, builder.defs), False, _identity if plain else _to_json)
    schema = {"type": "object", "properties": {"result": inner}, "required": ["result"]}
    dump = (lambda v: {"result": v}) if plain else (lambda v: {"result": _to_json(v)})
    return OutputSpec(_with_defs(schema, builder.defs), True, dump)


# ----------------------------------------------------------------------------------------------
# docstrings: Google (`Args:`), Sphinx (`:param x:`) and numpy (`Parameters` + dashes)

_MORE = r"(.*(?:\n[ \t]+\S.*)*)"  # the rest of the line and the indented lines under it
_SECTION = re.compile(
    r"^(?:(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters"
    r"|Returns?|Yields?|Raises|Examples?|Notes?|See Also|Attributes|Warnings?|Todo):[ \t]*$"
    r"|:(?:param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?)\b"
    r"|\S.*\n[ \t]*-{3,}[ \t]*$)", re.M)
_SPHINX = re.compile(r"^:(?:param|parameter|arg|argument|key|keyword)[ \t]+(?:[^:\n]*\s)?\**(\w+)[ \t]*:"
                     + _MORE, re.M)
_GOOGLE = re.compile(r"^(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments"
                     r"|Other Parameters):[ \t]*\n((?:[ \t]+\S.*\n?|[ \t]*\n)*)", re.M)
_GOOGLE_ITEM = re.compile(r"^\**(\w+)[ \t]*(?:\([^)\n]*\))?[ \t]*:" + _MORE, re.M)
_NUMPY = re.compile(r"^(?:Other )?Parameters\n[ \t]*-{3,}[ \t]*\n((?:(?!\S.*\n[ \t]*-{3,}).*\n?)*)", re.M)
_NUMPY_ITEM = re.compile(r"^(\**\w+(?:[ \t]*,[ \t]*\**\w+)*)[ \t]*(?::.*)?((?:\n[ \t]+\S.*)*)", re.M)


def function_description(func: Any) -> str | None:
    """The docstring before its parameter/returns sections, cleaned; None when empty."""
    doc = func if isinstance(func, str) else getattr(func, "__doc__", None)
    if not doc:
        return None
    doc = inspect.cleandoc(doc)
    section = _SECTION.search(doc)
    return doc[:section.start() if section else None].strip() or None


def _param_docs(doc: str) -> dict[str, str]:
    """Per-parameter text from the docstring (already cleaned, sections at column 0)."""
    out = {m[1]: m[2] for m in _SPHINX.finditer(doc)}
    for section in _GOOGLE.finditer(doc):
        out.update((m[1], m[2]) for m in _GOOGLE_ITEM.finditer(textwrap.dedent(section[1])))
    for section in _NUMPY.finditer(doc):
        for m in _NUMPY_ITEM.finditer(section[1]):  # "x : int" or "x, y : int", text below
            out.update((name.strip().lstrip("*"), m[2]) for name in m[1].split(","))
    return {k: " ".join(v.split()) for k, v in out.items() if v.strip()}
