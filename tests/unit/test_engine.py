"""End-to-end behaviour of MnemisMemory on the toy embedder: ingest, search rules, persistence, errors.

Every test that takes ``memory`` (or ``filled``) runs on each backend: in memory, SQLite, and
FalkorDB when ``MNEMIS_FALKORDB_URL`` is set.
"""

from datetime import timedelta

import pytest
from _memories import backend  # noqa: F401  (fixture)
from _over_time import T0, msg

from mnemis_integrations import (
    DuplicateMessageError,
    EmbedderMismatchError,
    InvalidMessageError,
    InvalidNamespaceError,
    InvalidQueryError,
    MnemisMemory,
    NamespaceNotFoundError,
)
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.model import EdgeKind, NodeKind

CONVERSATION = [
    msg(1, "The refund for order 42 timed out at the bank callback.", days=0),
    msg(2, "Refund timeouts again: the bank callback never arrived.", "bob", minutes=1),
    msg(3, "Customer Acme asked to change the pricing plan to seats.", days=2),
    msg(4, "Acme wants the pricing plan v2 draft by Friday.", "bob", days=2, minutes=1),
    msg(5, "Let's get lunch at the noodle place on Friday.", days=4),
    msg(6, "Noodle lunch works for me, see you at noon.", "bob", days=4, minutes=1),
    msg(7, "We prioritise plan A for the hosting migration.", days=5),
    msg(8, "Hosting migration plan A needs two more servers.", "bob", days=5, minutes=1),
    msg(9, "Pause plan A: we switched to plan B for the hosting migration instead.", days=12),
    msg(10, "Plan B hosting migration starts Monday instead.", "bob", days=12, minutes=1),
    msg(11, "Acme confirmed the pricing plan v2 with seats.", days=20),
]


@pytest.fixture
def memory(backend):  # noqa: F811
    return backend.open()


@pytest.fixture
def filled(memory):
    memory.add_messages(CONVERSATION, namespace="u1")
    return memory


def test_every_fragment_has_a_path_to_a_concept(filled):
    g = filled.graph("u1")
    frags = g.nodes(NodeKind.FRAGMENT)
    assert frags
    for f in frags:
        kinds = [a.kind for a in g.ancestors(f.id)]
        assert kinds == [NodeKind.SUBTOPIC, NodeKind.CONCEPT]
        assert g.hierarchy_path(f.id)[-1] == f.label


def test_time_gap_starts_a_new_fragment(filled):
    g = filled.graph("u1")
    frag_of = {m: f.id for f in g.nodes(NodeKind.FRAGMENT) for m in f.source_ids}
    assert frag_of["m1"] == frag_of["m2"]
    assert frag_of["m2"] != frag_of["m3"]  # two days apart


def test_every_message_lands_in_exactly_one_fragment(filled):
    g = filled.graph("u1")
    seen = [m for f in g.nodes(NodeKind.FRAGMENT) for m in f.source_ids]
    assert sorted(seen) == sorted(m["id"] for m in CONVERSATION)


def test_search_ranks_the_matching_fragment_first(filled):
    hits = filled.search("refund timed out at the bank", k=3, namespace="u1")
    assert hits[0].kind == "fragment"
    assert set(hits[0].source_ids) == {"m1", "m2"}
    assert "The refund for order 42 timed out" in hits[0].text
    assert "semantic" in hits[0].via


def test_hit_text_holds_exactly_the_messages_named_by_source_ids(filled):
    for h in filled.search("pricing plan", k=10, namespace="u1"):
        for m in CONVERSATION:
            assert (m["text"] in h.text) == (m["id"] in h.source_ids)


def test_scores_are_sorted_and_in_unit_range(filled):
    hits = filled.search("hosting migration plan", k=10, namespace="u1")
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_entity_query_uses_the_relation_path(filled):
    hits = filled.search("What did Acme confirm?", k=5, namespace="u1")
    acme = [h for h in hits if "m11" in h.source_ids or "m3" in h.source_ids]
    assert acme and all("relation" in h.via for h in acme)
    assert acme[0].relation_score > 0


def test_vague_query_falls_back_to_semantic_with_recency(filled):
    hits = filled.search("how did that thing end up?", k=5, namespace="u1")
    assert all("relation" not in h.via for h in hits)
    assert any("fallback" in h.via or "supplement" in h.via for h in hits)


def test_at_least_five_results_when_memory_holds_them(filled):
    hits = filled.search("zzzz qqqq", k=10, namespace="u1")
    assert len(hits) >= 5


def test_superseded_hit_comes_with_its_successor_first(filled):
    g = filled.graph("u1")
    updates = g.edges(EdgeKind.UPDATES)
    assert updates, "the switch to plan B should supersede plan A"
    new, old = updates[0].src, updates[0].dst
    assert g.get(old).status.value == "superseded"
    hits = filled.search("plan A for the hosting migration", k=10, namespace="u1")
    ids = [h.node_id for h in hits]
    assert old in ids and new in ids
    assert ids.index(new) < ids.index(old)
    assert "successor" in hits[ids.index(new)].via
    assert hits[ids.index(old)].successors == (new,)


def test_as_of_before_the_switch_sees_plan_a_as_current(filled):
    g = filled.graph("u1")
    old = g.edges(EdgeKind.UPDATES)[0].dst
    hits = filled.search("hosting migration plan", k=10, namespace="u1", as_of=T0 + timedelta(days=6))
    by_id = {h.node_id: h for h in hits}
    assert by_id[old].status == "active"
    assert all("m9" not in h.source_ids for h in hits)


def test_same_id_twice_is_stored_once(filled):
    rep = filled.add_messages(CONVERSATION[:3], namespace="u1")
    assert (rep.added, rep.skipped) == (0, 3)
    assert len(filled.messages("u1")) == len(CONVERSATION)


def test_incremental_messages_attach_to_the_existing_hierarchy(memory):
    memory.add_messages(CONVERSATION[:6], namespace="u1")
    before = {n.id for n in memory.graph("u1").nodes(NodeKind.CONCEPT)}
    memory.add_messages(CONVERSATION[6:], namespace="u1")
    g = memory.graph("u1")
    assert before <= {n.id for n in g.nodes(NodeKind.CONCEPT)}
    assert sorted(m for f in g.nodes(NodeKind.FRAGMENT) for m in f.source_ids) == sorted(
        m["id"] for m in CONVERSATION
    )


@pytest.mark.parametrize(
    "bad, error",
    [
        ([{"speaker": "a", "text": "no id"}], InvalidMessageError),
        ([{"id": "x", "speaker": "a", "text": "   "}], InvalidMessageError),
        ([{"id": "x", "speaker": "a", "text": 42}], InvalidMessageError),
        ([{"id": "x", "speaker": "a", "text": "ok", "timestamp": "yesterday"}], InvalidMessageError),
        (
            [{"id": "x", "speaker": "a", "text": "one"}, {"id": "x", "speaker": "a", "text": "two"}],
            DuplicateMessageError,
        ),
        ("just a string", InvalidMessageError),
    ],
)
def test_bad_input_raises_typed_error_and_writes_nothing(filled, bad, error):
    before = [m.id for m in filled.messages("u1")]
    nodes_before = len(filled.graph("u1"))
    with pytest.raises(error):
        filled.add_messages(
            [*CONVERSATION[:0], {"id": "fresh", "speaker": "a", "text": "fresh text"}, *bad]
            if isinstance(bad, list)
            else bad,
            namespace="u1",
        )
    assert [m.id for m in filled.messages("u1")] == before
    assert len(filled.graph("u1")) == nodes_before


def test_same_id_with_different_text_is_refused(filled):
    with pytest.raises(DuplicateMessageError) as e:
        filled.add_messages([{"id": "m1", "speaker": "ann", "text": "something else"}], namespace="u1")
    assert e.value.message_id == "m1"


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_k_is_refused(filled, k):
    with pytest.raises(InvalidQueryError):
        filled.search("refund", k=k, namespace="u1")


def test_empty_query_is_refused(filled):
    with pytest.raises(InvalidQueryError):
        filled.search("  ", namespace="u1")


def test_unknown_namespace_is_reported(filled):
    with pytest.raises(NamespaceNotFoundError):
        filled.search("refund", namespace="nobody")


@pytest.mark.parametrize("ns", ["", "a/b", "x" * 129, 7, "../etc"])
def test_bad_namespace_is_refused(memory, ns):
    with pytest.raises(InvalidNamespaceError):
        memory.add_messages(CONVERSATION[:1], namespace=ns)


def test_search_leaves_out_hits_made_only_of_messages_the_reader_already_sees(filled):
    hits = filled.search("refund", k=3, namespace="u1")
    seen = set(hits[0].source_ids)
    kept = filled.search("refund", k=3, namespace="u1", exclude_messages=seen)
    assert len(kept) == len(hits) and hits[0].node_id not in {h.node_id for h in kept}
    assert all(not (set(h.source_ids) | filled.graph("u1").sources_under(h.node_id)) <= seen for h in kept)


def test_a_memory_works_on_its_own_namespace_when_a_call_names_none():
    """Before: every method defaulted to "default" and adapters each kept a helper dropping a
    None namespace; now a memory has its namespace and ``namespace=None`` means it."""
    mem = MnemisMemory(embedder=HashingEmbedder(), namespace="team")
    mem.add_messages(CONVERSATION[:3])
    assert {m.id for m in mem.messages(namespace="team")} == {m["id"] for m in CONVERSATION[:3]}
    assert mem.search("refund", namespace=None) and mem.graph().namespace == "team"
    mem.forget([CONVERSATION[0]["id"]])
    assert len(mem.messages("team")) == 2
    with pytest.raises(InvalidNamespaceError):
        MnemisMemory(embedder=HashingEmbedder(), namespace="a/b")


def test_failed_build_leaves_store_as_it_was(filled, monkeypatch):
    from mnemis_integrations.core.builder import pipeline

    def boom(st, touched):  # the last step: every other one has changed the state by then
        raise RuntimeError("builder crashed")

    before_nodes = {n.id for n in filled.graph("u1").nodes()}
    monkeypatch.setattr(pipeline, "relabel_parents", boom)
    with pytest.raises(RuntimeError):
        filled.add_messages([msg(99, "A brand new topic about gardening tomatoes.", days=30)], namespace="u1")
    monkeypatch.undo()
    assert "m99" not in {m.id for m in filled.messages("u1")}
    assert {n.id for n in filled.graph("u1").nodes()} == before_nodes


def test_persistent_store_reopens_identical_without_embedding(tmp_path):
    path = tmp_path / "mem.db"
    emb = HashingEmbedder()
    with MnemisMemory(path=path, embedder=emb) as mem:
        mem.add_messages(CONVERSATION, namespace="u1")
        before = [h.to_dict() for h in mem.search("pricing plan Acme", k=5, namespace="u1")]
        graph_before = mem.graph("u1").to_data()

    class CountingEmbedder(HashingEmbedder):
        passages = 0

        def embed_passages(self, texts):
            CountingEmbedder.passages += len(texts)
            return super().embed_passages(texts)

    with MnemisMemory(path=path, embedder=CountingEmbedder()) as again:
        assert [m.id for m in again.messages("u1")] == [m["id"] for m in CONVERSATION]
        assert again.graph("u1").to_data() == graph_before
        assert [h.to_dict() for h in again.search("pricing plan Acme", k=5, namespace="u1")] == before
        assert CountingEmbedder.passages == 0


def test_reopening_with_another_embedder_is_refused(tmp_path):
    path = tmp_path / "mem.db"
    with MnemisMemory(path=path, embedder=HashingEmbedder(256)) as mem:
        mem.add_messages(CONVERSATION[:2], namespace="u1")
    with pytest.raises(EmbedderMismatchError):
        MnemisMemory(path=path, embedder=HashingEmbedder(128))


def test_namespaces_are_isolated(memory):
    memory.add_messages(CONVERSATION[:4], namespace="a")
    memory.add_messages([msg(50, "Only B knows about the secret garden project.")], namespace="b")
    for h in memory.search("secret garden project", k=10, namespace="a"):
        assert "m50" not in h.source_ids
    assert memory.namespaces() == ["a", "b"]


def test_read_looks_at_the_stored_graph_without_a_copy_and_graph_gives_one():
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages([msg(1, "The vet moved Rex's booster to Friday.")], namespace="u")
    live = mem.read(lambda g: g, namespace="u")
    assert mem.read(lambda g: g, namespace="u") is live
    copy = mem.graph("u")
    assert copy is not live and sorted(n.id for n in copy.nodes()) == sorted(n.id for n in live.nodes())
    with pytest.raises(NamespaceNotFoundError):
        mem.read(lambda g: g, namespace="nobody")
