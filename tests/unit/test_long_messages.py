"""A long message (a pasted document, a tool's output) gets a vector per window besides its own
(``core/passages.py``): made at ingest for long messages only, kept by the store with the message,
read back on reopen, and erased with it."""

from __future__ import annotations

import numpy as np
import pytest

from mnemis_integrations import MemoryConfig, MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.passages import windows
from mnemis_integrations.core.tokens import count_tokens

REPORT = "The team met on Monday to go over the agenda for the quarter. " * 40 + (
    "Revenue in the Berlin office grew by 14 percent."
)
CHAT = [
    {"id": "doc", "speaker": "tool", "text": REPORT},
    {"id": "q", "speaker": "user", "text": "Can you check the quarterly report?"},
]


def test_a_long_message_gets_window_vectors_that_the_store_keeps_and_forget_erases(tmp_path):
    path = tmp_path / "m.db"
    mem = MnemisMemory(path=path, embedder=HashingEmbedder())
    mem.add_messages(CHAT, namespace="u1")
    pieces = windows(REPORT, mem.config.build.passage_tokens, count_tokens)
    assert len(pieces) >= 2 and "Berlin" in pieces[-1]
    st = mem._state("u1")
    keys = st.passages_of(["doc"])
    assert len(keys) == len(pieces) and st.passages_of(["q"]) == []  # a short message: one vector
    made = st.passage_vectors.get_many(keys)
    assert np.allclose(made, HashingEmbedder().embed_passages([f"tool: {w}" for w in pieces]), atol=1e-6)

    reopened = MnemisMemory(path=path, embedder=HashingEmbedder())._state("u1")
    assert np.array_equal(reopened.passage_vectors.get_many(reopened.passages_of(["doc"])), made)

    mem.forget(["doc"], namespace="u1")
    assert mem._state("u1").passages_of(["doc"]) == [] and len(mem._state("u1").passage_vectors) == 0
    again = MnemisMemory(path=path, embedder=HashingEmbedder())._state("u1")
    assert len(again.passage_vectors) == 0 and list(again.messages) == ["q"]


def test_no_window_vectors_when_passage_tokens_is_zero():
    mem = MnemisMemory(embedder=HashingEmbedder(), config=MemoryConfig().with_(build={"passage_tokens": 0}))
    mem.add_messages(CHAT, namespace="u1")
    assert len(mem._state("u1").passage_vectors) == 0


def test_the_funnel_reads_a_long_message_by_its_best_window_as_the_exact_path_does(monkeypatch):
    from mnemis_integrations.core.recipes import DEFAULT
    from mnemis_integrations.core.retrieval import cache as rcache
    from mnemis_integrations.core.retrieval.semantic import semantic_path

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(CHAT, namespace="u1")
    st = mem._state("u1")
    query = "How much did revenue in the Berlin office grow?"
    qvec = mem.embedder.embed_queries([query])[0]
    allowed = {n.id for n in st.graph.nodes() if n.kind.value in ("fragment", "subtopic", "concept")}
    doc = st.msg_fragment["doc"]

    def raw() -> float:
        return semantic_path(st, qvec, query, DEFAULT.semantic, 1.01, allowed).raw[doc]

    monkeypatch.setattr(rcache, "FUNNEL_MIN_NODES", 10**9)
    exact = raw()
    monkeypatch.setattr(rcache, "FUNNEL_MIN_NODES", 0)
    assert raw() == pytest.approx(exact)
    # and the window lifted it: without windows the same fragment reads lower
    keys = st.passages_of(["doc"])
    st.passage_vectors.remove(keys)
    assert raw() < exact


def test_a_payload_with_no_sentences_is_cut_into_even_windows():
    import json

    payload = json.dumps(
        [{"id": i, "city": "Berlin" if i == 90 else "Madrid", "revenue": i * 13} for i in range(100)]
    )
    chinese = "我们今天讨论了季度预算和招聘计划，" * 80  # clauses, no full stop
    for text in (payload, chinese):
        pieces = windows(text, 200, count_tokens)
        assert len(pieces) >= count_tokens(text) // 200
        assert all(count_tokens(p) <= 220 for p in pieces)
        assert "".join(pieces).replace(" ", "") == text.replace(" ", "")  # nothing lost, in order


def test_a_tool_payload_is_shown_by_the_piece_that_matches_under_a_small_budget():
    import json

    rows = [{"id": i, "city": "Berlin" if i == 90 else "Madrid", "revenue": i * 13} for i in range(100)]
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages([{"id": "t", "speaker": "tool", "text": json.dumps(rows)}], namespace="u1")
    hits = mem.search("Berlin revenue", k=3, namespace="u1", max_tokens=200)
    shown = [h for h in hits if h.excerpted == ("t",)]
    assert shown and '"city": "Berlin"' in shown[0].text
    assert sum(count_tokens(h.text) for h in hits) <= 200


def test_window_vectors_of_several_long_messages_added_at_once_belong_to_each():
    other = "Lunch plans for the offsite were discussed at length by everyone present. " * 40
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages([*CHAT, {"id": "doc2", "speaker": "ann", "text": other}], namespace="u1")
    st = mem._state("u1")
    for mid, speaker, text in (("doc", "tool", REPORT), ("doc2", "ann", other)):
        pieces = windows(text, mem.config.build.passage_tokens, count_tokens)
        expected = HashingEmbedder().embed_passages([f"{speaker}: {w}" for w in pieces])
        assert np.allclose(st.passage_vectors.get_many(st.passages_of([mid])), expected, atol=1e-6)


def test_score_messages_reads_a_long_message_by_its_best_window():
    query = "How much did revenue in the Berlin office grow?"
    scores = {}
    for tokens in (200, 0):
        mem = MnemisMemory(
            embedder=HashingEmbedder(), config=MemoryConfig().with_(build={"passage_tokens": tokens})
        )
        mem.add_messages(CHAT, namespace="u1")
        scores[tokens] = mem.score_messages(query, {"u1": ["doc", "q"]})
    assert scores[200][("u1", "doc")] > scores[0][("u1", "doc")]
    assert scores[200][("u1", "q")] == scores[0][("u1", "q")]  # a short message reads as before
