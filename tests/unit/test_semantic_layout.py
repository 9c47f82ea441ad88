"""The semantic path scores the nodes it reads as arrays (``semantic._Layout``), laid out once per
visible set and write version on the exact path. Pinned here to the per-node loops it replaced, kept
below as the reference: every score, to the bit, in the same order, on both paths."""

from __future__ import annotations

import random

import numpy as np
import pytest
from bench_modules import bench_module

from mnemis_integrations.core.config import SemanticConfig
from mnemis_integrations.core.model import NodeKind
from mnemis_integrations.core.passages import passage_key
from mnemis_integrations.core.retrieval import cache as rcache
from mnemis_integrations.core.retrieval import search, semantic
from mnemis_integrations.core.retrieval.fusion import collapse_overlaps
from mnemis_integrations.core.state import NamespaceState


def _reference_path(st, qvec, query, cfg, threshold, allowed, speakers=(), messages=None, visible_key=None):
    """``semantic_path`` as it was before the layout: a Python loop over the nodes (the evidence it
    scores is gathered as the path gathers it)."""
    lex, lex_max = semantic._lexical(st, query, cfg, speakers, messages)
    if rcache.is_large(st):
        ids_iter, node_sims, msg_sims = semantic._coarse(st, qvec, allowed, lex, messages, visible_key)
    else:
        node_sims, msg_sims = semantic._exact_similarities(st, qvec, messages)
        ids_iter = sorted(allowed)  # the layout's order: by id, whatever the set's
    msg_sims = semantic._boost_speakers(st, msg_sims, speakers, cfg)
    ids, dense, lexical = [], [], []
    for nid in ids_iter:
        if nid not in node_sims:
            continue
        node = st.node(nid)
        if node.kind == NodeKind.FRAGMENT:
            best_msg = max((msg_sims.get(m, -1.0) for m in node.source_ids), default=-1.0)
            if best_msg < -0.5:
                best_msg = node_sims[nid]
            d = cfg.message_weight * best_msg + (1 - cfg.message_weight) * node_sims[nid]
            lx = max((lex.get(m, 0.0) for m in node.source_ids), default=0.0) / lex_max if lex_max else 0.0
        else:
            d, lx = node_sims[nid], 0.0
        ids.append(nid)
        dense.append(d)
        lexical.append(lx)
    if not ids:
        return {}, {}, {}, {}
    dense_a, lex_a = np.asarray(dense, np.float64), np.asarray(lexical, np.float64)
    kinds = np.asarray([st.node(i).kind == NodeKind.FRAGMENT for i in ids])
    norm = semantic._minmax(dense_a)
    lw = cfg.lexical_weight
    if cfg.combine == "rrf":
        score = semantic._rrf(dense_a, lex_a, kinds, lw)
    else:
        score = np.where(kinds, (1 - lw) * norm + lw * lex_a, (1 - lw) * norm)
    if cfg.topic_smoothing > 0:
        pos = {i: n for n, i in enumerate(ids)}
        parent_norm = np.array(
            [
                norm[pos[p]] if kinds[n] and (p := st.parent_id(i)) is not None and p in pos else score[n]
                for n, i in enumerate(ids)
            ]
        )
        documents = np.asarray(
            [
                st.node(i).kind == NodeKind.FRAGMENT
                and any(passage_key(m, 0) in st.passage_vectors for m in st.node(i).source_ids)
                for i in ids
            ],
            dtype=bool,
        )
        smoothed = kinds & ~documents if len(st.passage_vectors) else kinds
        ts = cfg.topic_smoothing
        score = np.where(smoothed, (1 - ts) * score + ts * parent_norm, score)
    raw = {i: float(d) for i, d in zip(ids, dense_a, strict=True)}
    keep = (dense_a >= threshold) | (lex_a > 0)
    scores = {i: float(s) for i, s, k in zip(ids, score, keep, strict=True) if k}
    # expansion's seeds changed only from sorted()[:n] to heapq.nsmallest, equal by definition
    expanded = semantic._expand(st, scores, cfg, allowed) if cfg.expand and scores else {}
    if msg_sims:
        msg_ids = list(msg_sims)
        msg_norm = semantic._minmax(np.fromiter((msg_sims[i] for i in msg_ids), np.float64, len(msg_ids)))
        message_scores = {
            i: float((1 - lw) * n + (lw * lex.get(i, 0.0) / lex_max if lex_max else 0.0))
            for i, n in zip(msg_ids, msg_norm, strict=True)
        }
    else:
        message_scores = {}
    return scores, raw, expanded, message_scores


@pytest.fixture(scope="module")
def synthetic():
    scale = bench_module("scale")
    syn = scale.generate(1500, dim=32, seed=4, n_queries=12, ingest_batches=1, batch_messages=6)
    st = NamespaceState.restore(
        scale.NS, 32, syn.graph, syn.messages, [m.id for m in syn.messages], syn.vectors
    )
    # Some messages read by their windows too (core.passages): documents, which smoothing passes over.
    rng = np.random.default_rng(4)
    windows = rng.normal(size=(3, 32)).astype(np.float32)
    st.add_passages(
        {m.id: windows / np.linalg.norm(windows, axis=1, keepdims=True) for m in syn.messages[::37]}
    )
    return syn, st


# With no lexical evidence and a high threshold some nodes go unscored, and the hierarchy expands
# to them: the other cases score every node, so none of them expands anything.
EXPANDING = "a high threshold, hierarchy expansion"
# (config, as_of as a share of the conversation, speakers named, threshold)
CASES = {
    "default": (SemanticConfig(), None, (), 0.2),
    "rrf, a named speaker boosted": (SemanticConfig(combine="rrf", speaker_boost=0.5), None, ("Ann",), 0.2),
    "as_of": (SemanticConfig(), 0.5, (), 0.2),
    EXPANDING: (SemanticConfig(lexical_weight=0.0), None, (), 0.75),
}


@pytest.mark.parametrize("funnel", [False, True], ids=["exact", "funnel"])
@pytest.mark.parametrize("case", list(CASES))
def test_semantic_scores_are_the_per_node_reference_to_the_bit(synthetic, monkeypatch, funnel, case):
    syn, st = synthetic
    cfg, moment, speakers, threshold = CASES[case]
    monkeypatch.setattr(rcache, "FUNNEL_MIN_NODES", 1 if funnel else 10**9)
    as_of = None
    if moment is not None:
        times = sorted({m.timestamp for m in st.messages.values() if m.timestamp})
        as_of = times[int(moment * (len(times) - 1))]
    allowed, _, _ = search._visible_set(st, as_of, False, None)
    messages = search._said_by_then(st, as_of)
    expansions = 0
    for text, qvec in syn.queries:
        args = (st, qvec, text, cfg, threshold, allowed)
        kwargs = {"speakers": speakers, "messages": messages, "visible_key": (as_of, False)}
        got = semantic.semantic_path(*args, **kwargs)
        scores, raw, expanded, message_scores = _reference_path(*args, **kwargs)
        assert list(got.scores.items()) == list(scores.items())
        assert list(got.raw.items()) == list(raw.items())
        assert list(got.expanded.items()) == list(expanded.items())
        expansions += len(expanded)
        assert got.message_scores == message_scores
        # a filter's scope (no key) is laid out anew, in its own order; some fragments hold none of
        # the messages in it, and are read by their centroid alone
        pick = random.Random(text)
        scope = set(pick.sample(sorted(allowed), len(allowed) // 2))
        in_scope = frozenset(pick.sample(sorted(st.messages), len(st.messages) // 4))
        kwargs.update(visible_key=None, messages=in_scope)
        got = semantic.semantic_path(st, qvec, text, cfg, threshold, scope, **kwargs)
        scores, raw, _, _ = _reference_path(st, qvec, text, cfg, threshold, scope, **kwargs)
        assert list(got.scores.items()) == list(scores.items()) and list(got.raw.items()) == list(raw.items())
    if case == EXPANDING:
        assert expansions > 0  # the case exercises expansion at all


def test_the_exact_path_lays_out_the_visible_set_once_per_write_version(synthetic, monkeypatch):
    """Before: each query read every visible node (its kind, parent and messages) in Python. Now a
    second query at the same version reads none; a write lays the set out again."""
    syn, st = synthetic
    monkeypatch.setattr(rcache, "FUNNEL_MIN_NODES", 10**9)
    allowed, _, _ = search._visible_set(st, None, False, None)
    (text, qvec), (other, other_vec) = syn.queries[:2]
    semantic.semantic_path(st, qvec, text, SemanticConfig(), 0.2, allowed, visible_key=(None, False))
    reads = []
    node = NamespaceState.node
    monkeypatch.setattr(NamespaceState, "node", lambda self, i: reads.append(i) or node(self, i))
    monkeypatch.setattr(NamespaceState, "parent_id", lambda self, i: reads.append(i))
    semantic.semantic_path(st, other_vec, other, SemanticConfig(), 0.2, allowed, visible_key=(None, False))
    assert reads == []
    monkeypatch.undo()
    monkeypatch.setattr(rcache, "FUNNEL_MIN_NODES", 10**9)
    layout = st.memo["layout"][1]
    st.version += 1  # as a write leaves it
    allowed, _, _ = search._visible_set(st, None, False, None)
    semantic.semantic_path(st, qvec, text, SemanticConfig(), 0.2, allowed, visible_key=(None, False))
    assert st.memo["layout"][1] is not layout and st.memo["layout"][1].source is allowed


def test_the_ranked_head_is_a_prefix_of_the_whole_order():
    """``search._rank`` reads only the head of the order: the same ids as sorting every score, ties by
    id and overlapping fragments collapsed, however many the collapse drops."""
    rng = random.Random(7)

    class Nodes:
        def __init__(self, sources):
            self.sources = sources

        def node(self, i):
            return type("N", (), {"kind": NodeKind.FRAGMENT, "source_ids": self.sources[i]})

    for _ in range(200):
        n = rng.randint(0, 300)
        scores = {f"n{i}": rng.choice([0.5, 0.25, rng.random()]) for i in range(n)}
        sources = {i: [f"m{rng.randint(0, 30)}" for _ in range(rng.randint(1, 3))] for i in scores}
        st = Nodes(sources)
        whole = sorted(scores, key=lambda i: (-scores[i], i))
        for collapse in (False, True):
            expected = (
                collapse_overlaps(whole, {i: frozenset(s) for i, s in sources.items()}) if collapse else whole
            )
            for want in (1, 10, 50):
                head = search._ranked_head(st, scores, want, collapse)
                assert head == expected[: len(head)] and len(head) >= min(want, len(expected))
