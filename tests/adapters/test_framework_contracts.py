"""What langchain-core, LangGraph and llama-index-core hand the adapters, and what their callers
expect back: a document's metadata kept as its own, async methods off the event loop, streamed
replies under their role, a '*' namespace label read literally."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.runnables.history import RunnableWithMessageHistory
from llama_fakes import make_memory, offline_settings
from llama_index.core.schema import Document, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.langchain import MnemisChatMessageHistory, MnemisStore
from mnemis_integrations.langchain.store import item_level_config
from mnemis_integrations.llama_index import MnemisPropertyGraphIndex, MnemisPropertyGraphStore

# -- LlamaIndex property-graph store: a document's metadata is not a set of node fields ------------


@pytest.mark.parametrize(
    "metadata",
    [{"status": "draft"}, {"keywords": 5}, {"valid_until": "n/a"}],
    ids=["status", "keywords", "valid_until"],
)
def test_a_document_whose_metadata_names_a_node_field_is_inserted_and_keeps_its_metadata(metadata):
    with offline_settings():
        mem = make_memory(messages=[])
        store = MnemisPropertyGraphStore(mem, namespace="docs")
        doc = Document(text="Logan escalated the bounced refund to the payments team.", metadata=metadata)
        MnemisPropertyGraphIndex.from_documents([doc], property_graph_store=store)
        chunks = store.get(properties={"ref_doc_id": doc.doc_id})
        assert len(chunks) == 1
        (restored,) = store.get_llama_nodes([chunks[0].id])
        assert restored.metadata == metadata
        assert mem.search("bounced refund", namespace="docs")


def test_upsert_llama_nodes_stores_a_text_node_with_a_status_in_its_metadata():
    mem = make_memory(messages=[])
    store = MnemisPropertyGraphStore(mem, namespace="docs")
    store.upsert_llama_nodes(
        [TextNode(id_="c1", text="The vet has slots on Friday.", metadata={"status": "open"})]
    )
    assert [n.id for n in store.get(ids=["c1"])] == ["c1"]


# -- LlamaIndex property-graph store: async methods must not block the event loop -------------------


class _WaitingEmbedder(HashingEmbedder):
    """Embeds a query only once the event loop has run another task (or gives up after 5 s)."""

    def __init__(self):
        super().__init__()
        self.loop_ran = threading.Event()
        self.saw_the_loop_run = False

    def embed_queries(self, texts):
        self.saw_the_loop_run = self.loop_ran.wait(timeout=5)
        return super().embed_queries(texts)


def test_avector_query_does_not_block_the_event_loop():
    embedder = _WaitingEmbedder()
    mem = MnemisMemory(embedder=embedder)
    mem.add_messages(
        [{"id": "m1", "speaker": "user", "text": "My refund for order 42 is late."}], namespace="u1"
    )
    store = MnemisPropertyGraphStore(mem, namespace="u1")

    async def query_beside_another_task():
        async def other_task():
            embedder.loop_ran.set()

        query = asyncio.create_task(
            store.avector_query(VectorStoreQuery(query_str="refund", similarity_top_k=2))
        )
        await asyncio.sleep(0)  # the query starts first: a blocking one holds the loop from here
        await asyncio.gather(query, other_task())

    asyncio.run(query_beside_another_task())
    assert embedder.saw_the_loop_run, "the query was embedded on the event loop"


# -- LangChain chat history: a streamed reply is the assistant's ------------------------------------


def test_a_streamed_reply_through_runnable_with_message_history_is_stored_as_the_assistants():
    mem = MnemisMemory(embedder=HashingEmbedder())
    history = MnemisChatMessageHistory(mem, "u1")
    model = GenericFakeChatModel(messages=iter([AIMessage("I escalated the refund for order 42.")]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chain = RunnableWithMessageHistory(model, lambda session_id: history)
        for _ in chain.stream("My refund for order 42 is late", config={"configurable": {"session_id": "s"}}):
            pass
    assert isinstance(history.messages[-1], AIMessageChunk)  # what langchain-core hands the history
    assert [m.speaker for m in mem.messages("u1")] == ["user", "assistant"]


def test_message_chunks_are_stored_with_their_roles_speaker():
    mem = MnemisMemory(embedder=HashingEmbedder())
    history = MnemisChatMessageHistory(mem, "u1")
    history.add_messages([HumanMessage("Is my refund late?"), AIMessageChunk(content="Yes, by two days.")])
    assert [m.speaker for m in mem.messages("u1")] == ["user", "assistant"]


# -- LangGraph store: a '*' label is a label, not a wildcard ---------------------------------------


def test_query_search_treats_a_star_label_literally_as_langgraph_stores_do():
    store = MnemisStore(MnemisMemory(embedder=HashingEmbedder(), config=item_level_config()))
    store.put(("memories", "alice"), "tea", {"text": "Alice drinks green tea every morning"})
    store.put(("memories", "bob"), "tea", {"text": "Bob drinks green tea after lunch"})
    assert store.search(("memories", "*")) == []  # answered by the backing store: no such namespace
    assert store.search(("memories", "*"), query="green tea") == []
    assert store.search(("*",), query="green tea") == []
    store.put(("memories", "*"), "tea", {"text": "Star drinks green tea at night"})
    found = store.search(("memories", "*"), query="green tea")
    assert [(i.namespace, i.key) for i in found] == [(("memories", "*"), "tea")]


async def test_async_query_search_treats_a_star_label_literally():
    store = MnemisStore(MnemisMemory(embedder=HashingEmbedder(), config=item_level_config()))
    await store.aput(("memories", "alice"), "tea", {"text": "Alice drinks green tea every morning"})
    assert await store.asearch(("memories", "*"), query="green tea") == []
