"""How the graph looks at a moment: which state of a fact a search may show, and what replaced it.

Read-only views shared by retrieval and maintenance. Supersession (``maintenance.supersede``)
and compaction (``maintenance.compaction``) write the markers read here: ``updates`` edges with
``valid_until``, and the overview / archive properties below. Keeping the readers apart from
both writers is what lets compaction call ``supersede`` without an import loop.
"""

from __future__ import annotations

from datetime import datetime

from .graph import MemoryGraph
from .model import HIERARCHY_KINDS, Node, NodeKind, Status

__all__ = [
    "ARCHIVED_FROM",
    "ARCHIVED_IN",
    "OVERVIEW_OF",
    "STATUS_BEFORE",
    "is_overview",
    "status_at",
    "visible_successors",
    "visible_successors_raw",
]

OVERVIEW_OF = "overview_of"  # overview -> its originals' ids, in time order
ARCHIVED_IN = "archived_in"  # archived original -> the overview that replaced it
ARCHIVED_FROM = "archived_from"  # archived original -> the subtopic it belonged to
STATUS_BEFORE = "status_before_archive"


def is_overview(node: Node) -> bool:
    return bool(node.properties.get(OVERVIEW_OF))


def status_at(
    graph: MemoryGraph, node: Node, as_of: datetime | None, include_archived: bool
) -> Status | None:
    """How a node looks to a search at ``as_of``: its status then, or ``None`` when hidden.

    The validity interval of a fact runs from its ``created_at`` to its ``valid_until`` (set
    when a successor superseded it). At ``as_of`` a node created later does not exist yet, and a
    node superseded later is still current. Compaction is seen the same way: an overview stands
    for its originals only from the time its last original was said; before that (and whenever
    ``include_archived`` asks for the archived detail) the originals stand for themselves, with
    the status they had before archiving, and the overview is hidden.

    Args:
        graph: the namespace graph.
        node: any node of it.
        as_of: the moment to look from; ``None`` for now.
        include_archived: show archived originals (and archive nodes) instead of overviews.

    Examples:
        >>> from datetime import datetime, timezone
        >>> from mnemis_integrations.core.model import Node, NodeKind
        >>> t = lambda d: datetime(2025, 3, d, tzinfo=timezone.utc)
        >>> g = MemoryGraph("u")
        >>> old = Node("a", NodeKind.FRAGMENT, "A", "u", created_at=t(1)); g.add_node(old)
        >>> g.add_node(Node("b", NodeKind.FRAGMENT, "B", "u", created_at=t(5)))
        >>> from mnemis_integrations.core.maintenance.supersede import supersede
        >>> supersede(g, old_id="a", new_id="b", when=t(5))
        >>> [status_at(g, old, w, False) for w in (None, t(3), t(6))]
        [<Status.SUPERSEDED: 'superseded'>, <Status.ACTIVE: 'active'>, <Status.SUPERSEDED: 'superseded'>]
        >>> status_at(g, g.get("b"), t(3), False) is None
        True
    """
    if node.kind == NodeKind.ARCHIVE:
        return Status.ARCHIVED if include_archived else None
    if node.kind not in HIERARCHY_KINDS:
        return None
    if as_of is not None and node.created_at is not None and node.created_at > as_of:
        return None
    s = node.status
    if is_overview(node) and (
        include_archived or (as_of is not None and node.event_time is not None and node.event_time > as_of)
    ):
        return None  # its originals stand for themselves
    if s == Status.ARCHIVED:
        ov_id = node.properties.get(ARCHIVED_IN)
        ov = graph.get(ov_id) if ov_id and graph.has(ov_id) else None
        stands_in = (
            ov is not None and as_of is not None and ov.event_time is not None and ov.event_time > as_of
        )
        if not include_archived and not stands_in:
            return None
        s = Status(node.properties.get(STATUS_BEFORE, Status.ACTIVE.value))
    if (
        s == Status.SUPERSEDED
        and as_of is not None
        and (node.valid_until is None or node.valid_until > as_of)
    ):
        s = Status.ACTIVE  # its successor did not exist yet
    return s


def visible_successors(graph: MemoryGraph, node_id: str, allowed: set[str], limit: int = 3) -> list[str]:
    """The newest states of ``node_id`` that a search may show (at most ``limit``).

    Walks the ``updates`` chain forward, also through nodes it may not show (archived
    originals, states newer than ``as_of``), and keeps each allowed node that no allowed node
    further on replaces. ``graph.latest_successors`` gives only the chain's present ends; at an
    ``as_of`` before them (or when an end is archived) it would leave a superseded hit with no
    successor.

    Only the ends are returned, not the states in between: on LoCoMo dev the whole chain cost
    about one point of recall@2048 (more hits pushed into the budget) and gained nothing in
    current-state-first on the scenario suite.

    >>> from mnemis_integrations.core.model import Node, NodeKind
    >>> g = MemoryGraph("u")
    >>> for i in "abc": g.add_node(Node(i, NodeKind.FRAGMENT, i, "u"))
    >>> from mnemis_integrations.core.maintenance.supersede import supersede
    >>> supersede(g, old_id="a", new_id="b", when=None); supersede(g, old_id="b", new_id="c", when=None)
    >>> (
    ...     visible_successors(g, "a", {"a", "b", "c"}),
    ...     visible_successors(g, "a", {"a", "b"}),
    ...     visible_successors(g, "a", {"a", "c"}),
    ... )
    (['c'], ['b'], ['c'])
    """
    shown = [r for r in visible_successors_raw(graph, node_id) if r in allowed]
    return [r for r in shown if not set(visible_successors_raw(graph, r)) & allowed][:limit]


def visible_successors_raw(graph: MemoryGraph, node_id: str) -> list[str]:
    """Every node reachable forward along ``updates`` edges from ``node_id`` (excluding it)."""
    out, seen, frontier = [], {node_id}, [node_id]
    while frontier:
        nxt = []
        for nid in frontier:
            for s in graph.successors_of(nid):
                if s.id not in seen:
                    seen.add(s.id)
                    nxt.append(s.id)
                    out.append(s.id)
        frontier = nxt
    return out
