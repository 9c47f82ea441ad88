"""Documents through a ``PropertyGraphIndex`` on the Mnemis store: ingested as memory, deleted
whole by ``delete_ref_doc``, retrieved as readable text, searched by vector.

Before (issue #14): documents inserted through the index were stored as graph nodes only, so
Mnemis never found them; ``delete_ref_doc`` left the placeholder entity of the document and the
extracted entities behind; ``as_retriever()`` answered with triplets of internal ids; and
``vector_query`` was refused.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import pytest
from llama_fakes import make_memory, offline_settings
from llama_index.core import PropertyGraphIndex
from llama_index.core.graph_stores.types import (
    KG_NODES_KEY,
    KG_RELATIONS_KEY,
    TRIPLET_SOURCE_KEY,
    ChunkNode,
    EntityNode,
    Relation,
)
from llama_index.core.indices.property_graph import ImplicitPathExtractor, VectorContextRetriever
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, Document, TextNode, TransformComponent
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.model import Node, NodeKind
from mnemis_integrations.errors import DuplicateMessageError, InvalidMessageError, InvalidQueryError
from mnemis_integrations.llama_index import (
    MnemisEmbedding,
    MnemisPGRetriever,
    MnemisPropertyGraphIndex,
    MnemisPropertyGraphStore,
    MnemisRetriever,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)

REFUND = (
    "The refund for order 7 bounced at the bank on Monday. "
    "Logan escalated the bounced refund to the payments team."
)
LUNCH = "Lunch on Friday is at the noodle bar with the design team."


class _FactExtractor(TransformComponent):
    """What an LLM extractor would do, scripted: for each chunk holding a cue, one PERSON
    entity and one relation to an object it does not declare (LlamaIndex then makes a
    placeholder entity for it). Keeps the extractions earlier extractors put on the chunk."""

    facts: dict = {}

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in nodes:
            entities = node.metadata.pop(KG_NODES_KEY, [])
            relations = node.metadata.pop(KG_RELATIONS_KEY, [])
            for cue, (subject, label, obj) in self.facts.items():
                if cue in node.get_content():
                    entities.append(EntityNode(label="PERSON", name=subject))
                    relations.append(Relation(label=label, source_id=subject, target_id=obj))
            node.metadata[KG_NODES_KEY] = entities
            node.metadata[KG_RELATIONS_KEY] = relations
        return nodes


FACTS = _FactExtractor(
    facts={"Logan": ("Logan", "ESCALATED_TO", "Payments team"), "noodle": ("Ann", "BOOKED", "Noodle bar")}
)


@pytest.fixture(autouse=True)
def _offline():
    with offline_settings():
        yield


@pytest.fixture
def mem():
    return make_memory()


@pytest.fixture
def store(mem) -> MnemisPropertyGraphStore:
    return MnemisPropertyGraphStore(memory=mem, namespace="docs", clock=lambda: NOW)


def _docs() -> list[Document]:
    return [
        Document(text=REFUND, id_="doc-1", metadata={"author": "ann", "date": "2024-05-01"}),
        Document(text=LUNCH, id_="doc-2", metadata={"author": "bob"}),
    ]


def _index(store: MnemisPropertyGraphStore, **kwargs: Any) -> PropertyGraphIndex:
    return PropertyGraphIndex.from_documents(
        _docs(),
        property_graph_store=store,
        kg_extractors=[FACTS, ImplicitPathExtractor()],
        embed_kg_nodes=False,
        **kwargs,
    )


def _chunk_ids(store: MnemisPropertyGraphStore, ref_doc_id: str) -> set[str]:
    return {n.id for n in store.get(properties={"ref_doc_id": ref_doc_id})}


# ---------------------------------------------------------------------------------------------
# Documents become memory
# ---------------------------------------------------------------------------------------------


def test_documents_inserted_through_the_index_are_searchable_memory(store, mem):
    _index(store)
    (refund_chunk,) = _chunk_ids(store, "doc-1")
    (lunch_chunk,) = _chunk_ids(store, "doc-2")

    top = mem.search("refund bounced at the bank", k=1, namespace="docs")[0]
    assert top.source_ids == (refund_chunk,) and "bounced at the bank" in top.text
    assert mem.search("noodle bar lunch", k=1, namespace="docs")[0].source_ids == (lunch_chunk,)

    messages = {m.id: m for m in mem.messages("docs")}
    assert messages[refund_chunk].speaker == "document" and messages[refund_chunk].text == REFUND
    assert messages[refund_chunk].timestamp == datetime(2024, 5, 1, tzinfo=timezone.utc)  # from metadata
    assert messages[lunch_chunk].timestamp == NOW  # none in metadata: the store's clock
    # the document's metadata stays on the chunk node, and the text node comes back whole
    (chunk,) = store.get(ids=[refund_chunk])
    assert isinstance(chunk, ChunkNode) and chunk.properties["author"] == "ann"
    assert [n.get_content() for n in store.get_llama_nodes([refund_chunk])] == [REFUND]

    nodes = MnemisRetriever(memory=mem, namespace="docs", similarity_top_k=1).retrieve("refund bounced")
    assert nodes[0].node.metadata["source_ids"] == [refund_chunk]


def test_index_insert_adds_a_searchable_document(store, mem):
    index = _index(store)
    index.insert(Document(text="The quarterly offsite moved to the lighthouse hotel.", id_="doc-3"))
    (chunk,) = _chunk_ids(store, "doc-3")
    assert mem.search("offsite lighthouse hotel", k=1, namespace="docs")[0].source_ids == (chunk,)


def test_text_node_stored_again_with_other_text_replaces_its_message(store, mem):
    store.upsert_llama_nodes([TextNode(id_="n1", text="The deploy window is Tuesday night.")])
    store.upsert_llama_nodes([TextNode(id_="n1", text="The deploy window is Tuesday night.")])  # no-op
    store.upsert_llama_nodes([TextNode(id_="n1", text="The deploy window moved to Thursday morning.")])

    assert [(m.id, m.text) for m in mem.messages("docs")] == [
        ("n1", "The deploy window moved to Thursday morning.")
    ]
    assert all("Tuesday" not in h.text for h in mem.search("deploy window Tuesday", namespace="docs"))
    assert [n.text for n in store.get(ids=["n1"])] == ["The deploy window moved to Thursday morning."]


def test_unreadable_time_in_metadata_is_refused_and_writes_nothing(store, mem):
    with pytest.raises(InvalidMessageError, match="metadata 'date'"):
        store.upsert_llama_nodes([TextNode(id_="n1", text="Launch day.", metadata={"date": "next March"})])
    assert store.get() == [] and "docs" not in mem.namespaces()


def test_text_node_with_the_id_of_a_chat_message_is_refused(mem):
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    with pytest.raises(DuplicateMessageError):
        store.upsert_llama_nodes([TextNode(id_="m1", text="A document that reuses a chat message id.")])
    assert mem.messages("u1")[0].text.startswith("My refund for order 42")


# ---------------------------------------------------------------------------------------------
# delete_ref_doc leaves nothing of the document
# ---------------------------------------------------------------------------------------------


def test_delete_ref_doc_leaves_nothing_of_the_document(store, mem):
    index = PropertyGraphIndex.from_documents(
        _docs(),
        property_graph_store=store,
        kg_extractors=[FACTS, ImplicitPathExtractor()],
        embed_kg_nodes=False,
        transformations=[SentenceSplitter(chunk_size=24, chunk_overlap=0)],
    )
    gone = _chunk_ids(store, "doc-1")
    assert len(gone) >= 2  # several chunks, linked to the document's placeholder entity by SOURCE
    assert {n.name for n in store.get(ids=["doc-1", "Logan", "Payments team"])} == {
        "doc-1",
        "Logan",
        "Payments team",
    }

    index.delete_ref_doc("doc-1")

    assert store.get(properties={"ref_doc_id": "doc-1"}) == []
    assert store.get(ids=["doc-1", "Logan", "Payments team", *gone]) == []  # placeholder and extractions too
    g = mem.graph("docs")
    assert not any(e.properties.get(TRIPLET_SOURCE_KEY) in gone for e in g.edges())
    assert not any(set(n.source_ids) & gone for n in g.nodes())
    assert not gone & {m.id for m in mem.messages("docs")}
    for hit in mem.search("refund bounced at the bank Logan", k=10, namespace="docs"):
        assert "refund" not in hit.text and not set(hit.source_ids) & gone
    # the other document is untouched
    (lunch_chunk,) = _chunk_ids(store, "doc-2")
    assert {n.name for n in store.get(ids=["doc-2", "Ann", "Noodle bar"])} == {"doc-2", "Ann", "Noodle bar"}
    assert mem.search("noodle bar lunch", k=1, namespace="docs")[0].source_ids == (lunch_chunk,)


def test_an_entity_another_document_still_relates_to_stays(store, mem):
    index = _index(store)
    (logan,) = store.get(ids=["Logan"])
    index.insert(
        Document(text="Logan approved the noodle bar budget.", id_="doc-3")
    )  # Logan ESCALATED_TO again
    assert logan.properties[TRIPLET_SOURCE_KEY] in _chunk_ids(store, "doc-1")  # extracted from doc-1 first

    index.delete_ref_doc("doc-1")
    assert [n.name for n in store.get(ids=["Logan", "Payments team"])] == ["Logan", "Payments team"]
    assert ("Logan", "ESCALATED_TO", "Payments team") in {
        (s.id, r.label, o.id) for s, r, o in store.get_triplets(entity_names=["Logan"])
    }


def test_deleting_an_entity_forgets_no_message(store, mem):
    _index(store)
    before = [m.id for m in mem.messages("docs")]
    store.delete(entity_names=["Ann"])
    assert [m.id for m in mem.messages("docs")] == before and store.get(ids=["Ann"]) == []


# ---------------------------------------------------------------------------------------------
# Retrieval answers with memory text
# ---------------------------------------------------------------------------------------------


def test_mnemis_index_retrieves_readable_memory_text_by_default(store, mem):
    index = MnemisPropertyGraphIndex.from_documents(_docs(), property_graph_store=store)
    (refund_chunk,) = _chunk_ids(store, "doc-1")

    nodes = index.as_retriever(similarity_top_k=2).retrieve("refund bounced at the bank")
    hits = mem.search("refund bounced at the bank", k=2, namespace="docs")
    assert [n.node.get_content() for n in nodes] == [h.text for h in hits]
    assert REFUND in nodes[0].node.get_content() and nodes[0].node.metadata["source_ids"] == [refund_chunk]
    assert not any(" -> " in n.node.get_content() for n in nodes)  # no id triplets

    answer = index.as_query_engine(llm=MockLLM(), similarity_top_k=2).query("What happened to the refund?")
    assert "bounced at the bank" in str(answer)


def test_plain_index_retrieves_memory_text_through_the_mnemis_sub_retriever(store):
    """The documented way for a plain ``PropertyGraphIndex``, whose own default no store can change."""
    index = _index(store)
    retriever = index.as_retriever(sub_retrievers=[MnemisPGRetriever(store, similarity_top_k=1)])
    assert REFUND in retriever.retrieve("refund bounced at the bank")[0].node.get_content()


def test_mnemis_index_over_an_existing_store_and_on_another_store(store, mem):
    _index(store)
    index = MnemisPropertyGraphIndex.from_existing(property_graph_store=store)
    assert (
        "noodle bar"
        in index.as_retriever(similarity_top_k=1).retrieve("lunch noodle bar")[0].node.get_content()
    )
    with pytest.raises(TypeError, match="MnemisPropertyGraphStore"):
        MnemisPropertyGraphIndex(nodes=[])


# ---------------------------------------------------------------------------------------------
# vector_query
# ---------------------------------------------------------------------------------------------


def test_vector_query_returns_the_nearest_memory_nodes_with_their_cosines(mem):
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    assert store.supports_vector_queries
    qvec = mem.embedder.embed_queries(["refund for order 42 at the bank"])[0]

    nodes, scores = store.vector_query(VectorStoreQuery(query_embedding=qvec.tolist(), similarity_top_k=3))
    assert len(nodes) == 3 and scores == sorted(scores, reverse=True)
    ids = [n.id for n in nodes]
    assert (
        "f:m1" in ids[:2] and "f:m3" not in ids[:2]
    )  # the refund fragment (or its one-child subtopic, a tie)
    assert nodes[ids.index("f:m1")].properties["source_ids"] == ["m1", "m2"]
    assert [n.id for n, _ in zip(nodes, scores, strict=True)] == [
        i for i, _ in mem.nearest_nodes(vector=qvec, k=3, namespace="u1")
    ]
    # the same query as text is embedded by the memory: same answer
    by_text = store.vector_query(
        VectorStoreQuery(query_str="refund for order 42 at the bank", similarity_top_k=3)
    )
    assert [n.id for n in by_text[0]] == [n.id for n in nodes] and by_text[1] == pytest.approx(scores)


def test_vector_query_narrows_by_node_ids_and_property_filters(mem):
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    query = "refund for order 42"
    subtopics = MetadataFilters(
        filters=[MetadataFilter(key="kind", value="subtopic", operator=FilterOperator.EQ)]
    )
    nodes, _ = store.vector_query(VectorStoreQuery(query_str=query, similarity_top_k=5, filters=subtopics))
    assert nodes and all(n.properties["kind"] == "subtopic" for n in nodes)

    nodes, _ = store.vector_query(VectorStoreQuery(query_str=query, similarity_top_k=5, node_ids=["f:m3"]))
    assert [n.id for n in nodes] == ["f:m3"]

    not_equal = MetadataFilters(filters=[MetadataFilter(key="kind", value="x", operator=FilterOperator.NE)])
    with pytest.raises(NotImplementedError, match="key == value"):
        store.vector_query(VectorStoreQuery(query_str=query, filters=not_equal))


def test_vector_query_refuses_an_embedding_from_another_model(mem):
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    with pytest.raises(InvalidQueryError, match="8 dimensions.*256"):
        store.vector_query(VectorStoreQuery(query_embedding=[0.1] * 8, similarity_top_k=2))
    assert store.vector_query(VectorStoreQuery(query_str="x", similarity_top_k=2)) != ([], [])
    assert MnemisPropertyGraphStore(memory=mem, namespace="nobody").vector_query(
        VectorStoreQuery(query_str="refund", similarity_top_k=2)
    ) == ([], [])


def test_vector_context_retriever_runs_on_the_store(mem):
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    sub = VectorContextRetriever(
        store, embed_model=MnemisEmbedding(mem.embedder), similarity_top_k=1, include_text=False
    )
    (nearest,), _ = store.vector_query(
        VectorStoreQuery(query_str="refund for order 42 at the bank", similarity_top_k=1)
    )
    texts = [n.node.get_content() for n in sub.retrieve("refund for order 42 at the bank")]
    assert texts and all(nearest.id in t.split(" -> ") for t in texts)  # triplets around the vector hit


# ---------------------------------------------------------------------------------------------
# Every write is a conditional write of the memory
# ---------------------------------------------------------------------------------------------

_RACED_WRITES = {
    "upsert_nodes": (
        lambda s: s.upsert_nodes([EntityNode(name="Bea")]),
        lambda s, m: [n.name for n in s.get(ids=["Bea"])] == ["Bea"],
    ),
    "upsert_relations": (
        lambda s: s.upsert_relations([Relation(label="KNOWS", source_id="Ann", target_id="Bea")]),
        lambda s, m: (
            [(a.id, r.label, b.id) for a, r, b in s.get_triplets(relation_names=["KNOWS"])]
            == [("Ann", "KNOWS", "Bea")]
        ),
    ),
    "delete": (
        lambda s: s.delete(entity_names=["Ann"]),
        lambda s, m: s.get(ids=["Ann"]) == [],
    ),
    "upsert_llama_nodes": (
        lambda s: s.upsert_llama_nodes([TextNode(id_="t2", text="The budget review moved to Friday.")]),
        lambda s, m: (
            "t2" in {x.id for x in m.messages("docs")} and [n.id for n in s.get(ids=["t2"])] == ["t2"]
        ),
    ),
    "delete a text node": (
        lambda s: s.delete(ids=["t1"]),
        lambda s, m: "t1" not in {x.id for x in m.messages("docs")} and s.get(ids=["t1"]) == [],
    ),
}


@pytest.mark.parametrize("name", list(_RACED_WRITES))
def test_a_write_another_writer_beat_runs_again_on_the_fresh_graph(name, tmp_path, monkeypatch):
    """Two processes on one file: the other writes between this store's read and its write.
    The store's write is refused (compare-and-swap on the namespace version) and built again on
    the fresh graph, so neither change is lost and nothing is applied over stale state."""
    write, applied = _RACED_WRITES[name]
    path = str(tmp_path / "shared.db")
    mine = make_memory(path, messages=())
    store = MnemisPropertyGraphStore(memory=mine, namespace="docs", clock=lambda: NOW)
    store.upsert_llama_nodes(
        [
            TextNode(id_="t1", text="The offsite is at the lighthouse."),
            TextNode(id_="t0", text="Ann plans it."),
        ]
    )
    store.upsert_nodes([EntityNode(name="Ann")])
    other = make_memory(path, messages=())

    real_write, raced = mine._store.write, []

    def write_after_the_other_writer(*args: Any, **kwargs: Any) -> int:
        if not raced:
            raced.append(True)
            other.apply(lambda g: g.add_node(Node("hand", NodeKind.ENTITY, "Zed", "docs")), namespace="docs")
        return real_write(*args, **kwargs)

    monkeypatch.setattr(mine._store, "write", write_after_the_other_writer)
    write(store)

    reopened = make_memory(path, messages=())
    fresh = MnemisPropertyGraphStore(memory=reopened, namespace="docs")
    assert raced and reopened.graph("docs").has("hand")  # the other writer's change survived
    assert applied(fresh, reopened)  # and so did this store's


# ---------------------------------------------------------------------------------------------
# Writes go through the graph's journal (MnemisMemory.apply_journaled), with apply's results
# ---------------------------------------------------------------------------------------------


def _indexed(store: MnemisPropertyGraphStore) -> PropertyGraphIndex:
    """The test documents through a PropertyGraphIndex over ``store``: chunks, extracted entities
    and relations."""
    splitter = SentenceSplitter(chunk_size=24, chunk_overlap=0, id_func=lambda i, doc: f"{doc.id_}-{i}")
    return PropertyGraphIndex.from_documents(
        _docs(),
        property_graph_store=store,
        kg_extractors=[FACTS, ImplicitPathExtractor()],
        embed_kg_nodes=False,
        transformations=[splitter],
    )


def _every_kind_of_write(store: MnemisPropertyGraphStore) -> None:
    """Documents through an index (chunks, extracted entities and relations), a document stored
    again unchanged and with other text, entities, relations and a deletion, with chat between."""
    index = _indexed(store)
    store.memory.add_messages(
        [{"id": "c1", "speaker": "ann", "text": "Logan says the refund cleared today.", "timestamp": NOW}],
        namespace=store.namespace,
    )
    index.insert(Document(text="Logan approved the noodle bar budget.", id_="doc-3"))
    store.upsert_llama_nodes([TextNode(id_="n1", text="The deploy window is Tuesday night.")])
    store.upsert_llama_nodes([TextNode(id_="n1", text="The deploy window is Tuesday night.")])  # no-op
    store.upsert_llama_nodes([TextNode(id_="n1", text="The deploy window moved to Thursday morning.")])
    store.upsert_nodes(
        [EntityNode(name="Bea", label="PERSON"), ChunkNode(text="A note by hand.", id_="note")]
    )
    store.upsert_relations([Relation(label="KNOWS", source_id="Bea", target_id="Cal")])
    index.delete_ref_doc("doc-2")
    store.memory.add_messages(
        [{"id": "c2", "speaker": "bob", "text": "Bea moved the deploy to Thursday.", "timestamp": NOW}],
        namespace=store.namespace,
    )
    # nodes held before, stored again and deleted (derived at their own cost through the journal)
    store.upsert_nodes(
        [
            EntityNode(name="Bea", label="PERSON", properties={"team": "ops"}),
            EntityNode(name="Logan", label="PERSON", properties={"aliases": []}),
            ChunkNode(text="A note by hand, amended.", id_="note"),
        ]
    )
    store.upsert_llama_nodes([TextNode(id_="n1", text="The deploy window moved to Thursday morning.")])
    store.upsert_relations(
        [Relation(label="KNOWS", source_id="Bea", target_id="Cal", properties={"since": 2020})]
    )
    store.delete(ids=["note"])
    store.delete(entity_names=["Cal"])


def _answer(found: tuple[list, list[float]]) -> tuple[list[str], list[float]]:
    """A ``vector_query`` answer as ids and scores, in its order (equal scores rank by node id)."""
    nodes, scores = found
    return [n.id for n in nodes], scores


def _as_seen(store: MnemisPropertyGraphStore) -> dict:
    mem, ns = store.memory, store.namespace
    queries = ["refund bounced at the bank", "deploy window Thursday", "noodle bar budget", "Bea knows Cal"]
    retriever = MnemisPGRetriever(store, similarity_top_k=5)
    return {
        "graph": mem.graph(ns).to_data(),
        "messages": [m.to_dict() for m in mem.messages(ns)],
        "vector_query": [
            _answer(store.vector_query(VectorStoreQuery(query_str=q, similarity_top_k=8))) for q in queries
        ],
        "retrieved": [
            [(n.node.get_content(), n.score, n.node.metadata["node_id"]) for n in retriever.retrieve(q)]
            for q in queries
        ],
        "triplets": [(a.id, r.label, b.id) for a, r, b in store.get_triplets(entity_names=["Logan", "Bea"])],
    }


def test_writes_through_the_journal_end_as_writes_through_apply(monkeypatch):
    """The same writes into two stores, one forced through ``MnemisMemory.apply`` (which compares
    every node and derives the whole state again after each write): the same graph, messages,
    vector_query answers and retrieved memory."""
    journaled = MnemisPropertyGraphStore(memory=make_memory(), namespace="u1", clock=lambda: NOW)
    applied = MnemisPropertyGraphStore(memory=make_memory(), namespace="u1", clock=lambda: NOW)
    monkeypatch.setattr(applied.memory, "apply_journaled", applied.memory.apply)
    _every_kind_of_write(journaled)
    _every_kind_of_write(applied)
    seen = _as_seen(journaled)
    assert seen == _as_seen(applied)
    assert seen["graph"]["nodes"] and all(hits for hits in seen["retrieved"])


def test_a_documents_chunk_write_another_writer_beat_runs_again_on_the_fresh_graph(tmp_path, monkeypatch):
    """The other process writes between the read and the write of the chunk node itself (the
    document's message is already in): the chunk's write is refused, made again on the fresh graph,
    and the memory answers from that graph as a reopened one does."""
    path = str(tmp_path / "shared.db")
    mine = make_memory(path, messages=())
    store = MnemisPropertyGraphStore(memory=mine, namespace="docs", clock=lambda: NOW)
    store.upsert_llama_nodes([TextNode(id_="t1", text="The offsite is at the lighthouse.")])
    other = make_memory(path, messages=())

    real_write, versions = mine._store.write, []

    def write_after_the_other_writer(namespace: str, delta: Any, expected: int, meta: Any = None) -> int:
        if [n.id for n in delta.graph.nodes] == ["t2"]:  # the chunk node, after its message
            if not versions:
                other.add_messages(
                    [{"id": "o1", "speaker": "bob", "text": "The budget review needs the offsite costs."}],
                    namespace="docs",
                )
                other.apply(
                    lambda g: g.add_node(Node("hand", NodeKind.ENTITY, "Zed", "docs")), namespace="docs"
                )
            versions.append(expected)
        return real_write(namespace, delta, expected, meta)

    monkeypatch.setattr(mine._store, "write", write_after_the_other_writer)
    store.upsert_llama_nodes([TextNode(id_="t2", text="The budget review moved to Friday.")])

    assert len(versions) == 2 and versions[1] > versions[0]  # refused once, then written on the fresh version
    reopened = MnemisPropertyGraphStore(memory=make_memory(path, messages=()), namespace="docs")
    assert mine.graph("docs").to_data() == reopened.memory.graph("docs").to_data()
    assert {"hand", "t2", "o1"} <= {n.id for n in mine.graph("docs").nodes()} | {
        m.id for m in mine.messages("docs")
    }
    for query in ("budget review Friday", "offsite lighthouse", "Zed"):
        assert _answers(store, query) == _answers(reopened, query)


def _answers(store: MnemisPropertyGraphStore, query: str) -> tuple:
    nodes, scores = store.vector_query(VectorStoreQuery(query_str=query, similarity_top_k=6))
    hits = store.memory.search(query, k=6, namespace=store.namespace)
    return [n.id for n in nodes], scores, [(h.node_id, h.score, h.text) for h in hits]


# ---------------------------------------------------------------------------------------------
# Names are looked up through the graph's own index (MemoryGraph.nodes_keyed), with a scan's results
# ---------------------------------------------------------------------------------------------

# Names a scan and the index may tell apart: an entity the builder made from chat ("Acme"), one
# whose name holds a quote (its LlamaIndex id has a space there), a chunk and an entity sharing a
# name, an entity renamed in place by hand, one deleted and made again.
_NAMES = ["Acme", "Acme  Inc ", "Payments team", "Logan", "Bea", "Refunds", "Refund desk", "Noodle bar"]


def _writes_that_share_names(store: MnemisPropertyGraphStore) -> None:
    mem, ns = store.memory, store.namespace
    mem.add_messages(
        [{"id": "c0", "speaker": "ann", "text": "Logan met the Payments team about Acme.", "timestamp": NOW}],
        namespace=ns,
    )
    index = _indexed(store)
    store.get(ids=["Acme"])  # the names are indexed from here on: every change below must keep them
    store.upsert_nodes(
        [
            EntityNode(name="Acme", label="ORG", properties={"size": 3}),
            EntityNode(name='Acme "Inc"'),
            EntityNode(name="Acme", properties={"tier": "gold"}),
        ]
    )
    store.upsert_relations([Relation(label="OWNS", source_id="Acme  Inc ", target_id="Acme")])
    store.upsert_llama_nodes([TextNode(id_="Payments team", text="The payments team owns refunds now.")])
    store.upsert_relations([Relation(label="OWNS", source_id="Payments team", target_id="Refunds")])
    (refunds,) = store.get(ids=["Refunds"])
    mem.apply(lambda g: setattr(g.get(refunds.properties["node_id"]), "label", "Refund desk"), namespace=ns)
    store.upsert_relations([Relation(label="ANSWERS", source_id="Refund desk", target_id="Logan")])
    store.upsert_nodes([EntityNode(name="Bea")])
    store.delete(entity_names=["Bea"])
    store.upsert_relations([Relation(label="KNOWS", source_id="Bea", target_id="Acme")])
    index.insert(Document(text="Logan approved the noodle bar budget.", id_="doc-3"))
    index.delete_ref_doc("doc-2")


def _names_as_seen(store: MnemisPropertyGraphStore) -> dict:
    return {
        **_as_seen(store),
        "get": [(type(n).__name__, n.id, n.label, n.properties) for n in store.get(ids=_NAMES)],
        "each": [[n.properties["node_id"] for n in store.get(ids=[name])] for name in _NAMES],
        "rel_map": [
            (a.properties["node_id"], r.label, b.properties["node_id"])
            for a, r, b in store.get_rel_map(store.get(ids=["Acme", "Refund desk", "Payments team"]), depth=2)
        ],
    }


def test_names_looked_up_through_the_graphs_index_give_what_a_scan_gives(monkeypatch):
    """The same writes into two stores, the second through ``MnemisMemory.apply`` and finding every
    name by scanning the graph (the store's lookups before the index): the same graph, messages,
    ``get``, ``get_rel_map``, ``vector_query`` and retrieved memory."""
    indexed = MnemisPropertyGraphStore(memory=make_memory(), namespace="u1", clock=lambda: NOW)
    scanned = MnemisPropertyGraphStore(memory=make_memory(), namespace="u1", clock=lambda: NOW)
    _writes_that_share_names(indexed)
    seen = _names_as_seen(indexed)
    with monkeypatch.context() as m:
        m.setattr(scanned.memory, "apply_journaled", scanned.memory.apply)
        m.setattr(MemoryGraph, "nodes_keyed", _scanning_each)
        _writes_that_share_names(scanned)
        assert _names_as_seen(scanned) == seen

    each = dict(zip(_NAMES, seen["each"], strict=True))
    assert each["Acme"] == ["e:acme"]  # the builder's entity took the extracted one's properties
    assert each["Acme  Inc "] == ['pg-entity:Acme "Inc"']
    assert each["Payments team"] == ["pg-entity:Payments team", "Payments team"]  # entity first, as made
    assert each["Refund desk"] == ["pg-entity:Refunds"] and each["Refunds"] == []  # renamed in place
    owns = {(a, b) for a, label, b in seen["rel_map"] if label == "OWNS"}
    assert ("pg-entity:Payments team", "pg-entity:Refunds") in owns
    assert ('pg-entity:Acme "Inc"', "e:acme") in owns
    assert ("pg-entity:Refunds", "ANSWERS", "pg-entity:Logan") in seen["rel_map"]


@pytest.mark.parametrize("when", ["before the call", "between its read and its write"])
@pytest.mark.parametrize(
    "write",
    [
        lambda s: s.upsert_nodes([EntityNode(name="Bea", properties={"team": "ops"})]),
        lambda s: s.upsert_relations([Relation(label="KNOWS", source_id="Ann", target_id="Bea")]),
    ],
    ids=["upsert_nodes", "upsert_relations"],
)
def test_a_name_another_writer_gave_is_found_on_the_fresh_graph(when, write, tmp_path, monkeypatch):
    """Another process makes an entity named "Bea" after this store indexed the names of its graph.
    This store's write finds that entity by its name on the graph as it is now (reloaded, or written
    again after the refused write), never a copy of the names made before: no second "Bea"."""
    path = str(tmp_path / "shared.db")
    mine = make_memory(path, messages=())
    store = MnemisPropertyGraphStore(memory=mine, namespace="docs", clock=lambda: NOW)
    store.upsert_llama_nodes([TextNode(id_="t1", text="Ann plans the offsite at the lighthouse.")])
    store.upsert_nodes([EntityNode(name="Ann")])
    assert store.get(ids=["Bea"]) == []  # the names are indexed, without Bea
    other = make_memory(path, messages=())

    def other_writes() -> None:
        other.apply(lambda g: g.add_node(Node("hand-bea", NodeKind.ENTITY, "Bea", "docs")), namespace="docs")

    real_write, versions = mine._store.write, []

    def write_after_the_other_writer(namespace: str, delta: Any, expected: int, meta: Any = None) -> int:
        if not versions and when != "before the call":
            other_writes()
        versions.append(expected)
        return real_write(namespace, delta, expected, meta)

    if when == "before the call":
        other_writes()
    monkeypatch.setattr(mine._store, "write", write_after_the_other_writer)
    write(store)

    assert len(versions) == (1 if when == "before the call" else 2)
    reopened = MnemisPropertyGraphStore(memory=make_memory(path, messages=()), namespace="docs")
    for seen in (store, reopened):
        assert [n.properties["node_id"] for n in seen.get(ids=["Bea"])] == ["hand-bea"]
        assert not seen.memory.graph("docs").has("pg-entity:Bea")


# ---------------------------------------------------------------------------------------------
# A delete by ids or names finds what it removes through the graph's indexes, with a scan's results
# ---------------------------------------------------------------------------------------------


def _scanning_each(
    self: MemoryGraph, key: Callable[[Node], Any], values: Iterable[Hashable], *, each: bool = False
) -> list[Node]:
    """``MemoryGraph.nodes_keyed`` as a scan, for the engine's lookups (``each``) too."""
    wanted = set(values)
    return [n for n in self.nodes() if wanted & (set(key(n) or ()) if each else {key(n)})]


def _orphans_by_scan(graph: MemoryGraph, removed: set[str], source_key: str) -> tuple[list, list[str]]:
    """``orphaned_extractions`` as it read every edge and entity before the graph's indexes."""
    edges = [e for e in graph.edges() if e.properties.get(source_key) in removed]
    dropped = {(e.src, e.dst, e.kind, e.label) for e in edges}

    def left(node_id: str) -> bool:
        return any(
            (e.src, e.dst, e.kind, e.label) not in dropped
            for e in [*graph.out_edges(node_id), *graph.in_edges(node_id)]
        )

    entities = [
        n.id
        for n in graph.nodes(NodeKind.ENTITY)
        if n.properties.get(source_key) is not None
        and not graph.has(n.properties[source_key])
        and not left(n.id)
    ]
    return edges, entities


# Texts naming the same people and places, so that the builder's entities (from chat and the texts)
# and the extracted ones are shared between texts, and a forget takes mentions off shared entities.
_SHARED_TEXTS = [
    "Logan booked the lighthouse for the retro with Mira.",
    "Mira moved the offsite to the harbour hotel.",
    "Tomas and Logan met Acme about the refund.",
    "The deploy window is Tuesday night, Mira says.",
    "Acme booked the harbour hotel for Tomas.",
]
_PEOPLE = ["Logan", "Mira", "Tomas", "Acme"]
_PLACES = ["Lighthouse", "Harbour hotel", "Refund desk"]


def _insert_extracted(store: MnemisPropertyGraphStore, rng: Any, doc: str) -> None:
    """A text node and what an extractor found in it, written as ``PropertyGraphIndex`` writes them
    (text nodes, then the entities not yet stored, then relations), each carrying its source."""
    store.upsert_llama_nodes(
        [TextNode(id_=doc, text=rng.choice(_SHARED_TEXTS), metadata={"team": rng.choice("ab")})]
    )
    person, other, place = rng.choice(_PEOPLE), rng.choice(_PEOPLE), rng.choice(_PLACES)
    found = [EntityNode(name=person, label="PERSON"), EntityNode(name=place, label="PLACE")]
    known = {n.id for n in store.get(ids=[n.id for n in found])}
    store.upsert_nodes(
        [
            EntityNode(name=n.name, label=n.label, properties={TRIPLET_SOURCE_KEY: doc})
            for n in found
            if n.id not in known
        ]
    )
    store.upsert_relations(
        [
            Relation(label="BOOKED", source_id=person, target_id=place, properties={TRIPLET_SOURCE_KEY: doc}),
            Relation(
                label="WORKS_WITH", source_id=person, target_id=other, properties={TRIPLET_SOURCE_KEY: doc}
            ),
        ]
    )


def _random_step(store: MnemisPropertyGraphStore, rng: Any) -> str:
    docs = [f"d{i}" for i in range(6)]
    op = rng.choice(["insert", "insert", "ids", "ids", "names", "properties", "relations", "dangling"])
    if op == "insert":  # a stored id is stored again, with the same text or another
        _insert_extracted(store, rng, rng.choice(docs))
    elif op == "ids":  # chunks, an entity's name as an id, an id nothing has
        store.delete(ids=rng.sample([*docs, "Mira", "nothing"], rng.randint(1, 3)))
    elif op == "names":
        store.delete(entity_names=rng.sample([*_PEOPLE, *_PLACES, "d1"], rng.randint(1, 2)))
    elif op == "properties":
        store.delete(
            properties=rng.choice([{"team": rng.choice("ab")}, {TRIPLET_SOURCE_KEY: rng.choice(docs)}])
        )
    elif op == "relations":  # may leave an entity whose source is gone with no relation, until a later delete
        store.delete(relation_names=[rng.choice(["BOOKED", "WORKS_WITH"])])
    else:  # an entity naming a source that is not stored, as a hand-written one may
        store.upsert_nodes(
            [EntityNode(name=rng.choice(["Nadia", "Ola"]), properties={TRIPLET_SOURCE_KEY: "gone"})]
        )
    return op


def _deletes_as_seen(store: MnemisPropertyGraphStore) -> dict:
    mem, ns = store.memory, store.namespace
    names = [*_PEOPLE, *_PLACES, "Nadia", "Ola", *(f"d{i}" for i in range(6))]
    return {
        "graph": mem.graph(ns).to_data(),
        "messages": [m.to_dict() for m in mem.messages(ns)],
        "get": [(type(n).__name__, n.id, n.label, n.properties) for n in store.get()],
        "get_ids": [(n.id, n.properties["node_id"]) for n in store.get(ids=names)],
        "triplets": [
            (a.id, r.label, b.id, r.properties)
            for a, r, b in store.get_triplets(relation_names=["BOOKED", "WORKS_WITH", "MENTIONS"])
        ],
        "vector_query": [
            _answer(store.vector_query(VectorStoreQuery(query_str=q, similarity_top_k=6)))
            for q in ("lighthouse retro", "harbour hotel offsite")
        ],
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_deleting_through_the_graphs_indexes_gives_what_a_scan_gives(seed, monkeypatch):
    """Random inserts (texts sharing extracted and built entities), deletes by ids, entity names,
    properties and relation names, and texts stored again, into two stores: the second finds the
    nodes to delete and the orphaned extractions by reading every node and edge, as ``delete`` did.
    After every step: the same graph, messages, ``get``, ``get_triplets`` and ``vector_query``."""
    import itertools
    import random
    import types
    import uuid

    from mnemis_integrations.core.maintenance import forget
    from mnemis_integrations.llama_index import graph_store

    # a forget renames the nodes named after a forgotten message to random ids: the same ones in both
    renames = {"indexed": itertools.count(), "scanned": itertools.count()}
    renaming = ["indexed"]
    monkeypatch.setattr(
        forget, "uuid", types.SimpleNamespace(uuid4=lambda: uuid.UUID(int=next(renames[renaming[0]])))
    )
    indexed = MnemisPropertyGraphStore(memory=make_memory(), namespace="u1", clock=lambda: NOW)
    scanned = MnemisPropertyGraphStore(memory=make_memory(), namespace="u1", clock=lambda: NOW)
    ops = set()
    rng_indexed, rng_scanned = random.Random(seed), random.Random(seed)
    for _ in range(40):
        renaming[0] = "indexed"
        ops.add(_random_step(indexed, rng_indexed))
        renaming[0] = "scanned"
        with monkeypatch.context() as m:
            m.setattr(MemoryGraph, "nodes_keyed", _scanning_each)
            m.setattr(graph_store, "orphaned_extractions", _orphans_by_scan)
            _random_step(scanned, rng_scanned)
        assert _deletes_as_seen(scanned) == _deletes_as_seen(indexed)
    assert {"insert", "ids", "names"} <= ops
