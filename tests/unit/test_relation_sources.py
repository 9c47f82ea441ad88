"""A relation goes exactly when the last message it was read from is forgotten: each fragment
records which relations its messages were read for and the edge counts them, so restating a
relation writes a bounded amount (``relation_sources``)."""

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.builder.relation_sources import (
    READ_COUNTS,
    READ_FROM,
    RELATIONS_READ,
    read_from,
    read_status,
)
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.model import EdgeKind, NodeKind

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)


def said(i: int, minutes: int) -> dict:
    return {
        "id": f"m{i}",
        "speaker": "ann",
        "text": f"Then Nadia called Bruno about invoice {i}.",
        "timestamp": (T0 + timedelta(minutes=minutes)).isoformat(),
    }


KEPT = {  # names Nadia and Bruno, states no call: what is left when every call is forgotten
    "id": "kept",
    "speaker": "bob",
    "text": "Bruno moved to the Lisbon office; Nadia stays here.",
    "timestamp": (T0 + timedelta(days=30)).isoformat(),
}
# two fragments of two calls each (the fourth joins the third's across batches), and another
FIRST = [said(1, 0), said(2, 1), said(3, 3000)]
LATER = [said(4, 3001)]


def called(mem: MnemisMemory, namespace: str = "u") -> list[str] | None:
    """The messages the relation Nadia -called-> Bruno was read from, None once it is gone."""
    g = mem.graph(namespace)
    edge = g.edge("e:nadia", "e:bruno", EdgeKind.RELATION, "called")
    return None if edge is None else sorted(read_from(g, edge))


def filled(path=None) -> MnemisMemory:
    mem = MnemisMemory(path, embedder=HashingEmbedder())
    mem.add_messages(FIRST, namespace="u")
    mem.add_messages(LATER, namespace="u")
    mem.add_messages([KEPT], namespace="u")
    return mem


def test_the_fixture_holds_a_relation_read_from_every_message_in_fragments_of_two():
    mem = filled()
    g = mem.graph("u")
    assert [len(f.source_ids) for f in g.nodes(NodeKind.FRAGMENT)] == [2, 2, 1]
    assert called(mem) == ["m1", "m2", "m3", "m4"]
    edge = g.edge("e:nadia", "e:bruno", EdgeKind.RELATION, "called")
    assert list(edge.properties[READ_COUNTS].values()) == [4]  # one count, none listed


@pytest.mark.parametrize("batches", [[["m1", "m2", "m3", "m4"]], [["m2"], ["m4", "m1"], ["m3"]]])
def test_a_relation_stays_while_one_source_is_left_and_goes_with_the_last(batches):
    mem = filled()
    _forget_in_turn(mem, batches, called)


def test_a_relation_goes_with_its_last_source_after_a_reopen(tmp_path):
    path = tmp_path / "m.db"
    with filled(path) as mem:
        mem.forget(["m1", "m3"], namespace="u")
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        assert called(mem) == ["m2", "m4"]
        mem.forget(["m2"], namespace="u")
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        assert called(mem) == ["m4"]
        mem.forget(["m4"], namespace="u")
        assert called(mem) is None
        assert mem.graph("u").has("e:nadia") and mem.graph("u").has("e:bruno")  # still named


def test_a_forgotten_message_leaves_no_record_behind():
    mem = filled()
    mem.forget(["m2", "m3"], namespace="u")
    g = mem.graph("u")
    records = {m for f in g.nodes(NodeKind.FRAGMENT) for m in f.properties.get(RELATIONS_READ, {})}
    assert records == {"m1", "m4", "kept"}
    text = json.dumps(g.to_data())
    assert '"m2"' not in text and '"m3"' not in text


def test_a_relation_removed_by_hand_and_read_again_counts_only_its_new_sources():
    """The old messages' records stay on their fragments, but under the removed edge's token."""
    mem = filled()
    mem.apply(lambda g: g.remove_edge("e:nadia", "e:bruno", EdgeKind.RELATION, "called"), namespace="u")
    mem.add_messages([said(5, 9000)], namespace="u")
    assert called(mem) == ["m5"]
    mem.forget(["m1", "m2", "m3", "m4"], namespace="u")
    assert called(mem) == ["m5"]
    mem.forget(["m5"], namespace="u")
    assert called(mem) is None


MERGED = [
    {
        "id": "d1",
        "speaker": "ana",
        "text": "Yesterday Priyankka called Globex about the merger.",
        "timestamp": "2025-06-01T09:00:00Z",
    },
    {
        "id": "k1",
        "speaker": "li",
        "text": "Then Priyanka called Globex about the invoice.",
        "timestamp": "2025-06-03T09:00:00Z",
    },
    {  # read for both spellings' relation: counted once under each, forgotten from both
        "id": "both",
        "speaker": "li",
        "text": "Later Priyankka called Globex. Then Priyanka called Globex again.",
        "timestamp": "2025-06-05T09:00:00Z",
    },
    {
        "id": "k2",
        "speaker": "ana",
        "text": "Then Priyanka called Globex about the refund.",
        "timestamp": "2025-06-07T09:00:00Z",
    },
    {
        "id": "other",
        "speaker": "li",
        "text": "The weather is nice today in Paris.",
        "timestamp": "2025-06-09T09:00:00Z",
    },
]


def merged_called(mem: MnemisMemory) -> list[str] | None:
    """The relation of the entity named "Priyanka" (the merge keeps it); once the messages saying
    "Priyanka" are forgotten, the entity is named "Priyankka", under that name's id."""
    g = mem.graph("u")
    names = mem._states["u"].entities
    eid = names.get("Priyanka") or names.get("Priyankka")
    edge = g.edge(eid, "e:globex", EdgeKind.RELATION, "called") if eid else None
    return None if edge is None else sorted(read_from(g, edge))


@pytest.mark.parametrize("order", [[["d1"], ["k1", "k2"], ["both"]], [["k1", "both"], ["k2"], ["d1"]]])
def test_a_relation_an_entity_merge_joined_goes_with_the_last_source_of_either(order):
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(MERGED, namespace="u")
    g = mem.graph("u")
    duplicate = g.edge("e:priyankka", "e:globex", EdgeKind.RELATION, "called")
    assert sorted(read_from(g, duplicate)) == ["both", "d1"]
    assert merged_called(mem) == ["both", "k1", "k2"]
    assert ("e:priyanka", "e:priyankka") in mem.rebalance("u").entities_merged
    assert merged_called(mem) == ["both", "d1", "k1", "k2"]
    _forget_in_turn(mem, order, merged_called)


def _as_the_previous_version_wrote_it(g) -> None:
    """Every relation lists the messages it was read from, and no fragment records any."""
    for e in g.edges(EdgeKind.RELATION):
        g.add_edge(replace(e, properties={READ_FROM: read_from(g, e)}))
    for f in g.nodes(NodeKind.FRAGMENT):
        f.properties.pop(RELATIONS_READ, None)


def test_a_store_written_before_records_forgets_its_relations_as_it_did(tmp_path):
    path = tmp_path / "m.db"
    with filled(path) as mem:
        mem.apply(_as_the_previous_version_wrote_it, namespace="u")
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        g = mem.graph("u")
        edge = g.edge("e:nadia", "e:bruno", EdgeKind.RELATION, "called")
        assert edge.properties == {READ_FROM: ["m1", "m2", "m3", "m4"]}
        assert not any(RELATIONS_READ in f.properties for f in g.nodes(NodeKind.FRAGMENT))
        mem.forget(["m1"], namespace="u")
        assert mem.graph("u").edge("e:nadia", "e:bruno", EdgeKind.RELATION, "called").properties == {
            READ_FROM: ["m2", "m3", "m4"]
        }
        # read again: the list stays as it was (no longer grown), the new message is counted
        mem.add_messages([said(5, 3002)], namespace="u")
        props = mem.graph("u").edge("e:nadia", "e:bruno", EdgeKind.RELATION, "called").properties
        assert props[READ_FROM] == ["m2", "m3", "m4"] and list(props[READ_COUNTS].values()) == [1]
        assert called(mem) == ["m2", "m3", "m4", "m5"]
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        mem.forget(["m2", "m3", "m4"], namespace="u")
        assert called(mem) == ["m5"]
        mem.forget(["m5"], namespace="u")
        assert called(mem) is None


def test_a_store_written_before_records_forgets_a_relation_with_its_last_listed_message(tmp_path):
    path = tmp_path / "m.db"
    with filled(path) as mem:
        mem.apply(_as_the_previous_version_wrote_it, namespace="u")
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        mem.forget(["m1", "m2", "m3"], namespace="u")
        assert called(mem) == ["m4"]
        mem.forget(["m4"], namespace="u")
        assert called(mem) is None


def _forget_in_turn(mem: MnemisMemory, batches: list[list[str]], sources) -> None:
    """Forget ``batches`` one after the other: the relation stays, read from the messages left
    (``sources(mem)``), until the last batch takes it."""
    left = {m for batch in batches for m in batch}
    for batch in batches[:-1]:
        mem.forget(batch, namespace="u")
        left -= set(batch)
        assert sources(mem) == sorted(left)
    mem.forget(batches[-1], namespace="u")
    assert sources(mem) is None


def test_the_llama_index_store_shows_none_of_the_bookkeeping():
    """The records and counts name message ids and serve forget: no node or relation a LlamaIndex
    caller reads holds them."""
    from mnemis_integrations.llama_index import MnemisPropertyGraphStore

    store = MnemisPropertyGraphStore(memory=filled(), namespace="u")
    nodes = store.get()
    triplets = store.get_triplets(entity_names=["Nadia"])
    assert triplets and any(r.label == "called" for _, r, _ in triplets)
    shown = [n.properties for n in nodes] + [p.properties for t in triplets for p in t]
    assert not [k for props in shown for k in props if k in {RELATIONS_READ, READ_COUNTS, READ_FROM}]


def _superseding(mem: MnemisMemory, message_ids: set[str], namespace: str = "u") -> None:
    """Every fragment holding one of ``message_ids`` marked replaced by the one holding ``kept``."""
    from mnemis_integrations.core.maintenance.supersede import supersede

    def change(g):
        new = next(f for f in g.nodes(NodeKind.FRAGMENT) if "kept" in f.source_ids)
        for f in g.nodes(NodeKind.FRAGMENT):
            if message_ids.intersection(f.source_ids):
                supersede(g, old_id=f.id, new_id=new.id, when=T0 + timedelta(days=30))

    mem.apply_journaled(change, namespace=namespace)


def test_a_relation_is_superseded_once_every_fragment_it_was_read_from_is():
    from mnemis_integrations.llama_index import MnemisPropertyGraphStore

    mem = filled()
    store = MnemisPropertyGraphStore(memory=mem, namespace="u")

    def status() -> str:
        called = next(r for _, r, _ in store.get_triplets(entity_names=["Nadia"]) if r.label == "called")
        return called.properties["status"]

    assert status() == "active"
    _superseding(mem, {"m1", "m2"})  # the first fragment's calls replaced; the second's still hold
    assert status() == "active"
    _superseding(mem, {"m3", "m4"})
    assert status() == "superseded"
    assert store.get_triplets(properties={"status": "superseded"})


def test_a_relation_written_by_hand_has_no_status_and_a_reopened_store_gives_the_same(tmp_path):
    from llama_index.core.graph_stores.types import EntityNode, Relation

    from mnemis_integrations.llama_index import MnemisPropertyGraphStore

    path = tmp_path / "m.db"
    mem = filled(path)
    _superseding(mem, {"m1", "m2", "m3", "m4"})
    store = MnemisPropertyGraphStore(memory=mem, namespace="u")
    store.upsert_nodes([EntityNode(name="Ann"), EntityNode(name="Tea")])
    store.upsert_relations([Relation(label="LIKES", source_id="Ann", target_id="Tea")])
    reopened = MnemisPropertyGraphStore(memory=MnemisMemory(path, embedder=HashingEmbedder()), namespace="u")
    for s in (store, reopened):
        by_label = {r.label: r.properties for _, r, _ in s.get_triplets(entity_names=["Nadia", "Ann"])}
        assert by_label["called"]["status"] == "superseded"
        assert "status" not in by_label["LIKES"]


def test_compaction_leaves_a_relation_the_status_its_fragments_had():
    from mnemis_integrations.llama_index import MnemisPropertyGraphStore

    mem = filled()
    _superseding(mem, {"m1", "m2", "m3", "m4"})
    report = mem.compact(before=(T0 + timedelta(days=10)).isoformat(), namespace="u")
    assert report.fragments_archived >= 2  # the calls' fragments now lie in an archive
    store = MnemisPropertyGraphStore(memory=mem, namespace="u")
    called = [r for _, r, _ in store.get_triplets(entity_names=["Nadia"]) if r.label == "called"]
    assert [r.properties["status"] for r in called] == ["superseded"]


def _status_by_scan(g) -> dict:
    """Edge key -> status, read the long way: every fragment's records and messages, for every relation."""
    from mnemis_integrations.core.graph import edge_key
    from mnemis_integrations.core.model import Status
    from mnemis_integrations.core.temporal import status_at

    out = {}
    for e in g.edges(EdgeKind.RELATION):
        tokens, listed = set(e.properties.get(READ_COUNTS, {})), set(e.properties.get(READ_FROM, ()))
        seen = [
            status_at(g, f, None, include_archived=True)
            for f in g.nodes(NodeKind.FRAGMENT)
            for records in [
                *[[r for r in rs if r[3] in tokens] for rs in f.properties.get(RELATIONS_READ, {}).values()],
                [m for m in f.source_ids if m in listed],
            ]
            for _ in records
        ]
        seen = [x for x in seen if x is not None]
        if seen:
            out[edge_key(e)] = (
                Status.SUPERSEDED if all(x == Status.SUPERSEDED for x in seen) else Status.ACTIVE
            )
    return out


def test_the_status_read_from_the_graphs_index_follows_every_write_as_a_full_scan_does():
    """read_status reads the fragments the graph files by their records and messages; the graph kept
    between writes must give what reading every fragment gives, as records come, go and are replaced."""
    mem = filled()

    def both() -> tuple[dict, dict]:
        def look(g):
            return read_status(g, list(g.edges(EdgeKind.RELATION))), _status_by_scan(g)

        return mem.read(look, namespace="u")

    def called_status() -> str:
        indexed, scanned = both()
        assert indexed == scanned
        return next(v.value for k, v in indexed.items() if k[:2] == ("e:nadia", "e:bruno"))

    assert called_status() == "active"
    _superseding(mem, {"m1", "m2", "m3", "m4"})
    assert called_status() == "superseded"
    mem.add_messages([said(5, 9000)], namespace="u")  # restated later: a record on a fragment in force
    assert called_status() == "active"
    mem.forget(["m5"], namespace="u")  # its record goes with it
    assert called_status() == "superseded"
    mem.apply(_as_the_previous_version_wrote_it, namespace="u")  # listed messages instead of records
    assert called_status() == "superseded"
    mem.add_messages([said(6, 9100)], namespace="u")
    assert called_status() == "active"
