"""Retrieval metrics and evidence repair, with expectations worked out by hand."""

from __future__ import annotations

import doctest

import pytest

from mnemis_integrations.evaluation import baselines, datasets, metrics
from mnemis_integrations.evaluation.datasets import normalise_evidence
from mnemis_integrations.evaluation.metrics import (
    aggregate,
    budget_recall,
    budget_recalls,
    pack_context,
    percentile,
    recall_at_k,
    reciprocal_rank,
)


def words(text: str) -> int:
    return len(text.split())


HITS = [
    "[8 May 2023] Ann: I adopted a cat",  # 8 words
    "[9 May 2023] Bob: Nice, what is its name?",  # 9 words
    "[9 May 2023] Ann: Its  name is\nTom",  # 8 words
]


@pytest.mark.parametrize("module", [metrics, datasets, baselines])
def test_docstring_examples_pass(module):
    result = doctest.testmod(module)
    assert result.failed == 0
    assert result.attempted > 0


def test_pack_context_stops_at_first_hit_that_does_not_fit():
    assert pack_context(HITS, 17, words) == HITS[:2]
    # The third hit (8 words) would fit in the 8 words left of 16, but packing never skips.
    assert pack_context(HITS, 16, words) == HITS[:1]
    assert pack_context(HITS, 7, words) == []


def test_budget_recall_counts_evidence_inside_packed_context():
    evidence = ["I adopted a CAT", "its name is tom"]
    assert budget_recall(HITS, evidence, 7, words) == 0.0
    assert budget_recall(HITS, evidence, 8, words) == 0.5
    assert budget_recall(HITS, evidence, 24, words) == 0.5
    assert budget_recall(HITS, evidence, 25, words) == 1.0  # whitespace and case are normalised


def test_budget_recall_match_cannot_straddle_two_hits():
    assert budget_recall(["Ann: I adopted", "a cat today"], ["adopted a cat"], 100, words) == 0.0


def test_budget_recalls_equal_single_budget_calls():
    evidence = ["I adopted a CAT", "its name is tom"]
    budgets = [7, 8, 16, 17, 24, 25, 1000]
    assert budget_recalls(HITS, evidence, budgets, words) == {
        b: budget_recall(HITS, evidence, b, words) for b in budgets
    }


def test_recall_at_k_uses_union_of_first_k_hits():
    hits = [("D1:1", "D1:2", "D1:3"), ("D5:1",), ("D2:7",)]
    evidence = ["D1:3", "D2:7", "D9:9"]
    assert recall_at_k(hits, evidence, 1) == pytest.approx(1 / 3)
    assert recall_at_k(hits, evidence, 2) == pytest.approx(1 / 3)
    assert recall_at_k(hits, evidence, 3) == pytest.approx(2 / 3)
    assert recall_at_k(hits, [], 3) == 0.0


def test_reciprocal_rank_of_first_hit_with_any_evidence():
    hits = [("D1:1",), ("D3:3",), ("D2:7", "D2:8"), ("D1:3",)]
    assert reciprocal_rank(hits, ["D1:3", "D2:8"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(hits, ["D1:1"]) == 1.0
    assert reciprocal_rank(hits, ["D4:4"]) == 0.0


def test_percentile_matches_linear_interpolation():
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0
    assert percentile(list(map(float, range(1, 21))), 95) == pytest.approx(19.05)


def test_aggregate_keeps_adversarial_out_of_overall_and_skips_none():
    records = [
        {"category": 4, "scores": {"r": 1.0, "x": None}},
        {"category": 4, "scores": {"r": 0.0, "x": 1.0}},
        {"category": 1, "scores": {"r": 0.5, "x": None}},
        {"category": 5, "scores": {"r": 1.0, "x": 0.0}},
    ]
    names = {1: "multi-hop", 4: "single-hop", 5: "adversarial"}
    agg = aggregate(records, label=lambda c: names[c], exclude_from_overall={5})
    assert agg["overall"] == {"n": 3, "r": 0.5, "x": 1.0}
    assert list(agg["categories"]) == ["multi-hop", "single-hop", "adversarial"]
    assert agg["categories"]["multi-hop"] == {"n": 1, "r": 0.5, "x": None}
    assert agg["categories"]["adversarial"] == {"n": 1, "r": 1.0, "x": 0.0}


def test_aggregate_accepts_string_categories():
    records = [{"category": "update", "scores": {"r": 1.0}}, {"category": "vague", "scores": {"r": 0.0}}]
    agg = aggregate(records)
    assert agg["overall"] == {"n": 2, "r": 0.5}
    assert list(agg["categories"]) == ["update", "vague"]


VALID = {"D8:6", "D9:17", "D11:26", "D30:5", "D2:2", "D3:1"}


@pytest.mark.parametrize(
    ("raw", "expected", "counts"),
    [
        # (normalised, split, dropped_malformed, dropped_dangling)
        (["D8:6; D9:17"], ("D8:6", "D9:17"), (0, 1, 0, 0)),
        (["D2:2 D3:1"], ("D2:2", "D3:1"), (0, 1, 0, 0)),
        (["D:11:26"], ("D11:26",), (1, 0, 0, 0)),
        (["D30:05"], ("D30:5",), (1, 0, 0, 0)),
        (["D"], (), (0, 0, 1, 0)),
        ([""], (), (0, 0, 1, 0)),
        (["D10:19"], (), (0, 0, 0, 1)),
        (["D2:2", "D02:02", "D2:2"], ("D2:2",), (1, 0, 0, 0)),
        ([], (), (0, 0, 0, 0)),
    ],
)
def test_normalise_evidence_repairs_and_counts(raw, expected, counts):
    ids, stats = normalise_evidence(raw, VALID)
    assert ids == expected
    assert (stats.normalised, stats.split, stats.dropped_malformed, stats.dropped_dangling) == counts
    assert stats.dropped == counts[2] + counts[3]
