"""Readers and writers at once: threads on one MnemisMemory, and two processes on one SQLite file
(two objects on one store also on FalkorDB).

Guaranteed: no exceptions, no torn results (every hit cites stored messages), every
acknowledged write visible to other objects and processes at their next call (the store's
per-namespace write counter makes them reload), and writers that race on one namespace
lose nothing: a write from a stale copy is refused inside its transaction and rebuilt.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import _crash_worker as worker
from _backends import open_memory

from mnemis_integrations import MnemisMemory, NamespaceNotFoundError
from mnemis_integrations.core.embedders import HashingEmbedder

WORKER = str(Path(worker.__file__).resolve())


def test_threads_search_while_one_thread_ingests_same_object(tmp_path):
    mem = MnemisMemory(path=tmp_path / "t.db", embedder=HashingEmbedder())
    mem.add_messages(worker.batch_messages(3, 0, 5), namespace="ns")
    errors: list[BaseException] = []
    torn: list[str] = []
    searches = [0]
    done = threading.Event()

    def writer():
        try:
            for b in range(1, 9):
                mem.add_messages(worker.batch_messages(3, b, 5), namespace="ns")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            done.set()

    def reader():
        try:
            while not done.is_set():
                hits = mem.search("refund courier marker", k=5, namespace="ns")
                known = {m.id for m in mem.messages("ns")}  # messages only grow: a later read is a superset
                torn.extend(h.node_id for h in hits if not set(h.source_ids) <= known)
                searches[0] += 1
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert not torn
    assert searches[0] > 0
    assert len(mem.messages("ns")) == 45
    mem.close()


def test_reader_process_sees_consistent_snapshots_and_all_acked_writes_after_reopen(tmp_path):
    db = str(tmp_path / "p.db")
    n_batches, size, pause_after = 8, 5, 3
    proc = subprocess.Popen(
        [sys.executable, WORKER, db, "ns", "0", str(size), str(n_batches), "11", str(pause_after)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reads = torn = 0
    batches_seen: list[int] = []

    def read_snapshot() -> None:
        nonlocal reads, torn
        with MnemisMemory(path=db, embedder=HashingEmbedder()) as reader:
            try:
                # Each call reads the namespace as committed at that moment (a later one may see
                # more batches): hits first, so every message they cite must be among the messages.
                hits = reader.search("refund invoice marker", k=5, namespace="ns")
                known = {m.id for m in reader.messages("ns")}
            except NamespaceNotFoundError:
                return  # nothing committed yet
        torn += sum(not set(h.source_ids) <= known for h in hits)
        present = [sum(mid in known for mid in worker.batch_ids(b, size)) for b in range(n_batches)]
        assert all(p in (0, size) for p in present), present  # a reader never sees half a batch
        batches_seen.append(sum(p == size for p in present))
        reads += 1

    try:
        assert proc.stdout.readline().strip() == "ready"
        acked = []
        for line in proc.stdout:  # the writer waits after acknowledging batch `pause_after`
            acked.append(int(line.split()[1]))
            if acked[-1] == pause_after:
                read_snapshot()  # some batches written, others not yet
                proc.stdin.write("\n")
                proc.stdin.flush()
                break
        while proc.poll() is None:
            read_snapshot()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    acked += [int(line.split()[1]) for line in out.splitlines() if line.startswith("ack ")]
    assert acked == list(range(n_batches))
    assert torn == 0
    # the paused snapshot holds exactly the batches acknowledged by then
    assert batches_seen and batches_seen[0] == pause_after + 1
    with MnemisMemory(path=db, embedder=HashingEmbedder()) as reopened:
        ids = {m.id for m in reopened.messages("ns")}
    assert ids == {mid for b in acked for mid in worker.batch_ids(b, size)}
    print(f"\nconcurrency: {reads} consistent reader snapshots while writing", file=sys.stderr)


def test_a_reader_object_sees_another_objects_writes_without_reopening(db):
    """Two memories on one store stand in for two processes: each keeps its own in-process copy,
    and a write by one makes the other reload before its next read."""
    reader = open_memory(db)  # opened on an empty store
    writer = open_memory(db)
    first = worker.batch_messages(4, 0, 3)
    writer.add_messages(first, namespace="ns")
    assert [m.id for m in reader.messages("ns")] == [m["id"] for m in first]
    writer.add_messages(worker.batch_messages(4, 1, 3), namespace="ns")
    last = worker.batch_messages(4, 1, 3)[-1]
    hits = reader.search(last["text"], k=3, namespace="ns")  # searched before messages() reloads
    assert any(last["id"] in h.source_ids for h in hits)
    assert len(reader.messages("ns")) == 6  # the store's write counter moved: the reader reloaded
    reader.close()
    writer.close()


def test_two_writer_objects_on_one_file_lose_no_update(tmp_path):
    """Writer B, holding a copy from before A's batch, used to overwrite the namespace's graph, so A's
    message stayed in ``messages()`` but no fragment cited it. Now each write checks the namespace's
    version: every stored message is cited by the graph of a reopened store, and seq numbers are unique."""
    db = tmp_path / "w.db"
    a = MnemisMemory(path=db, embedder=HashingEmbedder())
    b = MnemisMemory(path=db, embedder=HashingEmbedder())
    b.add_messages([{"id": "b0", "speaker": "Bob", "text": "bob likes tomato gardens"}], namespace="ns")
    a.add_messages([{"id": "a1", "speaker": "Alice", "text": "alice zebracode piano lesson"}], namespace="ns")
    b.add_messages([{"id": "b2", "speaker": "Bob", "text": "bob courier parcel refund"}], namespace="ns")
    a.close()
    b.close()
    with MnemisMemory(path=db, embedder=HashingEmbedder()) as mem:
        msgs = mem.messages("ns")
        cited = {s for n in mem.graph("ns").to_data()["nodes"] for s in n["source_ids"]}
    assert {m.id for m in msgs} <= cited
    assert len({m.seq for m in msgs}) == len(msgs)


def test_two_writer_processes_on_one_namespace_lose_nothing(tmp_path):
    db = str(tmp_path / "race.db")
    n_batches, size = 6, 4
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, db, "ns", str(first), str(size), str(n_batches), "13"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for first in (0, 100)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    acked = [int(line.split()[1]) for out, _ in outs for line in out.splitlines() if line.startswith("ack ")]
    assert sorted(acked) == list(range(n_batches)) + list(range(100, 100 + n_batches))
    with MnemisMemory(path=db, embedder=HashingEmbedder()) as mem:
        msgs = mem.messages("ns")
        cited = {s for n in mem.graph("ns").to_data()["nodes"] for s in n["source_ids"]}
    assert {m.id for m in msgs} == {mid for b in acked for mid in worker.batch_ids(b, size)}
    assert {m.id for m in msgs} <= cited  # both writers' messages are in the graph, so searchable
    assert len({m.seq for m in msgs}) == len(msgs)


def test_a_long_call_in_one_namespace_does_not_block_another_namespace(tmp_path):
    """Before: one lock per memory object, so a search in namespace B waited 5.2 s behind a
    10k-character query in namespace A. Now each namespace has its own lock."""
    from mnemis_integrations.core.builder.pipeline import OfflineBuilder

    entered, release = threading.Event(), threading.Event()

    class SlowInA(OfflineBuilder):
        def ingest(self, st, new, vectors):
            if st.namespace == "a":
                entered.set()
                assert release.wait(30), "never released"
            return super().ingest(st, new, vectors)

    mem = MnemisMemory(path=tmp_path / "l.db", embedder=HashingEmbedder())
    mem.builder = SlowInA(mem.config.build, mem.profile)
    mem.add_messages(worker.batch_messages(1, 0, 5), namespace="b")
    writer = threading.Thread(target=mem.add_messages, args=(worker.batch_messages(1, 1, 5), "a"))
    writer.start()
    assert entered.wait(30)
    try:
        hits = mem.search("refund courier", k=3, namespace="b")  # would hang here with one lock
        assert hits and writer.is_alive()  # answered while namespace a was still busy
    finally:
        release.set()
        writer.join(30)
    assert len(mem.messages("a")) == 5
    mem.close()
