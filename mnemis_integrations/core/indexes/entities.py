"""Entity lookup: find the entity nodes a query speaks of (exact, normalised, fuzzy)."""

from __future__ import annotations

import difflib
import itertools
from collections import Counter
from collections.abc import Iterable, KeysView
from functools import lru_cache

from ..model import Node, NodeKind
from ..text import has_cjk, normalise_name, query_terms

__all__ = ["EntityIndex", "entity_keys"]

# Fuzzy matching (typos, plurals) is for single Latin words at least this long.
_FUZZY_MIN_LEN = 4
# Sizes of the character n-grams fuzzy candidates are found by: trigrams are the rarer, bigrams
# still bound the short words trigrams cannot ("acme" and its typo "acxme" share no trigram).
_GRAM_SIZES = (2, 3)


def entity_keys(node: Node) -> tuple[str, ...]:
    """The keys an entity is found by (its label's and aliases' :func:`normalise_name`, each once,
    in that order); none for a node of another kind.

    >>> entity_keys(Node("e1", NodeKind.ENTITY, "Plan B", "u1", aliases=["plan b's", "PB", "  "]))
    ('plan b', 'pb')
    """
    if node.kind != NodeKind.ENTITY:
        return ()
    return tuple(dict.fromkeys(k for k in map(normalise_name, (node.label, *node.aliases)) if k))


def _gram_tokens(word: str, size: int) -> list[str]:
    """``word``'s character n-grams of ``size``, the k-th repeat of one tagged with k: two words
    share as many tokens as their n-gram multisets overlap.

    >>> _gram_tokens("banana", 2)
    ['ba', 'an', 'na', 'an1', 'na1']
    """
    seen: Counter[str] = Counter()
    tokens = []
    for i in range(len(word) - size + 1):
        gram = word[i : i + size]
        tokens.append(f"{gram}{seen[gram]}" if seen[gram] else gram)
        seen[gram] += 1
    return tokens


@lru_cache(maxsize=4096)
def _min_shared_grams(len_a: int, len_b: int, size: int, cutoff: float) -> int | None:
    """The fewest n-gram tokens of ``size`` two words of these lengths share when difflib's
    ``ratio()`` of them reaches ``cutoff`` (0 or less: no bound); None when no ratio of theirs can.

    ``ratio()`` is ``2 M / (len_a + len_b)``, M the size of its matching blocks: a common
    subsequence of B blocks, no two adjacent in both words, so B - 1 <= the characters left
    unmatched, ``len_a + len_b - 2 M``. A block of n characters holds n - size + 1 n-grams common
    to both words at distinct places, so they share at least ``M - (size - 1) B``.

    >>> _min_shared_grams(8, 8, 2, 0.88), _min_shared_grams(8, 10, 2, 0.88), _min_shared_grams(8, 10, 3, 0.88)
    (7, 5, 2)
    >>> _min_shared_grams(4, 9, 2, 0.88) is None
    True
    """
    total = len_a + len_b
    fewest_matched = next((m for m in range(min(len_a, len_b) + 1) if 2.0 * m / total >= cutoff), None)
    if fewest_matched is None:
        return None
    most_blocks = min(fewest_matched, total - 2 * fewest_matched + 1)
    return fewest_matched - (size - 1) * most_blocks


class EntityIndex:
    """Maps normalised names and aliases to entity node ids.

    Lookup reads only the keys a query can match, not all of them: names holding Chinese by the
    query's characters, fuzzy candidates by length and shared character n-grams.
    """

    def __init__(self):
        self._by_key: dict[str, str] = {}
        # keys by their number of words: the longest n-gram of a query worth looking up
        self._key_lengths: Counter[int] = Counter()
        self._keys_of: dict[str, list[str]] = {}  # node id -> its keys: removing a node reads no other
        # Names holding Chinese match as substrings of the query: each one's rank in _by_key (found
        # entities keep that order), and the lengths of those starting with each character.
        self._cjk_rank: dict[str, int] = {}
        self._cjk_lengths: dict[str, Counter[int]] = {}
        self._ranks = itertools.count()
        # Fuzzy candidates: single-word keys by length, and by (n-gram size, length) and n-gram token.
        self._singles: dict[int, set[str]] = {}
        self._gram_keys: dict[tuple[int, int], dict[str, set[str]]] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    @property
    def _max_words(self) -> int:
        return max(self._key_lengths, default=1)

    def add(self, key: str, node_id: str) -> None:
        key = normalise_name(key)
        if not key:
            return
        if key not in self._by_key:
            self._key_lengths[len(key.split())] += 1
            self._index(key)
        else:
            self._disown(key, self._by_key[key])
        self._by_key[key] = node_id
        self._keys_of.setdefault(node_id, []).append(key)

    def remove_node(self, node_id: str) -> None:
        for key in self._keys_of.pop(node_id, ()):
            del self._by_key[key]
            self._forget(key)

    def discard(self, key: str, node_id: str) -> None:
        """Forget the name ``key`` if it names ``node_id``."""
        key = normalise_name(key)
        if self._by_key.get(key) == node_id:
            self.drop([key])

    def drop(self, keys: Iterable[str]) -> None:
        """Forget each of ``keys`` (as :meth:`keys` gives them), whichever entity it names."""
        for key in keys:
            node_id = self._by_key.pop(key, None)
            if node_id is not None:
                self._disown(key, node_id)
                self._forget(key)

    def _disown(self, key: str, node_id: str) -> None:
        keys = self._keys_of[node_id]
        keys.remove(key)
        if not keys:
            del self._keys_of[node_id]

    def _index(self, key: str) -> None:
        if has_cjk(key):
            self._cjk_rank[key] = next(self._ranks)
            self._cjk_lengths.setdefault(key[0], Counter())[len(key)] += 1
        elif " " not in key and len(key) >= _FUZZY_MIN_LEN:
            self._singles.setdefault(len(key), set()).add(key)
            for size in _GRAM_SIZES:
                postings = self._gram_keys.setdefault((size, len(key)), {})
                for token in _gram_tokens(key, size):
                    postings.setdefault(token, set()).add(key)

    def _forget(self, key: str) -> None:
        """Take ``key``, just gone from ``_by_key``, out of every structure derived from it."""
        n = len(key.split())
        self._key_lengths[n] -= 1
        if not self._key_lengths[n]:
            del self._key_lengths[n]
        if key in self._cjk_rank:
            del self._cjk_rank[key]
            lengths = self._cjk_lengths[key[0]]
            lengths[len(key)] -= 1
            if not lengths[len(key)]:
                del lengths[len(key)]
                if not lengths:
                    del self._cjk_lengths[key[0]]
        elif key in self._singles.get(len(key), ()):
            singles = self._singles[len(key)]
            singles.discard(key)
            for size in _GRAM_SIZES:
                postings = self._gram_keys[size, len(key)]
                for token in _gram_tokens(key, size):
                    postings[token].discard(key)
                    if not postings[token]:
                        del postings[token]
                if not singles:
                    del self._gram_keys[size, len(key)]
            if not singles:
                del self._singles[len(key)]

    def get(self, key: str) -> str | None:
        return self._by_key.get(normalise_name(key))

    def keys(self) -> set[str]:
        return set(self._by_key)

    def names(self) -> KeysView[str]:
        """The keys as a live read-only view: membership without copying every name.

        >>> idx = EntityIndex(); idx.add("Plan B", "e1"); "plan b" in idx.names()
        True
        """
        return self._by_key.keys()

    def _cjk_keys_in(self, text: str) -> list[str]:
        """The keys holding Chinese that occur in ``text``, in ``_by_key`` order: at each place of
        ``text``, only the lengths of the keys that start with its character are tried."""
        hits = set()
        for i, char in enumerate(text):
            for length in self._cjk_lengths.get(char, ()):
                if text[i : i + length] in self._cjk_rank:
                    hits.add(text[i : i + length])
        return sorted(hits, key=self._cjk_rank.__getitem__)

    def _fuzzy_candidates(self, word: str, cutoff: float) -> set[str]:
        """The single-word keys ``difflib.get_close_matches(word, ..., cutoff=cutoff)`` may accept,
        and some it will not.

        A key is passed over only when a necessary condition of difflib's fails: its
        ``real_quick_ratio`` (a bound on length alone), or sharing :func:`_min_shared_grams` n-gram
        tokens with ``word``. A key sharing ``need`` of the word's ``t`` tokens shares one of any
        ``t - need + 1`` of them, so only the rarest that many are read, of the n-gram size that
        reads the fewest keys.
        """
        tokens = {size: _gram_tokens(word, size) for size in _GRAM_SIZES}
        candidates: set[str] = set()
        for length, keys in self._singles.items():
            if 2.0 * min(len(word), length) / (len(word) + length) < cutoff:
                continue
            fewest: list[set[str]] | None = None
            for size in _GRAM_SIZES:
                need = _min_shared_grams(len(word), length, size, cutoff)
                if need is None or need > len(tokens[size]):
                    break  # no key of this length can reach the cutoff
                if need <= 0:
                    continue
                postings = self._gram_keys[size, length]
                rarest = sorted((postings.get(t, ()) for t in tokens[size]), key=len)
                rarest = rarest[: len(tokens[size]) - need + 1]
                if fewest is None or sum(map(len, rarest)) < sum(map(len, fewest)):
                    fewest = rarest
            else:
                if fewest is None:
                    candidates |= keys
                else:
                    candidates.update(*fewest)
        return candidates

    def find_in(self, query: str, fuzzy_min_ratio: float = 0.88) -> dict[str, float]:
        """Entity node ids mentioned by ``query``, with a match quality in (0, 1].

        Exact n-gram matches score 1; fuzzy ones (typos, plurals) score their ratio.

        Examples:
            >>> idx = EntityIndex(); idx.add("Plan B", "e1"); idx.add("Acme", "e2"); idx.add("张伟", "e3")
            >>> sorted(idx.find_in("Did Acme's team confirm plan b? 张伟说了吗").items())
            [('e1', 1.0), ('e2', 1.0), ('e3', 1.0)]
            >>> idx.find_in("what about Acmee")
            {'e2': 0.889}
        """
        words = query_terms(query)
        found: dict[str, float] = {}
        for n in range(min(self._max_words, len(words)), 0, -1):
            for i in range(len(words) - n + 1):
                gram = " ".join(words[i : i + n])
                nid = self._by_key.get(gram)
                if nid is not None:
                    found[nid] = 1.0
        if has_cjk(query):
            for key in self._cjk_keys_in(normalise_name(query)):
                found[self._by_key[key]] = 1.0
        if fuzzy_min_ratio < 1.0:
            for w in words:
                if len(w) < _FUZZY_MIN_LEN or w in self._by_key:
                    continue
                candidates = self._fuzzy_candidates(w, fuzzy_min_ratio)
                for k in difflib.get_close_matches(w, candidates, n=1, cutoff=fuzzy_min_ratio):
                    nid = self._by_key[k]
                    ratio = round(difflib.SequenceMatcher(None, w, k).ratio(), 3)
                    found[nid] = max(found.get(nid, 0.0), ratio)
        return found
