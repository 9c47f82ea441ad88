"""Conflict marking: the old node is marked superseded and linked old <- new, never deleted."""

from __future__ import annotations

from datetime import datetime

from ..graph import MemoryGraph
from ..model import Edge, EdgeKind, Status

__all__ = ["supersede"]


def supersede(graph: MemoryGraph, *, old_id: str, new_id: str, when: datetime | None) -> None:
    """Record that ``new_id`` replaces ``old_id``: an ``updates`` edge new -> old, and the old
    node's status and validity end set. Idempotent.

    >>> from mnemis_integrations.core.model import Node, NodeKind
    >>> g = MemoryGraph("u")
    >>> g.add_node(Node("a", NodeKind.FRAGMENT, "A", "u")); g.add_node(Node("b", NodeKind.FRAGMENT, "B", "u"))
    >>> supersede(g, old_id="a", new_id="b", when=None)
    >>> g.get("a").status.value, [n.id for n in g.successors_of("a")]
    ('superseded', ['b'])
    """
    old = graph.get(old_id)
    graph.get(new_id)
    graph.add_edge(Edge(new_id, old_id, EdgeKind.UPDATES, created_at=when))
    if old.status == Status.ACTIVE:
        old.status = Status.SUPERSEDED
    if when is not None and (old.valid_until is None or when < old.valid_until):
        old.valid_until = when
