"""Dual-path search (``retrieval/search.py``) stage by stage, on a hand-built graph: each stage
does what ``dual_path_search``'s docstring says, and the whole gives superseded facts with their
successors, answers from the past at ``as_of``, and falls back to the semantic path for a vague query."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from _toy_graph import EMB, T0, hierarchy, toy_state

from mnemis_integrations.core.model import NodeKind, Status
from mnemis_integrations.core.recipes import DEFAULT
from mnemis_integrations.core.retrieval import present_state, search
from mnemis_integrations.core.retrieval.fusion import alpha_for
from mnemis_integrations.core.retrieval.relation import RelationResult
from mnemis_integrations.core.retrieval.results import Via
from mnemis_integrations.core.retrieval.semantic import SemanticResult

SWITCHED = {"updates": (("f_plan_b", "f_plan_a"),)}  # plan B (m4, day 3) replaces plan A (m3, day 2)
BEFORE_THE_SWITCH = T0 + timedelta(days=2, hours=12)
VISIBLE_BEFORE_THE_SWITCH = {"c_work", "s_billing", "f_refund", "f_pricing", "s_hosting", "f_plan_a"}


def _query(st, text, *, k=10, config=DEFAULT, profile=EMB.profile, as_of=None, include_archived=False):
    allowed, status, scope = search._visible_set(st, as_of, include_archived, None)
    qvec = EMB.embed_queries([text])[0]
    speakers = search._named_speakers(st, text)
    return search.Query(
        st, text, qvec, k, config, profile, as_of, include_archived, None, allowed, status, scope, speakers
    )


def _search(st, text, **kw):
    return search.dual_path_search(st, text, EMB.embed_queries([text])[0], 10, DEFAULT, EMB.profile, **kw)


# ------------------------------------------------------------------ 1. the visible set


def test_the_visible_set_is_the_hierarchy_with_each_nodes_status_now():
    st = toy_state(mentions={"f_pricing": ["Acme"]}, **SWITCHED)
    allowed, status, scope = search._visible_set(st, None, False, None)
    assert allowed == hierarchy(st) and scope is None  # no entity node
    assert status == {n: Status.SUPERSEDED if n == "f_plan_a" else Status.ACTIVE for n in allowed}


def test_at_as_of_later_nodes_are_hidden_and_a_fact_replaced_later_is_still_current():
    st = toy_state(**SWITCHED)
    allowed, status, _ = search._visible_set(st, BEFORE_THE_SWITCH, False, None)
    assert allowed == VISIBLE_BEFORE_THE_SWITCH
    assert status["f_plan_a"] == Status.ACTIVE


def test_archived_nodes_are_visible_only_when_asked_for():
    st = toy_state()
    st.node("f_tea").status = Status.ARCHIVED
    assert "f_tea" not in search._visible_set(st, None, False, None)[0]
    assert "f_tea" in search._visible_set(st, None, True, None)[0]


# ------------------------------------------------------------------ 2. the two paths


def test_the_semantic_threshold_is_the_configs_or_else_the_embedders():
    st = toy_state()
    strict = replace(EMB.profile, semantic_threshold=1.01)  # above every cosine: BM25 matches only
    _, sem = search._run_paths(_query(st, "noodle lunch", profile=strict))
    assert {n for n in sem.scores if n not in sem.expanded} == {"f_lunch"}
    loose = DEFAULT.with_(semantic={"threshold": -1.0})
    _, sem = search._run_paths(_query(st, "noodle lunch", profile=strict, config=loose))
    assert set(sem.scores) == hierarchy(st)


STRICT = replace(EMB.profile, semantic_threshold=1.01)  # above every cosine: BM25 matches only
CAROL_IN_FOUR_OF_SIX = {f: ["Carol"] for f in ("f_refund", "f_pricing", "f_plan_a", "f_tea")}


def test_bm25_leaves_out_the_speakers_the_query_names():
    _, sem = search._run_paths(_query(toy_state(speaker="Carol"), "Carol", profile=STRICT))
    assert sem.scores == {}  # "Carol wants green tea" would match BM25, but Carol is who speaks
    _, sem = search._run_paths(_query(toy_state(), "Carol", profile=STRICT))  # Ann speaks, of Carol
    assert "f_tea" in sem.scores


def test_the_semantic_path_reads_the_query_not_the_relation_paths_result(monkeypatch):
    """It used to leave the entities the relation path found too common out of BM25, and to score
    the relation path's hits: now each path runs from the query alone, and they meet in fusion."""
    q = _query(toy_state(mentions=CAROL_IN_FOUR_OF_SIX), "Carol", profile=STRICT)
    rel, sem = search._run_paths(q)
    assert rel.n_entities_in_query == 1 and not rel.seeds  # in most fragments: too common to seed
    assert "f_tea" in sem.scores  # but not a speaker: BM25 still reads her name
    everything = RelationResult(
        {"e_carol": 1.0}, dict.fromkeys(q.allowed, 1.0), dict.fromkeys(q.allowed, 1), 1
    )
    monkeypatch.setattr(search, "relation_path", lambda *args, **kwargs: everything)
    rel, unchanged = search._run_paths(q)
    assert rel is everything and unchanged == sem


def test_both_paths_see_only_the_visible_set():
    st = toy_state(mentions={"f_tea": ["Carol"], "f_plan_b": ["Carol"]}, **SWITCHED)
    rel, sem = search._run_paths(_query(st, "Carol wants plan B", as_of=BEFORE_THE_SWITCH))
    # Both fragments that mention Carol come later: only what lies beyond plan B scores.
    assert set(rel.scores) == {"f_plan_a", "s_hosting"}
    assert set(sem.raw) == VISIBLE_BEFORE_THE_SWITCH


# ------------------------------------------------------------------ 3. fusion


def test_without_relation_hits_the_semantic_path_alone_decides_and_parents_weigh_less():
    st = toy_state()
    config = DEFAULT.with_(fusion={"recency_weight": 0.0})
    q = _query(st, "refund at the bank", config=config)
    rel, sem = search._run_paths(q)
    fused = search._fuse(q, rel, sem)
    assert fused.fallback and fused.relation == {}
    for nid, score in fused.scores.items():
        weight = 1.0 if st.node(nid).kind == NodeKind.FRAGMENT else config.fusion.parent_weight
        assert score == pytest.approx(weight * fused.semantic[nid])


def test_with_relation_hits_both_paths_mix_by_the_dynamic_weight():
    st = toy_state(mentions={"f_pricing": ["Acme"]})
    text = "What does Acme want for the pricing plan?"  # one entity, eight words
    q = _query(st, text, config=DEFAULT.with_(fusion={"parent_weight": 1.0}))
    rel, sem = search._run_paths(q)
    fused = search._fuse(q, rel, sem)
    assert not fused.fallback and set(fused.relation) == {"f_pricing", "s_billing"}
    alpha = alpha_for("design", 1, 8)
    floor = DEFAULT.fusion.semantic_floor  # the relation path may lift a node, never bury it
    for nid, score in fused.scores.items():
        mixed = alpha * fused.semantic.get(nid, 0.0) + (1 - alpha) * fused.relation.get(nid, 0.0)
        assert score == pytest.approx(max(mixed, floor * fused.semantic.get(nid, 0.0)))


def test_fusion_grades_a_relation_hit_the_semantic_path_did_not_score_as_matching_least():
    st = toy_state(mentions={"f_pricing": ["Acme"]})
    config = DEFAULT.with_(relation={"match_by": "semantic"})
    q = _query(st, "What does Acme want for the pricing plan?", config=config)
    rel, sem = search._run_paths(q)
    hop_scores = dict(rel.scores)
    assert set(hop_scores) == {"f_pricing", "s_billing"}
    # as on a large graph, where the funnel scores only the nodes nearest the query
    unscored = SemanticResult({}, {"f_pricing": sem.raw["f_pricing"]}, {})
    fused = search._fuse(q, rel, unscored)
    w = config.relation.match_weight
    assert fused.relation == pytest.approx(
        {"f_pricing": hop_scores["f_pricing"], "s_billing": hop_scores["s_billing"] * (1 - w)}
    )
    assert fused.semantic == {}


def test_a_query_with_specific_terms_is_less_vague():
    st = toy_state()
    assert search._vagueness(st, "how did that thing end up?") == 1.0  # "end" is in no fragment
    assert search._vagueness(st, "noodle place") == pytest.approx(1 / 3)  # both only in f_lunch
    assert search._vagueness(st, "the plan") == 1.0  # in three of six fragments: not specific


def test_in_a_vague_fallback_recency_lifts_the_newer_nodes():
    st = toy_state()
    config = DEFAULT.with_(semantic={"threshold": -1.0}, fusion={"parent_weight": 1.0})
    q = _query(st, "how did that thing end up?", config=config)
    rel, sem = search._run_paths(q)
    fused = search._fuse(q, rel, sem)
    w = config.fusion.recency_weight  # the query holds no specific term: the full weight
    assert fused.fallback
    day = {f"f_{n}": d for d, n in enumerate(("refund", "pricing", "plan_a", "plan_b", "lunch", "tea"))}
    for f, d in day.items():
        assert fused.scores[f] == pytest.approx((1 - w) * fused.semantic[f] + w * d / 5)


def _fused_for(st, text, config):
    q = _query(st, text, config=config)
    return q, search._fuse(q, *search._run_paths(q))


def test_a_fragment_said_in_the_period_the_query_names_is_lifted_and_says_so():
    st = toy_state()  # one message a day from 1 March 2025: f_pricing is said on 2 March
    text = "what did we say about the plan on 2 March 2025?"
    off = DEFAULT.with_(
        semantic={"threshold": -1.0},
        fusion={"parent_weight": 1.0, "period_slack_days": 0, "period_weight": 0.0},
    )
    on = off.with_(fusion={"period_weight": 0.35})
    _, plain = _fused_for(st, text, off)
    q, fused = _fused_for(st, text, on)
    assert fused.dated == {"f_pricing"} and not plain.dated
    for nid, s in plain.scores.items():
        assert fused.scores[nid] == pytest.approx(0.65 * s + (0.35 if nid == "f_pricing" else 0.0))
    hits = search.dual_path_search(st, text, q.qvec, 10, on, EMB.profile)
    assert hits[0].node_id == "f_pricing" and Via.PERIOD in hits[0].via
    assert all(Via.PERIOD not in h.via for h in hits[1:])


def test_a_period_that_holds_no_fragment_or_every_one_changes_no_score():
    st = toy_state()
    off = DEFAULT.with_(semantic={"threshold": -1.0}, fusion={"period_weight": 0.0})
    on = off.with_(fusion={"period_weight": 0.35})
    for when in ("in July 2030", "in March 2025"):  # the toy's messages are all said in March 2025
        text = f"what did we say about the plan {when}?"
        _, plain = _fused_for(st, text, off)
        _, fused = _fused_for(st, text, on)
        assert not fused.dated and fused.scores == plain.scores


# ------------------------------------------------------------------ 4. ranking


def _fused(scores: dict[str, float]) -> search.Fused:
    return search.Fused(scores, {}, {}, False)


def test_ranking_orders_by_score_then_id_cuts_to_k_and_tops_up_from_the_semantic_backup():
    st = toy_state()
    q = _query(st, "anything", k=4)
    q = replace(q, allowed=q.allowed - {"f_lunch"})
    backup = SemanticResult({}, {"f_lunch": 0.99, "f_tea": 0.9, "f_plan_a": 0.8, "f_refund": 0.7}, {})
    ranked, added = search._rank(q, _fused({"f_refund": 0.5, "f_pricing": 0.5, "f_plan_b": 0.9}), backup)
    assert ranked == ["f_plan_b", "f_pricing", "f_refund", "f_tea"] and added == ["f_tea"]  # f_lunch hidden
    k2 = replace(q, k=2)
    assert search._rank(k2, _fused({"f_refund": 0.5, "f_pricing": 0.5, "f_plan_b": 0.9}), backup) == (
        ["f_plan_b", "f_pricing"],
        [],
    )


def test_a_fragment_whose_messages_a_better_hit_shows_is_collapsed():
    st = toy_state()
    st.node("f_pricing").source_ids = ["m1", "m2"]  # holds f_refund's message too
    scores = {"f_pricing": 0.9, "f_refund": 0.8, "s_billing": 0.7}
    nothing = SemanticResult({}, {}, {})
    assert search._rank(_query(st, "x"), _fused(scores), nothing)[0] == ["f_pricing", "s_billing"]
    keep = _query(st, "x", config=DEFAULT.with_(fusion={"collapse_overlap": False}))
    assert search._rank(keep, _fused(scores), nothing)[0] == ["f_pricing", "f_refund", "s_billing"]


PARTY = {
    "c_party": {
        "s_van": {
            "f_van": ["Hannah can do the 31st: van booked, 9am."],
            "f_cake": ["The cake needs to feed the guests."],
            "f_hall": ["The hall fits 60 guests."],
        },
        "s_travel": {
            "f_flight": ["Looking at flights EDI-MAN for the 13th."],
            "f_train": ["Booked the 7:40 train to Manchester."],
        },
    }
}
HANNAH = {"f_van": ["Hannah"], "f_flight": ["Hannah"], "f_train": ["Hannah"]}


def _bridge(scores, mentions=HANNAH, **relation):
    config = DEFAULT.with_(relation=relation) if relation else DEFAULT
    fused = _fused(dict(scores))
    search._bridge(_query(toy_state(PARTY, mentions=mentions), "who collects her?", config=config), fused)
    return fused


def test_fragments_sharing_a_first_hit_s_specific_entity_are_scored_up_towards_it_and_say_so():
    fused = _bridge({"f_van": 0.9, "f_cake": 0.8, "f_hall": 0.7, "f_flight": 0.1, "f_train": 0.3})
    # halfway between their own score and the lending hit's, each still ordered by its own match
    assert fused.scores["f_flight"] == pytest.approx(0.5) and fused.scores["f_train"] == pytest.approx(0.6)
    assert fused.bridged == {"f_flight", "f_train"}
    nothing = RelationResult(set(), {}, {}, 0)
    sem = SemanticResult({"f_flight": 0.1}, {}, {})
    ranking = search.Ranking(["f_flight"], [0.5], supplemented=[], moved=set())
    assert search._via("f_flight", ranking, fused, nothing, sem) == (Via.SEMANTIC, Via.BRIDGE)


@pytest.mark.parametrize(
    "why, mentions, relation, raised",
    [
        ("never above the hits that lend the entity", HANNAH, {"bridge_weight": 1.0}, True),
        ("an entity in more fragments than the limit", HANNAH, {"bridge_max_fragments": 2}, False),
        ("the entity's fragment is not among the first hits", {"f_flight": ["Hannah"]}, {}, False),
        ("turned off", HANNAH, {"bridge_weight": 0.0}, False),
    ],
)
def test_the_bridge_stays_under_its_sources_and_leads_only_from_specific_entities(
    why, mentions, relation, raised
):
    fused = _bridge({"f_van": 0.9, "f_cake": 0.8, "f_hall": 0.7, "f_flight": 0.1}, mentions, **relation)
    assert (fused.scores["f_flight"] > 0.1) == raised, why
    assert fused.scores["f_flight"] < 0.7, why  # the first three keep their places
    assert [fused.scores[f] for f in ("f_van", "f_cake", "f_hall")] == [0.9, 0.8, 0.7], why


CHAT = {
    "c_party": {
        "s_venue": {
            # the question ends its fragment; the answer opens the next one
            "f_ask": ["Is the barn free?", "Not sure.", "Where is the party this year?"],
            "f_reply": ["Dad says the Old Mill barn.", "Great, I'll book it."],
            "f_cake": ["The cake is lemon."],
        }
    }
}


def _continue(scores, best_message, *, updates=(), **fusion):
    config = DEFAULT.with_(fusion=fusion) if fusion else DEFAULT
    st = toy_state(CHAT, updates=updates)
    fused = _fused(dict(scores))
    sem = SemanticResult(
        {}, {}, {}, message_scores={m: 0.2 for m in ("m1", "m2", "m3")} | {best_message: 0.9}
    )
    search._continue(_query(st, "where is the party?", config=config), fused, sem)
    return fused


def test_the_fragment_after_a_first_hit_whose_best_match_ends_it_is_scored_up_and_says_so():
    fused = _continue({"f_ask": 0.9, "f_cake": 0.5}, "m3")  # the reply matched nothing itself
    # 0.3 x the lending hit's score + 0.7 x its own (none), under the hits that lend
    assert fused.scores["f_reply"] == pytest.approx(0.3 * 0.9)
    assert fused.continued == {"f_reply"}
    nothing = RelationResult(set(), {}, {}, 0)
    ranking = search.Ranking(["f_reply"], [0.34], supplemented=[], moved=set())
    via = search._via("f_reply", ranking, fused, nothing, SemanticResult({"f_reply": 0.1}, {}, {}))
    assert via == (Via.SEMANTIC, Via.CONTINUATION)


FIRST = {"f_ask": 0.9, "f_cake": 0.5, "f_reply": 0.1}  # the reply holds a weak match of its own


@pytest.mark.parametrize(
    "why, best, scores, fusion, updates, raised",
    [
        ("the best match is among the last two", "m2", FIRST, {"continuation_hits": 2}, (), True),
        (
            "the best match opens the fragment: its own turns follow it",
            "m1",
            FIRST,
            {"continuation_hits": 2},
            (),
            False,
        ),
        (
            "only the last message counts",
            "m2",
            FIRST,
            {"continuation_hits": 2, "continuation_tail": 1},
            (),
            False,
        ),
        (
            "the hit is not among the first hits",
            "m3",
            FIRST | {"f_cake": 0.95},
            {"continuation_hits": 1},
            (),
            False,
        ),
        ("the next fragment is itself a first hit: it keeps its place", "m3", FIRST, {}, (), False),
        (
            "a superseded hit no longer carries the thread",
            "m3",
            FIRST,
            {"continuation_hits": 2},
            (("f_cake", "f_ask"),),
            False,
        ),
        ("turned off", "m3", FIRST, {"continuation_hits": 2, "continuation_weight": 0.0}, (), False),
    ],
)
def test_a_continuation_is_lent_only_by_a_first_hit_whose_best_match_ends_it(
    why, best, scores, fusion, updates, raised
):
    fused = _continue(scores, best, updates=updates, **fusion)
    assert (fused.scores["f_reply"] > 0.1) == raised, why


def test_a_continuation_never_passes_the_hits_that_lend():
    fused = _continue(
        {"f_ask": 0.9, "f_cake": 0.5, "f_reply": 0.1}, "m3", continuation_weight=1.0, continuation_hits=2
    )
    assert 0.1 < fused.scores["f_reply"] < 0.5  # under the last of the hits that lend
    assert (fused.scores["f_ask"], fused.scores["f_cake"]) == (0.9, 0.5)


def test_hits_held_under_the_lenders_are_ranked_by_what_they_would_have_been_lent():
    fused = _fused({"f_first": 0.9, "f_last": 0.5, "f_other": 0.2, "a": 0.1, "b": 0.3, "c": 0.0})
    ceiling = 0.49
    for nid, lent in (("a", 0.9), ("b", 0.8), ("c", 0.9)):
        assert search._lend(fused, nid, lent, 1.0, ceiling)
    assert fused.scores["a"] == fused.scores["b"] == fused.scores["c"] == ceiling  # one score, id order
    search._spread_capped(fused)
    held = sorted(("a", "b", "c"), key=lambda i: -fused.scores[i])
    assert held == ["a", "c", "b"]  # 0.9 lent (a before c by id), then 0.8
    assert 0.5 > ceiling > fused.scores["a"] > fused.scores["c"] > fused.scores["b"] > 0.2
    assert len({round(fused.scores[i], 3) for i in held}) == 3
    # a hit lent less than the ceiling keeps what it was lent
    again = _fused({"f_first": 0.9, "x": 0.1})
    search._lend(again, "x", 0.5, 0.5, 0.49)
    search._spread_capped(again)
    assert again.scores["x"] == pytest.approx(0.3)


# ------------------------------------------------------------------ 5. successors


def test_a_superseded_hit_is_preceded_by_its_successor_shown_at_its_score_and_itself_just_under():
    st = toy_state(**SWITCHED)
    fused = _fused({"f_plan_a": 0.8, "f_refund": 0.6, "f_plan_b": 0.1})
    ranking = present_state.current_state_first(_query(st, "x"), ["f_plan_a", "f_refund"], fused, [])
    assert ranking.ids == ["f_plan_b", "f_plan_a", "f_refund"] and ranking.moved == {"f_plan_b"}
    assert ranking.scores == pytest.approx([0.8, 0.79, 0.6])  # apart, in the order they read
    off = _query(st, "x", config=DEFAULT.with_(fusion={"attach_successors": False}))
    assert present_state.current_state_first(off, ["f_plan_a", "f_refund"], fused, []).ids == [
        "f_plan_a",
        "f_refund",
    ]


def test_scores_never_rise_down_the_list_outside_an_end_state_head():
    # a hit topped up from the backup (placed by rule, after the ranked ones) shows no more than the one above
    fused = _fused({"f_refund": 0.6, "f_pricing": 0.3, "f_plan_b": 0.9})
    ranking = present_state.current_state_first(
        _query(toy_state(), "x"), ["f_refund", "f_pricing", "f_plan_b"], fused, []
    )
    assert ranking.scores == pytest.approx([0.6, 0.3, 0.29])


# A fragment holding two matters (m1, m2); a later one (m3) replaces only the first.
MOVING = {
    "c_life": {
        "s_moving": {
            "f_flat": ["I get the keys to the flat on 24 May.", "Need help with the van on moving day?"],
            "f_keys": ["Keys pushed to 31 May, the previous tenant is delayed."],
            "f_cake": ["Carrot cake for the party."],
        }
    }
}


@pytest.mark.parametrize(
    "why, best_match, successor_score, fusion, leads",
    [
        ("the query matched the line replaced", "m1", 0.1, {}, True),
        ("the query matched another matter of the fragment", "m2", 0.1, {}, False),
        ("the successor matches the query itself", "m2", 0.5, {}, True),
        ("every successor leads with the share at 0", "m2", 0.0, {"successor_lead_share": 0.0}, True),
        ("none of the hit's messages was scored", "m9", 0.1, {}, True),
    ],
)
def test_a_successor_leads_only_when_the_update_is_about_what_the_query_matched(
    why, best_match, successor_score, fusion, leads
):
    st = toy_state(MOVING, updates=(("f_keys", "f_flat", "m3", "m1"),))
    q = _query(st, "Who helps with the van?", config=DEFAULT.with_(fusion=fusion))
    fused = _fused({"f_flat": 0.9, "f_cake": 0.5, "f_keys": successor_score})
    matches = {"m1": 0.2, "m2": 0.2, best_match: 0.9} if best_match != "m9" else {"m9": 0.9}
    ranking = present_state.current_state_first(q, ["f_flat", "f_cake"], fused, [], matches)
    if leads:
        assert ranking.ids == ["f_keys", "f_flat", "f_cake"] and ranking.moved == {"f_keys"}, why
    else:  # still returned, after the ranked hits, at its own score
        assert ranking.ids == ["f_flat", "f_cake", "f_keys"] and not ranking.moved, why
        assert ranking.scores == [0.9, 0.5, successor_score]
    # without the query's message matches (a caller that has none) every successor leads
    assert present_state.current_state_first(q, ["f_flat", "f_cake"], fused, []).ids[0] == "f_keys"


# One fragment linked per message (`build.update_links` "message"): m4 replaces its van line, m3 its keys.
_MOVED = dict(MOVING["c_life"]["s_moving"])
MOVING_TWICE = {
    "c_life": {
        "s_moving": {
            **{k: v for k, v in _MOVED.items() if k != "f_cake"},
            "f_van": ["Van's off, Sam is lending us his car instead."],
            "f_cake": _MOVED["f_cake"],
        }
    }
}


def test_a_hit_linked_per_message_is_led_only_by_the_successor_on_the_matched_branch():
    """Two links into one fragment, one per matter: the query matched the van line, so only the van's
    successor leads; the keys' successor keeps its own place, as it would unlinked."""
    st = toy_state(MOVING_TWICE, updates=(("f_keys", "f_flat", "m3", "m1"), ("f_van", "f_flat", "m4", "m2")))
    q = _query(st, "Who helps with the van?")
    fused = _fused({"f_flat": 0.9, "f_cake": 0.5, "f_keys": 0.6, "f_van": 0.3})
    ranking = present_state.current_state_first(
        q, ["f_flat", "f_keys", "f_cake"], fused, [], {"m1": 0.2, "m2": 0.9}
    )
    assert ranking.moved == {"f_van"}
    assert ranking.ids.index("f_van") < ranking.ids.index("f_flat") < ranking.ids.index("f_keys")
    # the keys question meets the keys' successor first, and the van's stays where it ranked
    keys = present_state.current_state_first(
        q, ["f_flat", "f_keys", "f_cake"], fused, [], {"m1": 0.9, "m2": 0.2}
    )
    assert keys.moved == {"f_keys"} and keys.ids.index("f_keys") < keys.ids.index("f_flat")


def test_a_successor_already_above_its_old_hit_counts_as_placed_only_when_it_leads():
    # f_keys replaces f_flat's m1, but the query matched f_flat's other matter (m2) and f_keys scores
    # under the lead share: ranked above f_flat already (a newer hit lifted), it is no placed successor,
    # so its link's messages lead neither hit
    st = toy_state(MOVING, updates=(("f_keys", "f_flat", "m3", "m1"),))
    q = _query(st, "Who helps with the van?")
    fused = _fused({"f_flat": 0.9, "f_cake": 0.5, "f_keys": 0.1})
    matches = {"m1": 0.2, "m2": 0.9}
    ranking = present_state.current_state_first(q, ["f_keys", "f_flat", "f_cake"], fused, [], matches)
    assert ranking.ids == ["f_keys", "f_flat", "f_cake"] and not ranking.moved
    assert search._link_messages(q, ranking) == {}
    # when it leads (the query matched the line replaced), it is placed, and the link leads both
    led = present_state.current_state_first(
        q, ["f_keys", "f_flat", "f_cake"], fused, [], {"m1": 0.9, "m2": 0.2}
    )
    assert led.moved == {"f_keys"}
    assert search._link_messages(q, led) == {"f_flat": ("m1",), "f_keys": ("m3",)}


TRIP = {
    "c_trip": {
        "s_trip": {
            "f_first": ["4 of us are going on the team trip.", "The trip goes to Moganshan."],
            "f_second": ["Switch the trip to Anji instead.", "5 of us are going now."],
            "f_third": ["7 of us are going in the end."],
        }
    }
}


def test_a_successor_linked_for_another_matter_of_its_fragment_does_not_hold_off_a_newer_hit():
    # f_second replaces f_first's venue line (m2); the question asks the head count, which f_first's m1
    # matched: f_second leads by its score alone, and the newest count (f_third) still reads first.
    st = toy_state(TRIP, updates=(("f_second", "f_first", "m3", "m2"),))
    q = _query(st, "How many of us are going on the trip in the end?")
    fused = _fused({"f_second": 0.85, "f_first": 0.8, "f_third": 0.7})
    matches = {"m1": 0.9, "m2": 0.2, "m3": 0.3, "m4": 0.8, "m5": 0.8}
    ranking = present_state.current_state_first(q, ["f_second", "f_first", "f_third"], fused, [], matches)
    assert ranking.ids.index("f_third") < ranking.ids.index("f_second") < ranking.ids.index("f_first")
    # when the question matched the line the link replaced, the successor holds its place where placed
    # hits always keep theirs in the end-state head; by default one that states no decision reads with
    # the rest, newest first
    about_venue = {"m1": 0.2, "m2": 0.9, "m3": 0.8, "m4": 0.3, "m5": 0.3}
    ranked = ["f_second", "f_first", "f_third"]
    always = _query(st, q.text, config=DEFAULT.with_(fusion={"end_state_holds_placed": "always"}))
    assert present_state.current_state_first(always, ranked, fused, [], about_venue).ids[0] == "f_second"
    assert present_state.current_state_first(q, ranked, fused, [], about_venue).ids[0] == "f_third"


@pytest.mark.parametrize(
    "why, judged, successor_share, fusion, leads",
    [
        ("in the band, a link the judge distrusts", -1.0, 0.6, {}, False),
        ("in the band, a link the judge trusts", 0.0, 0.6, {}, True),
        ("above the band, unjudged", -1.0, 0.75, {}, True),
        ("no judgement asked", -1.0, 0.6, {"successor_lead_judge": None}, True),
    ],
)
def test_a_successor_leading_by_its_score_alone_needs_the_judge_below_the_band_top(
    monkeypatch, why, judged, successor_share, fusion, leads
):
    # f_keys replaces f_flat's m1; the query matched f_flat's other matter (m2), so f_keys leads by its
    # score alone: from 0.5 to 0.7 of f_flat's only when the judge scores m3 -> m1 at least -0.5
    st = toy_state(MOVING, updates=(("f_keys", "f_flat", "m3", "m1"),))
    q = _query(st, "Who helps with the van?", config=DEFAULT.with_(fusion=fusion))
    judge = lambda st, mid: {"m1": judged} if mid == "m3" else {}  # noqa: E731
    monkeypatch.setattr(present_state, "_judged_candidates", judge)
    fused = _fused({"f_flat": 0.9, "f_cake": 0.3, "f_keys": successor_share * 0.9})
    ranking = present_state.current_state_first(q, ["f_flat", "f_cake"], fused, [], {"m1": 0.2, "m2": 0.9})
    assert (ranking.ids[0] == "f_keys") == leads, why


@pytest.mark.parametrize("judged, leads", [(set(), True), ({"f_keys"}, False)])
def test_a_link_leads_a_hit_only_when_its_successor_was_placed_before_it_by_the_link(judged, leads):
    # f_keys replaces f_flat's m1 (a builder link); placed by a search-time judgement before another hit
    # instead, it sits below f_flat, and its link says nothing about why f_flat is shown where it is
    st = toy_state(MOVING, updates=(("f_keys", "f_flat", "m3", "m1"),))
    q = _query(st, "When do we get the keys now?")
    order = ["f_keys", "f_flat", "f_cake"] if not judged else ["f_flat", "f_keys", "f_cake"]
    ranking = search.Ranking(order, [0.9, 0.8, 0.5], [], {"f_keys"}, judged=judged)
    expected = {"f_flat": ("m1",), "f_keys": ("m3",)} if leads else {}
    assert search._link_messages(q, ranking) == expected


RECOUNTS = {
    "c_party": {
        "s_list": {
            "f_draft": ["Guest list draft: I count 40, the Bristol cousins too."],
            "f_recount": ["Recount with the Bristol cousins: 46."],
            "f_final": ["Final number for the caterer: 52."],
        }
    }
}


@pytest.mark.parametrize(
    "why, mentions, update, scores, ranked, order, newer",
    [
        (
            # f_recount is newer than f_draft and names the same cousins: lifted above f_draft, which sat
            # above its successor f_final; the successor goes back before it
            "lifted past another hit",
            {"f_draft": ["Bristol"], "f_recount": ["Bristol"]},
            ("f_final", "f_recount"),
            {"f_draft": 0.8, "f_final": 0.7, "f_recount": 0.75},
            ["f_draft", "f_final", "f_recount"],
            ["f_final", "f_recount", "f_draft"],
            {"f_recount"},
        ),
        (
            # a link the wrong way round (f_final superseded by the older f_recount, ranked above it):
            # lifted past its own successor only, it goes back behind it, where it began, and is not "newer"
            "lifted past its own successor only",
            {"f_final": ["Bristol"], "f_recount": ["Bristol"]},
            ("f_recount", "f_final"),
            {"f_recount": 0.8, "f_final": 0.75, "f_draft": 0.3},
            ["f_recount", "f_final", "f_draft"],
            ["f_recount", "f_final", "f_draft"],
            set(),
        ),
    ],
)
def test_a_superseded_hit_lifted_as_the_newer_word_stays_behind_its_successor(
    why, mentions, update, scores, ranked, order, newer
):
    st = toy_state(RECOUNTS, mentions=mentions, updates=(update,))
    q = _query(
        st, "How many guests are we expecting?", config=DEFAULT.with_(fusion={"present_state_judge": None})
    )
    ranking = present_state.current_state_first(q, ranked, _fused(scores), [])
    assert ranking.ids == order, why
    assert ranking.lifted & {"f_recount", "f_final"} == newer, why


def test_a_successor_that_does_not_lead_keeps_its_own_rank():
    st = toy_state(MOVING, updates=(("f_keys", "f_flat", "m3", "m1"),))
    q = _query(st, "Who helps with the van?")
    fused = _fused({"f_flat": 0.9, "f_cake": 0.5, "f_keys": 0.3})
    ranking = present_state.current_state_first(q, ["f_flat", "f_cake", "f_keys"], fused, [], {"m2": 0.9})
    assert ranking.ids == ["f_flat", "f_cake", "f_keys"] and ranking.scores == [0.9, 0.5, 0.3]


def test_before_the_switch_a_fact_has_no_successor_to_place():
    st = toy_state(**SWITCHED)
    q = _query(st, "x", as_of=BEFORE_THE_SWITCH)
    ranking = present_state.current_state_first(q, ["f_plan_a"], _fused({"f_plan_a": 0.8}), [])
    assert ranking.ids == ["f_plan_a"] and not ranking.moved


@pytest.mark.parametrize(
    "why, text, fusion, as_of, placed",
    [
        ("the judge scores plan B's message as replacing plan A's", "Which plan is it now?", {}, None, True),
        ("a question not about the end state", "Which plan for the hosting?", {}, None, False),
        (
            "the option serving it too",
            "Which plan for the hosting?",
            {"judged_successor_questions": "not_past"},
            None,
            True,
        ),
        ("off", "Which plan is it now?", {"judged_successor_floor": None}, None, False),
        (
            "a floor the pair does not reach",
            "Which plan is it now?",
            {"judged_successor_floor": 9.0},
            None,
            False,
        ),
        (
            "a question about the past",
            "Which plan first?",
            {"judged_successor_questions": "not_past"},
            None,
            False,
        ),
        ("plan B not yet said", "Which plan is it now?", {}, BEFORE_THE_SWITCH, False),
        (
            "a value the asker remembers asks for the end",
            "Which plan for the hosting? I thought it was plan A",
            {},
            None,
            True,
        ),
        (
            "remembered, though it says before",
            "Which plan did we have before? I thought it was plan A",
            {},
            None,
            True,
        ),
    ],
)
def test_a_successor_the_builder_did_not_link_goes_before_the_hit_it_replaces(
    why, text, fusion, as_of, placed
):
    st = toy_state()  # no updates link: "Pause plan A: we switched to plan B" judged at search time
    q = _query(st, text, config=DEFAULT.with_(fusion=fusion), as_of=as_of)
    fused = _fused({"f_plan_a": 0.8, "f_refund": 0.6})
    ranking = present_state.current_state_first(
        q, ["f_plan_a", "f_refund"], fused, [], {"m3": 0.9, "m1": 0.2}
    )
    if placed:
        # each hit keeps its score, the successor new to the hits its own: a budget shows the same messages
        assert ranking.ids == ["f_plan_b", "f_plan_a", "f_refund"] and ranking.moved == {"f_plan_b"}, why
        assert ranking.scores == [0.0, 0.8, 0.6]
        assert ranking.judged == {"f_plan_b"}, why  # placed by no link: it lends no link's focus
    else:
        assert ranking.ids == ["f_plan_a", "f_refund"] and not ranking.moved and not ranking.judged, why


SANDWICHES = {
    "c_finals": {
        "s_food": {
            "f_48": ["Call it 48 for food for now."],
            "f_56": ["Food numbers: RSVPs through the captains, we're at 56 already."],
            "f_63": ["Numbers creeping, the winners bring partners. 63 now."],
        }
    }
}
# The judge as it read a value that changed twice: 56 and 63 each replace 48 (log-odds -1.1, -1.3), but
# 63 is scored against 56 far lower (-3.1), so the builder linked neither and 56 has no successor of its own.
CHAIN_JUDGED = {"m2": {"m1": -1.1}, "m3": {"m1": -1.3, "m2": -3.1}}


@pytest.mark.parametrize(
    "why, fusion, order",
    [
        ("the chain followed: 63 replaces 48, which 56 replaced", {}, ["f_63", "f_56", "f_48"]),
        (
            "without the chain only 48 has a successor, the highest scored",
            {"judged_successor_chain": False},
            None,
        ),
        ("a floor the chain's links do not reach", {"judged_successor_floor": -1.2}, None),
    ],
)
def test_a_judged_successor_follows_a_value_that_changed_twice_to_its_end(monkeypatch, why, fusion, order):
    st = toy_state(SANDWICHES)
    monkeypatch.setattr(present_state, "_judged_candidates", lambda _st, mid: CHAIN_JUDGED.get(mid, {}))
    monkeypatch.setattr(
        present_state, "later_neighbours", lambda _st, mid, keep: [m for m in ("m2", "m3") if keep(m)]
    )
    # the other end-state rules off: the newest-first head alone would put 63 first here
    alone = {"end_state_head": 0, "newer_first": 0.0, **fusion}
    q = _query(st, "How many am I doing sandwiches for now?", config=DEFAULT.with_(fusion=alone))
    ranked = ["f_56", "f_48", "f_63"]
    ranking = present_state.current_state_first(
        q, ranked, _fused({"f_56": 0.7, "f_48": 0.65, "f_63": 0.5}), [], {"m2": 0.9, "m1": 0.8, "m3": 0.3}
    )
    if order is None:
        assert "f_63" not in ranking.judged, why
        assert ranking.ids.index("f_56") < ranking.ids.index("f_63"), why
    else:
        assert ranking.ids == order and "f_63" in ranking.judged, why


# The judge unsure that 63 replaces 48 (-3.0, under `judged_successor_floor`); 63 is the later message
# nearest 48 by vector, and 56 is judged to replace nothing.
NEAREST_JUDGED = {"m3": {"m1": -3.0}}


@pytest.mark.parametrize(
    "why, neighbours, scores, fusion, placed",
    [
        ("the nearest later message, matching the query nearly as well", ["m3", "m2"], 0.65, {}, True),
        ("not the nearest: the floor stays", ["m2", "m3"], 0.65, {}, False),
        ("matching the query far less well than the hit", ["m3", "m2"], 0.5, {}, False),
        (
            "no lower floor for the nearest",
            ["m3", "m2"],
            0.65,
            {"judged_successor_nearest_floor": None},
            False,
        ),
        (
            "a nearest floor the pair still reaches",
            ["m3", "m2"],
            0.65,
            {"judged_successor_nearest_floor": -3.5},
            True,
        ),
        (
            "a nearest floor the pair does not reach",
            ["m3", "m2"],
            0.65,
            {"judged_successor_nearest_floor": -2.5},
            False,
        ),
    ],
)
def test_the_nearest_later_message_is_judged_a_successor_at_a_lower_floor(
    monkeypatch, why, neighbours, scores, fusion, placed
):
    st = toy_state(SANDWICHES)
    monkeypatch.setattr(present_state, "_judged_candidates", lambda _st, mid: NEAREST_JUDGED.get(mid, {}))
    monkeypatch.setattr(
        present_state, "later_neighbours", lambda _st, mid, keep: [m for m in neighbours if keep(m)]
    )
    alone = {"end_state_head": 0, "newer_first": 0.0, **fusion}
    q = _query(st, "How many am I doing sandwiches for now?", config=DEFAULT.with_(fusion=alone))
    ranking = present_state.current_state_first(
        q, ["f_48", "f_56", "f_63"], _fused({"f_48": 0.7, "f_56": 0.68, "f_63": scores}), [], {"m1": 0.9}
    )
    if placed:
        assert ranking.ids[:2] == ["f_63", "f_48"] and ranking.judged == {"f_63"}, why
    else:
        assert ranking.ids == ["f_48", "f_56", "f_63"] and not ranking.judged, why


GUESTS = {
    "c_party": {
        "s_venue": {"f_hall": ["The hall fits 60 guests, we pay 300 for it."]},
        "s_guests": {
            "f_draft": ["Guest list draft: I count 40 guests incl. us."],
            "f_cake": ["The cake needs to feed the guests, chocolate please."],
            "f_final": ["With the cousins and plus-ones the guests are at 52."],
            "f_same": ["Still 40 guests on the list, no news."],
        },
    }
}
HOW_MANY = "How many guests are coming?"


def _newer_first(ranked, scores, text=HOW_MANY, tree=GUESTS, **fusion):
    q = _query(toy_state(tree), text, config=DEFAULT.with_(fusion=fusion) if fusion else DEFAULT)
    return present_state._newer_first(q, ranked, scores)[0]


def test_a_newer_hit_that_restates_an_older_one_with_a_change_goes_just_before_it():
    scores = {"f_draft": 0.8, "f_cake": 0.7, "f_final": 0.6}
    assert _newer_first(["f_draft", "f_cake", "f_final"], scores) == ["f_final", "f_draft", "f_cake"]
    # and the whole search shows it so: the builder linked no update here
    hits = present_state.current_state_first(
        _query(toy_state(GUESTS), HOW_MANY), ["f_draft", "f_final"], _fused(scores), []
    )
    assert hits.ids == ["f_final", "f_draft"] and hits.lifted == {"f_final"} and not hits.moved
    # it takes the older hit's score, the older one just under it, and its via says why it stands first
    assert hits.scores == pytest.approx([0.8, 0.79])
    nothing = RelationResult(set(), {}, {}, 0)
    sem = SemanticResult(dict(scores), dict(scores), {})
    assert search._via("f_final", hits, _fused(scores), nothing, sem) == (Via.SEMANTIC, Via.NEWER)
    assert search._via("f_draft", hits, _fused(scores), nothing, sem) == (Via.SEMANTIC,)


@pytest.mark.parametrize(
    "why, ranked, scores, text, fusion",
    [
        ("too weak to be lifted", ["f_draft", "f_final"], {"f_draft": 0.8, "f_final": 0.5}, HOW_MANY, {}),
        ("states no change", ["f_draft", "f_same"], {"f_draft": 0.8, "f_same": 0.7}, HOW_MANY, {}),
        ("older than the hit", ["f_final", "f_draft"], {"f_final": 0.8, "f_draft": 0.7}, HOW_MANY, {}),
        ("another subtopic", ["f_hall", "f_final"], {"f_hall": 0.8, "f_final": 0.7}, HOW_MANY, {}),
        (
            "no query word in both",
            ["f_draft", "f_final"],
            {"f_draft": 0.8, "f_final": 0.7},
            "How many cousins are coming?",
            {},
        ),
        (
            "asks about the past",
            ["f_draft", "f_final"],
            {"f_draft": 0.8, "f_final": 0.7},
            "How many guests at first?",
            {},
        ),
        (
            "turned off",
            ["f_draft", "f_final"],
            {"f_draft": 0.8, "f_final": 0.7},
            HOW_MANY,
            {"newer_first": 0.0},
        ),
    ],
)
def test_a_newer_hit_stays_where_it_ranks_unless_it_restates_the_older_with_a_change(
    why, ranked, scores, text, fusion
):
    assert _newer_first(ranked, scores, text, **fusion) == ranked, why


@pytest.mark.parametrize(
    "text, first",
    [
        ("How many guests at first?", "f_draft"),  # the earlier state, where it ranks
        ("How many guests are coming now, and how many at first?", "f_final"),  # both: the end first
        ("最后来多少客人？一开始是多少？", "f_final"),
        # "actually" asks for the value that held; "first" there names the list, not an earlier state
        ("How many guests did the first list actually have?", "f_final"),
    ],
)
def test_a_question_about_the_past_that_also_asks_where_it_ended_reads_the_state_in_force_first(text, first):
    scores = {"f_draft": 0.8, "f_final": 0.7}
    tree = {
        "c_party": {
            "s_guests": {
                "f_draft": ["Guest list draft: I count 40 guests incl. us. 客人40个"],
                "f_final": ["With the cousins and plus-ones the guests are at 52. 客人改成52个"],
            }
        }
    }
    assert _newer_first(["f_draft", "f_final"], scores, text, tree=tree)[0] == first


def test_a_superseded_hit_stays_behind_its_successor_which_may_move_further():
    """Plan B, linked as plan A's successor, also restates the older cost with a change: it goes
    above both, and plan A stays right behind what replaced it."""
    tree = {
        "c_work": {
            "s_hosting": {
                "f_cost": ["The hosting migration costs 900 a month on plan A."],
                "f_plan_a": ["We prioritise plan A for the hosting migration."],
                "f_plan_b": ["Pause plan A: we switched to plan B for the hosting migration, 700 a month."],
            }
        }
    }
    st = toy_state(tree, updates=(("f_plan_b", "f_plan_a"),))
    q = _query(st, "What is the hosting migration plan?")
    fused = _fused({"f_cost": 0.9, "f_plan_a": 0.85, "f_plan_b": 0.8})
    ranking = present_state.current_state_first(q, ["f_cost", "f_plan_a", "f_plan_b"], fused, [])
    assert ranking.ids == ["f_plan_b", "f_cost", "f_plan_a"]
    assert ranking.scores == pytest.approx([0.9, 0.89, 0.85])  # placed by rule: at the place it took


SIGNED = {
    "c_customer": {"s_kickoff": {"f_kickoff": ["Kick-off with Nordwind: they are on the Team plan today."]}},
    "c_billing": {
        "s_quotes": {
            "f_quote": ["Sent Nordwind the Business plan quote."],
            "f_signed": ["Nordwind confirmed the Business plan. Contract signed!"],
        }
    },
}


@pytest.mark.parametrize(
    "text, anywhere, first",
    [
        ("Which plan did Nordwind confirm in the end?", True, "f_signed"),
        ("Which plan did Nordwind confirm in the end?", False, "f_kickoff"),  # another subtopic
        ("Which plan is Nordwind on?", True, "f_kickoff"),  # does not ask for the end state
    ],
)
def test_asked_for_the_end_state_a_newer_decision_goes_first_from_any_subtopic(text, anywhere, first):
    scores = {"f_kickoff": 0.8, "f_signed": 0.6}
    q = _query(toy_state(SIGNED), text, config=DEFAULT.with_(fusion={"newer_first_anywhere": anywhere}))
    assert present_state._newer_first(q, ["f_kickoff", "f_signed"], scores)[0][0] == first
    # a newer message with no change cue and no decision does not cross subtopics
    q = _query(toy_state(SIGNED), text, config=DEFAULT.with_(fusion={"newer_first_anywhere": True}))
    assert (
        present_state._newer_first(q, ["f_kickoff", "f_quote"], {"f_kickoff": 0.8, "f_quote": 0.7})[0][0]
        == "f_kickoff"
    )


ENDED = ["f_kickoff", "c_billing", "f_quote", "f_signed"]  # as ranked; kick-off oldest, signing newest


@pytest.mark.parametrize(
    "text, head, order",
    [
        # asks for the end state: the fragment hits among the first three newest first, the parent stays
        ("Which plan did Nordwind take in the end?", 3, ["f_quote", "c_billing", "f_kickoff", "f_signed"]),
        ("Nordwind 最后选了哪个方案？", 3, ["f_quote", "c_billing", "f_kickoff", "f_signed"]),
        ("Which plan is Nordwind on now?", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        ("Which plan is Nordwind on now?", 2, ENDED),  # one fragment among the first two
        ("Which plan did Nordwind actually take?", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        ("Nordwind 到底选了哪个方案？", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        # how a matter is going asks where it stands now
        ("How is Nordwind's plan going?", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        ("Nordwind 方案那边怎么样了？", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        ("Any news on Nordwind's plan?", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        ("Is Nordwind still on the Team plan?", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        ("Nordwind 方案签了没？", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        # what was decided is the decision in force
        ("Which plan did Nordwind decide on?", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        ("Nordwind 方案定的哪个？", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        ("Nordwind 预定了哪个方案？", 4, ENDED),  # 预定 (booked) holds 定 but asks no decision
        # why a decision was made asks for its reason, not the end state; a named end still counts
        ("Why did Nordwind decide on a plan?", 4, ENDED),
        ("Nordwind 为什么决定换方案？", 4, ENDED),
        ("Why did Nordwind end up on this plan?", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        ("Nordwind 为什么最后选了这个方案？", 4, ["f_signed", "c_billing", "f_quote", "f_kickoff"]),
        # asks where it ended and where it began: the end first too
        (
            "Which plan is Nordwind on now, and which did it take first?",
            4,
            ["f_signed", "c_billing", "f_quote", "f_kickoff"],
        ),
        # asks about the past only, does not ask for the end state, or turned off: as ranked
        ("Which plan did Nordwind take first?", 4, ENDED),
        ("Which plan did Nordwind take?", 4, ENDED),
        # a week named asks for that week's plan, which may be an older message than the newest hit
        ("Which plan is Nordwind trying this week?", 4, ENDED),
        ("Nordwind 这周用哪个方案？", 4, ENDED),
        ("Which plan did Nordwind take in the end?", 0, ENDED),
    ],
)
def test_asked_for_the_end_state_the_first_fragment_hits_read_newest_first(text, head, order):
    q = _query(toy_state(SIGNED), text, config=DEFAULT.with_(fusion={"end_state_head": head}))
    got, lifted = present_state._state_in_force_first(q, ENDED, {})
    assert got == order
    assert lifted == {i for i in order if order.index(i) < ENDED.index(i)}


REFUND_THEN_TRIP = {
    "c_orders": {"s_refund": {"f_refund": ["My refund for order 42 timed out at the bank."]}},
    "c_trips": {"s_lisbon": {"f_trip": ["We are flying to Lisbon in June for my sister's birthday."]}},
}


@pytest.mark.parametrize(
    "text, order",
    [
        # only asks how the matter is going: the newer hit on another matter keeps its place
        ("Any news on the refund for order 42?", ["f_refund", "f_trip"]),
        ("How is the refund for order 42 going?", ["f_refund", "f_trip"]),
        ("退款最近怎么样了？", ["f_refund", "f_trip"]),
        ("Has the refund for order 42 gone through yet?", ["f_refund", "f_trip"]),
        # names the end: the first fragment hits read newest first, whatever their matter
        ("Where does the refund for order 42 stand now?", ["f_trip", "f_refund"]),
    ],
)
def test_asked_how_a_matter_is_going_only_a_newer_hit_on_its_matter_reads_first(text, order):
    """A small memory's newest hit is often another matter: "Any news on the refund?" once read a trip
    to Lisbon first."""
    q = _query(toy_state(REFUND_THEN_TRIP), text, config=DEFAULT.with_(fusion={"end_state_head": 4}))
    assert present_state._state_in_force_first(q, ["f_refund", "f_trip"], {})[0] == order


def test_a_hit_already_placed_as_the_newer_word_keeps_its_place_in_the_end_state_head_when_told():
    """With ``end_state_holds_placed`` "always", every placed hit keeps its place in the head."""
    q = _query(
        toy_state(SIGNED),
        "Which plan did Nordwind take in the end?",
        config=DEFAULT.with_(fusion={"end_state_head": 4, "end_state_holds_placed": "always"}),
    )
    got, lifted = present_state._state_in_force_first(q, ENDED, {}, placed={"f_quote"})
    assert got == ["f_quote", "c_billing", "f_signed", "f_kickoff"] and lifted == {"f_quote", "f_signed"}


CONFIRMED = "Which plan did Nordwind confirm in the end?"
# The signing, then a newer go-live note on the same plan that states no decision.
SIGNED_LIVE = {
    "c_customer": SIGNED["c_customer"],
    "c_billing": {
        "s_quotes": {
            "f_signed": ["Nordwind confirmed the Business plan. Contract signed!"],
            "f_live": ["Nordwind went live today: 40 users on the Business plan."],
        }
    },
}


@pytest.mark.parametrize(
    "why, text, first",
    [
        ("the question names a decision: the placed signing keeps its place", CONFIRMED, "f_signed"),
        ("the same in Chinese (决定)", "Nordwind 最后决定用哪个方案？", "f_signed"),
        (
            "no decision named: the head reads newest first, the placed hit too",
            "Which plan is Nordwind on now?",
            "f_live",
        ),
    ],
)
def test_in_the_end_state_head_a_placed_decision_holds_only_where_the_question_names_one(why, text, first):
    """The demo: the signed contract, placed first by its link, was read after the go-live note, newer
    and unlinked. Other placed hits read with the rest: a link from an older state places the middle
    one, and the state in force, newer and unlinked, read after it."""
    q = _query(toy_state(SIGNED_LIVE), text, config=DEFAULT.with_(fusion={"end_state_head": 4}))
    ranked = ["f_kickoff", "f_signed", "f_live"]
    got, _ = present_state._state_in_force_first(q, ranked, {}, placed={"f_signed"})
    assert got[0] == first, why


# A head count restated as it creeps up (18, 20, 21), among notes that state no number; a day apart each.
CREEPING = {
    "c_team": {
        "s_trip": {
            "f_first": ["We're 18 going to the tournament."],
            "f_kit": ["Kit order placed with the shop."],
            "f_more": ["Two more signed up, 20 now."],
            "f_bus": ["Bus booked for the day."],
            "f_menu": ["Menu sorted for the dinner."],
            "f_flyer": ["Flyers printed."],
            "f_photo": ["Photos from training."],
            "f_last": ["Lin is in too, that makes 21."],
        }
    }
}
# as ranked: the first four already newest first, the newest count eighth
CREEPING_RANKED = ["f_photo", "f_flyer", "f_menu", "f_bus", "f_more", "f_first", "f_kit", "f_last"]
CREEPING_UP = ["f_photo", "f_flyer", "f_menu", "f_bus", "f_last", "f_more", "f_first", "f_kit"]


@pytest.mark.parametrize(
    "text, amount_head, order",
    [
        # asks for the end state and a count: the newest count goes before the first older one
        ("How many are going now?", 10, CREEPING_UP),
        ("现在一共几个人去？", 10, CREEPING_UP),
        ("How many are going now?", 8, CREEPING_UP),
        # past the head, off, or no amount asked: as ranked
        ("How many are going now?", 7, CREEPING_RANKED),
        ("How many are going now?", 0, CREEPING_RANKED),
        ("Who is going now?", 10, CREEPING_RANKED),
        ("现在几点出发？", 10, CREEPING_RANKED),  # 几点 asks for a time
        # not asking for the end state: the present-state pass only (same matter by entity: none here)
        ("How many are going?", 10, CREEPING_RANKED),
    ],
)
def test_asked_how_many_now_the_newest_count_goes_before_the_older_ones(text, amount_head, order):
    config = DEFAULT.with_(fusion={"amount_head": amount_head, "present_state_judge": None})
    q = _query(toy_state(CREEPING), text, config=config)
    got, lifted = present_state._state_in_force_first(q, CREEPING_RANKED, {})
    assert got == order
    assert lifted == ({"f_last"} if order == CREEPING_UP else set())


def test_the_newest_count_does_not_pass_a_hit_placed_as_the_newer_word():
    config = DEFAULT.with_(fusion={"present_state_judge": None})
    q = _query(toy_state(CREEPING), "How many are going now?", config=config)
    got, _ = present_state._state_in_force_first(q, CREEPING_RANKED, {}, placed={"f_more"})
    assert got == ["f_photo", "f_flyer", "f_menu", "f_bus", "f_more", "f_last", "f_first", "f_kit"]


# Guests counted twice (the Bristol cousins named in both), and an older, unrelated matter.
COUSINS = {
    "c_party": {
        "s_list": {"f_draft": ["Guest list draft: I count 40, the Bristol cousins too."]},
        "s_food": {"f_cake": ["Cake from Bakewell's."], "f_count": ["With the Bristol cousins we're at 52."]},
    }
}
COUNTED = ["f_draft", "f_cake", "f_count"]  # as ranked; f_count newest


@pytest.mark.parametrize(
    "why, text, mentions, scores, fusion, order",
    [
        (
            "a present question: the newer word on the cousins first",
            "How many guests are we expecting?",
            {"f_draft": ["Bristol"], "f_count": ["Bristol"]},
            {"f_draft": 0.8, "f_cake": 0.75, "f_count": 0.75},
            {},
            ["f_count", "f_draft", "f_cake"],
        ),
        (
            "no specific entity in common, and the update judge not asked",
            "How many guests are we expecting?",
            {"f_draft": ["Bristol"], "f_count": ["Hebden"]},
            {"f_draft": 0.8, "f_cake": 0.75, "f_count": 0.75},
            {"fusion": {"present_state_judge": None}},
            COUNTED,
        ),
        (
            "no specific entity in common, but the update judge reads 52 as replacing 40",
            "How many guests are we expecting?",
            {"f_draft": ["Bristol"], "f_count": ["Hebden"]},
            {"f_draft": 0.8, "f_cake": 0.75, "f_count": 0.75},
            {},
            ["f_count", "f_draft", "f_cake"],
        ),
        (
            "no specific entity in common, and the judge not that sure",
            "How many guests are we expecting?",
            {"f_draft": ["Bristol"], "f_count": ["Hebden"]},
            {"f_draft": 0.8, "f_cake": 0.75, "f_count": 0.75},
            {"fusion": {"present_state_judge": 50.0}},
            COUNTED,
        ),
        (
            "the entity is in too many fragments to be specific",
            "How many guests are we expecting?",
            {"f_draft": ["Bristol"], "f_cake": ["Bristol"], "f_count": ["Bristol"]},
            {"f_draft": 0.8, "f_cake": 0.75, "f_count": 0.75},
            {"relation": {"bridge_max_fragments": 2}, "fusion": {"present_state_judge": None}},
            COUNTED,
        ),
        (
            "the newer hit matches far worse",
            "How many guests are we expecting?",
            {"f_draft": ["Bristol"], "f_count": ["Bristol"]},
            {"f_draft": 0.8, "f_cake": 0.75, "f_count": 0.5},
            {},
            COUNTED,
        ),
        (
            "asks about the past",
            "How many guests did we count at first?",
            {"f_draft": ["Bristol"], "f_count": ["Bristol"]},
            {"f_draft": 0.8, "f_cake": 0.75, "f_count": 0.75},
            {},
            COUNTED,
        ),
        (
            "turned off",
            "How many guests are we expecting?",
            {"f_draft": ["Bristol"], "f_count": ["Bristol"]},
            {"f_draft": 0.8, "f_cake": 0.75, "f_count": 0.75},
            {"fusion": {"present_state_head": 0}},
            COUNTED,
        ),
    ],
)
def test_a_newer_hit_on_the_same_matter_goes_before_the_older_one(why, text, mentions, scores, fusion, order):
    """The same matter: a specific entity both name, or a pair the update judge scores at least
    ``fusion.present_state_judge`` (one the builder was too unsure to link)."""
    q = _query(toy_state(COUSINS, mentions=mentions), text, config=DEFAULT.with_(**fusion))
    got, lifted = present_state._state_in_force_first(q, COUNTED, scores)
    assert got == order, why
    assert lifted == {i for i in order if order.index(i) < COUNTED.index(i)}


# COUSINS with two more matters said between the draft and the count: the count, newest, ranks fifth,
# below the end-state head of four.
_FOOD = COUSINS["c_party"]["s_food"]
COUNT_LATE = {
    "c_party": {
        "s_list": COUSINS["c_party"]["s_list"],
        "s_food": {
            "f_cake": _FOOD["f_cake"],
            "f_wine": ["Wine from the shop on the corner."],
            "f_music": ["Band booked."],
            "f_count": _FOOD["f_count"],
        },
    }
}
COUNT_RANKED = ["f_draft", "f_cake", "f_wine", "f_music", "f_count"]
COUNT_READ = ["f_music", "f_wine", "f_cake", "f_draft"]  # the head of four, newest first


@pytest.mark.parametrize(
    "why, mentions, fusion, placed, order",
    [
        (
            "on the same matter: it goes before the older word too",
            {"f_draft": ["Bristol"], "f_count": ["Bristol"]},
            {"present_state_judge": None},
            set(),
            [*COUNT_READ[:3], "f_count", "f_draft"],
        ),
        (
            "no entity in common, but judged to replace it (52 after 40)",
            {"f_draft": ["Bristol"], "f_count": ["Hebden"]},
            {},
            set(),
            [*COUNT_READ[:3], "f_count", "f_draft"],
        ),
        (
            "another matter: it stays below the head",
            {"f_draft": ["Bristol"], "f_count": ["Hebden"]},
            {"present_state_judge": None},
            set(),
            [*COUNT_READ, "f_count"],
        ),
        (
            "a placed hit is held, in the head too where told",
            {"f_draft": ["Bristol"], "f_count": ["Bristol"]},
            {"present_state_judge": None, "end_state_holds_placed": "always"},
            {"f_draft"},
            ["f_draft", "f_music", "f_wine", "f_cake", "f_count"],
        ),
        (
            "a placed hit stating no decision reads with the rest in the head, and is held below it",
            {"f_draft": ["Bristol"], "f_count": ["Bristol"]},
            {"present_state_judge": None},
            {"f_draft"},
            [*COUNT_READ, "f_count"],
        ),
        (
            "beyond the first present_state_head",
            {"f_draft": ["Bristol"], "f_count": ["Bristol"]},
            {"present_state_judge": None, "present_state_head": 4},
            set(),
            [*COUNT_READ, "f_count"],
        ),
    ],
)
def test_asked_for_the_end_state_a_newer_hit_just_below_the_head_passes_the_older_word(
    why, mentions, fusion, placed, order
):
    # amount_head off: the amount pass would move the newest count whatever its matter (tested apart)
    config = DEFAULT.with_(fusion={"end_state_head": 4, "amount_head": 0, **fusion})
    q = _query(
        toy_state(COUNT_LATE, mentions=mentions),
        "How many guests are we expecting in the end?",
        config=config,
    )
    got, lifted = present_state._state_in_force_first(q, COUNT_RANKED, {}, placed=placed)
    assert got == order, why
    assert ("f_count" in lifted) == (order.index("f_count") < COUNT_RANKED.index("f_count")), why


@pytest.mark.parametrize(
    "why, mentions, fusion, first",
    [
        (
            "both placed, on the same matter: the newer reads first",
            {"f_draft": ["Bristol"], "f_count": ["Bristol"]},
            {},
            "f_count",
        ),
        (
            "both placed, on other matters: each holds its place",
            {"f_draft": ["Bristol"], "f_count": ["Hebden"]},
            {"present_state_judge": None},
            "f_draft",
        ),
        (
            "turned off: each placed hit holds its place",
            {"f_draft": ["Bristol"], "f_count": ["Bristol"]},
            {"held_pass_held": False},
            "f_draft",
        ),
    ],
)
def test_asked_for_the_end_state_a_placed_hit_is_passed_only_by_a_newer_placed_one_on_its_matter(
    why, mentions, fusion, first
):
    # amount_head off: the amount pass would move the newest count whatever its matter (tested apart);
    # placed hits keep their place in the head (by default only a decision, where one is asked)
    config = DEFAULT.with_(
        fusion={"end_state_head": 4, "amount_head": 0, "end_state_holds_placed": "always", **fusion}
    )
    q = _query(
        toy_state(COUNT_LATE, mentions=mentions),
        "How many guests are we expecting in the end?",
        config=config,
    )
    ranked = ["f_draft", "f_count", "f_cake", "f_wine"]
    got, _ = present_state._state_in_force_first(q, ranked, {}, placed={"f_draft", "f_count"})
    assert got[0] == first, why
    assert got.index("f_cake") > got.index("f_wine"), why  # the unplaced ones still read newest first


def test_a_hit_moved_up_for_the_end_state_keeps_its_score_and_says_newer():
    text = "Which plan did Nordwind take in the end?"
    fused = _fused({"f_kickoff": 0.8, "f_quote": 0.7, "f_signed": 0.2})
    q = _query(toy_state(SIGNED), text)
    ranking = present_state.current_state_first(q, ["f_kickoff", "f_quote", "f_signed"], fused, [])
    assert ranking.ids == ["f_signed", "f_quote", "f_kickoff"] and ranking.lifted == {"f_signed"}
    assert ranking.scores == [0.2, 0.7, 0.8]  # read newest first, each with its own score
    nothing = RelationResult(set(), {}, {}, 0)
    sem = SemanticResult(dict(fused.scores), dict(fused.scores), {})
    assert search._via("f_signed", ranking, fused, nothing, sem) == (Via.SEMANTIC, Via.NEWER)
    assert search._via("f_kickoff", ranking, fused, nothing, sem) == (Via.SEMANTIC,)


# ------------------------------------------------------------------ 6. hits


def test_hits_say_which_way_each_node_came_with_scores_clipped_to_0_1():
    st = toy_state(**SWITCHED)
    q = _query(st, "plan for the hosting migration")
    sem = SemanticResult({"f_plan_a": 0.9, "s_hosting": 0.4}, {}, {"s_hosting": "f_plan_a"})
    rel = RelationResult({}, {"f_plan_a": 0.5}, {"f_plan_a": 1}, 1)
    fused = search.Fused({}, {"f_plan_a": 0.9}, {"f_plan_a": 0.5}, True)
    ranking = search.Ranking(
        ["f_plan_b", "f_plan_a", "s_hosting", "f_tea", "f_lunch"],
        [1.3, 0.5, 0.7, 0.2, -0.1],
        supplemented=["f_tea"],
        moved={"f_plan_b"},
    )
    hits = search._to_hits(q, ranking, fused, rel, sem)
    assert [h.via for h in hits] == [
        ("successor",),
        ("semantic", "relation", "fallback"),
        ("expansion", "fallback"),
        ("supplement",),
        ("supplement",),  # no path found it: shown only to fill the list
    ]
    assert [h.score for h in hits] == [1.0, 0.5, 0.7, 0.2, 0.0]  # the ranking orders; _to_hits only clips
    plan_a = hits[1]
    assert plan_a.status == "superseded" and plan_a.successors == ("f_plan_b",)
    assert plan_a.source_ids == ("m3",) and "plan A for the hosting migration" in plan_a.text
    assert (plan_a.semantic_score, plan_a.relation_score) == (0.9, 0.5)
    assert plan_a.path == ("c_work", "s_hosting", "f_plan_a")


# ------------------------------------------------------------------ the whole search


def test_a_superseded_fact_comes_with_its_successor_first():
    st = toy_state(**SWITCHED)
    hits = _search(st, "prioritise plan A")  # plan A's own words: plan B ranks first only as its successor
    assert [h.node_id for h in hits[:2]] == ["f_plan_b", "f_plan_a"]
    new, old = hits[:2]
    assert old.status == "superseded" and old.successors == ("f_plan_b",)
    assert "successor" in new.via and new.score - 0.01 == pytest.approx(old.score)


def test_as_of_answers_from_what_was_known_then():
    st = toy_state(**SWITCHED)
    hits = _search(st, "plan A for the hosting migration", as_of=BEFORE_THE_SWITCH)
    by_id = {h.node_id: h for h in hits}
    assert by_id["f_plan_a"].status == "active" and "f_plan_b" not in by_id
    assert all("m4" not in h.source_ids for h in hits)
    assert _search(st, "plan A", as_of=T0 - timedelta(days=1)) == []  # nothing was said yet


def test_a_vague_query_falls_back_to_the_semantic_path():
    st = toy_state(mentions={"f_pricing": ["Acme"]})
    hits = _search(st, "how did that thing end up?")
    assert len(hits) >= 5
    found = [h for h in hits if h.via != ("successor",)]  # plan B comes as plan A's judged successor
    assert [h.node_id for h in hits if h not in found] == ["f_plan_b"]
    assert all("relation" not in h.via and ("fallback" in h.via or "supplement" in h.via) for h in found)
    named = _search(st, "What does Acme want for the pricing plan?")
    assert "relation" in named[0].via and all("fallback" not in h.via for h in named)


def test_a_search_returns_k_hits_when_memory_holds_them_unless_told_fewer():
    """A token budget is filled from the list a search returns: hits below the similarity
    threshold top it up to k (before: to 5, and a 2,048-token budget was left half empty)."""
    st = toy_state()
    nodes = len(st.graph.nodes())
    text = "zzzz qqqq"
    qvec = EMB.embed_queries([text])[0]
    hits = search.dual_path_search(st, text, qvec, nodes, DEFAULT, EMB.profile)
    assert len(hits) == nodes
    assert all(h.via == ("supplement",) for h in hits[5:])
    fewer = DEFAULT.with_(fusion={"min_results": 3})
    assert len(search.dual_path_search(st, text, qvec, nodes, fewer, EMB.profile)) < nodes


COUNT = {
    "c_party": {
        "s_guests": {
            "f_count": [
                "The guests loved the invitations, all the guests said thanks.",
                "The guests count is 40 so far.",
                "The hall has a piano.",
            ],
            "f_recount": [
                "The guests asked about guests' parking for guests.",
                "The guests count is now 52.",
            ],
        }
    }
}
RECOUNTED = (("f_recount", "f_count", "m5", "m2"),)  # m5 "now 52" replaces m2 "40 so far"


def _linked_pair(config=DEFAULT, updates=RECOUNTED):
    st = toy_state(COUNT, updates=updates)
    text = "guests"
    hits = search.dual_path_search(st, text, EMB.embed_queries([text])[0], 10, config, EMB.profile)
    by_id = {h.node_id: h for h in hits}
    return by_id["f_recount"], by_id["f_count"]


def test_a_linked_pair_shows_first_the_statement_replaced_and_the_one_replacing_it():
    new, old = _linked_pair()
    assert old.status == "superseded" and "successor" in new.via
    assert old.focus[0] == "m2" and new.focus[0] == "m5"
    # by match alone the invitations and the parking lead: the budget's one message would miss the change
    new, old = _linked_pair(DEFAULT.with_(fusion={"link_focus_hits": 0}))
    assert old.focus[:2] == ("m1", "m2") and new.focus == ("m4", "m5")


def test_a_linked_message_the_query_does_not_meet_does_not_lead():
    new, old = _linked_pair(updates=(("f_recount", "f_count", "m5", "m3"),))  # "the hall has a piano"
    assert old.focus[0] == "m1" and "m3" not in old.focus[:2]
    assert new.focus[0] == "m5"  # its own link message is still among its two best


@pytest.mark.parametrize(
    "text, end, only_past",
    [
        ("搬家是哪天？不是说5号吗", True, False),
        ("孙梅问我每天几点到几点，之前是不是说开到晚上八点？", True, False),
        ("比赛几点开踢来着？我记得说的是下午", True, False),
        ("When are we making the weather call? I had Friday evening down", True, False),
        ("Who's giving the vet talk? I thought it was Huw on the Saturday", True, False),
        ("Is it still on the 27th? That's what I wrote on the calendar.", True, False),
        ("what's the deposit on the rooms? was it always that?", True, False),
        ("Where are we setting off from – wasn't it Workington?", True, False),
        ("How many pages is the magazine going to be? I thought Margaret said 20.", True, False),
        ("Who's only coming for one night again?", True, False),
        ("周日在哪儿上课啊？还是物业那个活动室吧？", True, False),
        ("谢师宴是在哪家饭店办来着？我咋记得之前订的是另一家", True, False),
        # a named end, or a change the asker knows of
        ("What's the per-seat price at this point? Feels like it's moved a few times", True, False),
        ("How many lines are we ending up with on the new bar?", True, False),
        ("开业那天都安排了些什么？有啥变动吗", True, False),
        # no remembered value: a thought, an opinion, a question about the past
        ("I thought about the venue: which one did we book first?", False, True),
        ("我觉得那家不错，一开始说的是哪家？", False, True),
        ("Who brought the cake?", False, False),
    ],
)
def test_a_value_the_asker_remembers_asks_for_the_end_even_before_a_past_word(text, end, only_past):
    assert present_state.asks_for_the_end(text) is end
    assert present_state._asks_only_about_the_past(text) is only_past


# Stands promised, then fewer: no entity named in both, one word of the question in both, a value changed.
STANDS = {
    "c_show": {
        "s_kit": {"f_stands": ["Upton Stitchers: yes to 8 stands."], "f_tea": ["Tea rota is up."]},
        "s_loan": {"f_fewer": ["Farah says 6 stands, not 8. Two have broken feet."]},
    }
}
STANDS_RANKED = ["f_stands", "f_tea", "f_fewer"]


@pytest.mark.parametrize(
    "why, text, fusion, order",
    [
        (
            "a word of the question in both, the newer states other values",
            "How many stands are we getting?",
            {},
            ["f_fewer", "f_stands", "f_tea"],
        ),
        ("turned off", "How many stands are we getting?", {"present_state_restated": False}, STANDS_RANKED),
        ("no word of the question in both", "What are we borrowing?", {}, STANDS_RANKED),
        ("asks about the past", "How many stands did they offer at first?", {}, STANDS_RANKED),
    ],
)
def test_a_newer_hit_restating_a_value_the_question_names_goes_before_the_older_one(why, text, fusion, order):
    """``fusion.present_state_restated``: the same matter is also a word of the query held by both hits,
    where the newer states a change to the older."""
    config = DEFAULT.with_(fusion={"present_state_judge": None, **fusion})
    q = _query(toy_state(STANDS), text, config=config)
    scores = {"f_stands": 0.8, "f_tea": 0.75, "f_fewer": 0.75}
    got, _ = present_state._state_in_force_first(q, STANDS_RANKED, scores)
    assert got == order, why
