"""Agent tools: recall (the model reads ``[path] text`` lines, the Documents ride along as the
artifact) and remember (the model writes a memory).

Both take their namespace the way LangMem's tools do: fixed, a ``"{user_id}"`` template filled
per run from the agent's runtime context (``agent.invoke(..., context=...)``) or
``config["configurable"]``, or a function of the run's config.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

# StructuredTool evaluates these annotations at runtime: keep them real imports.
from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from ..core.engine import MnemisMemory
from ..core.messages import utc_now
from ._convert import format_documents as memory_block_of
from ._namespaces import check_namespace_template, fill_namespace, is_namespace_template, run_value
from .retriever import MnemisRetriever

__all__ = [
    "RecallInput",
    "RememberInput",
    "create_recall_tool",
    "create_remember_tool",
    "format_documents",
    "remembered_id",
]

DEFAULT_DESCRIPTION = (
    "Search the user's long-term memory of past conversations. Use it whenever earlier facts, "
    "preferences, plans or events could matter. Each result line starts with its topic path "
    "in [brackets], broadest topic first."
)
REMEMBER_DESCRIPTION = (
    "Save one fact about the user to long-term memory (a preference, a plan, a detail they asked "
    "you to keep), as a self-contained sentence. It can be recalled in later conversations."
)
NO_RECALL = "No relevant memories found."
# Unanchored, as in JSON Schema: some non-space character. A blank query or fact then fails argument
# validation, which the agent's ToolNode hands back to the model; the memory's own
# InvalidQueryError/InvalidMessageError would end the whole agent run instead.
_NOT_BLANK = r"\S"

NamespaceSource = str | Callable[[RunnableConfig], str] | None


class RecallInput(BaseModel):
    """What the model sends to the recall tool."""

    query: str = Field(pattern=_NOT_BLANK, description="what to look up in long-term memory, in a few words")


class RememberInput(BaseModel):
    """What the model sends to the remember tool."""

    content: str = Field(
        pattern=_NOT_BLANK, description="the fact to remember, one self-contained sentence (who, what, when)"
    )


def format_documents(docs: list[Document]) -> str:
    """Recall Documents as the tool's text: one ``- [A > B] text`` line each, or a 'nothing found' line."""
    return memory_block_of(docs, header="", empty=NO_RECALL)


def _runtime_context() -> Any:
    """The agent's runtime context when the tool runs inside a LangGraph run, else ``None``."""
    try:
        from langgraph.runtime import get_runtime
    except ImportError:  # the [langchain] extra alone: configurable is all there is
        return None
    try:
        return getattr(get_runtime(), "context", None)
    except (RuntimeError, KeyError):  # not inside a graph run
        return None


def _namespace_kwargs(namespace: NamespaceSource) -> Callable[[RunnableConfig | None], dict[str, str]]:
    """What each call passes as ``namespace=``, from the tool's namespace source."""
    if namespace is None:
        return lambda config: {}
    if callable(namespace):
        return lambda config: {"namespace": namespace(config or {})}
    if is_namespace_template(namespace):
        template = check_namespace_template(namespace)
        return lambda config: {
            "namespace": fill_namespace(
                template, lambda name: run_value(name, _runtime_context(), (config or {}).get("configurable"))
            )
        }
    return lambda config: {"namespace": namespace}


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
        memory: a :class:`MnemisMemory`, or a ready :class:`MnemisRetriever` (then ``k`` and a fixed
            ``namespace`` are ignored).
        namespace: a fixed namespace; a template such as ``"{user_id}"`` or ``"team-{team_id}"``,
            filled on each call from the agent's runtime context (``agent.invoke(...,
            context=Ctx(user_id="u1"))``, a dataclass, object or dict) or else from
            ``config["configurable"]``, each value encoded as in the store (``"auth0|42"`` ->
            ``"auth0.7c42"``); or a function of the call's ``RunnableConfig`` returning one.
        k: how many memories to return.
        name: the tool name the model sees.
        description: the tool description the model sees.

    Returns:
        A ``StructuredTool`` with sync and async paths.

    Raises:
        ConfigError: a malformed template (when built), or a run that lacks a value it names.

    Example:
        .. code-block:: python

            tool = create_recall_tool(mem, namespace="{user_id}")
            agent = create_agent(model, tools=[tool], context_schema=Ctx)
            agent.invoke({"messages": [...]}, context=Ctx(user_id="u1"))   # recalls from "u1"
            msg = tool.invoke({"type": "tool_call", "id": "c1", "name": "recall_memory",
                               "args": {"query": "refund"}}, config={"configurable": {"user_id": "u1"}})
            msg.content    # "- [Shopping > Refunds] ..."
            msg.artifact   # [Document(...), ...]
    """
    fixed = namespace if isinstance(namespace, str) and not is_namespace_template(namespace) else None
    if isinstance(memory, MnemisRetriever):
        retriever = memory
    else:
        retriever = MnemisRetriever(memory=memory, namespace=fixed, k=k)
    per_call = _namespace_kwargs(None if fixed is not None else namespace)

    def recall(
        query: str,
        callbacks: Callbacks = None,
        config: RunnableConfig = None,  # type: ignore[assignment]
    ) -> tuple[str, list[Document]]:
        docs = retriever.invoke(query, config={"callbacks": callbacks}, **per_call(config))
        return format_documents(docs), docs

    async def arecall(
        query: str,
        callbacks: Callbacks = None,
        config: RunnableConfig = None,  # type: ignore[assignment]
    ) -> tuple[str, list[Document]]:
        docs = await retriever.ainvoke(query, config={"callbacks": callbacks}, **per_call(config))
        return format_documents(docs), docs

    return StructuredTool(
        name=name,
        description=description,
        func=recall,
        coroutine=arecall,
        args_schema=RecallInput,
        response_format="content_and_artifact",
    )


def remembered_id(content: str) -> str:
    """The message id a remembered fact gets: from its text, so saving it twice stores it once."""
    return "remember-" + hashlib.sha256(content.strip().encode("utf-8")).hexdigest()[:16]


def create_remember_tool(
    memory: MnemisMemory,
    *,
    namespace: NamespaceSource = None,
    name: str = "remember",
    description: str = REMEMBER_DESCRIPTION,
    speaker: str = "memory",
    clock: Callable[[], datetime] = utc_now,
) -> StructuredTool:
    """Build a tool with which the model writes a memory (``MnemisMemory.add_messages``).

    Each call stores one message: the model's ``content``, said by ``speaker``, stamped with
    ``clock()``, with an id made from its text (:func:`remembered_id`), so the same fact saved
    again is stored once. The recall tool, the middleware and retrievers over the namespace
    find it from then on.

    Args:
        memory: the memory to write to.
        namespace: as for :func:`create_recall_tool` (fixed, ``"{user_id}"`` template, or function).
        name: the tool name the model sees.
        description: the tool description the model sees.
        speaker: the speaker the stored messages get.
        clock: gives the timestamp of stored messages (UTC now by default; pass one in tests).

    Returns:
        A ``StructuredTool`` with sync and async paths; its result says what was saved.

    Example:
        .. code-block:: python

            tools = [create_recall_tool(mem, namespace="{user_id}"),
                     create_remember_tool(mem, namespace="{user_id}")]
            agent = create_agent(model, tools=tools, context_schema=Ctx)
    """
    per_call = _namespace_kwargs(namespace)

    def record(content: str) -> list[dict[str, Any]]:
        text = content.strip()
        return [{"id": remembered_id(text), "speaker": speaker, "text": text, "timestamp": clock()}]

    def reply(added: int, content: str) -> str:
        return f"{'Remembered' if added else 'Already remembered'}: {content.strip()}"

    def remember(content: str, config: RunnableConfig = None) -> str:  # type: ignore[assignment]
        report = memory.add_messages(record(content), **per_call(config))
        return reply(report.added, content)

    async def aremember(content: str, config: RunnableConfig = None) -> str:  # type: ignore[assignment]
        report = await memory.aadd_messages(record(content), **per_call(config))
        return reply(report.added, content)

    return StructuredTool(
        name=name,
        description=description,
        func=remember,
        coroutine=aremember,
        args_schema=RememberInput,
    )
