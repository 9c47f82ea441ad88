"""``MnemisRetriever``: Mnemis recall as a LangChain ``BaseRetriever``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from ..core.config import MemoryConfig
from ..core.engine import MnemisMemory
from ..core.erasure import Erasure
from ..errors import NamespaceNotFoundError
from ._convert import hit_metadata

if TYPE_CHECKING:
    from ..core.retrieval.results import MemoryHit

__all__ = ["MnemisRetriever", "to_document"]


def to_document(hit: MemoryHit) -> Document:
    """One hit as a ``Document``: its text as content, everything else (path, scores, provenance) as metadata."""
    return Document(page_content=hit.text, metadata=hit_metadata(hit), id=hit.node_id)


class MnemisRetriever(Erasure, BaseRetriever):
    """Dual-path recall from a :class:`~mnemis_integrations.MnemisMemory`, as Documents.

    Each ``Document`` holds one memory node's text; its metadata says where the node sits and
    how it was found: ``path`` (list of labels, top concept first), ``path_str`` ("A > B > C"),
    ``score``, ``semantic_score``, ``relation_score``, ``via``, ``kind``, ``node_id``,
    ``source_ids``, ``time`` (ISO string), ``status``, ``label``, ``namespace`` and ``successors``.

    A namespace with no memory yet gives ``[]``. ``k`` and ``namespace`` can be changed per call.

    Erasing goes through the same object: :meth:`delete` forgets messages by id (a Document's
    ``metadata["source_ids"]`` names them) and :meth:`delete_namespace` a whole namespace, both
    with ``MnemisMemory.forget`` (text gone from graph, indexes and a persisted file).

    Example:
        .. code-block:: python

            from mnemis_integrations import MnemisMemory
            from mnemis_integrations.langchain import MnemisRetriever

            mem = MnemisMemory()
            mem.add_messages([{"id": "m1", "speaker": "user", "text": "My refund is late"}], namespace="u1")
            retriever = MnemisRetriever(memory=mem, namespace="u1", k=5)
            docs = retriever.invoke("refund status")
            docs[0].metadata["path_str"]        # e.g. "Shopping > Refunds > Late refund"
            retriever.invoke("refund status", k=2, namespace="u2")
            retriever.delete(["m1"])                  # forget message m1 of namespace u1
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: MnemisMemory = Field(repr=False)
    """The memory to recall from; the retriever holds no state of its own."""
    namespace: str | None = None
    """Whose memory to search; ``None`` uses the memory's default namespace."""
    k: int = Field(default=5, gt=0)
    """How many Documents to return at most."""
    config: MemoryConfig | None = None
    """Search settings for this retriever (e.g. ``recipes.SEMANTIC_ONLY``); ``None`` uses the memory's own."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Fit the Documents' text into this many tokens (``MnemisMemory.fit_to_budget``); ``None``: no limit."""

    def _search_kwargs(self, k: int | None, namespace: str | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"k": self.k if k is None else k}
        ns = self.namespace if namespace is None else namespace
        if ns is not None:
            kwargs["namespace"] = ns
        if self.config is not None:
            kwargs["config"] = self.config
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        return kwargs

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        namespace: str | None = None,
    ) -> list[Document]:
        kwargs = self._search_kwargs(k, namespace)
        try:
            hits = self.memory.search(query, **kwargs)
        except NamespaceNotFoundError:
            return []
        return [to_document(h) for h in hits[: kwargs["k"]]]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        namespace: str | None = None,
    ) -> list[Document]:
        kwargs = self._search_kwargs(k, namespace)
        try:
            hits = await self.memory.asearch(query, **kwargs)
        except NamespaceNotFoundError:
            return []
        return [to_document(h) for h in hits[: kwargs["k"]]]
