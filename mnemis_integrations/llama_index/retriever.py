"""``MnemisRetriever``: Mnemis recall as a LlamaIndex ``BaseRetriever``."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ..core.engine import check_count, search_options
from ..core.erasure import Erasure
from ..errors import NamespaceNotFoundError
from ._convert import core_filter, metadata_exclusions

if TYPE_CHECKING:
    from ..core.engine import MnemisMemory
    from ..core.retrieval.results import MemoryHit

__all__ = ["MnemisRetriever", "to_node_with_score"]


def to_node_with_score(hit: MemoryHit) -> NodeWithScore:
    """One hit as ``NodeWithScore(TextNode)``: its text as content, the fused score as score,
    and where it sits and how it was found as metadata (the LLM is shown only path, time and status)."""
    metadata = hit.to_metadata()
    llm_excluded, embed_excluded = metadata_exclusions(metadata)
    node = TextNode(
        id_=hit.node_id,
        text=hit.text,
        metadata=metadata,
        excluded_llm_metadata_keys=llm_excluded,
        excluded_embed_metadata_keys=embed_excluded,
    )
    return NodeWithScore(node=node, score=hit.score)


def search_kwargs(
    k: int, namespace: str | None, max_tokens: int | None = None, **options: Any
) -> dict[str, Any]:
    """``MnemisMemory.search`` keyword arguments; ``options`` (``filter``, ``as_of``, ...) left out
    when ``None``."""
    kwargs: dict[str, Any] = {"k": k}
    if namespace is not None:
        kwargs["namespace"] = namespace
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    kwargs.update((name, value) for name, value in options.items() if value is not None)
    return kwargs


class MnemisRetriever(Erasure, BaseRetriever):
    """Dual-path recall from a :class:`~mnemis_integrations.MnemisMemory`, as LlamaIndex nodes.

    Each ``NodeWithScore`` holds one memory node's text and its fused score; the ``TextNode``
    metadata says where the node sits and how it was found, with the same fields as the
    LangChain adapter: ``path``, ``path_str``, ``score``, ``semantic_score``,
    ``relation_score``, ``via``, ``kind``, ``node_id``, ``source_ids``, ``time`` (ISO string),
    ``status``, ``label``, ``namespace``, ``successors``, ``message_metadata``, and the metadata
    the shown messages share at the top level. A reader LLM sees only ``path_str``, ``time``
    and ``status`` in front of the text.

    A namespace with no memory yet gives ``[]``. The retriever holds no state of its own and
    does no I/O when built.

    Erasing goes through the same object: :meth:`delete` forgets messages by id (a node's
    ``metadata["source_ids"]`` names them), :meth:`delete_namespace` a whole namespace, both with
    ``MnemisMemory.forget`` (text gone from graph, indexes and a persisted file).

    Args:
        memory: the memory to recall from.
        namespace: whose memory to search; ``None`` uses the memory's default namespace.
        similarity_top_k: how many nodes to rank, from 1 to the memory's ``limits.max_k`` (a
            superseded one brings its current successor along, past it).
        max_tokens: fit the nodes' text into this many tokens (``MnemisMemory.fit_to_budget``).
        callback_manager: LlamaIndex callbacks.
        filters: recall only from messages whose metadata matches: a ``MetadataFilters``
            (operators ``==``, ``!=``, ``in``, ``nin``, ``>``, ``>=``, ``<``, ``<=``; conditions
            ``and``, ``or``) or a Mnemis filter dict (``MnemisMemory.search(filter=...)``).
        as_of: answer from what was known and valid at this moment (datetime or ISO-8601 string).
        include_archived: also return compacted (archived) memories.
        score_threshold: leave out nodes whose score is below this (in [0, 1]).

    Raises:
        InvalidQueryError: ``similarity_top_k`` or ``max_tokens`` is out of range or not an integer,
            ``filters`` is neither a ``MetadataFilters`` nor a dict or uses an operator or condition
            Mnemis does not support, or ``as_of`` /
            ``score_threshold`` is not valid (all checked when the retriever is built).

    Example:
        .. code-block:: python

            from llama_index.core.query_engine import RetrieverQueryEngine
            from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters
            from mnemis_integrations import MnemisMemory
            from mnemis_integrations.llama_index import MnemisRetriever

            mem = MnemisMemory()
            mem.add_messages([{"id": "m1", "speaker": "user", "text": "My refund is late",
                               "metadata": {"channel": "email"}}], namespace="u1")
            only_email = MetadataFilters(filters=[MetadataFilter(key="channel", value="email")])
            retriever = MnemisRetriever(memory=mem, namespace="u1", similarity_top_k=5, filters=only_email)
            nodes = retriever.retrieve("refund status")
            nodes[0].node.metadata["path_str"]   # e.g. "Shopping > Refunds > Late refund"
            engine = RetrieverQueryEngine.from_args(retriever)
            retriever.delete(["m1"])                  # forget message m1 of namespace u1
    """

    def __init__(
        self,
        memory: MnemisMemory,
        namespace: str | None = None,
        similarity_top_k: int = 5,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        max_tokens: int | None = None,
        filters: Any = None,
        as_of: datetime | str | None = None,
        include_archived: bool = False,
        score_threshold: float | None = None,
    ) -> None:
        check_count("similarity_top_k", similarity_top_k, memory.config.limits.max_k)
        if max_tokens is not None:
            check_count("max_tokens", max_tokens)
        self.memory = memory
        self.namespace = namespace
        self.similarity_top_k = similarity_top_k
        self.max_tokens = max_tokens
        self.filters = filters
        self.as_of = as_of
        self.include_archived = include_archived
        self.score_threshold = score_threshold
        self._options = search_options(
            filter=core_filter(filters),
            as_of=as_of,
            include_archived=include_archived or None,
            score_threshold=score_threshold,
        )
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _kwargs(self) -> dict[str, Any]:
        return search_kwargs(self.similarity_top_k, self.namespace, self.max_tokens, **self._options)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        try:
            hits = self.memory.search(query_bundle.query_str, **self._kwargs())
        except NamespaceNotFoundError:
            return []
        return [to_node_with_score(h) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        try:
            hits = await self.memory.asearch(query_bundle.query_str, **self._kwargs())
        except NamespaceNotFoundError:
            return []
        return [to_node_with_score(h) for h in hits]
