"""Maintenance and erasure: a review after compaction, malformed review documents, an alias a
rebalance kept, a compaction overview's link after the replacing message is forgotten, and the
relations read from forgotten messages."""

import json
from datetime import timedelta

import pytest
from _over_time import LAST, WEEKS, msg

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.builder import review as rv
from mnemis_integrations.core.builder.relation_sources import read_from
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.maintenance.supersede import supersede
from mnemis_integrations.core.model import EdgeKind, NodeKind, Status


@pytest.fixture
def mem():
    m = MnemisMemory(embedder=HashingEmbedder())
    m.add_messages(WEEKS, namespace="u1")
    return m


def test_an_unchanged_export_of_a_compacted_namespace_applies_and_changes_nothing(mem):
    assert mem.compact(before=LAST - timedelta(days=14), namespace="u1").fragments_archived
    before = mem.graph("u1").to_data()
    doc = rv.export_hierarchy(mem.graph("u1"))
    stats = mem.apply(lambda g: rv.apply_hierarchy(g, doc), namespace="u1")
    assert stats == {"renamed": 0, "moved": 0, "created": 0, "removed": 0}
    assert mem.graph("u1").to_data() == before


def test_a_review_cannot_take_an_archived_fragment_out_of_its_archive(mem):
    rep = mem.compact(before=LAST - timedelta(days=14), namespace="u1")
    g = mem.graph("u1")
    archived = g.get(rep.overview_ids[0]).properties["overview_of"][0]
    doc = rv.export_hierarchy(g)
    doc["concepts"][0]["subtopics"][0]["fragments"].append({"id": archived, "label": "x", "summary": ""})
    with pytest.raises(rv.ReviewError):
        rv.apply_hierarchy(g, doc)
    assert g.get(archived).status == Status.ARCHIVED and g.parent(archived).kind == NodeKind.ARCHIVE


def _bad_documents(doc):
    def edited(change):
        out = json.loads(json.dumps(doc))
        change(out)
        return out

    first = lambda d: d["concepts"][0]  # noqa: E731
    return [
        edited(lambda d: d["concepts"].append(1)),
        edited(lambda d: first(d).update(subtopics="abc")),
        edited(lambda d: first(d)["subtopics"][0]["fragments"].append(None)),
        edited(lambda d: first(d)["subtopics"][0]["fragments"][0].update(id=["f"])),
        edited(lambda d: first(d).update(id=None, label=5)),
        edited(lambda d: first(d).update(label=5)),
        edited(lambda d: first(d)["subtopics"][0]["fragments"][0].update(label=["a"])),
    ]


@pytest.mark.parametrize("n", range(7))
def test_a_malformed_review_document_gets_a_review_error_and_changes_nothing(mem, n):
    g = mem.graph("u1")
    before = g.to_data()
    with pytest.raises(rv.ReviewError):
        mem.apply(lambda g: rv.apply_hierarchy(g, _bad_documents(rv.export_hierarchy(g))[n]), "u1")
    assert mem.graph("u1").to_data() == before


def test_a_name_merged_as_an_alias_is_forgotten_with_the_only_message_that_said_it(tmp_path):
    path, emb = tmp_path / "m.db", HashingEmbedder()
    extra = [
        msg(20, "Today our lead Priyanka reviewed the vendor contract.", days=32),
        msg(21, "Yesterday our lead Priyankka signed the quarterly budget memo.", "bob", days=33),
        msg(22, "On Monday our lead Priyanka will present the contract.", days=33, minutes=5),
    ]
    with MnemisMemory(path, embedder=emb) as mem:
        mem.add_messages(WEEKS + extra, namespace="u1")
        assert ("e:priyanka", "e:priyankka") in mem.rebalance(namespace="u1").entities_merged
        assert "Priyankka" in mem.graph("u1").get("e:priyanka").aliases
        mem.forget(["m21"], namespace="u1")
        kept = mem.graph("u1").get("e:priyanka")  # still named by m20 and m22
        assert "priyankka" not in json.dumps(kept.to_dict()).lower()
        assert mem._states["u1"].entities.get("Priyankka") is None
    with MnemisMemory(path, embedder=emb) as mem:
        assert "priyankka" not in json.dumps(mem.graph("u1").to_data()).lower()


def test_forgetting_the_replacing_message_makes_a_compacted_overview_current_again(mem):
    """f:m9 ("switched to plan B", m9) replaces m5 of f:m5; it is made to replace m7 of f:m7
    too, and both originals are compacted into one superseded overview."""
    when = WEEKS[8]["timestamp"]
    mem.apply(
        lambda g: supersede(
            g, old_id="f:m7", new_id="f:m9", when=when, replaced=("m7",), replaced_by=("m9",)
        ),
        "u1",
    )
    rep = mem.compact(before=when, namespace="u1")
    overview = next(o for o in rep.overview_ids if "m5" in mem.graph("u1").get(o).source_ids)
    assert mem.graph("u1").get(overview).status == Status.SUPERSEDED
    mem.forget(["m9"], namespace="u1")
    g = mem.graph("u1")
    assert all(g.get(f).status == Status.ARCHIVED and g.get(f).valid_until is None for f in ("f:m5", "f:m7"))
    # nothing replaces the originals any more, so nothing replaces the overview that stands for them
    assert g.get(overview).status == Status.ACTIVE and g.get(overview).valid_until is None
    assert not g.in_edges(overview, EdgeKind.UPDATES)


def test_a_parent_named_after_a_forgotten_message_is_renamed_after_its_fragment_moved(mem):
    """forget gives a fresh id to every node whose id was made from a forgotten message id;
    s:m1 and c:m1 were founded by f:m1, which a review then moved under s:m5."""
    doc = rv.move(rv.export_hierarchy(mem.graph("u1")), "f:m1", "s:m5")
    mem.apply(lambda g: rv.apply_hierarchy(g, doc), "u1")
    assert {"s:m1", "c:m1"} <= {n.id for n in mem.graph("u1").nodes()}
    mem.forget(["m1"], namespace="u1")
    g = mem.graph("u1")
    assert not [n.id for n in g.nodes() if n.id.rpartition(":")[2] == "m1"]
    st = mem._states["u1"]
    hierarchy = [n.id for n in g.nodes() if n.kind in (NodeKind.SUBTOPIC, NodeKind.CONCEPT)]
    assert all(nid in st.node_vectors for nid in hierarchy)  # the renamed ones keep their vectors


def test_a_relation_goes_with_the_messages_it_was_read_from_and_stays_while_one_is_left():
    """An offline relation's label is the words between two names ("vaccines_clinic"), seldom a
    quote a forgotten text holds: the messages it was read from decide."""
    msgs = [
        {
            "id": "m1",
            "speaker": "ana",
            "text": "Rex has his vaccines at the clinic on Elm Street.",
            "timestamp": "2025-01-01T09:00:00Z",
        },
        {"id": "m2", "speaker": "ben", "text": "Rex hates the car.", "timestamp": "2025-01-03T09:00:00Z"},
        {
            "id": "m3",
            "speaker": "ana",
            "text": "Elm Street is closed for roadworks all week.",
            "timestamp": "2025-01-05T09:00:00Z",
        },
        {
            "id": "m4",
            "speaker": "ben",
            "text": "Rex walks with Maya in the park. Maya walks with Rex on Sundays.",
            "timestamp": "2025-01-07T09:00:00Z",
        },
        {
            "id": "m5",
            "speaker": "ana",
            "text": "Rex walks with Maya in the park again today.",
            "timestamp": "2025-01-09T09:00:00Z",
        },
    ]
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(msgs, namespace="u")

    def relations():
        g = mem.graph("u")
        return {(e.src, e.dst, e.label): read_from(g, e) for e in g.edges(EdgeKind.RELATION)}

    assert relations()[("e:rex", "e:elm street", "vaccines_clinic")] == ["m1"]
    assert relations()[("e:rex", "e:maya", "walks")] == ["m4", "m5"]
    mem.forget(["m1", "m4"], namespace="u")
    g = mem.graph("u")
    assert g.has("e:rex") and g.has("e:elm street") and g.has("e:maya")  # still named elsewhere
    assert ("e:rex", "e:elm street", "vaccines_clinic") not in relations()
    assert relations()[("e:rex", "e:maya", "walks")] == ["m5"]
