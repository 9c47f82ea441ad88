"""Dual-path search over one namespace: both paths, fusion, and the result rules of SPEC §4."""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ..builder.updates import candidate_scores, gate_passed, later_neighbours
from ..changes import asks, has_change_cue, states_change, states_decision
from ..config import MemoryConfig
from ..embedders import EmbedderProfile
from ..filters import MetadataFilter
from ..maintenance.supersede import REPLACED, REPLACED_BY, replaces
from ..model import EdgeKind, NodeKind, Status, time_order
from ..state import NamespaceState
from ..temporal import is_overview, status_at, visible_successors
from ..text import content_words
from .cache import PathCache, fragment_count, fragment_ids, is_large, memo
from .fusion import (
    alpha_for,
    break_ties,
    collapse_overlaps,
    fuse,
    grade_by_match,
    mmr_order,
    normaliser,
    place_successors,
    semantic_match,
    top_up,
)
from .relation import RelationResult, bridged, node_words, relation_path, specific_entities, term_match
from .render import render
from .results import MemoryHit, Via, metadata_of, said_last
from .scope import Scope, scope_of
from .semantic import SemanticResult, semantic_path

__all__ = ["dual_path_search"]

_QWORDS = re.compile(r"[A-Za-z0-9'’]+|[\u4e00-\u9fff]{1,2}")
_HIERARCHY = (NodeKind.CONCEPT, NodeKind.SUBTOPIC, NodeKind.FRAGMENT)


def _visible(
    st: NamespaceState, as_of: datetime | None, include_archived: bool
) -> tuple[set[str], dict[str, Status]]:
    """Hierarchy nodes a search may return, and each one's status at ``as_of``."""
    # Validity intervals and compaction: see maintenance.supersede.status_at (issue #7).
    allowed, status = set(), {}
    for n in st.graph.nodes():
        s = status_at(st.graph, n, as_of, include_archived)
        if s is not None:
            allowed.add(n.id)
            status[n.id] = s
    return allowed, status


def _vagueness(st: NamespaceState, query: str) -> float:
    """1 for a query with no specific term ("how did that thing end up?"), 1/(1+n) with n specific terms.

    A term is specific when at most a tenth of the fragments hold it: such a query names what it wants,
    so recency should not reorder its answers (on LoCoMo dev a flat recency weight cost 2 points of
    multi-hop recall); a vague query gets the full recency preference.
    """
    n_frag = fragment_count(st)
    specific = {t for t in content_words(query) if 0 < st.df.get(t, 0) <= max(1, n_frag // 10)}
    return 1.0 / (1 + len(specific))


def _named_speakers(st: NamespaceState, query: str) -> frozenset[str]:
    """Speakers the query names ("What books has John read?"): their own words are the likely evidence."""
    speakers = memo(st, "speakers", None, lambda: frozenset(m.speaker for m in st.messages.values()))
    low = query.lower()
    return frozenset(s for s in speakers if s and re.search(rf"(?<!\w){re.escape(s.lower())}(?!\w)", low))


def _focus(
    st: NamespaceState, shown: tuple[str, ...], scores: dict[str, float], named: frozenset[str], margin: float
) -> tuple[str, ...]:
    """A fragment's messages in the order a budget keeps them: what a named speaker states first, then by
    match, unless another speaker's best message matches better by more than ``margin``: that one leads.

    On LoCoMo dev, putting the named speaker's messages first added 1.4 points of recall at 512 tokens.
    But a question may name the wrong person ("What did Caroline realize after her charity race?",
    when Melanie ran it), or the named one only asked ("What made you pick it?") and the answer is the
    other's: there the named speaker's best message matches far worse, and showing it alone under a
    small budget hides the answer. A named speaker's own question says nothing of them, so it takes
    its place by match among the rest.
    """

    def states(m: str) -> bool:
        msg = st.messages[m]
        return msg.speaker in named and not asks(msg.text)

    order = tuple(sorted(shown, key=lambda m: (not states(m), -scores.get(m, 0.0))))
    if not named or not order or st.messages[order[0]].speaker not in named:
        return order
    other = next((m for m in order if st.messages[m].speaker not in named), None)
    if other is None or scores.get(other, 0.0) <= scores.get(order[0], 0.0) + margin:
        return order
    return (other,) + tuple(m for m in order if m != other)


def _said_by(st: NamespaceState, node, as_of: datetime | None) -> set[str] | None:
    """A fragment's messages said by ``as_of`` (undated ones included): a time-travel answer shows
    no text from after its moment, even when the fragment grew later. ``None``: show them all."""
    if as_of is None or node.kind != NodeKind.FRAGMENT:
        return None
    said = {m for m in node.source_ids if (t := st.messages[m].timestamp) is None or t <= as_of}
    return said or None


def _recency(st: NamespaceState, ids: list[str]) -> dict[str, float]:
    times = {i: st.node(i).event_time for i in ids}
    known = sorted({t for t in times.values() if t is not None})
    if len(known) < 2:
        return {i: 0.0 for i in ids}
    rank = {t: r / (len(known) - 1) for r, t in enumerate(known)}
    return {i: rank.get(t, 0.0) if t else 0.0 for i, t in times.items()}


@dataclass(frozen=True)
class _Query:
    """One search: its inputs and what it may see, read by every stage."""

    st: NamespaceState
    text: str
    qvec: np.ndarray
    k: int
    config: MemoryConfig
    profile: EmbedderProfile
    as_of: datetime | None
    include_archived: bool
    cache: PathCache | None
    allowed: set[str]  # the hierarchy nodes it may return
    status: dict[str, Status]  # each allowed node's status at as_of
    scope: Scope | None  # a metadata filter's scope; None without a filter
    speakers: frozenset[str]  # the speakers the query names

    @property
    def visible_key(self) -> tuple[datetime | None, bool]:
        return (self.as_of, self.include_archived)


@dataclass
class _Fused:
    scores: dict[str, float]  # node id -> fused score, parent weight applied
    semantic: dict[str, float]  # node id -> normalised semantic path score
    relation: dict[str, float]  # node id -> relation path score on the fusion scale
    fallback: bool  # the relation path found too little: the semantic path alone decides
    bridged: set[str] = field(default_factory=set)  # raised by sharing an entity with a first hit
    continued: set[str] = field(default_factory=set)  # raised as the next stretch after a first hit
    # held at a lending rule's ceiling: node id -> (the ceiling, what it would have been lent)
    capped: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass
class _Ranking:
    ids: list[str]  # the hits, in order
    scores: list[float]  # each hit's score as shown, before clamping
    supplemented: list[str]  # topped up from the semantic backup to reach min_results
    moved: set[str]  # successors placed next to the superseded hit they replace
    lifted: set[str] = field(default_factory=set)  # newer hits placed before an older hit they restate
    attached: set[str] = field(default_factory=set)  # successors shown after the hits, unranked themselves
    judged: set[str] = field(default_factory=set)  # of ``moved``, placed only by a search-time judgement


def dual_path_search(
    st: NamespaceState,
    query: str,
    qvec: np.ndarray,
    k: int,
    config: MemoryConfig,
    profile: EmbedderProfile,
    *,
    as_of: datetime | None = None,
    include_archived: bool = False,
    cache: PathCache | None = None,
    filter: MetadataFilter | None = None,
) -> list[MemoryHit]:
    """The ``k`` best hits for ``query`` in ``st`` (SPEC §4), in named stages:

    1. ``_visible_set``: the nodes the search may return (their status at ``as_of``, archived ones
       only with ``include_archived``), narrowed to a ``filter``'s scope; none: no hits.
    2. ``_run_paths``: the relation path (entities in the query, traversal) and the semantic path
       (similarity, BM25 without the speakers the query names, hierarchy expansion), each from
       the query alone: neither reads the other's result.
    3. ``_fuse``, where the paths meet: relation hits graded by their match to the query (the
       query's words they hold, or their semantic similarity: a hit the semantic path did not
       score, outside a large graph's funnel, matches least), both paths normalised and mixed by
       alpha (the semantic path alone when the relation path found too little, then with a
       recency preference), non-fragment nodes weighed down; then ``_bridge``: fragments sharing a
       specific entity with the first fragment hits scored up towards them, never above them; and
       ``_continue``: the fragment that follows a first hit whose best match ends it, likewise; hits
       held just under the lenders are spread there by what they would have been lent
       (``_spread_capped``).
    4. ``_rank``: ordered by fused score, overlapping fragments collapsed, diversified, cut to
       ``k``, topped up from the semantic backup to ``min_results``.
    5. ``_place_successors``: a newer hit that restates an older one above it with a change goes
       before it (``_newer_first``); a superseded hit is preceded by the nodes that replace it when
       the update is about what the query matched, else they keep their own rank; for a question
       that asks for the end state the first few fragment hits read newest first, and for any other
       question not about the past a newer hit naming the same specific entity as an older one goes
       before it (``_state_in_force_first``, each keeping its score); otherwise scores kept non-increasing,
       a placed hit's run stepped down after it (``_spread_placed``).
    6. ``_to_hits``: each node rendered as a :class:`MemoryHit` (text, sources, via, focus; a linked
       pair near the top leads with the messages its link names: ``_link_messages``).
    """
    allowed, status, scope = _visible_set(st, as_of, include_archived, filter)
    if not allowed:
        return []
    speakers = _named_speakers(st, query)
    q = _Query(
        st, query, qvec, k, config, profile, as_of, include_archived, cache, allowed, status, scope, speakers
    )
    rel, sem = _run_paths(q)
    fused = _fuse(q, rel, sem)
    _bridge(q, fused)
    _continue(q, fused, sem)
    _spread_capped(fused)
    ranked, supplemented = _rank(q, fused, sem)
    ranking = _place_successors(q, ranked, fused, supplemented, sem.message_scores)
    return _to_hits(q, ranking, fused, rel, sem)


def _visible_set(
    st: NamespaceState, as_of: datetime | None, include_archived: bool, filter: MetadataFilter | None
) -> tuple[set[str], dict[str, Status], Scope | None]:
    # The visible set only changes with a write: computed once per version (the semantic path's
    # layout of it too, which keeps its order).
    allowed, status = memo(
        st, "visible", (as_of, include_archived), lambda: _visible(st, as_of, include_archived)
    )
    scope = scope_of(st, filter, as_of) if filter is not None else None
    if scope is not None:
        allowed = allowed & scope.nodes
    return allowed, status, scope


def _run_paths(q: _Query) -> tuple[RelationResult, SemanticResult]:
    """Both paths, each from the query alone: neither reads the other's result (either could run
    alone, or both at once), they meet in ``_fuse``."""
    cfg = q.config
    threshold = cfg.semantic.threshold if cfg.semantic.threshold is not None else q.profile.semantic_threshold
    rel = relation_path(q.st, q.text, cfg.relation, q.allowed)
    sem = semantic_path(
        q.st,
        q.qvec,
        q.text,
        cfg.semantic,
        threshold,
        q.allowed,
        speakers=q.speakers,
        messages=q.scope.messages if q.scope is not None else _said_by_then(q.st, q.as_of),
        visible_key=q.visible_key if q.scope is None else None,
    )
    return rel, sem


def _said_by_then(st: NamespaceState, as_of: datetime | None) -> frozenset[str] | None:
    """The messages said by ``as_of`` (undated ones included), the only message-level evidence a
    time-travel search may be found by, as a filter's scope is (``scope.scope_of``): a fragment that
    grew later is not found by what it was told after the moment. ``None`` without ``as_of``."""
    if as_of is None:
        return None

    def said() -> frozenset[str]:
        return frozenset(m.id for m in st.messages.values() if m.timestamp is None or m.timestamp <= as_of)

    return memo(st, "said_by", as_of, said) if is_large(st) else said()


def _fuse(q: _Query, rel: RelationResult, sem: SemanticResult) -> _Fused:
    """Both paths on one scale; grades ``rel.scores`` in place (the hits' ``via`` reads them)."""
    cfg, st = q.config, q.st
    if cfg.relation.match_weight > 0 and rel.scores:
        if cfg.relation.match_by == "terms":
            # A term share moves in steps of one query word: nodes holding as many words, at the same
            # distance from the same entities, would tie; their similarity to the query orders them.
            match = break_ties(term_match(st, q.text, rel.scores), semantic_match(sem.raw, rel.scores))
        else:
            match = semantic_match(sem.raw, rel.scores)
        rel.scores = grade_by_match(rel.scores, match, cfg.relation.match_weight)
    norm = normaliser(cfg.fusion.normaliser)
    sem_n = norm(sem.scores)
    rel_n = rel.scores if cfg.relation.scale == "absolute" else norm(rel.scores)
    fallback = not rel.seeds or len(rel.scores) < cfg.relation.min_hits
    if fallback:
        alpha = 1.0
    else:
        n_words = len(_QWORDS.findall(q.text))
        alpha = alpha_for(cfg.fusion.alpha_rule, rel.n_entities_in_query, n_words, cfg.fusion.fixed_alpha)
    fused = fuse(sem_n, rel_n, alpha)
    if fallback and cfg.fusion.recency_weight > 0:
        # Prefer the most recent nodes, so a stale fact is never presented as the current state.
        rec = _recency(st, list(fused))
        w = cfg.fusion.recency_weight * _vagueness(st, q.text)
        fused = {i: (1 - w) * s + w * rec[i] for i, s in fused.items()}
    fragments = fragment_ids(st)
    for nid in fused:
        if nid not in fragments:
            fused[nid] *= cfg.fusion.parent_weight
    return _Fused(fused, sem_n, rel_n, fallback)


def _lenders(st: NamespaceState, scores: dict[str, float], w: float, n: int) -> tuple[list[str], float]:
    """The ``n`` best-scoring fragment ids, in the order ``_rank`` gives them, and the ceiling of
    what they lend: just under the last of them, so they keep their places. No lenders when ``w``
    or ``n`` turns the step off."""
    if w <= 0 or n <= 0:
        return [], 0.0
    fragments = fragment_ids(st)
    first = heapq.nsmallest(n, (i for i in scores if i in fragments), key=lambda i: (-scores[i], i))
    return first, float(np.nextafter(scores[first[-1]], -np.inf)) if first else 0.0


def _lend(fused: _Fused, nid: str, lent: float, w: float, ceiling: float) -> bool:
    """Score ``nid`` up to ``w`` x ``lent`` + (1 - ``w``) x its own, at most ``ceiling``: True if it rose.
    Fragments reached the same way stay ordered by their own match; one held at the ceiling is
    remembered with what it would have been lent (``_spread_capped``)."""
    scores = fused.scores
    own = scores.get(nid, 0.0)
    wished = w * lent + (1 - w) * own
    raised = min(wished, ceiling)
    if raised <= own:
        return False
    scores[nid] = raised
    if wished > ceiling:
        fused.capped[nid] = (ceiling, max(wished, fused.capped.get(nid, (0.0, 0.0))[1]))
    else:
        fused.capped.pop(nid, None)
    return True


def _spread_capped(fused: _Fused) -> None:
    """Hits held at a lending rule's ceiling would all read one score, just under the last hit that
    lends, and follow each other in id order. Each group held at one ceiling is spread instead, in
    the order of what they would have been lent, in even steps under the ceiling and above the next
    score below it (``_steps_under``): their places among the other hits do not change, and their
    scores rank them. Updates ``fused`` in place."""
    scores = fused.scores
    groups: dict[float, list[str]] = {}
    for nid, (ceiling, _wished) in fused.capped.items():
        if scores.get(nid) == ceiling:
            groups.setdefault(ceiling, []).append(nid)
    for ceiling in sorted(groups, reverse=True):
        group = sorted(groups[ceiling], key=lambda i: (-fused.capped[i][1], i))
        held = set(group)
        below = max((s for i, s in scores.items() if s < ceiling and i not in held), default=0.0)
        for nid, score in zip(group, _steps_under(ceiling, below, len(group)), strict=True):
            scores[nid] = score


# A run of hits placed under one score reads in steps of at most this share of the fused scale
# ([0, 1] whatever the embedder): close under the score they are placed at, yet apart at three decimals.
PLACED_STEP = 0.01


def _steps_under(top: float, floor: float, n: int) -> list[float]:
    """``n`` falling scores under ``top`` and above ``floor``, evenly apart, at most ``PLACED_STEP``.

    >>> [round(x, 3) for x in _steps_under(0.9, 0.3, 2)], [round(x, 3) for x in _steps_under(0.9, 0.88, 3)]
    ([0.89, 0.88], [0.895, 0.89, 0.885])
    """
    step = min((top - floor) / (n + 1), PLACED_STEP)
    return [top - j * step for j in range(1, n + 1)]


def _bridge(q: _Query, fused: _Fused) -> None:
    """The first ``relation.bridge_hits`` fragment hits lend their specific entities
    (:func:`~.relation.bridged`): a fragment that shares one scores up to ``w`` x that hit's score
    + (1 - ``w``) x its own (``w``: ``relation.bridge_weight``; :func:`_lend`), never above the hits
    that lent the entities. Updates ``fused`` in place."""
    cfg, st, scores = q.config.relation, q.st, fused.scores
    first, ceiling = _lenders(st, scores, cfg.bridge_weight, cfg.bridge_hits)
    if not first:
        return
    for fid, lent in bridged(st, {i: scores[i] for i in first}, q.allowed, cfg.bridge_max_fragments).items():
        if _lend(fused, fid, lent, cfg.bridge_weight, ceiling):
            fused.bridged.add(fid)


def _continue(q: _Query, fused: _Fused, sem: SemanticResult) -> None:
    """A fragment ends where the segmenter cut the conversation, not where a matter ends: when one
    of the first ``fusion.continuation_hits`` fragment hits has its best-matching message among its
    last ``continuation_tail``, the reply or the rest of the answer is in the fragment that follows it
    in time (``BuildIndex.following``). That fragment is lent the hit's score as by the bridge
    (:func:`_lend`, ``w``: ``continuation_weight``), never above the hits that lend. Updates
    ``fused`` in place."""
    fcfg, st, scores = q.config.fusion, q.st, fused.scores
    first, ceiling = _lenders(st, scores, fcfg.continuation_weight, fcfg.continuation_hits)
    if not first:
        return
    idx = st.build_index()
    for fid in first:
        said = sorted(st.fragment_messages(fid), key=time_order)
        if not said:
            continue
        best = max(said, key=lambda m: sem.message_scores.get(m.id, 0.0))
        if best not in said[-fcfg.continuation_tail :]:
            continue
        nxt = idx.following(st, fid)
        if nxt is not None and nxt in q.allowed:
            if _lend(fused, nxt, scores[fid], fcfg.continuation_weight, ceiling):
                fused.continued.add(nxt)


def _rank(q: _Query, fused: _Fused, sem: SemanticResult) -> tuple[list[str], list[str]]:
    """The first ``k`` node ids by fused score, and those topped up to reach ``min_results``."""
    st, fcfg, scores = q.st, q.config.fusion, fused.scores
    # Only the head of the order is read: the first k, or the first candidate_factor x k and what
    # follows them up to k more when diversifying (the head is reordered, the rest fills up behind).
    wanted = (fcfg.candidate_factor + 1) * q.k if fcfg.diversity > 0 else q.k
    ranked = _ranked_head(st, scores, wanted, fcfg.collapse_overlap)
    if fcfg.diversity > 0:
        ranked = _diversify(q, ranked, scores)
    ranked = ranked[: q.k]
    # Supplementary recall: never fewer than min_results (k by default) when the memory holds that many.
    minimum = q.k if fcfg.min_results is None else min(fcfg.min_results, q.k)
    # top_up passes over at most the ranked hits before it has added its minimum
    backup = heapq.nsmallest(
        len(ranked) + minimum, (i for i in sem.raw if i in q.allowed), key=lambda i: (-sem.raw[i], i)
    )
    return top_up(ranked, backup, minimum)


def _ranked_head(st: NamespaceState, scores: dict[str, float], n: int, collapse: bool) -> list[str]:
    """At least the first ``n`` ids (all when fewer) of the order by score, equal scores by id, with
    the fragments whose messages better ones all show dropped when ``collapse``: a prefix of that
    whole order, without sorting every scored node."""
    take = 4 * n
    while True:
        head = heapq.nsmallest(take, scores, key=lambda i: (-scores[i], i))
        if collapse:
            sources = {
                i: frozenset(st.node(i).source_ids) if st.node(i).kind == NodeKind.FRAGMENT else frozenset()
                for i in head
            }
            head = collapse_overlaps(head, sources)
        if len(head) >= n or take >= len(scores):
            return head
        take *= 4


def _diversify(q: _Query, ranked: list[str], scores: dict[str, float]) -> list[str]:
    fcfg, vectors = q.config.fusion, q.st.node_vectors
    head = [i for i in ranked[: fcfg.candidate_factor * q.k] if i in vectors]
    vecs = vectors.get_many(head)
    # e5-style embedders share a large common direction; centring spreads cosines so the penalty bites.
    vecs = vecs - vecs.mean(axis=0, keepdims=True)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-9
    return mmr_order(head, scores, vecs, fcfg.diversity, len(head)) + [
        i for i in ranked if i not in set(head)
    ]


# A question about an earlier state ("what was the first plan?") wants the older hit where it ranks.
_ASKS_ABOUT_THE_PAST = re.compile(
    r"\b(?:first|originally|original|initially|initial|before|previous|previously|earlier|used to|"
    r"old|start|started|beginning)\b|最初|原来|一开始|之前|以前|起初|本来",
    re.IGNORECASE,
)


# A question that asks for the end state names it: then the newest restatement wins wherever the
# hierarchy placed it (a signed contract filed under billing, the kick-off under the customer).
# "Actually" / "到底" ask for the value that held in the end, after a quote, an estimate or a misreading
# ("What did Dev's first order actually cost?": there "first" names the order, not an earlier state).
_ASKS_FOR_THE_END = re.compile(
    r"\b(?:in the end|end(?:ed)? up|eventually|finally|final|now|currently|at the moment|these days|"
    r"latest|by now|actually)\b|最后|最终|现在|目前|如今|后来|到头来|到底|实际",
    re.IGNORECASE,
)


def _asks_only_about_the_past(text: str) -> bool:
    """A question about an earlier state that does not also ask where it ended ("what was the first
    plan?", not "what is the date now, and what was it before?": that one wants the state in force
    read first, the earlier one after it)."""
    return bool(_ASKS_ABOUT_THE_PAST.search(text)) and not _ASKS_FOR_THE_END.search(text)


def _newer_first(
    q: _Query,
    ranked: list[str],
    scores: dict[str, float],
    superseded: set[str] | frozenset[str] = frozenset(),
) -> tuple[list[str], set[str]]:
    """Each fragment hit that restates an older fragment hit above it with a change goes just
    before it: the current state first, also where the builder linked no update. Returns the new
    order and the hits moved.

    "Restates with a change": newer, a query word in both, only within ``fusion.newer_first`` of
    the older one's score (a weak hit is not lifted over a strong one), and either in the same
    subtopic with a stated change to the older (:func:`~..changes.states_change`), or, when the
    query asks for the end state ("in the end", "now", "最后") and ``fusion.newer_first_anywhere``
    is on, in any subtopic with a change cue or a decision of its own ("confirmed", "签了"). Hits in
    ``superseded`` (those with a successor to show) are not moved: their link places them, after this.
    """
    margin = q.config.fusion.newer_first
    if margin <= 0 or _asks_only_about_the_past(q.text):
        return ranked, set()
    anywhere = q.config.fusion.newer_first_anywhere and bool(_ASKS_FOR_THE_END.search(q.text))
    st, out = q.st, list(ranked)
    query_words = frozenset(content_words(q.text))
    # Each hit's subtopic, time and words are read once: the pairs to compare grow as k squared.
    placed: dict[str, tuple[str | None, datetime]] = {}  # fragment hit -> (its subtopic, its time)
    for nid in out:
        node = st.node(nid)
        if node.kind == NodeKind.FRAGMENT and node.event_time is not None:
            up = st.graph.parent(nid)
            placed[nid] = (up.id if up is not None else None, node.event_time)
    held: dict[str, frozenset[str]] = {}
    texts: dict[str, str] = {}

    def words(nid: str) -> frozenset[str]:
        if nid not in held:
            held[nid] = query_words & node_words(st, nid)
        return held[nid]

    def text(nid: str) -> str:
        if nid not in texts:
            texts[nid] = " ".join(m.text for m in st.fragment_messages(nid))
        return texts[nid]

    def restates(new: str, old: str) -> bool:
        where, when = placed[new]
        older = placed.get(old)
        if older is None or not (anywhere or older[0] == where):
            return False
        if not (older[1] < when and scores.get(new, 0.0) >= (1 - margin) * scores.get(old, 0.0)):
            return False
        if not words(new) & words(old):
            return False
        if older[0] == where:
            return states_change(text(new), text(old))
        # Across subtopics other values are often other things: only a stated change or decision counts.
        return has_change_cue(text(new)) or states_decision(text(new))

    return _pass_up(out, restates, movable=lambda nid: nid not in superseded and nid in placed)


def _state_in_force_first(
    q: _Query, ranked: list[str], scores: Mapping[str, float], placed: set[str] | frozenset[str] = frozenset()
) -> tuple[list[str], set[str]]:
    """Among the first hits, the newer word on a matter before the older, unless the query asks about
    the past ("first", "之前"). Returns the new order and the hits that moved up (their ``via`` says
    ``newer``).

    When the query asks for the end state ("in the end", "now", "最后"), the fragment hits among the
    first ``fusion.end_state_head`` read newest first, save those ``placed`` already as the newer word
    (a successor, a restatement with a change: ``_place_successors``), which no newer hit passes: for
    such a question the newest of them is the likeliest to hold the state in force, linked by the
    builder or not. Then a newer hit among the first ``fusion.present_state_head`` on the same matter
    as an older one above it (as told below) goes before it, placed hits held the same way. Any other
    question ("How many guests are we expecting?") is read as asking for what holds now too, but only
    a newer hit on the same matter as an older one (naming the same specific thing, or judged to
    replace it: ``_newer_before``) goes before it (among the first
    ``fusion.present_state_head``, within ``fusion.present_state_margin``). Only the
    order they are read in changes: each hit keeps its score, and a token budget, which follows the
    scores, shows the same messages of them as without the rule.
    """
    fcfg = q.config.fusion
    if _asks_only_about_the_past(q.text):
        return ranked, set()
    asks_end = bool(_ASKS_FOR_THE_END.search(q.text))
    head = fcfg.end_state_head if asks_end else fcfg.present_state_head
    if head < 2:
        return ranked, set()
    first = ranked[:head]
    if asks_end:
        reordered = _newer_before(q, first, scores, 1.0, same_entity=False, hold=placed)
        # The current state often ranks just below the head: a newer hit among the first
        # present_state_head on the same matter as an older one above it goes before it too.
        reach = max(head, fcfg.present_state_head)
        first = ranked[:reach]
        reordered = _newer_before(
            q, reordered + ranked[head:reach], scores, 1.0, same_entity=True, hold=placed
        )
    else:
        # Here a placed hit may be passed: holding them lost every question this rule gains (a
        # successor placed by a wrong link is often what the newer hit corrects). A superseded hit lifted
        # past its own successor goes back behind it (`_successors_kept_before`).
        reordered = _newer_before(q, first, scores, fcfg.present_state_margin, same_entity=True)
    lifted = {i for n, i in enumerate(reordered) if n < first.index(i)}
    return reordered + ranked[len(first) :], lifted


def _newer_before(
    q: _Query,
    first: list[str],
    scores: Mapping[str, float],
    margin: float,
    *,
    same_entity: bool,
    hold: set[str] | frozenset[str] = frozenset(),
) -> list[str]:
    """Each dated fragment of ``first`` goes before the first older fragment there that is not in
    ``hold``, outscores it by no more than ``margin`` (its score at least (1 - ``margin``) x that
    one's) and, with ``same_entity``, is on the same matter: it names a specific entity it names too
    (one in at most ``relation.bridge_max_fragments`` fragments: "Highland", not a speaker), or the
    update judge scores one of its messages as replacing one of the older's at least
    ``fusion.present_state_judge`` (a pair the builder found too unsure to link: "Ok. £15 a plot from
    the April renewal" after "the water charge stays at £12 a plot"). Other hits keep their places;
    with ``margin`` 1 and nothing held, the fragments read newest first.

    A subtopic in common is no matter in common: a long conversation's subtopics gather a dozen
    stretches, and ordering those by time cost LoCoMo dev 6 points of MRR (BENCHMARKS.md, fourteenth
    round).
    """
    st = q.st
    dated = [i for i in first if st.node(i).kind == NodeKind.FRAGMENT and st.node(i).event_time is not None]
    cap = q.config.relation.bridge_max_fragments
    named = {i: frozenset(specific_entities(st, i, cap)) for i in dated} if same_entity else {}
    judge_floor = q.config.fusion.present_state_judge

    def same_matter(new: str, old: str) -> bool:
        if named[new] & named[old]:
            return True
        return judge_floor is not None and _judged_to_replace(st, new, old, judge_floor)

    def goes_before(new: str, old: str) -> bool:
        return (
            old not in hold
            and st.node(old).event_time < st.node(new).event_time
            and scores.get(new, 0.0) >= (1 - margin) * scores.get(old, 0.0)
            and (not same_entity or same_matter(new, old))
        )

    out, _ = _pass_up(dated, goes_before)
    fragments, in_order = set(dated), iter(out)
    return [next(in_order) if i in fragments else i for i in first]


def _judged_to_replace(st: NamespaceState, new: str, old: str, floor: float) -> bool:
    """Does the offline update judge score a message of fragment ``new`` as replacing one of ``old``'s
    at least ``floor``?"""
    return _judged_any(st, (m.id for m in st.fragment_messages(new)), set(st.node(old).source_ids), floor)


def _judged_any(st: NamespaceState, news: Iterable[str], olds: set[str], floor: float) -> bool:
    """Does the offline update judge score one of the messages ``news`` as replacing one of ``olds`` at
    least ``floor``?"""
    return any(score >= floor for m in news for o, score in _judged_candidates(st, m).items() if o in olds)


def _judged_candidates(st: NamespaceState, mid: str) -> dict[str, float]:
    """The earlier messages the offline update judge scores message ``mid`` as replacing, with their
    log-odds (``candidate_scores``): judged once per write version, whichever search rule asks."""
    judged = memo(st, "judged_candidates", None, dict)
    if mid not in judged:
        judged[mid] = dict(candidate_scores(st, st.messages[mid]))
    return judged[mid]


def _pass_up(
    order: list[str], passes: Callable[[str, str], bool], movable: Callable[[str], bool] = lambda _: True
) -> tuple[list[str], set[str]]:
    """An insertion pass, top down: each ``movable`` hit goes just before the first hit above it that
    it ``passes`` (``passes(hit, above)``); the others keep their order. Returns the new order and the
    hits that moved."""
    out, moved = list(order), set()
    for j in range(1, len(out)):
        nid = out[j]
        if not movable(nid):
            continue
        above = next((i for i in range(j) if passes(nid, out[i])), None)
        if above is not None:
            out.insert(above, out.pop(j))
            moved.add(nid)
    return out, moved


def _replaced_best_match(q: _Query, old: str, message_scores: Mapping[str, float]) -> bool:
    """Is the superseded hit's best match to the query a message its ``updates`` links replaced? A
    link that names no message (the whole node replaced, as an LLM judges) counts as yes, and so does a
    hit none of whose messages was scored (a large graph's funnel scores only its candidates)."""
    scored = [m for m in q.st.node(old).source_ids if m in message_scores]
    if not scored:
        return True
    best = max(scored, key=lambda m: message_scores[m])
    return any(replaces(e, best) for e in q.st.graph.in_edges(old, EdgeKind.UPDATES))


def _place_successors(
    q: _Query,
    ranked: list[str],
    fused: _Fused,
    supplemented: list[str],
    message_scores: Mapping[str, float] | None = None,
) -> _Ranking:
    """``message_scores``: each message's match to the query, to tell whether an update is about what a
    superseded hit matched (``fusion.successor_lead_share``); ``None``: every successor leads."""
    successors: dict[str, list[str]] = {}
    if q.config.fusion.attach_successors:
        for nid in ranked:
            if q.status.get(nid) == Status.SUPERSEDED:
                succ = visible_successors(q.st.graph, nid, q.allowed)  # issue #7: newest state shown at as_of
                if succ:
                    successors[nid] = succ
    # A superseded hit stays behind its successor, where its link places it, after this.
    ranked, lifted = _newer_first(q, ranked, fused.scores, set(successors))
    share = q.config.fusion.successor_lead_share

    trust_floor, trusted = q.config.fusion.successor_lead_judge, q.config.fusion.successor_lead_judge_below

    def leads(new: str, old: str) -> bool:
        # A fragment holds several matters; its link may concern another than the one the query matched
        # ("keys pushed to 31 May" replacing a line of the fragment a question about the van hit).
        if message_scores is None or _replaced_best_match(q, old, message_scores):
            return True
        new_score, old_score = fused.scores.get(new, 0.0), fused.scores.get(old, 0.0)
        if new_score < share * old_score:
            return False
        return (
            trust_floor is None
            or new_score >= trusted * old_score
            or _link_judged_at_least(q.st, new, old, trust_floor)
        )

    before = set(ranked)
    ranked, moved = place_successors(ranked, successors, leads)
    attached = {nid for nid in ranked if nid not in before and nid not in moved}

    # A hit placed by rule before one that outscored it (a successor before the hit it replaces, a
    # newer statement before the older one) is shown with that hit: it takes the hit's score when its
    # own is lower. Otherwise one weak placed hit near the top capped every score below it (scores
    # stay non-increasing), and the top hits of many evolution questions all read the same.
    own = [float(fused.scores.get(nid, 0.0)) for nid in ranked]
    shown_score = list(own)
    for i in range(len(ranked) - 2, -1, -1):
        if (ranked[i] in moved or ranked[i] in lifted) and shown_score[i] < shown_score[i + 1]:
            shown_score[i] = shown_score[i + 1]
    for i in range(1, len(shown_score)):  # top-ups too are placed by rule: scores stay non-increasing
        shown_score[i] = min(shown_score[i], shown_score[i - 1])
    # The hits a placement made equal then step down after the first, so the scores rank them.
    shown_score = _spread_placed(shown_score, own)
    # After the scores: each hit keeps its own, so a budget still goes by relevance (retrieval.budget).
    shown = dict(zip(ranked, shown_score, strict=True))
    before_rule = {nid: i for i, nid in enumerate(ranked)}
    ranked, newest = _state_in_force_first(q, ranked, fused.scores, moved | lifted)
    ranked = _successors_kept_before(ranked, successors, moved, leads)
    # `via` says "newer" only of a hit still read before where it ranked (one put back behind its own
    # successor may have ended where it began).
    newest = {nid for nid in newest if ranked.index(nid) < before_rule[nid]}
    # Successors judged at search time go before the hit they replace, each hit keeping its score (one
    # new to the hits enters with its own): a budget, which follows scores, shows the same messages.
    judged = _judged_successors(q, ranked, message_scores or {})
    placed: set[str] = set()
    if judged:
        ranked, placed = place_successors(ranked, judged)
        for nid in placed:
            shown.setdefault(nid, float(fused.scores.get(nid, 0.0)))
    scores = [shown[i] for i in ranked]
    return _Ranking(
        ranked, scores, supplemented, moved | placed, lifted | newest, attached, judged=placed - moved
    )


def _link_judged_at_least(st: NamespaceState, new: str, old: str, floor: float) -> bool:
    """Does the offline update judge score the ``updates`` link new -> old, on the messages it names,
    at least ``floor``? A link naming none (an LLM's, the whole node replaced) is trusted."""
    edge = st.graph.edge(new, old, EdgeKind.UPDATES)
    if edge is None or REPLACED not in edge.properties:
        return True
    replacing = (m for m in edge.properties.get(REPLACED_BY, ()) if m in st.messages)
    return _judged_any(st, replacing, set(edge.properties[REPLACED]), floor)


def _successors_kept_before(
    ranked: list[str], successors: Mapping[str, list[str]], moved: set[str], leads: Callable[[str, str], bool]
) -> list[str]:
    """``ranked`` with each successor shown before a superseded hit as its link's (``moved``, and it
    ``leads``) put back before it where a later rule lifted that hit above it. The state-in-force rules lift a
    superseded hit as the newer word (often rightly: its link may be wrong), and it may then pass the
    hit its successor was placed before, ending above the state that replaced it.

    >>> _successors_kept_before(["old", "x", "new"], {"old": ["new"]}, {"new"}, lambda s, o: True)
    ['new', 'old', 'x']
    """
    out = list(ranked)
    for old, succ in successors.items():
        for new in succ:
            if (
                new in moved
                and old in out
                and new in out
                and out.index(new) > out.index(old)
                and leads(new, old)
            ):
                out.remove(new)
                out.insert(out.index(old), new)
    return out


def _judged_successors(
    q: _Query, ranked: list[str], message_scores: Mapping[str, float]
) -> dict[str, list[str]]:
    """Successors the builder was too unsure to link, read where a query meets them: for each active
    dated fragment among the first ``fusion.judged_successor_head`` hits, the active fragment holding
    the later message the offline update judge scores highest as replacing the hit's best match to the
    query, when at least ``fusion.judged_successor_floor``. Not for a question about the past, and with
    ``fusion.judged_successor_questions`` "end_state" only for one that asks for the end state. Returns
    hit -> [its successor], as ``place_successors`` takes them.

    Bounded whatever the namespace's size: the later messages looked at are the replaced message's
    nearest by vector and by word overlap (``builder.updates.later_neighbours``), each judged once per
    write version.
    """
    fcfg = q.config.fusion
    floor = fcfg.judged_successor_floor
    if floor is None or fcfg.judged_successor_head < 1 or _asks_only_about_the_past(q.text):
        return {}
    if fcfg.judged_successor_questions == "end_state" and not _ASKS_FOR_THE_END.search(q.text):
        return {}
    st = q.st
    out: dict[str, list[str]] = {}
    for nid in ranked[: fcfg.judged_successor_head]:
        node = st.node(nid)
        if node.kind != NodeKind.FRAGMENT or node.event_time is None or q.status.get(nid) != Status.ACTIVE:
            continue
        own = set(node.source_ids)
        scored = [m for m in node.source_ids if m in message_scores]
        olds = [max(scored, key=lambda m: (message_scores[m], m))] if scored else list(node.source_ids)
        best: tuple[float, str] | None = None
        for o in olds:

            def visible_later(k: str, said: tuple = time_order(st.messages[o]), own: set = own) -> bool:
                other = st.messages.get(k)
                return (
                    other is not None
                    and k not in own
                    and time_order(other) > said
                    and (q.as_of is None or other.timestamp is None or other.timestamp <= q.as_of)
                    and st.msg_fragment.get(k) in q.allowed
                )

            for k in later_neighbours(st, o, visible_later):
                if not gate_passed(st.messages[k].text, st.messages[o].text):
                    continue
                s = _judged_candidates(st, k).get(o)
                if s is not None and s >= floor and (best is None or (s, k) > best):
                    best = (s, k)
        if best is None:
            continue
        succ = st.msg_fragment[best[1]]
        if q.status.get(succ) == Status.SUPERSEDED:
            newest = visible_successors(st.graph, succ, q.allowed)
            succ = newest[0] if newest else succ
        if succ != nid and q.status.get(succ) == Status.ACTIVE:
            out[nid] = [succ]
    return out


def _spread_placed(shown: list[float], own: list[float]) -> list[float]:
    """Shown scores, non-increasing, with each run of equal ones that a placement made (a member shown
    at another score than its own) stepped down after its first (``_steps_under``, above the next
    lower score): a placed hit and the hit it goes before read in their order, not as one score.
    Scores that are equal on their own stay equal.

    >>> [round(x, 3) for x in _spread_placed([0.8, 0.8, 0.8, 0.5], [0.1, 0.8, 0.8, 0.5])]
    [0.8, 0.79, 0.78, 0.5]
    >>> _spread_placed([0.8, 0.8, 0.5], [0.8, 0.8, 0.5])
    [0.8, 0.8, 0.5]
    """
    out, start = list(shown), 0
    while start < len(out):
        end = start
        while end + 1 < len(out) and out[end + 1] == out[start]:
            end += 1
        if end > start and any(own[i] != shown[i] for i in range(start, end + 1)):
            floor = out[end + 1] if end + 1 < len(out) else 0.0
            out[start + 1 : end + 1] = _steps_under(out[start], floor, end - start)
        start = end + 1
    return out


def _link_messages(q: _Query, ranking: _Ranking) -> dict[str, tuple[str, ...]]:
    """Hit id -> the messages its ``updates`` link names, for each superseded hit among the first
    ``fusion.link_focus_hits`` and the successor placed before it by its link: what was replaced, what
    replaces it.

    A budget narrows each fragment to its best-matching messages; for such a pair these messages
    are the change the reader needs (a fragment's best match may be another matter it also holds).
    Further down a budget keeps one message a hit: swapping it for a linked one at any rank cost
    LoCoMo dev R@2,048 .876 -> .874 (scenario holdout R@512 / 1,024 .903 / .967, against .899 /
    .960 from the first ten hits alone and .892 / .952 without).
    """
    links: dict[str, tuple[str, ...]] = {}
    for nid in ranking.ids[: q.config.fusion.link_focus_hits]:
        if q.status.get(nid) != Status.SUPERSEDED:
            continue
        for edge in q.st.graph.in_edges(nid, EdgeKind.UPDATES):
            # Placed by its link, the successor reads as the update of what the query matched here; one
            # placed only by the search-time judge went before another hit, and its link says nothing of
            # why this one is shown.
            if edge.src in ranking.moved and edge.src not in ranking.judged:
                links[nid] = links.get(nid, ()) + tuple(edge.properties.get(REPLACED, ()))
                links[edge.src] = links.get(edge.src, ()) + tuple(edge.properties.get(REPLACED_BY, ()))
    return links


def _to_hits(
    q: _Query, ranking: _Ranking, fused: _Fused, rel: RelationResult, sem: SemanticResult
) -> list[MemoryHit]:
    hits: list[MemoryHit] = []
    links = _link_messages(q, ranking)
    for nid, score in zip(ranking.ids, ranking.scores, strict=True):
        via = _via(nid, ranking, fused, rel, sem)
        hits.append(_hit(q, nid, score, via, fused, sem, links.get(nid, ())))
    return hits


def _via(
    nid: str, ranking: _Ranking, fused: _Fused, rel: RelationResult, sem: SemanticResult
) -> tuple[Via, ...]:
    via = []
    if nid in sem.scores and nid not in sem.expanded:
        via.append(Via.SEMANTIC)
    if nid in sem.expanded:
        via.append(Via.EXPANSION)
    if nid in rel.scores:
        via.append(Via.RELATION)
    if nid in fused.bridged:
        via.append(Via.BRIDGE)
    if nid in fused.continued:
        via.append(Via.CONTINUATION)
    if fused.fallback and (nid in sem.scores):
        via.append(Via.FALLBACK)
    if nid in ranking.supplemented:
        via.append(Via.SUPPLEMENT)
    if nid in ranking.moved or nid in ranking.attached:
        via.append(Via.SUCCESSOR)
    elif nid in ranking.lifted:
        via.append(Via.NEWER)
    return tuple(via) or (Via.SUPPLEMENT,)


def _hit(
    q: _Query,
    nid: str,
    score: float,
    via: tuple[Via, ...],
    fused: _Fused,
    sem: SemanticResult,
    linked: tuple[str, ...] = (),
) -> MemoryHit:
    st, node = q.st, q.st.node(nid)
    margin = q.config.context.speaker_margin
    path = q.cache.path(st, nid) if q.cache is not None else st.graph.hierarchy_path(nid)
    said = _said_by(st, node, q.as_of) if q.scope is None else q.scope.shown(node)
    order: tuple[str, ...] = ()
    if is_overview(node):  # its messages span conversations: the best-matching ones are shown first
        order = _focus(st, tuple(node.source_ids), sem.message_scores, q.speakers, margin)
    text, shown = render(st, node, path, only=said, as_of=q.as_of, order=order)
    shared, per_message = metadata_of(st.messages[m] for m in shown)
    when = node.event_time
    if said is not None:
        when = said_last((st.messages[m] for m in shown), default=when)
    if node.kind != NodeKind.FRAGMENT:
        focus: tuple[str, ...] = ()
    elif order:
        focus = shown  # an overview: render already put its messages in focus order
    else:
        focus = _focus(st, shown, sem.message_scores, q.speakers, margin)
    if linked:
        # Only a message among the hit's two best matches leads: leading with any linked message
        # (a wrong link's may be about another matter) cost LoCoMo dev R@2,048 .876 -> .873.
        lead = [m for m in focus[:2] if m in linked]
        focus = tuple(lead) + tuple(m for m in focus if m not in lead)
    return MemoryHit(
        node_id=nid,
        kind=node.kind.value,
        text=text,
        source_ids=shown,
        score=round(min(max(score, 0.0), 1.0), 6),
        semantic_score=round(fused.semantic.get(nid, 0.0), 6),
        relation_score=round(fused.relation.get(nid, 0.0), 6),
        via=via,
        path=tuple(path),
        time=when,
        status=q.status.get(nid, node.status).value,
        label=node.label,
        namespace=st.namespace,
        successors=_successors(q, nid),
        focus=focus,
        metadata=shared,
        message_metadata=per_message,
    )


def _successors(q: _Query, nid: str) -> tuple[str, ...]:
    """The nodes that had replaced ``nid`` by ``as_of``, as this search sees them: none while it was
    still in force then. Compaction gives an overview its originals' links, so an archived original
    and its overview both replace ``nid``; only the one this search may show is named (the
    overview, or the original with ``include_archived``)."""
    if q.as_of is not None and q.status.get(nid) != Status.SUPERSEDED:
        return ()
    # q.status holds every node visible at as_of (a later one is not), a filter's scope aside
    return tuple(s.id for s in q.st.graph.successors_of(nid) if s.id in q.status)
