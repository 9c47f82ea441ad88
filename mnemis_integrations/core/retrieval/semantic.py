"""Path 1, the semantic concept path: score every node of every level, keep those
above the embedder's threshold, then expand along the hierarchy."""

from __future__ import annotations

import heapq
import re
from collections.abc import Collection, Hashable
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from ..config import SemanticConfig
from ..model import NodeKind
from ..passages import passage_key, passage_owner
from ..state import NamespaceState
from .cache import is_large, memo

__all__ = ["SemanticResult", "fragment_similarity_reference", "semantic_path"]


@dataclass
class SemanticResult:
    scores: dict[str, float]  # node id -> path score in [0, 1]
    raw: dict[str, float]  # node id -> raw cosine (fragments: the mixed cosine), for every scored node
    expanded: dict[str, str]  # node id -> the hit it was expanded from
    message_scores: dict[str, float] = field(default_factory=dict)  # message id -> its own match to the query


def fragment_similarity_reference(
    msg_sims: dict[str, float], frag_sources: list[str], centroid_sim: float, w: float
) -> float:
    """Readable reference of the fragment score used (vectorised) in :func:`semantic_path`.

    >>> fragment_similarity_reference({"m1": 0.9, "m2": 0.5}, ["m1", "m2"], 0.7, 0.5)
    0.8
    """
    best = max((msg_sims[m] for m in frag_sources if m in msg_sims), default=centroid_sim)
    return round(w * best + (1 - w) * centroid_sim, 6)


def _minmax(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    lo, hi = float(values.min()), float(values.max())
    return np.clip((values - lo) / (hi - lo), 0, 1) if hi > lo else np.ones_like(values)


def _rrf(
    dense: np.ndarray, lexical: np.ndarray, is_fragment: np.ndarray, lw: float, k: int = 60
) -> np.ndarray:
    """Reciprocal-rank fusion of the dense and BM25 orders, rescaled to [0, 1].

    >>> _rrf(np.array([0.9, 0.8]), np.array([0.0, 1.0]), np.array([True, True]), 0.5).round(3).tolist()
    [0.0, 1.0]
    """
    d_rank = np.empty(len(dense))
    d_rank[np.argsort(-dense, kind="stable")] = np.arange(1, len(dense) + 1)
    l_rank = np.empty(len(lexical))
    l_rank[np.argsort(-lexical, kind="stable")] = np.arange(1, len(lexical) + 1)
    fused = (1 - lw) / (k + d_rank) + np.where((lexical > 0) & is_fragment, lw / (k + l_rank), 0.0)
    return _minmax(fused)


# The funnel's coarse stage (SPEC §6): how many nodes, messages and BM25-matched messages it
# proposes before exact scoring. Used only at or above cache.FUNNEL_MIN_NODES graph nodes.
FUNNEL_NODES = 128
FUNNEL_MESSAGES = 256
FUNNEL_LEXICAL = 64
FUNNEL_FLOOR_SAMPLE = 128


def semantic_path(
    st: NamespaceState,
    qvec: np.ndarray,
    query: str,
    cfg: SemanticConfig,
    threshold: float,
    allowed: set[str],
    speakers: Collection[str] = (),
    messages: Collection[str] | None = None,
    visible_key: Hashable | None = None,
) -> SemanticResult:
    """Score ``allowed`` hierarchy nodes against the query.

    Fragments: their best message and their centroid (``message_weight``), mixed with
    BM25 over their messages (``lexical_weight``) so exact names and numbers count.
    Subtopics and concepts: their centroid. Everything on one [0, 1] scale.

    ``speakers``: the speakers the query names ("What did Caroline paint?"). Their names are
    left out of the BM25 query: a speaker's own messages hardly ever hold their name, the ones
    addressed to them do ("Wow, Caroline!": 1,081 of LoCoMo dev's 2,760 messages, against 1 of
    a speaker's own), so the name would steer BM25 to what others said to them. With
    ``speaker_boost``, their own messages gain.

    On a large graph (``cache.FUNNEL_MIN_NODES``) this is the funnel's second stage: only
    the coarse candidates (nearest nodes and messages, ANN above ``ann.ANN_MIN_VECTORS``,
    the best BM25 messages, and their parents) are scored, exactly; min-max normalisation
    then runs over those candidates.

    ``messages``: a filtered search's messages in scope (``retrieval.scope``), or those said by a
    search's ``as_of``; only they count as message-level evidence (best message, BM25, focus), and
    the funnel proposes the nearest nodes and messages among them. ``None``: every message counts.

    ``visible_key``: the key ``allowed`` is memoised under (``as_of``, ``include_archived``); the
    funnel's normalisation sample is memoised with it. ``None``: the sample is drawn anew.
    """
    lex, lex_max = _lexical(st, query, cfg, speakers, messages)
    if is_large(st):
        ids, node_sims, msg_sims = _coarse(st, qvec, allowed, lex, messages, visible_key)
        layout = _layout(st, ids)
    else:
        node_sims, msg_sims = _exact_similarities(st, qvec, messages)
        layout = _visible_layout(st, allowed, visible_key)
    msg_sims = _boost_speakers(st, msg_sims, speakers, cfg)
    node_sim = np.fromiter(map(node_sims.__getitem__, layout.ids), np.float64, len(layout.ids))
    result = _score(st, layout, node_sim, msg_sims, lex, lex_max, cfg, threshold, allowed)
    result.message_scores = _message_scores(msg_sims, lex, lex_max, cfg.lexical_weight)
    return result


def _lexical(
    st: NamespaceState,
    query: str,
    cfg: SemanticConfig,
    speakers: Collection[str],
    messages: Collection[str] | None,
) -> tuple[dict[str, float], float]:
    """BM25 over the messages in scope for the query without the speakers it names, and its best score."""
    lex_query = query
    # longest first: "Ann" taken out before "Ann Marie" would leave "Marie" (and a set's order
    # changes with the process's hash seed)
    for name in sorted(speakers, key=lambda s: (-len(s), s)):
        lex_query = re.sub(rf"(?<!\w){re.escape(name)}(?:['’]s)?(?!\w)", " ", lex_query, flags=re.IGNORECASE)
    lex = st.lexical.scores(lex_query) if cfg.lexical_weight > 0 else {}
    if messages is not None:
        lex = {m: s for m, s in lex.items() if m in messages}
    return lex, max(lex.values(), default=0.0)


def _exact_similarities(
    st: NamespaceState, qvec: np.ndarray, messages: Collection[str] | None
) -> tuple[dict[str, float], dict[str, float]]:
    """Every node's and every message in scope's cosine to the query (a long message's best window's
    when that is higher): the exact path's dense evidence."""
    node_sims = st.node_vectors.search(qvec)
    msg_sims = st.msg_vectors.search(qvec)
    if messages is not None:
        msg_sims = {m: s for m, s in msg_sims.items() if m in messages}
    if len(st.passage_vectors):
        _best_windows(msg_sims, st.passage_vectors.search(qvec))
    return node_sims, msg_sims


def _boost_speakers(
    st: NamespaceState, msg_sims: dict[str, float], speakers: Collection[str], cfg: SemanticConfig
) -> dict[str, float]:
    """The named speakers' own messages raised by ``speaker_boost`` spreads of the similarities."""
    if not (cfg.speaker_boost > 0 and speakers and msg_sims):
        return msg_sims
    named = {n.lower() for n in speakers}
    # in key order: the similarities' own order can follow a set's, and a sum's last bits with it
    bonus = cfg.speaker_boost * float(np.std([msg_sims[m] for m in sorted(msg_sims)]))
    return {m: s + bonus if st.messages[m].speaker.lower() in named else s for m, s in msg_sims.items()}


@dataclass(frozen=True)
class _Layout:
    """The nodes a scoring pass reads, in the order it scores them, with what it reads of each as
    arrays (kind, parent, document, messages): the scoring is then a few array operations, not a
    Python loop over the graph, and the exact path lays out a visible set once per write version."""

    ids: list[str]
    fragment: np.ndarray  # bool, per id
    parent: np.ndarray  # a fragment's parent's place among ids; -1: none, or not among them
    document: np.ndarray  # bool: a fragment holding a document (a message with windows, core.passages)
    held: np.ndarray  # the places of the fragments holding messages
    starts: np.ndarray  # where each of those fragments' messages begin in ``slots``
    slots: np.ndarray  # each one's messages, as places in ``message_ids``, fragment after fragment
    message_ids: list[str]
    source: Collection[str] | None = None  # the visible set laid out (the exact path's, memoised)


def _layout(st: NamespaceState, ids: list[str], source: Collection[str] | None = None) -> _Layout:
    """``ids`` laid out for scoring, in their order."""
    pos = {i: n for n, i in enumerate(ids)}
    fragment = np.zeros(len(ids), dtype=bool)
    parent = np.full(len(ids), -1, dtype=np.int64)
    document = np.zeros(len(ids), dtype=bool)
    has_windows = len(st.passage_vectors) > 0
    slot: dict[str, int] = {}
    held, starts, slots = [], [], []
    for n, i in enumerate(ids):
        node = st.node(i)
        if node.kind != NodeKind.FRAGMENT:
            continue
        fragment[n] = True
        p = st.parent_id(i)
        if p is not None and p in pos:
            parent[n] = pos[p]
        if node.source_ids:
            held.append(n)
            starts.append(len(slots))
            slots += [slot.setdefault(m, len(slot)) for m in node.source_ids]
        if has_windows:
            document[n] = any(passage_key(m, 0) in st.passage_vectors for m in node.source_ids)
    return _Layout(
        ids,
        fragment,
        parent,
        document,
        np.asarray(held, dtype=np.int64),
        np.asarray(starts, dtype=np.int64),
        np.asarray(slots, dtype=np.int64),
        list(slot),
        source,
    )


def _visible_layout(st: NamespaceState, allowed: set[str], visible_key: Hashable | None) -> _Layout:
    """The exact path's layout of ``allowed`` (those with a vector, by id: a set's own order changes
    from one process to the next with the string-hash seed, and equal scores break by layout
    position), memoised under ``visible_key`` and the very set it was made from. The layout holds
    that set, so no other set can take its ``id`` while it is kept. A filter's scope (no key) is laid
    out anew."""

    def lay_out() -> _Layout:
        return _layout(st, sorted(i for i in allowed if i in st.node_vectors), allowed)

    return lay_out() if visible_key is None else memo(st, "layout", (visible_key, id(allowed)), lay_out)


def _best_windows(msg_sims: dict[str, float], window_sims: dict[str, float]) -> None:
    """A long message matches as well as its best window (``core.passages``) when that beats its
    own vector, which stands for what the embedder read of it: the opening only.

    >>> from mnemis_integrations.core.passages import passage_key
    >>> sims = {"m": 0.80, "n": 0.90}
    >>> _best_windows(sims, {passage_key("m", 0): 0.85, passage_key("m", 1): 0.83, passage_key("x", 0): 0.99})
    >>> sims
    {'m': 0.85, 'n': 0.9}
    """
    for key, s in window_sims.items():
        m = passage_owner(key)
        if m in msg_sims and s > msg_sims[m]:
            msg_sims[m] = s


def _message_scores(
    msg_sims: dict[str, float], lex: dict[str, float], lex_max: float, lw: float
) -> dict[str, float]:
    """Each scored message's match, mixed as fragments are: normalised cosine and BM25.

    >>> _message_scores({"a": 0.8, "b": 0.9}, {"a": 2.0}, 2.0, 0.5)
    {'a': 0.5, 'b': 0.5}
    """
    if not msg_sims:
        return {}
    ids = list(msg_sims)
    norm = _minmax(np.fromiter(msg_sims.values(), np.float64, len(ids)))
    if lex_max:
        lexical = lw * np.fromiter(map(lex.get, ids, repeat(0.0)), np.float64, len(ids)) / lex_max
    else:
        lexical = 0.0
    return dict(zip(ids, ((1 - lw) * norm + lexical).tolist(), strict=True))


def _sample(allowed: Collection[str], n: int) -> list[str]:
    ids = sorted(allowed)  # a fixed draw needs a fixed order: a set's changes with the hash seed
    pick = np.random.default_rng(0).choice(len(ids), size=min(n, len(ids)), replace=False)
    return [ids[i] for i in pick]


def _coarse(
    st: NamespaceState,
    qvec: np.ndarray,
    allowed: set[str],
    lex: dict[str, float],
    messages: Collection[str] | None = None,
    visible_key: Hashable | None = None,
) -> tuple[list[str], dict[str, float], dict[str, float]]:
    """Stage one of the funnel: candidate node ids, with exact node and message cosines for them."""
    if messages is None:
        cand = dict.fromkeys(st.node_vectors.top(qvec, FUNNEL_NODES))
        near = st.msg_vectors.top(qvec, FUNNEL_MESSAGES)
    else:
        # A filter may leave none of the globally nearest allowed: the nearest inside the scope,
        # from the exact flat index (widened until found, at most about one scan more).
        cand = dict.fromkeys(
            k for k, _ in st.node_vectors.nearest(qvec, FUNNEL_NODES, keep=allowed.__contains__)
        )
        near = [k for k, _ in st.msg_vectors.nearest(qvec, FUNNEL_MESSAGES, keep=messages.__contains__)]
    # the messages of the nearest windows are candidates too; their scores are exact below
    windows = st.passage_vectors.top(qvec, FUNNEL_MESSAGES) if len(st.passage_vectors) else {}
    near = list(near) + [m for m in map(passage_owner, windows) if messages is None or m in messages]
    for m in near:
        f = st.msg_fragment.get(m)
        if f is not None:
            cand[f] = None
    for m in heapq.nlargest(FUNNEL_LEXICAL, lex, key=lex.__getitem__):
        f = st.msg_fragment.get(m)
        if f is not None:
            cand[f] = None
    # A fixed random sample of the visible nodes: it puts the floor of the min-max normalisation
    # close to the full scan's minimum, so normalised scores (and their fusion) stay comparable.
    # Memoised under the key of the visible set it was drawn from (not the set's id(): a freed
    # set's address can come back for another as_of); a filter's scope is drawn again each query
    # (its caller passes no key; ``messages`` alone may be an as_of's, over the memoised visible set).
    if visible_key is not None:
        sample = memo(st, "norm_sample", visible_key, lambda: _sample(allowed, FUNNEL_FLOOR_SAMPLE))
    else:
        sample = _sample(allowed, FUNNEL_FLOOR_SAMPLE)
    for nid in sample:
        cand[nid] = None
    ids = [i for i in cand if i in allowed and i in st.node_vectors]
    parents = []
    for i in ids:  # topic smoothing needs each fragment's subtopic score
        if st.node(i).kind == NodeKind.FRAGMENT:
            p = st.parent_id(i)
            if p is not None and p not in cand and p in allowed and p in st.node_vectors:
                cand[p] = None
                parents.append(p)
    ids += parents
    node_sims = dict(zip(ids, st.node_vectors.similarities(qvec, ids).tolist(), strict=True))
    msgs = [
        m
        for i in ids
        if st.node(i).kind == NodeKind.FRAGMENT
        for m in st.node(i).source_ids
        if m in st.msg_vectors and (messages is None or m in messages)
    ]
    msgs = list(dict.fromkeys(msgs))
    msg_sims = dict(zip(msgs, st.message_similarities(qvec, msgs).tolist(), strict=True))
    return ids, node_sims, msg_sims


def _score(
    st: NamespaceState,
    layout: _Layout,
    node_sim: np.ndarray,
    msg_sims: dict[str, float],
    lex: dict[str, float],
    lex_max: float,
    cfg: SemanticConfig,
    threshold: float,
    allowed: set[str],
) -> SemanticResult:
    """The path's scores in stages: each node's dense and lexical evidence, mixed on one scale
    (``_mix``), kept above ``threshold`` or with a BM25 match, then expanded along the hierarchy."""
    ids = layout.ids
    if not ids:
        return SemanticResult({}, {}, {})
    dense_a, lex_a = _evidence(layout, node_sim, msg_sims, lex, lex_max, cfg.message_weight)
    score = _mix(layout, dense_a, lex_a, cfg)
    raw = dict(zip(ids, dense_a.tolist(), strict=True))
    keep = np.flatnonzero((dense_a >= threshold) | (lex_a > 0))
    scores = dict(zip([ids[n] for n in keep.tolist()], score[keep].tolist(), strict=True))
    expanded = _expand(st, scores, cfg, allowed) if cfg.expand and cfg.max_expansions > 0 and scores else {}
    return SemanticResult(scores, raw, expanded)


def _evidence(
    layout: _Layout,
    node_sim: np.ndarray,
    msg_sims: dict[str, float],
    lex: dict[str, float],
    lex_max: float,
    message_weight: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Each laid-out node's dense similarity and its BM25 share of ``lex_max`` (``node_sim``: each
    one's own cosine).

    A fragment's dense similarity mixes its best message with its centroid (its centroid alone when
    none of its messages was scored); other nodes have only their centroid, and no lexical evidence.
    """
    best = np.full(len(layout.ids), -1.0)
    lexical = np.zeros(len(layout.ids))
    if len(layout.held):
        n_msgs = len(layout.message_ids)
        msg = np.fromiter(map(msg_sims.get, layout.message_ids, repeat(-1.0)), np.float64, n_msgs)
        best[layout.held] = np.maximum.reduceat(msg[layout.slots], layout.starts)
        if lex_max:
            lx = np.fromiter(map(lex.get, layout.message_ids, repeat(0.0)), np.float64, n_msgs)
            lexical[layout.held] = np.maximum.reduceat(lx[layout.slots], layout.starts) / lex_max
    best = np.where(best < -0.5, node_sim, best)
    dense = np.where(layout.fragment, message_weight * best + (1 - message_weight) * node_sim, node_sim)
    return dense, lexical


def _mix(layout: _Layout, dense_a: np.ndarray, lex_a: np.ndarray, cfg: SemanticConfig) -> np.ndarray:
    """Dense and lexical evidence on one [0, 1] scale, each fragment smoothed towards its subtopic."""
    kinds = layout.fragment
    norm = _minmax(dense_a)
    lw = cfg.lexical_weight
    if cfg.combine == "rrf":
        score = _rrf(dense_a, lex_a, kinds, lw)
    else:
        score = np.where(kinds, (1 - lw) * norm + lw * lex_a, (1 - lw) * norm)
    if cfg.topic_smoothing > 0:
        has_parent = layout.parent >= 0
        parent_norm = np.where(has_parent, norm[np.where(has_parent, layout.parent, 0)], score)
        ts = cfg.topic_smoothing
        # Documents are passed over: a document is a topic of its own, and its subtopic's score,
        # made of other documents, says little about it (on LoCoMo sessions stored as documents,
        # smoothing them cost 2-3 points of evidence shown, on both halves of the conversations:
        # BENCHMARKS.md).
        smoothed = kinds & ~layout.document
        score = np.where(smoothed, (1 - ts) * score + ts * parent_norm, score)
    return score


def _expand(
    st: NamespaceState, scores: dict[str, float], cfg: SemanticConfig, allowed: set[str]
) -> dict[str, str]:
    """Give the best hits' unscored parents and children a decayed share of their score (added to
    ``scores``); returns each expanded node's origin."""
    expanded: dict[str, str] = {}
    # the first by score, equal ones by id (the order scored can follow a set's): sorted()[:n],
    # without sorting them all
    seeds = heapq.nsmallest(max(1, cfg.max_expansions // 2), scores, key=lambda i: (-scores[i], i))
    for sid in seeds:
        neighbours = []
        parent = st.graph.parent(sid)
        if parent is not None:
            neighbours.append(parent.id)
        neighbours += [c.id for c in st.graph.children(sid)]
        for nb in neighbours:
            if nb not in allowed or nb in scores:
                continue
            val = scores[sid] * cfg.expansion_decay
            if val > scores.get(nb, 0.0):
                scores[nb] = val
                expanded[nb] = sid
            if len(expanded) >= cfg.max_expansions:
                break
        if len(expanded) >= cfg.max_expansions:
            break
    return expanded
