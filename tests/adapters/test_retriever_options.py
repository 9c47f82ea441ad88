"""Issue #14: both retrievers pass metadata filters, ``as_of``, ``include_archived`` and a score
threshold through to ``MnemisMemory.search``, and carry message metadata into their documents."""

from __future__ import annotations

import pytest
from fakes import CONVERSATION, seeded_memory
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from mnemis_integrations.core.filters import MetadataFilter as CoreFilter
from mnemis_integrations.errors import InvalidQueryError
from mnemis_integrations.langchain import MnemisRetriever as LCRetriever
from mnemis_integrations.llama_index import MnemisRetriever as LIRetriever

TOPIC = {
    "m01": "refund",
    "m02": "refund",
    "m03": "refund",
    "m04": "pet",
    "m05": "pet",
    "m06": "pet",
    "m07": "travel",
    "m08": "travel",
    "m09": "travel",
    "m10": "habit",
}


def _metadata(m: dict) -> dict:
    n = int(m["id"][1:])
    return {
        "topic": TOPIC[m["id"]],
        "source": "email" if n % 2 else "chat",
        "rating": n % 4,
        "day": m["timestamp"],
    }


TAGGED = [m | {"metadata": _metadata(m)} for m in CONVERSATION]
QUERY = "refund order timed out vet beagle trip"


@pytest.fixture
def mem():
    return seeded_memory("u1", TAGGED)


def _matching(flt: dict) -> set[str]:
    f = CoreFilter.parse(flt)
    return {m["id"] for m in TAGGED if f.matches(m["metadata"])}


def _core_ids(mem, flt=None, **kw) -> list[str]:
    return [h.node_id for h in mem.search(QUERY, k=6, namespace="u1", filter=flt, **kw)]


def _shown(docs_or_nodes) -> set[str]:
    return {s for d in docs_or_nodes for s in _md(d)["source_ids"]}


def _md(d) -> dict:
    return d.metadata if hasattr(d, "metadata") and not hasattr(d, "node") else d.node.metadata


# ------------------------------------------------------------------ LangChain
def test_langchain_filter_at_construction_keeps_only_matching_messages(mem):
    r = LCRetriever(memory=mem, namespace="u1", k=6, filter={"source": "email"})
    docs = r.invoke(QUERY)
    assert [d.id for d in docs] == _core_ids(mem, {"source": "email"})
    assert _shown(docs) and _shown(docs) <= _matching({"source": "email"})
    fragment = next(d for d in docs if d.metadata["kind"] == "fragment")
    assert fragment.metadata["source"] == "email"  # shared by every message shown: merged in, flat
    assert fragment.metadata["message_metadata"] == {
        m: _metadata(TAGGED[int(m[1:]) - 1]) for m in fragment.metadata["source_ids"]
    }


def test_langchain_per_call_filter_narrows_the_retrievers_own(mem):
    r = LCRetriever(memory=mem, namespace="u1", k=6, filter={"topic": {"$in": ["refund", "pet"]}})
    docs = r.invoke(QUERY, filter={"source": "chat"})
    both = {"$and": [{"topic": {"$in": ["refund", "pet"]}}, {"source": "chat"}]}
    assert [d.id for d in docs] == _core_ids(mem, both)
    assert _shown(docs) and _shown(docs) <= {"m02", "m04", "m06"}
    alone = LCRetriever(memory=mem, namespace="u1", k=6).invoke(QUERY, filter={"rating": {"$gte": 3}})
    assert _shown(alone) and _shown(alone) <= _matching({"rating": {"$gte": 3}})


async def test_langchain_async_takes_the_same_options(mem):
    r = LCRetriever(memory=mem, namespace="u1", k=6, filter={"source": "email"})
    sync = r.invoke(QUERY, filter={"rating": 1}, as_of="2024-05-02T23:00:00+00:00")
    asyn = await r.ainvoke(QUERY, filter={"rating": 1}, as_of="2024-05-02T23:00:00+00:00")
    assert [d.id for d in asyn] == [d.id for d in sync] and _shown(sync) <= {"m01", "m05"}


def test_langchain_as_of_include_archived_and_score_threshold_reach_the_search(mem):
    as_of = "2024-05-02T10:01:30+00:00"
    assert [
        d.id for d in LCRetriever(memory=mem, namespace="u1", k=6, as_of=as_of).invoke(QUERY)
    ] == _core_ids(mem, as_of=as_of)
    r = LCRetriever(memory=mem, namespace="u1", k=6)
    assert _shown(r.invoke(QUERY, as_of=as_of)) <= {"m01", "m02", "m03", "m04", "m05"}

    mem.compact("2024-06-01", namespace="u1", min_group=1)
    archived = _core_ids(mem, include_archived=True)
    assert archived != _core_ids(mem)
    assert [
        d.id for d in LCRetriever(memory=mem, namespace="u1", k=6, include_archived=True).invoke(QUERY)
    ] == archived
    assert [d.id for d in r.invoke(QUERY, include_archived=True)] == archived

    scores = [h.score for h in mem.search(QUERY, k=6, namespace="u1")]
    cut = scores[2]
    kept = LCRetriever(memory=mem, namespace="u1", k=6, score_threshold=cut).invoke(QUERY)
    assert [d.metadata["score"] for d in kept] == [s for s in scores if s >= cut] and len(kept) < len(scores)
    assert len(r.invoke(QUERY, score_threshold=cut)) == len(kept)


def test_langchain_bad_options_are_typed_errors(mem):
    r = LCRetriever(memory=mem, namespace="u1")
    with pytest.raises(InvalidQueryError, match="unknown filter operator"):
        r.invoke(QUERY, filter={"topic": {"$like": "ref%"}})
    with pytest.raises(InvalidQueryError, match="score_threshold"):
        r.invoke(QUERY, score_threshold=2)
    with pytest.raises(InvalidQueryError, match="as_of"):
        r.invoke(QUERY, as_of="last tuesday")


def test_a_message_key_named_like_a_hit_field_does_not_replace_it():
    mem = seeded_memory(
        "u1", [m | {"metadata": {"score": "five stars", "topic": "refund"}} for m in CONVERSATION[:3]]
    )
    doc = next(
        d
        for d in LCRetriever(memory=mem, namespace="u1").invoke("refund")
        if d.metadata["kind"] == "fragment"
    )
    assert isinstance(doc.metadata["score"], float) and doc.metadata["topic"] == "refund"
    assert {md["score"] for md in doc.metadata["message_metadata"].values()} == {"five stars"}


# ------------------------------------------------------------------ LlamaIndex
def _filters(*filters, condition=FilterCondition.AND) -> MetadataFilters:
    return MetadataFilters(filters=list(filters), condition=condition)


@pytest.mark.parametrize(
    "filters, core",
    [
        (_filters(MetadataFilter(key="source", value="email")), {"source": "email"}),
        (
            _filters(
                MetadataFilter(key="topic", value="refund", operator=FilterOperator.NE),
                MetadataFilter(key="rating", value=[0, 1], operator=FilterOperator.IN),
            ),
            {"topic": {"$ne": "refund"}, "rating": {"$in": [0, 1]}},
        ),
        (
            _filters(
                MetadataFilter(key="rating", value=1, operator=FilterOperator.GTE),
                MetadataFilter(key="rating", value=2, operator=FilterOperator.LTE),
            ),
            {"rating": {"$gte": 1, "$lte": 2}},
        ),
        (
            _filters(
                MetadataFilter(key="day", value="2024-05-02T10:00:00+00:00", operator=FilterOperator.LTE)
            ),
            {"day": {"$lte": "2024-05-02T10:00:00+00:00"}},
        ),
        (
            _filters(
                MetadataFilter(key="topic", value="travel"),
                _filters(
                    MetadataFilter(key="topic", value="pet"), MetadataFilter(key="source", value="chat")
                ),
                condition=FilterCondition.OR,
            ),
            {"$or": [{"topic": "travel"}, {"topic": "pet", "source": "chat"}]},
        ),
    ],
    ids=["eq", "ne-in", "gte-lte", "time", "or-nested"],
)
def test_llama_index_metadata_filters_select_as_the_core_filter_does(mem, filters, core):
    nodes = LIRetriever(memory=mem, namespace="u1", similarity_top_k=6, filters=filters).retrieve(QUERY)
    assert [n.node.node_id for n in nodes] == _core_ids(mem, core)
    assert _shown(nodes) and _shown(nodes) <= _matching(core)


def test_llama_index_nodes_carry_message_metadata_out_of_the_prompt(mem):
    r = LIRetriever(memory=mem, namespace="u1", similarity_top_k=6, filters={"source": "email"})
    node = next(n.node for n in r.retrieve(QUERY) if n.node.metadata["kind"] == "fragment")
    assert node.metadata["source"] == "email" and set(node.metadata["message_metadata"]) == set(
        node.metadata["source_ids"]
    )
    assert {"source", "topic", "message_metadata"} <= set(node.excluded_llm_metadata_keys)


@pytest.mark.parametrize(
    "filters, says",
    [
        (
            _filters(MetadataFilter(key="topic", value="ref", operator=FilterOperator.TEXT_MATCH)),
            "'text_match'",
        ),
        (
            _filters(MetadataFilter(key="topic", value="refund", operator=FilterOperator.CONTAINS)),
            "'contains'",
        ),
        (_filters(MetadataFilter(key="topic", value="refund"), condition=FilterCondition.NOT), "'not'"),
        ({"topic": {"$regex": "r"}}, "'$regex'"),
    ],
)
def test_llama_index_unsupported_filters_are_refused_when_the_retriever_is_built(mem, filters, says):
    with pytest.raises(InvalidQueryError, match="not supported|unknown filter operator") as err:
        LIRetriever(memory=mem, namespace="u1", filters=filters)
    assert says in str(err.value)


def test_llama_index_as_of_include_archived_and_score_threshold_reach_the_search(mem):
    as_of = "2024-05-02T10:01:30+00:00"
    r = LIRetriever(memory=mem, namespace="u1", similarity_top_k=6, as_of=as_of)
    assert [n.node.node_id for n in r.retrieve(QUERY)] == _core_ids(mem, as_of=as_of)

    mem.compact("2024-06-01", namespace="u1", min_group=1)
    archived = _core_ids(mem, include_archived=True)
    assert archived != _core_ids(mem)
    r = LIRetriever(memory=mem, namespace="u1", similarity_top_k=6, include_archived=True)
    assert [n.node.node_id for n in r.retrieve(QUERY)] == archived

    scores = [h.score for h in mem.search(QUERY, k=6, namespace="u1")]
    kept = LIRetriever(memory=mem, namespace="u1", similarity_top_k=6, score_threshold=scores[2]).retrieve(
        QUERY
    )
    assert [n.score for n in kept] == [s for s in scores if s >= scores[2]] and len(kept) < len(scores)
    with pytest.raises(InvalidQueryError, match="score_threshold"):
        LIRetriever(memory=mem, namespace="u1", score_threshold=-1)
    with pytest.raises(InvalidQueryError, match="as_of"):
        LIRetriever(memory=mem, namespace="u1", as_of="soon")


async def test_llama_index_async_retrieve_applies_the_filters(mem):
    r = LIRetriever(
        memory=mem,
        namespace="u1",
        similarity_top_k=6,
        filters=_filters(MetadataFilter(key="topic", value="pet")),
    )
    nodes = await r.aretrieve(QUERY)
    assert [n.node.node_id for n in nodes] == _core_ids(mem, {"topic": "pet"})
    assert _shown(nodes) <= {"m04", "m05", "m06"}
