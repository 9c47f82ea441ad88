"""``MnemisPropertyGraphIndex``: a ``PropertyGraphIndex`` over a Mnemis store that retrieves with Mnemis.

A plain ``PropertyGraphIndex`` builds its default sub-retrievers itself, and they answer with
triplets of node ids; this subclass changes only the defaults that do not fit a Mnemis memory.
"""

from __future__ import annotations

from typing import Any

from llama_index.core import PropertyGraphIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.property_graph.transformations import ImplicitPathExtractor
from llama_index.core.schema import BaseNode, TransformComponent

from .graph_store import MnemisPGRetriever, MnemisPropertyGraphStore

__all__ = ["MnemisPropertyGraphIndex"]


class MnemisPropertyGraphIndex(PropertyGraphIndex):
    """A ``PropertyGraphIndex`` on a :class:`MnemisPropertyGraphStore`, with Mnemis's defaults.

    Differences from ``PropertyGraphIndex``:
        * ``as_retriever()`` (and so ``as_query_engine()``) answers with
          :class:`MnemisPGRetriever`: Mnemis's dual-path recall, one node of readable memory text
          per hit (path, scores and provenance in metadata), instead of id triplets. Pass
          ``sub_retrievers=`` to choose others.
        * ``kg_extractors`` default to ``[ImplicitPathExtractor()]``, which needs no LLM: Mnemis
          builds entities and relations from the inserted text itself. Pass LlamaIndex's
          LLM extractors to add theirs.
        * ``embed_kg_nodes`` defaults to ``False``: Mnemis embeds the text with the memory's own
          embedder, so LlamaIndex's embeddings would be discarded.
        * the store must be a :class:`MnemisPropertyGraphStore` (``TypeError`` otherwise).

    Example:
        .. code-block:: python

            store = MnemisPropertyGraphStore(memory=mem, namespace="docs")
            index = MnemisPropertyGraphIndex.from_documents(docs, property_graph_store=store)
            index.as_retriever(similarity_top_k=3).retrieve("who works for LlamaIndex?")
    """

    def __init__(
        self,
        nodes: list[BaseNode] | None = None,
        property_graph_store: MnemisPropertyGraphStore | None = None,
        kg_extractors: list[TransformComponent] | None = None,
        embed_kg_nodes: bool = False,
        **kwargs: Any,
    ) -> None:
        context = kwargs.get("storage_context")
        store = property_graph_store or (context.property_graph_store if context is not None else None)
        if not isinstance(store, MnemisPropertyGraphStore):
            raise TypeError(
                f"MnemisPropertyGraphIndex needs a MnemisPropertyGraphStore, not {type(store).__name__}"
            )
        super().__init__(
            nodes=nodes,
            property_graph_store=store,
            kg_extractors=kg_extractors or [ImplicitPathExtractor()],
            embed_kg_nodes=embed_kg_nodes,
            **kwargs,
        )

    @classmethod
    def from_existing(  # type: ignore[override]
        cls, property_graph_store: MnemisPropertyGraphStore, embed_kg_nodes: bool = False, **kwargs: Any
    ) -> MnemisPropertyGraphIndex:
        """An index over what the store already holds (``embed_kg_nodes`` off, as in the constructor)."""
        return cls(
            nodes=[], property_graph_store=property_graph_store, embed_kg_nodes=embed_kg_nodes, **kwargs
        )

    @property
    def mnemis_store(self) -> MnemisPropertyGraphStore:
        return self.property_graph_store  # type: ignore[return-value]

    def as_retriever(
        self,
        sub_retrievers: list[Any] | None = None,
        include_text: bool = False,
        similarity_top_k: int = 5,
        **kwargs: Any,
    ) -> BaseRetriever:
        """A ``PGRetriever`` over ``sub_retrievers``, by default one :class:`MnemisPGRetriever`
        ranking ``similarity_top_k`` memories (a superseded one brings its current successor along,
        past it), from messages that match ``filters`` when given (``PropertyGraphIndex`` hands
        them to its default sub-retrievers too)."""
        if sub_retrievers is None:
            sub_retrievers = [
                MnemisPGRetriever(
                    self.mnemis_store,
                    similarity_top_k=similarity_top_k,
                    include_text=include_text,
                    filters=kwargs.get("filters"),
                )
            ]
        return super().as_retriever(sub_retrievers=sub_retrievers, include_text=include_text, **kwargs)
