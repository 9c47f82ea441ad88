"""Dense vectors of one namespace: a faiss inner-product index over nodes, plus
message vectors kept for fragment scoring and re-clustering without re-embedding."""

from __future__ import annotations

from collections.abc import Sequence

import faiss
import numpy as np

from .ann import ANN_MIN_VECTORS, IVFIndex

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
        self._ann: IVFIndex | None = None  # coarse sidecar, built on first top() call at ANN_MIN_VECTORS
        self._pos: np.ndarray | None = None  # faiss id -> row of the flat storage; rebuilt after a write
        self.ann_min = ANN_MIN_VECTORS

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
        self._pos = None
        if self._ann is not None:
            self._ann.add(vectors, ids)

    def remove(self, keys: Sequence[str]) -> None:
        ids = [self._ids.pop(k) for k in keys if k in self._ids]
        for i in ids:
            self._keys.pop(i, None)
        if ids:
            self._index.remove_ids(np.asarray(ids, dtype=np.int64))
            self._pos = None
            if self._ann is not None:
                self._ann.remove(np.asarray(ids, dtype=np.int64))

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

    # ----- the funnel's coarse stage (SPEC §6) -----
    @property
    def approximate(self) -> bool:
        """Whether :meth:`top` answers from the ANN sidecar (the index holds ``ann_min`` keys or more)."""
        return len(self._ids) >= self.ann_min

    def build_ann(self) -> None:
        """(Re)build the ANN sidecar from the flat index now, e.g. right after a bulk load."""
        ids = np.fromiter(self._keys, dtype=np.int64, count=len(self._keys))
        vecs = self._rows(ids) if len(ids) else np.zeros((0, self.dim), np.float32)
        self._ann = IVFIndex(self.dim, vecs, ids)

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        """Stored vectors of faiss ids, copied straight from the flat storage (no per-id reconstruct)."""
        if self._pos is None:
            id_map = faiss.vector_to_array(self._index.id_map)
            pos = np.full(self._next, -1, np.int64)
            pos[id_map] = np.arange(len(id_map))
            self._pos = pos
        flat = faiss.downcast_index(self._index.index)
        xb = faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * self.dim).reshape(flat.ntotal, self.dim)
        return xb[self._pos[ids]]

    def _dot(self, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        # einsum, not BLAS: a threaded gemv stalls for milliseconds when the cores are busy.
        return np.einsum("ij,j->i", self._rows(ids), np.asarray(query, np.float32).reshape(self.dim))

    def top(self, query: np.ndarray, n: int) -> dict[str, float]:
        """About the ``n`` nearest keys with their exact cosines.

        Exact (flat) below ``ann_min`` keys; above, the IVF sidecar proposes the keys and the
        flat index re-scores them, so a score is never approximate, only the recall is.
        """
        total = len(self._ids)
        if total == 0 or n <= 0:
            return {}
        if not self.approximate:
            return self.search(query, n)
        if self._ann is None or self._ann.stale():
            self.build_ann()
        _, ids = self._ann.search(query, min(n, total))
        if len(ids) == 0:
            return {}
        sims = self._dot(ids, query)
        return {self._keys[int(i)]: float(s) for i, s in zip(ids, sims)}

    def similarities(self, query: np.ndarray, keys: Sequence[str]) -> np.ndarray:
        """Exact cosines of ``query`` with the given keys (all present), in their order."""
        if not keys:
            return np.zeros(0, np.float32)
        ids = np.fromiter((self._ids[k] for k in keys), dtype=np.int64, count=len(keys))
        return self._dot(ids, query)

    def keys(self) -> list[str]:
        return list(self._ids)

    def to_arrays(self) -> tuple[list[str], np.ndarray]:
        keys = list(self._ids)
        return keys, self.get_many(keys)

    @classmethod
    def from_arrays(cls, dim: int, keys: Sequence[str], vectors: np.ndarray) -> VectorIndex:
        idx = cls(dim)
        idx.upsert(list(keys), vectors)
        return idx
