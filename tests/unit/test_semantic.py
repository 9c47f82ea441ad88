"""The semantic path (``retrieval/semantic.py``) on a hand-built graph: every level is scored (a
fragment by its best message and its centroid, a parent by its centroid), what falls below the
threshold stays out unless BM25 matches it, and the best hits' parents enter by expansion."""

from __future__ import annotations

from dataclasses import replace

import pytest
from _toy_graph import EMB, OFFICE, hierarchy, toy_state

from mnemis_integrations.core.model import NodeKind
from mnemis_integrations.core.recipes import DEFAULT
from mnemis_integrations.core.retrieval.semantic import semantic_path

NEVER = 1.01  # above every cosine: only BM25 keeps a node
# Fragment f holds two messages (m1, m2): its best message and its centroid differ.
TWO_MESSAGES = {"c": {"s": {"f": ["The refund timed out.", "Lunch at noon on Friday."], "g": ["Green tea."]}}}
FRAGMENTS = {"f_refund", "f_pricing", "f_plan_a", "f_plan_b", "f_lunch", "f_tea"}


def _semantic(st, query: str, *, threshold: float = 0.05, allowed=None, speakers=(), messages=None, **cfg):
    qvec = EMB.embed_queries([query])[0]
    config = DEFAULT.with_(semantic=cfg).semantic
    allowed = hierarchy(st) if allowed is None else allowed
    return semantic_path(st, qvec, query, config, threshold, allowed, speakers=speakers, messages=messages)


def test_every_level_is_scored_on_one_unit_scale_and_the_matching_fragment_leads():
    st = toy_state(mentions={"f_pricing": ["Acme"]})
    sem = _semantic(st, "the refund timed out at the bank callback")
    assert set(sem.raw) == hierarchy(st)  # concepts, subtopics, fragments; entities have no vector
    assert {st.node(n).kind for n in sem.scores} == {NodeKind.CONCEPT, NodeKind.SUBTOPIC, NodeKind.FRAGMENT}
    assert all(0.0 <= s <= 1.0 for s in sem.scores.values())
    assert max(FRAGMENTS, key=lambda f: sem.scores.get(f, 0.0)) == "f_refund"


@pytest.mark.parametrize("message_weight", [0.0, 0.75, 1.0])
def test_a_fragment_mixes_its_best_message_with_its_centroid_and_a_parent_has_its_centroid(message_weight):
    st = toy_state(TWO_MESSAGES)
    query = "when did the refund time out"
    sem = _semantic(st, query, message_weight=message_weight)
    qvec = EMB.embed_queries([query])[0]
    best = max(float(v @ qvec) for v in st.msg_vectors.get_many(["m1", "m2"]))
    centroid = float(st.centroid_of("f") @ qvec)
    assert sem.raw["f"] == pytest.approx(message_weight * best + (1 - message_weight) * centroid, abs=1e-6)
    assert sem.raw["s"] == pytest.approx(float(st.centroid_of("s") @ qvec), abs=1e-6)


def test_below_the_threshold_only_a_bm25_match_keeps_a_fragment():
    st = toy_state()
    assert set(_semantic(st, "noodle lunch", threshold=NEVER, expand=False).scores) == {"f_lunch"}
    assert _semantic(st, "noodle lunch", threshold=NEVER, expand=False, lexical_weight=0.0).scores == {}
    kept = _semantic(st, "noodle lunch", threshold=-1.0, expand=False).scores
    assert set(kept) == hierarchy(st)


@pytest.mark.parametrize("expansion_decay", [0.5, 0.25])
def test_an_unscored_parent_of_a_hit_enters_with_a_decayed_share_of_its_score(expansion_decay):
    st = toy_state()
    sem = _semantic(st, "noodle lunch", threshold=NEVER, expansion_decay=expansion_decay)
    assert sem.expanded == {"s_food": "f_lunch"}  # one step along the hierarchy: c_life stays out
    assert sem.scores["s_food"] == pytest.approx(sem.scores["f_lunch"] * expansion_decay)
    assert _semantic(st, "noodle lunch", threshold=NEVER, expand=False).expanded == {}


def test_expansion_starts_from_the_best_hits_and_stays_inside_the_allowed_set():
    st = toy_state()
    query = "noodle lunch hosting"  # BM25 keeps f_lunch and both hosting fragments
    sem = _semantic(st, query, threshold=NEVER)
    assert set(sem.expanded) == {"s_food", "s_hosting"}
    best = max(sem.scores, key=sem.scores.get)
    (only,) = _semantic(st, query, threshold=NEVER, max_expansions=1).expanded.values()
    assert only == best
    hidden = _semantic(st, query, threshold=NEVER, allowed=hierarchy(st) - {"s_food"})
    assert set(hidden.expanded) == {"s_hosting"} and "s_food" not in hidden.scores


def test_the_speakers_the_query_names_are_left_out_of_bm25():
    st = toy_state()  # "Carol wants green tea in the kitchen."
    assert set(_semantic(st, "Carol", threshold=NEVER, expand=False).scores) == {"f_tea"}
    assert _semantic(st, "Carol", threshold=NEVER, expand=False, speakers=("Carol",)).scores == {}
    # whatever the case, and with a possessive: BM25 then reads "tea" alone
    qvec, cfg = EMB.embed_queries(["Carol's tea"])[0], DEFAULT.with_(semantic={"expand": False}).semantic
    skipped = semantic_path(st, qvec, "Carol's tea", cfg, NEVER, hierarchy(st), speakers=("carol",))
    assert skipped.scores == semantic_path(st, qvec, "tea", cfg, NEVER, hierarchy(st)).scores
    assert set(skipped.scores) == {"f_tea"}


def test_a_speaker_boost_lifts_the_messages_of_the_speakers_the_query_names():
    st = toy_state(TWO_MESSAGES)
    st.messages["m2"] = replace(st.messages["m2"], speaker="Bo")  # "Lunch at noon on Friday.", in f with m1
    query = "What did Bo say about the refund?"
    plain = _semantic(st, query, speakers=("Bo",), lexical_weight=0.0)
    lifted = _semantic(st, query, speakers=("Bo",), lexical_weight=0.0, speaker_boost=3.0)
    assert max(plain.message_scores, key=plain.message_scores.get) == "m1"  # the refund message
    assert max(lifted.message_scores, key=lifted.message_scores.get) == "m2"  # Bo's own
    no_one = _semantic(st, query, lexical_weight=0.0, speaker_boost=3.0)
    assert no_one.message_scores == plain.message_scores


def test_full_topic_smoothing_gives_each_fragment_its_subtopics_score():
    st = toy_state()
    query = "the refund for order 42 at the bank"
    plain = _semantic(st, query, threshold=-1.0, expand=False, lexical_weight=0.0, topic_smoothing=0.0)
    assert plain.scores["f_refund"] > plain.scores["f_pricing"]
    smooth = _semantic(st, query, threshold=-1.0, expand=False, lexical_weight=0.0, topic_smoothing=1.0)
    for subtopic in OFFICE["c_work"]:
        for f in OFFICE["c_work"][subtopic]:
            assert smooth.scores[f] == pytest.approx(smooth.scores[subtopic])


def test_message_scores_rank_the_messages_and_a_scope_keeps_only_its_own():
    st = toy_state()
    query = "the refund timed out at the bank callback"
    sem = _semantic(st, query)
    assert set(sem.message_scores) == set(st.messages)
    assert max(sem.message_scores, key=sem.message_scores.get) == "m1"
    assert set(_semantic(st, query, messages={"m5", "m6"}).message_scores) == {"m5", "m6"}


def test_outside_a_scope_a_fragments_messages_are_no_evidence_and_its_centroid_stands_in():
    st = toy_state(TWO_MESSAGES)
    query = "when did the refund time out"
    centroid = float(st.centroid_of("f") @ EMB.embed_queries([query])[0])
    assert _semantic(st, query).raw["f"] != pytest.approx(centroid, abs=1e-6)
    assert _semantic(st, query, messages={"m3"}).raw["f"] == pytest.approx(centroid, abs=1e-6)


def test_a_long_message_matches_as_well_as_its_best_window():
    # m3 ("Green tea.") stands for a long message whose own vector read only its opening; one of its
    # windows (core.passages) says what the query asks: the message matches as that window does.
    query = "the refund timed out"
    plain = _semantic(toy_state(TWO_MESSAGES), query, threshold=NEVER)
    st = toy_state(TWO_MESSAGES)
    st.add_passages({"m3": EMB.embed_passages(["Lunch at noon.", "The refund timed out."])})
    windowed = _semantic(st, query, threshold=NEVER)
    assert windowed.raw["g"] > plain.raw["g"]  # its best message is the window; its centroid is not
    assert windowed.message_scores["m3"] > plain.message_scores["m3"]
    assert windowed.raw["f"] == plain.raw["f"]


def test_topic_smoothing_passes_over_a_fragment_that_holds_a_document():
    # windows equal to m3's own vector change nothing but what m3 is: a document (core.passages)
    plain = toy_state(TWO_MESSAGES)
    doc = toy_state(TWO_MESSAGES)
    doc.add_passages({"m3": doc.msg_vectors.get_many(["m3", "m3"])})
    smoothed = _semantic(plain, "green tea", topic_smoothing=0.5).scores
    as_document = _semantic(doc, "green tea", topic_smoothing=0.5).scores
    unsmoothed = _semantic(plain, "green tea", topic_smoothing=0.0).scores
    assert as_document["g"] == pytest.approx(unsmoothed["g"]) != pytest.approx(smoothed["g"])
    assert as_document["f"] == pytest.approx(smoothed["f"])  # a fragment of turns is smoothed as before
