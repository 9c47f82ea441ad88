"""``MnemisMemory.apply_journaled``: a change made through the graph's own methods is written from
the graph's journal and derives again only what it reaches, and ends where :meth:`apply` ends: the
state a reload of the store derives, and the same retry when another writer got there first."""

from __future__ import annotations

import numpy as np
import pytest
from _over_time import msg

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind
from mnemis_integrations.core.state import NamespaceState

NS = "u"
CHAT = [
    msg(1, "Acme asked to move the pricing plan to seats.", days=0),
    msg(2, "Acme wants the pricing draft by Friday.", "bob", minutes=1),
    msg(3, "Let's get lunch at the noodle place on Friday.", days=3),
    msg(4, "Bea booked the noodle place for noon.", "bob", days=3, minutes=1),
]
LATER = msg(5, "Acme confirmed the seats plan; Bea sent the invoice.", days=4)


def _memory(path=None) -> MnemisMemory:
    mem = MnemisMemory(path, embedder=HashingEmbedder())
    mem.add_messages(CHAT, namespace=NS)
    return mem


def _reloaded(mem: MnemisMemory) -> NamespaceState:
    """The namespace as a reload of the store derives it, beside the memory's own copy."""
    return NamespaceState.from_stored(NS, mem._dim, mem._store.load(NS, mem._dim))


def _derived(st: NamespaceState) -> dict:
    """What a state derives from its graph and messages, comparable between two states."""
    with_vectors = [n.id for n in st.graph.nodes() if n.id in st.node_vectors]
    idx = st.build_index()
    tail = idx.open_tail(st)
    return {
        "msg_fragment": dict(st.msg_fragment),
        "df": dict(st.df),
        "entities": {k: st.entities.get(k) for k in st.entities.keys()},
        "vectors": (with_vectors, st.node_vectors.get_many(with_vectors)),
        "fragments": (idx.fragment_count(st), idx.active_count(st)),
        "open_tail": tail.id if tail is not None else None,
        "mentions": idx.counts(st, [n.id for n in st.graph.nodes(NodeKind.ENTITY)]),
        "children": {
            n.id: idx.child_count(st, n.id)
            for n in st.graph.nodes()
            if n.kind in (NodeKind.SUBTOPIC, NodeKind.CONCEPT)
        },
    }


def _assert_same_derived(mine: NamespaceState, reloaded: NamespaceState) -> None:
    a, b = _derived(mine), _derived(reloaded)
    (ids, vectors), (ids_b, vectors_b) = a.pop("vectors"), b.pop("vectors")
    assert a == b
    assert ids == ids_b and np.allclose(vectors, vectors_b, atol=1e-6)


def _rederives(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = NamespaceState.rederive

    def counting(self: NamespaceState) -> None:
        calls.append(self.namespace)
        real(self)

    monkeypatch.setattr(NamespaceState, "rederive", counting)
    return calls


def _add_document_and_people(g: MemoryGraph) -> None:
    """What a LlamaIndex store writes for a document and an extraction: a fragment without
    messages (a chunk), entities with a relation, and a reference between new and old nodes."""
    g.add_node(
        Node("doc-1", NodeKind.FRAGMENT, "Offsite", NS, summary="The offsite moved to the lighthouse.")
    )
    g.add_node(Node("e:cal", NodeKind.ENTITY, "Cal", NS, aliases=["Calvin"]))
    g.add_node(Node("e:dee", NodeKind.ENTITY, "Dee", NS))
    g.add_edge(Edge("e:cal", "e:dee", EdgeKind.RELATION, label="KNOWS"))
    g.add_edge(Edge("doc-1", "f:m1", EdgeKind.REFERENCES))


def test_a_change_that_only_adds_nodes_derives_locally_what_a_reload_derives(tmp_path, monkeypatch):
    mem = _memory(tmp_path / "m.db")
    mem.search("pricing plan", namespace=NS)  # the builder's index and the search caches are in use
    st = mem._state(NS)
    index = st.build_index()
    index.ready(st)
    rederived = _rederives(monkeypatch)

    mem.apply_journaled(_add_document_and_people, namespace=NS)

    assert rederived == []
    assert mem._state(NS) is st and st.build_index() is index  # kept in step, not dropped
    assert st.entities.get("calvin") == "e:cal"
    _assert_same_derived(st, _reloaded(mem))
    # the builder goes on from the kept state as it would from a reloaded one
    mem.add_messages([LATER], namespace=NS)
    _assert_same_derived(mem._state(NS), _reloaded(mem))


def test_it_ends_as_apply_ends():
    journaled, applied = _memory(), _memory()
    journaled.apply_journaled(_add_document_and_people, namespace=NS)
    applied.apply(_add_document_and_people, namespace=NS)
    for mem in (journaled, applied):
        mem.add_messages([LATER], namespace=NS)
    assert journaled.graph(NS).to_data() == applied.graph(NS).to_data()
    for query in ("Acme seats plan", "lunch with Bea", "Cal and Dee", "lighthouse offsite"):
        hits = [
            [(h.node_id, h.score, h.text, h.via) for h in mem.search(query, k=8, namespace=NS)]
            for mem in (journaled, applied)
        ]
        assert hits[0] == hits[1]
        nearest = [mem.nearest_nodes(query, 8, namespace=NS) for mem in (journaled, applied)]
        assert nearest[0] == nearest[1]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda g: (g.get("f:m1").keywords.append("quote"), g.touch("f:m1")), id="touched"),
        pytest.param(lambda g: setattr(g.get("f:m3"), "label", "Lunch"), id="field set"),
        pytest.param(lambda g: g.remove_node("f:m3"), id="removed"),
        pytest.param(
            lambda g: (
                g.add_node(Node("doc-2", NodeKind.FRAGMENT, "Notes", NS, source_ids=["m4"])),
                g.add_edge(Edge("doc-2", g.parent("f:m3").id, EdgeKind.BELONGS_TO)),
            ),
            id="new node with messages and a parent",
        ),
        pytest.param(
            lambda g: (
                g.add_node(Node("doc-3", NodeKind.FRAGMENT, "Notes", NS)),
                g.add_edge(Edge("doc-3", g.parent("f:m1").id, EdgeKind.BELONGS_TO)),
            ),
            id="new node under a parent",
        ),
        pytest.param(
            lambda g: (
                g.add_node(Node("e:zed", NodeKind.ENTITY, "Zed", NS)),
                g.add_edge(Edge("f:m1", "e:zed", EdgeKind.MENTIONS)),
            ),
            id="new entity an old fragment mentions",
        ),
        pytest.param(
            lambda g: g.remove_edge("f:m1", g.parent("f:m1").id, EdgeKind.BELONGS_TO), id="edge removed"
        ),
    ],
)
def test_a_change_it_cannot_derive_locally_derives_everything_again(tmp_path, monkeypatch, change):
    """A node that was there before (its earlier form is not journaled), a new fragment with
    messages, a ``belongs_to`` edge: derived again whole, and persisted."""
    mem = _memory(tmp_path / "m.db")
    rederived = _rederives(monkeypatch)
    mem.apply_journaled(change, namespace=NS)
    assert rederived == [NS]
    _assert_same_derived(mem._state(NS), _reloaded(mem))
    with MnemisMemory(tmp_path / "m.db", embedder=HashingEmbedder()) as reopened:
        assert reopened.graph(NS).to_data() == mem.graph(NS).to_data()


def test_a_change_another_writer_beat_runs_again_on_the_fresh_copy(tmp_path):
    """Two memories on one file: the other's batch lands between this change's read and its write,
    so the first write is refused (its version moved) and the change runs again on a fresh copy,
    which it then derives locally as on any copy."""
    path = tmp_path / "shared.db"
    mine, other = _memory(path), MnemisMemory(path, embedder=HashingEmbedder())
    mine.search("pricing plan", namespace=NS)  # this memory's copy is loaded, and will be stale
    real_write, versions, runs = mine._store.write, [], []

    def write_after_the_other_writer(namespace, delta, expected, meta=None):
        if not versions:
            other.add_messages([LATER], namespace=NS)
        versions.append(expected)
        return real_write(namespace, delta, expected, meta)

    def change(g: MemoryGraph) -> None:
        runs.append(g.has("f:m5") or any("m5" in f.source_ids for f in g.nodes(NodeKind.FRAGMENT)))
        _add_document_and_people(g)

    mine._store.write = write_after_the_other_writer
    mine.apply_journaled(change, namespace=NS)
    mine._store.write = real_write

    assert len(versions) == 2 and versions[1] > versions[0]  # refused once, then written on the fresh version
    assert runs == [False, True]  # run again on a copy holding the other writer's message
    st = mine._state(NS)
    assert st.graph.has("doc-1") and "m5" in st.messages
    _assert_same_derived(st, _reloaded(mine))
    with MnemisMemory(path, embedder=HashingEmbedder()) as reopened:
        assert reopened.graph(NS).has("e:cal") and "m5" in {m.id for m in reopened.messages(NS)}


def test_messages_by_id_copies_only_those_asked_for_in_arrival_order():
    mem = _memory()
    assert [m.id for m in mem.messages(NS, ids=["m3", "nobody", "m1", "m3"])] == ["m1", "m3"]
    assert mem.messages(NS, ids=[]) == []
    assert [m.id for m in mem.messages(NS)] == ["m1", "m2", "m3", "m4"]
