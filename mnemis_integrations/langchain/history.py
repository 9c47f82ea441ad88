"""``MnemisChatMessageHistory``: a chat history that also ingests every message into Mnemis."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from ..core.engine import MnemisMemory
from ..core.messages import utc_now
from ._convert import message_record

if TYPE_CHECKING:
    from ..core.maintenance.forget import ForgetReport

__all__ = ["MnemisChatMessageHistory"]


class _Window(BaseChatMessageHistory):
    """The default window: a list. langchain-core 1.6.4 deprecated ``InMemoryChatMessageHistory``
    (it warns when built); a subclass of the chat-history base does not warn."""

    def __init__(self) -> None:
        self.messages: list[BaseMessage] = []

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self.messages.extend(messages)

    def clear(self) -> None:
        self.messages = []


class MnemisChatMessageHistory(BaseChatMessageHistory):
    """The recent conversation window, with every message also kept in long-term memory.

    For ``RunnableWithMessageHistory`` and other users of LangChain's chat-history interface
    (which langchain-core 1.6.4 marks as legacy; an agent built with ``create_agent`` takes
    :class:`~.middleware.MnemisMemoryMiddleware` instead). Building one raises no deprecation
    warning.

    ``messages`` and ``clear()`` act on a window history (an in-memory list unless you pass
    another, e.g. a Redis or SQL one). Every added message goes into the Mnemis memory first,
    then into the window, so recall (``MnemisRetriever``) finds it later even after the window
    is cleared.

    Clearing and erasing are two calls: ``clear()`` empties the window only and long-term memory
    keeps every message (a new conversation still remembers the old one); :meth:`forget` erases
    messages from long-term memory (graph, indexes and a persisted file, as
    ``MnemisMemory.forget``) and from the window. To erase everything a namespace holds, call
    ``memory.forget(namespace=...)``.

    A message without an ``id`` is given a fresh one (kept on the copy stored in the window), so
    the window and the memory name each message the same way. Re-adding a message with the same
    id stores it once in memory.

    Args:
        memory: the memory to ingest into.
        namespace: whose memory; ``None`` uses the memory's default namespace.
        history: the window history; if omitted, a plain list of messages in this object (not
            LangChain's deprecated in-memory history class, which warns when built).
        clock: gives the timestamp of ingested messages (UTC now by default; pass one in tests).

    Example:
        .. code-block:: python

            history = MnemisChatMessageHistory(memory=mem, namespace="u1")
            history.add_user_message("My refund for order 1234 is late")
            history.messages       # [HumanMessage(...)]
            mem.search("refund", namespace="u1")[0].path_str
    """

    def __init__(
        self,
        memory: MnemisMemory,
        namespace: str | None = None,
        *,
        history: BaseChatMessageHistory | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.memory = memory
        self.namespace = namespace
        self.history = history if history is not None else _Window()
        self.clock = clock

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The messages in the window, oldest first."""
        return self.history.messages

    async def aget_messages(self) -> list[BaseMessage]:
        return await self.history.aget_messages()

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        messages, records = self._prepare(messages)
        if records:
            self.memory.add_messages(records, namespace=self.namespace)
        self.history.add_messages(messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        messages, records = self._prepare(messages)
        # Shielded: a cancel does not stop the memory's write (it runs on in its thread), so the
        # window must still follow it.
        await asyncio.shield(self._aadd(messages, records))

    async def _aadd(self, messages: list[BaseMessage], records: list[dict]) -> None:
        if records:
            await self.memory.aadd_messages(records, namespace=self.namespace)
        await self.history.aadd_messages(messages)

    def clear(self) -> None:
        """Empty the window; the long-term memory keeps every message (see :meth:`forget`)."""
        self.history.clear()

    async def aclear(self) -> None:
        await self.history.aclear()

    def forget(self, message_ids: Sequence[str] | None = None) -> ForgetReport:
        """Erase messages from long-term memory and from the window.

        Args:
            message_ids: the messages to erase; ``None`` erases every message in the window.

        Returns:
            The memory's :class:`~mnemis_integrations.core.maintenance.forget.ForgetReport`.
        """
        window = self.history.messages
        ids = _ids_to_forget(message_ids, window)
        report = self.memory.forget(ids, namespace=self.namespace)
        if (kept := _remaining(window, ids)) is not None:
            self.history.clear()
            self.history.add_messages(kept)
        return report

    async def aforget(self, message_ids: Sequence[str] | None = None) -> ForgetReport:
        window = await self.history.aget_messages()
        ids = _ids_to_forget(message_ids, window)
        # Shielded as aadd_messages: once forgotten, the messages must leave the window too.
        return await asyncio.shield(self._aforget(ids, window))

    async def _aforget(self, ids: list[str], window: list[BaseMessage]) -> ForgetReport:
        report = await self.memory.aforget(ids, namespace=self.namespace)
        if (kept := _remaining(window, ids)) is not None:
            await self.history.aclear()
            await self.history.aadd_messages(kept)
        return report

    def _prepare(self, messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[dict]]:
        with_ids = [m if m.id else m.model_copy(update={"id": str(uuid.uuid4())}) for m in messages]
        now = self.clock()
        records = [
            message_record(message_id=str(m.id), role=m.type, text=m.text, timestamp=now)
            for m in with_ids
            if m.text.strip()
        ]
        return with_ids, records


def _ids_to_forget(message_ids: Sequence[str] | None, window: Sequence[BaseMessage]) -> list[str]:
    if message_ids is None:
        return [str(m.id) for m in window if m.id]
    return [message_ids] if isinstance(message_ids, str) else list(message_ids)


def _remaining(window: Sequence[BaseMessage], ids: Sequence[str]) -> list[BaseMessage] | None:
    """The window without the forgotten messages, or ``None`` when none of them was in it."""
    gone = set(ids)
    kept = [m for m in window if str(m.id) not in gone]
    return kept if len(kept) < len(window) else None
