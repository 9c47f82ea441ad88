"""The small interfaces the core depends on. Frameworks plug in through these."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

__all__ = ["Embedder", "Tokenizer"]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors.

    ``id`` names the model; it is stored with the vectors so that a store is never
    searched with vectors from another model.
    """

    id: str

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class Tokenizer(Protocol):
    def count(self, text: str) -> int: ...
