"""Path 2, the structured relation path: entities parsed from the query, then a
bounded traversal over high-value edge kinds, scored by hit count and distance decay."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

import networkx as nx

from ...errors import ConfigError
from ..config import RelationConfig
from ..model import EdgeKind, NodeKind
from ..state import NamespaceState
from ..text import content_words
from .cache import fragment_count, is_large, memo

__all__ = [
    "DECAYS",
    "RelationResult",
    "bridged",
    "decay",
    "relation_path",
    "specific_entities",
    "term_match",
]


def _inverse(d: int) -> float:
    """The design's curve, 1 / (1 + d)."""
    return 1.0 / (1.0 + d)


def _exponential(d: int) -> float:
    return 0.5**d


def _none(d: int) -> float:
    return 1.0


DECAYS = {"inverse": _inverse, "exponential": _exponential, "none": _none}


def decay(name: str):
    """Distance-decay function by name.

    >>> decay("inverse")(1), decay("exponential")(2)
    (0.5, 0.25)
    """
    try:
        return DECAYS[name]
    except KeyError:
        raise ConfigError(f"unknown decay {name!r}; valid: {', '.join(sorted(DECAYS))}") from None


@dataclass
class RelationResult:
    seeds: dict[str, float]  # entity id -> weight
    scores: dict[str, float]  # node id -> raw relation score
    distance: dict[str, int]  # node id -> nearest distance from any seed
    n_entities_in_query: int  # entities named by the query, common ones included


def _fade(st: NamespaceState, cfg: RelationConfig):
    """Node id -> half-life weight of its age (maintenance.decay); constant 1.0 when decay is off."""
    if cfg.decay_half_life_days is None:
        return lambda _nid: 1.0
    from ..maintenance.decay import age_days, half_life_weight

    def newest_event():
        return max((n.event_time for n in st.graph.nodes() if n.event_time), default=None)

    newest = memo(st, "newest_event", None, newest_event) if is_large(st) else newest_event()
    return lambda nid: half_life_weight(
        age_days(st.graph.get(nid).event_time, newest), cfg.decay_half_life_days
    )


def bfs_layers(
    g: nx.MultiDiGraph, source: str, kinds: Iterable[EdgeKind | str], max_depth: int
) -> Iterator[list[str]]:
    """Breadth-first layers from ``source`` over edges of the given kinds, both directions,
    up to ``max_depth``: the layers ``nx.bfs_layers(MemoryGraph.edge_view(kinds), [source])``
    gives, without building a filtered view (which re-filters every edge on every step).

    >>> from mnemis_integrations.core.graph import MemoryGraph
    >>> from mnemis_integrations.core.model import Edge, Node
    >>> m = MemoryGraph("u")
    >>> for i in "abcd": m.add_node(Node(i, NodeKind.FRAGMENT, i, "u"))
    >>> m.add_edge(Edge("a", "b", EdgeKind.MENTIONS)); m.add_edge(Edge("c", "b", EdgeKind.BELONGS_TO))
    >>> m.add_edge(Edge("c", "d", EdgeKind.CONTRADICTS))
    >>> list(bfs_layers(m.g, "a", [EdgeKind.MENTIONS, EdgeKind.BELONGS_TO], 5))
    [['a'], ['b'], ['c']]
    """
    wanted = {k.value if isinstance(k, EdgeKind) else str(k) for k in kinds}
    # A key with no ":" is its own kind: found among these, an edge needs no splitting of its keys.
    plain = {k for k in wanted if ":" not in k}
    succ, pred = g._succ, g._pred  # adjacency dicts: node -> neighbour -> {edge key: data}
    seen = {source}
    layer = [source]
    depth = 0
    while layer:
        yield layer
        if depth >= max_depth:
            return
        nxt = []
        for u in layer:
            for adj in (succ[u], pred[u]):
                for v, keyed in adj.items():
                    if v not in seen and (
                        not plain.isdisjoint(keyed) or any(key.split(":", 1)[0] in wanted for key in keyed)
                    ):
                        seen.add(v)
                        nxt.append(v)
        layer = nxt
        depth += 1


def specific_entities(st: NamespaceState, fid: str, max_fragments: int) -> list[str]:
    """The entities fragment ``fid`` mentions that at most ``max_fragments`` fragments mention:
    "Highland", not a speaker."""
    # Counted once per write version: a common entity (a speaker) is passed over without walking
    # its thousands of mentions on every query.
    counts = memo(st, "entity_counts", None, st.entity_fragment_counts)
    return [
        e.dst for e in st.graph.out_edges(fid, EdgeKind.MENTIONS) if counts.get(e.dst, 0) <= max_fragments
    ]


def bridged(
    st: NamespaceState, sources: Mapping[str, float], allowed: Collection[str], max_fragments: int
) -> dict[str, float]:
    """Fragment id -> the best score among ``sources`` (fragment id -> score) it shares a specific
    entity with: one mentioned by at most ``max_fragments`` fragments. The sources themselves and
    fragments outside ``allowed`` are left out.

    The query names no entity in most relational questions ("the sibling who helped with the van");
    the best hits do, and the rest of the answer is often where those entities come up again.
    """
    out: dict[str, float] = {}
    for src, score in sources.items():
        for entity in specific_entities(st, src, max_fragments):
            for fid in (e.src for e in st.graph.in_edges(entity, EdgeKind.MENTIONS)):
                if fid not in sources and fid in allowed and st.node(fid).kind == NodeKind.FRAGMENT:
                    out[fid] = max(out.get(fid, 0.0), score)
    return out


def relation_path(st: NamespaceState, query: str, cfg: RelationConfig, allowed: set[str]) -> RelationResult:
    found = st.entities.find_in(query, cfg.fuzzy_min_ratio)  # reads only the names the query can match
    if not found:
        return RelationResult({}, {}, {}, 0)
    counts = memo(st, "entity_counts", None, st.entity_fragment_counts)
    n_frag = fragment_count(st)
    seeds: dict[str, float] = {}
    for eid, quality in found.items():
        df = counts.get(eid, 0)
        if df == 0 or df / n_frag > cfg.max_entity_share:
            continue  # an entity in most fragments (a speaker, say) points nowhere in particular
        # Specificity in [0, 1]: an entity in one fragment weighs 1, one in every fragment ~0.
        seeds[eid] = quality * math.log(1 + n_frag / df) / math.log(1 + n_frag)
    if not seeds:
        return RelationResult({}, {}, {}, len(found))
    f = decay(cfg.decay)
    scores: dict[str, float] = {}
    dist: dict[str, int] = {}
    hierarchy = (NodeKind.FRAGMENT, NodeKind.SUBTOPIC, NodeKind.CONCEPT)
    fade = _fade(st, cfg)  # optional forgetting curve (issue #7); 1.0 for every node when off
    for eid, w in seeds.items():
        for d, layer in enumerate(bfs_layers(st.graph.g, eid, cfg.edge_kinds, cfg.max_hops)):
            if d > cfg.max_hops:
                break
            if d == 0:
                continue
            share = w * f(d)  # the same for the whole layer
            for nid in layer:
                if nid not in allowed or st.node(nid).kind not in hierarchy:
                    continue
                scores[nid] = scores.get(nid, 0.0) + share * fade(nid)
                dist[nid] = min(dist.get(nid, d), d)
    if cfg.scale == "absolute":
        top = f(1) * len(seeds)
        scores = {k: min(1.0, v / top) for k, v in scores.items()}
    return RelationResult(seeds, scores, dist, len(found))


def node_words(st: NamespaceState, nid: str) -> frozenset[str]:
    """A node's content words: a fragment's messages, or a parent's label and summary; tokenised
    once per write version (the grading here and search's newer-first ordering both read them)."""
    return _node_words(st, memo(st, "node_words", None, dict), nid)


def _node_words(st: NamespaceState, table: dict[str, frozenset[str]], nid: str) -> frozenset[str]:
    held = table.get(nid)
    if held is None:
        node = st.graph.get(nid)
        if node.kind == NodeKind.FRAGMENT:
            text = st.fragment_text(nid)
        else:
            text = f"{node.label} {node.summary}"
        held = table[nid] = frozenset(content_words(text))
    return held


def term_match(st: NamespaceState, query: str, ids: Iterable[str]) -> dict[str, float]:
    """Node id -> share of the query's content words its text holds (a fragment: its messages;
    a subtopic or concept: its label and summary)."""
    words = set(content_words(query))
    if not words:
        return dict.fromkeys(ids, 0.0)
    table = memo(st, "node_words", None, dict)  # looked up once for all the ids
    return {nid: round(len(words & _node_words(st, table, nid)) / len(words), 6) for nid in ids}
