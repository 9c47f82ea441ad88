"""One storage contract, one test body per backend: in memory, SQLite, and FalkorDB (when the
server that .ci/run starts is there: MNEMIS_FALKORDB_URL)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import datetime, timezone

import numpy as np
import pytest
from _memories import ALL_BACKENDS
from falkordb_server import server_url

from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.model import Edge, EdgeKind, Message, Node, NodeKind
from mnemis_integrations.core.storage.base import ConcurrentWriteError, Delta
from mnemis_integrations.core.storage.memory import InMemoryStore
from mnemis_integrations.core.storage.sqlite import SQLiteStore

DIM = 4


@pytest.fixture(params=ALL_BACKENDS)
def store(request, tmp_path):
    if request.param == "memory":
        s = InMemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "m.db")
    else:
        url = server_url()
        from mnemis_integrations.core.storage.falkordb import FalkorDBStore

        s = FalkorDBStore(url)
        for ns in s.namespaces():
            s.delete(ns)
    yield s
    for ns in s.namespaces():
        s.delete(ns)
    s.close()


def _msg(i: int, text: str) -> Message:
    return Message(f"m{i}", "ann", text, datetime(2025, 3, 1 + i, tzinfo=timezone.utc), seq=i)


def _vecs(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)


def _fragment(g: MemoryGraph, i: int, summary: str) -> Node:
    node = Node(f"f{i}", NodeKind.FRAGMENT, f"F{i}", g.namespace, summary=summary, source_ids=[f"m{i}"])
    g.add_node(node)
    return node


def _write(store, g: MemoryGraph, version: int, **delta) -> int:
    return store.write(g.namespace, Delta(g.take_changes(), **delta), version)


def _three_refunds() -> MemoryGraph:
    """A subtopic and three fragments under it, each holding one message."""
    g = MemoryGraph("u1")
    g.add_node(Node("s", NodeKind.SUBTOPIC, "Refunds", "u1"))
    for i in range(3):
        _fragment(g, i, f"refund {i}")
        g.add_edge(Edge(f"f{i}", "s", EdgeKind.BELONGS_TO))
    return g


def test_deltas_applied_one_after_another_load_back_as_the_graph_that_made_them(store):
    g = _three_refunds()
    g.add_edge(Edge("f2", "f1", EdgeKind.UPDATES))
    msgs = [_msg(i, f"refund {i}") for i in range(3)]
    v1 = _write(store, g, 0, new_messages=msgs, new_vectors=_vecs(3))
    # second write: a change in place, a removed node (with its edges), a removed edge, a removed message
    g.get("f0").summary = "refund 0, settled"
    g.remove_node("f1")
    g.remove_edge("f2", "s", EdgeKind.BELONGS_TO)
    g.add_node(Node("e", NodeKind.ENTITY, "Acme", "u1"))
    g.add_edge(Edge("f2", "e", EdgeKind.MENTIONS))
    v2 = _write(store, g, v1, removed_messages=["m1"])
    loaded = store.load("u1", DIM)
    assert v2 > v1 and loaded.version == v2 == store.version("u1")
    assert MemoryGraph.from_data(loaded.graph).to_data() == g.to_data()
    assert [m.id for m in loaded.messages] == ["m0", "m2"]
    assert sorted(loaded.vector_keys) == ["m0", "m2"] and loaded.vectors.shape == (2, DIM)
    by_id = dict(zip(loaded.vector_keys, loaded.vectors, strict=True))
    np.testing.assert_allclose(by_id["m2"], _vecs(3)[2], rtol=1e-6)


def test_a_node_removed_and_put_back_in_one_write_loads_back_where_the_graph_put_it(store):
    """Put back, a node comes last in the graph's order, after a node made before it in the same
    change, and its edges after the others: the graph loaded back lists nodes, edges and each
    node's links in that order (an entity's name, ties and ``nodes()`` follow it)."""
    g = _three_refunds()
    g.add_edge(Edge("f2", "f0", EdgeKind.UPDATES))
    v1 = _write(store, g, 0, new_messages=[_msg(i, f"refund {i}") for i in range(3)], new_vectors=_vecs(3))
    f0, links = g.get("f0"), [*g.in_edges("f0"), *g.out_edges("f0")]
    g.remove_node("f0")
    g.add_node(Node("e", NodeKind.ENTITY, "Acme", "u1"))
    g.add_node(replace(f0, summary="refund 0, settled"))
    for edge in links:
        g.add_edge(edge)
    _write(store, g, v1)
    loaded = MemoryGraph.from_data(store.load("u1", DIM).graph)
    assert [n.id for n in loaded.nodes()] == [n.id for n in g.nodes()] == ["s", "f1", "f2", "e", "f0"]
    assert loaded.to_data() == g.to_data()
    for node_id in ("s", "f0", "f2"):
        assert loaded.in_edges(node_id) == g.in_edges(node_id)
        assert loaded.out_edges(node_id) == g.out_edges(node_id)


def test_a_write_from_a_stale_version_is_refused_and_writes_nothing(store):
    g = MemoryGraph("cas")
    _fragment(g, 0, "first")
    v1 = _write(store, g, 0, new_messages=[_msg(0, "first")], new_vectors=_vecs(1))
    _fragment(g, 1, "stale")
    with pytest.raises(ConcurrentWriteError):
        _write(store, g, 0, new_messages=[_msg(1, "stale")], new_vectors=_vecs(1))
    kept = store.load("cas", DIM)
    assert store.version("cas") == v1 == kept.version
    assert [m.id for m in kept.messages] == ["m0"] and [n["id"] for n in kept.graph["nodes"]] == ["f0"]


def test_versions_never_go_back_after_delete_and_re_creation(store):
    g = MemoryGraph("u1")
    _fragment(g, 0, "secret")
    v1 = _write(store, g, 0, new_messages=[_msg(0, "secret")], new_vectors=_vecs(1))
    store.delete("u1")
    assert store.version("u1") == 0 and store.load("u1", DIM) is None and "u1" not in store.namespaces()
    stale = MemoryGraph("u1")
    _fragment(stale, 1, "from a stale copy")
    with pytest.raises(ConcurrentWriteError):  # a copy read before the delete cannot write it back
        _write(store, stale, v1, new_messages=[_msg(1, "x")], new_vectors=_vecs(1))
    fresh = MemoryGraph("u1")
    _fragment(fresh, 2, "new life")
    v2 = _write(store, fresh, 0, new_messages=[_msg(2, "new life")], new_vectors=_vecs(1))
    assert v2 > v1  # a re-created namespace never shows a version an old copy has seen
    with pytest.raises(ConcurrentWriteError):
        _write(store, stale, v1)


def test_namespaces_are_listed_and_kept_apart(store):
    for ns in ("a", "b"):
        g = MemoryGraph(ns)
        _fragment(g, 0, ns)
        _write(store, g, 0, new_messages=[_msg(0, ns)], new_vectors=_vecs(1))
    assert store.namespaces() == ["a", "b"]
    assert store.load("a", DIM).messages[0].text == "a" and store.load("b", DIM).messages[0].text == "b"
    store.delete("a")
    assert store.namespaces() == ["b"]


def test_message_metadata_is_stored_with_the_message_and_removed_with_it(store):
    """Issue #14: each backend keeps a message's metadata, types and all, and a removed message
    takes its metadata with it."""
    g = MemoryGraph("u1")
    for i in range(3):
        _fragment(g, i, f"note {i}")
    tagged = {"channel": "e'mail\"}", "priority": 2, "score": 0.25, "vip": False, "zoë": "ünïcode"}
    msgs = [
        replace(_msg(0, "note 0"), metadata=tagged),
        _msg(1, "note 1"),
        replace(_msg(2, "note 2"), metadata={"n": 2**62}),
    ]
    v1 = _write(store, g, 0, new_messages=msgs, new_vectors=_vecs(3))
    loaded = {m.id: m.metadata for m in store.load("u1", DIM).messages}
    assert loaded == {"m0": tagged, "m1": {}, "m2": {"n": 2**62}}
    assert [type(v) for v in loaded["m0"].values()] == [str, int, float, bool, str]
    _write(store, g, v1, removed_messages=["m0"])
    assert {m.id: m.metadata for m in store.load("u1", DIM).messages} == {"m1": {}, "m2": {"n": 2**62}}


def test_a_long_messages_passage_vectors_are_kept_with_it_and_removed_with_it(store):
    """A message's window vectors (core.passages) load back beside its own vector, the others have
    none, the dimension still reads right, and a removed message takes them with it."""
    g = MemoryGraph("u1")
    for i in range(3):
        _fragment(g, i, f"note {i}")
    own, windows = _vecs(3), _vecs(4, seed=1)
    msgs = [_msg(i, f"note {i}") for i in range(3)]
    v1 = _write(store, g, 0, new_messages=msgs, new_vectors=own, new_passages={"m1": windows})
    loaded = store.load("u1", DIM)
    assert np.array_equal(loaded.vectors[loaded.vector_keys.index("m1")], own[1])
    assert list(loaded.passages) == ["m1"] and np.array_equal(loaded.passages["m1"], windows)
    assert store.stored_dim() == DIM
    _write(store, g, v1, removed_messages=["m1"])
    again = store.load("u1", DIM)
    assert again.passages == {} and sorted(again.vector_keys) == ["m0", "m2"]


def test_a_format_2_sqlite_file_opens_and_is_marked_format_3_which_older_readers_refuse(tmp_path):
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    v = _write(store, MemoryGraph("u1"), 0, new_messages=[_msg(0, "kept")], new_vectors=_vecs(1))
    store.set_meta("format_version", "2")
    store.close()
    reopened = SQLiteStore(path)
    assert reopened.get_meta("format_version") == "3" and reopened.load("u1", DIM).version == v
    reopened.close()


def test_a_format_1_sqlite_file_is_converted_on_open(tmp_path):
    path = tmp_path / "old.db"
    g = MemoryGraph("u1")
    _fragment(g, 0, "kept")
    g.add_node(Node("e", NodeKind.ENTITY, "Acme", "u1"))
    g.add_edge(Edge("f0", "e", EdgeKind.MENTIONS))
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE messages (namespace TEXT, id TEXT, seq INTEGER, speaker TEXT, text TEXT,"
        " timestamp TEXT, PRIMARY KEY (namespace, id));"
        "CREATE TABLE vectors (namespace TEXT, id TEXT, vec BLOB, PRIMARY KEY (namespace, id));"
        "CREATE TABLE graphs (namespace TEXT PRIMARY KEY, data TEXT NOT NULL);"
        "CREATE TABLE versions (namespace TEXT PRIMARY KEY, version INTEGER NOT NULL);"
    )
    conn.execute("INSERT INTO meta VALUES ('format_version', '1')")
    conn.execute("INSERT INTO messages VALUES ('u1', 'm0', 0, 'ann', 'kept', NULL)")
    conn.execute("INSERT INTO vectors VALUES ('u1', 'm0', ?)", (_vecs(1).tobytes(),))
    conn.execute("INSERT INTO graphs VALUES ('u1', ?)", (json.dumps(g.to_data()),))
    conn.execute("INSERT INTO versions VALUES ('u1', 7)")
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    loaded = store.load("u1", DIM)
    assert loaded.version == 7 and MemoryGraph.from_data(loaded.graph).to_data() == g.to_data()
    assert store.write("u1", Delta(), 7) > 7
    store.close()
