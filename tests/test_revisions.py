"""The revision table (``mcpkit.protocol.revisions``): negotiation and the invariants of its rows.

Where a row states a fact that the official schema of its revision also states (which keys an
``Implementation`` or a ``Tool`` may carry, whether batches exist, ...), the row is compared with
``spec/<rev>/schema.json`` itself, so the table cannot drift from the specification unnoticed.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from mcpkit.protocol import revisions
from mcpkit.protocol.revisions import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE, REVISIONS, Revision, negotiate

SPEC = Path(__file__).resolve().parent.parent / "spec"
ALL = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


@lru_cache(maxsize=None)
def _defs(version: str) -> dict[str, Any]:
    document = json.loads((SPEC / version / "schema.json").read_text(encoding="utf-8"))
    return document.get("definitions") or document["$defs"]


def _props(version: str, name: str) -> set[str]:
    return set(_defs(version)[name]["properties"])


def _params_props(version: str, name: str) -> set[str]:
    """The property names of a request/notification definition's ``params`` (inline or by $ref)."""
    params = _defs(version)[name]["properties"]["params"]
    if "$ref" in params:
        params = _defs(version)[params["$ref"].rsplit("/", 1)[-1]]
    return set(params.get("properties", {}))


def _content_types(version: str) -> set[str]:
    defs = _defs(version)
    union = defs["ContentBlock"]["anyOf"] if "ContentBlock" in defs else (
        defs["CallToolResult"]["properties"]["content"]["items"]["anyOf"]
    )
    return {defs[alt["$ref"].rsplit("/", 1)[-1]]["properties"]["type"]["const"] for alt in union}


# --------------------------------------------------------------------------- negotiation


MODERN = "2026-07-28"


def test_the_served_revisions_in_order():
    assert HANDSHAKE_VERSIONS == ALL
    assert LATEST_HANDSHAKE == "2025-11-25"
    assert list(REVISIONS) == [*ALL, MODERN]
    assert revisions.MODERN_VERSIONS == (MODERN,)
    assert revisions.SUPPORTED_VERSIONS == (*ALL, MODERN)
    assert all(revisions.get(v) is REVISIONS[v] for v in (*ALL, MODERN))


@pytest.mark.req("LC-02")
@pytest.mark.parametrize("version", ALL)
def test_negotiate_echoes_every_supported_version(version):
    row = negotiate(version)
    assert row is REVISIONS[version]
    assert row.version == version


@pytest.mark.req("LC-02")
@pytest.mark.parametrize(
    "requested",
    ["2099-01-01", "2024-10-07", "2026-07-28", "", "2025-11-25 ", "latest", None, 20251125, ["2025-06-18"], True],
)
def test_negotiate_answers_our_latest_for_anything_else(requested):
    assert negotiate(requested) is REVISIONS["2025-11-25"]


@pytest.mark.req("LC-02")
def test_negotiate_within_a_narrower_supported_set():
    supported = ("2024-11-05", "2025-03-26")
    assert negotiate("2024-11-05", supported).version == "2024-11-05"
    # a revision we know but do not offer here is not echoed: the counter-offer is the set's latest
    assert negotiate("2025-11-25", supported).version == "2025-03-26"
    assert negotiate("1999-01-01", supported).version == "2025-03-26"


# --------------------------------------------------------------------------- row invariants


def test_every_row_is_complete_and_typed():
    fields = Revision.__annotations__
    for version, row in REVISIONS.items():
        assert row.version == version
        for name, annotation in fields.items():
            assert name in vars(row), f"{version} lacks {name}"
            value = getattr(row, name)
            if annotation == "bool":
                assert type(value) is bool, (version, name, value)
            elif annotation == "int":
                assert type(value) is int, (version, name, value)
            elif annotation == "str":
                assert type(value) is str, (version, name, value)
            elif annotation.startswith("frozenset"):
                assert type(value) is frozenset and value, (version, name, value)
                assert all(type(v) is str for v in value)


def test_a_row_missing_a_field_is_refused():
    fields = {name: getattr(REVISIONS["2025-11-25"], name) for name in Revision.__annotations__}
    del fields["batching"]
    with pytest.raises(TypeError, match="batching"):
        Revision(**fields)


def test_the_eras():
    assert {v: row.era for v, row in REVISIONS.items()} == {**{v: "handshake" for v in ALL}, MODERN: "modern"}


@pytest.mark.req("BP-10", "CA-01", "RS-08", "PG-03")
def test_the_modern_row_matches_its_schema():
    row, defs = REVISIONS[MODERN], _defs(MODERN)
    assert row.result_type and "resultType" in defs["Result"]["required"]
    assert row.cache_hints and {"ttlMs", "cacheScope"} <= set(defs["CacheableResult"]["required"])
    assert row.resource_not_found == -32602
    assert not row.batching
    methods = {defs[name]["properties"]["method"]["const"] for name in
               (alt["$ref"].rsplit("/", 1)[-1] for alt in defs["ClientRequest"]["anyOf"])}
    # ping, initialize, setLevel and (un)subscribe are gone; tasks/get, tasks/update and
    # tasks/cancel come from the io.modelcontextprotocol/tasks extension, the skill methods from
    # io.modelcontextprotocol/skills (SEP-2640)
    assert row.methods == methods | {"tasks/get", "tasks/update", "tasks/cancel"} | SKILL_METHODS
    assert row.tool_keys == _props(MODERN, "Tool")
    assert row.implementation_keys == _props(MODERN, "Implementation")
    for version in ALL:
        assert not REVISIONS[version].result_type and not REVISIONS[version].cache_hints
        assert "server/discover" not in REVISIONS[version].methods


SKILL_METHODS = {"skills/list", "skills/get", "resources/directory/read"}


def test_the_skill_methods_exist_in_every_revision_and_only_they_come_from_the_skills_extension():
    """SEP-2640 declares its extension in ``initialize`` as in ``server/discover``: the methods
    are in every row, beside each revision's own."""
    for version, row in REVISIONS.items():
        assert SKILL_METHODS <= row.methods, version
    for version in ALL:
        defs = _defs(version)
        union = defs["ClientRequest"].get("anyOf") or defs["ClientRequest"].get("oneOf")
        own = {defs[alt["$ref"].rsplit("/", 1)[-1]]["properties"]["method"]["const"] for alt in union}
        assert REVISIONS[version].methods - own == SKILL_METHODS, version


@pytest.mark.req("BP-13")
def test_exactly_one_revision_batches_and_it_is_2025_03_26():
    assert [v for v, row in REVISIONS.items() if row.batching] == ["2025-03-26"]


@pytest.mark.req("BP-13")
@pytest.mark.parametrize("version", ALL)
def test_batching_matches_the_schema(version):
    assert REVISIONS[version].batching == ("JSONRPCBatchRequest" in _defs(version))


@pytest.mark.req("RS-08")
@pytest.mark.parametrize("version", ALL)
def test_resource_not_found_is_minus_32002_in_every_handshake_revision(version):
    assert REVISIONS[version].resource_not_found == -32002


def test_invalid_arguments_become_a_tool_error_only_from_2025_11_25():
    assert [v for v, row in REVISIONS.items() if row.invalid_arguments_as_tool_error] == ["2025-11-25", MODERN]


def test_flags_only_ever_switch_on_in_later_revisions():
    """Features are added, not removed, across 2024-11-05 … 2025-11-25 (batching is the exception)."""
    monotone = [
        "completions_capability", "structured_content", "elicitation", "elicitation_url", "elicitation_rich_enums",
        "progress_message", "item_meta", "sampling_tools", "invalid_arguments_as_tool_error",
    ]
    for name in monotone:
        values = [getattr(REVISIONS[v], name) for v in ALL]
        assert values == sorted(values), (name, values)
    for name in ("implementation_keys", "tool_keys", "resource_keys", "template_keys", "prompt_keys",
                 "prompt_argument_keys", "content_types", "annotation_keys"):
        for earlier, later in zip(ALL, ALL[1:]):
            assert getattr(REVISIONS[earlier], name) <= getattr(REVISIONS[later], name), (name, earlier, later)


# --------------------------------------------------------------------------- rows versus the schemas


_KEY_SETS = [
    ("implementation_keys", "Implementation"),
    ("tool_keys", "Tool"),
    ("resource_keys", "Resource"),
    ("template_keys", "ResourceTemplate"),
    ("prompt_keys", "Prompt"),
    ("prompt_argument_keys", "PromptArgument"),
]


@pytest.mark.req("LC-01", "TL-05", "RS-03", "PM-03")
@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize("field,definition", _KEY_SETS)
def test_key_sets_never_exceed_the_schema(version, field, definition):
    """What the table lets through is always a property the official schema defines."""
    extra = getattr(REVISIONS[version], field) - _props(version, definition)
    assert not extra, f"{version} {field} lists keys the {definition} schema lacks: {sorted(extra)}"


@pytest.mark.req("LC-01", "TL-05", "RS-03", "PM-03")
@pytest.mark.parametrize("version", ALL)
@pytest.mark.parametrize("field,definition", _KEY_SETS)
def test_key_sets_equal_the_schema(version, field, definition):
    """Nothing the revision allows is silently dropped either (2024-11-05 ``Resource.size`` once was)."""
    assert getattr(REVISIONS[version], field) == _props(version, definition)


@pytest.mark.req("RS-11")
@pytest.mark.parametrize("version", ALL)
def test_annotation_keys_equal_the_schema(version):
    defs = _defs(version)
    # 2024-11-05 has no ``Annotations`` type: the same object is ``Annotated.annotations``
    annotations = defs["Annotations"] if "Annotations" in defs else defs["Annotated"]["properties"]["annotations"]
    assert REVISIONS[version].annotation_keys == set(annotations["properties"])


@pytest.mark.req("TL-09")
@pytest.mark.parametrize("version", ALL)
def test_content_types_equal_the_schema(version):
    assert set(REVISIONS[version].content_types) == _content_types(version)


@pytest.mark.req("PR-01")
@pytest.mark.parametrize("version", ALL)
def test_progress_message_matches_the_schema(version):
    assert REVISIONS[version].progress_message == ("message" in _params_props(version, "ProgressNotification"))


@pytest.mark.parametrize("version", ALL)
def test_feature_flags_match_the_schema(version):
    row, defs = REVISIONS[version], _defs(version)
    assert row.completions_capability == ("completions" in _props(version, "ServerCapabilities"))
    assert row.structured_content == ("structuredContent" in _props(version, "CallToolResult"))
    assert row.structured_content == ("outputSchema" in _props(version, "Tool"))
    assert row.elicitation == ("ElicitRequest" in defs)
    assert row.elicitation_url == ("ElicitRequestURLParams" in defs)
    assert row.sampling_tools == ("tools" in _params_props(version, "CreateMessageRequest"))
    assert row.item_meta == ("_meta" in _props(version, "Tool"))
    # EL-02 (SEP-1330): titled and multi-select enums in elicitation forms
    assert row.elicitation_rich_enums == ("TitledMultiSelectEnumSchema" in defs)
