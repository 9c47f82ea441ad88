"""The builder's per-fragment lookups go through indexes, not scans of the namespace: the
nearest-neighbour searches they use, the incremental views of the build index, and the
decisions they lead to (the same as scanning every candidate)."""

import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from _over_time import TOPICS, WEEKS
from _toy_graph import OFFICE, toy_state
from falkordb_server import server_url

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core import recipes
from mnemis_integrations.core.builder import abstract
from mnemis_integrations.core.builder.steps import BuildReport
from mnemis_integrations.core.config import MemoryConfig
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.indexes.incremental import BuildIndex
from mnemis_integrations.core.indexes.vector import VectorIndex
from mnemis_integrations.core.maintenance.supersede import REPLACED, REPLACED_BY
from mnemis_integrations.core.model import Edge, EdgeKind, Message, Node, NodeKind, Status

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)

_GUESTS = [
    "Mira",
    "Zoltan",
    "Priya",
    "Kenji",
    "Olu",
    "Ines",
    "Tomasz",
    "Yara",
    "Dev",
    "Sione",
    "Aiko",
    "Rafa",
]
_CUES = [
    "we switched to {x} instead",
    "{x} is cancelled, moved to {y}",
    "final decision: {x} replaces {y}",
    "the {x} got postponed",
    "update: {x} no longer needed",
]


def chat(n: int, seed: int = 7) -> list[dict]:
    """A long synthetic chat: topics that come back, named people and products, change cues."""
    rnd = random.Random(seed)
    out, t = [], T0
    for i in range(n):
        name, things = TOPICS[rnd.randrange(len(TOPICS)) if i % 4 == 0 else (i // 4) % len(TOPICS)]
        x, y = rnd.sample(things, 2)
        if rnd.random() < 0.12:
            text = f"{name}: " + rnd.choice(_CUES).format(x=x, y=y) + "."
        else:
            text = f"{name} asked about the {x} and the {y}, number {rnd.randrange(100)}."
        if rnd.random() < 0.4:
            text += f" {rnd.choice(_GUESTS)} and {rnd.choice(_GUESTS)} joined the call."
        t += timedelta(minutes=rnd.choice([1, 2, 3, 90, 600]))
        out.append(
            {"id": f"m{i}", "speaker": rnd.choice(["ann", "bob", "Carla"]), "text": text, "timestamp": t}
        )
    return out


def canonical(g) -> tuple:
    nodes = sorted(
        (
            n.id,
            n.kind.value,
            n.label,
            n.status.value,
            (g.parent(n.id).id if g.parent(n.id) else None),
            tuple(sorted(n.source_ids)),
        )
        for n in g.nodes()
    )
    return nodes, sorted((e.src, e.dst, e.kind.value, e.label) for e in g.edges())


def tight() -> MemoryConfig:
    # Small parents fill up, so placement has to look past full ones.
    return recipes.DEFAULT.with_(build={"max_subtopic_fragments": 2, "max_concept_subtopics": 2})


# ------------------------------------------------------------------ VectorIndex


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_nearest_with_a_filter_and_a_floor_equals_brute_force():
    rng = np.random.default_rng(1)
    x = _unit(rng.normal(size=(500, 16)))
    keys = [f"k{i}" for i in range(500)]
    idx = VectorIndex(16)
    idx.upsert(keys, x)
    for q in _unit(rng.normal(size=(5, 16))):
        sims = x @ q
        for n, keep, floor in [
            (7, None, None),
            (10, lambda k: int(k[1:]) % 9 == 0, None),
            (500, lambda k: int(k[1:]) % 2 == 1, 0.1),
            (3, lambda k: False, None),
        ]:
            got = idx.nearest(q, n, keep, min_score=floor)
            ranked = [
                keys[i]
                for i in np.argsort(-sims, kind="stable")
                if (keep is None or keep(keys[i])) and (floor is None or sims[i] >= floor)
            ]
            assert [k for k, _ in got] == ranked[:n]
            assert np.allclose([s for _, s in got], [sims[int(k[1:])] for k, _ in got], atol=1e-5)


def test_nearest_in_a_group_equals_brute_force_over_that_group_after_updates_and_removals():
    rng = np.random.default_rng(2)
    idx = VectorIndex(8)
    vecs = {
        f"{kind}{i}": v
        for i, (kind, v) in enumerate(zip("fsc" * 100, _unit(rng.normal(size=(300, 8))), strict=True))
    }
    idx.upsert(list(vecs)[:150], np.stack(list(vecs.values())[:150]))
    idx.partition(lambda k: k[0] if k[0] in "sc" else None)  # after some keys: they are grouped too
    idx.upsert(list(vecs)[150:], np.stack(list(vecs.values())[150:]))
    for k in list(vecs)[::7]:  # rewrite some in place
        vecs[k] = _unit(rng.normal(size=(1, 8)))[0]
        idx.upsert([k], vecs[k][None])
    gone = list(vecs)[::11]
    idx.remove(gone)
    for k in gone:
        del vecs[k]
    q = _unit(rng.normal(size=(1, 8)))[0]
    for group in "sc":
        members = [k for k in vecs if k[0] == group]
        expect = sorted(members, key=lambda k: -float(vecs[k] @ q))[:12]
        got = idx.nearest(q, 12, group=group)
        assert [k for k, _ in got] == expect
        assert np.allclose([s for _, s in got], [vecs[k] @ q for k in expect], atol=1e-5)
    assert idx.nearest(q, 3, group="x") == []
    with pytest.raises(ValueError, match="partition"):
        VectorIndex(8).nearest(q, 3, group="s")


def test_upsert_of_present_keys_rewrites_them_in_place():
    rng = np.random.default_rng(3)
    a = _unit(rng.normal(size=(50, 8)))
    b = _unit(rng.normal(size=(50, 8)))
    keys = [f"k{i}" for i in range(50)]
    idx = VectorIndex(8)
    idx.upsert(keys, a)
    idx.remove(keys[:5])
    idx.upsert(keys[::2] + ["k1", "k1"], np.concatenate([b[::2], a[:1], b[1:2]]))  # k1 twice: the last wins
    expect = {
        k: (b[i] if i % 2 == 0 or i == 1 else a[i])
        for i, k in enumerate(keys)
        if i % 2 == 0 or i == 1 or i >= 5
    }
    assert sorted(idx.keys()) == sorted(expect)
    assert np.allclose(idx.get_many(list(expect)), np.stack(list(expect.values())))
    q = _unit(rng.normal(size=(1, 8)))[0]
    ref = VectorIndex.from_arrays(8, list(expect), np.stack(list(expect.values())))
    assert list(idx.search(q, 10)) == list(ref.search(q, 10))


def test_the_ann_sidecar_follows_rewrites_in_place():
    rng = np.random.default_rng(4)
    keys = [f"k{i}" for i in range(300)]
    idx = VectorIndex(8)
    idx.upsert(keys, _unit(rng.normal(size=(300, 8))))
    idx.ann_min = 1
    idx.build_ann()
    q = _unit(rng.normal(size=(1, 8)))[0]
    idx.upsert(["k2"], q[None])
    assert next(iter(idx.top(q, 1))) == "k2"
    assert idx.top(q, 1)["k2"] == pytest.approx(1.0, abs=1e-5)


def test_removed_keys_stay_out_of_every_search_before_and_after_compaction(monkeypatch):
    """Removal tombstones rows instead of compacting the flat storage each time: every search
    (flat, filtered, grouped, ANN) answers as an index built from the live keys alone, and the
    mean follows; past the tolerated count one compaction drops the tombstones."""
    from mnemis_integrations.core.indexes import vector

    monkeypatch.setattr(vector, "COMPACT_MIN", 20)
    rng = np.random.default_rng(5)
    live = {f"{'sf'[i % 2]}{i}": v for i, v in enumerate(_unit(rng.normal(size=(400, 8))))}
    idx = VectorIndex(8)
    idx.upsert(list(live), np.stack(list(live.values())))
    idx.partition(lambda k: "s" if k[0] == "s" else None)
    idx.ann_min = 1
    compactions = []
    monkeypatch.setattr(
        VectorIndex, "_compact", lambda self, real=VectorIndex._compact: (compactions.append(1), real(self))
    )
    for step in range(12):
        gone = list(live)[step::13][:9]
        idx.remove(gone + gone[:1])  # a key given twice is removed once
        for k in gone:
            del live[k]
        fresh = {f"n{step}-{j}": v for j, v in enumerate(_unit(rng.normal(size=(3, 8))))}
        idx.upsert(list(fresh), np.stack(list(fresh.values())))
        live |= fresh
        q = _unit(rng.normal(size=(1, 8)))[0]
        ref = VectorIndex.from_arrays(8, list(live), np.stack(list(live.values())))
        assert list(idx.search(q, 15)) == list(ref.search(q, 15))
        assert [k for k, _ in idx.nearest(q, 10, keep=lambda k: k[0] != "s")] == [
            k for k, _ in ref.nearest(q, 10, keep=lambda k: k[0] != "s")
        ]
        group = sorted((k for k in live if k[0] == "s"), key=lambda k: -float(live[k] @ q))[:5]
        assert [k for k, _ in idx.nearest(q, 5, group="s")] == group
        assert set(idx.top(q, 50)) <= set(live)
        assert len(idx) == len(live) and np.allclose(
            idx.mean(), np.stack(list(live.values())).mean(axis=0), atol=1e-5
        )
    assert compactions  # more than the tolerated tombstones accumulated at least once


# ------------------------------------------------------------------ build index


def _fresh_view(st):
    live = st.build_index()
    fresh = BuildIndex(st)
    fresh.ready(st)
    # building it partitioned the state's node vectors anew: hand them back to the live index
    st.node_vectors.partition(lambda key: live._placement_group(st, key))
    return fresh


def _assert_index_matches_graph(st):
    g = st.graph
    idx = st.build_index()
    frags = g.nodes(NodeKind.FRAGMENT)
    open_ = [f for f in frags if f.status == Status.ACTIVE and "overview_of" not in f.properties]
    latest = max(
        open_, key=lambda f: (f.event_time is None, f.event_time.timestamp() if f.event_time else 0, f.id)
    )
    assert idx.open_tail(st).id == latest.id
    assert idx.fragment_count(st) == len(frags)
    assert idx.active_count(st) == sum(f.status == Status.ACTIVE for f in frags)
    counts = st.entity_fragment_counts()
    assert idx.counts(st, list(counts)) == counts
    fresh = _fresh_view(st)
    for eid in counts:
        assert idx.references(st, {eid}, 10**6) == fresh.references(st, {eid}, 10**6)
    assert idx.speakers(st) == fresh.speakers(st)
    for m in st.messages:
        assert sorted(idx.holders(st, m)) == sorted(f.id for f in frags if m in f.source_ids)
    for parent in g.nodes(NodeKind.SUBTOPIC) + g.nodes(NodeKind.CONCEPT):
        assert idx.child_count(st, parent.id) == len(g.children(parent.id))
    for f in open_:  # the live timeline, stale entries and all, reads as one built afresh
        assert idx.following(st, f.id) == fresh.following(st, f.id)
    for kind, cap in idx.capacity.items():  # placement searches exactly the parents not full
        open_parents = {
            n.id for n in g.nodes(kind) if n.id in st.node_vectors and len(g.children(n.id)) < cap
        }
        grouped = st.node_vectors.nearest(np.ones(st.dim, np.float32), 10**6, group=kind.value)
        assert {k for k, _ in grouped} == open_parents


def test_the_build_index_kept_by_the_builder_equals_one_built_from_the_graph():
    mem = MnemisMemory(embedder=HashingEmbedder(), config=tight())
    msgs = chat(160)
    for i in range(0, len(msgs), 7):
        mem.add_messages(msgs[i : i + 7], namespace="u")
        st = mem._states["u"]
        assert st.build_index() is st.build_index()  # kept, not rebuilt per call
    _assert_index_matches_graph(st)
    assert any(f.status == Status.SUPERSEDED for f in st.graph.nodes(NodeKind.FRAGMENT))


def test_the_fragment_following_another_is_the_next_open_one_in_time():
    st = toy_state()  # six one-message fragments, a day apart
    idx = st.build_index()
    ids = ["f_refund", "f_pricing", "f_plan_a", "f_plan_b", "f_lunch", "f_tea"]
    assert [idx.following(st, f) for f in ids] == ids[1:] + [None]
    # superseded behind the index's back: its timeline entry is stale and passed over
    st.node("f_plan_a").status = Status.SUPERSEDED
    assert idx.following(st, "f_pricing") == "f_plan_b"
    assert idx.following(st, "f_plan_a") is None  # no longer open: it carries no thread


def test_a_search_builds_only_the_timeline_and_a_write_before_the_whole_index_drops_it():
    st = toy_state()
    idx = st.build_index()
    assert idx.following(st, "f_lunch") == "f_tea"
    assert not idx._built  # the search did not pay for the builder's whole index
    said = st.messages["m6"]
    late = Message("m7", "Ann", "Tea is on the second shelf.", said.timestamp + timedelta(days=1), seq=7)
    st.messages[late.id] = late
    st.graph.add_node(
        Node("f_shelf", NodeKind.FRAGMENT, "f_shelf", "u", source_ids=["m7"], event_time=late.timestamp)
    )
    idx.fragment_written(st, st.graph.get("f_shelf"), created=True)  # a write the index does not follow
    assert idx.following(st, "f_tea") == "f_shelf"  # the timeline was built again, with it


def test_the_build_index_follows_a_forget_and_is_rebuilt_after_an_edit():
    mem = MnemisMemory(embedder=HashingEmbedder())
    msgs = chat(60)
    mem.add_messages(msgs[:40], namespace="u")
    st = mem._states["u"]
    before = st.build_index()
    before.ready(st)
    frags = [f for f in st.graph.nodes(NodeKind.FRAGMENT) if len(f.source_ids) > 1]
    # the last message of one fragment, the first of another (its id is made from it: renamed),
    # and every message of a third (it goes)
    for victims in ([frags[0].source_ids[-1]], [frags[1].source_ids[0]], list(frags[2].source_ids)):
        mem.forget(victims, namespace="u")
        st = mem._states["u"]
        assert st.build_index() is before  # followed, not built again from the whole graph
        _assert_index_matches_graph(st)
    # a reopened copy (its index not built yet) builds it once, then follows it
    mem2 = MnemisMemory(embedder=HashingEmbedder())
    mem2.add_messages(msgs[:40], namespace="u")
    mem2._states["u"].__dict__.pop("_build_index", None)
    first = mem2._states["u"].build_index()
    mem2.forget([frags[3].source_ids[-1]], namespace="u")
    assert mem2._states["u"].build_index() is first and first.matches(mem2._states["u"])
    _assert_index_matches_graph(mem2._states["u"])
    mem.add_messages(msgs[40:50], namespace="u")
    _assert_index_matches_graph(mem._states["u"])
    kept = mem._states["u"].build_index()
    with mem.edit("u") as g:
        g.get(g.nodes(NodeKind.SUBTOPIC)[0].id).label = "renamed by hand"
    assert mem._states["u"].build_index() is not kept
    mem.add_messages(msgs[50:], namespace="u")
    _assert_index_matches_graph(mem._states["u"])


def test_a_fragment_reopened_after_the_timeline_dropped_it_is_followed_again():
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(chat(40), namespace="u")
    st = mem._states["u"]
    idx = st.build_index()
    idx.ready(st)
    tail = idx.open_tail(st)
    before = [f for f in st.graph.nodes(NodeKind.FRAGMENT) if idx.following(st, f.id) == tail.id]
    tail.status = Status.SUPERSEDED  # as supersede() leaves it
    idx.status_changed(st, [tail.id])
    assert idx.open_tail(st).id != tail.id  # passed over, and dropped from the timeline's end
    assert all(idx.following(st, f.id) != tail.id for f in before)
    tail.status = Status.ACTIVE  # as a forget of its successor leaves it
    idx.status_changed(st, [tail.id])
    assert idx.open_tail(st).id == tail.id
    assert before and all(idx.following(st, f.id) == tail.id for f in before)
    _assert_index_matches_graph(st)


def test_full_parents_leave_the_placement_search_and_come_back_when_forget_frees_room():
    mem = MnemisMemory(embedder=HashingEmbedder(), config=tight())
    msgs = chat(160)
    for i in range(0, len(msgs), 7):
        mem.add_messages(msgs[i : i + 7], namespace="u")
    st = mem._states["u"]
    g = st.graph
    assert st.build_index().capacity == {NodeKind.SUBTOPIC: 2, NodeKind.CONCEPT: 2}
    full = [s for s in g.nodes(NodeKind.SUBTOPIC) if len(g.children(s.id)) == 2]
    assert full
    _assert_index_matches_graph(st)
    # every message of one child of a full subtopic: the child goes, the subtopic has room again
    victim = g.children(full[0].id)[0]
    mem.forget(list(victim.source_ids), namespace="u")
    st = mem._states["u"]
    assert any(len(st.graph.children(s.id)) == 1 for s in st.graph.nodes(NodeKind.SUBTOPIC))
    _assert_index_matches_graph(st)
    mem.add_messages([dict(m, id=f"later-{m['id']}") for m in chat(40, seed=5)], namespace="u")
    _assert_index_matches_graph(mem._states["u"])


def test_a_kept_state_and_a_reopened_one_build_the_same_graph(tmp_path):
    """The incremental views never hold anything that a reopened store (built from the graph) lacks."""
    msgs = chat(120, seed=11)
    kept = MnemisMemory(tmp_path / "kept.db", embedder=HashingEmbedder(), config=tight())
    path = tmp_path / "reopened.db"
    for i in range(0, len(msgs), 10):
        kept.add_messages(msgs[i : i + 10], namespace="u")
        with MnemisMemory(path, embedder=HashingEmbedder(), config=tight()) as mem:
            mem.add_messages(msgs[i : i + 10], namespace="u")
    with MnemisMemory(path, embedder=HashingEmbedder(), config=tight()) as mem:
        assert canonical(mem.graph("u")) == canonical(kept.graph("u"))
    kept.close()


# ------------------------------------------------------------------ decisions


@pytest.mark.parametrize("config", [recipes.DEFAULT, tight()], ids=["default", "small-parents"])
def test_narrow_candidate_searches_decide_as_a_scan_of_every_candidate(monkeypatch, config):
    """Widening makes the first candidate counts irrelevant: one candidate at first, or every
    node of the namespace at once (a full scan, as the builder did before), give the same graph."""
    msgs = chat(200, seed=3)

    def build(first: int) -> tuple:
        monkeypatch.setattr(abstract, "PLACE_CANDIDATES", first)
        mem = MnemisMemory(embedder=HashingEmbedder(), config=config)
        for i in range(0, len(msgs), 9):
            mem.add_messages(msgs[i : i + 9], namespace="u")
        return canonical(mem.graph("u"))

    monkeypatch.setattr(abstract, "PLACE_MAX_CANDIDATES", 10**9)
    narrow, full = build(1), build(10**9)
    assert narrow == full
    kinds = {e[2] for e in full[1]}
    assert {EdgeKind.UPDATES.value, EdgeKind.REFERENCES.value} <= kinds


class _Crowded(HashingEmbedder):
    """e5-like vectors: one direction shared by every text, topic words on top at a strength that
    varies by text, so the raw and the centred rankings of parents disagree."""

    def embed_passages(self, texts):
        base = super().embed_passages(texts)
        strength = np.array([0.2 + (sum(map(ord, t)) % 9) / 10 for t in texts], np.float32)[:, None]
        rows = np.ones(base.shape[1], np.float32) / np.sqrt(base.shape[1]) + strength * base
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    embed_queries = embed_passages


@pytest.mark.parametrize("centred", [False, True], ids=["raw", "centred"])
def test_keeping_full_parents_apart_places_as_searching_every_parent(monkeypatch, centred):
    """Full parents leave the placement group, yet the candidate window stays the raw-nearest
    parents full ones included: the graph is the one built with every parent in one group."""
    embedder = _Crowded()
    embedder.profile = replace(embedder.profile, centred_placement=centred)
    msgs = chat(240, seed=5)
    monkeypatch.setattr(abstract, "PLACE_CANDIDATES", 2)  # small windows: full parents fill them

    def build() -> tuple:
        mem = MnemisMemory(embedder=embedder, config=tight())
        for i in range(0, len(msgs), 3):
            mem.add_messages(msgs[i : i + 3], namespace="u")
        return canonical(mem.graph("u"))

    apart = build()
    monkeypatch.setattr(BuildIndex, "set_capacity", lambda self, st, capacity: None)  # one group per kind
    assert apart == build()
    assert sum(e[2] == EdgeKind.BELONGS_TO.value for e in apart[1]) > 100


@pytest.mark.parametrize("centred", [False, True], ids=["raw", "centred"])
def test_one_message_at_a_time_builds_what_one_batch_builds(centred):
    """Where the builder gave the same graph batch by batch as in one batch, it still does (a
    long chat need not: a segment may end differently when the next message is not there yet).
    Centred placement too: its centre is the mean of the messages up to the one being built."""
    embedder = HashingEmbedder()
    embedder.profile = replace(embedder.profile, centred_placement=centred)
    one = MnemisMemory(embedder=embedder)
    one.add_messages(WEEKS, namespace="u")
    many = MnemisMemory(embedder=embedder)
    for m in WEEKS:
        many.add_messages([m], namespace="u")
    assert canonical(one.graph("u")) == canonical(many.graph("u"))
    assert any(e.kind == EdgeKind.UPDATES for e in many.graph("u").edges())


def _replacements(g) -> set[tuple]:
    """Each ``updates`` edge as the messages it records: (replaced, replaced by)."""
    return {
        (tuple(e.properties.get(REPLACED, ())), tuple(e.properties.get(REPLACED_BY, ())))
        for e in g.edges(EdgeKind.UPDATES)
    }


def test_a_batch_judges_updates_as_one_message_at_a_time_does():
    """The update judge reads each message's nearest earlier messages and the rarity of its words: in
    one batch the batch's later messages are not indexed yet when it does, so it links the same
    messages as a stream of single messages (whose features its weights were fitted on)."""
    msgs = chat(160, seed=11)
    one = MnemisMemory(embedder=HashingEmbedder())
    one.add_messages(msgs, namespace="u")
    many = MnemisMemory(embedder=HashingEmbedder())
    for m in msgs:
        many.add_messages([m], namespace="u")
    links = _replacements(many.graph("u"))
    assert len(links) >= 5
    assert _replacements(one.graph("u")) == links


def _parents(g) -> dict[str, str | None]:
    return {n.id: (g.parent(n.id).id if g.parent(n.id) else None) for n in g.nodes(NodeKind.FRAGMENT)}


@pytest.mark.parametrize(
    "store", ["sqlite", pytest.param("falkordb", marks=[pytest.mark.falkordb, pytest.mark.enable_socket])]
)
def test_a_growing_fragment_placed_again_sits_where_one_batch_places_it(store, tmp_path):
    """A stream places a new fragment by its first message, one batch with all of them. Placed again
    as it grows, every fragment of a stream ends under the parent one batch gives it, the parents it
    left empty are gone, and a reopened store holds the same hierarchy, in the same order (a
    refounded parent is removed and written again under its id in one write: last, as the graph
    puts it)."""
    again = recipes.DEFAULT.with_(build={"place_again_until_words": 10_000})
    where = {"backend": server_url()} if store == "falkordb" else {"path": tmp_path / "m.db"}

    def opened() -> MnemisMemory:
        return MnemisMemory(**where, embedder=HashingEmbedder(), config=again)

    many = opened()
    many.delete_namespace("t_place_again")
    try:
        msgs = chat(160, seed=11)
        one = MnemisMemory(embedder=HashingEmbedder(), config=again)
        one.add_messages(msgs, namespace="u")
        settled = MnemisMemory(embedder=HashingEmbedder())
        for m in msgs:
            settled.add_messages([m], namespace="u")
            many.add_messages([m], namespace="t_place_again")
        g = many.graph("t_place_again")
        assert _parents(settled.graph("u")) != _parents(g)  # the chat has fragments that move
        assert _parents(g) == _parents(one.graph("u"))
        parents = [n for n in g.nodes() if n.kind in (NodeKind.SUBTOPIC, NodeKind.CONCEPT)]
        assert parents and all(g.children(n.id) for n in parents)
        _assert_index_matches_graph(many._states["t_place_again"])
        reopened = opened()
        assert canonical(reopened.graph("t_place_again")) == canonical(g)
        assert reopened.graph("t_place_again").to_data() == g.to_data()
        reopened.close()
    finally:
        many.delete_namespace("t_place_again")
        many.close()


def test_the_build_index_follows_fragments_placed_again_when_parents_fill_up():
    """Small parents fill up and empty as fragments leave them to be placed again: child counts and the
    groups placement searches (parents not full) stay what a fresh look at the graph gives."""
    config = tight().with_(build={"place_again_until_words": 10_000})
    mem = MnemisMemory(embedder=HashingEmbedder(), config=config)
    for m in chat(120, seed=5):
        mem.add_messages([m], namespace="u")
    _assert_index_matches_graph(mem._states["u"])


def test_a_fragment_opened_by_a_greeting_is_placed_by_what_follows():
    """A greeting says too little to place a fragment by: with ``place_again_until_words`` 3, once the
    messages after it say more, the fragment is placed again, beside the earlier talk on the same
    thing (as one batch places it)."""
    t = T0
    talk = [
        ("ann", "The garden tomatoes need staking, and the basil seedlings want more sun."),
        ("bob", "Garden tomatoes staked; basil seedlings moved to the sunny bed."),
        ("ann", "The car engine repair quote came in: new spark plugs and a timing belt."),
        ("bob", "Car engine repair booked with the mechanic for the spark plugs and timing belt."),
    ]
    msgs = [
        {"id": f"m{i}", "speaker": s, "text": x, "timestamp": t + timedelta(hours=i)}
        for i, (s, x) in enumerate(talk)
    ]
    later = t + timedelta(days=3)
    msgs += [
        {"id": "m4", "speaker": "ann", "text": "Hey Bob!", "timestamp": later},
        {
            "id": "m5",
            "speaker": "bob",
            "text": "Car engine repair done: the mechanic fitted the spark plugs and the timing belt.",
            "timestamp": later + timedelta(minutes=1),
        },
    ]
    greeting = recipes.DEFAULT.with_(build={"place_again_until_words": 3})
    graphs = {}
    for name, config in (("placed again", greeting), ("settled", recipes.DEFAULT)):
        stream = MnemisMemory(embedder=HashingEmbedder(), config=config)
        for m in msgs:
            stream.add_messages([m], namespace="u")
        graphs[name] = stream.graph("u")
    batch = MnemisMemory(embedder=HashingEmbedder(), config=greeting)
    batch.add_messages(msgs, namespace="u")
    g = graphs["placed again"]
    assert g.get("f:m4").source_ids == ["m4", "m5"]
    assert g.parent("f:m4").id == g.parent("f:m2").id
    assert _parents(g) == _parents(batch.graph("u"))
    # By default it stays where the greeting put it: a subtopic of its own.
    assert graphs["settled"].parent("f:m4").id not in (g.parent("f:m2").id, g.parent("f:m0").id)


def test_detach_takes_a_fragment_out_and_the_parents_it_leaves_empty_with_it():
    tree = {**OFFICE, "c_solo": {"s_solo": {"f_solo": ["The kayak needs a new rudder before June."]}}}
    st = toy_state(tree)
    idx = st.build_index()
    assert idx.child_count(st, "s_billing") == 2
    rep = BuildReport()
    assert abstract.detach(st, st.graph.get("f_refund"), rep)
    assert st.graph.parent("f_refund") is None
    assert idx.child_count(st, "s_billing") == 1 == len(st.graph.children("s_billing"))
    assert "s_billing" in rep.touched and "c_work" in rep.touched
    assert abstract.detach(st, st.graph.get("f_solo"), rep)
    assert not st.graph.has("s_solo") and not st.graph.has("c_solo")
    assert "s_solo" not in st.node_vectors and "c_solo" not in st.node_vectors
    assert not {"s_solo", "c_solo"} & rep.touched


def test_detach_leaves_a_parent_a_model_named_or_that_holds_other_links():
    tree = {"c_solo": {"s_solo": {"f_solo": ["The kayak needs a new rudder before June."]}}}
    for change in ("named", "linked"):
        st = toy_state(tree)
        if change == "named":
            st.graph.get("s_solo").properties["named_by"] = "llm"
        else:
            st.graph.add_edge(Edge("s_solo", "f_solo", EdgeKind.REFERENCES))
        assert not abstract.detach(st, st.graph.get("f_solo"), BuildReport())
        assert st.graph.parent("f_solo").id == "s_solo" and st.graph.has("c_solo")
