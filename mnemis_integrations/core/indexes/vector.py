"""Dense vectors of one namespace: a faiss inner-product index over nodes, plus
message vectors kept for fragment scoring and re-clustering without re-embedding.

faiss is imported on first use (:func:`~..threads.faiss_module`), not with this module, so that
``import mnemis_integrations`` does not pay for it (about 50 ms; BENCHMARKS.md, "First run").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..threads import faiss_module, uses_faiss
from .ann import ANN_MIN_VECTORS, NEIGHBOURS_ANN_MIN, NEIGHBOURS_SCAN, IVFIndex

if TYPE_CHECKING:
    import faiss

__all__ = ["VectorIndex"]


COMPACT_MIN = 1024  # tombstoned rows tolerated before a compaction, whatever the size


class VectorIndex:
    """faiss ``IndexIDMap2(IndexFlatIP)`` keyed by string ids.

    Vectors are L2-normalised, so inner product is cosine similarity.

    Every answer ranks keys best first and exactly equal scores by ascending key, including at the
    ``n``-th place: when keys tie there, those the rule picks are kept, whichever faiss met first.
    faiss breaks ties by row order, which is write history (a live memory appends rows as nodes are
    written, a reopened one lays them out by kind), and exact ties are common: a subtopic holding one
    fragment has that fragment's vector. With no tie reaching past ``2 n + 1`` keys a search costs what
    faiss alone does (the keys asked for past ``n`` cost a flat scan nothing); with one, faiss is asked
    for twice as many keys until a lower score shows, so many exact ties (e.g. zero scores from a toy
    embedder) can widen a search up to the whole index.
    """

    def __init__(self, dim: int):
        faiss = faiss_module()
        self.dim = dim
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        self._ids: dict[str, int] = {}
        self._keys: dict[int, str] = {}
        # faiss id -> key (None: removed) as an array, so the keys of a search's ids are read in one
        # step: a search of every key reads them all
        self._key_of = np.empty(0, dtype=object)
        self._next = 0
        self._ann: IVFIndex | None = None  # coarse sidecar, built on first top() call at ANN_MIN_VECTORS
        self._pos: np.ndarray | None = None  # faiss id -> row of the flat storage; rebuilt after a removal
        self.ann_min = ANN_MIN_VECTORS
        self._group_of: Callable[[str], str | None] | None = None  # see partition()
        self._parts: dict[str, VectorIndex] = {}
        self._group: dict[str, str] = {}  # key -> the part holding it
        self._sum = np.zeros(dim, np.float64)  # of every stored vector, kept by each write: see mean()
        self._dead: set[int] = set()  # faiss ids removed but still in the flat storage: see remove()
        self._skip: tuple | None = None  # search parameters skipping them, built on first use
        self._writes = 0  # bumped by every change a search could see: see neighbours()
        self._last_neighbours: tuple | None = None  # (writes, n, query, answer) of the last call

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, key: str) -> bool:
        return key in self._ids

    @uses_faiss
    def upsert(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Add new keys and overwrite the vectors of present ones (the last row wins for a key
        given twice). A present key is rewritten in place in the flat storage: removing it would
        compact the whole index, a cost that grows with the namespace on every refresh."""
        if len(keys) == 0:
            return
        self._writes += 1
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(keys), self.dim)
        last = {k: j for j, k in enumerate(keys)}
        if len(last) < len(keys):
            keys = list(last)
            vectors = vectors[list(last.values())]
        if self._group_of is not None:
            self._upsert_parts(keys, vectors)
        present = [j for j, k in enumerate(keys) if k in self._ids]
        if present:
            ids = np.fromiter((self._ids[keys[j]] for j in present), dtype=np.int64, count=len(present))
            self._sum += vectors[present].sum(axis=0, dtype=np.float64) - self._rows(ids).sum(
                axis=0, dtype=np.float64
            )
            self._storage()[self._positions()[ids]] = vectors[present]
            if self._ann is not None:
                self._ann.remove(ids)
                self._ann.add(vectors[present], ids)
            if len(present) == len(keys):
                return
            fresh = [j for j, k in enumerate(keys) if k not in self._ids]
            keys = [keys[j] for j in fresh]
            vectors = vectors[fresh]
        self._sum += vectors.sum(axis=0, dtype=np.float64)
        ids = np.arange(self._next, self._next + len(keys), dtype=np.int64)
        self._next += len(keys)
        for k, i in zip(keys, ids, strict=True):
            self._ids[k] = int(i)
            self._keys[int(i)] = k
        if len(self._key_of) < self._next:  # room doubles, so growing it costs O(1) per key
            key_of = np.empty(max(self._next, 2 * len(self._key_of)), dtype=object)
            key_of[: len(self._key_of)] = self._key_of
            self._key_of = key_of
        self._key_of[ids] = np.fromiter(keys, dtype=object, count=len(keys))
        rows = int(self._index.ntotal)
        self._index.add_with_ids(vectors, ids)
        if self._pos is not None:  # new rows go at the end: extend the id -> row table, no rebuild
            if len(self._pos) < self._next:  # room doubles, so growing it costs O(1) per key
                pos = np.full(max(self._next, 2 * len(self._pos)), -1, np.int64)
                pos[: len(self._pos)] = self._pos
                self._pos = pos
            self._pos[ids] = np.arange(rows, rows + len(ids))
        if self._ann is not None:
            self._ann.add(vectors, ids)

    @uses_faiss
    def remove(self, keys: Sequence[str]) -> None:
        """Forget keys at once; their rows stay in the flat storage as tombstones, which searches
        skip, until they outnumber an eighth of the live rows: then one compaction drops them all.
        faiss's ``remove_ids`` shifts every row after a removed one, so removing at once cost as
        much as the namespace is large on every forget (31 ms at 100k messages)."""
        keys = list(dict.fromkeys(keys))
        self._writes += 1
        by_group: dict[str, list[str]] = {}
        for k in keys:
            group = self._group.pop(k, None)
            if group is not None:
                by_group.setdefault(group, []).append(k)
        for group, ks in by_group.items():
            self._parts[group].remove(ks)
        ids = [self._ids[k] for k in keys if k in self._ids]
        if not ids:
            return
        self._sum -= self._rows(np.asarray(ids, dtype=np.int64)).sum(axis=0, dtype=np.float64)
        for k in keys:
            self._ids.pop(k, None)
        for i in ids:
            self._keys.pop(i, None)
        self._key_of[ids] = None
        self._dead.update(ids)
        self._skip = None
        if self._ann is not None:
            self._ann.writes += len(ids)  # the sidecar keeps its rows too; top() drops dead ones
        if len(self._dead) > max(COMPACT_MIN, len(self._ids) // 8):
            self._compact()

    def _compact(self) -> None:
        """Drop every tombstoned row from the flat storage (and the sidecar, rebuilt on next use)."""
        self._writes += 1
        self._index.remove_ids(np.fromiter(self._dead, dtype=np.int64, count=len(self._dead)))
        self._dead.clear()
        self._skip = None
        self._pos = None
        self._ann = None

    def _params(self) -> faiss.SearchParameters | None:
        """Search parameters that skip tombstoned rows (None when there are none)."""
        if not self._dead:
            return None
        if self._skip is None:
            faiss = faiss_module()
            batch = faiss.IDSelectorBatch(np.fromiter(self._dead, dtype=np.int64, count=len(self._dead)))
            not_dead = faiss.IDSelectorNot(batch)
            self._skip = (
                faiss.SearchParameters(sel=not_dead),
                not_dead,
                batch,
            )  # selectors must outlive the params
        return self._skip[0]

    def mean(self) -> np.ndarray:
        """The mean of every stored vector (zeros when empty), kept by each write at no scan.

        >>> idx = VectorIndex(2); idx.upsert(["a", "b"], np.array([[1, 0], [0, 1]])); idx.remove(["b"])
        >>> idx.mean().tolist()
        [1.0, 0.0]
        """
        return (
            (self._sum / len(self._ids)).astype(np.float32) if self._ids else np.zeros(self.dim, np.float32)
        )

    def get(self, key: str) -> np.ndarray:
        return self._index.reconstruct(self._ids[key])

    def get_many(self, keys: Sequence[str]) -> np.ndarray:
        if not keys:
            return np.zeros((0, self.dim), np.float32)
        return self._rows(np.fromiter((self._ids[k] for k in keys), dtype=np.int64, count=len(keys)))

    # ----- groups: a separate flat index per kind of key, for nearest(..., group=) -----
    def partition(self, group_of: Callable[[str], str | None]) -> None:
        """Also keep the keys of each group (``group_of(key)``; None: in no group) in a flat index
        of their own, kept in step by every write, so :meth:`nearest` can search one group without
        ranking the others. ``group_of`` is asked again each time a key's vector is written, and a
        key whose group changed moves (e.g. a parent leaves the placement group once it is full).

        >>> idx = VectorIndex(2); idx.upsert(["f1", "s1", "s2"], np.array([[1, 0], [0.8, 0.6], [0, 1]]))
        >>> idx.partition(lambda k: k[0] if k[0] == "s" else None)
        >>> idx.nearest(np.array([1.0, 0.0]), 1, group="s")
        [('s1', 0.800000011920929)]
        """
        self._group_of = group_of
        self._parts = {}
        self._group = {}
        if self._ids:
            self._upsert_parts(list(self._ids), self.get_many(list(self._ids)))

    def _upsert_parts(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        assert self._group_of is not None
        rows: dict[str, list[int]] = {}
        for j, k in enumerate(keys):
            group, was = self._group_of(k), self._group.get(k)
            if was is not None and was != group:
                self._parts[was].remove([k])
                del self._group[k]
            if group is not None:
                rows.setdefault(group, []).append(j)
                self._group[k] = group
        for group, js in rows.items():
            part = self._parts.get(group)
            if part is None:
                part = self._parts[group] = VectorIndex(self.dim)
            part.upsert([keys[j] for j in js], vectors[js])

    def search(self, query: np.ndarray, n: int | None = None) -> dict[str, float]:
        """Cosine of ``query`` with the ``n`` nearest keys (all keys when ``n`` is None)."""
        total = len(self._ids)
        if total == 0:
            return {}
        n = total if n is None else min(n, total)
        if n <= 0:
            return {}
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        keys, scores = self._ranked(q, n)
        return dict(zip(keys[:n], scores[:n], strict=True))

    @uses_faiss
    def _ranked(self, q: np.ndarray, n: int) -> tuple[list[str], list[float]]:
        """The ``n`` nearest live keys (``1 <= n <= len(self)``), best first, equal scores by ascending
        key, and past them every key tying the ``n``-th score: a prefix of the full ranking.

        faiss is asked for ``2 n + 1`` keys, to see whether the ``n``-th score is tied past it (a scan
        costs the same whatever the number of keys it keeps, and equal texts, "ok" or "thanks", tie
        exactly), and for twice as many while its last score still equals the ``n``-th."""
        total = len(self._ids)
        k = min(total, 2 * n + 1)
        params = self._params()
        while True:
            found, ids = self._index.search(q, k, params=params)
            found, ids = found[0], ids[0]
            if (ids < 0).any():
                found, ids = found[ids >= 0], ids[ids >= 0]
            if k >= total or len(found) <= n or found[-1] != found[n - 1]:
                break
            k = min(total, 2 * k)
        if len(found) > n:
            cut = n + int(np.count_nonzero(found[n:] == found[n - 1]))
            found, ids = found[:cut], ids[:cut]
        keys = self._key_of[ids].tolist()
        if len(found) > 1 and (found[1:] == found[:-1]).any():
            # faiss's answer is already best first: only each run of equal scores needs its keys sorted
            starts = np.flatnonzero(np.r_[True, found[1:] != found[:-1], True])
            lengths = np.diff(starts)
            for a, b in zip(starts[:-1][lengths > 1].tolist(), starts[1:][lengths > 1].tolist(), strict=True):
                keys[a:b] = sorted(keys[a:b])
        return keys, found.tolist()

    @uses_faiss
    def top_scores(self, query: np.ndarray, n: int, group: str | None = None) -> np.ndarray:
        """The cosines of the ``n`` nearest keys (of ``group``), best first: a rank's score without
        building its keys.

        >>> idx = VectorIndex(2); idx.upsert(["a", "b", "c"], np.array([[1, 0], [0.8, 0.6], [0, 1]]))
        >>> [round(float(s), 2) for s in idx.top_scores(np.array([1.0, 0.0]), 2)]
        [1.0, 0.8]
        """
        if group is not None:
            part = self._parts.get(group)
            return part.top_scores(query, n) if part is not None else np.zeros(0, np.float32)
        n = min(n, len(self._ids))
        if n <= 0:
            return np.zeros(0, np.float32)
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        scores, ids = self._index.search(q, n, params=self._params())
        return scores[0][ids[0] >= 0]

    def nearest(
        self,
        query: np.ndarray,
        n: int,
        keep: Callable[[str], bool] | None = None,
        min_score: float | None = None,
        group: str | None = None,
    ) -> list[tuple[str, float]]:
        """The ``n`` nearest keys for which ``keep(key)`` holds, best first, with their cosines (exact).

        Keys scoring below ``min_score`` are never returned; the search stops there. With a
        ``keep`` filter the flat index is asked for ``4 n`` keys, then four times more while
        fewer than ``n`` kept keys were found, the last score still clears ``min_score`` and keys
        are left: the same keys as filtering a full ranking, at the cost of the keys ranked
        above the ``n``-th kept one (plus one flat scan per widening). Equal scores rank by ascending
        key (see the class). ``group``: search only the keys of that group (see :meth:`partition`).

        >>> idx = VectorIndex(2); idx.upsert(["a", "b", "c"], np.array([[1, 0], [0.8, 0.6], [0, 1]]))
        >>> idx.nearest(np.array([1.0, 0.0]), 1, keep=lambda k: k != "a")
        [('b', 0.800000011920929)]
        >>> idx.nearest(np.array([1.0, 0.0]), 3, min_score=0.5)
        [('a', 1.0), ('b', 0.800000011920929)]
        """
        if group is not None:
            if self._group_of is None:
                raise ValueError("nearest(group=...) needs partition() first")
            part = self._parts.get(group)
            return part.nearest(query, n, keep, min_score) if part is not None else []
        total = len(self._ids)
        if total == 0 or n <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        k = min(total, n if keep is None else 4 * n)
        while True:
            keys, scores = self._ranked(q, k)
            out: list[tuple[str, float]] = []
            for key, s in zip(keys, scores, strict=True):
                if min_score is not None and s < min_score:
                    return out
                if keep is None or keep(key):
                    out.append((key, s))
                    if len(out) == n:
                        return out
            if k >= total or len(keys) >= total:
                return out
            k = min(total, 4 * max(k, len(keys)))

    # ----- the funnel's coarse stage (SPEC §6) -----
    @property
    def approximate(self) -> bool:
        """Whether :meth:`top` answers from the ANN sidecar (the index holds ``ann_min`` keys or more)."""
        return len(self._ids) >= self.ann_min

    def build_ann(self) -> None:
        """(Re)build the ANN sidecar from the flat index now, e.g. right after a bulk load."""
        self._writes += 1
        ids = np.fromiter(self._keys, dtype=np.int64, count=len(self._keys))
        vecs = self._rows(ids) if len(ids) else np.zeros((0, self.dim), np.float32)
        self._ann = IVFIndex(self.dim, vecs, ids)

    def _positions(self) -> np.ndarray:
        """faiss id -> row of the flat storage (-1: no row, or an id not given yet); rebuilt only after
        a removal."""
        if self._pos is None:
            id_map = faiss_module().vector_to_array(self._index.id_map)
            pos = np.full(self._next, -1, np.int64)
            pos[id_map] = np.arange(len(id_map))
            self._pos = pos
        return self._pos

    def _storage(self) -> np.ndarray:
        """The flat storage as a (rows, dim) array sharing its memory (valid until the next add)."""
        faiss = faiss_module()
        flat = faiss.downcast_index(self._index.index)
        return faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * self.dim).reshape(flat.ntotal, self.dim)

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        """Stored vectors of faiss ids, copied straight from the flat storage (no per-id reconstruct)."""
        return self._storage()[self._positions()[ids]]

    def _dot(self, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        # einsum, not BLAS: a threaded gemv stalls for milliseconds when the cores are busy.
        return np.einsum("ij,j->i", self._rows(ids), np.asarray(query, np.float32).reshape(self.dim))

    @uses_faiss
    def top(self, query: np.ndarray, n: int) -> dict[str, float]:
        """About the ``n`` nearest keys with their exact cosines.

        Exact (flat) below ``ann_min`` keys; above, the IVF sidecar proposes the keys and the
        flat index re-scores them, so a score is never approximate, only the recall is. Either way the
        keys come best first by exact score, equal scores by ascending key.
        """
        total = len(self._ids)
        if total == 0 or n <= 0:
            return {}
        if not self.approximate:
            return self.search(query, n)
        return self._proposed(query, n, min(n, total))

    def neighbours(self, query: np.ndarray, n: int) -> dict[str, float]:
        """About the ``n`` nearest keys with their exact cosines, at a cost that stops growing with the
        index: what every add asks of the message vectors, so that one more message costs what it costs
        in a small namespace (BENCHMARKS.md, "Growing memory").

        Exact below ``ann.NEIGHBOURS_ANN_MIN`` keys, as :meth:`search`; above, the IVF sidecar (the one
        :meth:`top` reads) proposes ``2 n`` keys from the lists that hold about ``ann.NEIGHBOURS_SCAN``
        vectors, re-scored exactly, the best ``n`` kept: best first by exact score, equal scores by
        ascending key. Which keys come back may then depend on when the sidecar was trained (a memory
        reopened trains it on every key at once), as for :meth:`top`; a score never does.

        The last answer is kept until the next write: a message told late is looked up again, for the
        later messages near it, right after its own lookup for the earlier ones, with the same vector.
        """
        last = self._last_neighbours
        if last is not None and last[0] == self._writes and last[1] == n and np.array_equal(last[2], query):
            return dict(last[3])
        total = len(self._ids)
        if total == 0 or n <= 0:
            return {}
        if total < NEIGHBOURS_ANN_MIN:
            found = self.search(query, n)
        else:
            found = self._proposed(query, n, min(2 * n, total), NEIGHBOURS_SCAN)
        self._last_neighbours = (self._writes, n, np.array(query, copy=True), found)
        return dict(found)

    def _proposed(
        self, query: np.ndarray, n: int, proposals: int, scan: int | None = None
    ) -> dict[str, float]:
        """The best ``n`` by exact cosine of the ``proposals`` keys the IVF sidecar finds nearest, scanning
        the lists that hold about ``scan`` vectors (the sidecar's own number of lists when None)."""
        if self._ann is None or self._ann.stale():
            self.build_ann()
        assert self._ann is not None
        nprobe = None if scan is None else self._ann.lists_for(scan)
        _, ids = self._ann.search(query, proposals, nprobe)
        if self._dead:
            ids = ids[[int(i) not in self._dead for i in ids]]
        if len(ids) == 0:
            return {}
        sims = self._dot(ids, query).tolist()
        keys = [self._keys[i] for i in ids.tolist()]
        order = sorted(range(len(keys)), key=lambda j: (-sims[j], keys[j]))[:n]
        return {keys[j]: sims[j] for j in order}

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
