"""Erased stays erased where the audit of forget and the adapters' deletes found it did not.

Before: a text node deleted through the LlamaIndex property graph store had its message forgotten
and purged, but its chunk node (whose summary is the text) went in a later write that nothing
purged, so the file kept the text. A subtopic ``rebalance`` split off ``s:<message id>`` was named
``s:<message id>~1`` and recorded ``split_from``: forgetting that message renamed ``s:<id>`` but
left both naming it, in the graph and in the file. And a message id holding ``:`` (every LangGraph
store's) was read as ``<prefix>:<id>`` at its last colon, so no node made from it was renamed.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from _over_time import WEEKS
from fakes import sqlite_file_bytes
from llama_fakes import offline_settings
from llama_index.core.schema import TextNode

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.llama_index import MnemisPropertyGraphStore

SECRET = "zanzibarquartz"


def _store_holding_the_secret(mem: MnemisMemory) -> MnemisPropertyGraphStore:
    """A LlamaIndex graph store over ``mem`` holding two text nodes, ``chunk-1`` naming ``SECRET``."""
    store = MnemisPropertyGraphStore(
        memory=mem, namespace="docs", clock=lambda: datetime(2025, 6, 1, tzinfo=timezone.utc)
    )
    store.upsert_llama_nodes(
        [
            TextNode(text=f"The {SECRET} refund bounced at the bank on Monday.", id_="chunk-1"),
            TextNode(text="Lunch on Friday is at the noodle bar with the design team.", id_="chunk-2"),
        ]
    )
    return store


def test_a_text_node_deleted_through_the_llama_index_store_leaves_no_byte_in_the_file(tmp_path):
    path = tmp_path / "m.db"
    with offline_settings(), MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        store = _store_holding_the_secret(mem)
        assert SECRET.encode() in sqlite_file_bytes(path)
        store.delete(ids=["chunk-1"])
        assert store.get(ids=["chunk-1"]) == []
        assert SECRET not in json.dumps(mem.graph("docs").to_data(), default=str)
        assert SECRET.encode() not in sqlite_file_bytes(path)


# the message ids of WEEKS, made distinctive so that no other byte of the file can hold one
_WEEKS = [{**m, "id": f"zq{m['id'][1:]}x"} for m in WEEKS]


@pytest.mark.parametrize("victim", ["zq1x", "zq5x"])  # each founded a subtopic rebalance splits
def test_forget_renames_the_subtopics_rebalance_split_off_a_forgotten_message(tmp_path, victim):
    path = tmp_path / "m.db"
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        mem.add_messages(_WEEKS, namespace="u1")
        report = mem.rebalance("u1")
        assert f"s:{victim}~1" in report.subtopics_created
        mem.forget([victim], namespace="u1")
        assert victim not in json.dumps(mem.graph("u1").to_data(), default=str)
        assert victim.encode() not in sqlite_file_bytes(path)
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        assert victim not in json.dumps(mem.graph("u1").to_data(), default=str)


def test_a_text_node_stored_again_with_other_text_leaves_no_byte_of_the_old_text(tmp_path):
    path = tmp_path / "m.db"
    with offline_settings(), MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        store = _store_holding_the_secret(mem)
        store.upsert_llama_nodes([TextNode(text="The refund went through on Tuesday.", id_="chunk-1")])
        assert [m.text for m in mem.messages("docs") if m.id == "chunk-1"] == [
            "The refund went through on Tuesday."
        ]
        assert SECRET not in json.dumps(mem.graph("docs").to_data(), default=str)
        assert SECRET.encode() not in sqlite_file_bytes(path)


def test_forget_renames_a_fragment_made_from_a_message_id_holding_a_colon():
    """A LangGraph store's message ids hold ``:`` (``<key>#<digest>:<digest>``): the fragment
    ``f:<id>`` of a forgotten one kept its id, the key with it, while other messages held it."""
    weeks = [{**m, "id": f"secret-key-{m['id'][1:]}#ab:cd"} for m in WEEKS]
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(weeks, namespace="u1")
    victim = "secret-key-1#ab:cd"
    assert len(mem.graph("u1").get(f"f:{victim}").source_ids) > 1  # the fragment stays
    mem.forget([victim], namespace="u1")
    assert victim not in json.dumps(mem.graph("u1").to_data(), default=str)


def test_forget_leaves_the_nodes_of_a_message_whose_id_extends_the_forgotten_one():
    """A split subtopic's id extends its root's (``s:<id>~1``), but so may a message's own id
    (``m~1``): forgetting ``m`` must not rename the nodes ``m~1`` founded."""
    weeks = [{**m, "id": "m" if m["id"] == "m1" else f"m~{m['id'][1:]}"} for m in WEEKS]
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(weeks, namespace="u1")
    before = {n.id for n in mem.graph("u1").nodes() if "m~" in n.id}
    assert before
    mem.forget(["m"], namespace="u1")
    assert before <= {n.id for n in mem.graph("u1").nodes()}


# Forget finds the splits through an index the graph keeps (``nodes_keyed``), made by a first forget:
# splits made after it, by this object's rebalance or by hand, or by another writer, are found too.


def _split_names(mem: MnemisMemory, victim: str) -> set[str]:
    """The ids of the subtopics split off ``s:<victim>``, as the graph records them now."""
    return {n.id for n in mem.graph("u1").nodes() if n.properties.get("split_from") == f"s:{victim}"}


def _assert_erased(mem: MnemisMemory, path, victim: str) -> None:
    assert victim not in json.dumps(mem.graph("u1").to_data(), default=str)
    assert victim.encode() not in sqlite_file_bytes(path)


def test_forget_finds_the_splits_a_rebalance_made_after_an_earlier_forget(tmp_path):
    path = tmp_path / "m.db"
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        mem.add_messages(_WEEKS, namespace="u1")
        mem.forget(["zq13x"], namespace="u1")
        mem.rebalance("u1")
        assert _split_names(mem, "zq5x")
        mem.forget(["zq5x"], namespace="u1")
        _assert_erased(mem, path, "zq5x")


@pytest.mark.parametrize("how", ["edit", "apply"])
def test_forget_finds_a_split_recorded_by_hand_after_an_earlier_forget(tmp_path, how):
    """A hand edit changes ``properties`` in place, which only the comparison before its write sees."""
    path = tmp_path / "m.db"
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        mem.add_messages(_WEEKS, namespace="u1")
        mem.forget(["zq13x"], namespace="u1")
        other = next(n.id for n in mem.graph("u1").nodes() if n.id.startswith("s:") and "zq5x" not in n.id)

        def record(g):
            g.get(other).properties["split_from"] = "s:zq5x"

        if how == "edit":
            with mem.edit("u1") as g:
                record(g)
        else:
            mem.apply(record, "u1")
        assert _split_names(mem, "zq5x") == {other}
        mem.forget(["zq5x"], namespace="u1")
        _assert_erased(mem, path, "zq5x")
        assert other not in {n.id for n in mem.graph("u1").nodes()}  # renamed as a split of the victim's


def test_forget_finds_the_splits_another_writer_made_after_this_object_forgot(tmp_path):
    path = tmp_path / "m.db"
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        mem.add_messages(_WEEKS, namespace="u1")
        mem.forget(["zq13x"], namespace="u1")
        with MnemisMemory(path, embedder=HashingEmbedder()) as other:
            other.rebalance("u1")
        assert _split_names(mem, "zq5x")
        mem.forget(["zq5x"], namespace="u1")
        _assert_erased(mem, path, "zq5x")
    with MnemisMemory(path, embedder=HashingEmbedder()) as mem:
        assert "zq5x" not in json.dumps(mem.graph("u1").to_data(), default=str)
