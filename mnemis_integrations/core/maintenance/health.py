"""Health check and rebalancing of the hierarchy (SPEC section 5).

:func:`check_health` finds subtopics that span too long or have loosened, oversized concepts,
orphan fragments and duplicate entities; :func:`rebalance_graph` "sink-splits" each flagged
subtopic into two or three focused ones under the same concept, merges duplicate entities and
re-attaches orphans. Decisions (:func:`span_days`, :func:`cohesion`, :func:`plan_split`,
:func:`duplicate_entities`) are pure functions over plain data.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from difflib import SequenceMatcher

import numpy as np

from ..builder.relation_sources import READ_COUNTS, READ_FROM, merged_sources
from ..graph import MemoryGraph
from ..model import Edge, EdgeKind, Node, NodeKind, Status
from ..text import normalise_name

__all__ = [
    "MAX_SPAN_DAYS",
    "SPLIT",
    "SPLIT_FROM",
    "ConceptIssue",
    "HealthReport",
    "RebalanceReport",
    "SubtopicIssue",
    "check_health",
    "cohesion",
    "duplicate_entities",
    "plan_split",
    "rebalance_graph",
    "span_days",
]

# SPEC section 5: "a subtopic spanning more than about two weeks of conversation".
MAX_SPAN_DAYS = 14.0

SPLIT = "~"  # a subtopic split off ``s:<id>`` is ``s:<id>~1``, ``s:<id>~2``, ...
SPLIT_FROM = "split_from"  # split subtopic -> the subtopic it was split off

# Words after a company name that do not make it another company.
_LEGAL_SUFFIXES = frozenset(
    {
        "inc",
        "inc.",
        "corp",
        "corp.",
        "corporation",
        "co",
        "co.",
        "ltd",
        "ltd.",
        "llc",
        "gmbh",
        "plc",
        "ag",
        "sa",
        "公司",
        "有限公司",
        "集团",
    }
)

VectorsOf = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class SubtopicIssue:
    node_id: str
    label: str
    reasons: tuple[str, ...]  # "long_span" and/or "low_cohesion"
    span_days: float
    cohesion: float
    fragments: int


@dataclass(frozen=True)
class ConceptIssue:
    node_id: str
    label: str
    subtopics: int
    fragments: int


@dataclass(frozen=True)
class HealthReport:
    """What :meth:`MnemisMemory.health` found; ``ok`` when nothing."""

    namespace: str
    subtopics: tuple[SubtopicIssue, ...] = ()
    oversized_concepts: tuple[ConceptIssue, ...] = ()
    orphan_fragments: tuple[str, ...] = ()
    duplicate_entities: tuple[tuple[str, str], ...] = ()  # (kept, duplicate)

    @property
    def ok(self) -> bool:
        return not (
            self.subtopics or self.oversized_concepts or self.orphan_fragments or self.duplicate_entities
        )

    @property
    def broken(self) -> bool:
        """Whether the hierarchy is damaged (a fragment outside it), not only worth rebalancing:
        sprawling or loosened subtopics, large concepts and duplicate entities are advice."""
        return bool(self.orphan_fragments)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        d["broken"] = self.broken
        return d


@dataclass(frozen=True)
class RebalanceReport:
    namespace: str
    subtopics_split: tuple[str, ...] = ()
    subtopics_created: tuple[str, ...] = ()
    entities_merged: tuple[tuple[str, str], ...] = ()
    orphans_attached: tuple[str, ...] = ()
    details: dict = field(default_factory=dict)


def span_days(times: list[datetime | None]) -> float:
    """Days between the first and last known time (0 with fewer than two).

    >>> from datetime import datetime, timezone
    >>> span_days(
    ...     [datetime(2025, 3, 1, tzinfo=timezone.utc), None, datetime(2025, 3, 22, tzinfo=timezone.utc)]
    ... )
    21.0
    """
    known = [t for t in times if t is not None]
    if len(known) < 2:
        return 0.0
    return (max(known) - min(known)).total_seconds() / 86400.0


def cohesion(vectors: np.ndarray) -> float:
    """Mean cosine of unit rows to their normalised centroid (1.0 for one row or none).

    >>> round(cohesion(np.array([[1.0, 0.0], [0.0, 1.0]])), 3), cohesion(np.array([[1.0, 0.0], [1.0, 0.0]]))
    (0.707, 1.0)
    """
    v = np.asarray(vectors, dtype=np.float64)
    if len(v) < 2:
        return 1.0
    c = v.mean(axis=0)
    n = np.linalg.norm(c)
    if n == 0:
        return 0.0
    return float(np.clip((v @ (c / n)).mean(), -1.0, 1.0))


def _two_means(v: np.ndarray, iters: int = 10) -> np.ndarray:
    """Deterministic 2-means: seeds are the farthest pair; returns a 0/1 label per row."""
    sims = v @ v.T
    i, j = np.unravel_index(np.argmin(sims), sims.shape)
    centres = v[[i, j]]
    labels = np.zeros(len(v), dtype=int)
    for _ in range(iters):
        new = np.argmax(v @ centres.T, axis=1)
        if (new == labels).all() and _ > 0:
            break
        labels = new
        for k in (0, 1):
            if (labels == k).any():
                c = v[labels == k].mean(axis=0)
                centres[k] = c / (np.linalg.norm(c) or 1.0)
    return labels


def plan_split(
    ids: list[str],
    times: list[datetime | None],
    vectors: np.ndarray,
    *,
    max_span_days: float = MAX_SPAN_DAYS,
    max_parts: int = 3,
    by: str = "time",
) -> list[list[str]]:
    """Cut one subtopic's fragments into 2..``max_parts`` focused groups.

    ``by="time"`` (a sprawling subtopic) cuts the time-ordered fragments as few times as make
    every part span at most ``max_span_days``, at the largest silences that do (never more than
    ``max_parts`` parts; when that many cannot, where the widest part is shortest);
    ``by="vector"`` (a loosened subtopic) runs a deterministic 2-means. Returns one group,
    unchanged, when there is nothing to split.

    >>> from datetime import datetime, timedelta, timezone
    >>> t = [datetime(2025, 3, 1, tzinfo=timezone.utc) + timedelta(days=d) for d in (0, 1, 20, 21, 40)]
    >>> plan_split(["a", "b", "c", "d", "e"], t, np.eye(5))
    [['a', 'b'], ['c', 'd'], ['e']]
    >>> even = [datetime(2025, 3, 1, tzinfo=timezone.utc) + timedelta(days=6 * d) for d in range(8)]
    >>> plan_split(list("abcdefgh"), even, np.eye(8))
    [['a', 'b'], ['c', 'd', 'e'], ['f', 'g', 'h']]
    """
    if len(ids) < 2:
        return [list(ids)]
    if by == "vector":
        labels = _two_means(np.asarray(vectors, dtype=np.float64))
        groups = [[i for i, lab in zip(ids, labels, strict=True) if lab == k] for k in (0, 1)]
        return [g for g in groups if g] if all(groups) else [list(ids)]
    order = sorted(
        range(len(ids)), key=lambda i: (times[i] is None, times[i].timestamp() if times[i] else 0.0, ids[i])
    )
    cuts = _time_cuts([times[i] for i in order], max_span_days, max_parts)
    return [[ids[i] for i in p] for p in _cut(order, cuts)]


def _time_cuts(ts: list[datetime | None], max_span_days: float, max_parts: int) -> list[int]:
    """Where to cut time-ordered ``ts`` (undated last): after each returned index.

    Cutting at the largest silences one by one can leave a part as long as the whole when the
    silences are alike (a conversation every six days), so the cuts are chosen together: as few as
    make every part fit (one at least), of those the ones whose silences, largest first, are largest
    (ties: the earliest cuts); when ``max_parts`` parts cannot fit, the same among those whose widest
    part is shortest. Both are found in one pass per cut, not by weighing every set of cuts: a store
    built by an older version or by the LLM builder may hold thousands of fragments in a subtopic.
    """
    dated = [t.timestamp() for t in ts if t is not None]

    def span(a: int, b: int) -> float:  # days from ts[a] to ts[b], undated ones left out
        b = min(b, len(dated) - 1)
        return (dated[b] - dated[a]) / 86400.0 if a < b else 0.0

    silence = [dated[k + 1] - dated[k] if k + 1 < len(dated) else 0.0 for k in range(len(ts) - 1)]
    most = min(max_parts, len(ts)) - 1
    if most < 1:
        return []
    fewest = _fewest_cuts(len(ts), span, max_span_days)
    if fewest <= most:
        return _best_cuts(len(ts), span, silence, max(fewest, 1), max_span_days)
    return _best_cuts(len(ts), span, silence, most, _shortest_widest(len(ts), span, most))


# A part's span grows with its end and shrinks with its start (the times are sorted), which is what
# lets the three below read each cut once instead of every set of cuts.
_Span = Callable[[int, int], float]


def _fewest_cuts(n: int, span: _Span, limit: float) -> int:
    """The fewest cuts that make every part of ``n`` span at most ``limit`` (``n`` when none can)."""
    if not 0.0 <= limit:
        return n
    cuts, start = 0, 0
    for b in range(1, n):
        if not span(start, b) <= limit:  # each part as long as it fits
            cuts, start = cuts + 1, b
    return cuts


def _shortest_widest(n: int, span: _Span, k: int) -> float:
    """The shortest widest part of ``n`` cut ``k`` times."""
    # widest[c]: the shortest widest part of ts[: c + 1] cut j times, the last part ending at c
    widest = [span(0, c) for c in range(n)]
    for j in range(1, k + 1):
        prev, widest, cross = widest, [math.inf] * n, j - 1
        for c in range(j, n):
            # the parts before a last cut widen as it moves on, the part after it narrows: the best
            # cut is where the two cross, which only moves on with c
            while cross < c and prev[cross] < span(cross + 1, c):
                cross += 1
            widest[c] = min(max(prev[i], span(i + 1, c)) for i in (cross - 1, cross) if j - 1 <= i < c)
    return widest[n - 1]


def _best_cuts(n: int, span: _Span, silence: list[float], k: int, limit: float) -> list[int]:
    """Of the sets of ``k`` cuts whose parts all span at most ``limit`` (one at least), the one whose
    silences, largest first, are largest (ties: the earliest cuts)."""

    def rank(cuts: tuple[int, ...]) -> tuple:
        return tuple(sorted((silence[c] for c in cuts), reverse=True)), tuple(-c for c in cuts)

    # start[b]: the earliest a part ending at b may start
    start, a = [], 0
    for b in range(n):
        while not span(a, b) <= limit:
            a += 1
        start.append(a)
    # best[c]: the best j cuts whose last is c, their parts fitting. Adding the same later cut to two
    # sets keeps their order, so best[c] is the best of those ending within reach of c, plus c: the
    # best in a window sliding forward, kept in a deque.
    best: list[tuple[int, ...] | None] = [(c,) if start[c] == 0 else None for c in range(n - 1)]
    for _ in range(k - 1):
        ranks = [rank(b) if b is not None else None for b in best]
        nxt: list[tuple[int, ...] | None] = [None] * (n - 1)
        window: deque[int] = deque()
        for c in range(1, n - 1):
            if ranks[c - 1] is not None:
                while window and ranks[window[-1]] < ranks[c - 1]:
                    window.pop()
                window.append(c - 1)
            while window and window[0] < start[c] - 1:
                window.popleft()
            if window:
                nxt[c] = best[window[0]] + (c,)
        best = nxt
    last = [b for b in best[max(start[n - 1] - 1, 0) :] if b is not None]
    return list(max(last, key=rank))


def _cut(order: list[int], cuts: list[int]) -> list[list[int]]:
    out, start = [], 0
    for k in cuts:
        out.append(order[start : k + 1])
        start = k + 1
    out.append(order[start:])
    return [p for p in out if p]


def duplicate_entities(names: dict[str, str], min_ratio: float = 0.92) -> list[tuple[str, str]]:
    """(kept, duplicate) pairs of entity ids whose names are the same thing.

    Names match when their normalised forms are equal, one is the other plus a legal-form
    suffix (``"Acme"`` / ``"Acme Corp"``), or they are near-identical (spelling slips). Any
    other extra word may name another thing ("AWS" / "AWS Frankfurt", "Dana" / "Dana Lee"),
    so it is not merged. The entity seen first (smaller id) is kept.

    >>> duplicate_entities({"e:acme": "Acme", "e:acme corp": "Acme Corp", "e:bob": "Bob",
    ...                     "e:priyanka": "Priyanka", "e:priyankka": "Priyankka"})
    [('e:acme', 'e:acme corp'), ('e:priyanka', 'e:priyankka')]
    """
    keys = sorted(names)
    norm = {k: normalise_name(names[k]) for k in keys}
    out, taken = [], set()
    for i, a in enumerate(keys):
        if a in taken:
            continue
        for b in keys[i + 1 :]:
            if b in taken:
                continue
            na, nb = norm[a], norm[b]
            if not na or not nb:
                continue
            short, long_ = sorted((na, nb), key=len)
            rest = long_[len(short) :].strip()
            prefix = long_.startswith(short + " ") and rest in _LEGAL_SUFFIXES
            close = min(len(na), len(nb)) >= 5 and SequenceMatcher(None, na, nb).ratio() >= min_ratio
            if na == nb or prefix or close:
                out.append((a, b))
                taken.add(b)
    return out


def _live_children(graph: MemoryGraph, node_id: str, kind: NodeKind) -> list[Node]:
    return [c for c in graph.children(node_id) if c.kind == kind and c.status != Status.ARCHIVED]


def check_health(
    graph: MemoryGraph,
    vectors_of: VectorsOf,
    *,
    min_cohesion: float,
    max_span_days: float = MAX_SPAN_DAYS,
    max_concept_subtopics: int = 8,
    max_concept_fragments: int = 60,
) -> HealthReport:
    """Read-only diagnosis of one namespace graph.

    Args:
        graph: the namespace graph.
        vectors_of: node ids -> their (unit) vectors, rows in the same order.
        min_cohesion: a subtopic whose fragments sit closer than this to their centroid is
            cohesive; the engine passes the embedder profile's ``subtopic_threshold``, the
            similarity a fragment needs to join a subtopic in the first place.
        max_span_days: a subtopic spanning more is flagged ``long_span``.
        max_concept_subtopics / max_concept_fragments: a concept above either is oversized.
    """
    subs: list[SubtopicIssue] = []
    for s in sorted(graph.nodes(NodeKind.SUBTOPIC), key=lambda n: n.id):
        frags = _live_children(graph, s.id, NodeKind.FRAGMENT)
        if len(frags) < 2:
            continue
        span = span_days([t for f in frags for t in (f.created_at, f.event_time)])
        coh = cohesion(vectors_of([f.id for f in frags]))
        reasons = tuple(
            r for r, bad in (("long_span", span > max_span_days), ("low_cohesion", coh < min_cohesion)) if bad
        )
        if reasons:
            subs.append(SubtopicIssue(s.id, s.label, reasons, round(span, 2), round(coh, 4), len(frags)))
    concepts = []
    for c in sorted(graph.nodes(NodeKind.CONCEPT), key=lambda n: n.id):
        kids = _live_children(graph, c.id, NodeKind.SUBTOPIC)
        n_frag = sum(len(_live_children(graph, k.id, NodeKind.FRAGMENT)) for k in kids)
        if len(kids) > max_concept_subtopics or n_frag > max_concept_fragments:
            concepts.append(ConceptIssue(c.id, c.label, len(kids), n_frag))
    orphans = tuple(
        sorted(
            f.id
            for f in graph.nodes(NodeKind.FRAGMENT)
            if f.status != Status.ARCHIVED and graph.parent(f.id) is None
        )
    )
    dups = duplicate_entities({e.id: e.label for e in graph.nodes(NodeKind.ENTITY)})
    return HealthReport(graph.namespace, tuple(subs), tuple(concepts), orphans, tuple(dups))


def _repointed(graph: MemoryGraph, e: Edge, src: str, dst: str) -> Edge:
    """``e`` moved to ``src`` -> ``dst`` with its properties: a relation keeps what it was read from
    (``relation_sources``), by which a forget of the last of its messages removes it. Where the
    kept entity holds the same relation, the merged one was read from the messages of both; from
    unknown messages when either is unknown (a relation written before they were recorded)."""
    properties = dict(e.properties)
    prior = graph.edge(src, dst, e.kind, e.label)
    if prior is not None:
        properties = {k: v for k, v in properties.items() if k not in (READ_FROM, READ_COUNTS)}
        properties.update(merged_sources(prior.properties, e.properties))
    return replace(e, src=src, dst=dst, properties=properties)


def _merge_entity(graph: MemoryGraph, keep: str, dup: str) -> None:
    k, d = graph.get(keep), graph.get(dup)
    for e in graph.in_edges(dup):
        if e.src != keep:
            graph.add_edge(_repointed(graph, e, e.src, keep))
    for e in graph.out_edges(dup):
        if e.dst != keep:
            graph.add_edge(_repointed(graph, e, keep, e.dst))
    k.aliases = list(dict.fromkeys(k.aliases + [d.label] + d.aliases))
    graph.remove_node(dup)


def rebalance_graph(
    graph: MemoryGraph,
    report: HealthReport,
    vectors_of: VectorsOf,
    *,
    max_span_days: float = MAX_SPAN_DAYS,
    label: Callable[[list[Node]], str] | None = None,
) -> RebalanceReport:
    """Apply the fixes a :class:`HealthReport` calls for, in place.

    Each flagged subtopic keeps its first group of fragments; every other group moves to a new
    subtopic under the same concept (``long_span``: cut in time, else 2-means). Duplicate
    entities merge into the kept one (edges moved, name kept as an alias). Orphan fragments
    join the most similar subtopic. Oversized concepts are reported, not split: moving
    subtopics between concepts is a judgement for the review hook.
    """
    split, created, attached = [], [], []
    for issue in report.subtopics:
        if not graph.has(issue.node_id):
            continue
        sub = graph.get(issue.node_id)
        frags = sorted(_live_children(graph, sub.id, NodeKind.FRAGMENT), key=lambda f: f.id)
        by = "time" if "long_span" in issue.reasons else "vector"
        groups = plan_split(
            [f.id for f in frags],
            [f.created_at for f in frags],
            vectors_of([f.id for f in frags]),
            max_span_days=max_span_days,
            by=by,
        )
        if len(groups) < 2:
            continue
        concept = graph.parent(sub.id)
        split.append(sub.id)
        for n, group in enumerate(groups[1:], start=1):
            members = [graph.get(f) for f in group]
            nid = f"{sub.id}{SPLIT}{n}"
            while graph.has(nid):
                nid += "'"
            times = [m.created_at for m in members if m.created_at]
            new = Node(
                id=nid,
                kind=NodeKind.SUBTOPIC,
                label=label(members) if label else sub.label,
                namespace=graph.namespace,
                keywords=list(sub.keywords),
                summary="; ".join(m.summary for m in members[-3:]),
                created_at=min(times) if times else sub.created_at,
                event_time=max((m.event_time for m in members if m.event_time), default=sub.event_time),
                properties={SPLIT_FROM: sub.id},
            )
            graph.add_node(new)
            if concept is not None:
                graph.add_edge(Edge(nid, concept.id, EdgeKind.BELONGS_TO, created_at=new.created_at))
            for m in members:
                graph.remove_edge(m.id, sub.id, EdgeKind.BELONGS_TO)
                graph.add_edge(Edge(m.id, nid, EdgeKind.BELONGS_TO, created_at=m.created_at))
            created.append(nid)
        # The subtopic kept tells of the fragments left under it, as the builder's parents do: its
        # summary, its span (a hit's time, recency) and, given a labeller, its label.
        kept = _live_children(graph, sub.id, NodeKind.FRAGMENT)
        sub.summary = "; ".join(m.summary for m in kept[-3:])
        sub.created_at = min((m.created_at for m in kept if m.created_at), default=sub.created_at)
        sub.event_time = max((m.event_time for m in kept if m.event_time), default=sub.event_time)
        if label:
            sub.label = label(kept)
    merged = []
    for keep, dup in report.duplicate_entities:
        if graph.has(keep) and graph.has(dup):
            _merge_entity(graph, keep, dup)
            merged.append((keep, dup))
    subs = [s for s in graph.nodes(NodeKind.SUBTOPIC)]
    for fid in report.orphan_fragments:
        if not subs or not graph.has(fid):
            continue
        fv = vectors_of([fid])
        sv = vectors_of([s.id for s in subs])
        if len(fv) and len(sv) == len(subs):
            best = subs[int(np.argmax(sv @ fv[0]))]
            graph.add_edge(Edge(fid, best.id, EdgeKind.BELONGS_TO, created_at=graph.get(fid).created_at))
            attached.append(fid)
    return RebalanceReport(graph.namespace, tuple(split), tuple(created), tuple(merged), tuple(attached))
