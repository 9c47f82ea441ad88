"""Forgetting for privacy: after forget, no trace of the text is in the graph, any index, or the
persisted file."""

import sqlite3
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from _over_time import WEEKS
from fakes import sqlite_file_bytes

from mnemis_integrations import InvalidQueryError, MnemisMemory, NamespaceNotFoundError
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.maintenance.forget import split_forgotten
from mnemis_integrations.core.maintenance.supersede import REPLACED, REPLACED_BY, supersede
from mnemis_integrations.core.model import EdgeKind, NodeKind, Status

SECRET = "zebra-7731"
SECRET_ID = "m12"


def _texts_of_graph(mem, ns):
    g = mem.graph(ns)
    parts = []
    for n in g.nodes():
        parts += [n.label, n.summary, " ".join(n.keywords), " ".join(n.aliases), " ".join(n.source_ids)]
    return " ".join(parts).lower()


def test_forget_leaves_no_trace_in_the_file_or_any_index(tmp_path):
    path = tmp_path / "m.db"
    emb = HashingEmbedder()
    with MnemisMemory(path, embedder=emb) as mem:
        mem.add_messages(WEEKS, namespace="u1")
        assert SECRET.encode() in sqlite_file_bytes(path)
        assert any(SECRET in h.text for h in mem.search("vault code server room", k=10, namespace="u1"))
        rep = mem.forget([SECRET_ID], namespace="u1")
        assert rep.forgotten == 1 and rep.not_found == ()
        # in memory: messages, vectors, lexical index, graph text, search results
        st = mem._states["u1"]
        assert SECRET_ID not in st.messages and SECRET_ID not in st.msg_vectors
        assert st.lexical.scores("zebra 7731 vault") == {} or SECRET_ID not in st.lexical.scores(
            "zebra 7731 vault"
        )
        assert "zebra" not in _texts_of_graph(mem, "u1") and SECRET_ID not in _texts_of_graph(mem, "u1")
        assert all(
            SECRET not in h.text and SECRET_ID not in h.source_ids
            for h in mem.search("vault code zebra", k=20, namespace="u1", include_archived=True)
        )
        assert not any(n.label.lower().startswith("zebra") for n in mem.graph("u1").nodes())
        # on disk: neither the database nor its WAL holds the text or its id
        raw = sqlite_file_bytes(path)
        assert SECRET.encode() not in raw and b"zebra" not in raw and b'"m12"' not in raw
    with MnemisMemory(path, embedder=emb) as mem:  # reopened: the rest is intact
        assert {m.id for m in mem.messages("u1")} == {m["id"] for m in WEEKS} - {SECRET_ID}
        assert "zebra" not in _texts_of_graph(mem, "u1")
        assert mem.search("refund bank callback", k=3, namespace="u1")[0].kind == "fragment"
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM messages WHERE text LIKE '%zebra%'").fetchone()[0] == 0


def _fragment_word_counts(st) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for f in st.graph.nodes(NodeKind.FRAGMENT):
        counts.update(st.fragment_words(f.id))
    return dict(counts)


def test_document_frequencies_count_each_fragment_once_after_ingest_and_forget():
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(WEEKS, namespace="u1")
    st = mem._states["u1"]
    assert "zebra-7731" in st.df and {w: c for w, c in st.df.items() if c} == _fragment_word_counts(st)
    mem.forget([SECRET_ID], namespace="u1")
    st = mem._states["u1"]
    assert "zebra-7731" not in st.df
    assert {w: c for w, c in st.df.items() if c} == _fragment_word_counts(st)


def test_forget_rebuilds_summaries_that_quoted_the_text(memory):
    memory.add_messages(WEEKS, namespace="u1")
    assert "zebra" in _texts_of_graph(memory, "u1") or "vault" in _texts_of_graph(memory, "u1")
    memory.forget([SECRET_ID], namespace="u1")
    assert "zebra" not in _texts_of_graph(memory, "u1") and "vault" not in _texts_of_graph(memory, "u1")


def test_forget_reuses_stored_vectors_without_embedding(memory, monkeypatch):
    memory.add_messages(WEEKS, namespace="u1")

    def boom(_texts):
        raise AssertionError("forget must not embed")

    monkeypatch.setattr(memory.embedder, "embed_passages", boom)
    memory.forget([SECRET_ID], namespace="u1")
    assert len(memory.messages("u1")) == len(WEEKS) - 1


def test_forget_a_whole_namespace_leaves_others(tmp_path):
    path = tmp_path / "m.db"
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        mem.add_messages(WEEKS, namespace="u1")
        mem.add_messages(
            [{"id": "x1", "speaker": "cy", "text": "Keep this note about tulips.", "timestamp": None}],
            namespace="u2",
        )
        rep = mem.forget(namespace="u1")
        assert rep.namespace_deleted and rep.forgotten == len(WEEKS)
        assert mem.namespaces() == ["u2"]
        with pytest.raises(NamespaceNotFoundError):
            mem.search("refund", namespace="u1")
        raw = sqlite_file_bytes(path)
        assert SECRET.encode() not in raw and b"refund" not in raw.lower()
        assert b"tulips" in raw


def test_forgetting_every_message_removes_the_namespace(memory):
    memory.add_messages(WEEKS[:2], namespace="u1")
    rep = memory.forget(["m1", "m2"], namespace="u1")
    assert rep.namespace_deleted
    assert "u1" not in memory.namespaces()


def test_unknown_ids_are_reported_not_ignored(memory):
    memory.add_messages(WEEKS, namespace="u1")
    rep = memory.forget(["nope", SECRET_ID], namespace="u1")
    assert rep.forgotten == 1 and rep.not_found == ("nope",)


def test_forget_needs_a_target(memory):
    with pytest.raises(InvalidQueryError):
        memory.forget()


def test_split_forgotten_keeps_the_order_asked_once_each():
    gone, missing = split_forgotten({"a", "b", "c"}, ["b", "b", "q", "a"])
    assert gone == ["b", "a"] and missing == ["q"]


def test_forgetting_one_message_keeps_overviews_and_review_edits(memory):
    """Before: forget rebuilt the namespace from the remaining messages, so compaction overviews
    (3 -> 0) and a concept renamed in review silently went. Now only what held the message changes."""
    from mnemis_integrations.core.builder import review
    from mnemis_integrations.core.model import NodeKind
    from mnemis_integrations.core.temporal import is_overview

    memory.add_messages(WEEKS, namespace="u1")
    concept = memory.graph("u1").nodes(NodeKind.CONCEPT)[0]
    doc = review.rename(review.export_hierarchy(memory.graph("u1")), concept.id, "Curated name")
    memory.apply(lambda g: review.apply_hierarchy(g, doc), namespace="u1")
    report = memory.compact(before=WEEKS[-4]["timestamp"], namespace="u1")
    assert report.overviews_created > 0
    overviews = {n.id for n in memory.graph("u1").nodes(NodeKind.FRAGMENT) if is_overview(n)}
    memory.forget(["m1"], namespace="u1")
    g = memory.graph("u1")
    assert {n.id for n in g.nodes(NodeKind.FRAGMENT) if is_overview(n)} and len(
        [n for n in g.nodes(NodeKind.FRAGMENT) if is_overview(n)]
    ) == len(overviews)
    assert [c.label for c in g.nodes(NodeKind.CONCEPT)].count("Curated name") == 1
    assert "m1" not in {m for n in g.nodes() for m in n.source_ids}


def test_forgetting_a_message_keeps_overviews_and_a_renamed_concept_once_reopened(tmp_path):
    """Issue #14: forget rebuilt the namespace and silently dropped compaction overviews (3 -> 0)
    and reverted a concept renamed in review. Checked here through the file: a reopened memory
    still has every overview (each without the forgotten message) and the curated name."""
    from mnemis_integrations.core.builder import review
    from mnemis_integrations.core.model import NodeKind
    from mnemis_integrations.core.temporal import is_overview

    path, emb = tmp_path / "m.db", HashingEmbedder()
    with MnemisMemory(path, embedder=emb) as mem:
        mem.add_messages(WEEKS, namespace="u1")
        concept = next(
            c
            for c in mem.graph("u1").nodes(NodeKind.CONCEPT)
            if "m11" not in mem.graph("u1").sources_under(c.id)
        )
        doc = review.rename(review.export_hierarchy(mem.graph("u1")), concept.id, "Curated name")
        mem.apply(lambda g: review.apply_hierarchy(g, doc), namespace="u1")
        assert mem.compact(before=WEEKS[-3]["timestamp"], namespace="u1").overviews_created >= 2
        before = {n.id for n in mem.graph("u1").nodes(NodeKind.FRAGMENT) if is_overview(n)}
        held_m1 = [
            n.id for n in mem.graph("u1").nodes(NodeKind.FRAGMENT) if is_overview(n) and "m1" in n.source_ids
        ]
        assert held_m1, "the test needs an overview that holds m1"
        mem.forget(["m1"], namespace="u1")
    with MnemisMemory(path, embedder=emb) as mem:
        g = mem.graph("u1")
        overviews = [n for n in g.nodes(NodeKind.FRAGMENT) if is_overview(n)]
        # an overview whose id was made from m1's gets a fresh one (forget.py); the others keep theirs
        assert len(overviews) == len(before) and before - set(held_m1) <= {n.id for n in overviews}
        assert all("m1" not in n.source_ids for n in overviews)
        assert [c.label for c in g.nodes(NodeKind.CONCEPT)].count("Curated name") == 1


def _linked_memory():
    """Two fragments a week apart, the later one (two messages) superseding the earlier."""
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(
        [
            {
                "id": "a1",
                "speaker": "ana",
                "text": "The venue is the Harbor Hall.",
                "timestamp": "2025-03-01T10:00:00",
            },
            {
                "id": "c1",
                "speaker": "li",
                "text": "Venue moved to the Pier Loft.",
                "timestamp": "2025-03-08T10:00:00",
            },
            {
                "id": "c2",
                "speaker": "ana",
                "text": "Pier Loft confirmed, deposit paid.",
                "timestamp": "2025-03-08T10:01:00",
            },
        ],
        namespace="u1",
    )
    st = mem._states["u1"]
    old, new = st.msg_fragment["a1"], st.msg_fragment["c1"]
    assert old != new and st.msg_fragment["c2"] == new  # the shape this test needs
    return mem, st, old, new


@pytest.mark.parametrize(
    ("replaced_by", "forgotten", "link_stays"),
    [(("c1",), "c1", False), (("c1", "c2"), "c1", True)],
)
def test_forgetting_the_replacing_message_undoes_its_link(replaced_by, forgotten, link_stays):
    mem, st, old, new = _linked_memory()
    supersede(st.graph, old_id=old, new_id=new, when=None, replaced=("a1",), replaced_by=replaced_by)
    mem.forget([forgotten], namespace="u1")
    st = mem._states["u1"]
    new = st.msg_fragment["c2"]  # a fragment whose id was made from a forgotten id is renamed
    link = st.graph.edge(new, old, EdgeKind.UPDATES)
    assert (link is not None) == link_stays
    assert st.graph.get(old).status == (Status.SUPERSEDED if link_stays else Status.ACTIVE)
    held = [e.properties for e in st.graph.edges(EdgeKind.UPDATES)]
    assert all(forgotten not in p.get(REPLACED_BY, []) + p.get(REPLACED, []) for p in held)
    if link_stays:
        assert link.properties == {REPLACED: ["a1"], REPLACED_BY: ["c2"]}
    hits = mem.search("venue", k=5, namespace="u1")
    assert {h.status for h in hits if h.node_id == old} == {"superseded" if link_stays else "active"}


LEAD_T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)


def _lead(i, name, days):
    return {
        "id": f"m{i}",
        "speaker": "ann" if i % 2 else "bob",
        "text": f"Today our lead {name} reviewed vendor contract number {i}.",
        "timestamp": LEAD_T0 + timedelta(days=days),
    }


def test_a_merged_alias_stays_while_a_remaining_message_says_it_and_goes_with_the_last():
    """The rebalance keeps the misspelt "Priyankka" (m9, m10) as an alias of Priyanka."""
    msgs = [_lead(i, "Priyankka" if i in (9, 10) else "Priyanka", i) for i in range(1, 12)]
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(msgs, namespace="u1")
    assert ("e:priyanka", "e:priyankka") in mem.rebalance(namespace="u1").entities_merged
    mem.forget(["m9"], namespace="u1")
    assert "Priyankka" in mem.graph("u1").get("e:priyanka").aliases  # m10 still says it
    assert mem._states["u1"].entities.get("Priyankka") == "e:priyanka"
    mem.forget(["m10"], namespace="u1")
    assert mem.graph("u1").get("e:priyanka").aliases == []
    assert mem._states["u1"].entities.get("Priyankka") is None
