"""Centred placement: subtopics follow topics when every text shares one common direction."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from test_builder_scale import canonical, chat, tight

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.builder import abstract
from mnemis_integrations.core.config import MemoryConfig
from mnemis_integrations.core.embedders import HASHING_PROFILE, HashingEmbedder
from mnemis_integrations.core.model import NodeKind

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc)
PREAMBLE = "Quick note for the family planning doc, please keep it in the shared folder for everyone: "
KITCHEN = [
    "the kitchen tiles arrive Tuesday",
    "grout colour for the kitchen backsplash is grey",
    "the kitchen sink plumber comes at noon",
    "kitchen cabinet doors need new hinges",
]
TRIP = [
    "flights to Lisbon are booked for the trip",
    "the Lisbon hotel has a late checkout on the trip",
    "train from Lisbon to Porto on the last day of the trip",
    "Lisbon trip insurance is paid",
]


class CentredHashing(HashingEmbedder):
    """The hashing toy with placement centred, as e5's profile has it."""

    profile = replace(HASHING_PROFILE, centred_placement=True)


def _interleaved() -> list[dict]:
    """Two topics, alternating, each message hours apart (its own fragment), one long shared preamble."""
    texts = [t for pair in zip(KITCHEN, TRIP, strict=True) for t in pair]
    return [
        {"id": f"m{i}", "speaker": "ana", "text": PREAMBLE + t, "timestamp": T0 + timedelta(hours=5 * i)}
        for i, t in enumerate(texts)
    ]


def _subtopics(mem: MnemisMemory) -> list[set[str]]:
    g = mem.graph("u")
    by_id = {m["id"]: m["text"] for m in _interleaved()}
    return [
        {"kitchen" if "kitchen" in by_id[m] else "trip" for f in g.children(s.id) for m in f.source_ids}
        for s in g.nodes(NodeKind.SUBTOPIC)
    ]


def test_centred_placement_groups_by_topic_where_raw_groups_by_preamble():
    raw, centred = MnemisMemory(embedder=HashingEmbedder()), MnemisMemory(embedder=CentredHashing())
    for mem in (raw, centred):
        for m in _interleaved():
            mem.add_messages([m], namespace="u")
    assert any(len(topics) > 1 for topics in _subtopics(raw))  # the shared preamble wins raw
    assert all(len(topics) == 1 for topics in _subtopics(centred))
    assert {t for topics in _subtopics(centred) for t in topics} == {"kitchen", "trip"}


def test_the_first_candidates_decide_as_a_scan_of_every_parent(monkeypatch):
    """Raw-nearest parents are scored centred, widening while none is chosen: from the default
    first count it builds what a scan of every parent builds, with more parents than that count."""
    msgs = chat(200, seed=3)

    def build(first: int) -> tuple:
        monkeypatch.setattr(abstract, "PLACE_CANDIDATES", first)
        mem = MnemisMemory(embedder=CentredHashing(), config=tight())
        for i in range(0, len(msgs), 9):
            mem.add_messages(msgs[i : i + 9], namespace="u")
        return canonical(mem.graph("u"))

    default = abstract.PLACE_CANDIDATES
    monkeypatch.setattr(abstract, "PLACE_MAX_CANDIDATES", 10**9)
    narrow, full = build(default), build(10**9)
    assert narrow == full
    assert sum(n[1] == "subtopic" for n in full[0]) > default


def test_the_build_config_turns_centring_on_or_off_over_the_profile():
    def graph(embedder, **build):
        mem = MnemisMemory(
            embedder=embedder, config=MemoryConfig().with_(build=build) if build else MemoryConfig()
        )
        for m in _interleaved():
            mem.add_messages([m], namespace="u")
        return canonical(mem.graph("u"))

    assert graph(HashingEmbedder(), centred_placement=True) == graph(CentredHashing())
    assert graph(CentredHashing(), centred_placement=False) == graph(HashingEmbedder())
