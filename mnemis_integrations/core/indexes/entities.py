"""Entity lookup: find the entity nodes a query speaks of (exact, normalised, fuzzy)."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, KeysView

from ..model import Node, NodeKind
from ..text import has_cjk, normalise_name, query_terms

__all__ = ["EntityIndex", "entity_keys"]


def entity_keys(node: Node) -> tuple[str, ...]:
    """The keys an entity is found by (its label's and aliases' :func:`normalise_name`, each once,
    in that order); none for a node of another kind.

    >>> entity_keys(Node("e1", NodeKind.ENTITY, "Plan B", "u1", aliases=["plan b's", "PB", "  "]))
    ('plan b', 'pb')
    """
    if node.kind != NodeKind.ENTITY:
        return ()
    return tuple(dict.fromkeys(k for k in map(normalise_name, (node.label, *node.aliases)) if k))


class EntityIndex:
    """Maps normalised names and aliases to entity node ids."""

    def __init__(self):
        self._by_key: dict[str, str] = {}
        # keys by their number of words: the longest n-gram of a query worth looking up
        self._key_lengths: Counter[int] = Counter()

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
        self._by_key[key] = node_id

    def remove_node(self, node_id: str) -> None:
        self._by_key = {k: v for k, v in self._by_key.items() if v != node_id}
        self._key_lengths = Counter(len(k.split()) for k in self._by_key)

    def discard(self, key: str, node_id: str) -> None:
        """Forget the name ``key`` if it names ``node_id``."""
        key = normalise_name(key)
        if self._by_key.get(key) == node_id:
            self.drop([key])

    def drop(self, keys: Iterable[str]) -> None:
        """Forget each of ``keys`` (as :meth:`keys` gives them), whichever entity it names."""
        for key in keys:
            if self._by_key.pop(key, None) is not None:
                n = len(key.split())
                self._key_lengths[n] -= 1
                if not self._key_lengths[n]:
                    del self._key_lengths[n]

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
            q = normalise_name(query)
            for key, nid in self._by_key.items():
                if has_cjk(key) and key in q:
                    found[nid] = 1.0
        if fuzzy_min_ratio < 1.0:
            singles = [k for k in self._by_key if " " not in k and len(k) >= 4 and not has_cjk(k)]
            for w in words:
                if len(w) < 4 or w in self._by_key:
                    continue
                for k in difflib.get_close_matches(w, singles, n=1, cutoff=fuzzy_min_ratio):
                    nid = self._by_key[k]
                    ratio = round(difflib.SequenceMatcher(None, w, k).ratio(), 3)
                    found[nid] = max(found.get(nid, 0.0), ratio)
        return found
