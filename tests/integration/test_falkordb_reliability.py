"""The reliability checks that matter most for a shared graph database, run on the FalkorDB backend:
tenant isolation between namespaces (graphs) and Cypher-injection-shaped input stored as plain data.

The embedded-store versions live in tests/reliability; these reuse their data and markers.
"""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_falkordb_store import falkordb, store, url  # noqa: F401  (fixtures, and the import skip)
from test_hostile_input import INJECTIONS
from test_isolation import NAMESPACES, WORDS, _marker

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder

pytestmark = [pytest.mark.falkordb, pytest.mark.enable_socket]

RAN = {"isolation": 0, "injection": 0}


def test_search_messages_and_graph_never_cross_namespaces_on_falkordb(url, store):  # noqa: F811
    violations = 0

    @settings(max_examples=15, deadline=None)
    @given(
        rows=st.lists(
            st.tuples(st.sampled_from(NAMESPACES), st.lists(st.sampled_from(WORDS), min_size=1, max_size=8)),
            min_size=3,
            max_size=12,
        ),
        query_words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    )
    def prop(rows, query_words):
        nonlocal violations
        RAN["isolation"] += 1
        mem = MnemisMemory(embedder=HashingEmbedder(), backend=url)
        for ns in NAMESPACES:
            mem.delete_namespace(ns)
        owned: dict[str, set[str]] = {ns: set() for ns in NAMESPACES}
        for i, (ns, words) in enumerate(rows):
            mid = f"{ns}/{i}"
            mem.add_messages(
                [{"id": mid, "speaker": "u", "text": " ".join(words) + " " + _marker(ns)}], namespace=ns
            )
            owned[ns].add(mid)
        for ns in NAMESPACES:
            if not owned[ns]:
                continue
            foreign_ids = set().union(*(owned[o] for o in NAMESPACES if o != ns))
            foreign_marks = [_marker(o) for o in NAMESPACES if o != ns]
            query = " ".join(query_words) + " " + " ".join(foreign_marks)
            for h in mem.search(query, k=10, namespace=ns):
                violations += h.namespace != ns
                violations += bool(set(h.source_ids) & foreign_ids)
                violations += any(m in h.text for m in foreign_marks)
            msgs = mem.messages(ns)
            assert {m.id for m in msgs} == owned[ns]
            graph = repr(mem.graph(ns).to_data())
            violations += sum(f in graph for f in foreign_marks)

    prop()
    print(f"\nfalkordb isolation: {RAN['isolation']} examples, {violations} violations", file=sys.stderr)
    assert violations == 0


def test_cypher_injection_shaped_input_is_stored_verbatim_on_falkordb(url, store):  # noqa: F811
    mem = MnemisMemory(embedder=HashingEmbedder(), backend=url)
    mem.delete_namespace("inj")
    mem.delete_namespace("bystander")
    mem.add_messages(
        [{"id": "keep", "speaker": "Alice", "text": "the bystander tenant keeps this"}], namespace="bystander"
    )
    for i, inj in enumerate(INJECTIONS):
        RAN["injection"] += 1
        mem.add_messages(
            [{"id": f"i{i}", "speaker": inj[:256], "text": f"{inj} met Robert Tables"}], namespace="inj"
        )
        for q in (inj, "Robert Tables"):
            mem.search(q, k=3, namespace="inj")
    reopened = MnemisMemory(embedder=HashingEmbedder(), backend=url)
    stored = {m.id: m for m in reopened.messages("inj")}
    assert [stored[f"i{i}"].text for i in range(len(INJECTIONS))] == [
        f"{inj} met Robert Tables" for inj in INJECTIONS
    ]
    assert [m.id for m in reopened.messages("bystander")] == ["keep"]
    print(f"\nfalkordb injection: {RAN['injection']} strings stored verbatim", file=sys.stderr)


def test_sigkill_mid_ingest_on_falkordb_loses_no_acknowledged_message(url, store):  # noqa: F811
    """The crash harness of tests/reliability, pointed at FalkorDB: each save is one Cypher query."""
    import _crash_worker as worker

    MnemisMemory(embedder=HashingEmbedder(), backend=url).delete_namespace("crash-fdb")
    figures = worker.run_crash_cycles(url, 8, seed=11, size=10, max_delay_s=0.25, namespace="crash-fdb")
    print(f"\nfalkordb crash-safety figures: {figures}", file=sys.stderr)
    assert figures["cycles"] == 8
    assert figures["lost"] == 0
    assert figures["acked_batches"] > 0


def test_two_writer_processes_on_one_namespace_lose_nothing_on_falkordb(url, store):  # noqa: F811
    import subprocess

    import _crash_worker as worker

    n_batches, size = 5, 4
    procs = [
        subprocess.Popen(
            [sys.executable, worker.__file__, url, "race-fdb", str(first), str(size), str(n_batches), "17"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for first in (0, 100)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    acked = [int(line.split()[1]) for out, _ in outs for line in out.splitlines() if line.startswith("ack ")]
    mem = MnemisMemory(embedder=HashingEmbedder(), backend=url)
    msgs = mem.messages("race-fdb")
    cited = {s for n in mem.graph("race-fdb").to_data()["nodes"] for s in n["source_ids"]}
    assert {m.id for m in msgs} == {mid for b in acked for mid in worker.batch_ids(b, size)}
    assert len(msgs) == 2 * n_batches * size and {m.id for m in msgs} <= cited
    assert len({m.seq for m in msgs}) == len(msgs)
