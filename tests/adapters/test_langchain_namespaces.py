"""LangGraph namespaces as Mnemis namespaces, and namespace templates (pure, no framework)."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemis_integrations.core.messages import validate_namespace
from mnemis_integrations.errors import ConfigError, InvalidNamespaceError
from mnemis_integrations.langchain import _namespaces as ns


def test_namespace_tuple_maps_to_colon_joined_name():
    assert ns.namespace_to_str(("memories", "user-1", "a@b")) == "memories:user-1:a@b"


@pytest.mark.parametrize("bad", [(), ("",), ("a", ""), (7,)])
def test_a_namespace_langgraph_refuses_too_is_refused_with_invalid_namespace_error(bad):
    with pytest.raises(InvalidNamespaceError):
        ns.namespace_to_str(bad)


@pytest.mark.parametrize(
    "namespace",
    [
        ("users", "user:42"),
        ("john smith",),
        ("Zoë",),
        ("org/team",),
        ("auth0|5f7c8ec7c33c6c004bbafe82",),
        ("x" * 129,),
        ("users", "u1\n"),
        ("😀", "a.b\\c"),
    ],
)
def test_every_label_langgraph_accepts_gets_a_valid_mnemis_namespace(namespace):
    """Before: ':', spaces, non-ASCII letters, '/', '|' and names over 128 characters raised
    InvalidNamespaceError, though LangGraph accepts them all."""
    name = ns.namespace_to_str(namespace)
    assert validate_namespace(name) == name
    decoded = ns.str_to_namespace(name)
    assert decoded == namespace or (decoded is None and len(name) == 128)


labels = st.text(alphabet=string.ascii_letters + string.digits + "_-@", min_size=1, max_size=8)
any_labels = st.text(st.characters(blacklist_characters=".\x00"), min_size=1, max_size=12)


@given(st.lists(labels, min_size=1, max_size=4), st.lists(labels, min_size=1, max_size=4))
def test_distinct_namespaces_never_share_a_memory(a, b):
    if a != b:
        assert ns.namespace_to_str(a) != ns.namespace_to_str(b)


@given(st.lists(labels, min_size=1, max_size=4))
def test_plain_labels_keep_their_names(labels):
    """Stores written before labels were escaped keep reaching their memory."""
    assert ns.namespace_to_str(labels) == ":".join(labels)


@given(st.lists(any_labels, min_size=1, max_size=12), st.lists(any_labels, min_size=1, max_size=12))
def test_any_langgraph_labels_map_to_distinct_valid_names_that_decode_back(a, b):
    na, nb = ns.namespace_to_str(a), ns.namespace_to_str(b)
    assert validate_namespace(na) == na
    assert (na == nb) == (a == b)
    assert ns.str_to_namespace(na) == tuple(a) or (ns.str_to_namespace(na) is None and len(na) == 128)


def test_a_template_is_filled_with_encoded_run_values_and_a_missing_one_is_named():
    values = {"user_id": "john smith", "team_id": "acme"}
    assert ns.fill_namespace("team-{team_id}:{user_id}", values.get) == "team-acme:john.20smith"
    with pytest.raises(ConfigError, match="org_id"):
        ns.fill_namespace("{org_id}", values.get)


@pytest.mark.parametrize("bad", ["{}", "{user-id}", "{user_id", "a b {x}", "plain"])
def test_a_template_that_cannot_make_a_namespace_is_refused(bad):
    with pytest.raises(ConfigError):
        ns.check_namespace_template(bad)
