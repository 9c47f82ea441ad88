"""Everything Mnemis holds for one namespace in memory: the graph, its messages,
and the indexes derived from them. Derived parts are rebuilt from the persisted
graph and message vectors, never embedded twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .embedders import normalise_rows
from .graph import GraphChanges, MemoryGraph
from .indexes.entities import EntityIndex, entity_keys
from .indexes.incremental import BuildIndex
from .indexes.lexical import LexicalIndex
from .indexes.vector import VectorIndex
from .model import EdgeKind, Message, Node, NodeKind
from .passages import passage_key
from .text import content_words

if TYPE_CHECKING:
    from .storage.base import StoredNamespace

__all__ = ["NamespaceState", "message_words"]


def message_words(messages: Iterable[Message]) -> set[str]:
    """The content words of these messages' texts, each once: what a fragment's document frequencies count."""
    return set(content_words(" ".join(m.text for m in messages)))


@dataclass
class NamespaceState:
    namespace: str
    dim: int
    graph: MemoryGraph
    messages: dict[str, Message] = field(default_factory=dict)
    msg_vectors: VectorIndex = None  # type: ignore[assignment]
    # a long message's windows (core.passages), keyed passage_key(message id, n)
    passage_vectors: VectorIndex = None  # type: ignore[assignment]
    node_vectors: VectorIndex = None  # type: ignore[assignment]
    lexical: LexicalIndex = field(default_factory=LexicalIndex)
    entities: EntityIndex = field(default_factory=EntityIndex)
    df: Counter = field(default_factory=Counter)  # token -> number of fragments holding it
    msg_fragment: dict[str, str] = field(default_factory=dict)
    # The store version this copy was read or last written at (0: not stored yet). Versions come
    # from a store-wide sequence, so no two states of a namespace ever share one; caches key on it.
    version: int = 0
    seq_end: int = 0  # one past the highest message seq ever given here (seq is never reused)
    memo: dict = field(
        default_factory=dict, repr=False, compare=False
    )  # retrieval.cache.memo: per-version values
    # Hierarchy paths of this copy (retrieval.cache.PathCache); it lives and dies with the copy.
    path_cache: Any = field(default=None, repr=False, compare=False)
    # True while a hand edit changes the graph in place: its version only moves on exit, so nothing
    # may be kept by version meanwhile (retrieval.cache.memo, the path cache).
    editing: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self):
        if self.msg_vectors is None:
            self.msg_vectors = VectorIndex(self.dim)
        if self.passage_vectors is None:
            self.passage_vectors = VectorIndex(self.dim)
        if self.node_vectors is None:
            self.node_vectors = VectorIndex(self.dim)

    @classmethod
    def empty(cls, namespace: str, dim: int) -> NamespaceState:
        return cls(namespace=namespace, dim=dim, graph=MemoryGraph(namespace))

    @classmethod
    def from_stored(cls, namespace: str, dim: int, stored: StoredNamespace) -> NamespaceState:
        """The namespace as a store's ``load`` gave it (graph, messages, vectors, passages, version)."""
        return cls.restore(
            namespace,
            dim,
            MemoryGraph.from_data(stored.graph),
            stored.messages,
            stored.vector_keys,
            stored.vectors,
            version=stored.version,
            passages=stored.passages,
        )

    @classmethod
    def restore(
        cls,
        namespace: str,
        dim: int,
        graph: MemoryGraph,
        messages: list[Message],
        msg_keys: list[str],
        msg_vecs: np.ndarray,
        version: int = 0,
        passages: dict[str, np.ndarray] | None = None,
    ) -> NamespaceState:
        st = cls(namespace=namespace, dim=dim, graph=graph, version=version)
        st.messages = {m.id: m for m in sorted(messages, key=lambda m: m.seq)}
        st.seq_end = max((m.seq for m in messages), default=-1) + 1
        st.msg_vectors.upsert(msg_keys, msg_vecs)
        st.add_passages(passages or {})
        st.lexical.add(list(st.messages), [m.text for m in st.messages.values()])
        st.rederive()
        return st

    def add_passages(self, passages: dict[str, np.ndarray]) -> None:
        """Index long messages' window vectors (message id -> one row per window)."""
        keys = [passage_key(m, n) for m, rows in passages.items() for n in range(len(rows))]
        if keys:
            self.passage_vectors.upsert(
                keys, np.concatenate([np.asarray(r, np.float32) for r in passages.values()])
            )

    def message_similarities(self, qvec: np.ndarray, message_ids: list[str]) -> np.ndarray:
        """Each message's cosine to ``qvec``, a long message's as its best window's when higher
        (``core.passages``): what its own vector read is only its opening."""
        sims = self.msg_vectors.similarities(qvec, message_ids)
        if len(self.passage_vectors):
            keys, owners = [], []
            for i, m in enumerate(message_ids):
                windows = self.passages_of([m])
                keys += windows
                owners += [i] * len(windows)
            if keys:  # all windows in one call, each message keeping its best
                np.maximum.at(sims, owners, self.passage_vectors.similarities(qvec, keys))
        return sims

    def passages_of(self, message_ids: Iterable[str]) -> list[str]:
        """The passage keys of these messages (none for a message with one vector)."""
        keys = []
        for m in message_ids:
            n = 0
            while (key := passage_key(m, n)) in self.passage_vectors:
                keys.append(key)
                n += 1
        return keys

    def rederive(self) -> None:
        """Rebuild what derives from the graph (message -> fragment map, fragment document
        frequencies, entity names, hierarchy vectors) after a hand edit or maintenance; the
        messages, their vectors and the lexical index do not depend on the graph and are kept."""
        st, graph = self, self.graph
        st.msg_fragment, st.df = {}, Counter()
        st.node_vectors = VectorIndex(self.dim)
        st.memo.clear()
        st.path_cache = None
        for n in graph.nodes(NodeKind.FRAGMENT):
            for mid in n.source_ids:
                st.msg_fragment.setdefault(mid, n.id)
            st.df.update(st.fragment_words(n.id))
        st.index_entities()
        st.refresh_vectors([n.id for n in graph.nodes() if n.kind in (NodeKind.FRAGMENT,)])
        st.refresh_vectors(
            [n.id for n in graph.nodes(NodeKind.SUBTOPIC)] + [n.id for n in graph.nodes(NodeKind.ARCHIVE)]
        )
        st.refresh_vectors([n.id for n in graph.nodes(NodeKind.CONCEPT)])

    def derive_changes(self, changes: GraphChanges, nodes_before: int) -> None:
        """Derive again what a change written from the graph's journal reaches (``changes``: what
        was written, with the earlier form of each node it made, replaced or removed; ``nodes_before``:
        the graph's node count before the change).

        At the cost of the change (what the earlier forms derived is taken back, what the nodes are
        now is derived) when each node it made, replaced (``add_node`` over it) or removed has an
        earlier form in the journal, and:

        * no ``belongs_to`` edge was added or removed (a parent's vector and child count derive from
          its children); ``mentions`` edges (the builder's index counts them) and the other kinds
          (read off the graph as it is) are followed;
        * no fragment holding messages was made or removed, nor replaced by one holding others
          (their vectors, words and holders derive from those); replaced with the same messages, it
          keeps them all;
        * no node was replaced by one of another kind;
        * an entity held before keeps its names in their order, or loses some of them: a name it
          gains would come first where the entity stands in the graph's order, which the name index
          cannot take back, not last;
        * a name an entity lost or a removed entity had is held by no entity but new ones: its
          place and its holder would otherwise go to the entity first and last in the graph's order.

        Otherwise everything again (:meth:`rederive`): also for a node changed in place (the journal
        sees it after the change) or removed and added again (it moved last in the graph's order).
        Either way every derived structure holds what :meth:`rederive` makes, but for the order of
        the node vector rows: written in the order the nodes were, as after the builder's writes
        (:meth:`rederive` lays them out by kind), which no answer reads (equal scores rank by key).
        """
        dropped = self._names_dropped(changes)
        if dropped is None:
            self.rederive()
            return
        self.memo.clear()
        self.path_cache = None
        self.entities.drop(dropped)
        for n in changes.nodes:  # after every node held before, as rederive reads them: the same name wins
            if n.kind == NodeKind.ENTITY and changes.earlier[n.id] is None:
                self._index_entity(n)
        self.node_vectors.remove(changes.removed_nodes)
        idx = self.__dict__.get("_build_index")
        if idx is not None:
            idx.graph_changed(self, changes, nodes_before)

    def _names_dropped(self, changes: GraphChanges) -> list[str] | None:
        """The entity keys ``changes`` takes from the nodes held before it, or None when it cannot
        be derived at its own cost (see :meth:`derive_changes`)."""
        edge_kinds = {e.kind.value for e in changes.edges} | {key for _, _, key in changes.removed_edges}
        if EdgeKind.BELONGS_TO.value in edge_kinds:
            return None
        earlier, dropped = changes.earlier, []
        for node in changes.nodes:
            if node.id not in earlier:
                return None
            before = earlier[node.id]
            if before is None:
                if node.kind == NodeKind.FRAGMENT and node.source_ids:
                    return None
                continue
            if before.kind != node.kind or (
                node.kind == NodeKind.FRAGMENT and before.source_ids != node.source_ids
            ):
                return None
            old, new = entity_keys(before), entity_keys(node)
            if list(new) != [k for k in old if k in new]:  # a name gained, or names reordered
                return None
            dropped += [k for k in old if k not in new]
        for node_id in changes.removed_nodes:
            if node_id not in earlier:
                return None
            before = earlier[node_id]
            if before is not None:
                if before.kind == NodeKind.FRAGMENT and before.source_ids:
                    return None
                dropped += entity_keys(before)
        if dropped:
            made = {i for i, node in earlier.items() if node is None}
            if any(n.id not in made for n in self.graph.nodes_keyed(entity_keys, dropped, each=True)):
                return None
        return dropped

    def index_entities(self) -> None:
        """The name index built anew from the graph's entities, in the graph's order (so a name two
        entities hold names the later one, as a reopened store's does)."""
        self.entities = EntityIndex()
        for n in self.graph.nodes(NodeKind.ENTITY):
            self._index_entity(n)

    def _index_entity(self, node: Node) -> None:
        """Find the entity ``node`` by its name and each of its aliases."""
        for name in (node.label, *node.aliases):
            self.entities.add(name, node.id)

    # Hierarchy vectors are centroids: a fragment's is the mean of its messages', a parent's the
    # mean of its children's. They are derived, so a reopened store needs no embedding at all.
    def centroid_of(self, node_id: str) -> np.ndarray | None:
        node = self.graph.get(node_id)
        if node.kind == NodeKind.FRAGMENT:
            keys = [m for m in node.source_ids if m in self.msg_vectors]
            if not keys:
                return None
            return normalise_rows(self.msg_vectors.get_many(keys).mean(axis=0))[0]
        # An archive is left out: its overview, a child too, stands for what it holds. Taken in, it
        # counted whenever its vector happened to be there first (after a later ingest, not after a
        # reopen), so the same store searched differently once reopened.
        kids = [
            c.id
            for c in self.graph.children(node_id)
            if c.id in self.node_vectors and c.kind != NodeKind.ARCHIVE
        ]
        if not kids:
            return None
        return normalise_rows(self.node_vectors.get_many(kids).mean(axis=0))[0]

    def centred(self, vectors: np.ndarray, centre: np.ndarray | None = None) -> np.ndarray:
        """Rows minus ``centre`` (default: the namespace's mean message vector), re-normalised.

        Embedders like e5 place every text near one common direction (unrelated texts at cosine
        ~0.8), so raw cosines barely separate topics; measured from the namespace's own centre
        they spread over [-1, 1]. The mean is kept by the message index's writes (no scan).
        """
        x = np.asarray(vectors, np.float32) - (self.msg_vectors.mean() if centre is None else centre)
        return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-9)

    def refresh_vectors(self, node_ids: list[str]) -> None:
        keys, vecs, gone = [], [], []
        for nid in node_ids:
            v = self.centroid_of(nid) if self.graph.has(nid) else None
            if v is None:
                # Nothing beneath it has a vector any more (a concept left with an empty subtopic
                # only): the mean of what it held is dropped, as a reopened store derives none.
                # Kept, it was the vector of what was forgotten, and found that text again.
                gone.append(nid)
            else:
                keys.append(nid)
                vecs.append(v)
        self.node_vectors.remove(gone)
        if keys:
            self.node_vectors.upsert(keys, np.stack(vecs))

    def remove_emptied(self, node_ids: Iterable[str]) -> list[tuple[str, str | None]]:
        """Remove each of ``node_ids`` (a node's ancestors, nearest first) left with no children,
        with its vector. Returns the removed ids, each with the parent it had, in removal order."""
        removed = []
        for nid in node_ids:
            if not self.graph.has(nid) or self.graph.children(nid):
                continue
            up = self.graph.parent(nid)
            self.graph.remove_node(nid)
            self.node_vectors.remove([nid])
            removed.append((nid, up.id if up is not None else None))
        return removed

    def fragment_messages(self, node_id: str) -> list[Message]:
        node = self.graph.get(node_id)
        return [self.messages[m] for m in node.source_ids if m in self.messages]

    def fragment_text(self, node_id: str) -> str:
        """The texts of a fragment's messages joined by spaces, without speakers or dates: what the word
        tests (a decision stated, the words two fragments share) read."""
        return " ".join(m.text for m in self.fragment_messages(node_id))

    def fragment_words(self, node_id: str) -> set[str]:
        """The content words of a fragment's messages, each once: what its document frequencies count."""
        return message_words(self.fragment_messages(node_id))

    def entity_fragment_counts(self) -> dict[str, int]:
        """Entity id -> number of ``mentions`` edges into it (read straight off the adjacency)."""
        g, key = self.graph.g, EdgeKind.MENTIONS.value
        return {
            e.id: sum(1 for keyed in g._pred[e.id].values() if key in keyed)
            for e in self.graph.nodes(NodeKind.ENTITY)
        }

    def node(self, node_id: str) -> Node:
        """``graph.get(node_id)`` without the networkx view (hot loops of retrieval); KeyError if absent."""
        return self.graph.g._node[node_id]["node"]

    def parent_id(self, node_id: str) -> str | None:
        """``graph.parent(node_id).id`` (the first ``belongs_to`` target), without building Edge lists."""
        key = EdgeKind.BELONGS_TO.value
        for dst, keyed in self.graph.g._succ[node_id].items():
            if key in keyed:
                return dst
        return None

    # The offline builder's incremental views (indexes/incremental.py): built from the graph on
    # first use, kept by the builder's writes, built again after any other change to the state.
    def build_index(self, *, starting: bool = False) -> BuildIndex:
        """This state's :class:`~.indexes.incremental.BuildIndex`. ``starting``: a builder write
        begins, so check it against the state even if the last write never settled."""
        idx = self.__dict__.get("_build_index")
        if idx is None or ((starting or not idx.ingesting) and not idx.matches(self)):
            idx = BuildIndex(self)
            self.__dict__["_build_index"] = idx
        return idx

    def child_count(self, node_id: str) -> int:
        """``len(graph.children(node_id))`` without building Edge and Node lists."""
        key = EdgeKind.BELONGS_TO.value
        return sum(1 for keyed in self.graph.g._pred[node_id].values() if key in keyed)

    def mentioned_ids(self, node_id: str) -> list[str]:
        """Targets of the node's ``mentions`` edges, without building Edge lists."""
        key = EdgeKind.MENTIONS.value
        return [dst for dst, keyed in self.graph.g._succ[node_id].items() if key in keyed]
