"""Caches and derived tables never outlive the state they were computed from: found by a random
driver comparing a live memory's searches with the same state's caches dropped and with a memory
reopened on the same store."""

from __future__ import annotations

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind, Status

LUNCH = "Let's get lunch on Friday at the Thai place."
REFUND = "The refund for order 42 timed out at the bank."


def _said(*rows: tuple[str, str, str, str]) -> list[dict]:
    return [{"id": i, "speaker": s, "text": t, "timestamp": f"{d}Z"} for i, s, t, d in rows]


def test_a_concept_left_with_an_empty_subtopic_keeps_no_vector_of_a_forgotten_message(tmp_path):
    """c:m1 holds the subtopic of m2 (moved there by hand) and an empty subtopic. Forgetting m2
    removes its fragment and subtopic; the concept stays (it still holds the empty one), and its
    vector, the mean of the subtopics beneath it that have one, cannot be derived any more. It was
    kept: the concept went on carrying m2's vector, so the live memory found it for m2's words (a
    reopened store derives no vector for it and does not)."""
    path = tmp_path / "m.db"
    mem = MnemisMemory(path=path, embedder=HashingEmbedder())
    mem.add_messages(
        _said(("m1", "ann", REFUND, "2025-03-01T09:00:00"), ("m2", "bob", LUNCH, "2025-03-20T09:00:00")),
        namespace="u",
    )
    with mem.edit("u") as g:  # the two subtopics swap concepts; c:m1 also gets an empty one
        g.remove_edge("s:m2", "c:m2", EdgeKind.BELONGS_TO)
        g.add_edge(Edge("s:m2", "c:m1", EdgeKind.BELONGS_TO))
        g.remove_edge("s:m1", "c:m1", EdgeKind.BELONGS_TO)
        g.add_edge(Edge("s:m1", "c:m2", EdgeKind.BELONGS_TO))
        g.add_node(Node("s:kept", NodeKind.SUBTOPIC, "kept", "u"))
        g.add_edge(Edge("s:kept", "c:m1", EdgeKind.BELONGS_TO))
    mem.forget(["m2"], namespace="u")
    reopened = MnemisMemory(path=path, embedder=HashingEmbedder())
    try:
        assert reopened.graph("u").to_data() == mem.graph("u").to_data()
        live = [(h.node_id, h.score, h.via) for h in mem.search(LUNCH, namespace="u")]
        again = [(h.node_id, h.score, h.via) for h in reopened.search(LUNCH, namespace="u")]
        assert "c:m1" not in [i for i, _, _ in live]
        assert live == again
    finally:
        reopened.close()
        mem.close()


def test_forget_leaves_no_memo_of_the_state_before_holding_what_was_forgotten():
    """A search memoises tables of the state it read (entity mention counts by entity id, the
    speakers). Forget moves the version, so no later search reads them, but they stayed on the live
    state until the next search replaced them: "e:mercy hospital", a name only the forgotten message
    said, and its speaker stayed in the process, which forget empties of the forgotten text (its text
    caches are emptied for the same reason)."""
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(
        _said(
            ("m1", "ann", REFUND, "2025-03-01T09:00:00"),
            ("m2", "bob", "At Mercy Hospital my diagnosis was xylophonitis.", "2025-03-01T09:01:00"),
        ),
        namespace="u",
    )
    mem.search("what happened at Mercy Hospital", namespace="u")
    mem.forget(["m2"], namespace="u")
    held = repr([value for _, value in mem._states["u"].memo.values()]).lower()
    assert "mercy" not in held
    assert "'bob'" not in held


def test_forget_leaves_a_name_to_the_other_entity_holding_it(tmp_path):
    """Two entities are named "Berlin": the builder's, mentioned by m1, and one added by hand that
    only m2's fragment mentions (as the LlamaIndex store or a hand edit makes them). The name index
    names the later one. Forgetting m2 removes it, and its name went from the index with it: the
    live memory no longer found e:berlin by name, so "Who lives in Berlin?" fell back to the
    semantic path alone, where a reopened memory follows e:berlin (scores and via differ)."""
    path = tmp_path / "m.db"
    mem = MnemisMemory(path=path, embedder=HashingEmbedder())
    mem.add_messages(
        _said(
            ("m1", "ann", "Alice moved to Berlin and works at Siemens.", "2025-03-01T09:00:00"),
            ("m2", "ann", LUNCH, "2025-03-20T09:00:00"),
            ("m3", "ann", REFUND, "2025-04-10T09:00:00"),
            ("m4", "ann", "Server costs went over budget again this month.", "2025-05-01T09:00:00"),
            ("m5", "ann", "Carol's dog Rex got sick and went to the vet.", "2025-05-20T09:00:00"),
        ),
        namespace="u",
    )

    def duplicate(g):
        g.add_node(Node("e:berlin-2", NodeKind.ENTITY, "Berlin", "u"))
        g.add_edge(Edge("f:m2", "e:berlin-2", EdgeKind.MENTIONS))

    mem.apply(duplicate, namespace="u")
    mem.forget(["m2"], namespace="u")
    reopened = MnemisMemory(path=path, embedder=HashingEmbedder())
    try:
        assert reopened.graph("u").to_data() == mem.graph("u").to_data()
        query = "Who lives in Berlin?"
        live = [(h.node_id, h.score, h.via) for h in mem.search(query, namespace="u")]
        again = [(h.node_id, h.score, h.via) for h in reopened.search(query, namespace="u")]
        assert live[0][0] == "f:m1" and "relation" in live[0][2]
        assert live == again
    finally:
        reopened.close()
        mem.close()


def test_a_search_inside_an_edit_reads_the_graph_as_the_block_left_it():
    """The per-version tables key on the write version, which an edit only moves on exit: a search
    made inside the block (the namespace's lock lets its own thread in) read the statuses and the
    hierarchy from before the change, a hidden node still among its hits."""
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(
        _said(("m1", "ann", REFUND, "2025-03-01T09:00:00"), ("m2", "bob", LUNCH, "2025-03-20T09:00:00")),
        namespace="u",
    )
    assert "f:m1" in [h.node_id for h in mem.search(REFUND, namespace="u")]
    with mem.edit("u") as g:
        g.get("f:m1").status = Status.ARCHIVED
        inside = [h.node_id for h in mem.search(REFUND, namespace="u")]
    after = [h.node_id for h in mem.search(REFUND, namespace="u")]
    assert "f:m1" not in after
    assert inside == after
