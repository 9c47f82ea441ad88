"""The recall tool: the model reads path-prefixed lines, the Documents stay in the artifact."""

from __future__ import annotations

from fakes import empty_memory, seeded_memory
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage

from mnemis_integrations.langchain import MnemisRetriever, create_recall_tool
from mnemis_integrations.langchain.tools import NO_RECALL


def tool_call(query: str, call_id: str = "c1") -> dict:
    return {"type": "tool_call", "id": call_id, "name": "recall_memory", "args": {"query": query}}


def test_tool_message_shows_paths_and_keeps_documents_as_artifact():
    tool = create_recall_tool(seeded_memory("u1"), namespace="u1", k=3)
    msg = tool.invoke(tool_call("refund timed out"))
    assert isinstance(msg, ToolMessage) and msg.tool_call_id == "c1"
    docs = msg.artifact
    assert len(docs) == 3 and all(isinstance(d, Document) for d in docs)
    items = msg.content.split("\n- ")
    assert len(items) == 3 and items[0].startswith("- ")
    for item, doc in zip(items, docs):
        assert item.removeprefix("- ").startswith(
            f"[{doc.metadata['path_str']}] {doc.page_content.strip()[:20]}"
        )
    assert all("score" in d.metadata and "source_ids" in d.metadata for d in docs)


async def test_tool_runs_async_with_the_same_content():
    tool = create_recall_tool(seeded_memory("u1"), namespace="u1", k=3)
    sync = tool.invoke(tool_call("beagle vet"))
    asyn = await tool.ainvoke(tool_call("beagle vet"))
    assert asyn.content == sync.content


def test_tool_says_nothing_was_found_for_an_empty_memory():
    msg = create_recall_tool(empty_memory(), namespace="u1").invoke(tool_call("anything"))
    assert (msg.content, msg.artifact) == (NO_RECALL, [])


def test_tool_namespace_can_come_from_the_run_config():
    mem = seeded_memory("u1")
    mem.add_messages(
        [{"id": "x1", "speaker": "user", "text": "Book a dentist visit for Tuesday."}], namespace="u2"
    )
    tool = create_recall_tool(mem, namespace=lambda cfg: cfg["configurable"]["user_id"])
    msg = tool.invoke(tool_call("dentist visit"), config={"configurable": {"user_id": "u2"}})
    assert msg.artifact and {s for d in msg.artifact for s in d.metadata["source_ids"]} == {"x1"}


def test_tool_accepts_a_ready_retriever_and_exposes_a_query_schema():
    retriever = MnemisRetriever(memory=seeded_memory("u1"), namespace="u1", k=1)
    tool = create_recall_tool(retriever, name="remember")
    assert tool.name == "remember"
    assert set(tool.tool_call_schema.model_json_schema()["properties"]) == {"query"}
    assert (
        len(
            tool.invoke(
                {"type": "tool_call", "id": "c", "name": "remember", "args": {"query": "tea"}}
            ).artifact
        )
        == 1
    )
