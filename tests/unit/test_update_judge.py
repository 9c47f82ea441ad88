"""The offline update judge: which earlier message a new one replaces, and the links it makes."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.builder.updates import (
    FEATURES,
    WEIGHTS,
    Earlier,
    OfflineUpdateJudge,
    candidate_pool,
    candidate_scores,
    change_values,
    gate_passed,
    replaced,
)
from mnemis_integrations.core.config import MemoryConfig
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.maintenance.supersede import REPLACED, REPLACED_BY, supersede
from mnemis_integrations.core.model import EdgeKind, Node, NodeKind, Status

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def _msgs(texts: list[tuple[str, str]], gap_hours: float = 6.0) -> list[dict]:
    """One message per entry, hours apart: a silence that long always starts a new fragment."""
    return [
        {"id": f"m{i}", "speaker": who, "text": text, "timestamp": T0 + timedelta(hours=gap_hours * i)}
        for i, (who, text) in enumerate(texts)
    ]


OFFSITE = [
    ("ana", "The team offsite is booked at Lakeside Lodge for March 14, 40 people."),
    ("ben", "I ordered new standing desks for the Berlin office."),
    ("ana", "Reminder: quarterly tax filing is due on the 30th."),
    ("ben", "The espresso machine in the kitchen is broken again."),
    ("ana", "Update: the offsite moved from Lakeside Lodge to Hilltop Inn, March 21, 40 people."),
]


def _links(mem: MnemisMemory, ns: str = "u") -> set[tuple[tuple[str, ...], tuple[str, ...]]]:
    g = mem.graph(ns)
    return {
        (tuple(g.get(e.src).source_ids), tuple(g.get(e.dst).source_ids)) for e in g.edges(EdgeKind.UPDATES)
    }


def test_features_and_weights_line_up():
    assert set(WEIGHTS) == set(FEATURES)


def test_values_are_amounts_dates_weekdays_and_months():
    assert change_values("moved to Tue 16th, £350, 45 people") == {"tue", "16", "£350", "45"}
    assert change_values("my friend may come on Sunday") == {"sun"}  # "fri(end)", "may": words, not dates
    assert change_values("开工改成22号，总共4.9万") == {"22号", "4.9万"}
    assert change_values("see you soon") == set()


def test_a_restated_value_outranks_an_unrelated_message():
    old = Earlier(
        "old", "The offsite is at Lakeside Lodge on March 14", "ana", 4, overlap=9.0, weight=12.0, cosine=0.91
    )
    other = Earlier("other", "The espresso machine is broken", "ben", 1, overlap=0.0, weight=8.0, cosine=0.82)
    ranked = replaced("Update: the offsite moved to Hilltop Inn, March 21", "ana", 14.0, [other, old])
    assert [k for k, _ in ranked] == ["old", "other"]
    assert ranked[0][1] > ranked[1][1]


@pytest.mark.parametrize("one_at_a_time", [True, False], ids=["turn-by-turn", "one-batch"])
def test_a_moved_date_supersedes_the_booking_and_nothing_else(one_at_a_time):
    mem = MnemisMemory(embedder=HashingEmbedder())
    msgs = _msgs(OFFSITE)
    for batch in [[m] for m in msgs] if one_at_a_time else [msgs]:
        mem.add_messages(batch, namespace="u")
    assert _links(mem) == {(("m4",), ("m0",))}
    g = mem.graph("u")
    demoted = [f.source_ids for f in g.nodes(NodeKind.FRAGMENT) if f.status == Status.SUPERSEDED]
    assert demoted == [["m0"]]
    # the link names which message replaced which, so forgetting either one can undo it
    assert [e.properties for e in g.edges(EdgeKind.UPDATES)] == [{REPLACED: ["m0"], REPLACED_BY: ["m4"]}]


def test_a_value_changed_twice_has_its_third_state_replace_the_second():
    """The third state repeats the first's words ("for 40 booked") and matches it best, but the first
    was replaced already: the link goes to the second, the state then in force."""
    texts = OFFSITE[:4] + [
        ("ana", "Update: the offsite at Lakeside Lodge on March 14 is now 45 people."),
        ("ben", "The printer on floor two is out of toner."),
        ("ana", "Update: the offsite at Lakeside Lodge on March 14 is now 46 people, for 40 booked."),
    ]
    mem = MnemisMemory(embedder=HashingEmbedder())
    for m in _msgs(texts):
        mem.add_messages([m], namespace="u")
    assert _links(mem) == {(("m4",), ("m0",)), (("m6",), ("m4",))}


def test_links_add_up_per_message_and_a_whole_link_stays_whole():
    g = MemoryGraph("u")
    for i in "abc":
        g.add_node(Node(i, NodeKind.FRAGMENT, i, "u"))
    supersede(g, old_id="a", new_id="b", when=None, replaced=("m1",), replaced_by=("m3",))
    supersede(g, old_id="a", new_id="b", when=None, replaced=("m2",), replaced_by=("m3",))
    assert g.edge("b", "a", EdgeKind.UPDATES).properties == {REPLACED: ["m1", "m2"], REPLACED_BY: ["m3"]}
    supersede(g, old_id="a", new_id="c", when=None)
    supersede(g, old_id="a", new_id="c", when=None, replaced=("m1",), replaced_by=("m5",))
    assert g.edge("c", "a", EdgeKind.UPDATES).properties == {}


def test_a_change_cue_about_something_else_demotes_nothing():
    texts = OFFSITE[:4] + [("ben", "We switched the kitchen to oat milk instead of dairy.")]
    mem = MnemisMemory(embedder=HashingEmbedder())
    for m in _msgs(texts):
        mem.add_messages([m], namespace="u")
    assert _links(mem) == set()


def test_a_change_inside_one_fragment_links_nothing():
    """The old and new value in one fragment (minutes apart): no fragment can supersede itself, and
    no other fragment is demoted in its place."""
    texts = [
        ("ana", "The garage quoted £640 for the clutch repair on the van."),
        ("ana", "Sorry, misread the garage quote: the clutch repair on the van is £460, not £640."),
    ]
    mem = MnemisMemory(embedder=HashingEmbedder())
    for m in _msgs(OFFSITE[1:4]) + _msgs(texts, gap_hours=0.02):
        m = dict(
            m,
            id=f"{m['id']}-{m['text'][:3]}",
            timestamp=m["timestamp"] + timedelta(days=3) if "clutch" in m["text"] else m["timestamp"],
        )
        mem.add_messages([m], namespace="u")
    g = mem.graph("u")
    assert len(g.nodes(NodeKind.FRAGMENT)) == 4
    assert _links(mem) == set()


def test_the_minimum_score_sets_how_sure_a_link_must_be():
    def links(min_score: float) -> set:
        mem = MnemisMemory(
            embedder=HashingEmbedder(), config=MemoryConfig().with_(build={"update_min_score": min_score})
        )
        for m in _msgs(OFFSITE + [("ben", "The espresso machine repair will cost $80, done by Friday.")]):
            mem.add_messages([m], namespace="u")
        return _links(mem)

    assert links(99.0) == set()
    assert len(links(-99.0)) > len(links(MemoryConfig().build.update_min_score)) == 1


# A message holding two facts (m0), replaced one piece at a time (m2, then m3).
TWO_FACTS = [
    ("ana", "U-Haul truck booked for $1,750, and two loaders for $600."),
    ("ben", "The espresso machine in the kitchen is broken again."),
    ("ana", "U-Haul cancelled, full refund."),
    ("ana", "Loaders cancelled too."),
]


class _Picks(OfflineUpdateJudge):
    """A judge that knows what each message replaces (as a judge right message by message would)."""

    def __init__(self, config, picks: dict[str, str]):
        super().__init__(config)
        self.picks = picks

    def may_replace(self, m, earlier):
        return self.picks.get(m.id) in {o.id for o in earlier}

    def scored_candidates(self, st, m, unsaid):
        return [(self.picks[m.id], 10.0)] if m.id in self.picks else []


@pytest.mark.parametrize("links", ["fragment", "message"])
def test_message_links_replace_a_two_fact_message_a_piece_at_a_time(links):
    """A message holding two facts, replaced one piece at a time: linked once per fragment, the second piece
    finds the fragment superseded already and links nothing; linked per message, each piece is linked."""
    mem = MnemisMemory(embedder=HashingEmbedder(), config=MemoryConfig().with_(build={"update_links": links}))
    judge = _Picks(mem.config.build, {"m2": "m0", "m3": "m0"})
    mem.builder.steps = dataclasses.replace(mem.builder.steps, updates=judge)
    for m in _msgs(TWO_FACTS):
        mem.add_messages([m], namespace="u")
    g = mem.graph("u")
    into = {tuple(g.get(e.src).source_ids): e.properties for e in g.edges(EdgeKind.UPDATES)}
    if links == "fragment":
        assert into == {("m2",): {REPLACED: ["m0"], REPLACED_BY: ["m2"]}}
    else:
        assert into == {
            ("m2",): {REPLACED: ["m0"], REPLACED_BY: ["m2"]},
            ("m3",): {REPLACED: ["m0"], REPLACED_BY: ["m3"]},
        }


def test_a_fragment_linked_per_message_stays_superseded_until_its_last_link_is_forgotten():
    """Linked per message, the two-fact fragment has a link per piece: forgetting one replacing message
    leaves it superseded by the other; forgetting both makes it the current state again."""
    mem = MnemisMemory(
        embedder=HashingEmbedder(), config=MemoryConfig().with_(build={"update_links": "message"})
    )
    mem.builder.steps = dataclasses.replace(
        mem.builder.steps, updates=_Picks(mem.config.build, {"m2": "m0", "m3": "m0"})
    )
    for m in _msgs(TWO_FACTS):
        mem.add_messages([m], namespace="u")

    def status_of_m0() -> Status:
        g = mem.graph("u")
        return next(n.status for n in g.nodes(NodeKind.FRAGMENT) if "m0" in n.source_ids)

    assert status_of_m0() == Status.SUPERSEDED
    mem.forget(["m2"], namespace="u")
    assert status_of_m0() == Status.SUPERSEDED
    assert {tuple(mem.graph("u").get(e.src).source_ids) for e in mem.graph("u").edges(EdgeKind.UPDATES)} == {
        ("m3",)
    }
    mem.forget(["m3"], namespace="u")
    assert status_of_m0() == Status.ACTIVE and not mem.graph("u").edges(EdgeKind.UPDATES)


def test_a_wider_candidate_pool_holds_the_narrow_one_and_only_earlier_messages():
    texts = [("ana", f"Stall {i}: the rent for pitch {i} is {20 + i} pounds a day.") for i in range(40)]
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(_msgs(texts), namespace="u")
    st = mem._state("u")
    last = st.messages[max(st.messages, key=lambda k: st.messages[k].seq)]
    narrow, wide = candidate_pool(st, last), candidate_pool(st, last, size=16)
    assert set(narrow) <= set(wide) and len(narrow) < len(wide) <= 32
    assert all(st.messages[k].seq < last.seq for k in wide)
    assert set(narrow) == {k for k, _ in candidate_scores(st, last)} | set(
        narrow
    )  # what the judge scores is in it


class _Counting(OfflineUpdateJudge):
    """The offline judge, noting each message it scores."""

    def __init__(self, config, judge_every_later: bool = False):
        super().__init__(config)
        self.judged: list[str] = []
        self.every = judge_every_later

    def may_replace(self, m, earlier):
        return self.every or super().may_replace(m, earlier)

    def scored_candidates(self, st, m, unsaid):
        self.judged.append(m.id)
        return super().scored_candidates(st, m, unsaid)


def test_a_history_told_late_is_judged_again_only_by_the_later_messages_that_may_replace_it():
    """The live chat first, then the booking it changed told late (an imported history): the move already
    stored retires it, as when every later message near it is judged again; of those, only the ones past
    the change gate (the tax date, the move) are scored, not the desks or the espresso machine."""
    msgs = _msgs(OFFSITE)
    links, judged = [], []
    for every in (False, True):
        mem = MnemisMemory(embedder=HashingEmbedder())
        judge = _Counting(mem.config.build, judge_every_later=every)
        mem.builder.steps = dataclasses.replace(mem.builder.steps, updates=judge)
        mem.add_messages(msgs[1:], namespace="u")
        judge.judged.clear()
        mem.add_messages([msgs[0]], namespace="u")
        links.append(_links(mem))
        judged.append(judge.judged)
    assert links == [{(("m4",), ("m0",))}] * 2
    assert judged[1] == ["m0", "m1", "m2", "m3", "m4"]
    assert judged[0] == ["m0", "m2", "m4"]
    assert [gate_passed(m["text"], msgs[0]["text"]) for m in msgs[1:]] == [False, True, False, True]


MOVED_TWICE = [
    ("ana", "The team offsite is booked at Lakeside Lodge for March 14, 40 people."),
    ("ben", "I ordered new standing desks for the Berlin office."),
    ("ana", "Update: the offsite moved from Lakeside Lodge to Hilltop Inn, March 21, 40 people."),
    ("ben", "The espresso machine in the kitchen is broken again."),
    ("ana", "Update: the offsite at Hilltop Inn is now 45 people, still March 21."),
]


def test_a_history_imported_after_the_live_chat_is_linked_as_when_told_in_order():
    """The live chat (the head count change) first, then the history before it in one call (the booking
    and its move): the history's own move still replaces the booking, and the head count replaces the
    move, not the booking, as when every message is told in order. Judged fragment by fragment as the
    history was written, the head count found only the booking, took it, and the move could no longer
    replace it."""
    msgs = _msgs(MOVED_TWICE)
    in_order = MnemisMemory(embedder=HashingEmbedder())
    for m in msgs:
        in_order.add_messages([m], namespace="u")
    imported = MnemisMemory(embedder=HashingEmbedder())
    for m in msgs[3:]:
        imported.add_messages([m], namespace="u")
    imported.add_messages(msgs[:3], namespace="u")
    assert _links(in_order) == _links(imported) == {(("m2",), ("m0",)), (("m4",), ("m2",))}
    g = imported.graph("u")
    active = sorted(f.source_ids[0] for f in g.nodes(NodeKind.FRAGMENT) if f.status == Status.ACTIVE)
    assert active == ["m1", "m3", "m4"]


def test_a_settled_choice_opens_the_gate_without_weighing_as_a_cue():
    """ "Carrot cake it is" names no change cue and no value, yet it settles what the lemon drizzle
    plan was: it is judged against its neighbours, but its score gets no cue's weight."""
    from mnemis_integrations.core.builder.updates import announces_change, pair_features

    plan, choice = "Lemon drizzle for Donna's leaving do?", "Carrot cake it is 🥕 Tom can you tell Donna pls!"
    assert gate_passed(choice, plan)
    assert not gate_passed("What day it is today, again?", plan)  # a clause, not a choice
    assert not gate_passed("ok see you then", plan)
    earlier = Earlier("m0", plan, "tom", 1, overlap=2.0, weight=4.0, cosine=0.9)
    f = pair_features(
        choice, "ana", 5.0, earlier, cosine_rank=0, overlap_rank=0, cosine_mean=0.8, cosine_std=0.05
    )
    assert f["cue"] == 0.0 and f["values_changed"] == 0.0 and f["opens_gate"] == 1.0
    assert announces_change(f)
    assert "opens_gate" not in FEATURES  # the score reads the fitted features only


PEOPLE_OUT_RETURNS_AND_CORRECTIONS = [
    "Tom's out. New job in Sheffield",
    "Back to iNaturalist then!",
    "坏消息 王浩下个月去上海 打不了了",
    "那就绿野吧",
    "看错了，是27号",
]


@pytest.mark.parametrize("text", PEOPLE_OUT_RETURNS_AND_CORRECTIONS)
def test_people_out_returns_and_corrections_open_the_gate(text):
    assert gate_passed(text, "an earlier plan")


@pytest.mark.parametrize(
    "text", ["I'm off to bed", "晚上算了一下，不划算", "那就好", "The gazette piece is out of print"]
)
def test_look_alikes_leave_the_gate_shut(text):
    assert not gate_passed(text, "an earlier plan")
