"""Dual-path search over one namespace: both paths, fusion, ranking, and the hits as shown (SPEC §4);
the rules that put the current state first are :mod:`.present_state`'s."""

from __future__ import annotations

import heapq
import re
from datetime import datetime, timedelta

import numpy as np

from ..changes import asks
from ..config import MemoryConfig
from ..embedders import EmbedderProfile
from ..filters import MetadataFilter
from ..maintenance.supersede import REPLACED, REPLACED_BY
from ..model import EdgeKind, NodeKind, Status, time_order
from ..state import NamespaceState
from ..temporal import is_overview, status_at
from ..text import content_words
from .cache import PathCache, fragment_count, fragment_ids, is_large, memo
from .fusion import (
    alpha_for,
    break_ties,
    collapse_overlaps,
    floor_at,
    fuse,
    grade_by_match,
    mmr_order,
    normaliser,
    semantic_match,
    steps_under,
    top_up,
)
from .periods import named_period
from .present_state import current_state_first
from .relation import RelationResult, bridged, relation_path, term_match
from .render import render
from .results import MemoryHit, Via, metadata_of, said_last
from .scope import Scope, scope_of
from .semantic import SemanticResult, semantic_path
from .stages import Fused, Query, Ranking

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


def speakers_of(st: NamespaceState) -> frozenset[str]:
    """Everyone who has said a message in the namespace (computed once per version)."""
    return memo(st, "speakers", None, lambda: frozenset(m.speaker for m in st.messages.values()))


def _named_speakers(st: NamespaceState, query: str) -> frozenset[str]:
    """Speakers the query names ("What books has John read?"): their own words are the likely evidence."""
    low = query.lower()
    return frozenset(
        s for s in speakers_of(st) if s and re.search(rf"(?<!\w){re.escape(s.lower())}(?!\w)", low)
    )


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


def _replies_after_questions(
    st: NamespaceState, shown: tuple[str, ...], focus: tuple[str, ...]
) -> tuple[str, ...]:
    """``focus`` with each message that asks followed directly by the next message of ``shown`` (the
    fragment's messages in their order) when another speaker said it.

    On LoCoMo dev, 41 of the 96 adversarial evidence turns missing at 256 tokens were the reply, by the
    other speaker, to a question the budget showed ("What made you pick it?" shown, "I chose them 'cause
    they help LGBTQ+ folks" not).
    """
    position = {m: i for i, m in enumerate(shown)}
    placed: dict[str, None] = {}
    for m in focus:
        if m in placed:
            continue
        placed[m] = None
        i = position[m]
        if i + 1 < len(shown) and asks(st.messages[m].text):
            reply = shown[i + 1]
            if reply not in placed and st.messages[reply].speaker != st.messages[m].speaker:
                placed[reply] = None
    return tuple(placed)


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
       recency preference), the fragments said in a period the query names lifted
       (``_said_in_period``), non-fragment nodes weighed down; then ``_bridge``: fragments sharing a
       specific entity with the first fragment hits scored up towards them, never above them; and
       ``_continue``: the fragment that follows a first hit whose best match ends it, likewise; hits
       held just under the lenders are spread there by what they would have been lent
       (``_spread_capped``).
    4. ``_rank``: ordered by fused score, overlapping fragments collapsed, diversified, cut to
       ``k``, topped up from the semantic backup to ``min_results``.
    5. ``current_state_first`` (:mod:`.present_state`): a newer hit that restates an older one with a
       change, and the nodes that replace a superseded hit, go before it when the update is about what
       the query matched; for a question that asks for the end state the first few fragment hits read
       newest first, and for any other question not about the past a newer hit on the same matter as
       an older one goes before it; scores kept non-increasing.
    6. ``_to_hits``: each node rendered as a :class:`MemoryHit` (text, sources, via, focus; a linked
       pair near the top leads with the messages its link names: ``_link_messages``).
    """
    allowed, status, scope = _visible_set(st, as_of, include_archived, filter)
    if not allowed:
        return []
    speakers = _named_speakers(st, query)
    q = Query(
        st, query, qvec, k, config, profile, as_of, include_archived, cache, allowed, status, scope, speakers
    )
    rel, sem = _run_paths(q)
    fused = _fuse(q, rel, sem)
    _bridge(q, fused)
    _continue(q, fused, sem)
    _spread_capped(fused)
    ranked, supplemented = _rank(q, fused, sem)
    ranking = current_state_first(q, ranked, fused, supplemented, sem.message_scores)
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


def _run_paths(q: Query) -> tuple[RelationResult, SemanticResult]:
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


def _fuse(q: Query, rel: RelationResult, sem: SemanticResult) -> Fused:
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
    if alpha < 1:
        fused = floor_at(fused, sem_n, cfg.fusion.semantic_floor)
    if fallback and cfg.fusion.recency_weight > 0:
        # Prefer the most recent nodes, so a stale fact is never presented as the current state.
        rec = _recency(st, list(fused))
        w = cfg.fusion.recency_weight * _vagueness(st, q.text)
        fused = {i: (1 - w) * s + w * rec[i] for i, s in fused.items()}
    fragments = fragment_ids(st)
    dated = _said_in_period(q, fused, fragments)
    for nid in fused:
        if nid not in fragments:
            fused[nid] *= cfg.fusion.parent_weight
    return Fused(fused, sem_n, rel_n, fallback, dated=dated)


def _said_in_period(q: Query, fused: dict[str, float], fragments: frozenset[str] | set[str]) -> set[str]:
    """Lift, in place, the fragments said in the period the query names (``fusion.period_weight``); returns
    them. Every score is scaled alike: when all fragments were said in it, or none, nothing moves."""
    w = q.config.fusion.period_weight
    period = named_period(q.text) if w > 0 else None
    if period is None:
        return set()
    slack = timedelta(days=q.config.fusion.period_slack_days)

    def said_then(nid: str) -> bool:
        return any(
            m.timestamp is not None and period.holds(m.timestamp, slack) for m in q.st.fragment_messages(nid)
        )

    dated = {nid for nid in fused if nid in fragments and said_then(nid)}
    if not dated or all(nid in dated for nid in fused if nid in fragments):
        return set()
    for nid, s in fused.items():
        fused[nid] = (1 - w) * s + (w if nid in dated else 0.0)
    return dated


def _lenders(st: NamespaceState, scores: dict[str, float], w: float, n: int) -> tuple[list[str], float]:
    """The ``n`` best-scoring fragment ids, in the order ``_rank`` gives them, and the ceiling of
    what they lend: just under the last of them, so they keep their places. No lenders when ``w``
    or ``n`` turns the step off."""
    if w <= 0 or n <= 0:
        return [], 0.0
    fragments = fragment_ids(st)
    first = heapq.nsmallest(n, (i for i in scores if i in fragments), key=lambda i: (-scores[i], i))
    return first, float(np.nextafter(scores[first[-1]], -np.inf)) if first else 0.0


def _lend(fused: Fused, nid: str, lent: float, w: float, ceiling: float) -> bool:
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


def _spread_capped(fused: Fused) -> None:
    """Hits held at a lending rule's ceiling would all read one score, just under the last hit that
    lends, and follow each other in id order. Each group held at one ceiling is spread instead, in
    the order of what they would have been lent, in even steps under the ceiling and above the next
    score below it (``steps_under``): their places among the other hits do not change, and their
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
        for nid, score in zip(group, steps_under(ceiling, below, len(group)), strict=True):
            scores[nid] = score


def _bridge(q: Query, fused: Fused) -> None:
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


def _continue(q: Query, fused: Fused, sem: SemanticResult) -> None:
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


def _rank(q: Query, fused: Fused, sem: SemanticResult) -> tuple[list[str], list[str]]:
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


def _diversify(q: Query, ranked: list[str], scores: dict[str, float]) -> list[str]:
    fcfg, vectors = q.config.fusion, q.st.node_vectors
    head = [i for i in ranked[: fcfg.candidate_factor * q.k] if i in vectors]
    vecs = vectors.get_many(head)
    # e5-style embedders share a large common direction; centring spreads cosines so the penalty bites.
    vecs = vecs - vecs.mean(axis=0, keepdims=True)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-9
    return mmr_order(head, scores, vecs, fcfg.diversity, len(head)) + [
        i for i in ranked if i not in set(head)
    ]


def _link_messages(q: Query, ranking: Ranking) -> dict[str, tuple[str, ...]]:
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
    q: Query, ranking: Ranking, fused: Fused, rel: RelationResult, sem: SemanticResult
) -> list[MemoryHit]:
    hits: list[MemoryHit] = []
    links = _link_messages(q, ranking)
    fragments_seen = 0
    for nid, score in zip(ranking.ids, ranking.scores, strict=True):
        via = _via(nid, ranking, fused, rel, sem)
        fragment = q.st.node(nid).kind == NodeKind.FRAGMENT
        replies = fragment and fragments_seen < q.config.context.reply_hits
        fragments_seen += fragment
        hits.append(_hit(q, nid, score, via, fused, sem, links.get(nid, ()), replies=replies))
    return hits


def _via(
    nid: str, ranking: Ranking, fused: Fused, rel: RelationResult, sem: SemanticResult
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
    if nid in fused.dated:
        via.append(Via.PERIOD)
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
    q: Query,
    nid: str,
    score: float,
    via: tuple[Via, ...],
    fused: Fused,
    sem: SemanticResult,
    linked: tuple[str, ...] = (),
    *,
    replies: bool = False,
) -> MemoryHit:
    """``replies``: each question in the hit's focus is followed by its reply (``context.reply_hits``)."""
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
        if replies:
            focus = _replies_after_questions(st, shown, focus)
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


def _successors(q: Query, nid: str) -> tuple[str, ...]:
    """The nodes that had replaced ``nid`` by ``as_of``, as this search sees them: none while it was
    still in force then. Compaction gives an overview its originals' links, so an archived original
    and its overview both replace ``nid``; only the one this search may show is named (the
    overview, or the original with ``include_archived``)."""
    if q.as_of is not None and q.status.get(nid) != Status.SUPERSEDED:
        return ()
    # q.status holds every node visible at as_of (a later one is not), a filter's scope aside
    return tuple(s.id for s in q.st.graph.successors_of(nid) if s.id in q.status)
