"""Documented behaviour checked against the code: the typed errors the LlamaIndex retrievers
and the LangChain middleware document for bad arguments, ``fit_to_budget`` on the hits of a namespace
forgotten since, a namespace a no-op change leaves holding nothing, and the property-graph index's
``similarity_top_k`` (a superseded hit brings its successor past it)."""

from __future__ import annotations

import pytest
from llama_index.core import Document
from llama_index.core.vector_stores.types import MetadataFilter
from test_spec_rules import VAN, _moving

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import InvalidQueryError, NamespaceNotFoundError
from mnemis_integrations.llama_index import (
    MnemisPGRetriever,
    MnemisPropertyGraphIndex,
    MnemisPropertyGraphStore,
    MnemisRetriever,
)

MESSAGES = [
    {"id": "a", "speaker": "ana", "text": "Acme's invoice 7 is overdue.", "metadata": {"channel": "email"}},
    {"id": "b", "speaker": "li", "text": "Acme paid invoice 7 by card.", "metadata": {"channel": "chat"}},
]


def _memory() -> MnemisMemory:
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(MESSAGES, namespace="u1")
    return mem


def _llama_retriever(mem: MnemisMemory, filters: object) -> object:
    return MnemisRetriever(mem, namespace="u1", filters=filters)


def _pg_retriever(mem: MnemisMemory, filters: object) -> object:
    return MnemisPGRetriever(MnemisPropertyGraphStore(mem, namespace="u1"), filters=filters)


def _index_retriever(mem: MnemisMemory, filters: object) -> object:
    store = MnemisPropertyGraphStore(mem, namespace="u1")
    return MnemisPropertyGraphIndex.from_existing(property_graph_store=store).as_retriever(filters=filters)


@pytest.mark.parametrize("build", [_llama_retriever, _pg_retriever, _index_retriever])
@pytest.mark.parametrize(
    "filters",
    [[MetadataFilter(key="channel", value="email")], "channel == email", 5],
    ids=["list-of-filters", "string", "int"],
)
def test_a_llama_index_retriever_given_filters_of_another_type_raises_invalid_query_error(build, filters):
    """``filters`` is a ``MetadataFilters`` or a Mnemis filter dict; the retrievers document
    InvalidQueryError for bad filters, checked when built. A list of ``MetadataFilter`` (without
    the ``MetadataFilters`` around it), a string or a number raised a bare AttributeError
    (``'list' object has no attribute 'filters'``) from deep inside the filter translation."""
    with pytest.raises(InvalidQueryError, match="MetadataFilters"):
        build(_memory(), filters)


def test_hits_fitted_to_a_budget_after_their_whole_namespace_was_forgotten():
    """``fit_to_budget`` leaves out the hits of an earlier search whose messages were forgotten
    since: forgetting one of two messages gave the rest, but forgetting the last one (which
    removes the namespace) raised NamespaceNotFoundError, an error its docstring does not list,
    instead of leaving every hit out."""
    mem = _memory()
    hits = mem.search("Acme invoice", namespace="u1")
    assert hits
    mem.forget(["a", "b"], namespace="u1")
    assert mem.fit_to_budget(hits, 200, query="Acme invoice") == []


@pytest.mark.parametrize("k", ["5", 2.5])
def test_the_middleware_refuses_a_k_that_is_not_a_positive_integer_when_built(k):
    """The middleware documents ``ValueError`` when built with a ``k`` that is not positive. A
    string raised a bare TypeError from the comparison, and 2.5 was accepted, then every model
    call of the agent raised InvalidQueryError from the search."""
    from mnemis_integrations.langchain import MnemisMemoryMiddleware

    with pytest.raises(InvalidQueryError):
        MnemisMemoryMiddleware(_memory(), namespace="u1", k=k)


def test_a_namespace_a_change_left_empty_is_not_found_as_in_a_fresh_object():
    """``apply`` on a namespace that holds nothing, making no change, writes nothing, yet it left an
    empty copy behind: ``messages`` answered ``[]`` and ``compact`` ran, where they document
    NamespaceNotFoundError (and a fresh object on the same store raises it), while ``namespaces()``
    did not list the namespace."""
    mem = _memory()
    mem.apply(lambda g: None, namespace="x")
    assert "x" not in mem.namespaces()
    with pytest.raises(NamespaceNotFoundError):
        mem.messages("x")
    with pytest.raises(NamespaceNotFoundError):
        mem.compact("2030-01-01", namespace="x")


def test_a_document_store_emptied_by_delete_ref_doc_holds_no_memory():
    """README: ``delete_ref_doc`` forgets the document; forgetting a namespace's last message removes
    the namespace. The graph store's clean-up after the forget left the memory object an empty copy,
    so ``messages("docs")`` answered ``[]`` there while a fresh object raised NamespaceNotFoundError."""
    mem = MnemisMemory(embedder=HashingEmbedder())
    store = MnemisPropertyGraphStore(memory=mem, namespace="docs")
    index = MnemisPropertyGraphIndex.from_documents(
        [Document(text="The refund for order 7 bounced at the bank.", id_="refund-note")],
        property_graph_store=store,
    )
    index.delete_ref_doc("refund-note")
    assert "docs" not in mem.namespaces()
    with pytest.raises(NamespaceNotFoundError):
        mem.messages("docs")


def test_the_property_graph_indexs_similarity_top_k_brings_a_superseded_hits_successor_along():
    """Pins what ``MnemisPropertyGraphIndex.as_retriever`` does (its docstring said it returned at
    most ``similarity_top_k`` memories): a superseded hit comes with its successor, past it."""
    mem, old, new = _moving()
    store = MnemisPropertyGraphStore(mem, namespace="u")
    nodes = MnemisPropertyGraphIndex.from_existing(property_graph_store=store).as_retriever(
        similarity_top_k=1
    )
    assert [n.node.metadata["node_id"] for n in nodes.retrieve(VAN)] == [old, new]
