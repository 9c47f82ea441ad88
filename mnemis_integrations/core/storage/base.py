"""The storage contract: raw messages with their vectors, plus the graph, per namespace.

A ``save`` is atomic: either the new messages, their vectors and the new graph are
all stored, or nothing is. A store that keeps a per-namespace write counter (``version``)
lets other objects and processes see that their copy is stale; one that also sets
``checks_version_on_save`` refuses, atomically, a ``save`` made from a stale copy
(:class:`ConcurrentWriteError`), so two writers never overwrite each other's graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ...errors import StoreError
from ..model import Message

__all__ = ["ConcurrentWriteError", "GraphStore", "StoredNamespace"]


class ConcurrentWriteError(StoreError):
    """Another writer changed the namespace since this copy was read; nothing was written.

    The engine reloads the namespace and builds the batch again; a caller sees it only if
    that keeps failing."""


@dataclass
class StoredNamespace:
    graph: dict | None
    messages: list[Message]
    vector_keys: list[str]
    vectors: np.ndarray


class GraphStore(Protocol):
    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def namespaces(self) -> list[str]: ...

    def load(self, namespace: str, dim: int) -> StoredNamespace | None: ...

    def save(
        self,
        namespace: str,
        new_messages: list[Message],
        new_vectors: np.ndarray,
        graph: dict,
        meta: dict[str, str] | None = None,
    ) -> None: ...

    def replace(self, namespace: str, messages: list[Message], vectors: np.ndarray, graph: dict) -> None: ...

    def delete(self, namespace: str) -> None: ...

    def purge(self) -> None:
        """Leave no recoverable copy of deleted or replaced rows (forgetting for privacy)."""
        ...

    def close(self) -> None: ...
