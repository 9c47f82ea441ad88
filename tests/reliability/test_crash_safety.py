"""Crash safety of the SQLite store: SIGKILL mid-``add_messages``, reopen, check.

Invariants after every kill: the store opens and passes ``PRAGMA integrity_check``;
every acknowledged message is present; every batch is all-or-nothing; resending the
unacknowledged batch is skipped or applied, never duplicated. The longer run is
``python benchmarks/crash_soak.py --cycles N``.
"""

from __future__ import annotations

import signal
import sqlite3
import sys

import _crash_worker as worker
import pytest

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")

CI_CYCLES = 15


@pytest.mark.slow  # 15 cycles of a child process killed mid-write: ~14 s; CI runs it (`-m slow`)
def test_sigkill_mid_ingest_loses_no_acknowledged_message_and_no_batch_is_torn(tmp_path):
    figures = worker.run_crash_cycles(
        str(tmp_path / "crash.db"), CI_CYCLES, seed=7, size=10, max_delay_s=0.25
    )
    print(f"\ncrash-safety figures: {figures}", file=sys.stderr)
    assert figures["cycles"] == CI_CYCLES
    assert figures["lost"] == 0
    assert figures["acked_batches"] > 0, (
        "no batch was acknowledged: the kill delays are too short to test anything"
    )


def test_resending_a_committed_batch_is_skipped_not_duplicated(tmp_path):
    db = str(tmp_path / "r.db")
    batch = worker.batch_messages(1, 0, 5)
    with MnemisMemory(path=db, embedder=HashingEmbedder()) as mem:
        mem.add_messages(batch, namespace="crash")
    with MnemisMemory(path=db, embedder=HashingEmbedder()) as mem:
        report = mem.add_messages(batch, namespace="crash")
        assert (report.added, report.skipped) == (0, 5)
        assert [m.id for m in mem.messages("crash")] == [m["id"] for m in batch]


def test_crash_between_first_commit_and_meta_write_recovers(tmp_path):
    """Before: a kill after the first ``save`` committed but before ``set_meta('dim')`` ran left
    rows without ``dim``; on reopen ``messages()`` raised NamespaceNotFoundError and resending the batch
    raised a raw ``sqlite3.IntegrityError``. After (expected): the resend is skipped and all messages show."""
    db = str(tmp_path / "m.db")
    batch = worker.batch_messages(2, 0, 4)
    with MnemisMemory(path=db, embedder=HashingEmbedder()) as mem:
        mem.add_messages(batch, namespace="crash")
    con = sqlite3.connect(db)  # the on-disk state of a kill in that window
    con.execute("DELETE FROM meta WHERE key IN ('dim', 'embedder_id')")
    con.commit()
    con.close()
    with MnemisMemory(path=db, embedder=HashingEmbedder()) as mem:
        mem.add_messages(batch, namespace="crash")
        assert [m.id for m in mem.messages("crash")] == [m["id"] for m in batch]
