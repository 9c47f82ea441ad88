"""Behaviour that README.md and SECURITY.md state about the public API, checked as stated."""

from __future__ import annotations

import sqlite3

import pytest

from mnemis_integrations import DuplicateMessageError, MnemisMemory, StoreError
from mnemis_integrations.core.embedders import HashingEmbedder


def test_duplicate_of_a_stored_message_carries_its_index_in_the_batch():
    # SECURITY.md: "The error carries the offending id and index."
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages([{"id": "m1", "speaker": "ann", "text": "The refund is late."}], namespace="u1")
    batch = [
        {"id": "m2", "speaker": "ann", "text": "Lunch on Friday."},
        {"id": "m2", "speaker": "ann", "text": "Lunch on Friday."},  # a re-delivery, dropped
        {"id": "m1", "speaker": "ann", "text": "Something else."},
    ]
    with pytest.raises(DuplicateMessageError) as e:
        mem.add_messages(batch, namespace="u1")
    assert (e.value.message_id, e.value.index) == ("m1", 2)


def test_a_damaged_row_in_a_sqlite_file_raises_store_error(tmp_path):
    # SECURITY.md: "a locked or damaged SQLite file all raise a MnemisError subclass". SQLite
    # checks no checksum on a row's content: a byte changed inside one reads back as it is.
    path = tmp_path / "mem.db"
    with MnemisMemory(path=path, embedder=HashingEmbedder()) as mem:
        mem.add_messages([{"id": "m1", "speaker": "ann", "text": "The refund is late."}], namespace="u1")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE nodes SET data = substr(data, 2)")
    with MnemisMemory(path=path, embedder=HashingEmbedder()) as mem, pytest.raises(StoreError):
        mem.search("refund", namespace="u1")
