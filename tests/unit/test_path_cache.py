"""The hierarchy-path cache (SPEC section 6: consecutive queries of one conversation stay on one topic): a
search asked again reads its hits' paths from the cache, and a write leaves no path from before it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder

T0 = datetime(2025, 3, 3, 9, tzinfo=timezone.utc)
TEXTS = [
    "Kickoff for the billing migration is on Monday.",
    "The invoice templates move to the new system first.",
    "Postgres 16 is the database for the billing service.",
    "Weekend plan: hiking in the hills with the kids.",
    "Packed lunch and boots for the hike on Saturday.",
]


def _messages(texts, start=0):
    return [
        {"id": f"m{start + i}", "role": "user", "content": t, "timestamp": T0 + timedelta(hours=start + i)}
        for i, t in enumerate(texts)
    ]


def _state(mem: MnemisMemory):
    return mem._state("u")


def test_a_search_asked_again_reads_its_paths_from_the_cache():
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(_messages(TEXTS), namespace="u")
    first = mem.search("billing database", k=5, namespace="u")
    cache = _state(mem).path_cache
    hits_before = cache.hits
    again = mem.search("billing database", k=5, namespace="u")
    assert cache.hits > hits_before
    assert [h.path for h in again] == [h.path for h in first]


def test_after_a_write_every_path_is_the_graph_s_own():
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(_messages(TEXTS), namespace="u")
    mem.search("billing database", k=5, namespace="u")
    mem.add_messages(
        _messages(["The billing database moves to Postgres 17 instead."], start=len(TEXTS)), namespace="u"
    )
    hits = mem.search("billing database", k=5, namespace="u")
    graph = mem.graph("u")
    assert hits and all(list(h.path) == graph.hierarchy_path(h.node_id) for h in hits)
