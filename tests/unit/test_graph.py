"""MemoryGraph: the hierarchy's views, the update chain, and the change journal a write persists."""

from __future__ import annotations

import pytest

from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind
from mnemis_integrations.errors import NodeNotFoundError


def tree() -> MemoryGraph:
    g = MemoryGraph("u1")
    g.add_node(Node("c", NodeKind.CONCEPT, "Payments", "u1"))
    g.add_node(Node("s", NodeKind.SUBTOPIC, "Refunds", "u1"))
    for i in (1, 2):
        g.add_node(Node(f"f{i}", NodeKind.FRAGMENT, f"chat {i}", "u1", source_ids=[f"m{i}a", f"m{i}b"]))
        g.add_edge(Edge(f"f{i}", "s", EdgeKind.BELONGS_TO))
    g.add_edge(Edge("s", "c", EdgeKind.BELONGS_TO))
    return g


def test_the_hierarchy_views_agree():
    g = tree()
    assert [n.id for n in g.ancestors("f1")] == ["s", "c"]
    assert g.hierarchy_path("f2") == ["Payments", "Refunds", "chat 2"]
    assert sorted(n.id for n in g.children("s")) == ["f1", "f2"] and g.parent("c") is None
    assert g.sources_under("c") == {"m1a", "m1b", "m2a", "m2b"} and g.sources_under("f1") == {"m1a", "m1b"}
    assert [(d, n.id) for d, n in g.iter_tree()] in (
        [(0, "c"), (1, "s"), (2, "f1"), (2, "f2")],
        [(0, "c"), (1, "s"), (2, "f2"), (2, "f1")],
    )


def test_the_update_chain_ends_where_nothing_replaces_a_node_any_more():
    g = tree()
    g.add_node(Node("f3", NodeKind.FRAGMENT, "chat 3", "u1"))
    g.add_edge(Edge("f2", "f1", EdgeKind.UPDATES))
    g.add_edge(Edge("f3", "f2", EdgeKind.UPDATES))
    assert [n.id for n in g.successors_of("f1")] == ["f2"] and [n.id for n in g.predecessors_of("f3")] == [
        "f2"
    ]
    assert [n.id for n in g.latest_successors("f1")] == ["f3"] and g.latest_successors("f3") == []


def test_the_journal_holds_exactly_what_changed_since_it_was_last_taken():
    g = tree()
    first = g.take_changes()
    assert {n.id for n in first.nodes} == {"c", "s", "f1", "f2"} and len(first.edges) == 3
    assert not g.pending_changes()
    g.get("s").label = "Refund failures"  # a field set in place is journalled by the node itself
    g.remove_node("f2")
    g.add_node(Node("tmp", NodeKind.FRAGMENT, "gone again", "u1"))
    g.remove_node("tmp")
    delta = g.take_changes()
    assert [n.id for n in delta.nodes] == ["s"] and delta.nodes[0].label == "Refund failures"
    assert "f2" in delta.removed_nodes and delta.removed_edges == [("f2", "s", "belongs_to")]
    assert "tmp" not in {n.id for n in delta.nodes}  # made and removed again: nothing to store
    assert not delta.edges and not g.take_changes()


def test_a_graph_read_from_its_data_is_the_same_graph_with_an_empty_journal():
    g = tree()
    copy = MemoryGraph.from_data(g.to_data())
    assert copy.to_data() == g.to_data() and not copy.pending_changes()


def test_removing_a_node_that_is_not_there_is_a_typed_error():
    with pytest.raises(NodeNotFoundError):
        tree().remove_node("nope")


def test_edges_near_walks_both_ways_hop_by_hop_and_stops_at_depth_limit_and_unfollowed_edges():
    g = tree()  # c <- s <- f1, f2
    g.add_node(Node("e", NodeKind.ENTITY, "Acme", "u1"))
    g.add_edge(Edge("f2", "e", EdgeKind.MENTIONS))

    def near(depth, limit=100, follow=lambda e: True):
        return [(e.src, e.dst) for e in g.edges_near(["f1"], depth, follow=follow, limit=limit)]

    assert near(1) == [("f1", "s")]
    assert near(2) == [("f1", "s"), ("s", "c"), ("f2", "s")]  # up to c, and down again to f2
    assert near(3) == [*near(2), ("f2", "e")]
    assert near(3, limit=2) == [("f1", "s"), ("s", "c")]
    assert near(3, follow=lambda e: e.kind != EdgeKind.MENTIONS) == near(2)
