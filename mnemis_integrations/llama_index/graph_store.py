"""``MnemisPropertyGraphStore``: a Mnemis memory graph as a LlamaIndex ``PropertyGraphStore``,
and ``MnemisPGRetriever``, the sub-retriever that answers with Mnemis's own dual-path search."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.graph_stores.types import (
    ChunkNode,
    EntityNode,
    LabelledNode,
    PropertyGraphStore,
    Relation,
    Triplet,
)
from llama_index.core.indices.property_graph.sub_retrievers.base import BasePGRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import VectorStoreQuery

from ..core.model import Edge, Node, NodeKind
from ..errors import NamespaceNotFoundError
from ._convert import (
    DEFAULT_ENTITY_LABEL,
    LABEL_PROPERTY,
    edge_kind_for_label,
    entity_node_id,
    kind_for_chunk,
    llama_id,
    matches_properties,
    node_view,
    relation_label,
    relation_properties,
    short_label,
    split_node_properties,
    split_relation_properties,
)
from .retriever import search_kwargs, to_node_with_score

if TYPE_CHECKING:
    from ..core.engine import MnemisMemory
    from ..core.graph import MemoryGraph

__all__ = ["MnemisPGRetriever", "MnemisPropertyGraphStore"]

# Whether the core dataclasses carry a ``properties`` dict. Without it, the caller's own
# properties live in this store object only (see ``_Props``) and do not survive a restart.
_NODE_HAS_PROPERTIES = "properties" in {f.name for f in dataclasses.fields(Node)}
_EDGE_HAS_PROPERTIES = "properties" in {f.name for f in dataclasses.fields(Edge)}


def _edge_key(edge: Edge) -> tuple[str, str, str]:
    return edge.src, edge.dst, f"{edge.kind.value}:{edge.label}"


class _Props:
    """The caller's own node and relation properties: on the core objects when they have a
    ``properties`` field, else in a side table held by the store (process lifetime only)."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: dict[tuple[str, str, str], dict[str, Any]] = {}

    def of_node(self, node: Node) -> dict[str, Any]:
        if _NODE_HAS_PROPERTIES:
            return dict(node.properties or {})  # type: ignore[attr-defined]
        return dict(self.nodes.get(node.id, {}))

    def with_node(self, node: Node, own: dict[str, Any]) -> Node:
        if _NODE_HAS_PROPERTIES:
            return dataclasses.replace(node, properties=own)  # type: ignore[call-arg]
        self.nodes[node.id] = own
        return node

    def of_edge(self, edge: Edge) -> dict[str, Any]:
        if _EDGE_HAS_PROPERTIES:
            return dict(edge.properties or {})  # type: ignore[attr-defined]
        return dict(self.edges.get(_edge_key(edge), {}))

    def with_edge(self, edge: Edge, own: dict[str, Any]) -> Edge:
        if _EDGE_HAS_PROPERTIES:
            return dataclasses.replace(edge, properties=own)  # type: ignore[call-arg]
        self.edges[_edge_key(edge)] = own
        return edge

    def forget_node(self, node_id: str) -> None:
        self.nodes.pop(node_id, None)
        for key in [k for k in self.edges if node_id in (k[0], k[1])]:
            del self.edges[key]

    def forget_edge(self, edge: Edge) -> None:
        self.edges.pop(_edge_key(edge), None)


class MnemisPropertyGraphStore(PropertyGraphStore):
    """One namespace of a :class:`~mnemis_integrations.MnemisMemory` as a LlamaIndex property graph.

    Mapping:
        * ``entity`` nodes are ``EntityNode`` objects: ``name`` is the entity's label and, as in
          every LlamaIndex store, also its id. An ``EntityNode`` written with a label other than
          ``"entity"`` (``"PERSON"``) keeps that label.
        * ``concept``, ``subtopic``, ``fragment`` and ``archive`` nodes are ``ChunkNode`` objects:
          id is the Mnemis node id, label is the kind, text is the summary line. A ``ChunkNode``
          written with another label (``"text_chunk"``, from ``upsert_llama_nodes``) becomes a
          fragment that keeps its label, text and properties.
        * a labelled entity relation is a ``Relation`` with that label; structural edges are the
          relations ``BELONGS_TO`` (child -> parent), ``MENTIONS`` (fragment -> entity),
          ``UPDATES`` (new -> old), ``REFERENCES`` and ``CONTRADICTS``. Writing a relation with one
          of these labels writes that structural edge.
        * node fields are properties: ``node_id``, ``kind`` and ``status`` always; ``keywords``,
          ``aliases``, ``source_ids``, ``summary`` (entities) and the times ``created_at``,
          ``event_time`` and ``valid_until`` (ISO strings) when set. Writing one of the field
          properties writes the field (an unknown ``status`` raises ``ValueError``); ``node_id``,
          ``kind`` and ``namespace`` are read-only. Every other property is kept as given.

    Behaviour worth knowing:
        * ``get_rel_map`` walks relations in both directions, keeps each triplet in its stored
          direction, and never follows ``MENTIONS`` (as ``Neo4jPropertyGraphStore`` does), so the
          neighbourhood of an entity is other entities, not every fragment naming it. Change
          ``rel_map_skips`` to follow them.
        * ``vector_query`` is not supported (``supports_vector_queries = False``): the query
          embedding LlamaIndex sends is from another model than the memory's vectors. Retrieve
          with :class:`MnemisPGRetriever`, which runs Mnemis's fused semantic + relation search.
          ``structured_query`` is not supported either: there is no query language.
        * Nodes written here are stored in the memory graph but not embedded (Mnemis embeds
          messages): the relation path reaches them through their relations; for semantic
          recall add the text with ``memory.add_messages``.
        * ``persist`` does nothing: the memory persists itself (``MnemisMemory(path=...)``).
        * ``delete`` with no argument deletes nothing (the reference store would delete every node).

    Args:
        memory: the memory whose graph this is.
        namespace: whose graph; ``None`` uses the memory's default namespace.
        rel_map_skips: relation labels ``get_rel_map`` never follows, on top of ``ignore_rels``.

    Example:
        .. code-block:: python

            from llama_index.core import PropertyGraphIndex
            from mnemis_integrations.llama_index import MnemisPGRetriever, MnemisPropertyGraphStore

            store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
            index = PropertyGraphIndex.from_existing(property_graph_store=store, embed_kg_nodes=False)
            retriever = index.as_retriever(sub_retrievers=[MnemisPGRetriever(store, similarity_top_k=5)])
    """

    supports_structured_queries: bool = False
    supports_vector_queries: bool = False

    def __init__(
        self,
        memory: MnemisMemory,
        namespace: str | None = None,
        rel_map_skips: Sequence[str] = ("MENTIONS",),
    ) -> None:
        self.memory = memory
        self.namespace = namespace
        self.rel_map_skips = tuple(rel_map_skips)
        self._props = _Props()

    @property
    def client(self) -> Any:
        """The wrapped :class:`MnemisMemory`."""
        return self.memory

    # ----- plumbing -----
    def _ns_kwargs(self) -> dict[str, Any]:
        return {} if self.namespace is None else {"namespace": self.namespace}

    def _read_graph(self) -> MemoryGraph | None:
        try:
            return self.memory.graph(**self._ns_kwargs())
        except NamespaceNotFoundError:
            return None

    def _write(self, change: Callable[[MemoryGraph], None]) -> None:
        # apply, not edit: a write refused because another writer came first runs again on fresh state
        self.memory.apply(change, **self._ns_kwargs())

    def _to_llama(self, node: Node) -> LabelledNode:
        view = node_view(node, self._props.of_node(node))
        if view["type"] == "entity":
            return EntityNode(name=view["name"], label=view["label"], properties=view["properties"])
        return ChunkNode(
            text=view["text"], id_=view["id"], label=view["label"], properties=view["properties"]
        )

    def _triplets(self, g: MemoryGraph, edges: Sequence[Edge]) -> Iterator[Triplet]:
        cache: dict[str, LabelledNode] = {}

        def lnode(node_id: str) -> LabelledNode:
            if node_id not in cache:
                cache[node_id] = self._to_llama(g.get(node_id))
            return cache[node_id]

        for edge in edges:
            src, dst = lnode(edge.src), lnode(edge.dst)
            rel = Relation(
                label=relation_label(edge),
                source_id=src.id,
                target_id=dst.id,
                properties=relation_properties(edge, self._props.of_edge(edge)),
            )
            yield src, rel, dst

    @staticmethod
    def _by_llama_id(g: MemoryGraph) -> dict[str, list[Node]]:
        index: dict[str, list[Node]] = {}
        for node in g.nodes():
            index.setdefault(llama_id(node), []).append(node)
        return index

    # ----- reads -----
    def get(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        """Nodes whose LlamaIndex id is in ``ids`` and whose properties include all of ``properties``;
        every node when neither is given."""
        g = self._read_graph()
        if g is None:
            return []
        wanted = set(ids) if ids else None
        out = []
        for node in g.nodes():
            if wanted is not None and llama_id(node) not in wanted:
                continue
            lnode = self._to_llama(node)
            if matches_properties(lnode.properties, properties):
                out.append(lnode)
        return out

    def get_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        """Triplets touching ``entity_names``/``ids`` (either end), with a label in ``relation_names``,
        where the relation or an end has all of ``properties``. No filter at all gives ``[]``."""
        if not (entity_names or relation_names or properties or ids):
            return []
        g = self._read_graph()
        if g is None:
            return []
        ends = set(entity_names or []) | set(ids or [])
        rels = set(relation_names or [])
        out = []
        for t in self._triplets(g, g.edges()):
            if ends and t[0].id not in ends and t[2].id not in ends:
                continue
            if rels and t[1].label not in rels:
                continue
            if properties and not any(matches_properties(x.properties, properties) for x in t):
                continue
            out.append(t)
        return out

    def get_rel_map(
        self,
        graph_nodes: list[LabelledNode],
        depth: int = 2,
        limit: int = 30,
        ignore_rels: list[str] | None = None,
    ) -> list[Triplet]:
        """Triplets within ``depth`` hops of ``graph_nodes``, nearest first, at most ``limit``.

        Walks relations in both directions and returns each in its stored direction; skips
        ``ignore_rels`` and :attr:`rel_map_skips`.
        """
        g = self._read_graph()
        if g is None or not graph_nodes:
            return []
        index = self._by_llama_id(g)
        skip = set(ignore_rels or []) | set(self.rel_map_skips)
        frontier = [n.id for gn in graph_nodes for n in index.get(gn.id, [])]
        visited = set(frontier)
        seen_edges: set[tuple[str, str, str]] = set()
        found: list[Edge] = []
        for _ in range(depth):
            nxt: list[str] = []
            for node_id in frontier:
                for edge in [*g.out_edges(node_id), *g.in_edges(node_id)]:
                    key = _edge_key(edge)
                    if key in seen_edges or relation_label(edge) in skip:
                        continue
                    seen_edges.add(key)
                    found.append(edge)
                    other = edge.dst if edge.src == node_id else edge.src
                    if other not in visited:
                        visited.add(other)
                        nxt.append(other)
            frontier = nxt
            if not frontier or len(found) >= limit:
                break
        return list(self._triplets(g, found[:limit]))

    def get_schema(self, refresh: bool = False) -> dict[str, list[str]]:
        """The node labels and relation labels present, sorted."""
        g = self._read_graph()
        if g is None:
            return {"node_labels": [], "relation_labels": []}
        return {
            "node_labels": sorted({self._to_llama(n).label for n in g.nodes()}),
            "relation_labels": sorted({relation_label(e) for e in g.edges()}),
        }

    # ----- writes -----
    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """Add nodes, or update the node with the same LlamaIndex id (properties are merged)."""
        if not nodes:
            return
        def change(g: MemoryGraph) -> None:
            index = self._by_llama_id(g)
            for lnode in nodes:
                if isinstance(lnode, EntityNode):
                    node = self._upsert_entity(g, index, lnode)
                elif isinstance(lnode, ChunkNode):
                    node = self._upsert_chunk(g, lnode)
                else:
                    raise TypeError(f"cannot store {type(lnode).__name__}: use EntityNode or ChunkNode")
                lid = llama_id(node)
                index[lid] = [n for n in index.get(lid, []) if n.id != node.id] + [node]

        self._write(change)

    def _upsert_entity(self, g: MemoryGraph, index: dict[str, list[Node]], lnode: EntityNode) -> Node:
        fields, own = split_node_properties(lnode.properties)
        if lnode.label != DEFAULT_ENTITY_LABEL:
            own[LABEL_PROPERTY] = lnode.label
        existing = next((n for n in index.get(lnode.id, []) if n.kind == NodeKind.ENTITY), None)
        if existing is None:
            node = Node(
                id=entity_node_id(lnode.name), kind=NodeKind.ENTITY, label=lnode.name, namespace=g.namespace
            )
            node = dataclasses.replace(node, **fields)
        else:
            node = dataclasses.replace(existing, **fields)
            own = {**self._props.of_node(existing), **own}
        node = self._props.with_node(node, own)
        g.add_node(node)
        return node

    def _upsert_chunk(self, g: MemoryGraph, lnode: ChunkNode) -> Node:
        fields, own = split_node_properties(lnode.properties)
        existing = g.get(lnode.id) if g.has(lnode.id) else None
        kind = kind_for_chunk(lnode.label, lnode.properties, existing.kind if existing else None)
        if lnode.label != kind.value:
            own[LABEL_PROPERTY] = lnode.label
        if existing is None:
            node = Node(id=lnode.id, kind=kind, label=short_label(lnode.text), namespace=g.namespace)
        else:
            node = dataclasses.replace(existing, kind=kind)
            own = {**self._props.of_node(existing), **own}
        node = dataclasses.replace(
            node, summary=lnode.text, **{k: v for k, v in fields.items() if k != "summary"}
        )
        node = self._props.with_node(node, own)
        g.add_node(node)
        return node

    def upsert_relations(self, relations: list[Relation]) -> None:
        """Add relations, or merge properties into the same (source, label, target) relation.

        An end that does not exist yet is created as an entity named by the id, as LlamaIndex's
        own stores do.
        """
        if not relations:
            return
        def change(g: MemoryGraph) -> None:
            index = self._by_llama_id(g)

            def resolve(lid: str) -> Node:
                if index.get(lid):
                    return index[lid][0]
                node = Node(id=entity_node_id(lid), kind=NodeKind.ENTITY, label=lid, namespace=g.namespace)
                g.add_node(node)
                index[lid] = [node]
                return node

            for rel in relations:
                src, dst = resolve(rel.source_id), resolve(rel.target_id)
                kind, label = edge_kind_for_label(rel.label)
                fields, own = split_relation_properties(rel.properties)
                edge = Edge(src.id, dst.id, kind, label=label, **fields)
                old = next(
                    (e for e in g.out_edges(src.id, kind) if e.dst == dst.id and e.label == label), None
                )
                if old is not None:
                    own = {**self._props.of_edge(old), **own}
                    edge = dataclasses.replace(old, **fields)
                g.add_edge(self._props.with_edge(edge, own))

        self._write(change)

    def delete(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> None:
        """Delete relations labelled ``relation_names`` or having all of ``properties``, and nodes
        named ``entity_names``, with a LlamaIndex id in ``ids`` or having all of ``properties``
        (with their relations). Raw messages are never deleted."""
        if not (entity_names or relation_names or properties or ids):
            return
        if self._read_graph() is None:
            return
        def change(g: MemoryGraph) -> None:
            rels = set(relation_names or [])
            for edge in g.edges():
                hit = relation_label(edge) in rels or (
                    properties
                    and matches_properties(relation_properties(edge, self._props.of_edge(edge)), properties)
                )
                if hit:
                    g.remove_edge(edge.src, edge.dst, edge.kind, edge.label)
                    self._props.forget_edge(edge)
            names = set(entity_names or [])
            wanted = set(ids or [])
            for node in g.nodes():
                lid = llama_id(node)
                hit = (
                    (node.kind == NodeKind.ENTITY and lid in names)
                    or lid in wanted
                    or (properties and matches_properties(self._to_llama(node).properties, properties))
                )
                if hit:
                    g.remove_node(node.id)
                    self._props.forget_node(node.id)

        self._write(change)

    # ----- unsupported -----
    def structured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError(
            "MnemisPropertyGraphStore has no query language; use get, get_triplets or get_rel_map, "
            "or MnemisPGRetriever / memory.search for recall"
        )

    def vector_query(self, query: VectorStoreQuery, **kwargs: Any) -> tuple[list[LabelledNode], list[float]]:
        raise NotImplementedError(
            "MnemisPropertyGraphStore does not answer vector queries (LlamaIndex's query embedding is not "
            "from the memory's embedder); retrieve with MnemisPGRetriever, which runs Mnemis's fused search"
        )


class MnemisPGRetriever(BasePGRetriever):
    """A property-graph sub-retriever that answers with Mnemis's dual-path search.

    The semantic path and the relation path run and are fused inside Mnemis; ``PGRetriever``
    (what ``PropertyGraphIndex.as_retriever`` returns) only de-duplicates. Results are the same
    ``NodeWithScore`` objects :class:`~.retriever.MnemisRetriever` returns, with path, scores and
    provenance in metadata.

    Args:
        graph_store: the :class:`MnemisPropertyGraphStore` whose memory and namespace to search.
        similarity_top_k: how many nodes to return at most.
        include_text: add LlamaIndex source text for nodes that have a ``ref_doc_id`` (hits
            already carry their messages, so off by default).
    """

    def __init__(
        self,
        graph_store: MnemisPropertyGraphStore,
        similarity_top_k: int = 5,
        include_text: bool = False,
        **kwargs: Any,
    ) -> None:
        if not isinstance(graph_store, MnemisPropertyGraphStore):
            raise TypeError(
                f"MnemisPGRetriever needs a MnemisPropertyGraphStore, not {type(graph_store).__name__}"
            )
        if similarity_top_k < 1:
            raise ValueError(f"similarity_top_k must be at least 1, not {similarity_top_k}")
        self.similarity_top_k = similarity_top_k
        super().__init__(graph_store=graph_store, include_text=include_text, **kwargs)

    @property
    def _mnemis_store(self) -> MnemisPropertyGraphStore:
        return self._graph_store  # type: ignore[return-value]

    def retrieve_from_graph(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        store = self._mnemis_store
        try:
            hits = store.memory.search(
                query_bundle.query_str, **search_kwargs(self.similarity_top_k, store.namespace)
            )
        except NamespaceNotFoundError:
            return []
        return [to_node_with_score(h) for h in hits[: self.similarity_top_k]]

    async def aretrieve_from_graph(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        store = self._mnemis_store
        try:
            hits = await store.memory.asearch(
                query_bundle.query_str, **search_kwargs(self.similarity_top_k, store.namespace)
            )
        except NamespaceNotFoundError:
            return []
        return [to_node_with_score(h) for h in hits[: self.similarity_top_k]]
