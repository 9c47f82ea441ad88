"""Documented behaviour checked against the code: search's ``k`` and the retrievers' ``k`` /
``similarity_top_k`` (a superseded hit brings its successor along, past them), and SECURITY.md's
FalkorDB password redaction."""

from __future__ import annotations

import pytest
from llama_index.core.schema import QueryBundle
from test_spec_rules import VAN, _moving

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.storage.falkordb import redacted
from mnemis_integrations.errors import StoreError
from mnemis_integrations.langchain import MnemisRetriever as LangChainRetriever
from mnemis_integrations.llama_index import MnemisPGRetriever, MnemisPropertyGraphStore
from mnemis_integrations.llama_index import MnemisRetriever as LlamaIndexRetriever


def _successor_past_k() -> tuple:
    """The moving-day memory, where k=1 ranks the superseded van hit and its successor comes past k."""
    mem, old, new = _moving()
    assert [h.node_id for h in mem.search(VAN, k=1, namespace="u")] == [old, new]
    return mem, old, new


def test_search_with_exclude_messages_still_brings_a_superseded_hits_successor_past_k():
    mem, old, new = _successor_past_k()
    hits = [h.node_id for h in mem.search(VAN, k=1, namespace="u", exclude_messages=["not-in-memory"])]
    assert hits == [old, new]


def test_the_langchain_retrievers_k_brings_a_superseded_hits_successor_along():
    mem, old, new = _successor_past_k()
    docs = LangChainRetriever(memory=mem, namespace="u", k=1).invoke(VAN)
    assert [d.metadata["node_id"] for d in docs] == [old, new]


def test_the_llama_index_retrievers_similarity_top_k_brings_a_superseded_hits_successor_along():
    mem, old, new = _successor_past_k()
    nodes = LlamaIndexRetriever(memory=mem, namespace="u", similarity_top_k=1).retrieve(VAN)
    assert [n.node.metadata["node_id"] for n in nodes] == [old, new]


def test_the_pg_retrievers_similarity_top_k_brings_a_superseded_hits_successor_along():
    mem, old, new = _successor_past_k()
    retriever = MnemisPGRetriever(MnemisPropertyGraphStore(mem, namespace="u"), similarity_top_k=1)
    nodes = retriever.retrieve_from_graph(QueryBundle(VAN))
    assert [n.node.metadata["node_id"] for n in nodes] == [old, new]


@pytest.mark.parametrize("password", ["s3cr/etpw+b64=", "s3cr?etpw", "s3cr#etpw"])
def test_a_password_holding_a_url_delimiter_is_named_in_no_error(password):
    """SECURITY.md: errors name the address with its password as ``***``. A base64 password holds
    ``/`` (``openssl rand -base64``); written unescaped, urllib reads its end as a path, a query or a
    fragment and its start as the port, and the error showed both."""
    url = f"falkordb://default:{password}@db.internal:6379"
    assert "etpw" not in redacted(url) and "s3cr" not in redacted(url)
    with pytest.raises(StoreError) as refused:
        MnemisMemory(backend=url, embedder=HashingEmbedder())
    assert "etpw" not in str(refused.value) and "s3cr" not in str(refused.value), str(refused.value)
