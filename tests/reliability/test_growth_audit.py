"""The cost of one more message does not grow with the memory: structural counts (nodes visited,
bytes written, messages copied) of one ingest into a namespace of 200 and of 2,000 messages,
never timings. A count that grows about tenfold between the two follows the memory's size."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from _over_time import TOPICS, WEEKS
from bench_modules import bench_module

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.builder.llm_builder import LLMBuildConfig, LLMBuilder
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.storage.memory import InMemoryStore

SMALL, LARGE = 200, 2_000
T0 = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)


def chat(start: int, stop: int, seed: int = 3) -> list[dict]:
    """Messages ``start``..``stop`` of one long chat: topics and names that come back."""
    rnd = random.Random(seed)
    out = []
    for i in range(stop):
        name, things = TOPICS[:4][rnd.randrange(len(TOPICS[:4]))]
        x, y = rnd.sample(things, 2)
        text = f"We told {name} about the {x} and the {y}, number {rnd.randrange(1000)}."
        if i >= start:
            out.append(
                {
                    "id": f"m{i}",
                    "speaker": rnd.choice(["ann", "bob"]),
                    "text": text,
                    "timestamp": T0 + timedelta(hours=7 * i),  # a fragment each
                }
            )
    return out


def filled(n: int, messages: Callable[[int, int], list[dict]] = chat) -> MnemisMemory:
    mem = MnemisMemory(embedder=HashingEmbedder())
    for i in range(0, n, 500):
        mem.add_messages(messages(i, min(n, i + 500)), namespace="u")
    return mem


@contextmanager
def _listed(method: str) -> Iterator[list[int]]:
    seen = [0]
    real = getattr(MemoryGraph, method)

    def counting(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        seen[0] += len(out)
        return out

    setattr(MemoryGraph, method, counting)
    try:
        yield seen
    finally:
        setattr(MemoryGraph, method, real)


def nodes_listed() -> Any:
    """Counts the nodes every ``MemoryGraph.nodes()`` call returns: a scan of the graph."""
    return _listed("nodes")


def edges_listed() -> Any:
    """Counts the edges every ``MemoryGraph.edges()`` call returns: a scan of the graph's edges."""
    return _listed("edges")


def assert_bounded(small: float, large: float, what: str) -> None:
    # 10x the memory: a count that follows it grows ~10x; one that follows the new message does not.
    assert large <= 2 * small + 50, f"{what}: {small} at {SMALL} messages, {large} at {LARGE}"


# ------------------------------------------------------------------ LLM builder: update judge


def _updates_model(messages: list[dict]) -> str:
    return '{"judgements": []}'


def _llm_add_scan(n: int) -> int:
    mem = filled(n)
    mem.builder = LLMBuilder(
        _updates_model, embedder=mem.embedder, config=LLMBuildConfig.only("updates", max_retries=0)
    )
    more = chat(n, n + 8)
    mem.add_messages(more[:4], namespace="u")  # anything built on first use is built here
    with nodes_listed() as seen:
        for m in more[4:]:
            mem.add_messages([m], namespace="u")
    return seen[0] // 4


def test_llm_update_judge_does_not_scan_every_fragment_per_new_fragment():
    """``LLMUpdateJudge._candidates`` ranked every fragment of the namespace (a Python loop with a
    parent and a mentions lookup each) to pick ``update_candidates`` (4) earlier facts."""
    assert_bounded(_llm_add_scan(SMALL), _llm_add_scan(LARGE), "graph nodes listed per add (LLM updates)")


# ------------------------------------------------------------------ relations


def _restated(start: int, stop: int) -> list[dict]:
    """One relation stated again and again (a weekly call), about something new each time."""
    return [
        {
            "id": f"r{i}",
            "speaker": "ann",
            "text": f"Then Nadia called Bruno about invoice {i}.",
            "timestamp": T0 + timedelta(hours=20 * i),
        }
        for i in range(start, stop)
    ]


def _edge_bytes_per_add(n: int) -> float:
    mem = filled(n, _restated)
    written: list[int] = []
    real = mem._store.write

    def counting(namespace, delta, expected, meta=None):
        written.append(sum(len(json.dumps(e.to_dict())) for e in delta.graph.edges))
        return real(namespace, delta, expected, meta)

    mem._store.write = counting
    for m in _restated(n, n + 5):
        mem.add_messages([m], namespace="u")
    return sum(written) / len(written)


def test_restating_a_relation_writes_no_more_the_larger_the_memory():
    """``link._add_relation`` kept on the relation edge every message it was read from and
    rewrote the whole edge each time the relation was read again: the bytes one message wrote
    grew with how often the relation was stated before (now the edge counts them and the
    fragments record which they are)."""
    assert_bounded(_edge_bytes_per_add(SMALL), _edge_bytes_per_add(LARGE), "edge bytes written per add")


# ------------------------------------------------------------------ LlamaIndex documents


def _document_ingest_scan(n: int) -> int:
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import TextNode

    from mnemis_integrations.llama_index import MnemisPropertyGraphStore

    mem = filled(n)
    store = MnemisPropertyGraphStore(memory=mem, namespace="u")
    store.upsert_llama_nodes([TextNode(id_="doc-0", text="The offsite moved to the lighthouse hotel.")])
    with nodes_listed() as seen:
        store.upsert_llama_nodes([TextNode(id_="doc-1", text="The deploy window is Tuesday night.")])
    return seen[0]


def test_inserting_one_document_into_the_property_graph_store_does_not_scan_the_namespace():
    """``MnemisPropertyGraphStore.upsert_llama_nodes`` wrote its chunk node through
    ``MnemisMemory.apply``, which snapshots and compares every node and then derives the whole
    state again (every fragment's words and vector), indexed every node by LlamaIndex id, and
    copied every message to look up the document's. Now the chunk goes through
    ``apply_journaled``, which derives only what the new node reaches."""
    assert_bounded(
        _document_ingest_scan(SMALL), _document_ingest_scan(LARGE), "graph nodes listed per document"
    )


def _extracting_index(store: Any) -> Any:
    """A ``PropertyGraphIndex`` on ``store`` whose extractor, as an LLM's would, finds a person and
    a place in each document and relates them, and relates the person to the first document's."""
    from llama_index.core import PropertyGraphIndex
    from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY, EntityNode, Relation
    from llama_index.core.schema import TransformComponent

    class People(TransformComponent):
        def __call__(self, nodes: Sequence[Any], **kwargs: Any) -> Sequence[Any]:
            for node in nodes:
                person, place = node.metadata["person"], node.metadata["place"]
                node.metadata[KG_NODES_KEY] = [
                    EntityNode(name=person, label="PERSON"),
                    EntityNode(name=place, label="PLACE"),
                ]
                node.metadata[KG_RELATIONS_KEY] = [
                    Relation(label="BOOKED", source_id=person, target_id=place),
                    Relation(label="WORKS_WITH", source_id=person, target_id="Mira"),
                ]
            return nodes

    return PropertyGraphIndex.from_existing(
        property_graph_store=store, kg_extractors=[People()], embed_kg_nodes=False
    )


def _document_with_entities_scan(n: int) -> int:
    pytest.importorskip("llama_index.core")
    from llama_fakes import offline_settings
    from llama_index.core import Document

    from mnemis_integrations.llama_index import MnemisPropertyGraphStore

    mem = filled(n)
    # dated after the chat: a document told earlier than its last messages would be judged against them
    after_the_chat = T0 + timedelta(hours=7 * n + 1)
    store = MnemisPropertyGraphStore(memory=mem, namespace="u", clock=lambda: after_the_chat)
    with offline_settings():
        index = _extracting_index(store)
        index.insert(
            Document(
                text="Mira moved the offsite.", id_="doc-0", metadata={"person": "Mira", "place": "Hotel"}
            )
        )
        with nodes_listed() as seen:
            index.insert(
                Document(
                    text="Tomas booked the lighthouse for the deploy retro.",
                    id_="doc-1",
                    metadata={"person": "Tomas", "place": "Lighthouse"},
                )
            )
    assert {"Tomas", "Lighthouse"} <= {node.id for node in store.get(ids=["Tomas", "Lighthouse"])}
    return seen[0]


def test_inserting_a_document_with_extracted_entities_does_not_scan_the_namespace():
    """With a knowledge-graph extractor, an insert also looks its entities up (``get(ids=...)``),
    upserts them (``upsert_nodes``) and their relations (``upsert_relations``), and each of those
    indexed every node of the namespace by LlamaIndex id."""
    assert_bounded(
        _document_with_entities_scan(SMALL),
        _document_with_entities_scan(LARGE),
        "graph nodes listed per document with entities",
    )


def _chunk_delete_scan(n: int) -> tuple[int, int]:
    pytest.importorskip("llama_index.core")
    from llama_fakes import offline_settings
    from llama_index.core.schema import TextNode

    from mnemis_integrations.llama_index import MnemisPropertyGraphStore

    mem = filled(n)
    after_the_chat = T0 + timedelta(hours=7 * n + 1)
    store = MnemisPropertyGraphStore(memory=mem, namespace="u", clock=lambda: after_the_chat)
    texts = [
        ("Mira moved the offsite.", "Mira", "Hotel"),
        ("Tomas booked the lighthouse for the deploy retro.", "Tomas", "Lighthouse"),
        ("Mira booked the hotel bar for Tomas.", "Mira", "Bar"),
    ]
    with offline_settings():
        _extracting_index(store).insert_nodes(
            [
                TextNode(id_=f"t{i}", text=text, metadata={"person": person, "place": place})
                for i, (text, person, place) in enumerate(texts)
            ]
        )
    store.delete(ids=["t0"])  # the graph's indexes are made by the first delete, then kept
    with nodes_listed() as nodes, edges_listed() as edges:
        store.delete(ids=["t1"])
    assert not store.get(ids=["t1", "Lighthouse"]) and store.get(ids=["t2", "Mira", "Bar"])
    return nodes[0], edges[0]


def test_deleting_one_chunk_by_id_does_not_scan_the_namespace():
    """``MnemisPropertyGraphStore.delete(ids=...)`` read every node to find the text nodes to
    forget, again in its write to find the nodes to remove, and every edge and entity for what an
    extractor wrote from them. Now the nodes are looked up by LlamaIndex id, and the orphaned
    relations and entities through the graph's indexes by their source."""
    small, large = _chunk_delete_scan(SMALL), _chunk_delete_scan(LARGE)
    assert_bounded(small[0], large[0], "graph nodes listed per chunk deleted")
    assert_bounded(small[1], large[1], "graph edges listed per chunk deleted")


def _entity_restored_scan(n: int) -> int:
    pytest.importorskip("llama_index.core")
    from llama_index.core.graph_stores.types import EntityNode

    from mnemis_integrations.llama_index import MnemisPropertyGraphStore

    mem = filled(n)
    store = MnemisPropertyGraphStore(memory=mem, namespace="u")
    store.upsert_nodes([EntityNode(name="Nadia", label="PERSON", properties={"role": "lead"})])
    with nodes_listed() as seen:
        store.upsert_nodes([EntityNode(name="Nadia", label="PERSON", properties={"role": "host"})])
    [nadia] = store.get(ids=["Nadia"])
    assert nadia.properties["role"] == "host" and nadia.label == "PERSON"
    return seen[0]


def test_storing_an_existing_entity_again_does_not_scan_the_namespace():
    """An entity seen again with new properties (``upsert_nodes`` of a name the graph holds: here
    one the builder made from the chat, mentioned by a quarter of its fragments) replaced a node
    held before, which ``derive_changes`` could not take back: it derived the whole state again
    (every fragment's words and vector, every entity's names). Now the journal keeps the node's
    earlier form, and only the names it had and has are derived again."""
    assert_bounded(
        _entity_restored_scan(SMALL),
        _entity_restored_scan(LARGE),
        "graph nodes listed per entity stored again",
    )


# ------------------------------------------------------------------ the scale benchmark's ingest


def _scale_module() -> Any:
    return bench_module("scale")


def _scale_ingest_counts(n: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """Nodes and edges written, and graph nodes listed, by the ``add_messages`` calls of a
    ``benchmarks/scale.py`` run at ``n`` graph nodes: what its ``ingest_nodes_per_s`` times."""
    scale = _scale_module()
    written, listed = [0], [0]
    adding = [False]
    real_add, real_write = MnemisMemory.add_messages, InMemoryStore.write

    def counting_write(self, namespace, delta, expected, meta=None):
        if adding[0]:
            written[0] += len(delta.graph.nodes) + len(delta.graph.edges)
        return real_write(self, namespace, delta, expected, meta)

    def counting_add(self, *args, **kwargs):
        adding[0] = True
        try:
            with nodes_listed() as seen:
                out = real_add(self, *args, **kwargs)
        finally:
            adding[0] = False
        listed[0] += seen[0]
        return out

    with monkeypatch.context() as patched:
        patched.setattr(InMemoryStore, "write", counting_write)
        patched.setattr(MnemisMemory, "add_messages", counting_add)
        scale.run_one(n, dim=16, n_queries=4, agreement_queries=0)
    return written[0], listed[0]


def test_the_scale_benchmarks_ingest_writes_and_scans_only_what_its_messages_touch(monkeypatch):
    """``benchmarks/scale.py`` timed its first ``add_messages`` writing the whole bulk-built graph
    (every node and edge ``generate`` made was still in the change journal, never stored) and
    building the builder's index (one pass over the graph, made on first use): one-off costs of
    the synthetic memory, which ``ingest_nodes_per_s`` charged to 80 new messages (written: 3,084
    nodes and edges at 600 graph nodes, 29,978 at 6,000; listed: 600, 6,010). The memory is now
    stored and the index built before the ingest is timed, as a load from a store leaves them."""
    small = _scale_ingest_counts(600, monkeypatch)
    large = _scale_ingest_counts(6_000, monkeypatch)
    for what, at_small, at_large in zip(
        ("nodes and edges written", "graph nodes listed"), small, large, strict=True
    ):
        assert at_large <= 2 * at_small + 50, f"{what}: {at_small} at 600 graph nodes, {at_large} at 6,000"


# ------------------------------------------------------------------ forget


def _with_splits(n: int) -> MnemisMemory:
    """``filled(n)``, then three five-week threads (``WEEKS`` told again, ``w<k>-m<i>``) after the
    chat, and ``rebalance``: it splits the subtopics of the first thread that span too long."""
    mem = filled(n)
    after_the_chat = T0 + timedelta(hours=7 * n, days=1)
    for k in range(3):
        shift = after_the_chat + timedelta(days=60 * k) - WEEKS[0]["timestamp"]
        thread = [{**m, "id": f"w{k}-{m['id']}", "timestamp": m["timestamp"] + shift} for m in WEEKS]
        mem.add_messages(thread, namespace="u")
    assert {"s:w0-m1~1", "s:w0-m5~1", "s:w0-m5~2"} <= set(mem.rebalance("u").subtopics_created)
    return mem


def _forget_scan(n: int) -> int:
    mem = _with_splits(n)
    mem.forget(["m7"], namespace="u")  # anything built on first use is built here
    with nodes_listed() as seen:
        mem.forget(["w0-m5"], namespace="u")  # founded a subtopic rebalance split in three
    assert not {"s:w0-m5", "s:w0-m5~1", "s:w0-m5~2"} & {n.id for n in mem.graph("u").nodes()}
    return seen[0]


def test_forgetting_a_message_does_not_read_every_subtopic_for_the_ones_split_off_its_own():
    """``forget._split_off`` read every subtopic of the namespace to find those ``rebalance`` split
    off a forgotten message's (their ``split_from``); now the graph keeps an index of it."""
    assert_bounded(_forget_scan(SMALL), _forget_scan(LARGE), "graph nodes listed per forget")
