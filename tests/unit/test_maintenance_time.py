"""Supersession and time travel: validity intervals, successors shown at as_of, and decay."""

from datetime import datetime, timedelta, timezone

import pytest
from _over_time import WEEKS

from mnemis_integrations.core.builder.link import has_change_cue
from mnemis_integrations.core.config import MemoryConfig
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.maintenance.decay import half_life_weight
from mnemis_integrations.core.maintenance.supersede import supersede
from mnemis_integrations.core.model import Node, NodeKind, Status
from mnemis_integrations.core.temporal import status_at, visible_successors

T = datetime(2025, 3, 1, tzinfo=timezone.utc)


def _chain():
    g = MemoryGraph("u")
    for i, d in zip("abc", (1, 5, 9), strict=True):
        g.add_node(
            Node(
                i,
                NodeKind.FRAGMENT,
                i,
                "u",
                created_at=T + timedelta(days=d),
                event_time=T + timedelta(days=d),
            )
        )
    supersede(g, old_id="a", new_id="b", when=T + timedelta(days=5))
    supersede(g, old_id="b", new_id="c", when=T + timedelta(days=9))
    return g


def test_superseded_node_is_kept_marked_and_linked_to_its_successor():
    g = _chain()
    a = g.get("a")
    assert a.status == Status.SUPERSEDED and a.valid_until == T + timedelta(days=5)
    assert [n.id for n in g.successors_of("a")] == ["b"]


@pytest.mark.parametrize(
    "day,expected", [(0, None), (3, Status.ACTIVE), (6, Status.SUPERSEDED), (20, Status.SUPERSEDED)]
)
def test_validity_interval_decides_status_at_a_moment(day, expected):
    g = _chain()
    assert status_at(g, g.get("a"), T + timedelta(days=day), False) == expected


def test_successor_shown_is_the_newest_one_existing_at_as_of():
    g = _chain()
    at6 = {n.id for n in g.nodes() if status_at(g, n, T + timedelta(days=6), False) is not None}
    assert visible_successors(g, "a", at6) == ["b"]
    now = {n.id for n in g.nodes()}
    assert visible_successors(g, "a", now) == ["c"]


def test_search_returns_the_superseding_message_with_the_old_one(memory):
    memory.add_messages(WEEKS, namespace="u1")
    hits = memory.search("hosting migration plan A servers", k=10, namespace="u1")
    old = next(i for i, h in enumerate(hits) if h.status == "superseded")
    assert "m5" in hits[old].source_ids and hits[old].successors
    new = next(i for i, h in enumerate(hits) if "m9" in h.source_ids)
    assert new < old  # the successor comes before what it replaced (newer-first may lift it further)
    assert "successor" in hits[new].via


def test_as_of_answers_from_what_was_known_then(memory):
    memory.add_messages(WEEKS, namespace="u1")
    hits = memory.search("hosting migration plan", k=10, namespace="u1", as_of=WEEKS[7]["timestamp"])
    assert all("m9" not in h.source_ids for h in hits)
    assert all(h.status != "superseded" for h in hits)
    frags = [h for h in hits if h.kind == "fragment"]
    assert frags and all(h.time <= WEEKS[7]["timestamp"] for h in frags)


@pytest.mark.parametrize(
    "text",
    [
        "Renewal update: 15% needs two years",
        "v1.3 推迟到 9 月 25 号",
        "张萌拒了我们的offer",
        "We switched to plan B instead",
    ],
)
def test_change_cues_are_recognised(text):
    assert has_change_cue(text)


@pytest.mark.parametrize("text", ["Plan A looks good", "See you on Friday at noon", "周五一起吃午饭"])
def test_ordinary_messages_carry_no_change_cue(text):
    assert not has_change_cue(text)


def test_decay_is_off_by_default_and_halves_per_half_life():
    assert MemoryConfig().relation.decay_half_life_days is None
    assert half_life_weight(14, 7) == pytest.approx(0.25)


def test_decay_lowers_old_relation_hits_but_keeps_results(memory):
    memory.add_messages(WEEKS, namespace="u1")
    cfg = MemoryConfig().with_(relation={"decay_half_life_days": 3.0})
    plain = memory.search("Plan B hosting", k=10, namespace="u1")
    faded = memory.search("Plan B hosting", k=10, namespace="u1", config=cfg)
    assert len(faded) == len(plain)
    old = {h.node_id: h.relation_score for h in plain}
    assert all(0.0 <= h.relation_score <= 1.0 for h in faded)
    assert faded != plain or not any(old.values())


def test_as_of_shows_no_text_said_after_it_even_in_a_fragment_that_grew_later():
    from mnemis_integrations import MnemisMemory
    from mnemis_integrations.core.embedders import HashingEmbedder

    t0 = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(
        [
            {
                "id": "a",
                "speaker": "ann",
                "text": "The venue for the offsite is the lake hotel.",
                "timestamp": t0,
            }
        ],
        namespace="u1",
    )
    mem.add_messages(
        [
            {
                "id": "b",
                "speaker": "bob",
                "text": "Offsite venue: the lake hotel is booked for May.",
                "timestamp": t0 + timedelta(minutes=2),
            }
        ],
        namespace="u1",
    )
    now = [h for h in mem.search("offsite venue", k=5, namespace="u1") if h.kind == "fragment"]
    assert now and set(now[0].source_ids) == {"a", "b"}  # one fragment: b continued a's topic
    then = [
        h
        for h in mem.search("offsite venue", k=5, namespace="u1", as_of=t0 + timedelta(minutes=1))
        if h.kind == "fragment"
    ]
    assert then and then[0].node_id == now[0].node_id
    assert then[0].source_ids == ("a",) and "booked for May" not in then[0].text
    assert then[0].time == t0 < now[0].time


def test_as_of_subtopic_text_sums_up_only_fragments_complete_by_then():
    from mnemis_integrations import MnemisMemory
    from mnemis_integrations.core.embedders import HashingEmbedder

    t0 = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)
    mem = MnemisMemory(embedder=HashingEmbedder())
    for i, text in enumerate(
        [
            "Offsite venue: the lake hotel looks good for the offsite.",
            "Offsite venue update: the lake hotel offsite is moved to Zermatt.",
        ]
    ):
        mem.add_messages(
            [{"id": f"m{i}", "speaker": "ann", "text": text, "timestamp": t0 + timedelta(days=3 * i)}],
            namespace="u1",
        )
    now = [h for h in mem.search("offsite venue", k=10, namespace="u1") if h.kind == "subtopic"]
    assert now and any("zermatt" in h.text.lower() for h in now)  # the later fragment is summed up today
    then = [
        h
        for h in mem.search("offsite venue", k=10, namespace="u1", as_of=t0 + timedelta(days=1))
        if h.kind == "subtopic"
    ]
    assert then and all("zermatt" not in h.text.lower() for h in then)
