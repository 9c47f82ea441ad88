"""BM25 over message texts (bm25s), rebuilt lazily after writes."""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np

from ..text import lexical_terms

__all__ = ["LexicalIndex"]


class LexicalIndex:
    """BM25 scores of a query against every message of a namespace."""

    def __init__(self):
        self._keys: list[str] = []
        self._docs: list[list[str]] = []
        self._bm25: bm25s.BM25 | None = None

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, keys: Sequence[str], texts: Sequence[str]) -> None:
        self._keys.extend(keys)
        self._docs.extend(lexical_terms(t) for t in texts)
        self._bm25 = None  # dirty: rebuilt on the next query

    def remove(self, keys: Sequence[str]) -> None:
        drop = set(keys)
        kept = [(k, d) for k, d in zip(self._keys, self._docs) if k not in drop]
        self._keys = [k for k, _ in kept]
        self._docs = [d for _, d in kept]
        self._bm25 = None

    def scores(self, query: str) -> dict[str, float]:
        """Raw BM25 score per key (only keys with a positive score)."""
        q = lexical_terms(query)
        if not q or not self._keys:
            return {}
        if self._bm25 is None:
            self._bm25 = bm25s.BM25()
            # bm25s needs one non-empty document at least; an empty token list is kept as a placeholder.
            self._bm25.index([d or ["\x00"] for d in self._docs], show_progress=False)
        s = self._bm25.get_scores(q)
        nz = np.nonzero(s > 0)[0]
        return {self._keys[i]: float(s[i]) for i in nz}
