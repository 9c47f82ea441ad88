"""Approximate nearest neighbours for large namespaces: a faiss IVF index with 8-bit scalar
quantisation, used only for the coarse first stage of the retrieval funnel (SPEC §6).

Candidates it returns are re-scored exactly against the flat index, so quantisation error
never reaches a score; it can only make the coarse recall miss a node. Removal is native to
IVF (no tombstones needed); after many writes since training the index is retrained, so the
coarse centroids keep describing the data.
"""

from __future__ import annotations

import math

import numpy as np

from ..threads import faiss_module, uses_faiss

__all__ = ["ANN_MIN_VECTORS", "IVFIndex", "NEIGHBOURS_ANN_MIN", "NEIGHBOURS_SCAN"]

ANN_MIN_VECTORS = 50_000  # below this, exact flat search is fast enough and the ANN is never built
# A neighbour lookup (``VectorIndex.neighbours``: the update judge's, on every add) reads the sidecar from
# a smaller index than search's funnel does: an exact scan grows with the namespace, and an add at 20,000
# messages cost 2.5 times one at 500, most of the difference in these scans (BENCHMARKS.md, "Growing
# memory"). It asks for twice the keys it keeps and scans as many lists as hold about NEIGHBOURS_SCAN
# vectors, never fewer than the funnel's: a cost that stays put as the index grows, where a fixed number of
# lists would read more vectors the larger the lists (48 lists cost an add at 100,000 messages 2.3 ms more
# than the funnel's 24). On 20,000 of the scenario suite's passages that is 43 lists, .99 of the exact 33
# nearest, against .93 at the funnel's setting and no oversampling.
NEIGHBOURS_ANN_MIN = 10_000
NEIGHBOURS_SCAN = 6_000


class IVFIndex:
    """``IndexIVFScalarQuantizer`` (inner product, SQ8) over int64 ids.

    ``nlist`` is about sqrt(n) (64 to 4096); ``nprobe`` lists are scanned per query.
    Training uses at most 40 rows per list (deterministic sample), so building 300k
    384-d vectors takes seconds on one core.

    >>> rng = np.random.default_rng(0); x = rng.normal(size=(2000, 16)).astype("float32")
    >>> x /= np.linalg.norm(x, axis=1, keepdims=True)
    >>> idx = IVFIndex(16, x, np.arange(2000), nprobe=64)
    >>> int(idx.search(x[7], 1)[1][0])
    7
    """

    def __init__(self, dim: int, vectors: np.ndarray, ids: np.ndarray, nprobe: int = 24):
        n = len(ids)
        self.dim = dim
        self.nlist = int(min(4096, max(64, math.sqrt(max(n, 1)))))
        self.nprobe = nprobe
        faiss = faiss_module()
        quantizer = faiss.IndexFlatIP(dim)
        self._index = faiss.IndexIVFScalarQuantizer(
            quantizer, dim, self.nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        self._index.cp.niter = 10
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        take = min(n, self.nlist * 40)
        sample = vectors if take == n else vectors[np.random.default_rng(0).choice(n, take, replace=False)]
        self._index.train(sample)
        self._index.add_with_ids(vectors, np.asarray(ids, np.int64))
        self._index.nprobe = min(nprobe, self.nlist)
        self.trained_on = n
        self.writes = 0  # adds and removals since training

    def __len__(self) -> int:
        return int(self._index.ntotal)

    @uses_faiss
    def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        self._index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), np.asarray(ids, np.int64))
        self.writes += len(ids)

    @uses_faiss
    def remove(self, ids: np.ndarray) -> None:
        self._index.remove_ids(np.asarray(ids, np.int64))
        self.writes += len(ids)

    def stale(self) -> bool:
        """Retrain once writes since training exceed the trained size (the centroids drift)."""
        return self.writes > max(self.trained_on, 1)

    def lists_for(self, scan: int) -> int:
        """How many lists to scan to read about ``scan`` vectors (lists hold ``len(self) / nlist`` each),
        never fewer than the index's own ``nprobe`` nor more than it has.

        >>> rng = np.random.default_rng(0); x = rng.normal(size=(6400, 8)).astype("float32")
        >>> idx = IVFIndex(8, x / np.linalg.norm(x, axis=1, keepdims=True), np.arange(6400))
        >>> idx.nlist, idx.lists_for(2000), idx.lists_for(100)
        (80, 25, 24)
        """
        per_list = max(len(self), 1) / self.nlist
        return min(self.nlist, max(self.nprobe, math.ceil(scan / per_list)))

    @uses_faiss
    def search(self, query: np.ndarray, n: int, nprobe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` nearest ids by quantised score, scanning ``nprobe`` lists (the index's own when None)."""
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        if nprobe is None:
            scores, ids = self._index.search(q, n)
        else:
            params = faiss_module().SearchParametersIVF(nprobe=min(nprobe, self.nlist))
            scores, ids = self._index.search(q, n, params=params)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep]
