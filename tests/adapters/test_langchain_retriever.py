"""MnemisRetriever: the LangChain standard retriever suite, metadata, per-call options, LCEL."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from fakes import ScriptedChatModel, empty_memory, seeded_memory
from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_tests.integration_tests import RetrieversIntegrationTests

from mnemis_integrations import recipes
from mnemis_integrations.core.retrieval.results import Via
from mnemis_integrations.errors import InvalidQueryError
from mnemis_integrations.langchain import MnemisRetriever

METADATA_KEYS = {
    "path",
    "path_str",
    "score",
    "semantic_score",
    "relation_score",
    "via",
    "kind",
    "node_id",
    "source_ids",
    "time",
    "status",
}


@functools.cache
def shared_memory():
    return seeded_memory("u1")


class TestMnemisRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[MnemisRetriever]:
        return MnemisRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": shared_memory(), "namespace": "u1", "k": 5}

    @property
    def retriever_query_example(self) -> str:
        return "when will my refund arrive"


VIA = {v for name, v in vars(Via).items() if name.isupper()}  # every mechanism a hit can name


@pytest.fixture
def retriever() -> MnemisRetriever:
    return MnemisRetriever(memory=seeded_memory("u1"), namespace="u1", k=5)


def test_documents_carry_path_scores_and_provenance(retriever):
    docs = retriever.invoke("refund order timed out")
    assert docs and all(isinstance(d, Document) for d in docs)
    for d in docs:
        md = d.metadata
        assert METADATA_KEYS <= md.keys()
        assert isinstance(md["path"], list) and md["path"], md
        assert md["path_str"] == " > ".join(md["path"])
        assert 0.0 <= md["score"] <= 1.0
        assert md["via"] and set(md["via"]) <= VIA, md["via"]
        assert md["status"] in {"active", "superseded", "archived"}
        assert d.id == md["node_id"]
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)


def test_best_document_for_a_refund_query_cites_a_refund_message(retriever):
    top = retriever.invoke("my refund has not arrived", k=1)[0]
    assert {"m01", "m02", "m03"} & set(top.metadata["source_ids"])
    assert "refund" in top.page_content.lower()


async def test_async_invoke_gives_the_same_documents_as_sync(retriever):
    sync = retriever.invoke("beagle vet vaccines")
    asyn = await retriever.ainvoke("beagle vet vaccines")
    assert [d.metadata["node_id"] for d in asyn] == [d.metadata["node_id"] for d in sync]


def test_k_and_namespace_can_change_per_call():
    mem = seeded_memory("u1")
    mem.add_messages(
        [{"id": "x1", "speaker": "user", "text": "Book a dentist visit for Tuesday."}], namespace="u2"
    )
    r = MnemisRetriever(memory=mem, namespace="u1", k=5)
    assert len(r.invoke("refund", k=2)) == 2
    other = r.invoke("dentist visit", namespace="u2")
    assert other and {s for d in other for s in d.metadata["source_ids"]} == {"x1"}
    assert all(d.metadata["namespace"] == "u2" for d in other)


def test_a_config_recipe_changes_how_the_retriever_searches():
    mem = seeded_memory("u1")
    semantic_only = MnemisRetriever(memory=mem, namespace="u1", config=recipes.SEMANTIC_ONLY).invoke(
        "Rex vet"
    )
    expected = mem.search("Rex vet", k=5, namespace="u1", config=recipes.SEMANTIC_ONLY)
    assert [d.metadata["node_id"] for d in semantic_only] == [h.node_id for h in expected]
    tiny_queries = recipes.DEFAULT.with_(limits={"max_query_chars": 3})
    with pytest.raises(InvalidQueryError):
        MnemisRetriever(memory=mem, namespace="u1", config=tiny_queries).invoke("Rex vet")


def test_namespace_without_memory_gives_no_documents():
    r = MnemisRetriever(memory=empty_memory(), namespace="nobody")
    assert r.invoke("anything at all") == []


async def test_namespace_without_memory_gives_no_documents_async():
    r = MnemisRetriever(memory=empty_memory(), namespace="nobody")
    assert await r.ainvoke("anything at all") == []


def test_empty_query_is_refused_not_swallowed(retriever):
    with pytest.raises(InvalidQueryError):
        retriever.invoke("   ")


def test_k_must_be_positive():
    with pytest.raises(ValueError, match="greater than 0"):
        MnemisRetriever(memory=empty_memory(), k=0)


def test_unknown_per_call_option_is_an_error(retriever):
    with pytest.raises(TypeError):
        retriever.invoke("refund", top_n=3)


def test_retriever_works_inside_an_lcel_chain(retriever):
    model = ScriptedChatModel.of("Five business days.")
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Use these memories:\n{context}"), ("human", "{question}")]
    )

    def as_context(docs: list[Document]) -> str:
        return "\n".join(f"[{d.metadata['path_str']}] {d.page_content}" for d in docs)

    chain = (
        {"context": retriever | RunnableLambda(as_context), "question": RunnablePassthrough()}
        | prompt
        | model
    )
    out = chain.invoke("when does my refund arrive")

    expected_top = retriever.invoke("when does my refund arrive")[0]
    system, human = model.prompts[0]
    assert system.text.splitlines()[1].startswith(f"[{expected_top.metadata['path_str']}] ")
    assert human.text == "when does my refund arrive"
    assert (model.calls, out.text) == (1, "Five business days.")


def test_max_tokens_fits_the_documents_into_the_budget():
    from mnemis_integrations.core.tokens import count_tokens

    mem = seeded_memory("u1")
    full = MnemisRetriever(memory=mem, namespace="u1", k=10).invoke("refund")
    budget = sum(count_tokens(d.page_content) for d in full) // 2
    fitted = MnemisRetriever(memory=mem, namespace="u1", k=10, max_tokens=budget).invoke("refund")
    assert fitted and sum(count_tokens(d.page_content) for d in fitted) <= budget
    rank = [d.metadata["node_id"] for d in full]
    places = [rank.index(d.metadata["node_id"]) for d in fitted]
    assert places == sorted(places) and places[0] == 0  # rank order kept, the best hit shown


def test_delete_forgets_messages_by_id_and_delete_namespace_the_rest():
    """Before: the LangChain adapter had no way to erase anything; README's ``forget`` and the
    history's "Mnemis never deletes messages" contradicted each other."""
    memory = seeded_memory("u1")
    retriever = MnemisRetriever(memory=memory, namespace="u1", k=5)
    report = retriever.delete(["m03", "nope"])
    assert (report.forgotten, report.not_found) == (1, ("nope",))
    docs = retriever.invoke("refund request timed out twice on the website")
    assert docs and all("timed out twice" not in d.page_content for d in docs)
    assert all("m03" not in d.metadata["source_ids"] for d in docs)
    retriever.delete_namespace()
    assert memory.namespaces() == [] and retriever.invoke("refund") == []


async def test_async_delete_forgets_in_the_named_namespace():
    memory = seeded_memory("u1")
    memory.add_messages(
        [{"id": "x1", "speaker": "user", "text": "My passport number is X4471922."}], namespace="u2"
    )
    retriever = MnemisRetriever(memory=memory, namespace="u1")
    await retriever.adelete(["x1"], namespace="u2")
    assert memory.namespaces() == ["u1"]
    await retriever.adelete_namespace()
    assert memory.namespaces() == []
