"""Pure conversions of the LlamaIndex adapter (no LlamaIndex objects involved)."""

from __future__ import annotations

import doctest
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind, Status
from mnemis_integrations.core.retrieval.results import MemoryHit
from mnemis_integrations.llama_index import _convert as cv

T = datetime(2025, 3, 2, 9, 30, tzinfo=timezone.utc)


def test_doctests_pass():
    result = doctest.testmod(cv)
    assert result.attempted > 0 and result.failed == 0


def test_chat_message_id_depends_on_session_role_and_text_only():
    base = cv.chat_message_id("s1", "user", "hi")
    assert base == cv.chat_message_id("s1", "user", "hi")
    assert (
        len({base, cv.chat_message_id("s1", "assistant", "hi"), cv.chat_message_id("s1", "user", "hi!")}) == 3
    )


def test_node_fields_survive_the_trip_through_properties():
    node = Node(
        "e1",
        NodeKind.ENTITY,
        "Plan B",
        "u1",
        summary="the pricing plan",
        keywords=["pricing"],
        aliases=["B"],
        source_ids=["m4"],
        created_at=T,
        event_time=T,
        status=Status.SUPERSEDED,
        valid_until=T,
    )
    view = cv.node_view(node, {"owner": "ops", cv.LABEL_PROPERTY: "PLAN"})
    assert (view["type"], view["name"], view["label"]) == ("entity", "Plan B", "PLAN")
    fields, own = cv.split_node_properties(view["properties"])
    assert own == {"owner": "ops"}
    for name, value in fields.items():
        assert getattr(node, name) == value
    assert set(fields) == set(cv.FIELD_PROPERTIES)


def test_chunk_view_uses_the_node_id_the_kind_and_the_summary():
    view = cv.node_view(Node("f:m1", NodeKind.FRAGMENT, "refund (1 March)", "u1", summary="user on refund"))
    assert (view["type"], view["id"], view["label"], view["text"]) == (
        "chunk",
        "f:m1",
        "fragment",
        "user on refund",
    )
    assert "summary" not in view["properties"]  # the chunk's text already is the summary


@pytest.mark.parametrize("kind", [k for k in EdgeKind if k != EdgeKind.RELATION])
def test_structural_edges_round_trip_through_relation_labels(kind):
    assert cv.edge_kind_for_label(cv.relation_label(Edge("a", "b", kind))) == (kind, "")


@given(st.text(min_size=1).filter(lambda s: s not in cv.STRUCTURAL_LABELS))
def test_entity_relation_labels_round_trip(label):
    assert cv.relation_label(Edge("a", "b", *cv.edge_kind_for_label(label))) == label


def test_empty_relation_label_is_refused():
    with pytest.raises(ValueError, match="non-empty label"):
        cv.edge_kind_for_label("")


# node fields, derived properties, the label, and the relation fields (weight, created_at)
_reserved = (
    set(cv.FIELD_PROPERTIES) | set(cv.DERIVED_PROPERTIES) | {cv.LABEL_PROPERTY, "weight", "created_at"}
)


@given(
    st.dictionaries(
        st.text(min_size=1).filter(lambda k: k not in _reserved), st.integers() | st.text(), max_size=5
    )
)
def test_own_properties_pass_through_untouched(props):
    fields, own = cv.split_node_properties(props)
    assert fields == {} and own == props
    assert cv.split_relation_properties(props) == ({}, props)


def test_bad_time_property_is_refused_with_its_name():
    with pytest.raises(ValueError, match="'event_time'"):
        cv.split_node_properties({"event_time": "last tuesday"})


def test_hit_line_marks_status_and_date_and_cuts_long_text():
    hit = MemoryHit(
        "n", "fragment", "a " * 300, (), 0.5, 0.5, 0.0, ("semantic",), ("A", "B"), T, "superseded"
    )
    line = cv.format_hit(hit, max_chars=20)
    assert line.startswith("[A > B] (superseded) a a") and line.endswith("… (2025-03-02)")
    assert cv.format_hits([hit], header="H").splitlines()[0] == "H"
