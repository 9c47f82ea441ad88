"""Path 2, the structured relation path: entities parsed from the query, then a
bounded traversal over high-value edge kinds, scored by hit count and distance decay."""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx

from ..config import RelationConfig
from ...errors import ConfigError
from ..model import NodeKind
from ..state import NamespaceState

__all__ = ["RelationResult", "relation_path", "decay", "DECAYS"]


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
    common: tuple[str, ...] = ()  # names of query entities too common to steer (e.g. the speakers)


def _fade(st: NamespaceState, cfg: RelationConfig):
    """Node id -> half-life weight of its age (maintenance.decay); constant 1.0 when decay is off."""
    if cfg.decay_half_life_days is None:
        return lambda _nid: 1.0
    from ..maintenance.decay import age_days, half_life_weight

    newest = max((n.event_time for n in st.graph.nodes() if n.event_time), default=None)
    return lambda nid: half_life_weight(age_days(st.graph.get(nid).event_time, newest), cfg.decay_half_life_days)


def relation_path(st: NamespaceState, query: str, cfg: RelationConfig, allowed: set[str]) -> RelationResult:
    found = st.entities.find_in(query, cfg.fuzzy_min_ratio)
    if not found:
        return RelationResult({}, {}, {}, 0)
    counts = st.entity_fragment_counts()
    n_frag = max(1, len(st.graph.nodes(NodeKind.FRAGMENT)))
    seeds: dict[str, float] = {}
    common = []
    for eid, quality in found.items():
        df = counts.get(eid, 0)
        if df == 0 or df / n_frag > cfg.max_entity_share:
            common.append(st.graph.get(eid).label)
            continue  # an entity in most fragments (a speaker, say) points nowhere in particular
        # Specificity in [0, 1]: an entity in one fragment weighs 1, one in every fragment ~0.
        seeds[eid] = quality * math.log(1 + n_frag / df) / math.log(1 + n_frag)
    if not seeds:
        return RelationResult({}, {}, {}, len(found), tuple(common))
    view = st.graph.edge_view(cfg.edge_kinds)
    f = decay(cfg.decay)
    scores: dict[str, float] = {}
    dist: dict[str, int] = {}
    hierarchy = (NodeKind.FRAGMENT, NodeKind.SUBTOPIC, NodeKind.CONCEPT)
    fade = _fade(st, cfg)  # optional forgetting curve (issue #7); 1.0 for every node when off
    for eid, w in seeds.items():
        for d, layer in enumerate(nx.bfs_layers(view, [eid])):
            if d > cfg.max_hops:
                break
            if d == 0:
                continue
            for nid in layer:
                if nid not in allowed or st.graph.get(nid).kind not in hierarchy:
                    continue
                scores[nid] = scores.get(nid, 0.0) + w * f(d) * fade(nid)
                dist[nid] = min(dist.get(nid, d), d)
    if cfg.scale == "absolute":
        top = f(1) * len(seeds)
        scores = {k: min(1.0, v / top) for k, v in scores.items()}
    return RelationResult(seeds, scores, dist, len(found), tuple(common))
