"""Fusion of the two paths: relation hits graded by their match, normalisation, dynamic alpha,
dedupe, top-up, successors.

Pure functions over plain dicts and lists, each small enough to read at a glance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ...errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ALPHA_RULES",
    "NORMALISERS",
    "PLACED_STEP",
    "TIE_SHARE",
    "alpha_for",
    "break_ties",
    "collapse_overlaps",
    "floor_at",
    "fuse",
    "grade_by_match",
    "mmr_order",
    "normaliser",
    "place_successors",
    "semantic_match",
    "steps_under",
    "top_up",
]


def _minmax(scores: dict[str, float]) -> dict[str, float]:
    """Scale to [0, 1]; a single value (or all equal) maps to 1."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi <= lo:
        return {k: 1.0 for k in scores}
    return {k: (v - lo) / (hi - lo) for k, v in scores.items()}


def _zscore(scores: dict[str, float]) -> dict[str, float]:
    """Standardise, then squash through the logistic function into (0, 1)."""
    if not scores:
        return {}
    vals = list(scores.values())
    # fsum: the same mean and spread whatever order the scores were gathered in (it can follow a set's)
    mu = math.fsum(vals) / len(vals)
    sd = math.sqrt(math.fsum((v - mu) ** 2 for v in vals) / len(vals)) or 1.0
    return {k: 1 / (1 + math.exp(-(v - mu) / sd)) for k, v in scores.items()}


def _rank(scores: dict[str, float]) -> dict[str, float]:
    """Best gets 1, worst 1/n: scale-free, so outliers cannot dominate."""
    order = sorted(scores, key=lambda k: (-scores[k], k))
    n = len(order)
    return {k: (n - i) / n for i, k in enumerate(order)}


NORMALISERS: dict[str, Callable[[dict[str, float]], dict[str, float]]] = {
    "minmax": _minmax,
    "zscore": _zscore,
    "rank": _rank,
}


def normaliser(name: str) -> Callable[[dict[str, float]], dict[str, float]]:
    """Normaliser by name.

    >>> normaliser("minmax")({"a": 2.0, "b": 4.0})
    {'a': 0.0, 'b': 1.0}
    >>> normaliser("nope")
    Traceback (most recent call last):
    ...
    mnemis_integrations.errors.ConfigError: unknown normaliser 'nope'; valid: minmax, rank, zscore
    """
    try:
        return NORMALISERS[name]
    except KeyError:
        raise ConfigError(f"unknown normaliser {name!r}; valid: {', '.join(sorted(NORMALISERS))}") from None


def _design_alpha(n_entities: int, n_words: int) -> float:
    """The design's rule: ratio = entities / max(1, words); alpha = min(0.5 + 0.3 * min(ratio, 1), 0.8)."""
    ratio = n_entities / max(1, n_words)
    return min(0.5 + 0.3 * min(ratio, 1.0), 0.8)


ALPHA_RULES = ("design", "relation_favoured", "fixed")


def alpha_for(rule: str, n_entities: int, n_words: int, fixed: float = 0.5) -> float:
    """Weight of the semantic path; the relation path gets ``1 - alpha``.

    'design' applies the design formula to the semantic side, as written; 'relation_favoured'
    gives that same amount to the relation side (the design's prose: more entities, more
    relation weight). Both stay in [0.2, 0.8] and are 0.5 for a query without entities.

    >>> alpha_for("design", 1, 4), alpha_for("relation_favoured", 1, 4), alpha_for("design", 0, 7)
    (0.575, 0.425, 0.5)
    """
    if rule == "design":
        return round(_design_alpha(n_entities, n_words), 6)
    if rule == "relation_favoured":
        return round(1.0 - _design_alpha(n_entities, n_words), 6)
    if rule == "fixed":
        return fixed
    raise ConfigError(f"unknown alpha rule {rule!r}; valid: {', '.join(ALPHA_RULES)}")


def fuse(semantic: dict[str, float], relation: dict[str, float], alpha: float) -> dict[str, float]:
    """``alpha * semantic + (1 - alpha) * relation`` over the union (a missing side counts 0).

    >>> fuse({"a": 1.0, "b": 0.5}, {"b": 1.0}, 0.5)
    {'a': 0.5, 'b': 0.75}
    """
    keys = list(dict.fromkeys(list(semantic) + list(relation)))
    return {k: alpha * semantic.get(k, 0.0) + (1 - alpha) * relation.get(k, 0.0) for k in keys}


def floor_at(fused: dict[str, float], semantic: dict[str, float], share: float) -> dict[str, float]:
    """Each fused score raised to at least ``share`` x the node's semantic score.

    The relation path then adds to what the semantic path finds and never displaces it: a node it
    reaches scores above its semantic share, one it does not reach keeps that share.

    >>> floor_at({"a": 0.5, "b": 0.9}, {"a": 1.0, "b": 0.2}, 0.9)
    {'a': 0.9, 'b': 0.9}
    """
    if share <= 0:
        return dict(fused)
    return {k: max(v, share * semantic.get(k, 0.0)) for k, v in fused.items()}


def grade_by_match(scores: dict[str, float], match: dict[str, float], weight: float) -> dict[str, float]:
    """Scale each relation score by ``(1 - weight) + weight * match`` (match in [0, 1]; none: 0).

    Hop distance alone scores every node around an entity alike; this grades them by how well
    they match the query, so only truly equal nodes tie.

    >>> grade_by_match({"a": 0.5, "b": 0.5}, {"a": 1.0, "b": 0.0}, 0.5)
    {'a': 0.5, 'b': 0.25}
    """
    if weight <= 0:
        return dict(scores)
    return {k: v * ((1 - weight) + weight * min(1.0, max(0.0, match.get(k, 0.0)))) for k, v in scores.items()}


# Weight of the second measure in :func:`break_ties`: smaller than one word's share of any query under a
# thousand words, so it orders only the nodes a term share leaves equal.
TIE_SHARE = 1e-3


def break_ties(
    first: dict[str, float], second: dict[str, float], share: float = TIE_SHARE
) -> dict[str, float]:
    """``first`` (in [0, 1]) with ``second`` (in [0, 1]; missing: 0) weighed in at ``share``, kept in
    [0, 1]: nodes ``first`` scores alike are ordered by ``second``, the others keep their order.

    >>> {k: round(v, 5) for k, v in break_ties({"a": 0.5, "b": 0.5, "c": 1.0}, {"a": 0.2, "b": 0.9}).items()}
    {'a': 0.4997, 'b': 0.5004, 'c': 0.999}
    """
    return {k: (v + share * second.get(k, 0.0)) / (1 + share) for k, v in first.items()}


def semantic_match(raw: dict[str, float], ids: Iterable[str]) -> dict[str, float]:
    """Node id -> its raw similarity min-max scaled over ``ids`` (1: the best of them; all 1 when
    equal). ``raw``: the semantic path's; an id it did not score (outside a large graph's funnel)
    gets no match, so :func:`grade_by_match` counts it as matching least.

    >>> semantic_match({"a": 0.8, "b": 0.9, "c": 0.85}, ["a", "b"])
    {'a': 0.0, 'b': 1.0}
    """
    vals = {i: raw[i] for i in ids if i in raw}
    if not vals:
        return {}
    lo, hi = min(vals.values()), max(vals.values())
    return {i: (v - lo) / (hi - lo) if hi > lo else 1.0 for i, v in vals.items()}


def collapse_overlaps(ranked: list[str], sources: dict[str, frozenset[str]]) -> list[str]:
    """Drop a hit whose messages are all already shown by better hits (overlapping content).

    Hits with no messages (concept and subtopic overviews) are kept.

    >>> collapse_overlaps(
    ...     ["a", "b", "c"], {"a": frozenset({"m1", "m2"}), "b": frozenset({"m2"}), "c": frozenset()}
    ... )
    ['a', 'c']
    """
    shown: set[str] = set()
    out = []
    for k in ranked:
        s = sources.get(k, frozenset())
        if s and s <= shown:
            continue
        shown |= s
        out.append(k)
    return out


def top_up(chosen: list[str], backup: Iterable[str], minimum: int) -> tuple[list[str], list[str]]:
    """Add from ``backup`` (best first) until ``chosen`` holds ``minimum``; returns (all, added).

    >>> top_up(["a"], ["a", "b", "c"], 2)
    (['a', 'b'], ['b'])
    """
    out, added = list(chosen), []
    seen = set(out)
    for k in backup:
        if len(out) >= minimum:
            break
        if k not in seen:
            out.append(k)
            added.append(k)
            seen.add(k)
    return out, added


def place_successors(
    ranked: list[str], successors: dict[str, list[str]], leads: Callable[[str, str], bool] | None = None
) -> tuple[list[str], set[str]]:
    """Put each superseded hit's current successor(s) directly before it.

    Returns the new order and the ids shown as successors: those that entered or moved, and
    those already ranked above what they replace that ``leads`` lets go before it (one that may
    not is no placed successor: its link says nothing of why either hit is shown where it is). The
    successor ranks above what it replaced, so the reader meets the current state first.

    ``leads(successor, superseded)``: whether that successor goes before that hit (``None``: every
    one does). One that does not keeps its own place, or comes after the ranked hits when it is
    not one of them: still returned, the timeline complete, without taking a first place.

    >>> place_successors(["x", "old", "y", "new"], {"old": ["new"]})
    (['x', 'new', 'old', 'y'], {'new'})
    >>> place_successors(["new", "x", "old"], {"old": ["new"]})
    (['new', 'x', 'old'], {'new'})
    >>> place_successors(["old", "y"], {"old": ["new"]}, lambda new, old: False)
    (['old', 'y', 'new'], set())
    """
    out: list[str] = []
    placed: set[str] = set()
    moved: set[str] = set()
    after: list[str] = []
    for k in ranked:
        if k in placed:
            continue
        for s in successors.get(k, []):
            if s in placed:
                if leads is None or leads(s, k):
                    moved.add(s)  # already ranked above what it replaces
            elif leads is None or leads(s, k):
                moved.add(s)
                out.append(s)
                placed.add(s)
            elif s not in ranked:
                after.append(s)
        out.append(k)
        placed.add(k)
    out += [s for s in dict.fromkeys(after) if s not in placed]
    return out, moved


def mmr_order(
    ranked: list[str], scores: dict[str, float], vectors: np.ndarray, weight: float, limit: int
) -> list[str]:
    """Greedy maximal marginal relevance over the first ``limit`` of ``ranked``.

    ``vectors`` holds one row per id of ``ranked[:limit]``, L2-normalised. Each step takes the
    candidate maximising ``score - weight * max cosine to the chosen``; the tail keeps its order.

    >>> import numpy as np
    >>> v = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> mmr_order(["a", "b", "c"], {"a": 1.0, "b": 0.9, "c": 0.8}, v, 0.5, 3)
    ['a', 'c', 'b']
    """
    import numpy as np

    head = ranked[:limit]
    if weight <= 0 or len(head) < 3:
        return list(ranked)
    sims = vectors @ vectors.T
    base = np.array([scores[i] for i in head])
    chosen: list[int] = []
    best_sim = np.full(len(head), -np.inf)
    left = set(range(len(head)))
    while left:
        idx = sorted(left)
        penalty = np.where(np.isfinite(best_sim[idx]), best_sim[idx], 0.0)
        gain = base[idx] - weight * penalty
        pick = idx[int(np.argmax(gain))]
        chosen.append(pick)
        left.remove(pick)
        best_sim = np.maximum(best_sim, sims[pick])
    return [head[i] for i in chosen] + ranked[limit:]


# A run of hits placed under one score reads in steps of at most this share of the fused scale
# ([0, 1] whatever the embedder): close under the score they are placed at, yet apart at three decimals.
PLACED_STEP = 0.01


def steps_under(top: float, floor: float, n: int) -> list[float]:
    """``n`` falling scores under ``top`` and above ``floor``, evenly apart, at most ``PLACED_STEP``.

    >>> [round(x, 3) for x in steps_under(0.9, 0.3, 2)], [round(x, 3) for x in steps_under(0.9, 0.88, 3)]
    ([0.89, 0.88], [0.895, 0.89, 0.885])
    """
    step = min((top - floor) / (n + 1), PLACED_STEP)
    return [top - j * step for j in range(1, n + 1)]
