"""MnemisRetriever: Mnemis hits as LlamaIndex NodeWithScore(TextNode), sync and async, in a query engine."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from llama_fakes import BAD_TOP_K, make_memory, offline_settings
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from mnemis_integrations.errors import InvalidQueryError
from mnemis_integrations.llama_index import MnemisMemoryBlock, MnemisRetriever

HIT_FIELDS = {
    "path",
    "path_str",
    "focus",
    "score",
    "semantic_score",
    "relation_score",
    "via",
    "kind",
    "node_id",
    "source_ids",
    "time",
    "status",
    "label",
    "namespace",
    "successors",
    "message_metadata",  # the shared message metadata joins these only when the messages carry some
    "excerpted",
}


@pytest.fixture(scope="module")
def mem():
    return make_memory()


@pytest.fixture(autouse=True)
def _offline():
    with offline_settings():
        yield


def test_top_node_is_the_refund_fragment_with_its_path_scores_and_sources(mem):
    nodes = MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=5).retrieve("refund for order 42")

    assert all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
    top = nodes[0]
    md = top.node.metadata
    assert set(md) == HIT_FIELDS
    assert md["kind"] == "fragment"
    assert md["source_ids"] == ["m1", "m2"]
    assert md["namespace"] == "u1"
    assert md["status"] == "active"
    assert "semantic" in md["via"]
    assert isinstance(md["path"], list) and len(md["path"]) == 3
    assert md["path_str"] == " > ".join(md["path"])
    assert datetime.fromisoformat(md["time"]) == datetime.fromisoformat("2025-03-01T10:01:00+00:00")
    assert top.score == md["score"] and 0.0 <= top.score <= 1.0
    assert top.node.node_id == md["node_id"]
    assert "My refund for order 42 timed out at the bank." in top.node.get_content()


def test_metadata_is_the_memory_hit_field_for_field(mem):
    hits = mem.search("refund for order 42", k=5, namespace="u1")
    nodes = MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=5).retrieve("refund for order 42")

    assert [n.node.node_id for n in nodes] == [h.node_id for h in hits]
    for node, hit in zip(nodes, hits, strict=True):
        expected = hit.to_dict()
        assert node.node.get_content() == expected.pop("text")
        assert expected.pop("metadata") == {}  # these messages carry no metadata to merge in
        assert node.node.metadata == expected


def test_similarity_top_k_caps_the_number_of_nodes(mem):
    assert len(MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=2).retrieve("refund")) == 2


async def test_async_retrieve_returns_the_same_nodes_as_sync(mem):
    retriever = MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=4)
    sync_nodes = retriever.retrieve("lunch on Friday")
    async_nodes = await retriever.aretrieve("lunch on Friday")
    assert [(n.node.node_id, n.score) for n in async_nodes] == [(n.node.node_id, n.score) for n in sync_nodes]
    assert async_nodes[0].node.metadata["source_ids"] == ["m3"]


async def test_namespace_without_memory_retrieves_nothing(mem):
    retriever = MnemisRetriever(memory=mem, namespace="nobody", similarity_top_k=3)
    assert retriever.retrieve("refund") == []
    assert await retriever.aretrieve("refund") == []


def test_reader_llm_sees_path_time_and_status_but_not_scores_or_ids(mem):
    node = MnemisRetriever(memory=mem, namespace="u1").retrieve("refund for order 42")[0].node
    shown = node.get_content(metadata_mode=MetadataMode.LLM)
    assert f"path_str: {node.metadata['path_str']}" in shown
    assert "status: active" in shown
    assert "semantic_score" not in shown and "source_ids" not in shown
    assert node.get_content(metadata_mode=MetadataMode.EMBED) == node.get_content()


def test_similarity_top_k_below_one_is_rejected(mem):
    with pytest.raises(ValueError, match="similarity_top_k"):
        MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=0)


def test_query_engine_answers_offline_from_mnemis_context(mem):
    engine = RetrieverQueryEngine.from_args(
        MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=3), llm=MockLLM()
    )
    response = engine.query("What happened to the refund for order 42?")

    assert response.source_nodes[0].node.metadata["source_ids"] == ["m1", "m2"]
    # MockLLM echoes its prompt: the recalled conversation and its topic path reached the LLM.
    assert "My refund for order 42 timed out at the bank." in str(response)
    assert response.source_nodes[0].node.metadata["path_str"] in str(response)


async def test_query_engine_answers_asynchronously(mem):
    engine = RetrieverQueryEngine.from_args(
        MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=3), llm=MockLLM()
    )
    response = await engine.aquery("Where do we get lunch on Friday?")
    assert response.source_nodes[0].node.metadata["source_ids"] == ["m3"]
    assert "noodle bar" in str(response)


def test_max_tokens_fits_the_nodes_into_the_budget(mem):
    from mnemis_integrations.core.tokens import count_tokens

    full = MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=10).retrieve("refund")
    budget = sum(count_tokens(n.node.get_content()) for n in full) // 2
    fitted = MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=10, max_tokens=budget).retrieve(
        "refund"
    )
    assert fitted and sum(count_tokens(n.node.get_content()) for n in fitted) <= budget
    with pytest.raises(ValueError, match="max_tokens"):
        MnemisRetriever(memory=mem, namespace="u1", max_tokens=0)


def test_delete_forgets_messages_by_id_and_delete_namespace_the_rest():
    """Before: the LlamaIndex adapter had no way to erase anything."""
    memory = make_memory()
    retriever = MnemisRetriever(memory=memory, namespace="u1", similarity_top_k=5)
    report = retriever.delete(["m1", "nope"])
    assert (report.forgotten, report.not_found) == (1, ("nope",))
    nodes = retriever.retrieve("refund order 42 timed out at the bank")
    assert nodes and all("timed out" not in n.node.get_content() for n in nodes)
    assert all("m1" not in n.node.metadata["source_ids"] for n in nodes)
    retriever.delete_namespace()
    assert memory.namespaces() == [] and retriever.retrieve("refund") == []


# The memory block as well: before, pydantic refused its counts with a ValidationError and took "3".
RECALLERS = [MnemisRetriever, MnemisMemoryBlock]


@pytest.mark.parametrize("recaller", RECALLERS)
@pytest.mark.parametrize("top_k", BAD_TOP_K)
def test_retriever_refuses_a_bad_similarity_top_k_when_built(mem, top_k: Any, recaller):
    """Before: 0 and negatives raised a bare ValueError, a string or None a TypeError, and a float,
    a bool or more than ``limits.max_k`` passed and failed only at retrieve time, naming ``k``."""
    with pytest.raises(InvalidQueryError, match="similarity_top_k"):
        recaller(memory=mem, namespace="u1", similarity_top_k=top_k)


@pytest.mark.parametrize("recaller", RECALLERS)
@pytest.mark.parametrize("max_tokens", [0, -1, 2.5, "10", True])
def test_retriever_refuses_a_bad_max_tokens_when_built(mem, max_tokens: Any, recaller):
    with pytest.raises(InvalidQueryError, match="max_tokens"):
        recaller(memory=mem, namespace="u1", max_tokens=max_tokens)


def test_largest_similarity_top_k_is_accepted(mem):
    top = mem.config.limits.max_k
    assert len(MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=top).retrieve("refund")) >= 1
