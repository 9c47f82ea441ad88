"""Health check and rebalancing: sprawling and loosened subtopics, duplicates, orphans, sink-split."""

from datetime import datetime, timedelta, timezone

import numpy as np

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.maintenance.health import check_health, plan_split, rebalance_graph
from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind

T = datetime(2025, 3, 1, tzinfo=timezone.utc)


def _toy(days, vecs):
    """One concept, one subtopic holding fragments at the given days with the given vectors."""
    g = MemoryGraph("u")
    g.add_node(Node("c", NodeKind.CONCEPT, "C", "u"))
    g.add_node(Node("s", NodeKind.SUBTOPIC, "S", "u"))
    g.add_edge(Edge("s", "c", EdgeKind.BELONGS_TO))
    table = {}
    for i, (d, v) in enumerate(zip(days, vecs, strict=True)):
        fid = f"f{i}"
        g.add_node(
            Node(
                fid,
                NodeKind.FRAGMENT,
                fid,
                "u",
                keywords=[f"k{i}"],
                created_at=T + timedelta(days=d),
                event_time=T + timedelta(days=d),
            )
        )
        g.add_edge(Edge(fid, "s", EdgeKind.BELONGS_TO))
        table[fid] = np.asarray(v, np.float32) / np.linalg.norm(v)
    return g, lambda ids: np.stack([table[i] for i in ids]) if ids else np.zeros((0, 2), np.float32)


def test_subtopic_spanning_five_weeks_is_flagged_and_sink_split_in_time():
    g, vec = _toy([0, 1, 2, 30, 31, 33], [[1, 0.1]] * 6)
    rep = check_health(g, vec, min_cohesion=0.5)
    assert [(i.node_id, i.reasons) for i in rep.subtopics] == [("s", ("long_span",))]
    out = rebalance_graph(g, rep, vec)
    assert out.subtopics_split == ("s",) and len(out.subtopics_created) == 1
    new = out.subtopics_created[0]
    assert sorted(c.id for c in g.children("s")) == ["f0", "f1", "f2"]
    assert sorted(c.id for c in g.children(new)) == ["f3", "f4", "f5"]
    assert g.parent(new).id == "c"
    assert check_health(g, vec, min_cohesion=0.5).subtopics == ()


def test_loosened_subtopic_is_split_by_content():
    g, vec = _toy([0, 1, 2, 3], [[1, 0], [1, 0.05], [0, 1], [0.05, 1]])
    rep = check_health(g, vec, min_cohesion=0.9)
    assert rep.subtopics[0].reasons == ("low_cohesion",)
    out = rebalance_graph(g, rep, vec)
    groups = sorted(sorted(c.id for c in g.children(s)) for s in ("s", out.subtopics_created[0]))
    assert groups == [["f0", "f1"], ["f2", "f3"]]


def test_split_never_makes_more_than_three_parts():
    t = [T + timedelta(days=d) for d in (0, 20, 40, 60, 80)]
    parts = plan_split(list("abcde"), t, np.eye(5), max_parts=3)
    assert 2 <= len(parts) <= 3 and sorted(x for p in parts for x in p) == list("abcde")


def test_duplicate_entities_merge_and_orphans_are_reattached():
    g, _ = _toy([0, 1], [[1, 0], [1, 0.1]])
    g.add_node(Node("e:acme", NodeKind.ENTITY, "Acme", "u"))
    g.add_node(Node("e:acme corp", NodeKind.ENTITY, "Acme Corp", "u"))
    g.add_edge(Edge("f1", "e:acme corp", EdgeKind.MENTIONS))
    g.add_node(Node("orphan", NodeKind.FRAGMENT, "o", "u"))

    def table_vec(ids):
        return np.stack([[1.0, 0.0] for _ in ids]).astype(np.float32)

    rep = check_health(g, table_vec, min_cohesion=0.5)
    assert rep.duplicate_entities == (("e:acme", "e:acme corp"),) and rep.orphan_fragments == ("orphan",)
    rebalance_graph(g, rep, table_vec)
    assert not g.has("e:acme corp") and "Acme Corp" in g.get("e:acme").aliases
    assert [e.dst for e in g.out_edges("f1", EdgeKind.MENTIONS)] == ["e:acme"]
    assert g.parent("orphan").id == "s"


def test_healthy_graph_reports_ok():
    g, vec = _toy([0, 1, 2], [[1, 0]] * 3)
    assert check_health(g, vec, min_cohesion=0.5).ok


def test_engine_health_and_rebalance_on_a_sprawling_conversation():
    t0 = datetime(2025, 3, 3, 9, tzinfo=timezone.utc)
    msgs = [
        {
            "id": f"m{i}",
            "speaker": "ann",
            "text": f"Refund for order {40 + i} timed out at the bank callback.",
            "timestamp": t0 + timedelta(days=6 * i),
        }
        for i in range(8)
    ]
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(msgs, namespace="u1")
    rep = mem.health("u1")
    assert any("long_span" in s.reasons for s in rep.subtopics)
    assert rep.to_dict()["ok"] is False
    widest = max(s.span_days for s in rep.subtopics)
    out = mem.rebalance("u1")
    assert 1 <= len(out.subtopics_created) <= 2 * len(out.subtopics_split)  # 2-3 parts per split subtopic
    after = [s.span_days for s in mem.health("u1").subtopics if "long_span" in s.reasons]
    assert max(after, default=0.0) < widest
    for f in mem.graph("u1").nodes(NodeKind.FRAGMENT):
        assert [a.kind for a in mem.graph("u1").ancestors(f.id)] == [NodeKind.SUBTOPIC, NodeKind.CONCEPT]
    assert mem.search("refund bank", k=3, namespace="u1")
