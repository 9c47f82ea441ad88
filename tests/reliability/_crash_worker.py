"""Worker for the crash and multi-process tests (run as a script, never imported by pytest).

Usage: python _crash_worker.py DB NAMESPACE FIRST_BATCH BATCH_SIZE MAX_BATCHES SEED [PAUSE_AFTER]

DB is a SQLite path, or a ``falkordb://host:port`` URL for the FalkorDB backend.

Prints ``ready`` once the store is open, then ingests batches FIRST_BATCH,
FIRST_BATCH+1, ... and prints ``ack <batch>`` (flushed) after each
``add_messages`` returns. Stops after MAX_BATCHES batches (0: never, wait to be killed).
With PAUSE_AFTER, waits for a line on stdin after acknowledging that batch, so a reader in
another process is sure to look while some batches are written and others are not.
Batch contents depend only on (SEED, batch), so a resent batch is identical.
"""

from __future__ import annotations

import random
import sys

WORDS = [
    "refund",
    "invoice",
    "shipping",
    "parcel",
    "courier",
    "timeout",
    "lunch",
    "budget",
    "Alice",
    "Bob",
    "Paris",
    "Berlin",
    "meeting",
    "deadline",
    "laptop",
    "battery",
    "garden",
    "tomato",
    "piano",
    "lesson",
    "doctor",
    "appointment",
]


def batch_ids(batch: int, size: int) -> list[str]:
    return [f"b{batch}-m{i}" for i in range(size)]


def batch_messages(seed: int, batch: int, size: int) -> list[dict]:
    rng = random.Random(seed * 1_000_003 + batch)
    return [
        {
            "id": mid,
            "speaker": rng.choice(["Alice", "Bob"]),
            "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) + f" marker{batch}x{i}",
            "timestamp": f"2025-01-{1 + batch % 28:02d}T{i % 24:02d}:00:00",
        }
        for i, mid in enumerate(batch_ids(batch, size))
    ]


def _open(db: str, memory_cls, embedder):
    if db.startswith("falkordb://"):
        return memory_cls(backend=db, embedder=embedder)
    return memory_cls(path=db, embedder=embedder)


def main() -> None:
    db, namespace, first, size, max_batches, seed = sys.argv[1:7]
    first, size, max_batches, seed = int(first), int(size), int(max_batches), int(seed)
    pause_after = int(sys.argv[7]) if len(sys.argv) > 7 else None
    from mnemis_integrations import MnemisMemory
    from mnemis_integrations.core.embedders import HashingEmbedder

    mem = _open(db, MnemisMemory, HashingEmbedder())
    print("ready", flush=True)
    batch = first
    while max_batches == 0 or batch < first + max_batches:
        mem.add_messages(batch_messages(seed, batch, size), namespace=namespace)
        print(f"ack {batch}", flush=True)
        if batch == pause_after:
            sys.stdin.readline()
        batch += 1
    mem.close()


if __name__ == "__main__":
    main()


# ---------------------------------------------------------------------- harness (parent side)
def check_store(db: str, namespace: str, acked: set[int], attempted_max: int, size: int) -> dict:
    """Reopen the store and check the crash-safety invariants; return figures, raise AssertionError
    on a breach."""
    import sqlite3

    from mnemis_integrations import MnemisMemory, NamespaceNotFoundError
    from mnemis_integrations.core.embedders import HashingEmbedder

    if not db.startswith("falkordb://"):
        con = sqlite3.connect(db)
        try:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            con.close()
    with _open(db, MnemisMemory, HashingEmbedder()) as mem:
        try:
            stored = {m.id: m for m in mem.messages(namespace)}
        except NamespaceNotFoundError:
            stored = {}
        lost = [mid for b in acked for mid in batch_ids(b, size) if mid not in stored]
        assert not lost, f"acknowledged messages lost: {lost[:5]} ({len(lost)} in all)"
        for b in range(attempted_max + 1):
            present = sum(mid in stored for mid in batch_ids(b, size))
            assert present in (0, size), f"batch {b} is half-written: {present}/{size} messages stored"
        extra = [mid for mid in stored if int(mid[1:].split("-")[0]) > attempted_max]
        assert not extra, f"messages of never-sent batches: {extra[:5]}"
        seqs = [m.seq for m in stored.values()]
        assert len(seqs) == len(set(seqs)), "duplicate seq numbers after recovery"
        if stored:
            fragment_sources = {
                s
                for n in mem.graph(namespace).to_data().get("nodes", [])
                for s in (n.get("source_ids") or ())
            }
            hits = mem.search("refund invoice marker", k=5, namespace=namespace)
            assert hits, "a non-empty store returned no hits"
            for h in hits:
                assert set(h.source_ids) <= set(stored), f"hit {h.node_id} cites unknown messages"
            assert fragment_sources <= set(stored), "the graph cites messages that are not stored"
        return {"stored": len(stored), "lost": len(lost)}


def run_crash_cycles(
    db: str, cycles: int, *, seed: int = 0, size: int = 20, max_delay_s: float = 0.4, namespace: str = "crash"
) -> dict:
    """SIGKILL a worker ``cycles`` times at random moments; check the store after each kill.

    The next worker resends the first unacknowledged batch (as a client would
    retry), so a batch committed just before the kill must be skipped, not duplicated.
    """
    import os
    import signal
    import subprocess
    import time

    rng = random.Random(seed)
    here = os.path.abspath(__file__)
    acked: set[int] = set()
    next_batch = 0
    attempted_max = -1
    figures = {"cycles": 0, "acked_batches": 0, "lost": 0, "stored": 0}
    for cycle in range(cycles):
        proc = subprocess.Popen(
            [sys.executable, here, db, namespace, str(next_batch), str(size), "0", str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = proc.stdout.readline()
            assert first.strip() == "ready", f"worker failed to start: {first!r} {proc.stderr.read()[-2000:]}"
            early = ""
            if cycle % 2:
                # Every other cycle waits for one acknowledged batch first, so a loaded machine (where
                # random delays may all fall before the first commit) still exercises acked data.
                early = proc.stdout.readline()
            time.sleep(rng.uniform(0.0, max_delay_s))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            out = early + proc.stdout.read()
            err = proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL, (
            f"worker exited by itself ({proc.returncode}): {err[-2000:]}"
        )
        new = [int(line.split()[1]) for line in out.splitlines() if line.startswith("ack ")]
        acked.update(new)
        # The worker was killed while working on the batch after its last ack (or on the first one).
        attempted_max = max(attempted_max, (max(new) + 1) if new else next_batch)
        next_batch = (max(new) + 1) if new else next_batch
        figures["cycles"] += 1
        figures.update(check_store(db, namespace, acked, attempted_max, size))
    figures["acked_batches"] = len(acked)
    return figures
