"""Update precision/recall, false demotions and topic purity on a hand-built memory graph."""

from __future__ import annotations

import pytest

from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.maintenance.supersede import supersede
from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind, Status
from mnemis_integrations.evaluation.scenario_data import Supersession
from mnemis_integrations.evaluation.structure import (
    combine,
    hierarchy_counts,
    topic_purity,
    update_accuracy,
)

TOPICS = {
    "m1": "venue",
    "m2": "venue",
    "m3": "laptops",
    "m4": "venue",
    "m5": "laptops",
    "m6": "venue",
    "m7": "laptops",
    "m8": "venue",
}
SUPERSESSIONS = (
    Supersession(new="m4", old=("m1",), kind="reversal"),  # f3 -> f1: covered
    Supersession(new="m7", old=("m5",), kind="correction"),  # f4 -> f2: covered
    Supersession(new="m8", old=("m2",), kind="second_change"),  # no f4 -> f1 edge: missed
)
# f4 holds m7 and m8: "m8 replaces m7" can be no edge between fragments.
WITH_ONE_INSIDE = SUPERSESSIONS + (Supersession(new="m8", old=("m7",), kind="correction"),)


def _graph() -> MemoryGraph:
    """Concept "work" > subtopic "venue" > f1 [m1 m2], f3 [m4 m6];
    concept "work" > subtopic "kit" > f2 [m3 m5], f4 [m7 m8];
    concept "misc" > subtopic "empty" (no fragment).
    Updates: f3 -> f1 (right), f4 -> f2 (right), f4 -> f3 (wrong: m7/m8 replace nothing in f3),
    plus f3 -> s_kit (a non-fragment end, ignored)."""
    g = MemoryGraph("u")
    kinds = {
        "c_work": NodeKind.CONCEPT,
        "c_misc": NodeKind.CONCEPT,
        "s_venue": NodeKind.SUBTOPIC,
        "s_kit": NodeKind.SUBTOPIC,
        "s_empty": NodeKind.SUBTOPIC,
    }
    for nid, kind in kinds.items():
        g.add_node(Node(nid, kind, nid, "u"))
    frags = {"f1": ["m1", "m2"], "f2": ["m3", "m5"], "f3": ["m4", "m6"], "f4": ["m7", "m8"]}
    for fid, ids in frags.items():
        g.add_node(Node(fid, NodeKind.FRAGMENT, fid, "u", source_ids=ids))
    links = [
        ("s_venue", "c_work"),
        ("s_kit", "c_work"),
        ("s_empty", "c_misc"),
        ("f1", "s_venue"),
        ("f3", "s_venue"),
        ("f2", "s_kit"),
        ("f4", "s_kit"),
    ]
    for child, parent in links:
        g.add_edge(Edge(child, parent, EdgeKind.BELONGS_TO))
    supersede(g, old_id="f1", new_id="f3", when=None)
    supersede(g, old_id="f2", new_id="f4", when=None)
    supersede(g, old_id="f3", new_id="f4", when=None)
    g.add_edge(Edge("f3", "s_kit", EdgeKind.UPDATES))
    return g


def test_update_precision_recall_and_false_demotions():
    u = update_accuracy(_graph(), SUPERSESSIONS)
    assert (u["edges"], u["correct"], u["other_update_edges"]) == (3, 2, 1)
    assert u["precision"] == pytest.approx(2 / 3)
    assert (u["annotated"], u["covered"]) == (3, 2)
    assert u["recall"] == pytest.approx(2 / 3)
    # f1, f2 and f3 are superseded; f3 holds no annotated old message: a false demotion.
    assert (u["superseded_fragments"], u["false_demotions"]) == (3, 1)


def test_a_reversed_edge_is_not_correct_and_a_demoted_bystander_is_false():
    g = MemoryGraph("u")
    g.add_node(Node("old", NodeKind.FRAGMENT, "old", "u", source_ids=["m1"]))
    g.add_node(Node("new", NodeKind.FRAGMENT, "new", "u", source_ids=["m4"]))
    g.add_node(Node("x", NodeKind.FRAGMENT, "x", "u", source_ids=["m2"]))
    supersede(g, old_id="new", new_id="old", when=None)  # backwards
    supersede(g, old_id="x", new_id="new", when=None)  # demotes a fragment with no old message
    u = update_accuracy(g, SUPERSESSIONS[:1])
    assert (u["correct"], u["edges"], u["covered"], u["recall"]) == (0, 2, 0, 0.0)
    assert (u["superseded_fragments"], u["false_demotions"]) == (2, 2)


def test_a_supersession_inside_one_fragment_is_counted_apart_and_stays_uncovered():
    u = update_accuracy(_graph(), WITH_ONE_INSIDE)
    assert (u["within_fragment"], u["annotated"], u["covered"]) == (1, 4, 2)
    assert update_accuracy(_graph(), SUPERSESSIONS)["within_fragment"] == 0
    g = _graph()
    g.get("f4").status = Status.ARCHIVED  # an archived fragment holds nothing any more
    assert update_accuracy(g, WITH_ONE_INSIDE)["within_fragment"] == 0


def test_the_report_names_the_supersessions_inside_one_fragment_beside_recall():
    from mnemis_integrations.evaluation.scenario_report import _update_recall

    assert _update_recall(update_accuracy(_graph(), WITH_ONE_INSIDE)) == "0.500 (2/4; 1 in one fragment)"
    assert _update_recall(update_accuracy(_graph(), SUPERSESSIONS)) == "0.667 (2/3)"
    assert _update_recall(None) == "–"


def test_no_edges_or_no_annotations_give_none_not_zero_division():
    g = MemoryGraph("u")
    g.add_node(Node("f", NodeKind.FRAGMENT, "f", "u", source_ids=["m1"]))
    assert update_accuracy(g, SUPERSESSIONS)["precision"] is None
    assert update_accuracy(g, ())["recall"] is None


def test_topic_purity_at_subtopic_and_concept_level():
    p = topic_purity(_graph(), TOPICS)
    sub, con = p["subtopic"], p["concept"]
    # s_venue holds m1 m2 m4 m6 (all venue): 4/4; s_kit holds m3 m5 m7 m8 (3 laptops, 1 venue): 3/4.
    assert (sub["groups"], sub["majority"], sub["messages"]) == (2, 7, 8)
    assert sub["purity"] == pytest.approx(7 / 8)
    # venue: 4 of its 5 messages in s_venue; laptops: 3 of 3 in s_kit.
    assert sub["inverse_purity"] == pytest.approx(7 / 8)
    # c_work holds all 8 (5 venue); c_misc has no message and is not counted.
    assert (con["groups"], con["majority"], con["messages"]) == (1, 5, 8)
    assert con["inverse_purity"] == 1.0


def test_purity_ignores_unannotated_messages_and_archived_nodes():
    g = _graph()
    g.get("f4").status = Status.ARCHIVED
    p = topic_purity(g, {k: v for k, v in TOPICS.items() if k != "m3"})
    assert (p["subtopic"]["majority"], p["subtopic"]["messages"]) == (5, 5)  # m1 m2 m4 m6 + m5
    assert hierarchy_counts(g) == {"concepts": 2, "subtopics": 3, "fragments": 3}


def test_combine_micro_averages_and_skips_missing_annotations():
    g = _graph()
    full = {
        "split": "tune",
        **hierarchy_counts(g),
        "updates": update_accuracy(g, SUPERSESSIONS),
        "purity": topic_purity(g, TOPICS),
    }
    bare = {"split": "tune", "concepts": 1, "subtopics": 1, "fragments": 1, "updates": None, "purity": None}
    c = combine([full, full, bare])
    assert c["scenarios"] == 3
    assert c["concepts"] == pytest.approx(5 / 3)
    assert c["updates"]["scenarios"] == 2
    assert (c["updates"]["correct"], c["updates"]["edges"]) == (4, 6)
    assert c["updates"]["within_fragment"] == 0
    assert c["updates"]["precision"] == pytest.approx(2 / 3)
    assert c["purity"]["subtopic"]["purity"] == pytest.approx(7 / 8)
    assert combine([bare])["updates"] is None and combine([bare])["purity"] is None
