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


def test_a_node_put_back_is_journaled_as_removed_and_made_again_where_the_graph_puts_it():
    """networkx puts a node added again last: the journal lists it as removed (a store deletes its
    row) and among the nodes in the order the graph put the new ones, so rows made in that order
    read back in the graph's order. One made in the change has no row to delete."""
    g = tree()
    g.take_changes()
    g.remove_node("s")
    g.touch("s")  # named while absent: it still goes where the graph puts it, not here
    g.add_node(Node("f3", NodeKind.FRAGMENT, "chat 3", "u1"))
    g.add_node(Node("s", NodeKind.SUBTOPIC, "Refunds", "u1"))
    g.add_node(Node("tmp", NodeKind.FRAGMENT, "made twice", "u1"))
    g.remove_node("tmp")
    g.add_node(Node("tmp", NodeKind.FRAGMENT, "made twice", "u1"))
    delta = g.take_changes()
    assert [n.id for n in g.nodes()] == ["c", "f1", "f2", "f3", "s", "tmp"]
    assert [n.id for n in delta.nodes] == ["f3", "s", "tmp"]
    assert delta.removed_nodes == ["s"]
    assert "s" not in delta.earlier  # it moved: what derives from it is derived again


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


def _assert_keyed_as_scanned(g: MemoryGraph, key, wanted: list[str], context) -> None:
    """``nodes_keyed`` finds what a scan of :meth:`MemoryGraph.nodes` does, in that order."""
    assert [n.id for n in g.nodes_keyed(key, wanted)] == [n.id for n in g.nodes() if key(n) in wanted], (
        context
    )


def _name(node: Node) -> str:
    return node.label if node.kind == NodeKind.ENTITY else node.id


@pytest.mark.parametrize("seed", range(5))
def test_nodes_keyed_answers_as_a_scan_of_the_graph_through_every_kind_of_change(seed):
    """The index by a key is kept by the graph's own methods and by the journal (a label or a kind
    assigned in place), across writes that take the journal: a lookup gives the nodes a scan of
    :meth:`MemoryGraph.nodes` would, in that order, also after a node is removed and put back
    (last) or replaced (in its place)."""
    import random

    rnd = random.Random(seed)
    names = ["Acme", "Bea", "Cal", "n1", "n2"]
    g = MemoryGraph("u1")

    for step in range(400):
        ids = [n.id for n in g.nodes()]
        op = rnd.choice(["add", "add", "replace", "remove", "rename", "rekind", "take"])
        if op == "add" or not ids:
            nid = rnd.choice(["n1", "n2", "n3"]) if rnd.random() < 0.3 else f"e{step}"
            if not g.has(nid):
                g.add_node(
                    Node(nid, rnd.choice([NodeKind.ENTITY, NodeKind.FRAGMENT]), rnd.choice(names), "u1")
                )
        elif op == "replace":
            old = g.get(rnd.choice(ids))
            g.add_node(Node(old.id, old.kind, rnd.choice(names), "u1"))
        elif op == "remove":
            g.remove_node(rnd.choice(ids))
        elif op == "rename":
            g.get(rnd.choice(ids)).label = rnd.choice(names)
        elif op == "rekind":
            node = g.get(rnd.choice(ids))
            node.kind = NodeKind.FRAGMENT if node.kind == NodeKind.ENTITY else NodeKind.ENTITY
        else:
            g.take_changes()
        if rnd.random() < 0.3:  # several changes between lookups, a write's taking the journal among them
            wanted = rnd.sample(names, rnd.randint(1, 3))
            _assert_keyed_as_scanned(g, _name, wanted, (step, op))


def _origin(node: Node) -> str | None:
    return node.properties.get("from") if node.kind == NodeKind.SUBTOPIC else None


@pytest.mark.parametrize("seed", range(3))
def test_nodes_keyed_by_a_key_most_nodes_lack_answers_as_a_scan_and_files_none_of_them(seed):
    """A node whose key is None is in no group (a group of nearly every node would be made again
    at each change): a lookup finds the others as a scan would, through in-place changes that a
    touch names, removals and kinds assigned."""
    import random

    rnd = random.Random(seed)
    origins = ["s0", "s1", "s2"]
    g = MemoryGraph("u1")

    for step in range(300):
        ids = [n.id for n in g.nodes()]
        op = rnd.choice(["add", "add", "mark", "unmark", "remove", "rekind", "take"])
        if op == "add" or not ids:
            g.add_node(Node(f"n{step}", rnd.choice([NodeKind.SUBTOPIC, NodeKind.FRAGMENT]), "x", "u1"))
        elif op in ("mark", "unmark"):
            node = g.get(rnd.choice(ids))
            if op == "mark":
                node.properties["from"] = rnd.choice(origins)
            else:
                node.properties.pop("from", None)
            g.touch(node.id)
        elif op == "remove":
            g.remove_node(rnd.choice(ids))
        elif op == "rekind":
            node = g.get(rnd.choice(ids))
            node.kind = NodeKind.FRAGMENT if node.kind == NodeKind.SUBTOPIC else NodeKind.SUBTOPIC
        else:
            g.take_changes()
        if rnd.random() < 0.3:
            wanted = rnd.sample(origins, rnd.randint(1, 2))
            _assert_keyed_as_scanned(g, _origin, wanted, (step, op))
            assert g.nodes_keyed(_origin, [None]) == []


def test_a_change_that_looks_names_up_as_it_goes_keys_each_node_it_writes_a_bounded_number_of_times():
    """Each lookup keys again only the nodes written since the last one, not the whole journal: a
    change adding a thousand entities and looking each name up first (as the LlamaIndex store's
    ``upsert_nodes`` does) keys each node a few times, not once per lookup after it."""
    keyed = [0]

    def name(node: Node) -> str:
        keyed[0] += 1
        return node.label

    g = MemoryGraph("u1")
    g.add_node(Node("e0", NodeKind.ENTITY, "Acme", "u1"))
    assert [n.id for n in g.nodes_keyed(name, ["Acme"])] == ["e0"]
    for i in range(1, 1_001):
        assert g.nodes_keyed(name, [f"n{i}"]) == []
        g.add_node(Node(f"e{i}", NodeKind.ENTITY, f"n{i}", "u1"))
    assert keyed[0] <= 3 * 1_001, keyed[0]
