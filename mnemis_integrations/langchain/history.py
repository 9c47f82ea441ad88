"""``MnemisChatMessageHistory``: a chat history that also ingests every message into Mnemis."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.messages import BaseMessage

from ..core.engine import MnemisMemory
from ._convert import message_record

__all__ = ["MnemisChatMessageHistory"]


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class MnemisChatMessageHistory(BaseChatMessageHistory):
    """The recent conversation window, with every message also kept in long-term memory.

    ``messages`` and ``clear()`` act on a window history (an ``InMemoryChatMessageHistory`` unless
    you pass another, e.g. a Redis or SQL one). Every added message goes into the Mnemis memory
    first, then into the window, so recall (``MnemisRetriever``) finds it later even after the
    window is cleared: ``clear()`` empties the window only, because Mnemis never deletes messages.

    A message without an ``id`` is given a fresh one (kept on the copy stored in the window), so
    the window and the memory name each message the same way. Re-adding a message with the same
    id stores it once in memory.

    Args:
        memory: the memory to ingest into.
        namespace: whose memory; ``None`` uses the memory's default namespace.
        history: the window history; a fresh ``InMemoryChatMessageHistory`` if omitted.
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
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.memory = memory
        self.namespace = namespace
        self.history = history if history is not None else InMemoryChatMessageHistory()
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
            self.memory.add_messages(records, **self._ns())
        self.history.add_messages(messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        messages, records = self._prepare(messages)
        if records:
            await self.memory.aadd_messages(records, **self._ns())
        await self.history.aadd_messages(messages)

    def clear(self) -> None:
        """Empty the window; the long-term memory keeps every message."""
        self.history.clear()

    async def aclear(self) -> None:
        await self.history.aclear()

    def _prepare(self, messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[dict]]:
        with_ids = [m if m.id else m.model_copy(update={"id": str(uuid.uuid4())}) for m in messages]
        now = self.clock()
        records = [
            message_record(message_id=str(m.id), role=m.type, text=m.text, timestamp=now)
            for m in with_ids
            if m.text.strip()
        ]
        return with_ids, records

    def _ns(self) -> dict[str, str]:
        return {} if self.namespace is None else {"namespace": self.namespace}
