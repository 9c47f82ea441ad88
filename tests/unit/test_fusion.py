"""Fusion's pure steps: normalisers, the dynamic weight, fusing, overlaps, top-up, successors, MMR."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemis_integrations.core.retrieval import fusion
from mnemis_integrations.errors import ConfigError

scores = st.dictionaries(st.text("abcdef", min_size=1, max_size=3), st.floats(-5, 5), min_size=1, max_size=8)


@pytest.mark.parametrize("name", sorted(fusion.NORMALISERS))
@given(scores)
def test_every_normaliser_maps_into_the_unit_interval_and_keeps_the_order(name, raw):
    norm = fusion.normaliser(name)(raw)
    assert set(norm) == set(raw) and all(0.0 <= v <= 1.0 for v in norm.values())
    for a in raw:
        for b in raw:
            if raw[a] > raw[b]:
                assert norm[a] >= norm[b]


def test_minmax_sends_a_lone_or_flat_list_to_one_and_rank_is_scale_free():
    assert fusion.normaliser("minmax")({"a": 3.0, "b": 3.0}) == {"a": 1.0, "b": 1.0}
    assert fusion.normaliser("rank")({"a": 100.0, "b": 1.0, "c": 0.5}) == {"a": 1.0, "b": 2 / 3, "c": 1 / 3}


@given(st.integers(0, 20), st.integers(0, 40))
def test_alpha_stays_in_bounds_and_the_two_rules_mirror_each_other(n_entities, n_words):
    design = fusion.alpha_for("design", n_entities, n_words)
    favoured = fusion.alpha_for("relation_favoured", n_entities, n_words)
    assert 0.5 <= design <= 0.8 and 0.2 <= favoured <= 0.5
    assert design + favoured == pytest.approx(1.0)
    if n_entities == 0:
        assert design == favoured == 0.5


def test_unknown_rules_are_config_errors():
    with pytest.raises(ConfigError):
        fusion.alpha_for("loudest", 1, 2)
    assert fusion.alpha_for("fixed", 3, 4, fixed=0.3) == 0.3


@given(scores, scores, st.floats(0, 1))
def test_fuse_is_the_weighted_sum_over_the_union(sem, rel, alpha):
    fused = fusion.fuse(sem, rel, alpha)
    assert set(fused) == set(sem) | set(rel)
    for k, v in fused.items():
        assert v == pytest.approx(alpha * sem.get(k, 0.0) + (1 - alpha) * rel.get(k, 0.0))


def test_a_relation_hit_the_semantic_path_did_not_score_is_graded_as_matching_least():
    match = fusion.semantic_match({"a": 0.8, "b": 0.9, "c": 0.1}, ["a", "b", "unscored"])
    assert match == {"a": 0.0, "b": 1.0}  # scaled over the relation hits only: c is not one
    graded = fusion.grade_by_match(dict.fromkeys(["a", "b", "unscored"], 0.6), match, 0.5)
    assert graded == pytest.approx({"a": 0.3, "b": 0.6, "unscored": 0.3})
    assert fusion.grade_by_match({"a": 0.6}, {}, 0.0) == {"a": 0.6}  # no weight: hop scores as they are


def test_collapse_keeps_the_best_of_overlapping_hits_and_every_overview():
    ranked = ["f1", "f2", "s", "f3"]
    sources = {
        "f1": frozenset({"m1", "m2"}),
        "f2": frozenset({"m1"}),
        "s": frozenset(),
        "f3": frozenset({"m2", "m3"}),
    }
    assert fusion.collapse_overlaps(ranked, sources) == ["f1", "s", "f3"]


def test_top_up_adds_unseen_backups_in_order_until_the_minimum():
    assert fusion.top_up(["a", "b"], ["b", "c", "d", "e"], 4) == (["a", "b", "c", "d"], ["c", "d"])
    assert fusion.top_up(["a", "b", "c"], ["d"], 2) == (["a", "b", "c"], [])


def test_successors_come_right_before_what_they_replaced_once_each():
    ranked = ["old1", "x", "old2", "new"]
    order, moved = fusion.place_successors(ranked, {"old1": ["new"], "old2": ["new", "newer"]})
    assert order == ["new", "old1", "x", "newer", "old2"] and moved == {"new", "newer"}


def test_mmr_spreads_near_duplicates_and_leaves_the_tail_alone():
    v = np.array([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0]])
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    ranked = ["a", "a2", "b", "tail"]
    out = fusion.mmr_order(ranked, {"a": 1.0, "a2": 0.95, "b": 0.7}, v, 0.5, 3)
    assert out == ["a", "b", "a2", "tail"]
    assert fusion.mmr_order(ranked, {"a": 1.0, "a2": 0.95, "b": 0.7}, v, 0.0, 3) == ranked
