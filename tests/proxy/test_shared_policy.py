"""Several upstreams in one server: one tool policy shared by them, and names under one
upstream's prefix that another upstream's tools would also read as."""

from __future__ import annotations

import pytest

from mcpkit.proxy import ToolPolicy

#: written for upstream files's tools (listed files_read, files_...)
RULES = {"tools": {
    "files_read": {"read_only": True, "open_world": False, "rate_limit": "5/min"},
    "files_*": {"read_only": True, "open_world": False, "timeout": 5},
}}


def test_resolve_takes_the_prefixes_of_the_other_upstreams_sharing_the_policy() -> None:
    policy = ToolPolicy.from_dict(RULES)
    assert policy.resolve("tickets_files_read", "files_read") != {}  # one upstream: its own name
    for others in (["files_"], ["other_", "files_"], [""]):
        assert policy.resolve("tickets_files_read", "files_read", others=others) == {}
    assert policy.resolve("tickets_files_read", "files_read", others=["fil3s_"]) != {}
    # a glob that may match a name under files_ is read as listed names only
    rules = ToolPolicy.from_dict({"tools": {"f*": {"hidden": True}, "[!f]ook*": {"timeout": 3}}})
    assert rules.resolve("tickets_fetch", "fetch", others=["files_"]) == {}
    assert rules.resolve("tickets_fetch", "fetch") == {"hidden": True}
    # one that cannot is read as an upstream name when no listed name matches it, as with one
    assert rules.resolve("tickets_lookup", "lookup", others=["files_"]) == {"timeout": 3}


@pytest.mark.parametrize(("pattern", "reaches"), [
    ("files_read", True), ("files_*", True), ("f*", True), ("?iles_x", True), ("[ft]*", True),
    ("file[!x]_*", True), ("file[]s]_*", True), ("files_", True),
    ("files", False), ("fil", False), ("read_*", False), ("[!f]*", False), ("file[]]_*", False), ("t*", False),
])
def test_a_pattern_is_read_as_listed_names_when_it_can_match_a_name_under_another_prefix(
        pattern: str, reaches: bool) -> None:
    """(as fnmatch reads it: a ``]`` first in a class is part of it; ``[!...]`` negates)"""
    policy = ToolPolicy.from_dict({"tools": {pattern: {"timeout": 3}}})
    # the upstream's own name matches every pattern here; its listed one none of them
    own = pattern.replace("*", "x").replace("?", "f").replace("[!x]", "s").replace("[]s]", "s") \
        .replace("[ft]", "f").replace("[!f]", "r").replace("[]]", "]")
    assert policy.resolve("zz_" + own, own, others=["files_"]) == ({} if reaches else {"timeout": 3})
