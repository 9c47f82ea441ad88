"""Erased stays erased, also for another object that still holds the namespace.

Before: object ``r`` had namespace ``u1`` loaded when object ``w`` forgot it. ``r``'s next call
raised ``NamespaceNotFoundError`` but every call after that served the erased messages, and
``r``'s next ``add_messages`` wrote the erased text back (7 copies in the file). Path labels were
cached under a version that restarted at 0, so hits showed labels built from forgotten words.
Now a copy whose version differs from the store's drops itself before answering, versions come
from a store-wide sequence that never goes back, and caches live on the copy.
"""

from __future__ import annotations

import os

import pytest
from _backends import open_memory
from _over_time import WEEKS

from mnemis_integrations import MnemisMemory, NamespaceNotFoundError
from mnemis_integrations.core.embedders import HashingEmbedder

SECRET_WORD = "zebra"
SECRET_ID = "m12"  # the WEEKS message that holds "zebra-7731"


def _raw(db: str) -> bytes:
    if db.startswith("falkordb://"):
        return b""
    out = b""
    for suffix in ("", "-wal"):
        if os.path.exists(db + suffix):
            with open(db + suffix, "rb") as f:
                out += f.read()
    return out


def _everything_shown(mem: MnemisMemory, query: str) -> str:
    hits = mem.search(query, k=30, namespace="u1", include_archived=True)
    return " ".join(
        f"{h.text} {h.path_str} {' '.join(h.path)} {h.node_id} {' '.join(h.source_ids)}" for h in hits
    ).lower()


ERASERS = {
    "forget_namespace": lambda w: w.forget(namespace="u1"),
    "forget_every_id": lambda w: w.forget([m["id"] for m in WEEKS], namespace="u1"),
    "delete_namespace": lambda w: w.delete_namespace("u1"),
}


@pytest.mark.parametrize("erase", sorted(ERASERS))
def test_a_stale_object_neither_serves_nor_writes_back_erased_text(db, erase):
    r, w = open_memory(db), open_memory(db)
    w.add_messages(WEEKS, namespace="u1")
    assert SECRET_WORD in _everything_shown(r, "vault code zebra")  # r holds the namespace
    ERASERS[erase](w)
    for _ in range(3):  # not just the first call: every call after the erasure
        with pytest.raises(NamespaceNotFoundError):
            r.search("vault code zebra", namespace="u1")
        with pytest.raises(NamespaceNotFoundError):
            r.messages("u1")
    r.add_messages(
        [{"id": "n1", "speaker": "ann", "text": "a brand new start", "timestamp": "2025-06-01T09:00:00"}],
        namespace="u1",
    )
    with open_memory(db) as fresh:
        assert [m.id for m in fresh.messages("u1")] == ["n1"]
        assert SECRET_WORD not in " ".join(n.label + n.summary for n in fresh.graph("u1").nodes()).lower()
    assert [m.id for m in r.messages("u1")] == ["n1"]
    if erase != "delete_namespace":  # forget also purges the file
        assert SECRET_WORD.encode() not in _raw(db)
    r.close()
    w.close()


def test_a_stale_object_follows_a_namespace_deleted_and_made_again(db):
    r, w = open_memory(db), open_memory(db)
    w.add_messages(WEEKS, namespace="u1")
    assert SECRET_WORD in _everything_shown(r, "vault code zebra")
    w.delete_namespace("u1")
    w.add_messages(WEEKS[:6], namespace="u1")  # made again, without the secret
    shown = _everything_shown(r, "vault code zebra")
    assert SECRET_WORD not in shown and "vault" not in shown
    assert {m.id for m in r.messages("u1")} == {m["id"] for m in WEEKS[:6]}
    r.add_messages(
        [{"id": "n1", "speaker": "ann", "text": "one more", "timestamp": "2025-06-01T09:00:00"}],
        namespace="u1",
    )
    with open_memory(db) as fresh:
        assert {m.id for m in fresh.messages("u1")} == {m["id"] for m in WEEKS[:6]} | {"n1"}
    r.close()
    w.close()


def test_no_hit_path_or_label_shows_a_forgotten_word(db):
    r, w = open_memory(db), open_memory(db)
    w.add_messages(WEEKS, namespace="u1")
    assert SECRET_WORD in _everything_shown(r, "vault code zebra")
    assert SECRET_WORD in _everything_shown(w, "vault code zebra")
    w.forget([SECRET_ID], namespace="u1")
    for mem in (w, r):  # the object that forgot, and another one that had paths cached
        shown = _everything_shown(mem, "vault code zebra server room")
        assert SECRET_WORD not in shown and "7731" not in shown
        g = mem.graph("u1")
        assert not any(SECRET_ID == n.id.rpartition(":")[2] for n in g.nodes()), (
            "an id made from the forgotten id"
        )
        labels = " ".join(f"{n.label} {n.summary} {' '.join(n.keywords)}" for n in g.nodes()).lower()
        assert SECRET_WORD not in labels
    r.close()
    w.close()


def test_one_object_after_delete_and_re_add_shows_no_old_label(tmp_path):
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(WEEKS, namespace="u1")
    assert SECRET_WORD in _everything_shown(mem, "vault code zebra")
    mem.delete_namespace("u1")
    mem.add_messages(WEEKS[:6], namespace="u1")
    assert SECRET_WORD not in _everything_shown(mem, "vault code zebra")


def test_a_retried_forget_finishes_the_purge(tmp_path, monkeypatch):
    """Killed between forget's commit and the file purge, a retry used to report ``not_found``
    and never purge; now every forget purges, also when there is nothing left to remove."""
    path = tmp_path / "m.db"
    mem = MnemisMemory(path, embedder=HashingEmbedder())
    mem.add_messages(WEEKS, namespace="u1")
    calls = []
    monkeypatch.setattr(mem._store, "purge", lambda: calls.append("skipped"))  # the crash: no purge
    mem.forget([SECRET_ID], namespace="u1")
    assert SECRET_WORD.encode() in _raw(str(path))  # older copies of the pages still hold it
    monkeypatch.undo()
    rep = mem.forget([SECRET_ID], namespace="u1")  # the retry
    assert calls == ["skipped"] and rep.forgotten == 0 and rep.not_found == (SECRET_ID,)
    assert SECRET_WORD.encode() not in _raw(str(path))
    mem.forget(namespace="gone")  # a namespace that is not there: still purges, no error
    mem.close()
