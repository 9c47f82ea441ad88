"""Time: messages told out of order, node times written through an adapter, and times far ahead are
ordered and compared as the moments they name."""

from __future__ import annotations

import pytest

from mnemis_integrations import EdgeKind, MnemisMemory, NodeKind, Status
from mnemis_integrations.core.embedders import HashingEmbedder

OLD = {
    "id": "old",
    "speaker": "ana",
    "text": "The team offsite budget is 5000 euros for the Lisbon trip.",
    "timestamp": "2025-03-01T10:00:00Z",
}
NEW = {
    "id": "new",
    "speaker": "ana",
    "text": "Update: the team offsite budget changed to 7000 euros for the Lisbon trip.",
    "timestamp": "2025-03-20T10:00:00Z",
}


def _updates(mem: MnemisMemory, namespace: str) -> list[tuple[str, str]]:
    return sorted((e.src, e.dst) for e in mem.graph(namespace).edges() if e.kind == EdgeKind.UPDATES)


def test_an_earlier_statement_told_late_is_replaced_by_the_newer_one_already_stored():
    """An imported history arrives after the live chat: the newer statement, stored first, is still
    the one in force, as when the two come in one batch (the README: one batch links what the same
    messages added one at a time link)."""
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages([NEW, OLD], namespace="batch")
    mem.add_messages([NEW], namespace="late")
    mem.add_messages([OLD], namespace="late")

    assert _updates(mem, "batch") == [("f:new", "f:old")]
    assert _updates(mem, "late") == _updates(mem, "batch")
    assert mem.graph("late").get("f:old").status == Status.SUPERSEDED
    first = next(h for h in mem.search("offsite budget", namespace="late") if h.kind == "fragment")
    assert first.source_ids == ("new",)


def test_a_node_time_written_without_an_offset_through_the_graph_store_is_taken_as_utc():
    """A naive ``created_at`` written through the LlamaIndex graph store is read as UTC, as a message's
    time is: kept naive, it broke every later ``search(as_of=...)`` of the namespace with a TypeError."""
    pytest.importorskip("llama_index.core")
    from llama_index.core.graph_stores.types import ChunkNode

    from mnemis_integrations.llama_index import MnemisPropertyGraphStore

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages([OLD], namespace="pg")
    store = MnemisPropertyGraphStore(memory=mem, namespace="pg")
    when = "2025-03-02T09:00:00"
    store.upsert_nodes(
        [ChunkNode(text="offsite budget review", label="fragment", properties={"created_at": when})]
    )
    node = next(n for n in mem.graph("pg").nodes(NodeKind.FRAGMENT) if n.summary == "offsite budget review")
    assert node.created_at is not None and node.created_at.utcoffset() is not None

    hits = mem.search("offsite budget", namespace="pg", as_of="2025-03-05T00:00:00Z")
    assert any(h.source_ids == ("old",) for h in hits)


def test_messages_a_microsecond_apart_far_ahead_keep_the_order_they_were_said():
    """Order is by the moment, not by a float of seconds since 1970 (which past the year 2242 no longer
    tells microseconds apart, and then put arrival order first)."""
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(
        [
            {
                "id": "b",
                "speaker": "li",
                "text": "And then we booked the hall.",
                "timestamp": "2300-05-01T10:00:00.000002Z",
            },
            {
                "id": "a",
                "speaker": "ana",
                "text": "We should book the hall.",
                "timestamp": "2300-05-01T10:00:00.000001Z",
            },
        ],
        namespace="u",
    )
    (fragment,) = mem.graph("u").nodes(NodeKind.FRAGMENT)
    assert fragment.source_ids == ["a", "b"]
