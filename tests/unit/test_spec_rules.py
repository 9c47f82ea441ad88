"""SPEC rules checked end to end where the code fell short: the health check's split, a superseded
hit's successor under a score threshold and in ``via``, and erasure after a merge of duplicates."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.maintenance.health import MAX_SPAN_DAYS, plan_split, span_days
from mnemis_integrations.core.model import EdgeKind, NodeKind

T0 = datetime(2025, 3, 3, 9, tzinfo=timezone.utc)


def _sprawling() -> MnemisMemory:
    """One subtopic of eight fragments six days apart: 42 days, which three parts of two weeks cover."""
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(
        [
            {
                "id": f"m{i}",
                "speaker": "ann",
                "text": f"Refund for order {40 + i} timed out at the bank callback.",
                "timestamp": T0 + timedelta(days=6 * i),
            }
            for i in range(8)
        ],
        namespace="u1",
    )
    return mem


def test_a_split_leaves_no_part_over_two_weeks_when_three_parts_can_cover_the_span():
    times = [T0 + timedelta(days=6 * i) for i in range(8)]
    parts = plan_split([f"f{i}" for i in range(8)], times, np.eye(8))
    assert 2 <= len(parts) <= 3
    spans = [span_days([times[int(f[1:])] for f in p]) for p in parts]
    assert max(spans) <= MAX_SPAN_DAYS, parts


def test_after_a_rebalance_no_subtopic_spans_more_than_two_weeks_when_three_parts_suffice():
    mem = _sprawling()
    assert any("long_span" in s.reasons for s in mem.health("u1").subtopics)
    mem.rebalance("u1")
    assert not [s for s in mem.health("u1").subtopics if "long_span" in s.reasons]


def test_the_subtopic_a_split_keeps_tells_the_time_and_summary_of_its_own_fragments():
    mem = _sprawling()
    out = mem.rebalance("u1")
    g = mem.graph("u1")
    for sid in out.subtopics_split + out.subtopics_created:
        sub = g.get(sid)
        kids = [c for c in g.children(sid) if c.kind == NodeKind.FRAGMENT]
        assert sub.event_time == max(c.event_time for c in kids), sid
        assert sub.created_at == min(c.created_at for c in kids), sid
        assert sub.summary == "; ".join(c.summary for c in kids[-3:]), sid


# A fragment holding two matters (the keys, the van); a later one replaces only the keys.
MOVING = [
    {
        "id": "m1",
        "speaker": "ana",
        "text": "I get the keys to the flat on 24 May.",
        "timestamp": "2025-05-01T09:00:00Z",
    },
    {
        "id": "m2",
        "speaker": "ana",
        "text": "Bob will help with the van on moving day.",
        "timestamp": "2025-05-01T09:01:00Z",
    },
    {
        "id": "m3",
        "speaker": "li",
        "text": "Carrot cake for the party on Saturday.",
        "timestamp": "2025-05-03T09:00:00Z",
    },
    {
        "id": "m4",
        "speaker": "li",
        "text": "The cinema tickets are booked for Sunday.",
        "timestamp": "2025-05-05T09:00:00Z",
    },
    {
        "id": "m5",
        "speaker": "ana",
        "text": "Keys pushed to 31 May, the previous tenant is delayed.",
        "timestamp": "2025-05-07T09:00:00Z",
    },
]
VAN = "Who helps with the van on moving day?"


def _moving() -> tuple[MnemisMemory, str, str]:
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(MOVING, namespace="u")
    g = mem.graph("u")
    frag = {m: n.id for n in g.nodes(NodeKind.FRAGMENT) for m in n.source_ids}
    old, new = frag["m1"], frag["m5"]
    assert [e.src for e in g.in_edges(old, EdgeKind.UPDATES)] == [new]  # the builder linked them
    return mem, old, new


def test_a_superseded_hit_a_score_threshold_keeps_is_not_returned_without_its_successor():
    mem, old, new = _moving()
    hits = mem.search(VAN, k=2, namespace="u")
    assert hits[0].node_id == old and hits[0].status == "superseded" and new in {h.node_id for h in hits}
    kept = mem.search(VAN, k=2, namespace="u", score_threshold=hits[0].score - 0.01)
    assert old in {h.node_id for h in kept}
    assert new in {h.node_id for h in kept}, [(h.node_id, h.score) for h in kept]


def test_a_successor_returned_only_with_the_hit_it_replaces_says_so():
    mem, old, new = _moving()
    hits = mem.search(VAN, k=2, namespace="u")
    ranked = [h.node_id for h in hits]
    assert ranked.index(new) == 2  # past k: it is there only as the superseded hit's successor
    assert "successor" in hits[2].via, hits[2].via


def test_a_relation_a_merged_duplicate_held_goes_when_the_message_it_was_read_from_is_forgotten():
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(
        [
            {
                "id": "m1",
                "speaker": "ana",
                "text": "Yesterday Priyankka secretly bribed Globex for the merger.",
                "timestamp": "2025-06-01T09:00:00Z",
            },
            {
                "id": "m2",
                "speaker": "li",
                "text": "Then Priyanka called Globex about the invoice.",
                "timestamp": "2025-06-02T09:00:00Z",
            },
            {
                "id": "m3",
                "speaker": "li",
                "text": "The weather is nice today in Paris.",
                "timestamp": "2025-06-03T09:00:00Z",
            },
        ],
        namespace="u",
    )

    def labels() -> set[str]:
        g = mem.graph("u")
        return {e.label for n in g.nodes(NodeKind.ENTITY) for e in g.out_edges(n.id, EdgeKind.RELATION)}

    assert "secretly_bribed" in labels()
    assert ("e:priyanka", "e:priyankka") in mem.rebalance("u").entities_merged
    assert "secretly_bribed" in labels()
    mem.forget(["m1"], namespace="u")
    assert "secretly_bribed" not in labels()  # read from m1 alone: erased with it
    assert "called" in labels()
