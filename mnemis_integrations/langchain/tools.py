"""A recall tool for agents: the model reads ``[path] text`` lines, the Documents ride along as the artifact."""

from __future__ import annotations

from collections.abc import Callable

# StructuredTool evaluates these annotations at runtime: keep them real imports.
from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from ..core.engine import MnemisMemory
from ._convert import format_memory_line
from .retriever import MnemisRetriever

__all__ = ["RecallInput", "create_recall_tool", "format_documents"]

DEFAULT_DESCRIPTION = (
    "Search the user's long-term memory of past conversations. Use it whenever earlier facts, "
    "preferences, plans or events could matter. Each result line starts with its topic path "
    "in [brackets], broadest topic first."
)
NO_RECALL = "No relevant memories found."

NamespaceSource = str | Callable[[RunnableConfig], str] | None


class RecallInput(BaseModel):
    """What the model sends to the recall tool."""

    query: str = Field(description="what to look up in long-term memory, in a few words")


def format_documents(docs: list[Document]) -> str:
    """Recall Documents as the tool's text: one ``- [A > B] text`` line each, or a 'nothing found' line."""
    if not docs:
        return NO_RECALL
    return "\n".join(
        "- "
        + format_memory_line(
            d.metadata.get("path_str", ""), d.page_content, status=d.metadata.get("status", "active")
        )
        for d in docs
    )


def create_recall_tool(
    memory: MnemisMemory | MnemisRetriever,
    *,
    namespace: NamespaceSource = None,
    k: int = 5,
    name: str = "recall_memory",
    description: str = DEFAULT_DESCRIPTION,
) -> StructuredTool:
    """Build a tool that answers a query with Mnemis recall (``response_format="content_and_artifact"``).

    The ``ToolMessage`` content is the recall as ``- [path] text`` lines, so the model sees where
    each memory sits; its ``artifact`` is the list of Documents with full metadata (scores, ``via``,
    ``source_ids``), kept in the agent state but not sent to the model.

    Args:
        memory: a :class:`MnemisMemory`, or a ready :class:`MnemisRetriever` (then ``k`` and a string
            ``namespace`` are ignored).
        namespace: a fixed namespace, or a function of the call's ``RunnableConfig`` returning one
            (e.g. ``lambda cfg: cfg["configurable"]["user_id"]``) for one tool shared by many users.
        k: how many memories to return.
        name: the tool name the model sees.
        description: the tool description the model sees.

    Returns:
        A ``StructuredTool`` with sync and async paths.

    Example:
        .. code-block:: python

            tool = create_recall_tool(mem, namespace="u1")
            msg = tool.invoke({"type": "tool_call", "id": "c1", "name": "recall_memory",
                               "args": {"query": "refund"}})
            msg.content    # "- [Shopping > Refunds] ..."
            msg.artifact   # [Document(...), ...]
    """
    if isinstance(memory, MnemisRetriever):
        retriever = memory
    else:
        retriever = MnemisRetriever(
            memory=memory, namespace=namespace if isinstance(namespace, str) else None, k=k
        )
    resolve = namespace if callable(namespace) else None

    def _kwargs(config: RunnableConfig | None) -> dict:
        return {"namespace": resolve(config or {})} if resolve is not None else {}

    def recall(
        query: str,
        callbacks: Callbacks = None,
        config: RunnableConfig = None,  # type: ignore[assignment]
    ) -> tuple[str, list[Document]]:
        docs = retriever.invoke(query, config={"callbacks": callbacks}, **_kwargs(config))
        return format_documents(docs), docs

    async def arecall(
        query: str,
        callbacks: Callbacks = None,
        config: RunnableConfig = None,  # type: ignore[assignment]
    ) -> tuple[str, list[Document]]:
        docs = await retriever.ainvoke(query, config={"callbacks": callbacks}, **_kwargs(config))
        return format_documents(docs), docs

    return StructuredTool(
        name=name,
        description=description,
        func=recall,
        coroutine=arecall,
        args_schema=RecallInput,
        response_format="content_and_artifact",
    )
