"""MnemisPropertyGraphStore and MnemisPGRetriever.

The first test follows LlamaIndex's own property-graph store test (``test_pg_stores_neo4j.py``):
upsert, get, get_triplets, get_rel_map, update, delete, then check it is gone. The rest pin the
mapping of Mnemis's graph (entities, fragments, hierarchy) and the index integration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from llama_fakes import BAD_TOP_K, make_memory, offline_settings
from llama_index.core import PropertyGraphIndex
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import (
    KG_NODES_KEY,
    KG_RELATIONS_KEY,
    ChunkNode,
    EntityNode,
    Relation,
)
from llama_index.core.llms import MockLLM
from llama_index.core.schema import BaseNode, Document, TextNode, TransformComponent

from mnemis_integrations import EdgeKind, NodeKind, Status
from mnemis_integrations.errors import InvalidNameError, InvalidQueryError
from mnemis_integrations.llama_index import (
    MnemisPGRetriever,
    MnemisPropertyGraphIndex,
    MnemisPropertyGraphStore,
)


@pytest.fixture(autouse=True)
def _offline():
    with offline_settings():
        yield


@pytest.fixture
def mem():
    return make_memory()


@pytest.fixture
def pg_store(mem) -> MnemisPropertyGraphStore:
    """An empty namespace of a memory that already holds another user's conversation."""
    return MnemisPropertyGraphStore(memory=mem, namespace="pg")


def test_pg_store_round_trip_upsert_get_rel_map_update_delete(pg_store, mem):
    entity1 = EntityNode(label="PERSON", name="Logan", properties={"age": 28})
    entity2 = EntityNode(label="ORGANIZATION", name="LlamaIndex")
    relation = Relation(
        label="WORKS_FOR", source_id=entity1.id, target_id=entity2.id, properties={"since": 2023}
    )
    pg_store.upsert_nodes([entity1, entity2])
    pg_store.upsert_relations([relation])

    source_node = TextNode(text="Logan (age 28), works for LlamaIndex since 2023.")
    pg_store.upsert_llama_nodes([source_node])
    pg_store.upsert_relations(
        [
            Relation(label="MENTIONS", source_id=source_node.node_id, target_id=entity1.id),
            Relation(label="MENTIONS", source_id=source_node.node_id, target_id=entity2.id),
        ]
    )

    # get by id and by property
    kg_nodes = pg_store.get(ids=[entity1.id])
    assert [(n.label, n.name, n.properties["age"]) for n in kg_nodes] == [("PERSON", "Logan", 28)]
    kg_nodes = pg_store.get(properties={"age": 28})
    assert [(n.label, n.name) for n in kg_nodes] == [("PERSON", "Logan")]

    # triplets
    works_for = pg_store.get_triplets(relation_names=["WORKS_FOR"])
    assert [(s.id, r.label, o.id, r.properties) for s, r, o in works_for] == [
        ("Logan", "WORKS_FOR", "LlamaIndex", {"since": 2023})
    ]
    # (plus what Mnemis built from the text node's message: its fragment mentions Logan too)
    assert {(s.id, r.label, o.id) for s, r, o in pg_store.get_triplets(entity_names=["Logan"])} >= {
        ("Logan", "WORKS_FOR", "LlamaIndex"),
        (source_node.node_id, "MENTIONS", "Logan"),
    }

    # rel map: the entity's neighbourhood, MENTIONS left out as in the Neo4j store
    paths = {(p[0].id, p[1].id, p[2].id) for p in pg_store.get_rel_map(kg_nodes, depth=1)}
    assert (entity1.id, relation.id, entity2.id) in paths and not any(r == "MENTIONS" for _, r, _ in paths)

    # the original text node comes back
    llama_nodes = pg_store.get_llama_nodes([source_node.node_id])
    assert [n.text for n in llama_nodes] == [source_node.text]

    # update: properties merge, relations stay
    pg_store.upsert_nodes(
        [EntityNode(label="PERSON", name="Logan", properties={"age": 28, "location": "Canada"})]
    )
    kg_nodes = pg_store.get(properties={"age": 28})
    assert [(n.label, n.name, n.properties["location"]) for n in kg_nodes] == [("PERSON", "Logan", "Canada")]
    assert len(pg_store.get_triplets(relation_names=["WORKS_FOR"])) == 1

    # delete entities, then the text node; everything is gone, in the store and in the core graph
    pg_store.delete(ids=[entity1.id, entity2.id])
    pg_store.delete(ids=[source_node.node_id])
    assert pg_store.get(ids=[entity1.id, entity2.id]) == []
    assert pg_store.get_llama_nodes([source_node.node_id]) == []
    assert pg_store.get_triplets(relation_names=["WORKS_FOR", "MENTIONS"]) == []
    assert "pg" not in mem.namespaces()  # its one message forgotten, the namespace went with it


def test_written_nodes_and_relations_are_mnemis_nodes_and_edges(pg_store, mem):
    pg_store.upsert_nodes([EntityNode(label="PERSON", name="Logan"), EntityNode(name="LlamaIndex")])
    pg_store.upsert_nodes([ChunkNode(text="Logan works for LlamaIndex.", id_="chunk-1")])
    pg_store.upsert_relations(
        [
            Relation(label="WORKS_FOR", source_id="Logan", target_id="LlamaIndex"),
            Relation(label="MENTIONS", source_id="chunk-1", target_id="Logan"),
        ]
    )

    g = mem.graph("pg")
    logan = next(n for n in g.nodes(NodeKind.ENTITY) if n.label == "Logan")
    chunk = g.get("chunk-1")
    assert chunk.kind == NodeKind.FRAGMENT and chunk.summary == "Logan works for LlamaIndex."
    assert [(e.kind, e.label) for e in g.out_edges(logan.id)] == [(EdgeKind.RELATION, "WORKS_FOR")]
    assert [(e.kind, e.dst) for e in g.out_edges("chunk-1")] == [(EdgeKind.MENTIONS, logan.id)]
    assert [n.label for n in pg_store.get(ids=["chunk-1"])] == ["text_chunk"]


def test_mnemis_graph_reads_as_chunks_entities_and_hierarchy_relations(mem):
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    g = mem.graph("u1")
    fragment_id = g.get("f:m1").id

    (fragment,) = store.get(ids=[fragment_id])
    assert isinstance(fragment, ChunkNode) and fragment.label == "fragment"
    assert fragment.text == g.get(fragment_id).summary
    assert fragment.properties["source_ids"] == ["m1", "m2"]
    assert fragment.properties["kind"] == "fragment" and fragment.properties["status"] == "active"

    # walking up BELONGS_TO from the fragment spells its hierarchy path
    subtopic, concept = g.parent(fragment_id), g.ancestors(fragment_id)[-1]
    triplets = {(s.id, r.label, o.id) for s, r, o in store.get_rel_map([fragment], depth=2)}
    assert {(fragment_id, "BELONGS_TO", subtopic.id), (subtopic.id, "BELONGS_TO", concept.id)} <= triplets
    chain = [store.get(ids=[i])[0] for i in (concept.id, subtopic.id, fragment_id)]
    assert [n.label for n in chain] == ["concept", "subtopic", "fragment"]
    assert [g.get(n.id).label for n in chain] == g.hierarchy_path(fragment_id)

    # entities are found by name and lead to their labelled relations
    (plan,) = store.get(ids=["plan B"])
    assert isinstance(plan, EntityNode) and plan.label == "entity"
    assert [(s.id, r.label, o.id) for s, r, o in store.get_rel_map([plan], depth=1)] == [
        ("plan B", "related_to", "B for Project Atlas")
    ]


def test_field_properties_write_node_fields_and_bad_status_is_refused(pg_store, mem):
    pg_store.upsert_nodes(
        [EntityNode(name="Plan A", properties={"status": "superseded", "keywords": ["plan"], "owner": "ops"})]
    )
    node = next(n for n in mem.graph("pg").nodes(NodeKind.ENTITY) if n.label == "Plan A")
    assert node.status == Status.SUPERSEDED and node.keywords == ["plan"]
    assert pg_store.get(properties={"status": "superseded"})[0].properties["owner"] == "ops"

    with pytest.raises(ValueError, match="active, superseded, archived"):
        pg_store.upsert_nodes([EntityNode(name="Plan C", properties={"status": "pending"})])
    assert pg_store.get(ids=["Plan C"]) == []


@pytest.mark.parametrize("bad", ["Ac\x00me", "Ac\ud800me"], ids=["nul", "lone-surrogate"])
def test_a_name_no_store_can_key_gets_the_error_a_hand_edit_gets(pg_store, mem, bad):
    """Before: a NUL was refused with a bare ValueError and a lone surrogate stored (in memory; a
    bare UnicodeEncodeError on SQLite). Both are now InvalidNameError, as in ``edit()``, and
    nothing is written."""
    version = mem._store.version("pg")
    with pytest.raises(InvalidNameError):
        pg_store.upsert_nodes([EntityNode(name="Bob"), EntityNode(name=bad)])
    with pytest.raises(InvalidNameError, match="relation label"):
        pg_store.upsert_relations([Relation(label=f"works{bad}for", source_id="Bob", target_id="Acme")])
    assert pg_store.get() == [] and mem._store.version("pg") == version


def test_relation_to_an_unknown_id_creates_the_entity(pg_store):
    pg_store.upsert_relations([Relation(label="LIKES", source_id="Ann", target_id="Tea")])
    assert sorted(n.name for n in pg_store.get()) == ["Ann", "Tea"]
    assert [(s.id, r.label, o.id) for s, r, o in pg_store.get_triplets(ids=["Tea"])] == [
        ("Ann", "LIKES", "Tea")
    ]


def test_upserting_a_relation_twice_merges_its_properties(pg_store):
    pg_store.upsert_relations(
        [Relation(label="LIKES", source_id="Ann", target_id="Tea", properties={"a": 1})]
    )
    pg_store.upsert_relations(
        [Relation(label="LIKES", source_id="Ann", target_id="Tea", properties={"b": 2})]
    )
    (triplet,) = pg_store.get_triplets(relation_names=["LIKES"])
    assert triplet[1].properties == {"a": 1, "b": 2}


def test_delete_by_relation_name_removes_only_those_relations(pg_store):
    pg_store.upsert_relations(
        [
            Relation(label="LIKES", source_id="Ann", target_id="Tea"),
            Relation(label="KNOWS", source_id="Ann", target_id="Bob"),
        ]
    )
    pg_store.delete(relation_names=["LIKES"])
    assert [r.label for _, r, _ in pg_store.get_triplets(entity_names=["Ann"])] == ["KNOWS"]
    assert sorted(n.name for n in pg_store.get()) == ["Ann", "Bob", "Tea"]


def test_delete_by_entity_name_and_by_property(pg_store):
    pg_store.upsert_nodes(
        [EntityNode(name="Ann", properties={"team": "red"}), EntityNode(name="Bob"), EntityNode(name="Cy")]
    )
    pg_store.delete(entity_names=["Bob"])
    pg_store.delete(properties={"team": "red"})
    assert [n.name for n in pg_store.get()] == ["Cy"]


def test_delete_without_arguments_deletes_nothing(pg_store):
    pg_store.upsert_nodes([EntityNode(name="Ann")])
    pg_store.delete()
    assert [n.name for n in pg_store.get()] == ["Ann"]


def test_get_triplets_without_a_filter_returns_nothing(mem):
    assert MnemisPropertyGraphStore(memory=mem, namespace="u1").get_triplets() == []


def test_reads_of_a_namespace_without_memory_are_empty(mem):
    store = MnemisPropertyGraphStore(memory=mem, namespace="nobody")
    assert (
        store.get() == []
        and store.get_triplets(ids=["x"]) == []
        and store.get_rel_map([EntityNode(name="x")]) == []
    )
    store.delete(ids=["x"])
    assert "nobody" not in mem.namespaces()


def test_structured_queries_are_refused_with_the_alternative(pg_store):
    assert not pg_store.supports_structured_queries
    with pytest.raises(NotImplementedError, match="get_rel_map"):
        pg_store.structured_query("MATCH (n) RETURN n")


def test_written_graph_survives_reopening_the_memory(tmp_path):
    path = str(tmp_path / "mem.db")
    store = MnemisPropertyGraphStore(memory=make_memory(path), namespace="pg")
    store.upsert_relations([Relation(label="WORKS_FOR", source_id="Logan", target_id="LlamaIndex")])

    reopened = MnemisPropertyGraphStore(memory=make_memory(path, messages=()), namespace="pg")
    assert [(s.id, r.label, o.id) for s, r, o in reopened.get_triplets(relation_names=["WORKS_FOR"])] == [
        ("Logan", "WORKS_FOR", "LlamaIndex")
    ]


def test_own_properties_and_labels_survive_reopening_the_memory(tmp_path):
    path = str(tmp_path / "mem.db")
    store = MnemisPropertyGraphStore(memory=make_memory(path), namespace="pg")
    store.upsert_nodes([EntityNode(label="PERSON", name="Logan", properties={"age": 28})])
    store.upsert_relations(
        [Relation(label="WORKS_FOR", source_id="Logan", target_id="Acme", properties={"since": 2023})]
    )

    reopened = MnemisPropertyGraphStore(memory=make_memory(path, messages=()), namespace="pg")
    (logan,) = reopened.get(ids=["Logan"])
    assert (logan.label, logan.properties["age"]) == ("PERSON", 28)
    assert reopened.get_triplets(relation_names=["WORKS_FOR"])[0][1].properties == {"since": 2023}


# ---------------------------------------------------------------------------------------------
# PropertyGraphIndex integration
# ---------------------------------------------------------------------------------------------


def test_index_from_existing_store_retrieves_with_mnemis_dual_path_search(mem):
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    index = PropertyGraphIndex.from_existing(property_graph_store=store)
    retriever = index.as_retriever(sub_retrievers=[MnemisPGRetriever(store, similarity_top_k=3)])

    nodes = retriever.retrieve("refund for order 42")
    hits = mem.search("refund for order 42", k=3, namespace="u1")
    assert [n.node.node_id for n in nodes] == [h.node_id for h in hits]
    assert nodes[0].node.metadata["source_ids"] == ["m1", "m2"]
    assert nodes[0].node.metadata["path_str"] == hits[0].path_str


async def test_pg_retriever_answers_asynchronously_and_in_a_query_engine(mem):
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    index = PropertyGraphIndex.from_existing(property_graph_store=store)
    sub = MnemisPGRetriever(store, similarity_top_k=3)

    nodes = await index.as_retriever(sub_retrievers=[sub]).aretrieve("lunch on Friday")
    assert nodes[0].node.metadata["source_ids"] == ["m3"]

    engine = index.as_query_engine(sub_retrievers=[sub], llm=MockLLM())
    assert "noodle bar" in str(await engine.aquery("Where is lunch on Friday?"))


def test_pg_retriever_refuses_a_store_that_is_not_mnemis():
    with pytest.raises(TypeError, match="MnemisPropertyGraphStore"):
        MnemisPGRetriever(SimplePropertyGraphStore())


class _TagExtractor(TransformComponent):
    """Puts one PERSON entity and a MENTIONS-free relation on every chunk, as an LLM extractor would."""

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in nodes:
            node.metadata[KG_NODES_KEY] = [EntityNode(label="PERSON", name="Logan")]
            node.metadata[KG_RELATIONS_KEY] = [
                Relation(label="WORKS_FOR", source_id="Logan", target_id="LlamaIndex")
            ]
        return nodes


def test_index_inserts_documents_through_the_store_and_deletes_them_by_ref_doc(pg_store):
    doc = Document(text="Logan works for LlamaIndex.", id_="doc-1")
    index = PropertyGraphIndex.from_documents(
        [doc], property_graph_store=pg_store, kg_extractors=[_TagExtractor()], use_async=False
    )
    assert [(s.id, r.label, o.id) for s, r, o in pg_store.get_triplets(relation_names=["WORKS_FOR"])] == [
        ("Logan", "WORKS_FOR", "LlamaIndex")
    ]
    (chunk,) = [n for n in pg_store.get() if isinstance(n, ChunkNode) and n.label == "text_chunk"]
    assert chunk.text == "Logan works for LlamaIndex." and chunk.properties["ref_doc_id"] == "doc-1"
    assert [n.get_content() for n in pg_store.get_llama_nodes([chunk.id])] == [doc.text]

    index.property_graph_store.delete_llama_nodes(ref_doc_ids=["doc-1"])
    assert pg_store.get(ids=[chunk.id]) == []


@pytest.mark.parametrize("top_k", BAD_TOP_K)
def test_pg_retriever_refuses_a_bad_similarity_top_k_when_built(mem, top_k: Any):
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    with pytest.raises(InvalidQueryError, match="similarity_top_k"):
        MnemisPGRetriever(store, similarity_top_k=top_k)


def test_empty_kg_extractors_mean_the_default_as_in_property_graph_index(mem):
    """LlamaIndex's ``PropertyGraphIndex`` reads ``kg_extractors=[]`` as "the default" (``or``), and an
    index with no extractor at all cannot insert (it asserts every node got KG metadata)."""
    reference = PropertyGraphIndex(
        nodes=[], property_graph_store=SimplePropertyGraphStore(), kg_extractors=[], embed_kg_nodes=False
    )
    assert reference._kg_extractors  # the reference's default, not none
    store = MnemisPropertyGraphStore(memory=mem, namespace="docs")
    index = MnemisPropertyGraphIndex(nodes=[], property_graph_store=store, kg_extractors=[])
    assert [type(e).__name__ for e in index._kg_extractors] == ["ImplicitPathExtractor"]


GRAPH_NODES = [
    EntityNode(name="Ann", properties={"team": "red"}),
    EntityNode(name="Bob", properties={"team": "blue"}),
    EntityNode(name="Cy"),
    EntityNode(name="Tea"),
]
GRAPH_RELATIONS = [
    Relation(label="KNOWS", source_id="Ann", target_id="Bob", properties={"since": 2020}),
    Relation(label="LIKES", source_id="Ann", target_id="Tea"),
    Relation(label="LIKES", source_id="Bob", target_id="Tea"),
    Relation(label="KNOWS", source_id="Cy", target_id="Ann"),
]
QUERIES: list[dict[str, Any]] = [
    {"entity_names": ["Ann"]},
    {"ids": ["Tea"]},
    {"entity_names": ["Ann"], "ids": ["Tea"]},
    {"entity_names": ["Ann"], "ids": ["Bob", "Cy"]},
    {"entity_names": ["Cy"], "ids": ["Tea"]},
    {"entity_names": ["Ann"], "relation_names": ["KNOWS"]},
    {"ids": ["Tea"], "relation_names": ["LIKES"], "properties": {"team": "blue"}},
    {"relation_names": ["KNOWS"], "properties": {"since": 2020}},
    {"entity_names": ["Bob"], "ids": ["Cy"], "relation_names": ["KNOWS"]},
]


def _triplet_ids(triplets: list) -> set[tuple[str, str, str]]:
    return {(s.id, r.label, o.id) for s, r, o in triplets}


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: ";".join(f"{k}={v}" for k, v in q.items()))
def test_get_triplets_combines_filters_as_the_reference_store_does(mem, query: dict[str, Any]):
    """Before: ``entity_names`` and ``ids`` together gave the triplets touching either (a union);
    the reference keeps those touching one of each, as it does with every other pair of filters."""
    reference = SimplePropertyGraphStore()
    reference.upsert_nodes(GRAPH_NODES)
    reference.upsert_relations(GRAPH_RELATIONS)
    store = MnemisPropertyGraphStore(memory=mem, namespace="pg")
    store.upsert_nodes(GRAPH_NODES)
    store.upsert_relations(GRAPH_RELATIONS)

    assert _triplet_ids(store.get_triplets(**query)) == _triplet_ids(reference.get_triplets(**query))


def test_an_entity_renamed_by_hand_is_not_written_over_by_a_new_one_of_its_old_name():
    """A new entity's id is made from its name: one renamed by hand since kept that id, and an
    entity of its old name written later replaced it, the renamed node lost."""
    mem = make_memory()
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    store.upsert_nodes([EntityNode(name="Bea", properties={"team": "payments"})])

    def rename(g) -> None:
        g.get("pg-entity:Bea").label = "Beatrice"

    mem.apply_journaled(rename, namespace="u1")
    store.upsert_nodes([EntityNode(name="Bea", properties={"team": "refunds"})])
    store.upsert_relations([Relation(label="KNOWS", source_id="Carl", target_id="Bea")])
    entities = {n.name: n.properties.get("team") for n in store.get() if isinstance(n, EntityNode)}
    assert entities["Beatrice"] == "payments" and entities["Bea"] == "refunds"
