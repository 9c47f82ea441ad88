"""Hierarchy-path LRU cache: consecutive queries in one conversation stay on one topic,
so the same paths are asked for again and again. Keyed by the namespace's write version."""

from __future__ import annotations

from collections import OrderedDict

from ..state import NamespaceState

__all__ = ["PathCache"]


class PathCache:
    def __init__(self, maxsize: int = 4096):
        self.maxsize = maxsize
        self._d: OrderedDict[tuple[str, int, str], list[str]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def path(self, st: NamespaceState, node_id: str) -> list[str]:
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
