"""Dense vectors of one namespace: a faiss inner-product index over nodes, plus
message vectors kept for fragment scoring and re-clustering without re-embedding."""

from __future__ import annotations

from typing import Sequence

import faiss
import numpy as np

__all__ = ["VectorIndex"]


_THREADS_SET = False


def _single_threaded_faiss() -> None:
    """Flat search over one memory's vectors (thousands) is fastest on one thread: OpenMP's
    spin-waiting threads cost more than they save there, and stall badly when cores are busy.
    Done on first use, never at import."""
    global _THREADS_SET
    if not _THREADS_SET:
        faiss.omp_set_num_threads(1)
        _THREADS_SET = True


class VectorIndex:
    """faiss ``IndexIDMap2(IndexFlatIP)`` keyed by string ids.

    Vectors are L2-normalised, so inner product is cosine similarity.
    """

    def __init__(self, dim: int):
        _single_threaded_faiss()
        self.dim = dim
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        self._ids: dict[str, int] = {}
        self._keys: dict[int, str] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, key: str) -> bool:
        return key in self._ids

    def upsert(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        if len(keys) == 0:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(keys), self.dim)
        existing = [k for k in keys if k in self._ids]
        if existing:
            self.remove(existing)
        ids = np.arange(self._next, self._next + len(keys), dtype=np.int64)
        self._next += len(keys)
        for k, i in zip(keys, ids):
            self._ids[k] = int(i)
            self._keys[int(i)] = k
        self._index.add_with_ids(vectors, ids)

    def remove(self, keys: Sequence[str]) -> None:
        ids = [self._ids.pop(k) for k in keys if k in self._ids]
        for i in ids:
            self._keys.pop(i, None)
        if ids:
            self._index.remove_ids(np.asarray(ids, dtype=np.int64))

    def get(self, key: str) -> np.ndarray:
        return self._index.reconstruct(self._ids[key])

    def get_many(self, keys: Sequence[str]) -> np.ndarray:
        if not keys:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self._index.reconstruct(self._ids[k]) for k in keys])

    def search(self, query: np.ndarray, n: int | None = None) -> dict[str, float]:
        """Cosine of ``query`` with the ``n`` nearest keys (all keys when ``n`` is None)."""
        total = len(self._ids)
        if total == 0:
            return {}
        n = total if n is None else min(n, total)
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        scores, ids = self._index.search(q, n)
        return {self._keys[int(i)]: float(s) for s, i in zip(scores[0], ids[0]) if i >= 0}

    def keys(self) -> list[str]:
        return list(self._ids)

    def to_arrays(self) -> tuple[list[str], np.ndarray]:
        keys = list(self._ids)
        return keys, self.get_many(keys)

    @classmethod
    def from_arrays(cls, dim: int, keys: Sequence[str], vectors: np.ndarray) -> "VectorIndex":
        idx = cls(dim)
        idx.upsert(list(keys), vectors)
        return idx
