"""Legacy: ``MnemisClassicMemory``, a ``langchain_classic`` ``BaseMemory`` for pre-1.0 chains.

LangChain deprecated ``BaseMemory`` (chains like ``ConversationChain``/``LLMChain``); new code
should use :class:`~mnemis_integrations.langchain.MnemisMemoryMiddleware` or
:class:`~mnemis_integrations.langchain.MnemisStore` with ``create_agent``. This class exists so
that legacy chains can switch to Mnemis recall without being rewritten. Needs the ``[classic]``
extra (``pip install 'mnemis-integrations[classic]'``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..core.messages import utc_now
from ..errors import MissingDependencyError

try:
    from langchain_classic.base_memory import BaseMemory
    from langchain_classic.memory.utils import get_prompt_input_key
except ImportError as exc:  # pragma: no cover - exercised by the import-guard test
    raise MissingDependencyError("langchain-classic", "classic") from exc

from langchain_core.documents import Document
from pydantic import ConfigDict, Field

from ..core.engine import MnemisMemory
from ..errors import NamespaceNotFoundError
from ._convert import format_hits, message_record
from .retriever import to_document

__all__ = ["MnemisClassicMemory"]


class MnemisClassicMemory(BaseMemory):
    """Legacy ``BaseMemory``: recall with hierarchy paths in, each exchange ingested out.

    ``load_memory_variables`` recalls for the chain's input and returns it under ``memory_key``
    as ``- [A > B] text`` lines (or as Documents with ``return_docs=True``). ``save_context``
    ingests the input and the output as a user and an assistant message.

    Example:
        .. code-block:: python

            from mnemis_integrations.langchain.classic import MnemisClassicMemory
            memory = MnemisClassicMemory(memory=mem, namespace="u1")
            memory.save_context({"input": "My refund is late"}, {"output": "Sorry, I'll check."})
            memory.load_memory_variables({"input": "refund?"})["history"]   # "...\\n- [Refunds] ..."
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: MnemisMemory = Field(repr=False)
    """The Mnemis memory to recall from and ingest into."""
    namespace: str | None = None
    """Whose memory; ``None`` uses the memory's default namespace."""
    k: int = Field(default=5, gt=0)
    """How many memories to recall; a superseded one brings its current successor along, past ``k``."""
    memory_key: str = "history"
    """The chain input variable the recall is returned under."""
    input_key: str | None = None
    """Which input is the user's message; ``None`` means the only input that is not ``memory_key``."""
    output_key: str | None = None
    """Which output is the reply; ``None`` means the only output (or ``"output"``)."""
    return_docs: bool = False
    """Return a list of Documents (with metadata) instead of formatted text."""
    header: str = "Relevant memories (most relevant first; [topic path] then content):"
    """The line above the formatted recall."""
    clock: Callable[[], datetime] = Field(default=utc_now, repr=False)
    """Gives the timestamp of ingested messages."""

    @property
    def memory_variables(self) -> list[str]:
        return [self.memory_key]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        query = str(inputs[self._input_key(inputs)])
        try:
            hits = self.memory.search(query, k=self.k, namespace=self.namespace) if query.strip() else []
        except NamespaceNotFoundError:
            hits = []
        value: str | list[Document] = (
            [to_document(h) for h in hits] if self.return_docs else format_hits(hits, header=self.header)
        )
        return {self.memory_key: value}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        records = self._records(inputs, outputs)
        if records:
            self.memory.add_messages(records, namespace=self.namespace)

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        records = self._records(inputs, outputs)
        if records:
            await self.memory.aadd_messages(records, namespace=self.namespace)

    def clear(self) -> None:
        """Not supported: Mnemis keeps every message; use a new namespace to start afresh."""
        raise NotImplementedError(
            "Mnemis long-term memory is never cleared (messages are kept, old facts are superseded); "
            "use a new namespace to start afresh"
        )

    def _records(self, inputs: dict[str, Any], outputs: dict[str, str]) -> list[dict[str, Any]]:
        now = self.clock()
        pairs = [
            ("human", str(inputs[self._input_key(inputs)])),
            ("ai", str(outputs[self._output_key(outputs)])),
        ]
        return [
            message_record(message_id=str(uuid.uuid4()), role=role, text=text, timestamp=now)
            for role, text in pairs
            if text.strip()
        ]

    def _input_key(self, inputs: dict[str, Any]) -> str:
        return self.input_key or get_prompt_input_key(inputs, self.memory_variables)

    def _output_key(self, outputs: dict[str, str]) -> str:
        if self.output_key:
            return self.output_key
        if len(outputs) == 1:
            return next(iter(outputs))
        if "output" in outputs:
            return "output"
        raise ValueError(f"got output keys {sorted(outputs)}; set output_key to say which to save")
