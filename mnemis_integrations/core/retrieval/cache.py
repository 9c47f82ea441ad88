"""Retrieval caches.

- :class:`PathCache`: hierarchy-path LRU cache. Consecutive queries in one conversation stay on
  one topic, so the same paths are asked for again and again. Keyed by the namespace's write version.
- :func:`memo`: one value per namespace state, recomputed after any write (the version and the
  node count are both checked), for per-query work that only depends on the graph: the visible
  node set and the semantic path's layout of it, entity document frequencies, the fragments.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

from ..state import NamespaceState

__all__ = ["FUNNEL_MIN_NODES", "PathCache", "fragment_count", "fragment_ids", "is_large", "memo"]

T = TypeVar("T")

# At or above this many graph nodes, search runs the two-stage funnel (SPEC §6); below it, every
# query scores every visible node exactly.
FUNNEL_MIN_NODES = 5_000


def is_large(st: NamespaceState) -> bool:
    return len(st.graph) >= FUNNEL_MIN_NODES


def memo(st: NamespaceState, name: str, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()`` once per (write version, node count, ``key``) of ``st``; the last value per
    ``name`` is kept."""
    if st.editing:  # the graph changes under the same version until the edit is written
        return compute()
    stamp = (st.version, len(st.graph), key)
    slot = st.memo.get(name)
    if slot is not None and slot[0] == stamp:
        return slot[1]
    value = compute()
    st.memo[name] = (stamp, value)
    return value


def fragment_ids(st: NamespaceState) -> frozenset[str]:
    """The ids of the fragments, memoised per write version: a search tells the fragments among
    thousands of scored nodes without reading each node."""
    from ..model import NodeKind

    return memo(st, "fragment_ids", None, lambda: frozenset(n.id for n in st.graph.nodes(NodeKind.FRAGMENT)))


def fragment_count(st: NamespaceState) -> int:
    """Number of fragments (at least 1), memoised per write version."""
    return max(1, len(fragment_ids(st)))


class PathCache:
    def __init__(self, maxsize: int = 4096):
        self.maxsize = maxsize
        self._d: OrderedDict[tuple[str, int, str], list[str]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def path(self, st: NamespaceState, node_id: str) -> list[str]:
        if st.editing:  # as in memo: the hierarchy changes under the same version until written
            return st.graph.hierarchy_path(node_id)
        key = (st.namespace, st.version, node_id)
        if key in self._d:
            self._d.move_to_end(key)
            self.hits += 1
            return self._d[key]
        self.misses += 1
        p = st.graph.hierarchy_path(node_id)
        self._d[key] = p
        if len(self._d) > self.maxsize:
            self._d.popitem(last=False)
        return p

    def clear(self) -> None:
        self._d.clear()
