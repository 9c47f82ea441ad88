"""Erasure by message id and by namespace, for the adapters that hold a memory and a namespace.

The LangChain and LlamaIndex retrievers share it, so both erase the same way: through
:meth:`MnemisMemory.forget` (text gone from the graph, the indexes and a persisted file).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import MnemisMemory
    from .maintenance.forget import ForgetReport

__all__ = ["Erasure"]


class Erasure:
    """Mixin for an object with ``memory`` (a ``MnemisMemory``) and ``namespace`` (``str | None``)."""

    if TYPE_CHECKING:  # declared by the adapter (a pydantic field or an attribute), not here
        memory: MnemisMemory
        namespace: str | None

    def delete(self, ids: Sequence[str], *, namespace: str | None = None) -> ForgetReport:
        """Forget messages by id, as a vector store's ``delete`` removes vectors.

        Args:
            ids: message ids, as given to ``add_messages`` (a result's ``source_ids`` name them).
            namespace: whose memory; this object's own if omitted.

        Returns:
            A ``ForgetReport``; ids that were not stored are listed in its ``not_found``.
        """
        return self.memory.forget(ids, namespace=self._erased_namespace(namespace))

    async def adelete(self, ids: Sequence[str], *, namespace: str | None = None) -> ForgetReport:
        return await self.memory.aforget(ids, namespace=self._erased_namespace(namespace))

    def delete_namespace(self, namespace: str | None = None) -> ForgetReport:
        """Forget every message of a namespace (this object's own if omitted), as a store's ``clear``."""
        return self.memory.forget(namespace=self._erased_namespace(namespace))

    async def adelete_namespace(self, namespace: str | None = None) -> ForgetReport:
        return await self.memory.aforget(namespace=self._erased_namespace(namespace))

    def _erased_namespace(self, namespace: str | None) -> str:
        chosen = namespace if namespace is not None else self.namespace
        return chosen if chosen is not None else self.memory.namespace
