"""Mnemis: long-term memory for LLM applications as a hierarchical graph with dual-path retrieval.

The package root exposes the framework-free API only; adapters live in
``mnemis_integrations.langchain`` and ``mnemis_integrations.llama_index``.
"""

from .core import recipes
from .core.config import (
    BuildConfig,
    ContextConfig,
    FusionConfig,
    LimitsConfig,
    MemoryConfig,
    RelationConfig,
    SemanticConfig,
)
from .core.engine import IngestReport, MnemisMemory
from .core.model import EdgeKind, Message, NodeKind, Status
from .core.retrieval.results import MemoryHit
from .errors import (
    ConfigError,
    DuplicateMessageError,
    EmbedderMismatchError,
    InvalidMessageError,
    InvalidNameError,
    InvalidNamespaceError,
    InvalidQueryError,
    MissingDependencyError,
    MnemisError,
    NamespaceNotFoundError,
    NodeNotFoundError,
    StoreError,
)

__all__ = [
    "BuildConfig",
    "ConfigError",
    "ContextConfig",
    "DuplicateMessageError",
    "EdgeKind",
    "EmbedderMismatchError",
    "FusionConfig",
    "IngestReport",
    "InvalidMessageError",
    "InvalidNameError",
    "InvalidNamespaceError",
    "InvalidQueryError",
    "LimitsConfig",
    "MemoryConfig",
    "MemoryHit",
    "Message",
    "MissingDependencyError",
    "MnemisError",
    "MnemisMemory",
    "NamespaceNotFoundError",
    "NodeKind",
    "NodeNotFoundError",
    "RelationConfig",
    "SemanticConfig",
    "Status",
    "StoreError",
    "recipes",
]

__version__ = "0.1.0"
