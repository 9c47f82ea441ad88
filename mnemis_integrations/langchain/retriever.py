"""``MnemisRetriever``: Mnemis recall as a LangChain ``BaseRetriever``."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from ..core.config import MemoryConfig
from ..core.engine import MnemisMemory
from ..core.erasure import Erasure
from ..core.filters import all_of
from ..errors import NamespaceNotFoundError

if TYPE_CHECKING:
    from ..core.retrieval.results import MemoryHit

__all__ = ["MnemisRetriever", "to_document"]


def to_document(hit: MemoryHit) -> Document:
    """One hit as a ``Document``: its text as content, everything else (path, scores, provenance) as
    metadata."""
    return Document(page_content=hit.text, metadata=hit.to_metadata(), id=hit.node_id)


class MnemisRetriever(Erasure, BaseRetriever):
    """Dual-path recall from a :class:`~mnemis_integrations.MnemisMemory`, as Documents.

    Each ``Document`` holds one memory node's text; its metadata says where the node sits and
    how it was found: ``path`` (list of labels, top concept first), ``path_str`` ("A > B > C"),
    ``score``, ``semantic_score``, ``relation_score``, ``via``, ``kind``, ``node_id``,
    ``source_ids``, ``time`` (ISO string), ``status``, ``label``, ``namespace`` and ``successors``;
    then the metadata the shown messages share (``channel``, ...) at the top level, and each
    message's own under ``message_metadata`` (see :meth:`MemoryHit.to_metadata`).

    A namespace with no memory yet gives ``[]``. ``k``, ``namespace``, ``filter``, ``as_of``,
    ``include_archived`` and ``score_threshold`` can be given per call
    (``retriever.invoke(query, filter={...})``); a per-call ``filter`` is combined with the
    retriever's own (both must hold), the others replace the retriever's value for that call.

    Erasing goes through the same object: :meth:`delete` forgets messages by id (a Document's
    ``metadata["source_ids"]`` names them) and :meth:`delete_namespace` a whole namespace, both
    with ``MnemisMemory.forget`` (text gone from graph, indexes and a persisted file).

    Example:
        .. code-block:: python

            from mnemis_integrations import MnemisMemory
            from mnemis_integrations.langchain import MnemisRetriever

            mem = MnemisMemory()
            mem.add_messages([{"id": "m1", "speaker": "user", "text": "My refund is late",
                               "metadata": {"channel": "email"}}], namespace="u1")
            retriever = MnemisRetriever(memory=mem, namespace="u1", k=5, filter={"channel": "email"})
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
    """How many Documents to rank; a superseded one brings its current successor along, past ``k``."""
    config: MemoryConfig | None = None
    """Search settings for this retriever (e.g. ``recipes.SEMANTIC_ONLY``); ``None`` uses the memory's own."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Fit the Documents' text into this many tokens (``MnemisMemory.fit_to_budget``); ``None``: no limit."""
    filter: dict[str, Any] | None = None
    """Recall only from messages whose metadata matches (``MnemisMemory.search(filter=...)``)."""
    as_of: datetime | str | None = None
    """Answer from what was known and valid at this moment; ``None``: now."""
    include_archived: bool = False
    """Also return compacted (archived) memories."""
    score_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    """Leave out Documents whose ``score`` is below this; ``None``: keep all ``k``."""

    def _search_kwargs(self, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = set(overrides) - _PER_CALL
        if unknown:
            raise TypeError(
                f"unexpected argument(s) {sorted(unknown)}; per call: {', '.join(sorted(_PER_CALL))}"
            )
        given = {name: value for name, value in overrides.items() if value is not None}
        kwargs: dict[str, Any] = {
            "k": self.k,
            "namespace": self.namespace,
            "config": self.config,
            "max_tokens": self.max_tokens,
            "as_of": self.as_of,
            "include_archived": self.include_archived,
            "score_threshold": self.score_threshold,
        } | given
        kwargs["filter"] = all_of(self.filter, overrides.get("filter"))
        return {name: value for name, value in kwargs.items() if value is not None}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        kwargs = self._search_kwargs(overrides)
        try:
            hits = self.memory.search(query, **kwargs)
        except NamespaceNotFoundError:
            return []
        return [to_document(h) for h in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        kwargs = self._search_kwargs(overrides)
        try:
            hits = await self.memory.asearch(query, **kwargs)
        except NamespaceNotFoundError:
            return []
        return [to_document(h) for h in hits]


_PER_CALL = frozenset(
    {"k", "namespace", "filter", "as_of", "include_archived", "score_threshold", "exclude_messages"}
)
