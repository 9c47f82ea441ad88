"""The FalkorDB store against the SQLite one: the same calls, the same outcome.

The server comes from ``MNEMIS_FALKORDB_URL`` (``.ci/run`` starts one); without it these tests skip.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pytest
from falkordb_server import server_url

from mnemis_integrations import EmbedderMismatchError, MnemisMemory, StoreError
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import GraphChanges, MemoryGraph
from mnemis_integrations.core.model import Edge, EdgeKind, Message, Node, NodeKind
from mnemis_integrations.core.storage.base import Delta
from mnemis_integrations.errors import MnemisError

pytestmark = [pytest.mark.falkordb, pytest.mark.enable_socket]

falkordb = pytest.importorskip("falkordb", reason="the falkordb client is not installed")


@pytest.fixture
def url():
    from mnemis_integrations.core.storage.falkordb import parse_url

    address = server_url()
    db = falkordb.FalkorDB(**parse_url(address))

    def clear() -> None:
        for name in db.list_graphs():
            if name.startswith("mnemis"):
                db.select_graph(name).delete()

    clear()
    yield address
    clear()
    db.connection.close()


def _raw(url):
    from mnemis_integrations.core.storage.falkordb import parse_url

    return falkordb.FalkorDB(**parse_url(url))


def test_a_format_1_graph_upgraded_on_open_never_shows_an_older_version(url):
    """Format 1 counted each namespace's version on its own (no store-wide sequence): a namespace
    upgraded at version 7 must get a version above 7 at its next write, as SQLite's format 1
    conversion gives (it starts ``write_seq`` at the highest version)."""
    from mnemis_integrations.core.storage.falkordb import FORMAT_VERSION, FalkorDBStore

    g = MemoryGraph("u1")
    g.add_node(Node("f0", NodeKind.FRAGMENT, "F0", "u1", summary="kept", source_ids=["m0"]))
    g.add_node(Node("e", NodeKind.ENTITY, "Acme", "u1"))
    g.add_edge(Edge("f0", "e", EdgeKind.MENTIONS))
    db = _raw(url)
    db.connection.delete("mnemis__write_seq")  # format 1 had no store-wide sequence
    db.select_graph("mnemis__meta").query("MERGE (m:Meta {key: 'format_version'}) SET m.value = '1'")
    old = db.select_graph("mnemis:u1")
    old.query(
        "UNWIND $nodes AS nd CREATE (:Node {id: nd.id, kind: nd.kind, status: nd.status, data: nd.data})",
        {
            "nodes": [
                {"id": n.id, "kind": n.kind.value, "status": n.status.value, "data": json.dumps(n.to_dict())}
                for n in g.nodes()
            ]
        },
    )
    old.query(
        "UNWIND $edges AS ed MATCH (a:Node {id: ed.src}), (b:Node {id: ed.dst}) "
        "CREATE (a)-[:EDGE {kind: ed.kind, label: ed.label, data: ed.data}]->(b)",
        {
            "edges": [
                {
                    "src": e.src,
                    "dst": e.dst,
                    "kind": e.kind.value,
                    "label": e.label,
                    "data": json.dumps(e.to_dict()),
                }
                for e in g.edges()
            ]
        },
    )
    old.query("CREATE (:Meta {key: 'version', value: 7})")

    store = FalkorDBStore(url)
    assert store.get_meta("format_version") == FORMAT_VERSION
    assert store.version("u1") == 7
    assert MemoryGraph.from_data(store.load("u1", 4).graph).to_data() == g.to_data()
    v = store.write("u1", Delta(GraphChanges(nodes=[g.get("f0")])), 7)
    assert v > 7 and store.version("u1") == v
    store.close()


def test_a_write_the_server_refuses_on_a_new_namespace_leaves_no_namespace_behind(url):
    """A failed write leaves the store as it was: on SQLite the transaction rolls back; on FalkorDB
    the graph the write made for itself (its indexes) must not stay listed as a namespace."""
    from mnemis_integrations.core.storage.falkordb import FalkorDBStore

    store = FalkorDBStore(url)
    # a NUL cannot travel in FalkorDB's parameter header: the server refuses the query
    bad = Node("pg-entity:Ac\x00me", NodeKind.ENTITY, "Ac\x00me", "fresh")
    with pytest.raises(StoreError):
        store.write("fresh", Delta(GraphChanges(nodes=[bad])), 0)
    assert store.namespaces() == [] and store.version("fresh") == 0
    store.close()


def test_an_entity_named_with_a_nul_is_refused_alike_by_every_backend(url, tmp_path):
    """FalkorDB cuts a query at a NUL (the server's "Invalid input at end of input"), SQLite would
    keep it: the graph store refuses a name, id or label holding one before any backend sees it."""
    pytest.importorskip("llama_index.core")
    from llama_index.core.graph_stores.types import EntityNode, Relation

    from mnemis_integrations.llama_index.graph_store import MnemisPropertyGraphStore

    for kw in ({"path": tmp_path / "m.db"}, {"backend": url}, {}):
        with MnemisMemory(embedder=HashingEmbedder(), **kw) as mem:
            pg = MnemisPropertyGraphStore(mem, namespace="u1")
            with pytest.raises(ValueError, match="NUL"):
                pg.upsert_nodes([EntityNode(name="Ac\x00me"), EntityNode(name="Bob")])
            with pytest.raises(ValueError, match="NUL"):
                pg.upsert_relations([Relation(label="works\x00for", source_id="Bob", target_id="Acme")])
            assert pg.get() == [] and mem.namespaces() == []  # nothing written


@pytest.mark.parametrize(
    "damage",
    [
        "MATCH (n:Node) SET n.data = substring(n.data, 1)",
        "MATCH (m:Message) SET m.vec = 'abc'",
        "MATCH (m:Message) SET m.timestamp = 'March'",
    ],
)
def test_a_damaged_value_in_a_falkordb_graph_raises_store_error(url, damage):
    """As a damaged SQLite row does (test_documented_promises): a value that cannot be read back
    is a StoreError naming the namespace, not a JSONDecodeError, binascii.Error or ValueError."""
    with MnemisMemory(backend=url, embedder=HashingEmbedder()) as mem:
        mem.add_messages(
            [{"id": "m1", "speaker": "ann", "text": "The refund is late.", "timestamp": "2025-03-01T10:00"}],
            namespace="u1",
        )
    _raw(url).select_graph("mnemis:u1").query(damage)
    with MnemisMemory(backend=url, embedder=HashingEmbedder()) as mem, pytest.raises(StoreError):
        mem.search("refund", namespace="u1")


def _raw(url):
    from mnemis_integrations.core.storage.falkordb import parse_url

    return falkordb.FalkorDB(**parse_url(url))


def _indexed_labels(url, namespace: str) -> list[str]:
    db = _raw(url)
    rows = db.select_graph(f"mnemis:{namespace}").ro_query("CALL db.indexes() YIELD label RETURN label")
    db.connection.close()
    return sorted(r[0] for r in rows.result_set)


@pytest.mark.parametrize("removal", ["delete_namespace", "forget"])
def test_a_namespace_made_again_after_another_writer_removed_it_keeps_its_indexes(url, removal):
    """Every write looks nodes, messages and STATE loops up by id through the graph's indexes, made
    when a store object first writes a namespace. Another writer that deletes (or forgets) the
    namespace takes them with the graph; this object, which remembers having made them, must make
    them again when it creates the namespace anew, or each of its later writes scans the graph."""
    a = MnemisMemory(backend=url, embedder=HashingEmbedder())
    b = MnemisMemory(backend=url, embedder=HashingEmbedder())
    a.add_messages(
        [{"id": "m1", "speaker": "ann", "text": "The refund for order 42 is late."}], namespace="u1"
    )
    assert _indexed_labels(url, "u1") == ["Message", "Node", "STATE"]
    if removal == "forget":
        b.forget(namespace="u1")
    else:
        b.delete_namespace("u1")
    a.add_messages([{"id": "m2", "speaker": "bob", "text": "Acme's gateway returned 504."}], namespace="u1")
    assert [m.id for m in a.messages("u1")] == ["m2"]
    assert _indexed_labels(url, "u1") == ["Message", "Node", "STATE"]
    a.close()
    b.close()


def test_two_writers_naming_different_embedders_on_a_new_store_cannot_both_write(url, monkeypatch):
    """SQLite checks the stored embedder inside the write's transaction and the in-memory store
    under its lock, so of two first writers naming different embedders one is refused
    (EmbedderMismatchError). FalkorDB read the stored id, then set it, then wrote, in three steps:
    a writer getting in between the first's look at the stored id and its setting wrote vectors of
    another embedder (another width) into the same store, and the id left stored named only one."""
    from mnemis_integrations.core.storage import falkordb as module

    first, other = module.FalkorDBStore(url), module.FalkorDBStore(url)
    msg = Message("m1", "ann", "The refund is late.", datetime(2025, 3, 1, tzinfo=timezone.utc))
    real_check, refused = module.refuse_another_embedder, []

    def check_after_the_other_writer(stored, meta):
        module.refuse_another_embedder = real_check  # the other writer gets in here, once
        try:
            _first_write(other, "b", msg, 8)
        except EmbedderMismatchError:
            refused.append("b")
        real_check(stored, meta)

    monkeypatch.setattr(module, "refuse_another_embedder", check_after_the_other_writer)
    try:
        _first_write(first, "a", msg, 4)
    except EmbedderMismatchError:
        refused.append("a")
    assert len(refused) == 1, "both writers wrote vectors of their own embedder"
    (written,) = {"a", "b"} - set(refused)
    assert first.namespaces() == [written] and first.get_meta("embedder_id") == f"embedder-{written}"
    first.close()
    other.close()


@pytest.mark.parametrize("bad", ["nul node id", "nul relation label", "lone surrogate node id"])
def test_a_hand_edit_holding_an_unstorable_name_gets_the_same_outcome_on_every_backend(url, tmp_path, bad):
    """Before: the same ``edit()`` was stored by the in-memory and SQLite stores and refused by
    FalkorDB (which cuts a query at a NUL: "Invalid input at end of input"); a lone surrogate was
    stored in memory and a bare UnicodeEncodeError on both persistent stores. The one write path
    now refuses such a name before any backend sees it: every backend gives one outcome, one typed
    error."""
    outcomes = {}
    for name, kw in (("memory", {}), ("sqlite", {"path": tmp_path / "m.db"}), ("falkordb", {"backend": url})):
        with MnemisMemory(embedder=HashingEmbedder(), **kw) as mem:
            mem.add_messages([{"id": "m1", "speaker": "ann", "text": "Bob works for Acme."}], namespace="e")
            try:
                with mem.edit("e") as g:
                    if bad == "nul relation label":
                        g.add_node(Node("x", NodeKind.ENTITY, "Bob", "e"))
                        g.add_node(Node("y", NodeKind.ENTITY, "Acme", "e"))
                        g.add_edge(Edge("x", "y", EdgeKind.RELATION, label="works\x00for"))
                    else:
                        g.add_node(
                            Node("Ac\x00me" if "nul" in bad else "Ac\ud800me", NodeKind.ENTITY, "Acme", "e")
                        )
                outcomes[name] = "stored"
            except Exception as e:  # noqa: BLE001 - the outcome is what is compared
                outcomes[name] = (
                    type(e).__name__ if isinstance(e, MnemisError) else f"bare {type(e).__name__}"
                )
    assert outcomes["falkordb"] == outcomes["sqlite"] == outcomes["memory"], outcomes
    assert not outcomes["falkordb"].startswith("bare"), outcomes


def _first_write(store, namespace: str, msg, width: int) -> None:
    """The store's first write: one message, its vector ``width`` wide, by the embedder named after
    the namespace."""
    vectors = np.ones((1, width), np.float32)
    meta = {"embedder_id": f"embedder-{namespace}", "dim": str(width)}
    store.write(namespace, Delta(new_messages=[msg], new_vectors=vectors), 0, meta)
