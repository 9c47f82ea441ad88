"""Compaction: old fragments merge into overviews, originals are archived (never deleted), and it is
reversible."""

from datetime import timedelta

import pytest
from _over_time import LAST, T0, WEEKS

from mnemis_integrations import MnemisMemory, NamespaceNotFoundError
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.maintenance.compaction import (
    compact_graph,
    is_overview,
    plan_compaction,
    uncompact_graph,
)
from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind, Status

CUTOFF = LAST - timedelta(days=14)


@pytest.fixture
def mem():
    m = MnemisMemory(embedder=HashingEmbedder())
    m.add_messages(WEEKS, namespace="u1")
    return m


def _live(g):
    return {
        n.id
        for n in g.nodes()
        if n.kind in (NodeKind.CONCEPT, NodeKind.SUBTOPIC, NodeKind.FRAGMENT) and n.status != Status.ARCHIVED
    }


def test_compaction_archives_old_fragments_and_keeps_every_message_reachable(mem):
    before = {m.id for m in mem.messages("u1")}
    n_nodes = len(mem.graph("u1"))
    rep = mem.compact(before=CUTOFF, namespace="u1")
    g = mem.graph("u1")
    assert rep.overviews_created >= 1 and rep.fragments_archived >= 2
    assert len(g) > n_nodes  # nothing deleted: overviews and archive nodes are added
    for oid in rep.overview_ids:
        ov = g.get(oid)
        originals = [g.get(f) for f in ov.properties["overview_of"]]
        assert all(o.status == Status.ARCHIVED and g.parent(o.id).kind == NodeKind.ARCHIVE for o in originals)
        assert sorted(ov.source_ids) == sorted(m for o in originals for m in o.source_ids)
        assert ov.event_time < CUTOFF
    reachable = {m for f in g.nodes(NodeKind.FRAGMENT) if f.status != Status.ARCHIVED for m in f.source_ids}
    assert reachable == before


def test_archived_originals_leave_default_search_and_return_with_include_archived(mem):
    rep = mem.compact(before=CUTOFF, namespace="u1")
    archived = {f for oid in rep.overview_ids for f in mem.graph("u1").get(oid).properties["overview_of"]}
    plain = mem.search("refund bank callback", k=20, namespace="u1")
    assert not archived & {h.node_id for h in plain}
    assert any(h.node_id in rep.overview_ids for h in plain)
    full = mem.search("refund bank callback", k=20, namespace="u1", include_archived=True)
    ids = {h.node_id for h in full}
    assert archived & ids
    assert not set(rep.overview_ids) & ids  # the originals stand for themselves
    shown = [h for h in full if h.node_id in archived]
    assert all("Archive" in h.path for h in shown)


def test_compaction_cuts_nodes_that_default_search_scores(mem):
    g = mem.graph("u1")
    n0 = len(_live(g))
    mem.compact(before=CUTOFF, namespace="u1")
    assert len(_live(mem.graph("u1"))) < n0


def test_uncompact_restores_the_graph_exactly(mem):
    data0 = mem.graph("u1").to_data()
    mem.compact(before=CUTOFF, namespace="u1")
    restored = mem.uncompact(namespace="u1")
    assert restored
    data1 = mem.graph("u1").to_data()

    def key(d):
        return sorted(
            (n["id"], n["status"], tuple(n["source_ids"]), n["properties"].get("archived_in"))
            for n in d["nodes"]
        )

    def edges(d):
        return sorted((e["src"], e["dst"], e["kind"], e["label"]) for e in d["edges"])

    assert key(data1) == key(data0)
    assert edges(data1) == edges(data0)


def test_compaction_persists_and_reopens(tmp_path):
    path = tmp_path / "m.db"
    with MnemisMemory(path, embedder=HashingEmbedder()) as m:
        m.add_messages(WEEKS, namespace="u1")
        rep = m.compact(before=CUTOFF, namespace="u1")
    with MnemisMemory(path, embedder=HashingEmbedder()) as m:
        g = m.graph("u1")
        assert all(is_overview(g.get(o)) for o in rep.overview_ids)
        hits = m.search("refund bank callback", k=10, namespace="u1")
        assert any(h.node_id in rep.overview_ids for h in hits)


def test_time_travel_before_the_overview_was_complete_sees_the_originals(mem):
    rep = mem.compact(before=CUTOFF, namespace="u1")
    g = mem.graph("u1")
    ov = g.get(rep.overview_ids[0])
    first = g.get(ov.properties["overview_of"][0])
    early = first.event_time + timedelta(minutes=5)
    assert ov.event_time > early
    hits = mem.search("refund bank callback hosting plan", k=30, namespace="u1", as_of=early)
    ids = {h.node_id for h in hits}
    assert ov.id not in ids
    assert first.id in ids


def test_superseded_and_current_fragments_never_share_an_overview():
    g = MemoryGraph("u")
    from datetime import datetime, timezone

    def t(d):
        return datetime(2025, 3, d, tzinfo=timezone.utc)

    g.add_node(Node("s", NodeKind.SUBTOPIC, "S", "u"))
    for i, d in enumerate([1, 2, 3, 4]):
        g.add_node(
            Node(f"f{i}", NodeKind.FRAGMENT, "F", "u", source_ids=[f"m{i}"], created_at=t(d), event_time=t(d))
        )
        g.add_edge(Edge(f"f{i}", "s", EdgeKind.BELONGS_TO))
    g.add_node(
        Node("new", NodeKind.FRAGMENT, "N", "u", source_ids=["m9"], created_at=t(25), event_time=t(25))
    )
    g.add_edge(Edge("new", "s", EdgeKind.BELONGS_TO))
    from mnemis_integrations.core.maintenance.supersede import supersede

    supersede(g, old_id="f0", new_id="new", when=t(25))
    supersede(g, old_id="f1", new_id="new", when=t(25))
    plans = plan_compaction(g, t(10))
    assert sorted((p.members, p.superseded) for p in plans) == [(("f0", "f1"), True), (("f2", "f3"), False)]
    rep = compact_graph(g, t(10))
    old_ov = next(g.get(o) for o in rep.overview_ids if g.get(o).status == Status.SUPERSEDED)
    assert [n.id for n in g.successors_of(old_ov.id)] == ["new"]
    uncompact_graph(g)
    assert g.get("f0").status == Status.SUPERSEDED and g.get("f2").status == Status.ACTIVE


def test_nothing_old_enough_means_nothing_changes(mem):
    rep = mem.compact(before=T0, namespace="u1")
    assert rep.overviews_created == 0 and rep.fragments_archived == 0


def test_compacting_an_unknown_namespace_is_reported(mem):
    with pytest.raises(NamespaceNotFoundError):
        mem.compact(before=CUTOFF, namespace="nobody")


def test_new_messages_never_extend_an_overview_and_uncompact_keeps_them(mem):
    from _over_time import msg

    mem.compact(before=LAST + timedelta(days=1), namespace="u1")
    mem.add_messages(
        [msg(14, "Noodle lunch moved to the ramen bar.", "bob", days=34, minutes=2)], namespace="u1"
    )
    g = mem.graph("u1")
    holder = next(
        f for f in g.nodes(NodeKind.FRAGMENT) if "m14" in f.source_ids and f.status != Status.ARCHIVED
    )
    assert not is_overview(holder)
    mem.uncompact(namespace="u1")
    g = mem.graph("u1")
    placed = {m for f in g.nodes(NodeKind.FRAGMENT) for m in f.source_ids}
    assert placed == {m.id for m in mem.messages("u1")}


def test_an_overview_hit_shows_its_matching_lines_first_under_its_dates(mem):
    """An overview spans conversations: in conversation order, the line that answers may sit
    anywhere in it, past what a budget keeps of its text."""
    rep = mem.compact(before=CUTOFF, namespace="u1")
    g = mem.graph("u1")
    ov = max((g.get(o) for o in rep.overview_ids), key=lambda n: len(n.source_ids))
    assert len(ov.source_ids) >= 3
    by_id = {m.id: m for m in mem.messages("u1")}
    target = by_id[ov.source_ids[-1]]  # said last
    hits = mem.search(target.text, k=20, namespace="u1")
    shown = next(h for h in hits if h.node_id == ov.id)
    lines = shown.text.splitlines()
    assert lines[0].startswith("[") and lines[0].endswith("] overview") and " – " in lines[0]
    assert shown.source_ids[0] == target.id and lines[1] == f"{target.speaker}: {target.text}"
    assert sorted(shown.source_ids) == sorted(ov.source_ids)
    narrowed = mem.fit_to_budget([shown], 40)[0]  # the budget keeps that line
    assert narrowed.source_ids[0] == target.id
