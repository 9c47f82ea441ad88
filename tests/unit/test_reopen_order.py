"""A namespace reads back from its store in the order the graph that wrote it holds its nodes.

networkx keeps nodes in the order they were first added, so a node removed and put back in one
change goes last; the name an entity shares with another goes to the later one, a reopened memory
lays its vector rows out in that order and ``nodes()`` lists it. A store that kept such a node's
row in its old place answered differently once reopened (or, in memory, once a failed change had
the copy read again) than the process that wrote it. Each write path is checked on each backend
(FalkorDB when ``MNEMIS_FALKORDB_URL`` is set)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest
from _memories import ALL_BACKENDS, Backend
from falkordb_server import server_url
from test_builder_scale import chat

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core import recipes
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import MemoryGraph, edge_key
from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind

NS = "u"
# A growing fragment is placed again, and a parent it founded and left empty is founded again under
# the same id, in one write: the builder's own way of removing a node and putting it back.
PLACE_AGAIN = recipes.DEFAULT.with_(build={"place_again_until_words": 10_000})
BASE = chat(24, seed=11)
# A fragment on a new matter founds its own parents; grown by a message naming someone new (an
# entity made before the fragment is placed again), it founds them again after that entity.
LATER = [
    {
        "id": f"k{i}",
        "speaker": speaker,
        "text": text,
        "timestamp": BASE[-1]["timestamp"] + timedelta(days=9, minutes=i),
    }
    for i, (speaker, text) in enumerate(
        [
            ("ann", "Quinn ordered the kayak paddles and the dry bags."),
            ("bob", "Quinn and Rosalind will pick up the kayak paddles."),
        ]
    )
]
QUERIES = ("Dee", "Dorothea and Zed", "Acme pricing plan", "kayak paddles for Rosalind", "roof tiles")


@pytest.fixture(params=ALL_BACKENDS)
def backend(request, tmp_path):
    def opened(**where) -> Callable[[], MnemisMemory]:
        return lambda: MnemisMemory(**where, embedder=HashingEmbedder(), config=PLACE_AGAIN)

    if request.param == "memory":
        only = opened()()
        b = Backend("memory", lambda: only)
    elif request.param == "sqlite":
        b = Backend("sqlite", opened(path=tmp_path / "m.db"))
    else:
        b = Backend("falkordb", opened(backend=server_url()))
        b.open().delete_namespace(NS)
    yield b
    if b.name == "falkordb":
        b.opened[0].delete_namespace(NS)
    for mem in b.opened:
        mem.close()


def _people(g: MemoryGraph) -> None:
    """Dee, and Dorothea who also goes by Dee (the later entity takes the name), each mentioned by a
    fragment; Zed and Zed Corp, the same thing to a rebalance, which merges them."""
    fragments = [n.id for n in g.nodes(NodeKind.FRAGMENT)]
    for nid, label, aliases in (
        ("e:dee", "Dee", []),
        ("e:dd", "Dorothea", ["Dee"]),
        ("e:zed", "Zed", []),
        ("e:zed corp", "Zed Corp", []),
    ):
        g.add_node(Node(nid, NodeKind.ENTITY, label, NS, aliases=aliases))
    g.add_edge(Edge("e:dee", "e:dd", EdgeKind.RELATION, label="KNOWS"))
    g.add_edge(Edge(fragments[0], "e:dee", EdgeKind.MENTIONS))
    g.add_edge(Edge(fragments[1], "e:dd", EdgeKind.MENTIONS))
    g.add_edge(Edge(fragments[2], "e:zed corp", EdgeKind.MENTIONS))


def _dee_put_back(g: MemoryGraph) -> None:
    """Dee removed and stored again with her links, in one change (a node re-stored by id)."""
    node, edges = g.get("e:dee"), [*g.in_edges("e:dee"), *g.out_edges("e:dee")]
    g.remove_node("e:dee")
    g.add_node(replace(node, aliases=[]))
    for edge in edges:
        g.add_edge(edge)


def _edited(mem: MnemisMemory) -> None:
    with mem.edit(NS) as g:
        _dee_put_back(g)


def _streamed(mem: MnemisMemory) -> None:
    for m in LATER:
        mem.add_messages([m], namespace=NS)


def _compacted(mem: MnemisMemory) -> None:
    mem.compact(before=BASE[16]["timestamp"], namespace=NS)


def _uncompacted(mem: MnemisMemory) -> None:
    _compacted(mem)
    mem.uncompact(namespace=NS)


WRITES = [
    pytest.param(_streamed, id="ingest, a growing fragment placed again"),
    pytest.param(lambda mem: mem.apply(_dee_put_back, namespace=NS), id="apply"),
    pytest.param(lambda mem: mem.apply_journaled(_dee_put_back, namespace=NS), id="apply_journaled"),
    pytest.param(_edited, id="edit"),
    pytest.param(lambda mem: mem.forget([BASE[0]["id"], BASE[5]["id"]], namespace=NS), id="forget"),
    pytest.param(_compacted, id="compact"),
    pytest.param(_uncompacted, id="uncompact"),
    pytest.param(lambda mem: mem.rebalance(namespace=NS, max_span_days=0.01), id="rebalance, merge"),
]


class _Refused(Exception):
    pass


def _refuse(g: MemoryGraph) -> None:
    raise _Refused


def _read_again(backend: Backend, mem: MnemisMemory) -> MnemisMemory:
    """A memory answering from what the store holds: reopened, or in memory, the one memory after a
    failed change dropped its copy (the next call reads the store again)."""
    if backend.reopens:
        return backend.open()
    with pytest.raises(_Refused):
        mem.apply(_refuse, namespace=NS)
    return mem


def _answers(mem: MnemisMemory) -> dict:
    """What the graph's order decides: its nodes, edges and each node's links as listed, which entity
    each name finds, the nearest nodes and search."""

    def look(g: MemoryGraph) -> dict:
        return {
            "nodes": [n.id for n in g.nodes()],
            "edges": [edge_key(e) for e in g.edges()],
            "links": {
                n.id: [edge_key(e) for e in (*g.in_edges(n.id), *g.out_edges(n.id))] for n in g.nodes()
            },
        }

    return {
        **mem.read(look, namespace=NS),
        "names": dict(mem._state(NS).entities._by_key),
        # Nodes sharing nothing with the query (a cosine of exactly 0 on the toy embedder) tie in the
        # vector index's row order, which follows what was written when, not the graph's order, in
        # a memory that built them (a reopened one lays rows out by the graph): not compared.
        "nearest": [[(i, s) for i, s in mem.nearest_nodes(q, 10, namespace=NS) if s > 0] for q in QUERIES],
        "search": [
            [(h.node_id, h.score, h.text, h.via, h.source_ids) for h in mem.search(q, k=8, namespace=NS)]
            for q in QUERIES
        ],
    }


@pytest.mark.parametrize("write", WRITES)
def test_a_namespace_read_again_answers_as_the_memory_that_wrote_it(backend, write):
    mem = backend.open()
    mem.add_messages(BASE, namespace=NS)
    mem.apply(_people, namespace=NS)
    write(mem)
    written = _answers(mem)
    assert _answers(_read_again(backend, mem)) == written


def test_an_entity_put_back_keeps_the_name_it_took_once_reopened(tmp_path):
    """Put back, Dee comes after Dorothea, so the name both hold finds Dee, in the writer as in a
    memory opened afresh on the same file."""
    mem = MnemisMemory(tmp_path / "m.db", embedder=HashingEmbedder())
    mem.add_messages(BASE[:6], namespace=NS)
    mem.apply(_people, namespace=NS)
    assert mem._state(NS).entities.get("dee") == "e:dd"
    mem.apply_journaled(_dee_put_back, namespace=NS)
    assert mem._state(NS).entities.get("dee") == "e:dee"
    with MnemisMemory(tmp_path / "m.db", embedder=HashingEmbedder()) as reopened:
        assert reopened._state(NS).entities.get("dee") == "e:dee"
        assert [n.id for n in reopened.graph(NS).nodes()][-1] == "e:dee"
        assert reopened.graph(NS).to_data() == mem.graph(NS).to_data()
