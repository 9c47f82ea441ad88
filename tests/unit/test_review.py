"""Review hook: export the hierarchy as JSON, edit it (rename, merge, split, move), apply it back."""

from __future__ import annotations

import json

import pytest
from fakes import CONVERSATION

from mnemis_integrations import MnemisMemory
from mnemis_integrations.cli import main
from mnemis_integrations.core.builder import review as rv
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind


def toy() -> MemoryGraph:
    """Two concepts, three subtopics, five fragments."""
    g = MemoryGraph("u1")
    for nid, kind, label in [
        ("c1", NodeKind.CONCEPT, "Payments"),
        ("c2", NodeKind.CONCEPT, "Pets"),
        ("s1", NodeKind.SUBTOPIC, "refunds"),
        ("s2", NodeKind.SUBTOPIC, "refund & bank"),
        ("s3", NodeKind.SUBTOPIC, "vet"),
        ("f1", NodeKind.FRAGMENT, "f1"),
        ("f2", NodeKind.FRAGMENT, "f2"),
        ("f3", NodeKind.FRAGMENT, "f3"),
        ("f4", NodeKind.FRAGMENT, "f4"),
        ("f5", NodeKind.FRAGMENT, "f5"),
    ]:
        g.add_node(Node(nid, kind, label, "u1"))
    for src, dst in [
        ("s1", "c1"),
        ("s2", "c1"),
        ("s3", "c2"),
        ("f1", "s1"),
        ("f2", "s1"),
        ("f3", "s2"),
        ("f4", "s3"),
        ("f5", "s3"),
    ]:
        g.add_edge(Edge(src, dst, EdgeKind.BELONGS_TO))
    return g


def paths(g: MemoryGraph) -> dict[str, str]:
    return {f.id: " > ".join(g.hierarchy_path(f.id)) for f in g.nodes(NodeKind.FRAGMENT)}


def test_export_is_plain_json_of_the_tree():
    doc = rv.export_hierarchy(toy())
    assert json.loads(json.dumps(doc)) == doc
    assert doc["format"] == rv.FORMAT
    assert [(c["id"], [s["id"] for s in c["subtopics"]]) for c in doc["concepts"]] == [
        ("c1", ["s1", "s2"]),
        ("c2", ["s3"]),
    ]


def test_apply_unchanged_export_changes_nothing():
    g = toy()
    before = g.to_data()
    assert rv.apply_hierarchy(g, rv.export_hierarchy(g)) == {
        "renamed": 0,
        "moved": 0,
        "created": 0,
        "removed": 0,
    }
    assert g.to_data() == before


def test_rename_merge_split_move():
    g = toy()
    doc = rv.export_hierarchy(g)
    doc = rv.rename(doc, "s1", "Refund failures")
    doc = rv.merge(doc, ["s2"], into="s1")
    doc = rv.split(doc, "s3", ["f5"], "Rex's vaccines")
    doc = rv.move(doc, "f2", "s3")
    stats = rv.apply_hierarchy(g, doc)
    assert paths(g) == {
        "f1": "Payments > Refund failures > f1",
        "f2": "Pets > vet > f2",
        "f3": "Payments > Refund failures > f3",
        "f4": "Pets > vet > f4",
        "f5": "Pets > Rex's vaccines > f5",
    }
    assert not g.has("s2")  # merged away: no child left
    assert stats == {"renamed": 1, "moved": 3, "created": 1, "removed": 1}


def test_hand_edited_document_can_create_a_concept():
    g = toy()
    doc = rv.export_hierarchy(g)
    s3 = doc["concepts"][1]["subtopics"].pop()
    doc["concepts"].append({"id": None, "label": "Animals", "subtopics": [s3]})
    rv.apply_hierarchy(g, doc)
    assert paths(g)["f4"] == "Animals > vet > f4" and not g.has("c2")


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda d: d["concepts"][0]["subtopics"][0]["fragments"].pop(), "never dropped"),
        (lambda d: d["concepts"][1]["subtopics"][0]["fragments"].append({"id": "f1"}), "twice"),
        (lambda d: d["concepts"][1]["subtopics"][0]["fragments"].append({"id": "zz"}), "no node"),
        (
            lambda d: d["concepts"][0]["subtopics"].append({"id": "f1", "label": "x", "fragments": []}),
            "twice|listed as",
        ),
        (lambda d: d.update(format="other"), "not a"),
    ],
)
def test_a_bad_document_is_refused_whole(edit, match):
    g = toy()
    before = g.to_data()
    doc = rv.export_hierarchy(g)
    edit(doc)
    with pytest.raises(rv.ReviewError, match=match):
        rv.apply_hierarchy(g, doc)
    assert g.to_data() == before


def test_cli_review_round_trip(tmp_path, capsys):
    db = str(tmp_path / "m.db")
    mem = MnemisMemory(db, embedder=HashingEmbedder())
    mem.add_messages(CONVERSATION, namespace="u1")
    mem.close()
    base = ["review", "--db", db, "-n", "u1", "--embedder", "hashing"]
    out = tmp_path / "h.json"
    assert main(base + ["export", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    first = doc["concepts"][0]
    assert main(base + ["rename", first["id"], "Orders", "--dry-run"]) == 0
    assert "would apply: renamed 1" in capsys.readouterr().out
    assert main(base + ["rename", first["id"], "Orders"]) == 0
    frag = first["subtopics"][0]["fragments"][0]["id"]
    last_sub = doc["concepts"][-1]["subtopics"][-1]["id"]
    assert main(base + ["move", frag, "--to", last_sub]) == 0
    doc2 = rv.rename(
        rv.export_hierarchy(MnemisMemory(db, embedder=HashingEmbedder()).graph("u1")), last_sub, "Mixed"
    )
    (tmp_path / "e.json").write_text(json.dumps(doc2))
    assert main(base + ["apply", str(tmp_path / "e.json")]) == 0
    g = MnemisMemory(db, embedder=HashingEmbedder()).graph("u1")
    assert g.hierarchy_path(frag)[1] == "Mixed"
    assert sorted(m for f in g.nodes(NodeKind.FRAGMENT) for m in f.source_ids) == sorted(
        m["id"] for m in CONVERSATION
    )
    assert main(base + ["move", frag, "--to", "nope"]) == 2
    assert "no node 'nope'" in capsys.readouterr().err
