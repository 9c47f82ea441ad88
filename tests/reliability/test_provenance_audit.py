"""Provenance audit: every result says how it was found, and what it says holds.

Each test here failed before its fix; the docstring says what was wrong.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from _over_time import msg

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder

# m2 (the launch date) and m3 (the view) share a fragment; m4 replaces m2 only. A question about
# the view matches m3 best, so the successor does not lead: search returns it after the ranked hits.
LAUNCH = [
    msg(1, "The refund for order 42 timed out at the bank callback.", days=0),
    msg(2, "The Orion launch party is on Monday 3 March at the rooftop.", days=5),
    msg(
        3,
        "The rooftop bar has a lovely view over the harbour and the old lighthouse.",
        "bob",
        days=5,
        minutes=1,
    ),
    msg(4, "Change of plan: the Orion launch party moved to Wednesday 5 March.", days=12),
    msg(5, "Let's get lunch at the noodle place on Friday.", days=31),
]
VIEW = "What is the view from the rooftop bar over the harbour and lighthouse?"


@pytest.fixture
def launch() -> MnemisMemory:
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(LAUNCH, namespace="u1")
    hits = mem.search(VIEW, k=1, namespace="u1")
    # the premise: the superseded hit is ranked, its successor comes after it, past k
    assert [(h.node_id, h.status) for h in hits] == [("f:m2", "superseded"), ("f:m4", "active")]
    return mem


def test_classic_memory_keeps_the_successor_a_superseded_hit_comes_with(launch):
    """``MnemisClassicMemory`` cut the search's list to ``k``, so the successor that search returns
    past ``k`` with a superseded hit was dropped: the chain read the replaced launch date alone."""
    pytest.importorskip("langchain_classic")
    from mnemis_integrations.langchain.classic import MnemisClassicMemory

    memory = MnemisClassicMemory(memory=launch, namespace="u1", k=1, return_docs=True)
    docs = memory.load_memory_variables({"input": VIEW})["history"]
    superseded = [d for d in docs if d.metadata["status"] == "superseded"]
    assert superseded
    shown = {d.metadata["node_id"] for d in docs}
    assert all(set(d.metadata["successors"]) & shown for d in superseded)
    text = MnemisClassicMemory(memory=launch, namespace="u1", k=1).load_memory_variables({"input": VIEW})
    assert "Wednesday 5 March" in text["history"]


async def test_llama_index_memory_block_keeps_the_successor_a_superseded_hit_comes_with(launch):
    """``MnemisMemoryBlock`` cut the search's list to ``similarity_top_k`` likewise: the agent's
    system prompt held the replaced launch date, marked superseded, without what replaced it."""
    from llama_index.core.base.llms.types import ChatMessage

    from mnemis_integrations.llama_index import MnemisMemoryBlock

    block = MnemisMemoryBlock(memory=launch, namespace="u1", similarity_top_k=1, ingest_on_read=False)
    text = await block.aget(messages=[ChatMessage(role="user", content=VIEW)])
    assert "(superseded)" in text
    assert "Wednesday 5 March" in text


def test_a_hit_narrowed_by_a_budget_dates_itself_by_the_messages_it_shows():
    """A token budget narrowed a compaction overview (3 March to 2 April) to its best message, of
    3 March: ``text`` and ``source_ids`` said 3 March, but ``time`` kept the whole overview's 2 April,
    and the LlamaIndex memory line put that date after the 3 March message. A hit narrowed by a
    filter or by ``as_of`` is dated by the messages it shows; one narrowed by a budget now is too."""
    from _over_time import LAST, WEEKS

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(WEEKS, namespace="u1")
    mem.compact(before=LAST - timedelta(days=1), namespace="u1")
    said = {m.id: m.timestamp for m in mem.messages("u1")}
    query = "refund bank callback timed out"
    whole = mem.search(query, k=5, namespace="u1")[0]
    assert whole.kind == "fragment" and len(whole.source_ids) > 1
    assert whole.time == max(said[m] for m in whole.source_ids)

    narrowed = mem.search(query, k=5, namespace="u1", max_tokens=30)[0]
    assert narrowed.node_id == whole.node_id and set(narrowed.source_ids) < set(whole.source_ids)
    assert narrowed.time == max(said[m] for m in narrowed.source_ids)
    fitted = mem.fit_to_budget([whole], 30, query=query)[0]
    assert fitted.source_ids == narrowed.source_ids and fitted.time == narrowed.time


def test_hits_fitted_to_a_budget_after_one_of_their_messages_was_forgotten():
    """``fit_to_budget`` on the hits of an earlier search left out a hit whose node was forgotten,
    but a hit whose fragment lost only some messages and still fitted whole came back as it was
    found: its ``text`` showed the forgotten message and its ``source_ids`` named it."""
    from _over_time import WEEKS

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(WEEKS, namespace="u1")
    hits = mem.search("refund bank callback timed out", k=3, namespace="u1")
    pair = next(h for h in hits if h.source_ids == ("m1", "m2"))
    mem.forget(["m2"], namespace="u1")  # "Refund timeouts again: the bank callback never arrived."
    fitted = mem.fit_to_budget(hits, 1000)
    assert pair.node_id in {h.node_id for h in fitted}
    assert all("m2" not in h.source_ids and "m2" not in h.focus for h in fitted)
    assert not any("never arrived" in h.text for h in fitted)


@pytest.mark.parametrize("include_archived", [False, True])
def test_a_superseded_hit_names_only_successors_its_search_can_show(include_archived):
    """Compaction merged plan B's fragment (f:m9) into an overview and archived it; plan A's
    fragment (f:m5), alone in its group, stayed, superseded by both. Its ``successors`` named both:
    by default the archived f:m9, which that search never returns; with ``include_archived`` the
    overview, which that search hides. Each search came with the right successor, but its
    provenance pointed a reader at a node it could not find."""
    from _over_time import T0, WEEKS

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(WEEKS, namespace="u1")
    mem.compact(before=T0 + timedelta(days=25), namespace="u1")
    hits = mem.search(
        "hosting migration plan A servers", k=6, namespace="u1", include_archived=include_archived
    )
    old = next(h for h in hits if h.status == "superseded")
    assert old.source_ids == ("m5", "m6") and old.successors
    assert set(old.successors) <= {h.node_id for h in hits}


@pytest.mark.parametrize("then", ["ingest", "forget"])
def test_a_reopened_store_finds_what_the_open_one_found_after_compaction(tmp_path, then):
    """After a compaction, a subtopic's vector depended on the order its parts were derived in:
    rebuilt (a reopen) it left the archive node out, since archives got their vectors in the same
    step as subtopics; refreshed by a later ingest or forget it took the archive in, whose vector
    was there by then. The same store then ranked and scored differently once reopened (f:m5's
    semantic score .819 against .751)."""
    from _over_time import T0, WEEKS

    path = tmp_path / "m.db"
    mem = MnemisMemory(path, embedder=HashingEmbedder())
    mem.add_messages(WEEKS[:10], namespace="u1")
    mem.compact(before=T0 + timedelta(days=25), namespace="u1")
    mem.add_messages(WEEKS[10:], namespace="u1")
    if then == "forget":
        mem.forget(["m6"], namespace="u1")
    queries = ["hosting migration plan A servers", "refund bank callback", "vault code", "lunch friday"]

    def found(m: MnemisMemory) -> list[list[tuple]]:
        return [
            [
                (h.node_id, h.source_ids, h.via, h.score, h.semantic_score)
                for h in m.search(q, k=8, namespace="u1")
            ]
            for q in queries
        ]

    before = found(mem)
    mem.close()
    with MnemisMemory(path, embedder=HashingEmbedder()) as reopened:
        after = found(reopened)
    for was, now in zip(before, after, strict=True):
        assert [h[:3] for h in now] == [h[:3] for h in was]
        assert [x for h in now for x in h[3:]] == pytest.approx([x for h in was for x in h[3:]], abs=1e-4)
