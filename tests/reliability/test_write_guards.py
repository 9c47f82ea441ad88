"""Guards on the write path: another writer, a failed write, a store that cannot open, another
embedder and input of the wrong type lose nothing and mix nothing."""

from __future__ import annotations

import pytest
from _backends import open_memory

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder

NS = "audit"


def _msgs(ids, day=1):
    return [
        {
            "id": i,
            "speaker": "Alice",
            "timestamp": f"2025-01-{day + n:02d}T09:00:00",
            "text": f"the garden budget for tomato beds, note {i}",
        }
        for n, i in enumerate(ids)
    ]


def test_forgetting_every_id_one_copy_holds_keeps_a_message_another_writer_just_added(db):
    """forget(ids) covering every message of its copy removes the namespace whole, and only at the
    version it read: a message another writer acknowledged in between stays."""
    a, b = open_memory(db), open_memory(db)
    a.add_messages(_msgs(["p0", "p1"]), namespace=NS)
    store = a._store
    real_delete, calls = store.delete, []

    def delete_after_the_other_writer(namespace, *args, **kwargs):
        if not calls:  # b's batch lands between a's read and a's delete
            b.add_messages(_msgs(["q0"], day=10), namespace=NS)
        calls.append(namespace)
        return real_delete(namespace, *args, **kwargs)

    store.delete = delete_after_the_other_writer
    a.forget(["p0", "p1"], namespace=NS)
    store.delete = real_delete
    with open_memory(db) as fresh:
        assert [m.id for m in fresh.messages(NS)] == ["q0"], "an acknowledged message was lost"
    a.close()
    b.close()


def test_a_write_that_fails_midway_leaves_the_in_memory_store_as_it_was():
    """A write that fails on a later node (a property that is not JSON) leaves neither the version
    nor any earlier part of the delta behind."""
    from datetime import datetime

    from mnemis_integrations.core.model import NodeKind

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(_msgs(["p0", "p1", "p2"]), namespace=NS)
    before_version = mem._store.version(NS)
    before = {n.id: n.to_dict() for n in mem.graph(NS).nodes()}
    concept = mem.graph(NS).nodes(NodeKind.CONCEPT)[0].id
    fragment = mem.graph(NS).nodes(NodeKind.FRAGMENT)[0].id
    with pytest.raises(TypeError):  # json: datetime is not JSON serialisable
        with mem.edit(NS) as g:
            g.get(concept).label = "Renamed"  # journalled first: written first
            g.get(fragment).properties["when"] = datetime(2025, 1, 1)  # not JSON
            g.touch(fragment)
    assert mem._store.version(NS) == before_version, "the version moved for a refused write"
    after = {n.id: n.to_dict() for n in mem.graph(NS).nodes()}
    assert after == before, "half of the refused write was applied"


@pytest.mark.parametrize("content", ["newer format", "not a database"])
def test_a_store_that_cannot_be_opened_leaves_no_connection_open(tmp_path, monkeypatch, content):
    """A file that cannot be opened as a store (a newer format, no database at all) raises
    StoreError and leaves no connection holding the file."""
    import sqlite3

    from mnemis_integrations import StoreError
    from mnemis_integrations.core.storage import sqlite as sqlite_store

    path = tmp_path / "m.db"
    if content == "newer format":
        with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
            mem._store.set_meta("format_version", "99")
    else:
        path.write_bytes(b"this is not a database file at all, just text" * 100)
    opened = []
    real_connect = sqlite3.connect

    def spy(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        opened.append(conn)
        return conn

    monkeypatch.setattr(sqlite_store.sqlite3, "connect", spy)
    with pytest.raises(StoreError):
        MnemisMemory(path, embedder=HashingEmbedder())
    assert opened
    for conn in opened:
        with pytest.raises(sqlite3.ProgrammingError):  # closed
            conn.execute("SELECT 1")


class _OtherEmbedder(HashingEmbedder):
    """Same dimension as HashingEmbedder(), another embedder (its vectors mean something else)."""

    def __init__(self):
        super().__init__()
        self.id = "other-256"


def test_a_second_object_with_another_embedder_cannot_write_into_the_store(tmp_path):
    """An object opened before the store's first write, with another embedder, is refused at its
    own first write (not only at opening): its vectors never sit beside the first one's."""
    from mnemis_integrations import EmbedderMismatchError

    db = str(tmp_path / "m.db")
    a = MnemisMemory(db, embedder=HashingEmbedder())
    b = MnemisMemory(db, embedder=_OtherEmbedder())  # nothing written yet: not refused
    a.add_messages(_msgs(["p0", "p1"]), namespace="na")
    with pytest.raises(EmbedderMismatchError):
        b.add_messages(_msgs(["q0"]), namespace="nb")
    a.close()
    b.close()
    with MnemisMemory(db, embedder=HashingEmbedder()) as again:
        assert [m.id for m in again.messages("na")] == ["p0", "p1"]


def test_a_second_object_with_another_dimension_gets_embedder_mismatch_error(tmp_path):
    """The same with another dimension: a typed EmbedderMismatchError, not the vector index's error."""
    from mnemis_integrations import EmbedderMismatchError

    db = str(tmp_path / "m.db")
    a = MnemisMemory(db, embedder=HashingEmbedder(64))
    b = MnemisMemory(db, embedder=HashingEmbedder(256))
    a.add_messages(_msgs(["p0"]), namespace="na")
    with pytest.raises(EmbedderMismatchError):
        b.add_messages(_msgs(["q0"]), namespace="nb")
    a.close()
    b.close()


@pytest.mark.parametrize("batch", [None, 5, 3.5])
def test_a_batch_that_is_no_iterable_gets_invalid_message_error(batch):
    """A batch that is no list of messages is an InvalidMessageError, as forget's ids are typed."""
    from mnemis_integrations import InvalidMessageError

    mem = MnemisMemory(embedder=HashingEmbedder())
    with pytest.raises(InvalidMessageError):
        mem.add_messages(batch, namespace=NS)


@pytest.mark.parametrize("vector", ["abc", [1.0, "x"], [[1.0], None]])
def test_a_query_vector_that_is_not_numbers_gets_invalid_query_error(vector):
    """A query vector that is not numbers is an InvalidQueryError, not numpy's ValueError."""
    from mnemis_integrations import InvalidQueryError

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(_msgs(["p0", "p1"]), namespace=NS)
    with pytest.raises(InvalidQueryError):
        mem.nearest_nodes(vector=vector, namespace=NS)


def test_a_write_landing_after_the_version_read_aborts_the_removal(db):
    """FalkorDB reads the version and removes the graph in two round trips: the graph's key is
    watched between them, so a batch landing in that gap makes the removal fail (and the forget
    run again on the fresh copy) instead of being removed with it."""
    if not db.startswith("falkordb://"):
        pytest.skip("SQLite checks and removes in one transaction")
    a, b = open_memory(db), open_memory(db)
    a.add_messages(_msgs(["p0", "p1"]), namespace=NS)
    store = a._store
    real_version, real_delete, landed, removing = store.version, store.delete, [], []

    def version_then_another_write(namespace):
        v = real_version(namespace)
        if removing and not landed:  # the removal's own version read: the other batch lands now
            landed.append(True)
            b.add_messages(_msgs(["q0"], day=10), namespace=NS)
        return v

    def delete(namespace, *args, **kwargs):
        removing.append(namespace)
        try:
            return real_delete(namespace, *args, **kwargs)
        finally:
            removing.clear()

    store.version, store.delete = version_then_another_write, delete
    try:
        a.forget(["p0", "p1"], namespace=NS)
    finally:
        store.version, store.delete = real_version, real_delete
    assert landed
    with open_memory(db) as fresh:
        assert [m.id for m in fresh.messages(NS)] == ["q0"], "an acknowledged message was lost"
    a.close()
    b.close()


# Names no store can key a node or edge by: SQLite and the in-memory store kept a NUL (FalkorDB cuts
# its query at one), and a lone surrogate was stored in memory but a bare UnicodeEncodeError on SQLite.
UNSTORABLE = [
    pytest.param("node id", "Ac\x00me", id="nul-node-id"),
    pytest.param("node id", "Ac\ud800me", id="lone-surrogate-node-id"),
    pytest.param("relation label", "works\x00for", id="nul-relation-label"),
    pytest.param("relation label", "works\ud800for", id="lone-surrogate-relation-label"),
]


def _add_named(g, field: str, name: str) -> None:
    from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind

    if field == "node id":
        g.add_node(Node(name, NodeKind.ENTITY, "Acme", NS))
        return
    g.add_node(Node("bob", NodeKind.ENTITY, "Bob", NS))
    g.add_node(Node("acme", NodeKind.ENTITY, "Acme", NS))
    g.add_edge(Edge("bob", "acme", EdgeKind.RELATION, label=name))


def _by_edit(mem: MnemisMemory, change) -> None:
    with mem.edit(NS) as g:
        change(g)


@pytest.mark.parametrize("write", ["edit", "apply", "apply_journaled"])
@pytest.mark.parametrize(("field", "name"), UNSTORABLE)
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_hand_write_of_an_unstorable_name_gets_invalid_name_error_and_writes_nothing(
    tmp_path, backend, field, name, write
):
    """Before: ``edit()``, ``apply()`` and ``apply_journaled()`` handed such a name to the store,
    which kept it or raised a bare UnicodeEncodeError. Now every hand write is refused with
    InvalidNameError naming the field, and the store is as it was."""
    from mnemis_integrations import InvalidNameError

    path = None if backend == "memory" else tmp_path / "m.db"
    mem = MnemisMemory(path, embedder=HashingEmbedder())
    mem.add_messages(_msgs(["p0", "p1"]), namespace=NS)
    version, before = mem._store.version(NS), mem.graph(NS).to_data()
    hand_write = {
        "edit": _by_edit,
        "apply": lambda m, c: m.apply(c, NS),
        "apply_journaled": lambda m, c: m.apply_journaled(c, NS),
    }[write]
    with pytest.raises(InvalidNameError, match=f"^{field} ") as err:
        hand_write(mem, lambda g: _add_named(g, field, name))
    assert (err.value.field, err.value.value) == (field, name)
    assert mem._store.version(NS) == version, "the version moved for a refused write"
    assert mem.graph(NS).to_data() == before, "part of the refused write was kept"
    if path is not None:
        with MnemisMemory(path, embedder=HashingEmbedder()) as fresh:
            assert fresh.graph(NS).to_data() == before
    mem.close()


def test_the_name_check_reads_only_the_names_a_write_makes(monkeypatch):
    """The check costs what the write changes: one node and one edge added by hand to a namespace
    of many nodes are the only names read."""
    from mnemis_integrations.core import engine
    from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(
        [
            {"id": f"p{i}", "speaker": "Alice", "text": f"Call Vendor{i} about the Project{i} invoice"}
            for i in range(30)
        ],
        namespace=NS,
    )
    held = mem.graph(NS)
    assert len(held) > 60
    some = held.nodes(NodeKind.ENTITY)[0].id
    read = []

    def counted(name):
        read.append(name)
        return real(name)

    real = engine.name_characters_problem
    monkeypatch.setattr(engine, "name_characters_problem", counted)
    with mem.edit(NS) as g:
        g.add_node(Node("hand-made", NodeKind.ENTITY, "Hand made", NS))
        g.add_edge(Edge("hand-made", some, EdgeKind.RELATION, label="knows"))
        g.get(some).summary = "changed in place"
    assert read == ["hand-made", "knows"]


def test_a_node_stored_before_the_name_check_can_still_be_written_again(tmp_path):
    """A store written before names were checked may hold a node whose id has a NUL: writes that
    update that node (a hand edit here; new sources or a forget alike) are not refused for it."""
    from mnemis_integrations.core.graph import GraphChanges
    from mnemis_integrations.core.model import Node, NodeKind
    from mnemis_integrations.core.storage.base import Delta

    path = tmp_path / "m.db"
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        mem.add_messages(_msgs(["p0"]), namespace=NS)
        old = Node("Ac\x00me", NodeKind.ENTITY, "Acme", NS)
        mem._store.write(NS, Delta(GraphChanges(nodes=[old])), mem._store.version(NS))
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        with mem.edit(NS) as g:
            g.get("Ac\x00me").summary = "still writable"
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        assert mem.graph(NS).get("Ac\x00me").summary == "still writable"
