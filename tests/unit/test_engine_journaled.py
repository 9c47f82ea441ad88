"""``MnemisMemory.apply_journaled``: a change made through the graph's own methods is written from
the graph's journal and derives again only what it reaches, and ends where :meth:`apply` ends: the
state a reload of the store derives, and the same retry when another writer got there first."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from _over_time import msg

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.indexes.incremental import PARENT_KINDS
from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind, Status
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


def _derived(st: NamespaceState, capacity: dict | None = None) -> dict:
    """Every structure a state derives from its graph and messages (what :meth:`rederive` makes
    again), copied so that the state may change after: the builder's index as it answers, and with
    ``capacity`` as the limits a builder gave it (a fresh index has none until a builder writes)."""
    caches = (dict(st.memo), st.path_cache)  # read first: the reads below fill no cache, yet
    idx = st.build_index()
    if capacity is not None:
        idx.set_capacity(st, capacity)
    idx.ready(st)
    tail = idx.open_tail(st)
    vectors = st.node_vectors
    with_vectors = sorted(vectors._ids)
    return {
        "caches": caches,
        "msg_fragment": dict(st.msg_fragment),
        "df": dict(st.df),
        # in order: a query's Chinese names are found in it
        "entities": (list(st.entities._by_key.items()), st.entities._max_words),
        "vectors": (with_vectors, vectors.get_many(with_vectors) if with_vectors else None),
        "vector_groups": dict(vectors._group),
        "index_in_step": (idx.matches(st), idx.n_nodes, idx.n_messages),
        "fragments": (idx.fragment_count(st), sorted(idx.active)),
        "open_tail": tail.id if tail is not None else None,
        "timeline": [key for key in idx._timeline if idx._tail_key.get(key[-1]) == key],
        "holders": {m: idx.holders(st, m) for m in st.messages},
        "mentions": {e: sorted(srcs) for e, srcs in idx._mentions.items()},
        "mention_order": {e: list(order) for e, order in idx._mention_order.items()},
        "children": {n.id: idx.child_count(st, n.id) for n in st.graph.nodes() if n.kind in PARENT_KINDS},
        "speakers": dict(idx.speakers(st)),
    }


def _assert_same_derived(mine: NamespaceState | dict, reloaded: NamespaceState) -> None:
    a = mine if isinstance(mine, dict) else _derived(mine)
    b = _derived(reloaded, a.get("capacity"))
    (ids, vectors), (ids_b, vectors_b) = a.pop("vectors"), b.pop("vectors")
    a.pop("capacity", None)
    a.pop("caches"), b.pop("caches")  # a reload and a write each leave them as they find them
    assert a == b
    assert ids == ids_b and (vectors is None) == (vectors_b is None)
    assert vectors is None or np.allclose(vectors, vectors_b, atol=1e-6)


def _assert_as_rederived(st: NamespaceState) -> None:
    """Every derived structure of ``st`` as :meth:`NamespaceState.rederive` makes it again from the
    same graph and messages, with the caches as a rederive leaves them."""
    mine = _derived(st)
    mine["capacity"] = st.build_index().capacity
    assert mine["caches"] == ({}, None)
    st.rederive()
    _assert_same_derived(mine, st)


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


def _with_people(path=None) -> MnemisMemory:
    """The chat, a document and extracted people (``_add_document_and_people``), a person sharing
    Dee's name as an alias, and mentions of Cal by the document and by a fragment of the chat."""
    mem = _memory(path)
    mem.apply_journaled(_add_document_and_people, namespace=NS)

    def more(g: MemoryGraph) -> None:
        g.add_node(Node("doc-2", NodeKind.FRAGMENT, "Agenda", NS, summary="Cal opens the offsite."))
        g.add_node(Node("e:dd", NodeKind.ENTITY, "Dorothea", NS, aliases=["Dee"]))
        g.add_edge(Edge("doc-1", "e:cal", EdgeKind.MENTIONS))
        g.add_edge(Edge("f:m1", "e:cal", EdgeKind.MENTIONS))

    mem.apply_journaled(more, namespace=NS)
    return mem


def _restored(node_id: str, **fields) -> Callable[[MemoryGraph], None]:
    """The node stored again as the LlamaIndex store does it: a new node in its place."""
    return lambda g: g.add_node(replace(g.get(node_id), **fields))


def _a_mix(g: MemoryGraph) -> None:
    _restored("e:cal", properties={"role": "host"}, aliases=[])(g)
    _restored("doc-2", label="Agenda v2", summary="Dee opens the offsite.", status=Status.ARCHIVED)(g)
    g.remove_node("doc-1")
    g.remove_node("e:ann")
    g.remove_edge("e:cal", "e:dee", EdgeKind.RELATION, "KNOWS")
    g.add_node(Node("e:eve", NodeKind.ENTITY, "Eve", NS, aliases=["Calvin"]))
    g.add_edge(Edge("e:eve", "e:cal", EdgeKind.RELATION, label="MEETS"))
    g.add_edge(Edge("f:m3", "e:eve", EdgeKind.MENTIONS))


LOCAL, WHOLE = True, False
CHANGES = [
    pytest.param(
        _restored("e:cal", properties={"role": "host"}), LOCAL, id="entity re-stored, new properties"
    ),
    pytest.param(_restored("e:ann", properties={"team": "ops"}), LOCAL, id="builder's entity re-stored"),
    pytest.param(_restored("e:cal", aliases=[]), LOCAL, id="entity re-stored without its alias"),
    pytest.param(_restored("e:cal", aliases=["Calvin", "Cally"]), WHOLE, id="entity re-stored, new alias"),
    pytest.param(_restored("e:cal", label="Calvin K"), WHOLE, id="entity re-stored, new name"),
    pytest.param(_restored("e:cal", label="Calvin", aliases=["Cal"]), WHOLE, id="entity names reordered"),
    pytest.param(
        _restored("doc-1", label="Venue", summary="The offsite moved to the harbour."),
        LOCAL,
        id="chunk re-stored, new text",
    ),
    pytest.param(_restored("doc-1", status=Status.ARCHIVED), LOCAL, id="chunk re-stored, archived"),
    pytest.param(_restored("f:m1", keywords=["quote"]), LOCAL, id="fragment re-stored, same messages"),
    pytest.param(_restored("f:m1", source_ids=["m1"]), WHOLE, id="fragment re-stored, other messages"),
    pytest.param(_restored("e:cal", kind=NodeKind.CONCEPT), WHOLE, id="node re-stored as another kind"),
    pytest.param(lambda g: g.remove_node("e:cal"), LOCAL, id="entity removed"),
    pytest.param(lambda g: g.remove_node("e:ann"), LOCAL, id="entity fragments mention removed"),
    pytest.param(lambda g: g.remove_node("e:dee"), WHOLE, id="entity removed, its name held by another"),
    pytest.param(lambda g: g.remove_node("e:dd"), WHOLE, id="entity removed, its alias held by another"),
    pytest.param(
        lambda g: (g.remove_node("e:cal"), g.add_node(Node("e:cal2", NodeKind.ENTITY, "Cal", NS))),
        LOCAL,
        id="entity removed, its name taken by a new one",
    ),
    pytest.param(lambda g: g.remove_node("doc-1"), LOCAL, id="chunk removed"),
    pytest.param(
        lambda g: g.add_edge(Edge("e:dee", "e:cal", EdgeKind.RELATION, label="THANKS")),
        LOCAL,
        id="relation added",
    ),
    pytest.param(
        lambda g: g.remove_edge("e:cal", "e:dee", EdgeKind.RELATION, "KNOWS"), LOCAL, id="relation removed"
    ),
    pytest.param(lambda g: g.add_edge(Edge("f:m3", "e:cal", EdgeKind.MENTIONS)), LOCAL, id="mention added"),
    pytest.param(lambda g: g.remove_edge("f:m1", "e:ann", EdgeKind.MENTIONS), LOCAL, id="mention removed"),
    pytest.param(
        lambda g: (
            g.add_node(Node("e:zed", NodeKind.ENTITY, "Zed", NS)),
            g.add_edge(Edge("f:m1", "e:zed", EdgeKind.MENTIONS)),
        ),
        LOCAL,
        id="new entity an old fragment mentions",
    ),
    pytest.param(_a_mix, LOCAL, id="a mix"),
    pytest.param(lambda g: (g.get("f:m1").keywords.append("quote"), g.touch("f:m1")), WHOLE, id="touched"),
    pytest.param(lambda g: setattr(g.get("f:m3"), "label", "Lunch"), WHOLE, id="field set"),
    pytest.param(
        lambda g: (setattr(g.get("e:cal"), "label", "Cal K"), _restored("e:cal", label="Cal")(g)),
        WHOLE,
        id="field set, then re-stored",
    ),
    pytest.param(lambda g: g.remove_node("f:m3"), WHOLE, id="fragment with messages removed"),
    pytest.param(
        lambda g: (
            g.add_node(Node("doc-3", NodeKind.FRAGMENT, "Notes", NS, source_ids=["m4"])),
            g.add_edge(Edge("doc-3", g.parent("f:m3").id, EdgeKind.BELONGS_TO)),
        ),
        WHOLE,
        id="new node with messages and a parent",
    ),
    pytest.param(
        lambda g: (
            g.add_node(Node("doc-3", NodeKind.FRAGMENT, "Notes", NS)),
            g.add_edge(Edge("doc-3", g.parent("f:m1").id, EdgeKind.BELONGS_TO)),
        ),
        WHOLE,
        id="new node under a parent",
    ),
    pytest.param(
        lambda g: g.remove_edge("f:m1", g.parent("f:m1").id, EdgeKind.BELONGS_TO), WHOLE, id="edge removed"
    ),
]


@pytest.mark.parametrize("change, local", CHANGES)
def test_each_kind_of_change_derives_what_rederive_derives(tmp_path, monkeypatch, change, local):
    """A node replaced or removed (its earlier form journaled) and every edge kind but ``belongs_to``
    are derived at their own cost; a name an entity gains or shares, a fragment's messages, a
    ``belongs_to`` edge, a node changed in place or moved derive everything again. Either way every
    derived structure, the builder's index among them, is what ``rederive`` makes of the same graph,
    and what a reload of the store derives."""
    mem = _with_people(tmp_path / "m.db")
    st = mem._state(NS)
    mem.search("Cal offsite pricing", namespace=NS)  # the builder's index and the search caches are in use
    st.build_index().ready(st)
    rederived = _rederives(monkeypatch)
    mem.apply_journaled(change, namespace=NS)
    assert rederived == ([] if local else [NS])
    assert mem._state(NS) is st
    _assert_same_derived(st, _reloaded(mem))
    _assert_as_rederived(st)
    with MnemisMemory(tmp_path / "m.db", embedder=HashingEmbedder()) as reopened:
        assert reopened.graph(NS).to_data() == mem.graph(NS).to_data()


def test_a_node_removed_and_put_back_derives_everything_again(monkeypatch):
    """Put back, a node comes last in the graph's order, which its journaled earlier form cannot
    say: an entity's name then goes to it, not to the other entity holding it, also once the store
    is read again (it makes the node's row again, last)."""
    mem = _with_people()
    st = mem._state(NS)
    rederived = _rederives(monkeypatch)
    mem.apply_journaled(
        lambda g: (g.remove_node("e:dee"), g.add_node(Node("e:dee", NodeKind.ENTITY, "Dee", NS))),
        namespace=NS,
    )
    assert rederived == [NS]
    assert st.entities.get("dee") == "e:dee"
    _assert_as_rederived(st)
    _assert_same_derived(st, _reloaded(mem))


@pytest.mark.parametrize("change, local", [p for p in CHANGES if p.values[1] is LOCAL])
def test_a_change_derived_locally_searches_as_a_reopened_memory(tmp_path, change, local):
    """Search and the nearest nodes answer from the locally derived state as from a memory that
    read the same store afresh, then again after the builder goes on from it."""
    mem = _with_people(tmp_path / "m.db")
    mem.search("Cal offsite", namespace=NS)
    mem.apply_journaled(change, namespace=NS)
    queries = ("Acme seats plan", "lunch with Bea", "Cal and Dee", "lighthouse offsite", "Calvin Eve harbour")
    for step in ("changed", "built on"):
        with MnemisMemory(tmp_path / "m.db", embedder=HashingEmbedder()) as reopened:
            for query in queries:
                answers = [
                    (
                        [
                            (h.node_id, h.score, h.text, h.via, h.source_ids)
                            for h in m.search(query, k=8, namespace=NS)
                        ],
                        m.nearest_nodes(query, 8, namespace=NS),
                    )
                    for m in (mem, reopened)
                ]
                assert answers[0] == answers[1], (step, query)
        mem.add_messages([LATER], namespace=NS)


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


@pytest.mark.parametrize(
    "change, local",
    [
        p
        for p in CHANGES
        if p.values[1] is LOCAL and p.id in ("entity re-stored, new properties", "chunk removed", "a mix")
    ],
)
def test_a_local_change_another_writer_beat_is_derived_on_the_fresh_copy(
    tmp_path, monkeypatch, change, local
):
    """The other writer's message lands between this change's read and its write: the change runs
    again on a fresh copy holding it, is derived there at its own cost, and ends as rederive ends."""
    path = tmp_path / "shared.db"
    mine, other = _with_people(path), MnemisMemory(path, embedder=HashingEmbedder())
    mine.search("Cal offsite", namespace=NS)  # this memory's copy is loaded, and will be stale
    other.search("Cal offsite", namespace=NS)  # and the other's, read before the count below
    real_write, versions = mine._store.write, []

    def write_after_the_other_writer(namespace, delta, expected, meta=None):
        if not versions:
            other.add_messages([LATER], namespace=NS)
        versions.append(expected)
        return real_write(namespace, delta, expected, meta)

    monkeypatch.setattr(mine._store, "write", write_after_the_other_writer)
    rederived = _rederives(monkeypatch)
    mine.apply_journaled(change, namespace=NS)
    assert len(versions) == 2 and versions[1] > versions[0]
    assert rederived == [NS]  # the fresh copy's own, when it was read: not the change's
    st = mine._state(NS)
    assert "m5" in st.messages
    _assert_same_derived(st, _reloaded(mine))
    _assert_as_rederived(st)


def test_messages_by_id_copies_only_those_asked_for_in_arrival_order():
    mem = _memory()
    assert [m.id for m in mem.messages(NS, ids=["m3", "nobody", "m1", "m3"])] == ["m1", "m3"]
    assert mem.messages(NS, ids=[]) == []
    assert [m.id for m in mem.messages(NS)] == ["m1", "m2", "m3", "m4"]


@pytest.mark.parametrize(
    "node_id, grow",
    [("e:cal", lambda n: n.aliases.append("Cally")), ("f:m1", lambda n: n.source_ids.append("m4"))],
    ids=["an entity's new alias", "a fragment's new message"],
)
def test_a_held_node_changed_in_place_and_added_again_is_derived_as_it_now_is(node_id, grow):
    """``add_node`` given the very node the graph holds, a list of it changed in place: the journal's
    "earlier form" was that node as it is now, so nothing looked gained or lost, and the name index,
    the message -> fragment map, word counts and holders kept what the node was (a reload did not)."""
    mem = _with_people()
    st = mem._state(NS)

    def change(g: MemoryGraph) -> None:
        node = g.get(node_id)
        grow(node)
        g.add_node(node)

    mem.apply_journaled(change, namespace=NS)
    _assert_same_derived(st, _reloaded(mem))
    _assert_as_rederived(st)
