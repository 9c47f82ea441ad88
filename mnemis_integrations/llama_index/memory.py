"""``MnemisMemoryBlock``: Mnemis as the long-term block of LlamaIndex's ``Memory``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from llama_index.core.async_utils import asyncio_run
from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory import BaseMemory
from llama_index.core.memory.memory import BaseMemoryBlock

from ..core.engine import MnemisMemory, check_count
from ..core.messages import utc_now
from ..errors import NamespaceNotFoundError
from ._convert import chat_message_id, chat_record, format_hits
from .retriever import search_kwargs

__all__ = ["MnemisMemoryBlock"]


def _text(message: ChatMessage) -> str:
    text = "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))
    return text.replace("\x00", "").strip()


class MnemisMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory for ``llama_index.core.memory.Memory``, so agents recall across sessions.

    On every read, the block searches the namespace with the latest message(s) and returns
    the recalled memories as one text block (``- [topic path] content (date)`` lines) that
    ``Memory`` places in the system message. Memories made only of messages still in the
    short-term window (and topics made only of such messages) are left out: the model already
    sees them.

    **How every message reaches long-term memory.** ``Memory`` hands messages to blocks only
    when its short-term queue overflows and flushes, so a short session would never reach
    the block. This block therefore also ingests the messages it is *shown*: ``Memory`` passes
    its whole short-term history to each block on every read (``memory.get()``/``aget()``),
    and agents read memory on every step and once more after the final answer is stored
    (``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow``). So by the end of each agent run,
    every message of the session is in Mnemis, flush or no flush. Flushed messages arrive
    through ``aput`` as usual. Each chat message gets a stable id from its session and content
    (:func:`~._convert.chat_message_id`), so the repeated deliveries store it once. If you
    write to ``Memory`` yourself and may end a session without reading it, call
    :meth:`acommit` (or :meth:`commit`) with the ``Memory`` at the end of the session.

    Consequences: the same text from the same role twice in one session is stored once; a
    message's time is when the block first saw it (``ChatMessage`` has no timestamp).

    Example:
        .. code-block:: python

            from llama_index.core.agent.workflow import FunctionAgent
            from llama_index.core.memory import Memory
            from mnemis_integrations.llama_index import MnemisMemoryBlock

            block = MnemisMemoryBlock(memory=mem, namespace="u1")
            memory = Memory.from_defaults(session_id="chat-42", memory_blocks=[block])
            agent = FunctionAgent(llm=llm, tools=[])
            await agent.run("What did I say about my refund?", memory=memory)
    """

    name: str = Field(default="long_term_memory", description="The name of the memory block.")
    memory: MnemisMemory = Field(description="The Mnemis memory to recall from and write to.", exclude=True)
    namespace: str | None = Field(
        default=None, description="Whose memory (e.g. a user id); None uses the memory's default namespace."
    )
    similarity_top_k: int = Field(
        default=5,
        ge=1,
        description="How many memories to recall; a superseded one brings its current successor along, "
        "past it.",
    )
    retrieval_context_window: int = Field(
        default=1, ge=1, description="How many of the latest messages form the search query."
    )
    max_chars: int | None = Field(
        default=400, description="Each recalled memory is cut to this many characters."
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Fit the recalled memories into this many tokens (MnemisMemory.fit_to_budget); "
        "None: no budget.",
    )
    ingest_on_read: bool = Field(
        default=True,
        description="Store the short-term messages each read is shown (see the class docs); "
        "with False, messages reach Mnemis only when Memory flushes or through commit().",
    )
    roles: list[str] | None = Field(
        default=None, description="Only messages with these roles are stored; None stores every role."
    )
    clock: Callable[[], datetime] = Field(
        default=utc_now, exclude=True, description="Time stamped on messages when first stored."
    )
    _stored: set = PrivateAttr(default_factory=set)

    def __init__(self, **data: Any) -> None:
        # Refused as the retrievers refuse them, with the library's error naming the argument
        # (pydantic's own bounds would answer with its ValidationError, and take "3" for 3).
        memory = data.get("memory")
        most = memory.config.limits.max_k if isinstance(memory, MnemisMemory) else None
        if "similarity_top_k" in data:
            check_count("similarity_top_k", data["similarity_top_k"], most)
        if data.get("max_tokens") is not None:
            check_count("max_tokens", data["max_tokens"])
        super().__init__(**data)

    # ----- writing -----
    async def aingest(self, messages: list[ChatMessage], session_id: str | None = None) -> int:
        """Store chat messages in Mnemis now; messages already stored are skipped.

        Args:
            messages: the messages, oldest first.
            session_id: the ``Memory`` session they belong to (part of each message id).

        Returns:
            How many messages were new to this block.
        """
        records, seen = [], set()
        for message in messages:
            role = message.role.value
            text = _text(message)
            if not text or (self.roles is not None and role not in self.roles):
                continue
            sid = message.additional_kwargs.get("session_id", session_id)
            mid = chat_message_id(sid, role, text)
            if mid in self._stored or mid in seen:
                continue
            seen.add(mid)
            records.append(chat_record(session_id=sid, role=role, text=text, timestamp=self.clock()))
        if records:
            await self.memory.aadd_messages(records, namespace=self.namespace)
            self._stored.update(seen)
        return len(records)

    async def acommit(self, memory: BaseMemory) -> int:
        """Store every message a ``Memory`` holds for its session, flushed or not.

        Returns:
            How many messages were new to this block.
        """
        messages = await memory.aget_all()
        return await self.aingest(messages, session_id=getattr(memory, "session_id", None))

    def commit(self, memory: BaseMemory) -> int:
        """Synchronous :meth:`acommit`."""
        return asyncio_run(self.acommit(memory))

    async def _aput(self, messages: list[ChatMessage]) -> None:
        await self.aingest(messages)

    # ----- reading -----
    async def _aget(
        self,
        messages: list[ChatMessage] | None = None,
        session_id: str | None = None,
        **block_kwargs: Any,
    ) -> str:
        messages = messages or []
        if self.ingest_on_read and messages:
            await self.aingest(messages, session_id=session_id)
        window = [t for t in (_text(m) for m in messages[-self.retrieval_context_window :]) if t]
        if not window:
            return ""
        # A pasted document must not break the read: search with its most recent part.
        query = "\n".join(window)[-self.memory.config.limits.max_query_chars :]
        try:
            in_context = {chat_message_id(session_id, m.role.value, _text(m)) for m in messages}
            hits = await self.memory.asearch(
                query,
                **search_kwargs(self.similarity_top_k, self.namespace, self.max_tokens),
                exclude_messages=in_context,
            )
        except NamespaceNotFoundError:
            return ""
        return format_hits(hits, max_chars=self.max_chars)
