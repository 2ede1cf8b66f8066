"""Tests for mcpkit.server.schema: signatures -> JSON Schema 2020-12, bind and dump."""

import base64
import inspect
import dataclasses
import datetime as dt
import enum
import json
import math
import subprocess
import sys
import types
import uuid
from decimal import Decimal
from pathlib import Path
from typing import (Annotated, Any, Literal, NotRequired, Optional, Required, Sequence, TypedDict,
                    Union)

import annotated_types as at
import jsonschema
import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AnyUrl, BaseModel, Field, computed_field

from mcpkit.server.schema import (BindError, InputSpec, OutputSpec, SchemaError,
                                  function_description, input_spec, output_spec, type_schema)

# ----------------------------------------------------------------------------------------------
# fixtures: module-level so string annotations resolve


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    A = "a"
    B = 2


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


@dataclasses.dataclass
class Node:
    """A tree node."""

    name: str
    children: "list[Node]" = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Event:
    when: dt.datetime
    color: Color
    tags: frozenset[str] = frozenset()


@dataclasses.dataclass
class Audit:
    who: str
    secret: str = dataclasses.field(default="x", init=False)


class Movie(TypedDict, total=False):
    title: Required[str]
    year: int
    released: dt.date


class Strict(TypedDict):
    a: int
    b: NotRequired[str]


class Tree(TypedDict):
    value: int
    kids: "list[Tree]"


class Address(BaseModel):
    street: str
    zip_code: str = Field(alias="zipCode")


class Person(BaseModel):
    name: str = Field(description="full name")
    age: int = Field(ge=0)
    address: Address | None = None


class Category(BaseModel):
    name: str
    sub: "list[Category]" = []


class Priced(BaseModel):
    net: float

    @computed_field
    @property
    def gross(self) -> float:
        return self.net * 2


class Context:
    """Stands in for mcpkit's Context."""


class TextContent:
    __mcp_content__ = True


class ImageContent:
    __mcp_content__ = True


# ----------------------------------------------------------------------------------------------
# helpers


def refs(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            found.append(node["$ref"])
        for v in node.values():
            found += refs(v)
    elif isinstance(node, list):
        for v in node:
            found += refs(v)
    return found


def nested_defs(node: Any, root: bool = True) -> int:
    count = 0
    if isinstance(node, dict):
        count += 0 if root else int("$defs" in node)
        for k, v in node.items():
            count += nested_defs(v, root=False) if k != "$defs" else sum(
                nested_defs(d, root=False) for d in v.values())
    elif isinstance(node, list):
        count += sum(nested_defs(v, root=False) for v in node)
    return count


def check(schema: dict) -> jsonschema_rs.Validator:
    """The house rules for a published schema: valid 2020-12 (both validators), object root,
    default dialect, $defs only at the root and every $ref resolvable there."""
    assert "$schema" not in schema
    assert schema["type"] == "object"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert jsonschema_rs.meta.is_valid(schema)
    for ref in refs(schema):
        assert ref.startswith("#/$defs/"), ref
        assert ref[len("#/$defs/"):] in schema["$defs"], ref
    assert nested_defs(schema) == 0
    return jsonschema_rs.validator_for(schema)


_NO_DEFAULT = object()


def spec_for(tp: Any, default: Any = _NO_DEFAULT) -> InputSpec:
    def f(v):  # annotations set by hand: the type is a runtime value
        return v
    f.__annotations__ = {"v": tp}
    if default is not _NO_DEFAULT:
        f.__defaults__ = (default,)
    return input_spec(f)


def prop(tp: Any) -> dict:
    return spec_for(tp).schema["properties"]["v"]


# ----------------------------------------------------------------------------------------------
# import hygiene


def test_import_does_not_load_pydantic():
    code = (
        "import sys, datetime, typing\n"
        "import mcpkit.server.schema as s\n"
        "assert 'pydantic' not in sys.modules, 'imported by the module'\n"
        "def f(a: int, b: list[str] | None = None, c: datetime.date | None = None) -> dict[str, int]: ...\n"
        "s.input_spec(f).bind({'a': 1, 'c': '2020-01-01'})\n"
        "s.output_spec(typing.get_type_hints(f)['return']).dump({'x': 1})\n"
        "s.type_schema(typing.Literal['a'])\n"
        "assert 'pydantic' not in sys.modules, 'imported by plain annotations'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"PYTHONPATH": "src"}, cwd=Path(__file__).parents[1])
    assert result.returncode == 0, result.stderr


# ----------------------------------------------------------------------------------------------
# root shape


@pytest.mark.req("TL-05", "JS-01")
def test_no_parameters_gives_closed_empty_object():
    def f(): ...
    spec = input_spec(f)
    assert spec.schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert spec.context_param is None
    check(spec.schema)


@pytest.mark.req("TL-05", "JS-04")
def test_required_in_signature_order_and_defaults():
    def f(b: int, a: str, *, c: float = 1.5, d: bool = False, e: str | None = None): ...
    s = input_spec(f).schema
    assert list(s) == ["type", "properties", "required", "additionalProperties"]
    assert s["required"] == ["b", "a"]
    assert list(s["properties"]) == ["b", "a", "c", "d", "e"]
    assert s["properties"]["c"] == {"type": "number", "default": 1.5}
    assert s["properties"]["d"] == {"type": "boolean", "default": False}
    assert s["properties"]["e"] == {"type": ["string", "null"], "default": None}
    assert s["additionalProperties"] is False
    v = check(s)
    assert v.is_valid({"b": 1, "a": "x"})
    assert not v.is_valid({"b": 1})
    assert not v.is_valid({"b": 1, "a": "x", "zzz": 1})


def test_required_omitted_when_all_have_defaults():
    def f(a: int = 1): ...
    assert "required" not in input_spec(f).schema


def test_no_titles_added():
    def f(a: int, p: Point): ...
    s = input_spec(f).schema
    assert "title" not in json.dumps({k: v for k, v in s.items() if k != "$defs"})
    assert "title" not in json.dumps(s["$defs"])


@pytest.mark.req("JS-04")
def test_non_json_defaults_are_left_out():
    sentinel = object()

    def f(a: Any = sentinel, b: float = math.nan, c: Color = Color.GREEN, d: tuple[int, int] = (1, 2),
          e: dt.date = dt.date(2020, 1, 2), p: Point = Point(1, 2), u: Any = None): ...
    props = input_spec(f).schema["properties"]
    assert props["a"] == {}
    assert "default" not in props["b"]
    assert props["c"]["default"] == "green"
    assert props["d"]["default"] == [1, 2]
    assert props["e"]["default"] == "2020-01-02"
    assert props["p"]["default"] == {"x": 1, "y": 2}
    assert props["u"] == {"default": None}


# ----------------------------------------------------------------------------------------------
# individual types


@pytest.mark.req("JS-01", "JS-04")
@pytest.mark.parametrize("tp, expected", [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (None, {"type": "null"}),
    (Any, {}),
    (bytes, {"type": "string", "contentEncoding": "base64"}),
    (Decimal, {"type": "number"}),
    (dt.datetime, {"type": "string", "format": "date-time"}),
    (dt.date, {"type": "string", "format": "date"}),
    (dt.time, {"type": "string", "format": "time"}),
    (uuid.UUID, {"type": "string", "format": "uuid"}),
    (Path, {"type": "string"}),
    (list[int], {"type": "array", "items": {"type": "integer"}}),
    (Sequence[str], {"type": "array", "items": {"type": "string"}}),
    (list, {"type": "array"}),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (tuple[int, str], {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                       "items": False, "minItems": 2, "maxItems": 2}),
    (set[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
    (frozenset[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (dict, {"type": "object"}),
    (dict[str, Any], {"type": "object"}),
    (Optional[int], {"type": ["integer", "null"]}),
    (float | None, {"type": ["number", "null"]}),
    (dt.date | None, {"type": ["string", "null"], "format": "date"}),
    (list[int] | None, {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]}),
    (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    (int | str | None, {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}),
    (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
    (Literal[1, 2.5], {"type": "number", "enum": [1, 2.5]}),
    (Literal["a", 1], {"enum": ["a", 1]}),
    (Literal["a"] | None, {"type": ["string", "null"], "enum": ["a", None]}),
    (Color, {"type": "string", "enum": ["red", "green"]}),
    (Level, {"type": "integer", "enum": [1, 2]}),
    (Mixed, {"enum": ["a", 2]}),
])
def test_type_schemas(tp, expected):
    assert prop(tp) == expected
    check(spec_for(tp).schema)


def test_dict_with_non_str_keys_is_rejected():
    with pytest.raises(SchemaError, match="keys must be str"):
        prop(dict[int, str])


@pytest.mark.req("JS-01")
def test_fixed_tuple_uses_2020_12_prefix_items():
    v = check(spec_for(tuple[int, str]).schema)
    assert v.is_valid({"v": [1, "a"]})
    assert not v.is_valid({"v": [1, "a", "extra"]})
    assert not v.is_valid({"v": ["a", 1]})
    assert not v.is_valid({"v": [1]})


def test_set_rejects_duplicates():
    v = check(spec_for(set[int]).schema)
    assert v.is_valid({"v": [1, 2]})
    assert not v.is_valid({"v": [1, 1]})


# ----------------------------------------------------------------------------------------------
# named types and $defs


@pytest.mark.req("JS-04")
def test_dataclass_goes_to_defs():
    s = spec_for(Point).schema
    assert s["properties"]["v"] == {"$ref": "#/$defs/Point"}
    assert s["$defs"]["Point"] == {
        "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"], "additionalProperties": False}
    v = check(s)
    assert v.is_valid({"v": {"x": 1}})
    assert not v.is_valid({"v": {"y": 1}})


@pytest.mark.req("JS-04")
def test_recursive_dataclass_terminates_and_binds():
    spec = spec_for(Node)
    s = spec.schema
    assert s["$defs"]["Node"]["description"] == "A tree node."
    children = s["$defs"]["Node"]["properties"]["children"]
    assert children == {"type": "array", "items": {"$ref": "#/$defs/Node"}}
    assert s["$defs"]["Node"]["required"] == ["name"]  # default_factory -> optional
    v = check(s)
    args = {"v": {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}}
    assert v.is_valid(args)
    assert spec.bind(args)["v"] == Node("a", [Node("b", [Node("c")])])


def test_dataclass_init_false_fields_are_not_inputs_but_are_outputs():
    s = spec_for(Audit).schema["$defs"]["Audit"]
    assert list(s["properties"]) == ["who"]
    assert s["required"] == ["who"]
    out = output_spec(Audit)
    assert list(out.schema["properties"]) == ["who", "secret"]
    assert out.schema["required"] == ["who", "secret"]  # a dumped dataclass has every field
    assert out.dump(Audit("me")) == {"who": "me", "secret": "x"}
    assert spec_for(Event).schema["$defs"]["Event"]["required"] == ["when", "color"]


def test_dataclass_bind_converts_fields():
    spec = spec_for(Event)
    got = spec.bind({"v": {"when": "2024-05-01T10:00:00+02:00", "color": "green", "tags": ["a", "b"]}})["v"]
    assert got == Event(dt.datetime(2024, 5, 1, 10, tzinfo=dt.timezone(dt.timedelta(hours=2))),
                        Color.GREEN, frozenset({"a", "b"}))


@pytest.mark.req("JS-04")
def test_typeddict_required_keys():
    s = spec_for(Movie).schema
    assert s["$defs"]["Movie"]["required"] == ["title"]
    assert s["$defs"]["Movie"]["properties"]["released"] == {"type": "string", "format": "date"}
    s2 = spec_for(Strict).schema
    assert s2["$defs"]["Strict"]["required"] == ["a"]
    v = check(s2)
    assert v.is_valid({"v": {"a": 1}})
    assert not v.is_valid({"v": {"b": "x"}})


def test_typeddict_stays_dict_with_converted_values():
    spec = spec_for(Movie)
    got = spec.bind({"v": {"title": "x", "released": "1999-03-31"}})["v"]
    assert type(got) is dict
    assert got == {"title": "x", "released": dt.date(1999, 3, 31)}


def test_typeddict_without_conversions_binds_as_identity():
    spec = spec_for(Strict)
    args = {"v": {"a": 1}}
    assert spec.bind(args) is args


def test_recursive_typeddict():
    s = spec_for(Tree).schema
    assert s["$defs"]["Tree"]["properties"]["kids"]["items"] == {"$ref": "#/$defs/Tree"}
    check(s)


def test_string_annotations_resolve(monkeypatch):
    mod = types.ModuleType("mcpkit_test_strings")
    monkeypatch.setitem(sys.modules, mod.__name__, mod)  # get_type_hints looks classes' modules up
    ns = mod.__dict__
    exec("from __future__ import annotations\n"
         "import typing\n"
         "class TD(typing.TypedDict, total=True):\n"
         "    a: int\n"
         "    b: typing.NotRequired[str]\n"
         "def f(x: TD, y: 'int | None' = None): ...\n", ns)
    s = input_spec(ns["f"]).schema
    assert s["$defs"]["TD"]["required"] == ["a"]  # 3.11 loses NotRequired in string annotations
    assert s["properties"]["y"]["type"] == ["integer", "null"]


def test_unresolvable_annotation_is_a_schema_error():
    def f(x: "Missing"): ...  # noqa: F821
    with pytest.raises(SchemaError, match="Missing"):
        input_spec(f)


def test_same_class_name_gets_distinct_defs():
    Other = dataclasses.make_dataclass("Point", [("label", str)])
    s = spec_for(tuple[Point, Other]).schema
    names = sorted(s["$defs"])
    assert names == ["Point", "Point2"]
    check(s)


# ----------------------------------------------------------------------------------------------
# pydantic


@pytest.mark.req("JS-04")
def test_pydantic_model_defs_are_hoisted_not_inlined():
    s = spec_for(Person).schema
    assert s["properties"]["v"] == {"$ref": "#/$defs/Person"}
    assert set(s["$defs"]) == {"Person", "Address"}
    assert "$defs" not in s["$defs"]["Person"]
    assert {"$ref": "#/$defs/Address"} in s["$defs"]["Person"]["properties"]["address"]["anyOf"]
    v = check(s)
    assert v.is_valid({"v": {"name": "a", "age": 1, "address": {"street": "s", "zipCode": "1"}}})
    assert not v.is_valid({"v": {"name": "a", "age": -1}})


def test_pydantic_bind_uses_model_validate():
    spec = spec_for(list[Person])
    got = spec.bind({"v": [{"name": "a", "age": 3, "address": {"street": "s", "zipCode": "9"}}]})["v"]
    assert got == [Person(name="a", age=3, address=Address(street="s", zipCode="9"))]


def test_recursive_pydantic_model():
    s = spec_for(Category).schema
    assert s["properties"]["v"] == {"$ref": "#/$defs/Category"}
    assert s["$defs"]["Category"]["properties"]["sub"]["items"] == {"$ref": "#/$defs/Category"}
    check(s)


def test_pydantic_def_name_clash_is_renamed():
    Address2 = dataclasses.make_dataclass("Address", [("line", str)])
    s = spec_for(tuple[Address2, Person]).schema
    assert s["properties"]["v"]["prefixItems"][0] == {"$ref": "#/$defs/Address"}
    person = s["$defs"]["Person"]
    other = [r for r in refs(person) if "Address" in r]
    assert other and all(r != "#/$defs/Address" for r in other)
    assert s["$defs"][other[0].rsplit("/", 1)[1]]["properties"]["zipCode"]["type"] == "string"
    check(s)


def test_pydantic_aware_type_via_type_adapter():
    spec = spec_for(AnyUrl)
    assert spec.schema["properties"]["v"]["format"] == "uri"
    got = spec.bind({"v": "https://example.com/x"})["v"]
    assert isinstance(got, AnyUrl)
    out = output_spec(AnyUrl)
    assert out.dump(got) == {"result": "https://example.com/x"}


# ----------------------------------------------------------------------------------------------
# Annotated metadata


@pytest.mark.req("JS-04")
def test_annotated_types_constraints():
    def f(a: Annotated[int, at.Ge(1), at.Lt(10)], b: Annotated[float, at.Interval(gt=0, le=1)],
          c: Annotated[str, at.MinLen(2), at.MaxLen(4)], d: Annotated[list[int], at.Len(1, 3)],
          e: Annotated[int, at.MultipleOf(5)], g: Annotated[dict[str, int], at.MaxLen(2)]): ...
    s = input_spec(f).schema["properties"]
    assert s["a"] == {"type": "integer", "minimum": 1, "exclusiveMaximum": 10}
    assert s["b"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    assert s["c"] == {"type": "string", "minLength": 2, "maxLength": 4}
    assert s["d"] == {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}
    assert s["e"] == {"type": "integer", "multipleOf": 5}
    assert s["g"]["maxProperties"] == 2
    v = check(input_spec(f).schema)
    ok = {"a": 1, "b": 1, "c": "ab", "d": [1], "e": 10, "g": {}}
    assert v.is_valid(ok)
    for bad in ({"a": 10}, {"b": 0}, {"c": "abcde"}, {"d": []}, {"e": 3}, {"g": {"a": 1, "b": 2, "c": 3}}):
        assert not v.is_valid({**ok, **bad}), bad


def test_pydantic_field_constraints_and_description():
    def f(a: Annotated[int, Field(ge=0, le=5, description="a number")],
          b: Annotated[str, Field(pattern=r"^x+$", max_length=3)],
          c: Annotated[int | None, Field(gt=0)] = None): ...
    s = input_spec(f).schema["properties"]
    assert s["a"] == {"type": "integer", "description": "a number", "minimum": 0, "maximum": 5}
    assert s["b"] == {"type": "string", "pattern": "^x+$", "maxLength": 3}
    assert s["c"] == {"type": ["integer", "null"], "exclusiveMinimum": 0, "default": None}
    v = check(input_spec(f).schema)
    assert v.is_valid({"a": 0, "b": "xx", "c": None})
    assert not v.is_valid({"a": 0, "b": "xy"})


# ----------------------------------------------------------------------------------------------
# descriptions and docstrings


def test_descriptions_from_all_sources_with_precedence():
    def f(a: Annotated[int, "from annotated"], b: int, c: int, d: Annotated[int, "ann"]):
        """Summary line.

        Args:
            a: doc a
            b (int): doc b
                spans two lines.
            d: doc d
        """
    s = input_spec(f, descriptions={"c": "explicit c", "d": "explicit d"}).schema["properties"]
    assert s["a"]["description"] == "from annotated"
    assert s["b"]["description"] == "doc b spans two lines."
    assert s["c"]["description"] == "explicit c"
    assert s["d"]["description"] == "explicit d"


def test_sphinx_docstring():
    def f(a: int, b: str):
        """Do things.

        :param a: the a
            continued
        :param str b: the b
        :returns: nothing
        """
    s = input_spec(f).schema["properties"]
    assert s["a"]["description"] == "the a continued"
    assert s["b"]["description"] == "the b"
    assert function_description(f) == "Do things."


def test_numpy_docstring():
    def f(a: int, b: str, c: int):
        """Numpy style.

        Parameters
        ----------
        a : int
            The a.
        b, c : str
            Shared text
            over lines.

        Returns
        -------
        int
            never a parameter
        """
    s = input_spec(f).schema["properties"]
    assert s["a"]["description"] == "The a."
    assert s["b"]["description"] == "Shared text over lines."
    assert s["c"]["description"] == "Shared text over lines."
    assert function_description(f) == "Numpy style."


def test_function_description():
    def g():
        """
        Multi-line summary
            keeps its indentation.

        Returns:
            something
        """
    def h(): ...
    def k():
        """Args:
            x: only args
        """
    assert function_description(g) == "Multi-line summary\n    keeps its indentation."
    assert function_description(h) is None
    assert function_description(k) is None


# ----------------------------------------------------------------------------------------------
# signatures and context


@pytest.mark.parametrize("src, word", [
    ("def f(*args: int): ...", "*args"),
    ("def f(**kw: int): ...", "**kwargs"),
    ("def f(a: int, /): ...", "positional-only"),
])
def test_unsupported_parameter_kinds(src, word):
    ns: dict = {}
    exec(src, ns)
    with pytest.raises(SchemaError) as info:
        input_spec(ns["f"])
    assert word in str(info.value)


def test_unsupported_type_names_parameter_and_type():
    class Opaque: ...

    def f(ok: int, bad: list[Opaque]): ...
    with pytest.raises(SchemaError) as info:
        input_spec(f)
    assert "'bad'" in str(info.value) and "Opaque" in str(info.value)
    assert isinstance(info.value, TypeError)


def test_context_parameter_is_excluded():
    def f(a: int, ctx: Context, b: str = "x"): ...
    spec = input_spec(f, context_type=Context)
    assert spec.context_param == "ctx"
    assert list(spec.schema["properties"]) == ["a", "b"]
    assert spec.schema["required"] == ["a"]

    class Sub(Context): ...

    def g(c: Optional[Sub] = None, d: Annotated[Context, "x"] = None): ...
    with pytest.raises(SchemaError, match="two context"):
        input_spec(g, context_type=Context)

    def h(c: Sub | None = None): ...
    assert input_spec(h, context_type=Context).context_param == "c"
    with pytest.raises(SchemaError, match="'c'"):
        input_spec(h)  # without context_type it is just an unsupported class


def test_keyword_only_and_methods_are_fine():
    class Tools:
        def m(self, a: int, *, b: str = "x") -> int: ...

    s = input_spec(Tools().m).schema
    assert list(s["properties"]) == ["a", "b"]


# ----------------------------------------------------------------------------------------------
# bind


def test_bind_is_identity_for_plain_scalars():
    def f(a: int, b: str, c: list[float] | None = None, d: dict[str, list[int]] | None = None,
          e: Literal["x", "y"] = "x", f_: Any = None, m: Strict | None = None): ...
    bind = input_spec(f).bind
    args = {"a": 1, "b": "s", "c": [1.5], "d": {"k": [1]}}
    assert bind(args) is args


def test_bind_converts_and_does_not_mutate_input():
    u = uuid.uuid4()

    def f(a: int, when: dt.datetime, day: dt.date, at_: dt.time, uid: uuid.UUID, p: Path,
          dec: Decimal, raw: bytes, color: Color, lvl: Level | None, pair: tuple[int, Color],
          tags: set[str], lit: Literal[Color.RED, "other"], opt: dt.date | None = None,
          many: list[Color] | None = None): ...
    bind = input_spec(f).bind
    args = {"a": 1, "when": "2020-01-02T03:04:05Z", "day": "2020-01-02", "at_": "03:04:05", "uid": str(u),
            "p": "/tmp/x", "dec": 0.1, "raw": base64.b64encode(b"\x00\xff").decode(), "color": "red",
            "lvl": 2, "pair": [1, "green"], "tags": ["a", "a", "b"], "lit": "red", "opt": None,
            "many": ["green"]}
    snapshot = json.dumps(args)
    out = bind(args)
    assert json.dumps(args) == snapshot
    assert out == {"a": 1, "when": dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
                   "day": dt.date(2020, 1, 2), "at_": dt.time(3, 4, 5), "uid": u, "p": Path("/tmp/x"),
                   "dec": Decimal("0.1"), "raw": b"\x00\xff", "color": Color.RED, "lvl": Level.HIGH,
                   "pair": (1, Color.GREEN), "tags": {"a", "b"}, "lit": Color.RED, "opt": None,
                   "many": [Color.GREEN]}
    assert bind({**args, "lit": "other"})["lit"] == "other"
    assert bind({**args, "lvl": None})["lvl"] is None


def test_bind_missing_optional_arguments_are_left_out():
    def f(when: dt.datetime | None = None): ...
    assert input_spec(f).bind({}) == {}


def test_bind_union_picks_member_by_json_type():
    def f(v: int | dt.datetime, w: Point | list[Point], x: str | dt.date): ...
    bind = input_spec(f).bind
    assert bind({"v": 5, "w": {"x": 1}, "x": "2020-01-01"}) == {"v": 5, "w": Point(1), "x": "2020-01-01"}
    got = bind({"v": "2020-01-01T00:00:00", "w": [{"x": 1}], "x": "s"})
    assert got == {"v": dt.datetime(2020, 1, 1), "w": [Point(1)], "x": "s"}


@pytest.mark.parametrize("tp, value", [
    (dt.datetime, "not a date"),
    (dt.date, "2020-13-01"),
    (uuid.UUID, "nope"),
    (bytes, "***"),
    (Person, {"name": "x", "age": "many"}),
])
def test_bind_errors_name_the_argument(tp, value):
    with pytest.raises(BindError, match="'v'") as info:
        spec_for(tp).bind({"v": value})
    assert isinstance(info.value, ValueError)


# ----------------------------------------------------------------------------------------------
# output


@pytest.mark.parametrize("tp", [
    inspect.Signature.empty, None, type(None), str, Any, TextContent,
    list[TextContent], list[TextContent | ImageContent], TextContent | ImageContent, Optional[str],
    Sequence[ImageContent], Annotated[str, "doc"], Any | None,
])
def test_unstructured_outputs_have_no_schema(tp):
    out = output_spec(tp)
    assert out.schema is None and out.wrapped is False
    marker = object()
    assert out.dump(marker) is marker


@pytest.mark.req("TL-05", "TL-07", "JS-04")
@pytest.mark.parametrize("tp, value, expected", [
    (Movie, {"title": "x", "released": dt.date(2020, 1, 1)}, {"title": "x", "released": "2020-01-01"}),
    (Strict, {"a": 1}, {"a": 1}),
    (Point, Point(1, 2), {"x": 1, "y": 2}),
    (Node, Node("a", [Node("b")]), {"name": "a", "children": [{"name": "b", "children": []}]}),
    (Person, Person(name="n", age=1, address=Address(street="s", zipCode="z")),
     {"name": "n", "age": 1, "address": {"street": "s", "zipCode": "z"}}),
    (Category, Category(name="a", sub=[Category(name="b")]),
     {"name": "a", "sub": [{"name": "b", "sub": []}]}),
    (dict[str, int], {"a": 1}, {"a": 1}),
    (dict[str, Color], {"a": Color.RED}, {"a": "red"}),
    (dict, {"a": dt.date(2020, 1, 1)}, {"a": "2020-01-01"}),
    (Event, Event(dt.datetime(2020, 1, 1), Color.RED, frozenset({"b", "a"})),
     {"when": "2020-01-01T00:00:00", "color": "red", "tags": ["a", "b"]}),
])
def test_object_outputs_are_not_wrapped(tp, value, expected):
    out = output_spec(tp)
    assert out.wrapped is False
    v = check(out.schema)
    dumped = out.dump(value)
    assert dumped == expected
    assert v.is_valid(dumped), list(v.iter_errors(dumped))
    json.dumps(dumped)


@pytest.mark.req("TL-05", "TL-07", "JS-04")
@pytest.mark.parametrize("tp, value, expected", [
    (int, 3, 3),
    (float, 2.5, 2.5),
    (bool, True, True),
    (list[int], [1, 2], [1, 2]),
    (list[Point], [Point(1)], [{"x": 1, "y": 0}]),
    (tuple[int, str], (1, "a"), [1, "a"]),
    (set[int], {3, 1, 2}, [1, 2, 3]),
    (Literal["a", "b"], "b", "b"),
    (Color, Color.GREEN, "green"),
    (int | str, "x", "x"),
    (Optional[Movie], None, None),
    (Optional[Movie], {"title": "t"}, {"title": "t"}),
    (dt.datetime, dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc), "2020-01-01T00:00:00+00:00"),
    (uuid.UUID, uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    (bytes, b"hi", "aGk="),
    (Decimal, Decimal("1.50"), 1.5),
    (Decimal, Decimal("3"), 3),
    (Path, Path("/a/b"), "/a/b"),
    (Optional[str | int], 1, 1),
])
def test_non_object_outputs_are_wrapped(tp, value, expected):
    out = output_spec(tp)
    assert out.wrapped is True
    assert out.schema["type"] == "object"
    assert out.schema["required"] == ["result"]
    assert list(out.schema["properties"]) == ["result"]
    v = check(out.schema)
    dumped = out.dump(value)
    assert dumped == {"result": expected}
    assert v.is_valid(dumped)
    json.dumps(dumped)


@pytest.mark.req("TL-07")
def test_wrapped_output_rejects_wrong_values():
    v = jsonschema_rs.validator_for(output_spec(list[int]).schema)
    assert not v.is_valid({"result": ["x"]})
    assert not v.is_valid([1])


@pytest.mark.req("TL-07")
def test_pydantic_output_uses_serialization_aliases():
    out = output_spec(Address)
    assert out.schema["required"] == ["street", "zipCode"]
    dumped = out.dump(Address(street="s", zipCode="z"))
    assert dumped == {"street": "s", "zipCode": "z"}
    assert jsonschema_rs.validator_for(out.schema).is_valid(dumped)


def test_wrapped_output_keeps_refs_and_root_defs():
    out = output_spec(list[Node])
    assert out.schema["properties"]["result"]["items"] == {"$ref": "#/$defs/Node"}
    assert list(out.schema["$defs"]) == ["Node"]
    check(out.schema)


def test_plain_outputs_dump_without_copying():
    value = {"a": [1, 2]}
    assert output_spec(dict[str, list[int]]).dump(value) is value
    assert output_spec(Strict).dump(value) is value


def test_unsupported_return_type():
    class Opaque: ...
    with pytest.raises(SchemaError, match="Opaque"):
        output_spec(Opaque)


# ----------------------------------------------------------------------------------------------
# type_schema


@pytest.mark.req("JS-04")
def test_type_schema_inlines_root_class_and_keeps_defs_for_recursion():
    assert type_schema(Point) == {
        "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"], "additionalProperties": False}
    s = type_schema(Node)
    assert s["type"] == "object" and "Node" in s["$defs"]
    check(s)
    assert type_schema(int) == {"type": "integer"}
    s = type_schema(list[Point])
    assert s == {"type": "array", "items": {"$ref": "#/$defs/Point"}, "$defs": s["$defs"]}
    jsonschema.Draft202012Validator.check_schema(s)


def test_type_schema_for_elicitation_is_flat():
    class Ask(TypedDict):
        name: Annotated[str, "Your name"]
        color: Color
        age: NotRequired[Annotated[int, at.Ge(0)]]

    assert type_schema(Ask) == {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Your name"},
                       "color": {"type": "string", "enum": ["red", "green"]},
                       "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "color"]}


# ----------------------------------------------------------------------------------------------
# property tests: what is dumped validates, and what validates binds back to the same value

_text = st.text(max_size=8)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_dt = st.datetimes(timezones=st.none() | st.just(dt.timezone.utc))
_point = st.builds(Point, x=st.integers(), y=st.integers())
_node = st.recursive(st.builds(Node, name=_text),
                     lambda kids: st.builds(Node, name=_text, children=st.lists(kids, max_size=3)),
                     max_leaves=8)
_movie = st.fixed_dictionaries({"title": _text}, optional={"year": st.integers(), "released": st.dates()})
_address = st.builds(Address, street=_text, zipCode=_text)
_person = st.builds(Person, name=_text, age=st.integers(min_value=0), address=st.none() | _address)

CASES = [
    (int, st.integers()),
    (float, _floats),
    (list[str], st.lists(st.text())),
    (bool, st.booleans()),
    (Optional[int], st.none() | st.integers()),
    (list[int], st.lists(st.integers())),
    (tuple[int, str], st.tuples(st.integers(), _text)),
    (tuple[float, ...], st.lists(_floats).map(tuple)),
    (set[int], st.sets(st.integers())),
    (frozenset[str], st.frozensets(_text)),
    (dict[str, int], st.dictionaries(_text, st.integers())),
    (dt.datetime, _dt),
    (dt.date, st.dates()),
    (dt.time, st.times()),
    (uuid.UUID, st.uuids()),
    (bytes, st.binary()),
    (Path, st.lists(st.text("abc", min_size=1), min_size=1).map(lambda p: Path(*p))),
    (Decimal, st.decimals(allow_nan=False, allow_infinity=False, places=2,
                          min_value=-10**6, max_value=10**6)),
    (Color, st.sampled_from(Color)),
    (Level | None, st.none() | st.sampled_from(Level)),
    (Literal["a", 1, None], st.sampled_from(["a", 1, None])),
    (int | dt.datetime, st.integers() | _dt),
    (Point, _point),
    (Node, _node),
    (list[Point], st.lists(_point, max_size=4)),
    (Movie, _movie),
    (Person, _person),
    (dict[str, Event], st.dictionaries(_text, st.builds(Event, when=_dt, color=st.sampled_from(Color),
                                                         tags=st.frozensets(_text)), max_size=3)),
    (Annotated[int, at.Ge(0)], st.integers(min_value=0)),
]


@pytest.mark.req("TL-07", "JS-04")
@pytest.mark.parametrize("tp, strategy", CASES, ids=[repr(c[0]) for c in CASES])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip(tp, strategy, data):
    value = data.draw(strategy)
    out: OutputSpec = output_spec(tp)
    dumped = out.dump(value)
    json.dumps(dumped, allow_nan=False)  # JSON-able
    assert jsonschema_rs.validator_for(out.schema).is_valid(dumped)  # TL-07
    as_json = dumped["result"] if out.wrapped else dumped
    spec = spec_for(tp)
    assert jsonschema_rs.validator_for(spec.schema).is_valid({"v": as_json})
    assert spec.bind({"v": as_json})["v"] == value


_json_scalars = st.none() | st.booleans() | st.integers() | _floats | st.text()
_json = st.recursive(_json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(_text, c, max_size=3),
                     max_leaves=10)


@pytest.mark.req("TL-07")
@settings(max_examples=60, deadline=None)
@given(value=_json)
def test_any_outputs_of_json_values_pass_through(value):
    out = output_spec(dict[str, Any])
    assert out.dump({"k": value}) == {"k": value}
    out = output_spec(list[Any])
    assert out.dump([value]) == {"result": [value]}
    assert jsonschema_rs.validator_for(out.schema).is_valid(out.dump([value]))


@settings(max_examples=60, deadline=None)
@given(value=_json)
def test_any_inputs_accept_json_and_bind_unchanged(value):
    spec = spec_for(Any)
    assert jsonschema_rs.validator_for(spec.schema).is_valid({"v": value})
    args = {"v": value}
    assert spec.bind(args) is args


# ----------------------------------------------------------------------------------------------
# more shapes of callables, annotations and docstrings


def test_partial_callable_object_and_class():
    import functools

    def f(a: int, b: dt.date): ...

    class Callable_:
        def __call__(self, when: dt.date) -> None: ...

    class Tool:
        def __init__(self, n: int, tags: set[str] = frozenset()): ...

    spec = input_spec(functools.partial(f, b=dt.date(2020, 1, 1)))
    assert spec.schema["required"] == ["a"]
    assert spec.schema["properties"]["b"] == {"type": "string", "format": "date", "default": "2020-01-01"}
    spec = input_spec(Callable_())
    assert spec.bind({"when": "2021-02-03"}) == {"when": dt.date(2021, 2, 3)}
    spec = input_spec(Tool)
    assert spec.schema["properties"]["tags"]["uniqueItems"] is True
    assert spec.bind({"n": 1, "tags": ["x"]}) == {"n": 1, "tags": {"x"}}


def test_context_resolves_when_only_imported_for_type_checking(monkeypatch):
    mod = types.ModuleType("mcpkit_test_ctx")
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    exec("def tool(x: int, ctx: 'Context') -> int: ...", mod.__dict__)  # Context not in module
    spec = input_spec(mod.tool, context_type=Context)
    assert spec.context_param == "ctx"
    assert list(spec.schema["properties"]) == ["x"]


def test_newtype_readonly_doc_and_typing_extensions_typeddict():
    import typing
    import typing_extensions as te

    UserId = typing.NewType("UserId", int)

    class TD(te.TypedDict, total=False):
        a: te.Required[te.ReadOnly[int]]
        b: te.Annotated[str, te.Doc("the b")]

    def f(u: UserId, t: TD): ...
    s = input_spec(f).schema
    assert s["properties"]["u"] == {"type": "integer"}
    assert s["$defs"]["TD"] == {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "string", "description": "the b"}}, "required": ["a"]}
    check(s)


def test_google_docstring_variants():
    def f(a: int, b: int, c: int, d: int):
        """Summary.

        Details paragraph
        over two lines.

        Args:
            a: first

            b (int, optional): second,
                more.
            *c: third
        Keyword Args:
            d: fourth

        Returns:
            int: never a parameter
        """
    s = input_spec(f).schema["properties"]
    assert [s[k].get("description") for k in "abcd"] == ["first", "second, more.", "third", "fourth"]
    assert function_description(f) == "Summary.\n\nDetails paragraph\nover two lines."


def test_docstring_without_sections_is_all_description():
    def f(x: int):
        """Just text.

        Second paragraph: with a colon.
        """
    assert function_description(f) == "Just text.\n\nSecond paragraph: with a colon."
    assert "description" not in input_spec(f).schema["properties"]["x"]


@pytest.mark.req("TL-05", "TL-07")
def test_annotated_object_output_keeps_description_at_root():
    out = output_spec(Annotated[Movie, "A movie"])
    assert out.wrapped is False
    assert out.schema["description"] == "A movie"
    assert out.schema["required"] == ["title"]
    check(out.schema)


@pytest.mark.req("TL-07")
def test_recursive_typeddict_output():
    out = output_spec(Tree)
    v = check(out.schema)
    value = {"value": 1, "kids": [{"value": 2, "kids": []}]}
    assert out.dump(value) == value
    assert v.is_valid(out.dump(value))
    assert not v.is_valid({"value": 1, "kids": [{"value": "x", "kids": []}]})


# ----------------------------------------------------------------------------------------------
# generated annotations: every combination gives a valid schema, and from_type values round-trip

_leaf_types = st.sampled_from([int, float, str, bool, dt.date, uuid.UUID, bytes, Color, Level, Point,
                               Movie, Person, Decimal, Literal["x", "y"], Any])
_hashable_leaves = st.sampled_from([int, str, Color, dt.date, uuid.UUID])


def _wrap(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        inner.map(lambda t: list[t]),
        inner.map(lambda t: dict[str, t]),
        inner.map(lambda t: Optional[t]),
        inner.map(lambda t: tuple[t, ...]),
        st.tuples(inner, inner).map(lambda ts: tuple[ts[0], ts[1]]),
        st.tuples(inner, inner).map(lambda ts: Union[ts[0], ts[1]]),
        _hashable_leaves.map(lambda t: frozenset[t]),
        inner.map(lambda t: Annotated[t, "described"]),
    )


_annotations = st.recursive(_leaf_types, _wrap, max_leaves=6)


@pytest.mark.req("JS-01", "JS-04", "TL-05")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tp=_annotations)
def test_generated_annotations_give_valid_schemas(tp):
    check(spec_for(tp).schema)
    out = output_spec(tp)
    if out.schema is not None:
        check(out.schema)
    schema = type_schema(tp)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema_rs.validator_for(schema)


@pytest.mark.req("TL-07")
def test_pydantic_output_uses_the_serialization_schema():
    assert "gross" not in spec_for(Priced).schema["$defs"]["Priced"]["properties"]
    out = output_spec(Priced)
    assert out.schema["required"] == ["net", "gross"]
    dumped = out.dump(Priced(net=2))
    assert dumped == {"net": 2.0, "gross": 4.0}
    assert jsonschema_rs.validator_for(out.schema).is_valid(dumped)


def test_nested_class_with_the_same_name_gets_its_own_def():
    Inner = dataclasses.make_dataclass("Box", [("size", int)])
    Outer = dataclasses.make_dataclass("Box", [("inner", Inner)])
    s = spec_for(Outer).schema
    assert s["properties"]["v"] == {"$ref": "#/$defs/Box"}
    assert s["$defs"]["Box"]["properties"]["inner"] == {"$ref": "#/$defs/Box2"}
    assert s["$defs"]["Box2"]["properties"] == {"size": {"type": "integer"}}
    check(s)
