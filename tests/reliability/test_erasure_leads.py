"""Two leads of a randomised differential audit (a live memory against the same store reopened),
each followed to what forget still left behind on the current code."""

from __future__ import annotations

import glob
import re
from datetime import datetime, timedelta, timezone

import pytest

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.llama_index.graph_store import MnemisPropertyGraphStore

T0 = datetime(2025, 3, 1, 9, tzinfo=timezone.utc)


def _said(texts: list[str], name: str = "ann") -> list[dict]:
    return [
        {"id": f"m{i}", "speaker": name, "text": t, "timestamp": T0 + timedelta(days=i)}
        for i, t in enumerate(texts)
    ]


def _overview_left_with_an_original_deleted_by_hand(path) -> MnemisMemory:
    """m0, m1 and m2 compacted into o:f:m0; the archived original f:m0 deleted through the
    LlamaIndex store (a fragment's id names no message, so m0 stays stored, held by the overview);
    then the overview's other messages forgotten."""
    mem = MnemisMemory(path=path, embedder=HashingEmbedder())
    berlin = [f"Alice moved to Berlin in {n} and works at Siemens." for n in (3, 5, 7)]
    mem.add_messages(_said([*berlin, "We decided to use Postgres instead of MySQL for project 4."]), "u")
    assert mem.compact(T0 + timedelta(days=2, hours=12), namespace="u").overview_ids == ("o:f:m0",)
    MnemisPropertyGraphStore(memory=mem, namespace="u").delete(ids=["f:m0"])
    mem.forget(["m1", "m2"], namespace="u")
    return mem


def test_an_overview_keeps_the_message_of_an_original_deleted_by_hand_when_others_are_forgotten(tmp_path):
    """The seed 12 lead (a stale vector for the emptied overview) no longer shows: refresh_vectors
    drops a vector it cannot derive. But the overview took its messages from its originals again, so
    forgetting m1 and m2 also dropped m0, which only the overview held: m0 stayed stored, held by no
    fragment (no search could show it), the overview stayed with no messages, and the live memory
    still took it for m0's holder. Forgetting m0 then removed the overview live and not in a
    reopened memory: the two stores forked."""
    forked = []
    for reopen in (False, True):
        path = tmp_path / f"{reopen}.db"
        mem = _overview_left_with_an_original_deleted_by_hand(path)
        assert mem.graph("u").get("o:f:m0").source_ids == ["m0"]
        if reopen:
            mem.close()
            mem = MnemisMemory(path=path, embedder=HashingEmbedder())
        mem.forget(["m0"], namespace="u")
        forked.append(mem.graph("u").to_data())
        mem.close()
    assert forked[0] == forked[1]


def _everything_stored(mem: MnemisMemory, path) -> str:
    g = mem.graph("u")
    held = [f"{n.id} {n.label} {n.summary} {' '.join(n.aliases)} {' '.join(n.keywords)}" for n in g.nodes()]
    held += [f"{e.src} {e.dst} {e.label} {e.properties}" for e in g.edges()]
    held += sorted(mem._states["u"].entities.keys())
    for file in glob.glob(f"{path}*"):
        with open(file, "rb") as f:
            held.append(f.read().decode("utf-8", "replace"))
    return " ".join(held).lower()


def test_an_entity_kept_for_a_merged_spelling_loses_the_name_only_forgotten_messages_said(tmp_path):
    """m0 and m1 say "Priyanka", the others "Priyankka"; rebalance merges the two entities into the
    first, e:priyanka, which keeps "Priyankka" as an alias. Forgetting m0 and m1 left it mentioned (by
    the fragments of the "Priyankka" messages), so it stayed, still labelled "Priyanka" under the id
    e:priyanka and found by that name: the spelling only the forgotten messages said, in the graph,
    the name index and the file (an alias only forgotten messages said already went), and in the
    summary of m11's fragment, written after the merge, which quotes the entity's label though m11
    says "Priyankka" (and in its subtopic's summary, which a search shows). A reopened store held
    the same. Now it is named by the spelling still said, under the id that spelling gives, and the
    summaries quoting it are derived again, live as reopened."""
    path = tmp_path / "m.db"
    mem = MnemisMemory(path=path, embedder=HashingEmbedder())
    names = ["Priyanka" if i < 2 else "Priyankka" for i in range(12)]
    rows = _said([f"Today our lead {n} reviewed vendor contract number {i}." for i, n in enumerate(names)])
    mem.add_messages(rows[:11], "u")
    assert mem.rebalance(namespace="u").entities_merged == (("e:priyanka", "e:priyankka"),)
    mem.add_messages(rows[11:], "u")
    mem.forget(["m0", "m1"], namespace="u")
    assert not re.search(r"\bpriyanka\b", _everything_stored(mem, path))
    entity = mem._states["u"].entities.get("Priyankka")
    assert mem.graph("u").get(entity).label == "Priyankka"
    query = "What did Priyankka review?"
    live = [(h.node_id, h.score, h.via) for h in mem.search(query, namespace="u")]
    reopened = MnemisMemory(path=path, embedder=HashingEmbedder())
    try:
        assert reopened.graph("u").to_data() == mem.graph("u").to_data()
        assert reopened._states["u"].entities.keys() == mem._states["u"].entities.keys()
        assert live == [(h.node_id, h.score, h.via) for h in reopened.search(query, namespace="u")]
        for memory in (mem, reopened):
            assert memory._states["u"].entities.find_in(query) == {entity: 1.0}
    finally:
        reopened.close()
        mem.close()


def test_a_renamed_entity_takes_its_relations_and_their_records_along(tmp_path):
    """The same rename when the entity relates to another: the relation moves to the new id, the
    records of the fragments that read it name the new id (the file holds the old spelling nowhere),
    and forgetting every message that stated it removes it, the entity staying for the message that
    still names it."""
    path = tmp_path / "m.db"
    mem = MnemisMemory(path=path, embedder=HashingEmbedder())
    names = ["Priyanka" if i < 2 else "Priyankka" for i in range(12)]
    said = [f"Our lead {n} called Globex about invoice number {i}." for i, n in enumerate(names)]
    rows = _said([*said, "Priyankka is on leave all next week."])
    mem.add_messages(rows[:11], "u")
    assert ("e:priyanka", "e:priyankka") in mem.rebalance(namespace="u").entities_merged
    mem.add_messages(rows[11:], "u")
    before = [e for e in mem.graph("u").edges() if e.kind.value == "relation"]
    assert [(e.src, e.dst) for e in before] == [("e:priyanka", "e:globex")]
    mem.forget(["m0", "m1"], namespace="u")
    assert not re.search(r"\bpriyanka\b", _everything_stored(mem, path))
    entity = mem._states["u"].entities.get("Priyankka")
    relations = [e for e in mem.graph("u").edges() if e.kind.value == "relation"]
    assert [(e.src, e.dst, e.label) for e in relations] == [(entity, "e:globex", before[0].label)]
    reopened = MnemisMemory(path=path, embedder=HashingEmbedder())
    try:
        assert reopened.graph("u").to_data() == mem.graph("u").to_data()
    finally:
        reopened.close()
    mem.forget([f"m{i}" for i in range(2, 12)], namespace="u")  # m12 still names Priyankka
    assert [e for e in mem.graph("u").edges() if e.kind.value == "relation"] == []
    assert mem._states["u"].entities.get("Priyankka") == entity
    mem.close()


SPELLINGS = [
    ("Priyanka", "Priyankka"),
    ("Katarina", "Katarrina"),
    ("Jonathan", "Jonathon"),
    ("Globex", "Globexx"),
]


def _audit_sequence(
    path, seed: int, steps: int, purge: bool = True, after_forget=None
) -> tuple[MnemisMemory, dict[str, str]]:
    """Replay one sequence of the randomised audit that found the leak below: adds of one to four
    messages naming people and a firm in two spellings each, rebalances and forgets, in the order
    ``seed`` draws them, its first ``steps`` steps; returns the memory and the messages still stored.
    ``after_forget(memory, said)`` is called after each forget."""
    import random

    rnd = random.Random(seed)
    pairs = SPELLINGS
    mem = MnemisMemory(path=path, embedder=HashingEmbedder())
    said: dict[str, str] = {}
    n = 0
    for _ in range(min(rnd.randint(8, 16), steps)):
        op = rnd.random()
        if op < 0.55 or not said:
            rows = []
            for _ in range(rnd.randint(1, 4)):
                a, b = rnd.choice(rnd.choice(pairs)), rnd.choice(rnd.choice(pairs))
                text = f"Our lead {a} is away on day {n}."
                if rnd.random() < 0.6:
                    verb = rnd.choice(["reviewed", "called", "paid", "emailed", "met"])
                    text = f"Today {a} {verb} {b} about contract number {n}."
                speaker = rnd.choice(["ann", "bo"])
                rows.append(
                    {"id": f"m{n}", "speaker": speaker, "text": text, "timestamp": T0 + timedelta(hours=n)}
                )
                said[f"m{n}"] = text
                n += 1
            mem.add_messages(rows, "u")
        elif op < 0.7:
            mem.rebalance(namespace="u")
        else:
            gone = rnd.sample(sorted(said), k=min(len(said), rnd.randint(1, 3)))
            if len(gone) < len(said):
                mem.forget(gone, namespace="u", purge=purge)
                for m in gone:
                    said.pop(m)
                if after_forget is not None:
                    after_forget(mem, said)
    return mem, said


def test_no_old_copy_of_a_node_row_outlives_a_forget_in_the_file(tmp_path):
    """In this sequence the last forget takes the only messages saying "Globexx". The graph held the
    name nowhere after it, but the file did: an earlier version of a fragment's row (label "globexx,
    contract"), left in a page's free space where SQLite's b-tree balancing had moved the row, out of
    reach of ``secure_delete``, which zeroes a row only where it is. Purge now rewrites every page."""
    path = tmp_path / "m.db"
    mem, said = _audit_sequence(path, 98, steps=13)
    try:
        assert not any(re.search(r"\bGlobexx\b", t) for t in said.values())
        assert "globexx" not in _everything_stored(mem, path)
    finally:
        mem.close()


def test_forgets_that_defer_the_purge_erase_the_file_at_the_next_purge(tmp_path):
    """``forget(purge=False)`` takes the messages out of the memory and its rows at once and leaves the
    file's purge (a cost that follows the file) to one ``purge()`` after a batch of forgets."""
    path = tmp_path / "m.db"
    mem, said = _audit_sequence(path, 98, steps=13, purge=False)
    try:
        g = mem.graph("u")
        assert not any("globexx" in f"{n.label} {n.summary} {n.aliases}".lower() for n in g.nodes())
        assert not any(e.src == "e:globexx" or e.dst == "e:globexx" for e in g.edges())
        mem.purge()
        assert "globexx" not in _everything_stored(mem, path)
    finally:
        mem.close()


def test_a_pair_that_loses_its_first_edge_reads_back_in_the_order_the_live_graph_has(tmp_path):
    """Two relations from Priyanka to Jonathon, one to Katarina between them; forgetting the first
    one's message removed it. The live graph kept Jonathon where that first edge had put it, before
    Katarina, while a reopened store places Jonathon where the pair's first stored row is now, the
    second relation's, after Katarina: the same edges in another order (another seed of the audit,
    35, met it in a forget). The pair's other edges are now put back, last in both."""
    path = tmp_path / "m.db"
    mem = MnemisMemory(path=path, embedder=HashingEmbedder())
    mem.add_messages(
        _said(
            [
                "Today Priyanka emailed Jonathon about contract number 1.",
                "Today Priyanka met Katarina about contract number 2.",
                "Today Priyanka paid Jonathon about contract number 3.",
            ]
        ),
        "u",
    )
    relations = [(e.src, e.dst, e.label) for e in mem.graph("u").edges() if e.kind.value == "relation"]
    assert relations[:3] == [
        ("e:priyanka", "e:jonathon", "emailed"),
        ("e:priyanka", "e:jonathon", "paid"),
        ("e:priyanka", "e:katarina", "met"),
    ]
    mem.forget(["m0"], namespace="u")
    reopened = MnemisMemory(path=path, embedder=HashingEmbedder())
    try:
        assert reopened.graph("u").to_data() == mem.graph("u").to_data()
    finally:
        reopened.close()
        mem.close()


@pytest.mark.parametrize("seed", [7, 12, 21, 35, 44, 98])
def test_random_forgets_over_two_spellings_leave_no_name_and_no_fork(tmp_path, seed):
    """Sequences of the same randomised audit (35 met the edge order, 98 the page copy): after every
    forget, no spelling that only forgotten messages said is stored anywhere (graph, name index,
    file), and the same file reopened holds the same graph and names as the live memory."""
    path = tmp_path / "m.db"

    def check(mem: MnemisMemory, said: dict[str, str]) -> None:
        left = " ".join(said.values())
        gone = [s for pair in SPELLINGS for s in pair if not re.search(rf"(?<!\w){s}(?!\w)", left)]
        stored = _everything_stored(mem, path)
        assert [s for s in gone if re.search(rf"\b{s.lower()}\b", stored)] == []
        reopened = MnemisMemory(path=path, embedder=HashingEmbedder())
        try:
            assert reopened.graph("u").to_data() == mem.graph("u").to_data()
            assert reopened._states["u"].entities.keys() == mem._states["u"].entities.keys()
        finally:
            reopened.close()

    mem, _ = _audit_sequence(path, seed, steps=16, after_forget=check)
    mem.close()
