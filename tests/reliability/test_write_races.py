"""Maintenance racing a writer on one namespace loses no acknowledged message, on SQLite and FalkorDB.

Before: ``forget``, ``compact``, ``uncompact``, ``rebalance`` and every ``edit()`` wrote the
namespace whole without checking its version, so a batch another writer had acknowledged in
between was overwritten (44 of 48 messages lost in one run; ``forget`` once left the namespace
empty). Now every write is a delta conditional on the version its copy was read at; a refused
maintenance write is run again on fresh state.

Each operation is tested twice: a deterministic interleaving (the other writer's batch lands
between the operation's read and its write, so its first write must be refused), and a timed
race against a writer process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import _crash_worker as worker
import pytest
from _backends import open_memory

from mnemis_integrations.core.model import NodeKind

WORKER = str(Path(worker.__file__).resolve())
NS = "race"


def _own_messages(n: int) -> list[dict]:
    return [
        {
            "id": f"p{i}",
            "speaker": "Alice" if i % 2 else "Bob",
            "timestamp": f"2025-01-{1 + i:02d}T09:00:00",
            "text": f"the garden budget for tomato beds, note {i}; laptop battery {i} looked fine",
        }
        for i in range(n)
    ]


OPERATIONS = {
    "forget": lambda mem, i: mem.forget([f"p{i}"], namespace=NS),
    "compact": lambda mem, i: mem.compact(before="2030-01-01", namespace=NS),
    "uncompact": lambda mem, i: (mem.compact(before="2030-01-01", namespace=NS), mem.uncompact(namespace=NS)),
    "rebalance": lambda mem, i: mem.rebalance(namespace=NS, max_span_days=0.5),
    "apply": lambda mem, i: mem.apply(
        lambda g: [setattr(c, "label", f"Renamed {i}") for c in g.nodes(NodeKind.CONCEPT)], namespace=NS
    ),
}


def _check_nothing_lost(db: str, expected: set[str], forgotten: set[str]) -> None:
    with open_memory(db) as mem:
        stored = {m.id for m in mem.messages(NS)}
        cited = {m for f in mem.graph(NS).nodes(NodeKind.FRAGMENT) for m in f.source_ids}
    assert expected - stored == set(), "acknowledged messages lost"
    assert stored - cited == set(), "stored messages no fragment cites"
    assert stored & forgotten == set() and cited & forgotten == set()


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_batch_landing_between_an_operations_read_and_write_is_kept(db, operation):
    a, b = open_memory(db), open_memory(db)
    a.add_messages(_own_messages(8), namespace=NS)
    a.search("garden budget", namespace=NS)  # a's copy is loaded
    store = a._store
    real_write, calls = store.write, []

    def write_after_the_other_writer(*args, **kwargs):
        if not calls:  # the other writer gets in first, once
            b.add_messages(worker.batch_messages(5, 1, 2), namespace=NS)
        calls.append(args[2])
        return real_write(*args, **kwargs)

    store.write = write_after_the_other_writer
    OPERATIONS[operation](a, 3)
    store.write = real_write
    assert len(calls) >= 2 and calls[1] > calls[0]  # refused once, then done again on the fresh version
    expected = {m["id"] for m in _own_messages(8)} | set(worker.batch_ids(1, 2))
    forgotten = {"p3"} if operation == "forget" else set()
    a.close()
    b.close()
    _check_nothing_lost(db, expected - forgotten, forgotten)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_writer_process_racing_an_operation_loses_nothing(db, operation):
    mem = open_memory(db)
    mem.add_messages(_own_messages(8), namespace=NS)
    n_batches = 8
    proc = subprocess.Popen(
        [sys.executable, WORKER, db, NS, "0", "2", str(n_batches), "11"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    done, forgotten = 0, set()
    while proc.poll() is None and done < 40:
        OPERATIONS[operation](mem, done % 8)
        if operation == "forget":
            forgotten.add(f"p{done % 8}")
        done += 1
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    acked = {int(line.split()[1]) for line in out.splitlines() if line.startswith("ack")}
    assert acked == set(range(n_batches)) and done > 0
    mem.close()
    expected = {m for b in acked for m in worker.batch_ids(b, 2)} | (
        {m["id"] for m in _own_messages(8)} - forgotten
    )
    _check_nothing_lost(db, expected, forgotten)
