"""What a search at ``as_of`` may show and be found by: nothing said, built or linked after its
moment, on the search path and through a token budget alike."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from _toy_graph import EMB, T0, toy_state

from mnemis_integrations import MnemisMemory, recipes
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.recipes import DEFAULT
from mnemis_integrations.core.retrieval import search

T = datetime(2025, 3, 3, 9, tzinfo=timezone.utc)
LOCK = [
    {"id": "m1", "speaker": "ann", "text": "The server room needs a new lock on the door.", "timestamp": T},
    {
        "id": "m2",
        "speaker": "bob",
        "text": "The server room lock is ordered from Kessler.",
        "timestamp": T + timedelta(minutes=2),
    },
    {
        "id": "m3",
        "speaker": "ann",
        "text": "The server room vault code is now zebra-7731 from Kessler.",
        "timestamp": T + timedelta(minutes=4),
    },
    {
        "id": "m4",
        "speaker": "bob",
        "text": "Lunch at the noodle place on Friday works.",
        "timestamp": T + timedelta(days=3),
    },
]
BEFORE_THE_CODE = T + timedelta(minutes=3)  # m1 and m2 said, m3 (the code) and m4 (lunch) not yet


def _lock_memory(**build) -> MnemisMemory:
    mem = MnemisMemory(embedder=HashingEmbedder(), config=recipes.DEFAULT.with_(build=build))
    mem.add_messages(LOCK, namespace="u")
    return mem


def test_a_hit_at_as_of_names_no_successor_that_came_later():
    st = toy_state(updates=(("f_plan_b", "f_plan_a"),))  # plan B (day 3) replaces plan A (day 2)
    text = "plan A for the hosting migration"
    then = T0 + timedelta(days=2, hours=12)
    hits = search.dual_path_search(
        st, text, EMB.embed_queries([text])[0], 10, DEFAULT, EMB.profile, as_of=then
    )
    plan_a = next(h for h in hits if h.node_id == "f_plan_a")
    assert plan_a.status == "active"
    assert plan_a.successors == ()  # f_plan_b did not exist yet


def test_at_as_of_a_fragment_is_found_only_by_what_was_said_by_then():
    # BM25 alone decides (no cosine reaches the threshold): "vault code" is only in m3, said after the moment.
    mem = _lock_memory()
    bm25_only = recipes.DEFAULT.with_(semantic={"threshold": 1.01})
    plain = mem.search("vault code", namespace="u", as_of=BEFORE_THE_CODE, config=bm25_only)
    everything = {"team": {"$ne": "nobody"}}  # a filter every message passes: the same search
    filtered = mem.search(
        "vault code", namespace="u", as_of=BEFORE_THE_CODE, config=bm25_only, filter=everything
    )
    assert [(h.node_id, h.score, h.via) for h in plain] == [(h.node_id, h.score, h.via) for h in filtered]
    assert all("semantic" not in h.via for h in plain if h.kind == "fragment")


@pytest.mark.parametrize("max_tokens", [None, 30, 400])  # 30: narrowed to m1
def test_at_as_of_a_fragment_shows_no_headline_made_from_later_messages(max_tokens):
    mem = _lock_memory(headline_terms=5)  # m3's number goes into the fragment's headline
    hits = mem.search("server room lock", namespace="u", as_of=BEFORE_THE_CODE, max_tokens=max_tokens)
    fragment = next((h for h in hits if h.node_id == "f:m1"), None)
    assert fragment is not None  # measured with a later headline, it no longer fit 30 tokens
    assert set(fragment.source_ids) <= {"m1", "m2"}
    assert "7731" not in fragment.text  # the code was not said yet


def test_at_as_of_a_concept_lists_no_subtopic_made_later():
    mem = _lock_memory()
    hits = mem.search("server room", namespace="u", as_of=BEFORE_THE_CODE)
    concept = next(h for h in hits if h.kind == "concept")
    assert "noodle" not in concept.text  # the lunch subtopic came three days later
    assert "noodle" in next(h for h in mem.search("server room", namespace="u") if h.kind == "concept").text
