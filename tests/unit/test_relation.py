"""The relation path (``retrieval/relation.py``) on a hand-built graph: seeds are the query's
entities weighted by how rare they are, the traversal walks only the configured edge kinds up to
``max_hops``, and a node's score falls with its distance by the configured decay."""

from __future__ import annotations

import math

import pytest
from _toy_graph import entity_id, hierarchy, toy_state

from mnemis_integrations.core.model import EdgeKind
from mnemis_integrations.core.recipes import DEFAULT
from mnemis_integrations.core.retrieval.relation import DECAYS, decay, relation_path
from mnemis_integrations.errors import ConfigError

ACME, BANK = entity_id("Acme"), entity_id("Bank")
# From Acme (mentioned by f_pricing only), over the hierarchy's belongs_to edges both ways.
AROUND_ACME = {"f_pricing": 1, "s_billing": 2, "f_refund": 3, "c_work": 3}


def _relation(st, query: str, **cfg):
    return relation_path(st, query, DEFAULT.with_(relation=cfg).relation, hierarchy(st))


@pytest.mark.parametrize("name", sorted(DECAYS))
def test_a_node_scores_the_decay_of_its_distance_relative_to_distance_one(name):
    st = toy_state(mentions={"f_pricing": ["Acme"]})
    rel = _relation(st, "What does Acme want?", decay=name, max_hops=3)
    assert rel.distance == AROUND_ACME
    f = decay(name)
    for nid, d in AROUND_ACME.items():
        assert rel.scores[nid] == pytest.approx(f(d) / f(1))  # absolute scale: 1 at distance one


@pytest.mark.parametrize("max_hops", [1, 2, 3])
def test_the_traversal_stops_at_max_hops(max_hops):
    st = toy_state(mentions={"f_pricing": ["Acme"]})
    rel = _relation(st, "What does Acme want?", max_hops=max_hops)
    assert rel.distance == {n: d for n, d in AROUND_ACME.items() if d <= max_hops}
    assert set(rel.scores) == set(rel.distance)


def test_only_the_configured_edge_kinds_are_walked():
    st = toy_state(mentions={"f_pricing": ["Acme"], "f_refund": ["Bank"]}, related=(("Acme", "Bank"),))
    query = "What does Acme want?"
    assert _relation(st, query, edge_kinds=(EdgeKind.MENTIONS,)).distance == {"f_pricing": 1}
    via_bank = _relation(st, query, edge_kinds=(EdgeKind.MENTIONS, EdgeKind.RELATION)).distance
    assert via_bank == {"f_pricing": 1, "f_refund": 2}  # Acme -relation- Bank -mentions- f_refund
    assert _relation(st, query).distance == {"f_pricing": 1, "s_billing": 2, "f_refund": 2}


def test_only_allowed_hierarchy_nodes_score_but_the_walk_goes_through_the_rest():
    st = toy_state(mentions={"f_pricing": ["Acme"], "f_refund": ["Bank"]}, related=(("Acme", "Bank"),))
    allowed = hierarchy(st) - {"s_billing"}
    rel = relation_path(st, "What does Acme want?", DEFAULT.with_(relation={"max_hops": 3}).relation, allowed)
    assert "s_billing" not in rel.scores and rel.distance["c_work"] == 3  # reached through s_billing
    assert BANK not in rel.scores  # an entity is a way through, never a hit


def test_seeds_are_the_query_entities_weighted_by_how_rare_they_are():
    st = toy_state(mentions={"f_pricing": ["Acme"], "f_refund": ["Bank"], "f_lunch": ["Bank"]})
    rel = _relation(st, "Did Acme call the bank?")
    n = 6  # fragments
    assert rel.n_entities_in_query == 2
    assert rel.seeds == pytest.approx({ACME: 1.0, BANK: math.log(1 + n / 2) / math.log(1 + n)})


def test_a_node_near_several_seeds_adds_what_each_gives():
    st = toy_state(mentions={"f_pricing": ["Acme", "Bank"], "f_refund": ["Bank"]})
    rel = _relation(st, "Did Acme call the bank?", edge_kinds=(EdgeKind.MENTIONS,))
    weights = rel.seeds
    # Absolute scale: 1 means every seed at distance one, each of the highest weight (1).
    assert rel.scores["f_pricing"] == pytest.approx((weights[ACME] + weights[BANK]) / 2)
    assert rel.scores["f_refund"] == pytest.approx(weights[BANK] / 2)


def test_an_entity_in_most_fragments_is_common_and_seeds_nothing():
    everyone = {f: ["Ann"] for f in ("f_refund", "f_pricing", "f_plan_a", "f_tea")}  # 4 of 6
    st = toy_state(mentions=everyone | {"f_lunch": ["Ann", "Acme"]})
    alone = _relation(st, "What did Ann say?")
    assert alone.n_entities_in_query == 1  # named, counted, but no seed
    assert alone.seeds == {} and alone.scores == {}
    with_acme = _relation(st, "What did Ann say about Acme?")
    assert set(with_acme.seeds) == {ACME} and with_acme.n_entities_in_query == 2
    assert with_acme.distance["f_lunch"] == 1


def test_a_query_naming_no_entity_finds_nothing():
    st = toy_state(mentions={"f_pricing": ["Acme"]})
    rel = _relation(st, "noodles for lunch on Friday")
    assert (rel.seeds, rel.scores, rel.distance, rel.n_entities_in_query) == ({}, {}, {}, 0)


def test_a_misspelt_name_seeds_with_its_match_ratio_when_fuzzy_matching_allows_it():
    st = toy_state(mentions={"f_pricing": ["Acme"]})
    assert _relation(st, "what about Acmee").seeds == pytest.approx({ACME: 0.889})
    assert _relation(st, "what about Acmee", fuzzy_min_ratio=1.0).seeds == {}


def test_with_a_half_life_an_older_hit_gains_less_by_its_age():
    st = toy_state(mentions={"f_refund": ["Bank"], "f_tea": ["Bank"]})  # said on days 1 and 6
    rel = _relation(st, "the bank", decay_half_life_days=1.0, edge_kinds=(EdgeKind.MENTIONS,))
    assert rel.scores["f_refund"] == pytest.approx(rel.scores["f_tea"] * 0.5**5)
    flat = _relation(st, "the bank", edge_kinds=(EdgeKind.MENTIONS,))
    assert flat.scores["f_refund"] == flat.scores["f_tea"]


def test_an_unknown_decay_is_a_config_error_naming_the_valid_ones():
    with pytest.raises(ConfigError, match="exponential, inverse, none"):
        decay("linear")
