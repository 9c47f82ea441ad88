"""Interleavings of readers and writers forced at a chosen point, on one store.

Each test pauses one call where another writer can get in (as a second process would), and
checks that the first call still answers from one consistent state.
"""

from __future__ import annotations

import pytest
from _backends import open_memory

from mnemis_integrations.core import engine
from mnemis_integrations.core.model import NodeKind

NS = "guard"
QUERY = "refund order bank"
TEXTS = [
    "The refund for order 42 timed out at the bank.",
    "The bank says the refund for order 42 needs a new card.",
    "Refund 42 bank retry failed again today.",
    "Let's get lunch on Friday at the noodle place.",
    "Lunch Friday noodle place at noon?",
    "Garden tomato beds before spring.",
    "Tomato beds need compost in the garden.",
]
MESSAGES = [
    {"id": f"m{i}", "speaker": "ann", "timestamp": f"2025-01-01T09:0{i}:00", "text": t}
    for i, t in enumerate(TEXTS)
]


def test_a_budgeted_search_answers_from_the_state_it_ranked_while_another_writer_forgets(db, monkeypatch):
    a, b = open_memory(db), open_memory(db)
    a.add_messages(MESSAGES, namespace=NS)
    top = a.search(QUERY, k=4, namespace=NS)[0]
    ranked_on = {m.id for m in a.messages(NS)}
    real_fit = engine.fit_to_budget

    def forget_in_between(*args, **kwargs):  # another writer gets in after ranking, before the budget
        b.forget(list(top.source_ids), namespace=NS)
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(engine, "fit_to_budget", forget_in_between)
    hits = a.search(QUERY, k=4, namespace=NS, max_tokens=60)
    assert hits and all(set(h.source_ids) <= ranked_on for h in hits)
    a.close()
    b.close()


def test_hits_fitted_to_a_budget_after_another_writer_forgot_their_fragment(db):
    a, b = open_memory(db), open_memory(db)
    a.add_messages(MESSAGES, namespace=NS)
    hits = a.search(QUERY, k=4, namespace=NS)
    gone = set(hits[0].source_ids)
    b.forget(sorted(gone), namespace=NS)  # between a's search and its fit_to_budget
    fitted = a.fit_to_budget(hits, 60, query=QUERY)
    assert fitted and all(not set(h.source_ids) & gone for h in fitted)
    a.close()
    b.close()


def test_a_graph_read_before_a_failed_change_does_not_show_it(db):
    mem = open_memory(db)
    mem.add_messages(MESSAGES, namespace=NS)
    read = mem.graph(NS)  # a reader's copy, e.g. the LlamaIndex graph store's, iterated outside the lock
    concept = read.nodes(NodeKind.CONCEPT)[0]
    before = concept.label

    def half_then_fail(g):
        g.get(concept.id).label = "half-applied"
        raise RuntimeError("the change fails after its first step")

    with pytest.raises(RuntimeError):
        mem.apply(half_then_fail, namespace=NS)
    assert mem.graph(NS).get(concept.id).label == before  # nothing was written
    assert read.get(concept.id).label == before
    mem.close()


def test_a_write_refused_because_another_writer_forgot_the_namespace_leaves_nothing_behind(db):
    a, b = open_memory(db), open_memory(db)
    a.add_messages(MESSAGES, namespace=NS)
    a.search(QUERY, namespace=NS)  # a's copy is loaded
    real_write, calls = a._store.write, []

    def forget_first(*args, **kwargs):  # the other writer erases the namespace between a's read and write
        if not calls:
            b.forget(namespace=NS)
        calls.append(args[2])
        return real_write(*args, **kwargs)

    a._store.write = forget_first
    a.add_messages([{"id": "n1", "speaker": "ann", "text": "a brand new start"}], namespace=NS)
    a._store.write = real_write
    assert len(calls) == 2  # refused once, then written on the fresh (empty) namespace
    with open_memory(db) as fresh:
        assert [m.id for m in fresh.messages(NS)] == ["n1"]
    b.forget(namespace=NS)
    assert NS not in a.namespaces() and NS not in b.namespaces()
    a.close()
    b.close()
