"""Relation hits graded by how well they match the query; scores that explain the order.

Hand-built toy graphs (HashingEmbedder), small enough to follow by eye.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.model import Edge, EdgeKind, Message, Node, NodeKind, Status
from mnemis_integrations.core.recipes import DEFAULT
from mnemis_integrations.core.retrieval.fusion import break_ties, grade_by_match, semantic_match
from mnemis_integrations.core.retrieval.relation import relation_path, term_match
from mnemis_integrations.core.retrieval.search import dual_path_search
from mnemis_integrations.core.state import NamespaceState

EMB = HashingEmbedder()
T0 = datetime(2025, 3, 1, 9, 0)

TEXTS = {
    "m1": "Acme signed the annual pricing plan at the discounted rate.",
    "m2": "Lunch with the Acme people was pleasant, good pasta.",
    "m3": "Bob fixed the office printer again.",
    "m4": "Carol wants green tea in the kitchen.",
}


def _state(texts: dict[str, str] = TEXTS, acme: tuple[str, ...] = ("f1", "f2")) -> NamespaceState:
    """One-message fragments under one subtopic (by default four; f1 and f2 mention Acme)."""
    ns = "u"
    g = MemoryGraph(ns)
    msgs = [Message(m, "Ann", t, T0 + timedelta(days=i), seq=i) for i, (m, t) in enumerate(texts.items())]
    g.add_node(Node("s1", NodeKind.SUBTOPIC, "office life", ns, summary="office life"))
    for i, m in enumerate(msgs, start=1):
        g.add_node(
            Node(
                f"f{i}",
                NodeKind.FRAGMENT,
                m.text[:20],
                ns,
                summary=m.text,
                source_ids=[m.id],
                event_time=m.timestamp,
            )
        )
        g.add_edge(Edge(f"f{i}", "s1", EdgeKind.BELONGS_TO))
    g.add_node(Node("e_acme", NodeKind.ENTITY, "Acme", ns))
    for f in acme:
        g.add_edge(Edge(f, "e_acme", EdgeKind.MENTIONS))
    vecs = EMB.embed_passages([m.text for m in msgs])
    return NamespaceState.restore(ns, EMB.dim, g, msgs, [m.id for m in msgs], vecs)


QUERY = "Which pricing plan did Acme sign?"


def test_raw_relation_path_ties_fragments_at_the_same_distance():
    st = _state()
    rel = relation_path(st, QUERY, DEFAULT.relation, {n.id for n in st.graph.nodes()})
    assert rel.distance["f1"] == rel.distance["f2"] == 1
    assert rel.scores["f1"] == rel.scores["f2"]  # hop distance alone cannot tell them apart


def test_term_match_counts_the_query_words_a_node_holds():
    st = _state()
    match = term_match(st, QUERY, ["f1", "f2", "s1"])
    assert match["f1"] > match["f2"] > 0.0  # f1 holds pricing, plan, acme, signed... f2 only acme
    assert match["s1"] == 0.0


def test_grading_keeps_equal_matches_tied_and_separates_the_rest():
    graded = grade_by_match({"a": 0.8, "b": 0.8, "c": 0.8}, {"a": 1.0, "b": 0.25, "c": 0.25}, 0.5)
    assert graded["a"] == 0.8 and graded["b"] == graded["c"] == 0.5


def test_relation_scores_of_equally_distant_fragments_follow_their_match():
    st = _state()
    allowed = {n.id for n in st.graph.nodes()}
    qvec = EMB.embed_queries([QUERY])[0]
    hits = {h.node_id: h for h in dual_path_search(st, QUERY, qvec, 10, DEFAULT, EMB.profile)}
    assert "relation" in hits["f1"].via and "relation" in hits["f2"].via
    assert hits["f1"].relation_score > hits["f2"].relation_score > 0.0
    assert hits["f1"].score != hits["f2"].score
    rel = relation_path(st, QUERY, DEFAULT.relation, allowed)
    raw = rel.scores
    match = term_match(st, QUERY, ["f1", "f2"])
    for f in ("f1", "f2"):  # half the score from the traversal, half graded by the query words the node holds
        assert hits[f].relation_score == pytest.approx(raw[f] * (0.5 + 0.5 * match[f]), abs=1e-3)
    # Off, the old behaviour: both get the same relation score.
    flat = DEFAULT.with_(relation={"match_weight": 0.0})
    old = {h.node_id: h for h in dual_path_search(st, QUERY, qvec, 10, flat, EMB.profile)}
    assert old["f1"].relation_score == old["f2"].relation_score


def test_nodes_holding_as_many_query_words_are_ordered_by_their_similarity():
    """Term shares move in whole query words: two fragments naming only the query's entity would tie
    at one relation score; the one nearer the query in meaning goes first, and no more than that."""
    more = {"m5": "Acme lunch.", "m6": "Acme lunch with the whole team at the new pasta place downtown."}
    st = _state({**TEXTS, **more}, acme=("f1", "f5", "f6"))
    terms = term_match(st, QUERY, ["f5", "f6"])
    assert terms["f5"] == terms["f6"] > 0  # each holds "acme" alone
    qvec = EMB.embed_queries([QUERY])[0]
    hits = {h.node_id: h for h in dual_path_search(st, QUERY, qvec, 10, DEFAULT, EMB.profile)}
    scores = {f: hits[f].relation_score for f in ("f5", "f6")}
    assert scores["f5"] != scores["f6"]
    raw = relation_path(st, QUERY, DEFAULT.relation, {n.id for n in st.graph.nodes()}).scores
    assert raw["f5"] == raw["f6"]  # the same distance from the same entity
    near = {f: float(st.node_vectors.get(f) @ qvec) for f in scores}
    assert (scores["f5"] > scores["f6"]) == (near["f5"] > near["f6"])
    assert max(scores.values()) - min(scores.values()) < 1e-3  # a tie-break, not a new weight
    assert hits["f1"].relation_score > max(scores.values())  # more query words still come first


def test_a_second_measure_orders_only_what_the_first_leaves_equal():
    first = {"a": 0.5, "b": 0.5, "c": 1.0, "d": 0.25}
    ordered = break_ties(first, semantic_match({"a": 0.3, "b": 0.9, "c": 0.1, "d": 1.0}, first))
    assert ordered["b"] > ordered["a"]
    assert sorted(ordered, key=ordered.get) == ["d", "a", "b", "c"]


def test_grading_never_lifts_a_relation_score():
    scores = {"a": 0.3, "b": 0.9}
    graded = grade_by_match(scores, {"a": 1.0, "b": 0.0}, 0.7)
    assert all(graded[k] <= scores[k] for k in scores)
    assert np.isclose(graded["b"], 0.9 * 0.3)


# ------------------------------------------------------------------ scores that explain the order


def test_a_weak_successor_placed_first_does_not_flatten_the_scores_below_it():
    st = _state()
    old, new = (
        st.graph.get("f1"),
        st.graph.get("f4"),
    )  # f4 (tea) "replaces" f1 (pricing): unrelated to the query
    st.graph.add_edge(Edge("f4", "f1", EdgeKind.UPDATES))
    old.status = Status.SUPERSEDED
    old.valid_until = new.event_time
    qvec = EMB.embed_queries([QUERY])[0]
    hits = dual_path_search(st, QUERY, qvec, 10, DEFAULT, EMB.profile)
    ids = [h.node_id for h in hits]
    assert ids.index("f4") == ids.index("f1") - 1 and "successor" in hits[ids.index("f4")].via
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert ids.index("f2") > ids.index("f1")
    # Not capped at the weak successor's score: the best match and the weaker one below it differ.
    assert hits[ids.index("f1")].score > hits[ids.index("f2")].score
    # shown at the place of the hit it replaces, that hit just under it
    assert 0 < hits[ids.index("f4")].score - hits[ids.index("f1")].score <= 0.01 + 1e-9


def test_the_relation_path_lifts_hits_but_never_buries_the_best_semantic_match():
    # f1 is near the named entity and matches less; f3 matches best and never names Acme.
    texts = {
        "m1": "Acme pricing plan chat over lunch, good pasta.",
        "m2": "Acme sent the new brochure, nice colours.",
        "m3": "Which plan did legal sign? The annual pricing plan, at the discounted rate.",
        "m4": "Carol wants green tea in the kitchen.",
    }
    st = _state(texts)
    qvec = EMB.embed_queries([QUERY])[0]

    def search(floor: float):
        config = DEFAULT.with_(fusion={"semantic_floor": floor})
        return dual_path_search(st, QUERY, qvec, 4, config, EMB.profile)

    off, on = search(0.0), search(0.9)
    assert [h.node_id for h in off][:2] == ["f1", "f3"]  # weighed at alpha, f3 falls under f1
    assert [h.node_id for h in on][:2] == ["f3", "f1"]
    for h in on:
        assert h.score >= 0.9 * h.semantic_score - 1e-6
    lifted = {h.node_id: h for h in on}
    assert lifted["f1"].score > 0.9 * lifted["f1"].semantic_score  # the relation path still adds
