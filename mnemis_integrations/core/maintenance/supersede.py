"""Conflict marking: the old node is marked superseded and linked old <- new, never deleted."""

from __future__ import annotations

from datetime import datetime

from ..graph import MemoryGraph
from ..model import Edge, EdgeKind, Status

__all__ = ["REPLACED", "REPLACED_BY", "replaces", "supersede"]

# On an ``updates`` edge: the ids of the old node's messages that the new node's messages
# (``REPLACED_BY``) replace. Absent: the whole old node is replaced (a link made by an LLM or
# before messages were recorded; a compaction overview's link names the messages its originals'
# links named, if each of them named some). A fragment holds several messages, and often
# only one of them changes: forgetting a named message undoes the link (``forget``), and a search
# shows a linked pair near the top with these messages first (``search._link_messages``).
REPLACED = "replaced"
REPLACED_BY = "replaced_by"


def replaces(edge: Edge, message_id: str) -> bool:
    """Does this ``updates`` edge replace ``message_id`` of its old node? An edge that names no
    message replaces the whole node, so every message of it.

    >>> replaces(Edge("b", "a", EdgeKind.UPDATES, properties={REPLACED: ["m1"]}), "m2")
    False
    >>> replaces(Edge("b", "a", EdgeKind.UPDATES), "m2")
    True
    """
    return REPLACED not in edge.properties or message_id in edge.properties[REPLACED]


def supersede(
    graph: MemoryGraph,
    *,
    old_id: str,
    new_id: str,
    when: datetime | None,
    replaced: tuple[str, ...] = (),
    replaced_by: tuple[str, ...] = (),
) -> None:
    """Record that ``new_id`` replaces ``old_id``: an ``updates`` edge new -> old, and the old
    node's status and validity end set. Idempotent.

    ``replaced``: which of the old node's messages the new node's ``replaced_by`` replace; a
    second call adds to them. Without it the link covers the whole old node, and stays so.

    >>> from mnemis_integrations.core.model import Node, NodeKind
    >>> g = MemoryGraph("u")
    >>> g.add_node(Node("a", NodeKind.FRAGMENT, "A", "u")); g.add_node(Node("b", NodeKind.FRAGMENT, "B", "u"))
    >>> supersede(g, old_id="a", new_id="b", when=None)
    >>> g.get("a").status.value, [n.id for n in g.successors_of("a")]
    ('superseded', ['b'])
    """
    old = graph.get(old_id)
    graph.get(new_id)
    existing = graph.edge(new_id, old_id, EdgeKind.UPDATES)
    properties: dict = {}
    if replaced and (existing is None or REPLACED in existing.properties):
        before = existing.properties if existing is not None else {}
        properties = {
            REPLACED: sorted(set(before.get(REPLACED, ())) | set(replaced)),
            REPLACED_BY: sorted(set(before.get(REPLACED_BY, ())) | set(replaced_by)),
        }
    graph.add_edge(Edge(new_id, old_id, EdgeKind.UPDATES, created_at=when, properties=properties))
    if old.status == Status.ACTIVE:
        old.status = Status.SUPERSEDED
    if when is not None and (old.valid_until is None or when < old.valid_until):
        old.valid_until = when
