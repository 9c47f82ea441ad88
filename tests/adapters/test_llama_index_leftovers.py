"""LlamaIndex adapter: argument checks and parity with LlamaIndex's reference classes.

Each test names what it pins: a retriever's ``similarity_top_k`` refused with the project's typed
error when the retriever is built, ``kg_extractors=[]`` read as LlamaIndex reads it, and
``get_triplets`` combining its filters as ``SimplePropertyGraphStore`` does.
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_fakes import make_memory, offline_settings
from llama_index.core import PropertyGraphIndex
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import EntityNode, Relation

from mnemis_integrations.errors import InvalidQueryError
from mnemis_integrations.llama_index import (
    MnemisPGRetriever,
    MnemisPropertyGraphIndex,
    MnemisPropertyGraphStore,
    MnemisRetriever,
)


@pytest.fixture(autouse=True)
def _offline():
    with offline_settings():
        yield


@pytest.fixture
def mem():
    return make_memory()


BAD_TOP_K = [0, -3, 2.5, 5.0, "3", None, True, 1_001]


@pytest.mark.parametrize("top_k", BAD_TOP_K)
def test_retriever_refuses_a_bad_similarity_top_k_when_built(mem, top_k: Any):
    """Before: 0 and negatives raised a bare ValueError, a string or None a TypeError, and a float,
    a bool or more than ``limits.max_k`` passed and failed only at retrieve time, naming ``k``."""
    with pytest.raises(InvalidQueryError, match="similarity_top_k"):
        MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=top_k)


@pytest.mark.parametrize("top_k", BAD_TOP_K)
def test_pg_retriever_refuses_a_bad_similarity_top_k_when_built(mem, top_k: Any):
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    with pytest.raises(InvalidQueryError, match="similarity_top_k"):
        MnemisPGRetriever(store, similarity_top_k=top_k)


@pytest.mark.parametrize("max_tokens", [0, -1, 2.5, "10", True])
def test_retriever_refuses_a_bad_max_tokens_when_built(mem, max_tokens: Any):
    with pytest.raises(InvalidQueryError, match="max_tokens"):
        MnemisRetriever(memory=mem, namespace="u1", max_tokens=max_tokens)


def test_largest_similarity_top_k_is_accepted(mem):
    top = mem.config.limits.max_k
    assert len(MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=top).retrieve("refund")) >= 1


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
