"""Found by a randomised driver run against FalkorDB and SQLite side by side (each random write,
then search on the live memory, on a reopened one, and on the other backend fed the same writes).
FalkorDB answered as SQLite throughout; what it found holds on every backend."""

from __future__ import annotations

from _backends import open_memory

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core import recipes
from mnemis_integrations.core.embedders import HashingEmbedder

T = "2025-03-01T{:02d}:00:00+00:00"


def test_forgetting_a_compacted_message_takes_the_entity_only_it_named(db):
    """An overview took its originals' ``mentions`` edges; forget derived its text again but kept
    those edges, so an entity only the forgotten message named stayed, its name with it."""
    rows = [
        ("m0", "bob", "Alice moved to Berlin and works at Zqbaaix now."),
        ("m1", "alice", "Carol's dog Zqbabix got sick and went to the vet."),
        ("m2", "bob", "Carol's dog Zqbacix got sick and went to the vet."),
        ("m3", "bob", "Server costs for zqbadix went over budget again."),
    ]
    with open_memory(db) as mem:
        mem.add_messages(
            [
                {"id": i, "speaker": s, "text": t, "timestamp": T.format(9 + 3 * n)}
                for n, (i, s, t) in enumerate(rows)
            ],
            namespace="u",
        )
        assert mem.compact(T.format(21), namespace="u").overviews_created == 1
        mem.forget(["m1"], namespace="u")
        for m in (mem, open_memory(db)):
            g = m.graph("u")
            assert not [n.id for n in g.nodes() if "zqbabix" in (n.id + n.label).lower()]
            assert not [e for e in g.edges() if "zqbabix" in e.dst]


def test_forgetting_leaves_no_old_subtopic_label_in_its_summary(db):
    """Forget derives the subtopic's label and summary again, then the archive's summary from
    the new label: the subtopic's summary, made from its children's, still quotes the archive's
    old one, a label made of a forgotten message's word."""
    rows = [
        ("m0", "alice", "Alice moved to Berlin and works at zqbaaix now.", 9),
        ("m1", "bob", "Alice moved to Berlin and works at Zqbabix now.", 12),
        ("m2", "alice", "Alice moved to Berlin and works at Zqbacix now.", 15),
        ("m3", "alice", "The refund for order Zqbadix timed out at the bank.", 18),
    ]
    cfg = recipes.DEFAULT.with_(build={"place_again_until_words": 10_000})
    kw = {"backend": db} if db.startswith("falkordb://") else {"path": db}
    with MnemisMemory(embedder=HashingEmbedder(), config=cfg, **kw) as mem:
        for batch in (rows[:2], rows[2:]):
            mem.add_messages(
                [{"id": i, "speaker": s, "text": t, "timestamp": T.format(h)} for i, s, t, h in batch],
                namespace="u",
            )
        assert mem.compact(T.format(15), namespace="u").overviews_created == 1
        assert "zqbabix" in " ".join(n.summary for n in mem.graph("u").nodes()).lower()
        mem.forget(["m1"], namespace="u")
        shown = [
            n.id
            for n in mem.graph("u").nodes()
            if n.kind.value != "entity" and "zqbabix" in (n.label + n.summary).lower()
        ]
        assert shown == []
