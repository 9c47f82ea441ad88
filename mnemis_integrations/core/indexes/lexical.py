"""BM25 over message texts, kept up to date message by message.

The scores are bm25s's default (Lucene) BM25 — ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``,
``tf / (tf + k1 * (1 - b + b * len / avg_len))`` with ``k1 = 1.5``, ``b = 0.75`` — summed over
the query's terms (``tests/unit/test_lexical_index.py`` checks them against bm25s itself). The
index is an inverted list per term instead of bm25s's compiled matrix: bm25s must re-index the
whole namespace after every write, so an agent that adds a turn and then searches paid for all
of its memory on every turn. Here a write touches only the postings of its own terms.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence

import numpy as np

from ..text import lexical_terms

__all__ = ["LexicalIndex"]

K1 = 1.5
B = 0.75
_EMPTY = "\x00"  # bm25s indexes an empty document as one placeholder token; so do we, for equal scores


class LexicalIndex:
    """BM25 scores of a query against every message of a namespace."""

    def __init__(self):
        self._slot: dict[str, int] = {}  # key -> slot; a removed key's slot stays empty
        self._keys: list[str | None] = []
        self._terms: list[Counter | None] = []
        self._lens = np.zeros(16, np.float32)
        self._total = 0  # sum of document lengths
        self._postings: dict[str, dict[int, int]] = {}  # term -> slot -> term frequency
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # term -> (slots, tfs), until it changes

    def __len__(self) -> int:
        return len(self._slot)

    def add(self, keys: Sequence[str], texts: Sequence[str]) -> None:
        for key, text in zip(keys, texts, strict=True):
            if key in self._slot:
                self.remove([key])
            terms = Counter(lexical_terms(text) or [_EMPTY])
            slot = len(self._keys)
            self._slot[key] = slot
            self._keys.append(key)
            self._terms.append(terms)
            if slot >= len(self._lens):
                self._lens = np.concatenate([self._lens, np.zeros(len(self._lens), np.float32)])
            length = sum(terms.values())
            self._lens[slot] = length
            self._total += length
            for term, tf in terms.items():
                self._postings.setdefault(term, {})[slot] = tf
                self._arrays.pop(term, None)

    def remove(self, keys: Sequence[str]) -> None:
        for key in keys:
            slot = self._slot.pop(key, None)
            if slot is None:
                continue
            terms = self._terms[slot]
            for term in terms:
                posting = self._postings[term]
                del posting[slot]
                if not posting:
                    del self._postings[term]
                self._arrays.pop(term, None)
            self._total -= int(self._lens[slot])
            self._lens[slot] = 0
            self._keys[slot] = None
            self._terms[slot] = None

    def _posting_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        arrays = self._arrays.get(term)
        if arrays is None:
            posting = self._postings[term]
            arrays = (
                np.fromiter(posting.keys(), np.int64, len(posting)),
                np.fromiter(posting.values(), np.float32, len(posting)),
            )
            self._arrays[term] = arrays
        return arrays

    def __contains__(self, key: str) -> bool:
        return key in self._slot

    def terms(self, key: str) -> set[str]:
        """The distinct terms of a stored text."""
        terms = self._terms[self._slot[key]]
        return {t for t in terms if t != _EMPTY} if terms else set()

    def idf(self, term: str, hidden: Collection[str] = ()) -> float:
        """``hidden``: stored keys counted as not stored (a text that, at the time asked about, had not
        arrived yet)."""
        slots = self._slots_of(hidden)
        return self._idf(term, slots)

    def _slots_of(self, keys: Collection[str]) -> frozenset[int]:
        return frozenset(self._slot[k] for k in keys if k in self._slot)

    def _df(self, term: str, hidden: frozenset[int]) -> int:
        posting = self._postings.get(term, {})
        return len(posting) - sum(1 for s in hidden if s in posting)

    def _idf(self, term: str, hidden: frozenset[int]) -> float:
        n, df = len(self._slot) - len(hidden), self._df(term, hidden)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def idfs(self, terms: Iterable[str], hidden: Collection[str] = ()) -> dict[str, float]:
        """:meth:`idf` of each term, the hidden keys looked up once for all of them."""
        slots = self._slots_of(hidden)
        return {t: self._idf(t, slots) for t in terms}

    def weights(self, keys: Iterable[str], hidden: Collection[str] = ()) -> dict[str, float]:
        """Each stored key's summed idf over the distinct terms of its text (``hidden``: as :meth:`idf`),
        the hidden keys looked up once for all of them.

        >>> idx = LexicalIndex(); idx.add(["a", "b"], ["plot four soil", "plot nine"])
        >>> w = idx.weights(["a", "b"]); w["a"] > w["b"] > 0
        True
        """
        texts = {k: self.terms(k) for k in keys}
        rarity = self.idfs(set().union(*texts.values()), hidden)  # a term the keys share is read once
        # fsum: the same total whatever order a set of terms is read in (set order varies by process)
        return {k: math.fsum(rarity[t] for t in terms) for k, terms in texts.items()}

    def overlapping(
        self,
        query: str,
        n: int,
        keep: Callable[[str], bool] | None = None,
        max_df: int | None = None,
        hidden: Collection[str] = (),
    ) -> list[tuple[str, float]]:
        """The ``n`` stored keys (``keep`` ones only) sharing the most query terms, by summed idf of
        the distinct terms shared, best first (ties: the earlier stored first). Terms held by more
        than ``max_df`` texts are not followed: their idf is small, and following them would cost
        as much as the namespace is large. The overlap reported counts only the terms followed.
        ``hidden`` keys count as not stored, in the idf and ``max_df`` too, and are never returned.

        >>> idx = LexicalIndex(); idx.add(["a", "b", "c"], ["plot four soil", "plot nine", "coffee"])
        >>> [k for k, _ in idx.overlapping("soil plot", 5)]
        ['a', 'b']
        >>> [k for k, _ in idx.overlapping("soil plot", 5, hidden=["a"])]
        ['b']
        """
        withheld = self._slots_of(hidden)
        withheld_slots = np.fromiter(withheld, np.int64, len(withheld))
        slots, weights = [], []
        for term in sorted(set(lexical_terms(query))):  # a fixed order: the sums below follow it
            posting = self._postings.get(term)
            if not posting or (max_df is not None and self._df(term, withheld) > max_df):
                continue
            term_slots, _ = self._posting_arrays(term)
            if withheld:
                term_slots = term_slots[~np.isin(term_slots, withheld_slots)]
            slots.append(term_slots)
            weights.append(np.full(len(term_slots), self._idf(term, withheld), np.float64))
        if not slots:
            return []
        uniq, inverse = np.unique(np.concatenate(slots), return_inverse=True)
        summed = np.zeros(len(uniq), np.float64)
        np.add.at(summed, inverse, np.concatenate(weights))
        out: list[tuple[str, float]] = []
        keys = self._keys
        # Totals equal but for their last bits (the same weights added in another order) are ties.
        for i in np.lexsort((uniq, -np.round(summed, 9))).tolist():
            key = keys[int(uniq[i])]
            if key is not None and (keep is None or keep(key)):
                out.append((key, float(summed[i])))
                if len(out) == n:
                    break
        return out

    def scores(self, query: str) -> dict[str, float]:
        """Raw BM25 score per key (only keys with a positive score)."""
        n = len(self._slot)
        q = [t for t in lexical_terms(query) if t in self._postings]
        if not q or not n:
            return {}
        avg = self._total / n
        total: dict[str, float] = {}
        slots_seen: list[np.ndarray] = []
        parts: list[np.ndarray] = []
        for term in q:
            slots, tfs = self._posting_arrays(term)
            idf = math.log(1 + (n - len(slots) + 0.5) / (len(slots) + 0.5))
            norm = K1 * ((1 - B) + B * self._lens[slots] / avg)
            slots_seen.append(slots)
            parts.append((idf * tfs / (tfs + norm)).astype(np.float32))
        every = np.concatenate(slots_seen)
        acc = np.concatenate(parts)
        uniq, inverse = np.unique(every, return_inverse=True)
        summed = np.zeros(len(uniq), np.float32)
        np.add.at(summed, inverse, acc)
        keys = self._keys
        for slot, score in zip(uniq.tolist(), summed.tolist(), strict=True):
            if score > 0:
                total[keys[slot]] = score
        return total
