"""FalkorDB store: one FalkorDB graph per namespace, written and read with parameterised Cypher only.

Layout of the graph ``mnemis:<namespace>``:

- ``(:Message {id, seq, speaker, text, timestamp, vec})``: raw messages; ``vec`` is the float32
  vector, base64 (reading FalkorDB ``vecf32`` values back costs ~1 ms per vector in the client,
  so the dense index is a faiss sidecar rebuilt in process from these bytes, never re-embedded);
- ``(:Node {id, kind, status, data})`` and ``(:Node)-[:EDGE {kind, label, data}]->(:Node)``: the
  memory graph as a real graph (traversable in Cypher), each element also holding its JSON;
- ``(:Meta {key: "version", value})``: bumped by every write, so other processes can tell
  that their copy is stale (:meth:`FalkorDBStore.version`).

Store-wide metadata (format version, embedder id, dimension) lives in the graph ``mnemis__meta``.
Every write of a namespace is one Cypher query, which FalkorDB runs atomically. Query text is
constant; every value travels as a query parameter.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import urlparse

import numpy as np

from ...errors import StoreError
from ..model import Message
from .base import ConcurrentWriteError, StoredNamespace

__all__ = ["FORMAT_VERSION", "FalkorDBStore"]

FORMAT_VERSION = "1"
_PREFIX = "mnemis:"
_META_GRAPH = "mnemis__meta"

_Q_META_GET = "MATCH (m:Meta {key: $key}) RETURN m.value"
_Q_META_SET = "MERGE (m:Meta {key: $key}) SET m.value = $value"
_Q_VERSION = "MATCH (v:Meta {key: 'version'}) RETURN v.value"
_Q_DIM = "MATCH (m:Message) RETURN m.vec LIMIT 1"
_Q_NODES = "MATCH (n:Node) RETURN n.data"
_Q_EDGES = "MATCH (:Node)-[e:EDGE]->(:Node) RETURN e.data"
_Q_MESSAGES = "MATCH (m:Message) RETURN m.id, m.speaker, m.text, m.timestamp, m.seq, m.vec ORDER BY m.seq"
# One query per write: FalkorDB executes a query atomically. ``WITH count(*)`` after each
# UNWIND keeps exactly one row flowing even when the list is empty. The write happens only if
# the namespace is still at ``$expected`` (null: unconditionally); that test, ``ok``, is read
# again after each aggregation (nothing changes the version before the last clause), so a
# refused write touches nothing and returns -1: a compare-and-swap inside one atomic query.
_OK = "OPTIONAL MATCH (cur:Meta {key: 'version'}) WITH ($expected IS NULL OR coalesce(cur.value, 0) = $expected) AS ok"
_GRAPH_PART = f"""
{_OK}
OPTIONAL MATCH (old:Node) WHERE ok DETACH DELETE old
WITH count(*) AS _d
{_OK}
UNWIND CASE WHEN ok THEN $nodes ELSE [] END AS nd
CREATE (:Node {{id: nd.id, kind: nd.kind, status: nd.status, data: nd.data}})
WITH count(*) AS _n
{_OK}
UNWIND CASE WHEN ok THEN $edges ELSE [] END AS ed
MATCH (a:Node {{id: ed.src}}), (b:Node {{id: ed.dst}})
CREATE (a)-[:EDGE {{kind: ed.kind, label: ed.label, data: ed.data}}]->(b)
WITH count(*) AS _e
{_OK}
UNWIND CASE WHEN ok THEN $msgs ELSE [] END AS m
CREATE (:Message {{id: m.id, seq: m.seq, speaker: m.speaker, text: m.text, timestamp: m.timestamp, vec: m.vec}})
WITH count(*) AS _m
{_OK}
MERGE (v:Meta {{key: 'version'}})
SET v.value = CASE WHEN ok THEN coalesce(v.value, 0) + 1 ELSE v.value END
RETURN CASE WHEN ok THEN v.value ELSE -1 END
"""
_Q_SAVE = _GRAPH_PART
# The relation path's bounded traversal in Cypher: distance from each seed entity to every
# hierarchy node within ``h`` hops over the allowed edge kinds, both directions. A hop bound
# cannot be a parameter in a variable-length pattern, so there is one constant query per bound.
_Q_HOPS = {
    h: (
        "UNWIND $seeds AS sid "
        f"MATCH p = (e:Node {{id: sid}})-[:EDGE*1..{h}]-(n:Node) "
        "WHERE n.kind IN $hierarchy AND all(r IN relationships(p) WHERE r.kind IN $kinds) "
        "RETURN sid, n.id, min(length(p))"
    )
    for h in range(1, 6)
}
_Q_REPLACE = "OPTIONAL MATCH (gone:Message) DELETE gone WITH count(*) AS _g " + _GRAPH_PART


def _vec_out(v: np.ndarray) -> str:
    return base64.b64encode(np.asarray(v, np.float32).tobytes()).decode("ascii")


def _vec_in(s: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), dtype=np.float32)


def parse_url(url: str) -> dict:
    """``falkordb://host:port`` (or ``redis://``) -> connection keyword arguments.

    >>> parse_url("falkordb://127.0.0.1:6390")
    {'host': '127.0.0.1', 'port': 6390}
    """
    u = urlparse(url)
    if u.scheme not in ("falkordb", "redis"):
        raise StoreError(f"not a FalkorDB address: {url!r} (expected falkordb://host:port)")
    out: dict = {"host": u.hostname or "127.0.0.1", "port": u.port or 6379}
    if u.password:
        out["password"] = u.password
    if u.username:
        out["username"] = u.username
    return out


class FalkorDBStore:
    """The :class:`~.base.GraphStore` contract over a FalkorDB server.

    Args:
        url: ``falkordb://host:port``.

    Raises:
        StoreError: the server cannot be reached or holds another format version.
    """

    checks_version_on_save = True

    def __init__(self, url: str):
        from falkordb import FalkorDB

        self.url = url
        try:
            self._db = FalkorDB(**parse_url(url))
            self._meta = self._db.select_graph(_META_GRAPH)
            version = self.get_meta("format_version")
        except StoreError:
            raise
        except Exception as e:  # redis.ConnectionError and friends
            raise StoreError(f"cannot reach FalkorDB at {url!r}: {e}") from e
        if version is None:
            self.set_meta("format_version", FORMAT_VERSION)
        elif version != FORMAT_VERSION:
            raise StoreError(f"FalkorDB at {url!r} has format {version}; this version reads format {FORMAT_VERSION}")
        self._indexed: set[str] = set()

    # ----- meta -----
    def get_meta(self, key: str) -> str | None:
        rows = self._meta.ro_query(_Q_META_GET, {"key": key}).result_set if self._exists(_META_GRAPH) else []
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self._meta.query(_Q_META_SET, {"key": key, "value": value})

    def _exists(self, name: str) -> bool:
        return name in self._db.list_graphs()

    def _graph(self, namespace: str):
        name = _PREFIX + namespace
        g = self._db.select_graph(name)
        if name not in self._indexed:
            for label in ("Node", "Message"):
                try:
                    g.create_node_range_index(label, "id")
                except Exception as e:  # already there
                    if "already indexed" not in str(e).lower():
                        raise
            self._indexed.add(name)
        return g

    def stored_dim(self) -> int | None:
        for ns in self.namespaces():
            rows = self._db.select_graph(_PREFIX + ns).ro_query(_Q_DIM).result_set
            if rows:
                return len(_vec_in(rows[0][0]))
        return None

    def namespaces(self) -> list[str]:
        return sorted(n[len(_PREFIX):] for n in self._db.list_graphs() if n.startswith(_PREFIX))

    def version(self, namespace: str) -> int:
        """The namespace's write counter (0 when absent): a process whose copy was loaded at an
        older version must reload to see another process's writes."""
        if not self._exists(_PREFIX + namespace):
            return 0
        rows = self._db.select_graph(_PREFIX + namespace).ro_query(_Q_VERSION).result_set
        return int(rows[0][0]) if rows else 0

    # ----- reading -----
    def load(self, namespace: str, dim: int) -> StoredNamespace | None:
        if not self._exists(_PREFIX + namespace):
            return None
        g = self._db.select_graph(_PREFIX + namespace)
        nodes = [json.loads(r[0]) for r in g.ro_query(_Q_NODES).result_set]
        edges = [json.loads(r[0]) for r in g.ro_query(_Q_EDGES).result_set]
        rows = g.ro_query(_Q_MESSAGES).result_set
        messages = [
            Message.from_dict({"id": i, "speaker": s, "text": t, "timestamp": ts, "seq": q}) for i, s, t, ts, q, _ in rows
        ]
        arr = np.stack([_vec_in(r[5]) for r in rows]).reshape(len(rows), dim) if rows else np.zeros((0, dim), np.float32)
        return StoredNamespace({"namespace": namespace, "nodes": nodes, "edges": edges}, messages,
                               [m.id for m in messages], arr)

    def hop_distances(
        self, namespace: str, seeds: list[str], kinds: list[str], max_hops: int,
        hierarchy: tuple[str, ...] = ("fragment", "subtopic", "concept"),
    ) -> dict[tuple[str, str], int]:
        """(seed id, node id) -> hops, for hierarchy nodes within ``max_hops`` of each seed over
        edges of ``kinds`` (either direction): the relation path's traversal, run in FalkorDB."""
        if not seeds or not self._exists(_PREFIX + namespace):
            return {}
        q = _Q_HOPS[max(1, min(5, max_hops))]
        rows = self._db.select_graph(_PREFIX + namespace).ro_query(
            q, {"seeds": list(seeds), "kinds": list(kinds), "hierarchy": list(hierarchy)}
        ).result_set
        return {(sid, nid): int(d) for sid, nid, d in rows if nid != sid}

    # ----- writing -----
    @staticmethod
    def _params(graph: dict, messages: list[Message], vectors: np.ndarray) -> dict:
        return {
            "nodes": [{"id": n["id"], "kind": n["kind"], "status": n.get("status", "active"), "data": json.dumps(n)}
                      for n in graph["nodes"]],
            "edges": [{"src": e["src"], "dst": e["dst"], "kind": e["kind"], "label": e.get("label", ""),
                       "data": json.dumps(e)} for e in graph["edges"]],
            "msgs": [{"id": m.id, "seq": m.seq, "speaker": m.speaker, "text": m.text,
                      "timestamp": m.timestamp.isoformat() if m.timestamp else None, "vec": _vec_out(v)}
                     for m, v in zip(messages, vectors)],
        }

    def save(
        self, namespace, new_messages, new_vectors, graph, meta: dict[str, str] | None = None,
        expected_version: int | None = None,
    ) -> int:
        """Append messages and replace the graph in one query; returns the namespace's new version.

        ``meta`` is written first: left alone by a crash, it only names the embedder and
        dimension of a store with no data yet. With ``expected_version``, the query writes
        nothing and :class:`ConcurrentWriteError` is raised when another writer moved the
        namespace past it."""
        for key, value in (meta or {}).items():
            if self.get_meta(key) != value:
                self.set_meta(key, value)
        params = self._params(graph, new_messages, new_vectors) | {"expected": expected_version}
        version = int(self._graph(namespace).query(_Q_SAVE, params).result_set[0][0])
        if version < 0:
            raise ConcurrentWriteError(
                f"namespace {namespace!r} was written by another writer since version {expected_version}"
            )
        return version

    def replace(self, namespace, messages, vectors, graph) -> int:
        """Rewrite a namespace whole, in one query; returns the namespace's new version."""
        params = self._params(graph, messages, vectors) | {"expected": None}
        return int(self._graph(namespace).query(_Q_REPLACE, params).result_set[0][0])

    def delete(self, namespace: str) -> None:
        if self._exists(_PREFIX + namespace):
            self._db.select_graph(_PREFIX + namespace).delete()
        self._indexed.discard(_PREFIX + namespace)

    def purge(self) -> None:
        """Deleted graphs leave the server's memory at once. Copies in RDB/AOF files on the server
        are the server's to rewrite (``BGREWRITEAOF``; the next snapshot); not done from here."""

    def close(self) -> None:
        self._db.connection.close()
