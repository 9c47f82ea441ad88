"""Relation status: the cost of telling whether a relation's fact still holds as a namespace grows.

    python benchmarks/relation_status.py [--sizes 1000,10000,50000] [--calls 200] [--seed 0]

``MnemisPropertyGraphStore.get_triplets`` says of each relation read from messages whether every
fragment it was read from has been superseded (``relation_sources.read_status``). Per size N, one
graph of N fragments of two messages each, every message read for one of N / 4 relations between
N / 2 entities (a relation read from eight messages on average), a tenth of the fragments
superseded, and a fifth of the relations listing their messages as stores written before records
did. Each call asks for the relations of one entity, as a triplet lookup by name does. Printed: ms
per call for the graph's index (``read_status``; the index is made on the first call, timed apart)
and for a scan of every fragment (the lookup as it was before the index: ``read_status`` given
every fragment), their ratio, and the growth from the smallest N to the largest. Both must give the
same answer on every call (checked).
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import datetime, timedelta, timezone

from mnemis_integrations.core.builder.relation_sources import (
    READ_COUNTS,
    READ_FROM,
    RELATIONS_READ,
    read_status,
)
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.maintenance.supersede import supersede
from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def scan_status(graph: MemoryGraph, edges: list[Edge]) -> dict:
    """The status lookup before the graph filed fragments by their records: every fragment read per call."""
    return read_status(graph, edges, graph.nodes(NodeKind.FRAGMENT))


def build(n: int, rng: random.Random) -> MemoryGraph:
    g = MemoryGraph("bench")
    n_entities, n_relations = max(2, n // 2), max(1, n // 4)
    for i in range(n_entities):
        g.add_node(Node(f"e{i}", NodeKind.ENTITY, f"name {i}", "bench"))
    relations = []
    for r in range(n_relations):
        src, dst = rng.sample(range(n_entities), 2)
        relations.append((f"e{src}", f"e{dst}", f"said_{r % 50}", f"t{r:08x}"))
    reads: dict[int, list[str]] = {}  # relation -> the messages read for it
    for f in range(n):
        mids = [f"m{2 * f}", f"m{2 * f + 1}"]
        records = {}
        for mid in mids:
            r = rng.randrange(n_relations)
            records[mid] = [[*relations[r][:3], relations[r][3]]]
            reads.setdefault(r, []).append(mid)
        when = T0 + timedelta(minutes=f)
        g.add_node(
            Node(
                f"f{f}",
                NodeKind.FRAGMENT,
                f"fragment {f}",
                "bench",
                source_ids=mids,
                created_at=when,
                properties={RELATIONS_READ: records},
            )
        )
    for f in rng.sample(range(1, n), n // 10):  # a tenth superseded by the fragment after them
        supersede(g, old_id=f"f{f - 1}", new_id=f"f{f}", when=T0 + timedelta(minutes=f))
    for r, (src, dst, label, token) in enumerate(relations):
        mids = reads.get(r, [])
        if not mids:
            continue
        legacy = rng.random() < 0.2  # a store written before records listed the messages instead
        props = {READ_FROM: mids} if legacy else {READ_COUNTS: {token: len(mids)}}
        g.add_edge(Edge(src, dst, EdgeKind.RELATION, label, properties=props))
    return g


def per_call(look, graph: MemoryGraph, asks: list[list[Edge]]) -> tuple[float, list[dict]]:
    t = time.perf_counter()
    answers = [look(graph, edges) for edges in asks]
    return (time.perf_counter() - t) * 1000 / len(asks), answers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        "| fragments | index made (ms, once) | indexed (ms per call) | scan (ms per call) | scan / indexed |"
    )
    print("|---|---|---|---|---|")
    firsts: dict[str, float] = {}
    lasts: dict[str, float] = {}
    for n in sizes:
        rng = random.Random(args.seed)
        g = build(n, rng)
        entities = sorted({e.src for e in g.edges(EdgeKind.RELATION)})
        asks = [list(g.out_edges(rng.choice(entities), EdgeKind.RELATION)) for _ in range(args.calls)]
        relations = list(g.edges(EdgeKind.RELATION))
        first = [
            next(e for e in relations if READ_FROM in e.properties),
            next(e for e in relations if READ_COUNTS in e.properties),
        ]
        t = time.perf_counter()
        read_status(g, first)  # the first call files every fragment, by its records and by its messages
        made = (time.perf_counter() - t) * 1000
        indexed, a = per_call(read_status, g, asks)
        scanned, b = per_call(scan_status, g, asks)
        if a != b:
            raise SystemExit(f"the index and the scan disagree at {n} fragments")
        firsts.setdefault("indexed", indexed)
        firsts.setdefault("scan", scanned)
        lasts.update(indexed=indexed, scan=scanned)
        print(f"| {n:,} | {made:.1f} | {indexed:.3f} | {scanned:.3f} | {scanned / indexed:.0f}x |")
    growth = sizes[-1] / sizes[0]
    print(
        f"\nFrom {sizes[0]:,} to {sizes[-1]:,} fragments ({growth:.0f}x): "
        f"indexed {lasts['indexed'] / firsts['indexed']:.1f}x, "
        f"scan {lasts['scan'] / firsts['scan']:.1f}x per call."
    )


if __name__ == "__main__":
    main()
