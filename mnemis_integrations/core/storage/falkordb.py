"""FalkorDB store: one FalkorDB graph per namespace, written and read with parameterised Cypher only.

Layout of the graph ``mnemis:<namespace>``:

- ``(:Message {id, seq, speaker, text, timestamp, metadata, vec})``: raw messages; ``metadata`` is
  the caller's flat dict as JSON (absent when empty); ``vec`` is the float32 vector (a long
  message's window vectors after it, ``core.passages``), base64 (reading FalkorDB ``vecf32``
  values back costs ~1 ms per vector in the client,
  so the dense index is a faiss sidecar rebuilt in process from these bytes, never re-embedded);
- ``(:Node {id, kind, status, ord, data})`` and ``(:Node)-[:EDGE {key, kind, label, ord, data}]->(:Node)``:
  the memory graph as a real graph (traversable in Cypher), each element also holding its JSON;
  ``ord`` keeps the order elements were made in (one removed and put back in a write is deleted,
  then made again with that write's order: last, where the graph put it). A node written again
  keeps its new status and JSON on a ``(:Node)-[:STATE {id, status, data}]->(itself)`` self-loop,
  which then wins over the node's own (stale) ones: FalkorDB commits a SET on a node only after
  syncing its node-label matrix, which costs as much as the graph is large whenever nodes were
  created since the last sync (every add creates its message); a SET on an edge does not. A write
  finds the self-loop through an edge index on its ``id``: reaching it by traversal would sync the
  ``STATE`` matrix, as costly. A write that adds no message (forget, compaction, rebalance) clears
  the first JSON of every node it rewrites, so no stale copy quotes erased text. ``kind`` is read
  by the traversal, so it stays on the node, set only when it differs;
- ``(:Meta {key: "version"})-[:VERSION {value}]->(itself)``: the namespace's version (on an edge
  for the same reason).

Every write is one Cypher query, which FalkorDB runs atomically: it applies a delta (MERGE or
DELETE of just the elements that changed) only if the namespace is still at the version the
writer read; the writes that make a namespace take turns (``_turn``), since two of them may
otherwise both find no version. Versions come from one store-wide counter (the Redis key
``mnemis__write_seq``, ``INCR``), so a namespace that was deleted and made again never shows an old version.
Store-wide metadata (format version, embedder id, dimension) lives in the graph ``mnemis__meta``.
Query text is constant; every value travels as a query parameter.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import random
import time
import uuid
from collections.abc import Iterator
from urllib.parse import parse_qs, unquote, urlparse

import numpy as np

from ...errors import StoreError
from ..graph import edge_key
from .base import (
    ConcurrentWriteError,
    Delta,
    StoredNamespace,
    message_from_row,
    native_errors_as_store_errors,
    refuse_another_embedder,
    split_rows,
    vector_rows,
)

__all__ = ["FORMAT_VERSION", "FalkorDBStore", "redacted"]

logger = logging.getLogger(__name__)

FORMAT_VERSION = "4"
_PREFIX = "mnemis:"
_META_GRAPH = "mnemis__meta"
_SEQ_KEY = "mnemis__write_seq"
_ORD_STEP = 1 << 20  # element order: version * step + position in the write
# The writes that make a namespace, and its removals, take turns through a Redis key (``SET NX``)
# held while the query runs. In a new graph the version test reads a label and a relationship type
# (``Meta``, ``VERSION``) that the graph's schema does not hold yet, and then it misses the version
# another first write gives meanwhile: without turns, two or more of four first writers landed in 17
# and 31 of 100 namespaces (two runs); 55 of 100 with the indexes made beforehand, none of 200 with
# that label and type made beforehand (BENCHMARKS.md, forty-fourth round). Turns also put a failed
# writer's clean-up (``_drop_if_empty``) after a first write in progress, which it would otherwise
# find at version 0 and could remove, with its indexes, before that write's query runs. Later writes
# find each other's version (none of 100 landed twice; of 200 more, each removing, changing and
# adding, none left a refused writer's change behind): they pay no turn (it costs a single-message
# write 1.36x).
_TURN_PREFIX = "mnemis__turn:"
_TURN_TTL_MS = 60_000  # a writer that dies holding its turn keeps it no longer than this
_TURN_WAIT_S = 30.0
_TURN_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

_Q_META_GET = "MATCH (m:Meta {key: $key}) RETURN m.value"
_Q_META_SET = "MERGE (m:Meta {key: $key}) SET m.value = $value"
_Q_META_CLAIM = "MERGE (m:Meta {key: $key}) ON CREATE SET m.value = $value RETURN m.value"
_Q_VERSION = "MATCH (:Meta {key: 'version'})-[v:VERSION]->() RETURN v.value"
# a long message's vec also holds its passage vectors: the shortest is one vector
_Q_DIM = "MATCH (m:Message) RETURN m.vec ORDER BY size(m.vec) LIMIT 1"
_Q_NODES = "MATCH (n:Node) OPTIONAL MATCH (n)-[s:STATE]->(n) RETURN coalesce(s.data, n.data) ORDER BY n.ord"
_Q_EDGES = "MATCH (:Node)-[e:EDGE]->(:Node) RETURN e.data ORDER BY e.ord"
_Q_MESSAGES = (
    "MATCH (m:Message) RETURN m.id, m.speaker, m.text, m.timestamp, m.seq, m.vec, m.metadata ORDER BY m.seq"
)
# ``WITH count(*)`` after each UNWIND keeps exactly one row flowing even when the list is empty.
# A node is looked up through the id index and created or updated, not MERGEd: a MERGE that
# creates costs as much as the graph is large in FalkorDB (3.8 ms at 50k nodes, 0.5 ms at 1k).
# The write happens only if the namespace is still at ``$expected``; that test, ``ok``, is read
# again after each aggregation (nothing changes the version before the last clause), so a
# refused write touches nothing and returns false: a compare-and-swap inside one atomic query.
_OK = (
    "OPTIONAL MATCH (:Meta {key: 'version'})-[cur:VERSION]->() WITH coalesce(cur.value, 0) = $expected AS ok"
)
_Q_WRITE = f"""
{_OK}
UNWIND CASE WHEN ok THEN $removed_nodes ELSE [] END AS rid
MATCH (gone:Node {{id: rid}}) DETACH DELETE gone
WITH count(*) AS _rn
{_OK}
UNWIND CASE WHEN ok THEN $removed_edges ELSE [] END AS re
MATCH (:Node {{id: re.src}})-[gone:EDGE {{key: re.key}}]->(:Node {{id: re.dst}}) DELETE gone
WITH count(*) AS _re
{_OK}
UNWIND CASE WHEN ok THEN $removed_msgs ELSE [] END AS rm
MATCH (gone:Message {{id: rm}}) DELETE gone
WITH count(*) AS _rm
{_OK}
UNWIND CASE WHEN ok THEN $nodes ELSE [] END AS nd
OPTIONAL MATCH (n:Node {{id: nd.id}})
OPTIONAL MATCH ()-[s:STATE {{id: nd.id}}]->()
WITH nd, n, s
FOREACH (_ IN CASE WHEN n IS NULL THEN [1] ELSE [] END |
  CREATE (:Node {{id: nd.id, ord: nd.ord, kind: nd.kind, status: nd.status, data: nd.data}}))
FOREACH (_ IN CASE WHEN n.kind <> nd.kind THEN [1] ELSE [] END | SET n.kind = nd.kind)
FOREACH (_ IN CASE WHEN n IS NOT NULL AND s IS NULL THEN [1] ELSE [] END |
  CREATE (n)-[:STATE {{id: nd.id, status: nd.status, data: nd.data}}]->(n))
FOREACH (_ IN CASE WHEN s IS NULL THEN [] ELSE [1] END | SET s.status = nd.status, s.data = nd.data)
FOREACH (_ IN CASE WHEN $clear_first AND n.data IS NOT NULL THEN [1] ELSE [] END | SET n.data = NULL)
WITH count(*) AS _n
{_OK}
UNWIND CASE WHEN ok THEN $edges ELSE [] END AS ed
MATCH (a:Node {{id: ed.src}}), (b:Node {{id: ed.dst}})
MERGE (a)-[e:EDGE {{key: ed.key}}]->(b)
ON CREATE SET e.ord = ed.ord
SET e.kind = ed.kind, e.label = ed.label, e.data = ed.data
WITH count(*) AS _e
{_OK}
UNWIND CASE WHEN ok THEN $msgs ELSE [] END AS m
CREATE (:Message {{id: m.id, seq: m.seq, speaker: m.speaker, text: m.text, timestamp: m.timestamp,
                   metadata: m.metadata, vec: m.vec}})
WITH count(*) AS _m
{_OK}
FOREACH (_ IN CASE WHEN ok THEN [1] ELSE [] END |
  MERGE (v:Meta {{key: 'version'}}) MERGE (v)-[c:VERSION]->(v) SET c.value = $new)
RETURN ok
"""
# Format 1 had no edge keys and no element order: give every element both.
_Q_UPGRADE_1 = (
    "MATCH (n:Node) SET n.ord = id(n) WITH count(*) AS _n "
    "MATCH ()-[e:EDGE]->() SET e.ord = id(e), "
    "e.key = CASE WHEN e.kind = 'relation' THEN 'relation:' + e.label ELSE e.kind END"
)
# Format 2 kept the version on the Meta node: move it to the self-loop of format 3 (its nodes are
# format 3 nodes never written again). A graph already moved is left alone, so a run cut short can
# run again.
_Q_UPGRADE_2 = (
    "MATCH (v:Meta {key: 'version'}) WHERE v.value IS NOT NULL "
    "CREATE (v)-[:VERSION {value: v.value}]->(v) SET v.value = NULL"
)
# Format 4 lets a message's ``vec`` hold a long message's window vectors after its own
# (core.passages): a format 3 message reads the same, so nothing to convert; an older reader would
# misread such a message, and the new mark makes it refuse the graph instead.
_UPGRADES = {"1": (_Q_UPGRADE_1, _Q_UPGRADE_2), "2": (_Q_UPGRADE_2,), "3": ()}
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
    for h in range(1, 4)  # RelationConfig.max_hops' range
}


def _vec_out(v: np.ndarray) -> str:
    return base64.b64encode(np.asarray(v, np.float32).tobytes()).decode("ascii")


def _vec_in(s: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), dtype=np.float32)


def redacted(url: str) -> str:
    """``url`` as errors and logs name it: a password in it (a credential) as ``***``. Hidden up to
    the last ``@``, not where ``urllib`` ends the address (the first ``/``, ``?`` or ``#``): a
    password holding one unescaped (a base64 one holds ``/``) is read there as a path or a query,
    and must not be shown either.

    >>> redacted("falkordb://alice:s3cret@db:6379?timeout=5"), redacted("falkordb://db:6379")
    ('falkordb://alice:***@db:6379?timeout=5', 'falkordb://db:6379')
    >>> redacted("falkordb://alice:s3/cr?et@db:6379")
    'falkordb://alice:***@db:6379'
    """
    scheme, sep, rest = url.partition("://")
    userinfo, at, hostport = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.partition(':')[0]}:***@{hostport}"


def parse_url(url: str) -> dict:
    """``falkordb://host:port`` (or ``redis://``) -> connection keyword arguments.

    Two optional query parameters, in seconds: ``connect_timeout`` (default 10: an address
    that does not answer is an error, not a wait) and ``timeout``, the longest wait for any
    one reply (default none: a large write may legitimately take long; set it where a server
    that stops answering must not hold the caller forever).

    >>> parse_url("falkordb://127.0.0.1:6390")
    {'host': '127.0.0.1', 'port': 6390, 'socket_connect_timeout': 10.0}
    >>> parse_url("falkordb://127.0.0.1:6390?timeout=30")["socket_timeout"]
    30.0
    >>> parse_url("falkordb://ana:p%2Fw%40rd@127.0.0.1:6390")["password"]
    'p/w@rd'
    """
    u = urlparse(url)
    if u.scheme not in ("falkordb", "redis"):
        raise StoreError(f"not a FalkorDB address: {redacted(url)!r} (expected falkordb://host:port)")
    if "@" in url.partition("://")[2][len(u.netloc) :]:
        # A "/", "?" or "#" in a password ends the address there: the user name and the password's
        # head (past an "@" it holds, if any) would be read as a host and port (which connection
        # errors name), its tail as options (named below), where redacted() hides neither.
        raise StoreError(
            f"the user name or password in {redacted(url)!r} holds a '/', '?' or '#', which end the "
            "address: write them percent-encoded (%2F, %3F, %23)"
        )
    try:
        port = u.port
    except ValueError:  # its message quotes the port as read, which may be part of a password
        raise StoreError(f"not a valid port in {redacted(url)!r} (expected falkordb://host:port)") from None
    out: dict = {"host": u.hostname or "127.0.0.1", "port": port or 6379}
    # percent-decoded, as redis URLs are: a password may hold any character, written %XX
    if u.password:
        out["password"] = unquote(u.password)
    if u.username:
        out["username"] = unquote(u.username)
    query = parse_qs(u.query, keep_blank_values=True)
    unknown = set(query) - {"connect_timeout", "timeout"}
    if unknown:
        raise StoreError(f"unknown FalkorDB address option(s) {sorted(unknown)} in {redacted(url)!r}")
    for option, keyword, default in (
        ("connect_timeout", "socket_connect_timeout", 10.0),
        ("timeout", "socket_timeout", None),
    ):
        value = query.get(option, [None])[-1]
        if value is None:
            if default is not None:
                out[keyword] = default
            continue
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not seconds > 0:
            raise StoreError(
                f"{option} must be a positive number of seconds, got {value!r} in {redacted(url)!r}"
            )
        out[keyword] = seconds
    return out


def _redis_error() -> type[Exception]:
    from redis.exceptions import RedisError

    return RedisError


# The server's errors (no answer within the address's timeout, a dropped connection, a refused
# query) name the server.
_typed = native_errors_as_store_errors(
    _redis_error, lambda store, e: f"FalkorDB at {store.url!r}: {type(e).__name__}: {e}"
)


class FalkorDBStore:
    """The :class:`~.base.GraphStore` contract over a FalkorDB server.

    Args:
        url: ``falkordb://host:port``.

    Raises:
        StoreError: the server cannot be reached or holds another format version.
    """

    def __init__(self, url: str):
        from falkordb import FalkorDB

        self.url = redacted(url)  # as errors name the server
        try:
            self._db = FalkorDB(**parse_url(url))
            self._meta = self._db.select_graph(_META_GRAPH)
            version = self.get_meta("format_version")
        except StoreError:
            raise
        except Exception as e:  # redis.ConnectionError and friends
            raise StoreError(f"cannot reach FalkorDB at {self.url!r}: {e}") from e
        self._indexed: set[str] = set()
        self._meta_known: dict[str, str] = {}  # meta values this object has seen stored
        if version is None:
            logger.debug("initialised FalkorDB memory at %r", self.url)
            self.set_meta("format_version", FORMAT_VERSION)
        elif version in _UPGRADES:
            logger.info(
                "upgrading FalkorDB memory at %r from format %s to %s", self.url, version, FORMAT_VERSION
            )
            top = 0
            for ns in self.namespaces():
                for query in _UPGRADES[version]:
                    self._db.select_graph(_PREFIX + ns).query(query)
                top = max(top, self.version(ns))
            # Format 1 counted each namespace's version on its own: the store-wide sequence starts
            # above every version an old copy may hold, or a next write would take a version back.
            behind = top - int(self._db.connection.get(_SEQ_KEY) or 0)
            if behind > 0:
                self._db.connection.incrby(_SEQ_KEY, behind)
            self.set_meta("format_version", FORMAT_VERSION)
        elif version != FORMAT_VERSION:
            raise StoreError(
                f"FalkorDB at {self.url!r} has format {version}; this version reads format {FORMAT_VERSION}"
            )

    # ----- meta -----
    @_typed
    def get_meta(self, key: str) -> str | None:
        rows = self._meta.ro_query(_Q_META_GET, {"key": key}).result_set if self._exists(_META_GRAPH) else []
        return rows[0][0] if rows else None

    @_typed
    def set_meta(self, key: str, value: str) -> None:
        self._meta.query(_Q_META_SET, {"key": key, "value": value})

    def _exists(self, name: str) -> bool:
        return name in self._db.list_graphs()

    def _graph(self, namespace: str, creating: bool = False):
        name = _PREFIX + namespace
        g = self._db.select_graph(name)
        # A write that creates the namespace makes its indexes again: another writer may have
        # deleted the graph, and its indexes with it, since this object made them.
        if creating or name not in self._indexed:
            for create, label in (
                (g.create_node_range_index, "Node"),
                (g.create_node_range_index, "Message"),
                (g.create_edge_range_index, "STATE"),
            ):
                try:
                    create(label, "id")
                except Exception as e:  # already there
                    if "already indexed" not in str(e).lower():
                        raise
            self._indexed.add(name)
        return g

    @_typed
    def stored_dim(self) -> int | None:
        for ns in self.namespaces():
            rows = self._db.select_graph(_PREFIX + ns).ro_query(_Q_DIM).result_set
            if rows:
                return len(_vec_in(rows[0][0]))
        return None

    @_typed
    def namespaces(self) -> list[str]:
        return sorted(n[len(_PREFIX) :] for n in self._db.list_graphs() if n.startswith(_PREFIX))

    @_typed
    def version(self, namespace: str) -> int:
        """The namespace's version (0 when absent). One round trip: asked before every call, so
        no separate check that the graph exists (a query on a missing graph is an error)."""
        from redis.exceptions import ResponseError

        try:
            rows = self._db.select_graph(_PREFIX + namespace).ro_query(_Q_VERSION).result_set
        except ResponseError:
            if self._exists(_PREFIX + namespace):
                raise
            return 0
        return int(rows[0][0]) if rows else 0

    # ----- reading -----
    @_typed
    def load(self, namespace: str, dim: int) -> StoredNamespace | None:
        # Three reads, each atomic: the version before and after must agree, or another writer
        # came in between and the reads are taken again.
        while True:
            before = self.version(namespace)
            if before == 0:
                return None
            g = self._db.select_graph(_PREFIX + namespace)
            nodes = g.ro_query(_Q_NODES).result_set
            edges = g.ro_query(_Q_EDGES).result_set
            rows = g.ro_query(_Q_MESSAGES).result_set
            if self.version(namespace) == before:
                break
        try:
            nodes = [json.loads(r[0]) for r in nodes]
            edges = [json.loads(r[0]) for r in edges]
            messages = [message_from_row(i, s, t, ts, q, md) for i, s, t, ts, q, _, md in rows]
            keys, arr, passages = split_rows([(r[0], _vec_in(r[5])) for r in rows], dim)
        except (ValueError, KeyError, TypeError) as e:  # binascii.Error is a ValueError
            # the server keeps what it was given: a value changed on it reads back as it is
            raise StoreError(
                f"FalkorDB at {self.url!r}: a value of namespace {namespace!r} is unreadable ({e})"
            ) from e
        return StoredNamespace(
            {"namespace": namespace, "nodes": nodes, "edges": edges}, messages, keys, arr, before, passages
        )

    @_typed
    def hop_distances(
        self,
        namespace: str,
        seeds: list[str],
        kinds: list[str],
        max_hops: int,
        hierarchy: tuple[str, ...] = ("fragment", "subtopic", "concept"),
    ) -> dict[tuple[str, str], int]:
        """(seed id, node id) -> hops, for hierarchy nodes within ``max_hops`` of each seed over
        edges of ``kinds`` (either direction): the relation path's traversal, run in FalkorDB."""
        if not seeds or not self._exists(_PREFIX + namespace):
            return {}
        q = _Q_HOPS[max(1, min(len(_Q_HOPS), max_hops))]
        rows = (
            self._db.select_graph(_PREFIX + namespace)
            .ro_query(q, {"seeds": list(seeds), "kinds": list(kinds), "hierarchy": list(hierarchy)})
            .result_set
        )
        return {(sid, nid): int(d) for sid, nid, d in rows if nid != sid}

    # ----- writing -----
    @staticmethod
    def _params(delta: Delta, new: int) -> dict:
        g = delta.graph
        return {
            "removed_nodes": list(g.removed_nodes),
            "removed_edges": [{"src": s, "dst": d, "key": k} for s, d, k in g.removed_edges],
            "removed_msgs": list(delta.removed_messages),
            # A rewritten node's first JSON stays on the node beside its STATE and may quote text
            # that is later forgotten, or that a rebalance moved away from it: every write that adds
            # no message (forget, compaction, rebalance, review) clears it, paying a node SET; adds,
            # which must stay cheap, leave it.
            "clear_first": not delta.new_messages,
            "nodes": [
                {
                    "id": n.id,
                    "kind": n.kind.value,
                    "status": n.status.value,
                    "ord": new * _ORD_STEP + i,
                    "data": json.dumps(n.to_dict()),
                }
                for i, n in enumerate(g.nodes)
            ],
            "edges": [
                {
                    "src": e.src,
                    "dst": e.dst,
                    "key": edge_key(e)[2],
                    "kind": e.kind.value,
                    "label": e.label,
                    "ord": new * _ORD_STEP + i,
                    "data": json.dumps(e.to_dict()),
                }
                for i, e in enumerate(g.edges)
            ],
            "msgs": [
                {
                    "id": m.id,
                    "seq": m.seq,
                    "speaker": m.speaker,
                    "text": m.text,
                    "timestamp": m.timestamp.isoformat() if m.timestamp else None,
                    "metadata": json.dumps(m.metadata, ensure_ascii=False) if m.metadata else None,
                    "vec": _vec_out(v),
                }
                for m, v in vector_rows(delta)
            ],
        }

    @_typed
    def write(
        self, namespace: str, delta: Delta, expected_version: int, meta: dict[str, str] | None = None
    ) -> int:
        """Apply ``delta`` in one query if the namespace is still at ``expected_version``; returns
        the new version.

        ``meta`` is written first: left alone by a crash, it only names the embedder and
        dimension of a store with no data yet.

        Raises:
            ConcurrentWriteError: another writer moved the namespace; the query wrote nothing.
        """
        for key, value in (meta or {}).items():
            if self._meta_known.get(key) != value:  # checked once per store object, not per write
                if key == "embedder_id":
                    # set only if absent and read back in one query: of two first writers naming
                    # different embedders, the second sees the first's and is refused
                    stored = self._meta.query(_Q_META_CLAIM, {"key": key, "value": value}).result_set
                    refuse_another_embedder(stored[0][0], meta)
                elif self.get_meta(key) != value:
                    self.set_meta(key, value)
                self._meta_known[key] = value
        new = int(self._db.connection.incr(_SEQ_KEY))
        params = self._params(delta, new) | {"expected": expected_version, "new": new}
        try:
            creating = expected_version == 0
            with self._turn(namespace) if creating else contextlib.nullcontext():
                written = self._graph(namespace, creating).query(_Q_WRITE, params).result_set[0][0]
        except Exception:
            self._drop_if_empty(namespace)
            raise
        if not written:
            self._drop_if_empty(namespace)
            raise ConcurrentWriteError(
                f"namespace {namespace!r} was written by another writer since version {expected_version}"
            )
        return new

    @contextlib.contextmanager
    def _turn(self, namespace: str) -> Iterator[None]:
        """Hold the namespace's turn (see ``_TURN_PREFIX``) while the block runs.

        Raises:
            ConcurrentWriteError: another writer held the turn for ``_TURN_WAIT_S``.
        """
        key, token = _TURN_PREFIX + namespace, uuid.uuid4().hex
        conn = self._db.connection
        deadline = time.monotonic() + _TURN_WAIT_S
        while not conn.set(key, token, nx=True, px=_TURN_TTL_MS):
            if time.monotonic() > deadline:
                raise ConcurrentWriteError(
                    f"namespace {namespace!r}: another writer held its turn for {_TURN_WAIT_S} s"
                )
            time.sleep(random.uniform(0.001, 0.01))
        try:
            yield
        finally:
            conn.eval(_TURN_RELEASE, 1, key, token)

    def _drop_if_empty(self, namespace: str) -> None:
        """After a write that did not happen (refused because another writer removed the namespace,
        or failed on the server): the query and its indexes made an empty graph, which would be
        listed as a namespace; remove it unless a writer has given it a version meanwhile (the
        conditional removal refuses then). Best effort: the write's own error is the one the caller
        hears."""
        with contextlib.suppress(StoreError):
            self.delete(namespace, 0)

    @_typed
    def delete(self, namespace: str, expected_version: int | None = None) -> None:
        """Remove the namespace's graph. With ``expected_version``, only if the namespace is still
        at it: the graph's key is watched from the version read to the removal, so a write landing
        in between aborts the removal (``ConcurrentWriteError``) instead of being removed with it."""
        from redis.exceptions import WatchError

        name = _PREFIX + namespace
        with self._turn(namespace), self._db.connection.pipeline(transaction=True) as pipe:
            pipe.watch(name)
            if expected_version is not None and self.version(namespace) != expected_version:
                raise ConcurrentWriteError(
                    f"namespace {namespace!r} was written by another writer since version {expected_version}"
                )
            if self._exists(name):
                pipe.multi()
                pipe.execute_command("GRAPH.DELETE", name)
                try:
                    pipe.execute()
                except WatchError:
                    raise ConcurrentWriteError(
                        f"namespace {namespace!r} was written by another writer while it was being removed"
                    ) from None
        self._indexed.discard(name)

    @_typed
    def purge(self) -> None:
        """Deleted graphs leave the server's memory at once. Copies in RDB/AOF files on the server
        are the server's to rewrite (``BGREWRITEAOF``; the next snapshot); not done from here."""

    def close(self) -> None:
        self._db.connection.close()
