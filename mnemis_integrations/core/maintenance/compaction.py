"""Compaction: merge old fragments of a subtopic into overview fragments; archive the originals.

Nothing is deleted. Each overview is an ordinary fragment whose ``source_ids`` are the union of
its originals', so every raw message stays reachable through it; its originals move under the
subtopic's archive node (``NodeKind.ARCHIVE``), are marked ``Status.ARCHIVED`` and remember what
they were (``properties``: ``archived_in``, ``archived_from``, ``status_before_archive``), which
makes :func:`uncompact_graph` an exact inverse.

Superseded and current fragments never share an overview: a superseded overview inherits the
``updates`` edges of its originals, so when it is hit its successor still comes with it and the
current state still comes first.

Everything here is a function over a :class:`~..graph.MemoryGraph`; the engine persists the
result and rebuilds the derived indexes (no embedding: overview vectors are centroids).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..builder.summarise import shared_words, topic_words_of
from ..graph import MemoryGraph
from ..model import Edge, EdgeKind, Node, NodeKind, Status, moment
from ..temporal import ARCHIVED_FROM, ARCHIVED_IN, OVERVIEW_OF, STATUS_BEFORE, is_overview
from ..text import date_span
from .supersede import REPLACED, REPLACED_BY, supersede

__all__ = [
    "refresh_overview",
    "CompactionReport",
    "OverviewPlan",
    "compact_graph",
    "plan_compaction",
    "uncompact_graph",
]


@dataclass(frozen=True)
class OverviewPlan:
    """One overview to create: ``members`` (fragment ids, time order) of ``subtopic_id``."""

    subtopic_id: str
    members: tuple[str, ...]
    superseded: bool


@dataclass(frozen=True)
class CompactionReport:
    """What one ``compact`` call did."""

    namespace: str
    before: datetime
    overviews_created: int
    fragments_archived: int
    subtopics_touched: int
    overview_ids: tuple[str, ...] = ()


def _time_key(n: Node) -> tuple:
    t = n.event_time or n.created_at
    return (t is None, moment(t) if t else 0, n.id)


def plan_compaction(
    graph: MemoryGraph, before: datetime, *, min_group: int = 2, max_messages: int = 16
) -> list[OverviewPlan]:
    """Which old fragments to merge, per subtopic (pure: the graph is only read).

    A fragment is old when its last message (``event_time``) is before ``before``. Old
    fragments of one subtopic with the same status (current or superseded) are taken in time
    order and cut into runs holding at most ``max_messages`` raw messages; a run of fewer than
    ``min_group`` fragments is left alone (merging it would save nothing). Overviews are not
    merged again.

    ``max_messages`` bounds what an overview hit costs a reader: it shows its raw messages, and
    16 (about 500 tokens) still leaves room for several hits in a 2,048-token context. On the
    scenario suite 16 cut active nodes by 47% with current-state-first intact; 12 cut 43% but
    split one pricing timeline across two overviews.

    Examples:
        >>> from datetime import datetime, timezone
        >>> from mnemis_integrations.core.model import Node, NodeKind, Edge, EdgeKind
        >>> t = lambda d: datetime(2025, 3, d, tzinfo=timezone.utc)
        >>> g = MemoryGraph("u"); g.add_node(Node("s", NodeKind.SUBTOPIC, "S", "u"))
        >>> for i, d in enumerate([1, 2, 3, 20]):
        ...     g.add_node(Node(f"f{i}", NodeKind.FRAGMENT, "F", "u", source_ids=[f"m{i}"], event_time=t(d)))
        ...     g.add_edge(Edge(f"f{i}", "s", EdgeKind.BELONGS_TO))
        >>> [p.members for p in plan_compaction(g, t(10))]
        [('f0', 'f1', 'f2')]
    """
    plans: list[OverviewPlan] = []
    subs = sorted(graph.nodes(NodeKind.SUBTOPIC), key=lambda n: n.id)
    for sub in subs:
        old = [
            c
            for c in graph.children(sub.id)
            if c.kind == NodeKind.FRAGMENT
            and c.status in (Status.ACTIVE, Status.SUPERSEDED)
            and not is_overview(c)
            and c.event_time is not None
            and c.event_time < before
        ]
        for superseded in (False, True):
            group = sorted((c for c in old if (c.status == Status.SUPERSEDED) == superseded), key=_time_key)
            run: list[Node] = []
            size = 0
            for f in group + [None]:  # type: ignore[list-item]
                n = len(f.source_ids) if f is not None else 0
                if f is None or (run and size + n > max_messages):
                    if len(run) >= min_group:
                        plans.append(OverviewPlan(sub.id, tuple(r.id for r in run), superseded))
                    run, size = [], 0
                if f is not None:
                    run.append(f)
                    size += n
    return plans


def _resolve(graph: MemoryGraph, node_id: str, moved: dict[str, str]) -> str:
    """Where an edge end now points: an archived original stands for its overview."""
    seen = set()
    while node_id not in seen:
        seen.add(node_id)
        if node_id in moved:
            node_id = moved[node_id]
            continue
        target = graph.get(node_id).properties.get(ARCHIVED_IN)
        if target and graph.has(target):
            node_id = target
            continue
        break
    return node_id


def _archive_node(graph: MemoryGraph, sub: Node, when: datetime | None) -> str:
    aid = f"a:{sub.id}"
    if not graph.has(aid):
        graph.add_node(
            Node(
                id=aid,
                kind=NodeKind.ARCHIVE,
                label="Archive",
                namespace=sub.namespace,
                summary=f"archived fragments of {sub.label}",
                status=Status.ARCHIVED,
                created_at=when,
                event_time=when,
            )
        )
        graph.add_edge(Edge(aid, sub.id, EdgeKind.BELONGS_TO, created_at=when))
    return aid


def _overview_fields(members: list[Node]) -> dict:
    """An overview's text and times, derived from its members (also after one of them changed)."""
    keywords = shared_words(members, lambda f: f.keywords)
    topics = shared_words(members, topic_words_of)  # nouns and whole words, for the names a reader sees
    start = min((f.created_at for f in members if f.created_at), default=None)
    end = max((f.event_time for f in members if f.event_time), default=None)
    span = date_span(start, end)
    return {
        "label": f"overview {', '.join(topics[:2])}".strip(),
        "summary": f"Overview of {len(members)} conversations ({span}): {', '.join(topics)}",
        "keywords": keywords,
        "source_ids": list(dict.fromkeys(m for f in members for m in f.source_ids)),
        "created_at": start,
        "event_time": end,
    }


def refresh_overview(graph: MemoryGraph, overview: Node) -> None:
    """Derive an overview's text again from its members as they are now (after a forget).

    Its messages stay its own (the forget took out the forgotten ones): a member removed by hand
    (the LlamaIndex store deletes a fragment, not its message) left messages only the overview
    holds, and read from the members again they were held by no fragment, found by no search."""
    members = [graph.get(m) for m in overview.properties.get(OVERVIEW_OF, []) if graph.has(m)]
    for name, value in _overview_fields(members).items():
        if name != "source_ids":
            setattr(overview, name, value)


def _overview_node(graph: MemoryGraph, plan: OverviewPlan, before: datetime) -> Node:
    members = [graph.get(m) for m in plan.members]
    node = Node(
        id=f"o:{plan.members[0]}",
        kind=NodeKind.FRAGMENT,
        namespace=graph.namespace,
        status=Status.SUPERSEDED if plan.superseded else Status.ACTIVE,
        properties={OVERVIEW_OF: list(plan.members), "compacted_before": before.isoformat()},
        **_overview_fields(members),
    )
    if plan.superseded:
        ends = [f.valid_until for f in members if f.valid_until is not None]
        node.valid_until = min(ends) if ends else None
    return node


def _mirrored(graph: MemoryGraph, e: Edge, src: str, dst: str) -> Edge:
    """``e`` moved to ``src -> dst``. An ``updates`` link keeps the messages it names, joined with
    those of a link another original already gave the pair, so that forgetting the replacing
    messages undoes the overview's link as it undoes the originals'; one link naming none makes
    the pair's a whole-node link."""
    properties: dict = {}
    if e.kind == EdgeKind.UPDATES and REPLACED in e.properties:
        prior = graph.edge(src, dst, EdgeKind.UPDATES)
        if prior is None or REPLACED in prior.properties:
            before = prior.properties if prior is not None else {}
            properties = {
                key: sorted(set(before.get(key, ())) | set(e.properties.get(key, ())))
                for key in (REPLACED, REPLACED_BY)
            }
    return Edge(
        src, dst, e.kind, label=e.label, weight=e.weight, created_at=e.created_at, properties=properties
    )


def compact_graph(
    graph: MemoryGraph, before: datetime, *, min_group: int = 2, max_messages: int = 16
) -> CompactionReport:
    """Merge old fragments into overviews and archive the originals, in place.

    Returns:
        A :class:`CompactionReport`; ``overview_ids`` name the new overviews.

    Examples:
        >>> from datetime import datetime, timezone
        >>> from mnemis_integrations.core.model import Node, NodeKind, Edge, EdgeKind
        >>> t = lambda d: datetime(2025, 3, d, tzinfo=timezone.utc)
        >>> g = MemoryGraph("u"); g.add_node(Node("s", NodeKind.SUBTOPIC, "S", "u"))
        >>> for i in range(3):
        ...     g.add_node(
        ...         Node(f"f{i}", NodeKind.FRAGMENT, "F", "u", source_ids=[f"m{i}"], event_time=t(1 + i))
        ...     )
        ...     g.add_edge(Edge(f"f{i}", "s", EdgeKind.BELONGS_TO))
        >>> rep = compact_graph(g, t(10))
        >>> sorted(c.id for c in g.children("s")), g.get("o:f0").source_ids, g.parent("f1").kind.value
        (['a:s', 'o:f0'], ['m0', 'm1', 'm2'], 'archive')
        >>> _ = uncompact_graph(g); sorted(c.id for c in g.children("s"))
        ['f0', 'f1', 'f2']
    """
    plans = plan_compaction(graph, before, min_group=min_group, max_messages=max_messages)
    moved: dict[str, str] = {}
    overviews: list[tuple[OverviewPlan, Node]] = []
    for plan in plans:
        ov = _overview_node(graph, plan, before)
        graph.add_node(ov)
        graph.add_edge(Edge(ov.id, plan.subtopic_id, EdgeKind.BELONGS_TO, created_at=ov.created_at))
        for m in plan.members:
            moved[m] = ov.id
        overviews.append((plan, ov))
    # Mirror every non-hierarchy edge of the originals onto their overviews.
    for plan, ov in overviews:
        for m in plan.members:
            for e in graph.out_edges(m):
                if e.kind == EdgeKind.BELONGS_TO:
                    continue
                dst = _resolve(graph, e.dst, moved)
                if dst != ov.id:
                    graph.add_edge(_mirrored(graph, e, ov.id, dst))
            for e in graph.in_edges(m):
                if e.kind == EdgeKind.BELONGS_TO:
                    continue
                src = _resolve(graph, e.src, moved)
                if src != ov.id:
                    graph.add_edge(_mirrored(graph, e, src, ov.id))
    # Then move the originals under the archive node.
    for plan, ov in overviews:
        sub = graph.get(plan.subtopic_id)
        aid = _archive_node(graph, sub, ov.created_at)
        for m in plan.members:
            node = graph.get(m)
            graph.remove_edge(m, sub.id, EdgeKind.BELONGS_TO)
            graph.add_edge(Edge(m, aid, EdgeKind.BELONGS_TO, created_at=node.created_at))
            node.properties[STATUS_BEFORE] = node.status.value
            node.properties[ARCHIVED_IN] = ov.id
            node.properties[ARCHIVED_FROM] = sub.id
            node.status = Status.ARCHIVED
    return CompactionReport(
        namespace=graph.namespace,
        before=before,
        overviews_created=len(overviews),
        fragments_archived=sum(len(p.members) for p in plans),
        subtopics_touched=len({p.subtopic_id for p in plans}),
        overview_ids=tuple(ov.id for _, ov in overviews),
    )


def uncompact_graph(graph: MemoryGraph, overview_ids: list[str] | None = None) -> list[str]:
    """Undo compaction, in place: originals back under their subtopic, overviews removed.

    Args:
        graph: the namespace graph.
        overview_ids: overviews to undo; ``None`` undoes all of them.

    Returns:
        The restored fragment ids.

    An ``updates`` edge that reached an overview after compaction (a later fragment that
    superseded it) is handed on to the originals that were current, which become superseded.
    """
    targets = [n for n in graph.nodes(NodeKind.FRAGMENT) if is_overview(n)]
    if overview_ids is not None:
        wanted = set(overview_ids)
        targets = [n for n in targets if n.id in wanted]
    restored: list[str] = []
    # Newest overviews first, so an overview nested in a later one is itself restored afterwards.
    for ov in sorted(targets, key=lambda n: n.id, reverse=True):
        members = [m for m in ov.properties.get(OVERVIEW_OF, []) if graph.has(m)]
        late = [
            e
            for e in graph.in_edges(ov.id, EdgeKind.UPDATES)
            if e.src not in members
            and not any(graph.g.has_edge(e.src, m, EdgeKind.UPDATES.value) for m in members)
        ]
        for m in members:
            node = graph.get(m)
            sub_id = node.properties.pop(ARCHIVED_FROM, None)
            node.properties.pop(ARCHIVED_IN, None)
            node.status = Status(node.properties.pop(STATUS_BEFORE, Status.ACTIVE.value))
            parent = graph.parent(m)
            if parent is not None:
                graph.remove_edge(m, parent.id, EdgeKind.BELONGS_TO)
            if sub_id and graph.has(sub_id):
                graph.add_edge(Edge(m, sub_id, EdgeKind.BELONGS_TO, created_at=node.created_at))
            restored.append(m)
        for e in late:
            src = graph.get(e.src)
            for m in members:
                if graph.get(m).status == Status.ACTIVE:
                    supersede(graph, old_id=m, new_id=src.id, when=e.created_at or src.created_at)
        graph.remove_node(ov.id)
    for a in graph.nodes(NodeKind.ARCHIVE):
        if not graph.children(a.id):
            graph.remove_node(a.id)
    return restored
