"""Speed at scale (issue #8, SPEC §6): dual-path search against dense-only search on one synthetic memory.

    python benchmarks/scale.py --nodes 1000 10000 100000 --json scale.json
    python benchmarks/scale.py --nodes 10000 --queries 100

For each N, in a fresh process (so resident memory is that of one memory only):

1. Generate a synthetic memory of N graph nodes in one namespace: concepts of ~5 subtopics of
   ~8 fragments, fragments of 2-5 messages of generated conversation (topic words, entity names,
   filler), ~12% entity nodes (two speakers in every fragment, a few named things per subtopic,
   shared inside a concept), ``mentions``, ``relation``, ``references`` and ``updates`` edges
   (3% of fragments supersede an older one).
2. Vectors are NOT from a real model: clustered random unit vectors (concept > subtopic >
   message), served by :class:`PrecomputedEmbedder`, a fake embedder that returns the fixed
   vector of each text. Query embedding therefore costs a dict look-up; it is measured and
   reported apart (``embed_p50_ms``) and excluded from both latencies.
3. Measure: index build (restoring the namespace state: centroids, BM25, entity index, then
   the ANN sidecars), dual-path query latency through ``MnemisMemory.search`` (k=10), dense-only
   latency as exact ``faiss.IndexFlatIP`` top-10 over the same message vectors (what the plain
   dense baseline of ``evaluation.baselines`` does), incremental ingest through ``add_messages``
   into the N-node memory, resident memory per node, and the agreement of the funnel's top-10
   with exact (full-scan) scoring on a sample of queries.
4. Before the ingest, the memory is made what a load from its store gives: written to the store,
   nothing pending, and the builder's index built (one pass over the graph, which the first ingest
   after a load makes; reported apart as ``builder_index_s``, like BM25's in the index build);
   and the process's first ingest (word tables, tokenizer) is made into another namespace
   (``first_ingest_s``). The timed ingest then costs what the new messages touch, not a pass
   over, or a write of, the whole bulk-built graph.

The JSON holds one object per N (a list when several N are given) with at least ``nodes``,
``dual_p50_ms``, ``dual_p95_ms``, ``dense_p50_ms``, ``dense_p95_ms``, ``ingest_nodes_per_s``,
``rss_bytes_per_node``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import SPREAD_PROFILE
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.maintenance.supersede import supersede
from mnemis_integrations.core.model import Edge, EdgeKind, Message, Node, NodeKind
from mnemis_integrations.core.state import NamespaceState
from mnemis_integrations.core.storage.base import Delta

NS = "bench"
SPEAKERS = ("Ann", "Ben")
_SYL_LOWER = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]  # 70 syllables for topic words
_SYL_NAME = [c + v for c in "BCDGHJKLMNPRSTVWZ" for v in "aeiouy"]  # 102 for names
FILLER = [
    "i",
    "think",
    "the",
    "we",
    "should",
    "maybe",
    "about",
    "with",
    "for",
    "next",
    "week",
    "again",
    "really",
    "still",
    "that",
    "was",
    "just",
    "then",
    "also",
    "because",
    "so",
    "it",
    "is",
    "on",
    "our",
    "plan",
]
RELATION_LABELS = ("works_with", "owns", "reports_to", "depends_on", "met")


class PrecomputedEmbedder:
    """A fake embedder: the fixed, precomputed vector of each known text (no model is run)."""

    profile = SPREAD_PROFILE

    def __init__(self, dim: int, table: dict[str, np.ndarray] | None = None):
        self.dim = dim
        self.id = f"precomputed-{dim}"
        self.table: dict[str, np.ndarray] = table if table is not None else {}

    def _lookup(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        try:
            return np.stack([self.table[t] for t in texts]).astype(np.float32)
        except KeyError as e:
            raise KeyError(f"PrecomputedEmbedder has no vector for {e.args[0]!r}") from None

    embed_queries = _lookup
    embed_passages = _lookup


def _word(i: int, syl: list[str], n_syl: int) -> str:
    out = []
    for _ in range(n_syl):
        out.append(syl[i % len(syl)])
        i //= len(syl)
    return "".join(out)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@dataclass
class Synthetic:
    graph: MemoryGraph
    messages: list[Message]
    vectors: np.ndarray  # one row per message, in ``messages`` order
    queries: list[tuple[str, np.ndarray]]
    ingest_batches: list[list[dict]]  # later conversation, for incremental ingest
    embedder: PrecomputedEmbedder
    counts: dict[str, int] = field(default_factory=dict)


def generate(
    n_nodes: int,
    dim: int = 384,
    seed: int = 0,
    n_queries: int = 200,
    ingest_batches: int = 4,
    batch_messages: int = 20,
) -> Synthetic:
    """A synthetic memory of about ``n_nodes`` graph nodes (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n_hier = int(n_nodes * 0.88)
    n_concepts = max(1, round(n_hier / 46))  # 1 concept + 5 subtopics + 40 fragments
    n_entities = max(len(SPEAKERS) + 3, n_nodes - n_hier)
    per_concept_fr = (n_hier - n_concepts) / n_concepts  # subtopics + fragments per concept

    g = MemoryGraph(NS)
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    for s in SPEAKERS:
        g.add_node(Node(f"e:{s.lower()}", NodeKind.ENTITY, s, NS, created_at=t0, event_time=t0))
    names = [_word(i, _SYL_NAME, 4).capitalize() for i in rng.permutation(len(_SYL_NAME) ** 3)[:n_entities]]
    ent_ids = []
    for name in names[: n_entities - len(SPEAKERS)]:
        eid = f"e:{name.lower()}"
        g.add_node(Node(eid, NodeKind.ENTITY, name, NS, created_at=t0, event_time=t0))
        ent_ids.append(eid)
    pools = np.array_split(np.array(ent_ids), n_concepts)
    vocab = [_word(i, _SYL_LOWER, 3) for i in rng.permutation(len(_SYL_LOWER) ** 3)]

    frag_plan = []  # (concept, subtopic id, topic words, entity ids, subtopic centre)
    sub_ids_by_concept: list[list[str]] = []
    for c in range(n_concepts):
        cvec = _unit(rng.normal(size=dim))
        words = vocab[(c * 12) % len(vocab) : (c * 12) % len(vocab) + 12]
        cid = f"c:{c}"
        g.add_node(
            Node(
                cid, NodeKind.CONCEPT, words[0].title(), NS, created_at=t0, event_time=t0, keywords=words[:3]
            )
        )
        n_sub = max(1, round(per_concept_fr / 9))
        n_frag = max(n_sub, round(per_concept_fr) - n_sub)
        subs = []
        for s in range(n_sub):
            sid = f"s:{c}:{s}"
            swords = [words[(s * 2 + j) % 12] for j in range(4)]
            svec = _unit(cvec + 0.9 * _unit(rng.normal(size=dim)))
            g.add_node(
                Node(
                    sid,
                    NodeKind.SUBTOPIC,
                    f"{swords[0]}, {swords[1]}",
                    NS,
                    created_at=t0,
                    event_time=t0,
                    keywords=swords,
                    summary=" ".join(swords),
                )
            )
            g.add_edge(Edge(sid, cid, EdgeKind.BELONGS_TO, created_at=t0))
            pool = pools[c]
            ents = list(rng.choice(pool, size=min(3, len(pool)), replace=False)) if len(pool) else []
            for a, b in itertools.pairwise(ents):
                g.add_edge(
                    Edge(
                        a,
                        b,
                        EdgeKind.RELATION,
                        label=RELATION_LABELS[s % len(RELATION_LABELS)],
                        created_at=t0,
                    )
                )
            subs.append((sid, swords, ents, svec))
        sub_ids_by_concept.append([x[0] for x in subs])
        for f in range(n_frag):
            sid, swords, ents, svec = subs[f % n_sub]
            frag_plan.append((c, sid, swords, ents, svec))

    order = rng.permutation(len(frag_plan))  # conversations interleave topics over time
    messages: list[Message] = []
    vec_rows: list[np.ndarray] = []
    frags_by_sub: dict[str, list[str]] = {}
    frag_vec: dict[str, np.ndarray] = {}
    frag_words: dict[str, tuple[list[str], list[str]]] = {}
    seq = 0
    label_of = {n.id: n.label for n in g.nodes(NodeKind.ENTITY)}
    for t, i in enumerate(order):
        c, sid, swords, ents, svec = frag_plan[i]
        when = t0 + timedelta(minutes=90 * t)
        fid = f"f:{t}"
        n_msg = int(rng.integers(2, 6))
        mentioned = (
            list(rng.choice(ents, size=min(len(ents), int(rng.integers(1, 3))), replace=False))
            if ents
            else []
        )
        mids = []
        for j in range(n_msg):
            w = list(rng.choice(swords, size=3, replace=False))
            fill = list(rng.choice(FILLER, size=6))
            who = mentioned[j % len(mentioned)] if mentioned else None
            text = (
                f"{fill[0]} {fill[1]} {w[0]} {fill[2]} {w[1]} {fill[3]}"
                + (f" {label_of[who]}" if who else "")
                + f" {fill[4]} {w[2]} {fill[5]}."
            )
            m = Message(f"m{seq}", SPEAKERS[j % 2], text.capitalize(), when + timedelta(minutes=j), seq)
            messages.append(m)
            vec_rows.append(_unit(svec + 0.8 * _unit(rng.normal(size=dim))))
            mids.append(m.id)
            seq += 1
        kw = list(dict.fromkeys(swords[:2] + [label_of[e].lower() for e in mentioned]))
        summary = "; ".join(messages[-1].text.split(".")[:1])
        g.add_node(
            Node(
                fid,
                NodeKind.FRAGMENT,
                f"{kw[0]} {when:%Y-%m-%d}",
                NS,
                summary=summary,
                keywords=kw,
                source_ids=mids,
                created_at=when,
                event_time=messages[-1].timestamp,
                properties={"headline": " ".join(kw[:2])},
            )
        )
        g.add_edge(Edge(fid, sid, EdgeKind.BELONGS_TO, created_at=when))
        for e in [f"e:{s.lower()}" for s in SPEAKERS] + mentioned:
            g.add_edge(Edge(fid, e, EdgeKind.MENTIONS, created_at=when))
        earlier = frags_by_sub.setdefault(sid, [])
        if earlier and rng.random() < 0.03:
            supersede(g, old_id=earlier[int(rng.integers(len(earlier)))], new_id=fid, when=when)
        others = [s for s in sub_ids_by_concept[c] if s != sid and frags_by_sub.get(s)]
        if others and rng.random() < 0.3:
            o = others[int(rng.integers(len(others)))]
            g.add_edge(Edge(fid, frags_by_sub[o][-1], EdgeKind.REFERENCES, created_at=when))
        earlier.append(fid)
        frag_vec[fid] = np.mean(vec_rows[-n_msg:], axis=0)
        frag_words[fid] = (swords, [label_of[e] for e in mentioned])

    emb = PrecomputedEmbedder(dim)
    frag_ids = list(frag_vec)
    queries = []
    for q in range(n_queries):
        # Conversations stay on a topic: runs of four queries about one fragment's subtopic.
        fid = frag_ids[int(rng.integers(len(frag_ids)))] if q % 4 == 0 else fid
        swords, ents = frag_words[fid]
        words = list(rng.choice(swords, size=2, replace=False))
        text = (
            f"what did we say about {words[0]} and {words[1]}"
            + (f" with {ents[0]}" if ents and q % 2 else "")
            + f" #{q}"
        )
        vec = _unit(frag_vec[fid] + 0.5 * _unit(rng.normal(size=dim)))
        emb.table[text] = vec
        queries.append((text, vec))

    batches = []
    last = messages[-1].timestamp
    for b in range(ingest_batches):
        c, sid, swords, ents, svec = frag_plan[int(rng.integers(len(frag_plan)))]
        batch = []
        for j in range(batch_messages):
            w = list(rng.choice(swords, size=3, replace=False))
            text = f"Later we talked {w[0]} {w[1]} again and {w[2]} batch {b} line {j}."
            speaker = SPEAKERS[j % 2]
            emb.table[f"{speaker}: {text}"] = _unit(svec + 0.8 * _unit(rng.normal(size=dim)))
            batch.append(
                {
                    "id": f"new{b}-{j}",
                    "speaker": speaker,
                    "text": text,
                    "timestamp": (last + timedelta(days=1 + b, minutes=j)).isoformat(),
                }
            )
        batches.append(batch)

    counts = {k.value: len(g.nodes(k)) for k in NodeKind}
    counts["messages"] = len(messages)
    return Synthetic(g, messages, np.stack(vec_rows), queries, batches, emb, counts)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _pct(xs: list[float], p: float) -> float:
    return round(float(np.percentile(np.asarray(xs) * 1000.0, p)), 3)


def falkordb_part(url: str, syn: Synthetic, st: NamespaceState, dim: int, n_queries: int) -> dict:
    """Write the memory to FalkorDB, reload it into a fresh MnemisMemory, and time queries on it."""
    from mnemis_integrations.core.graph import GraphChanges
    from mnemis_integrations.core.storage.falkordb import FalkorDBStore

    store = FalkorDBStore(url)
    store.delete(NS)
    t = time.perf_counter()
    store.set_meta("embedder_id", syn.embedder.id)
    store.set_meta("dim", str(dim))
    graph = GraphChanges(nodes=st.graph.nodes(), edges=st.graph.edges())
    store.write(NS, Delta(graph, list(syn.messages), syn.vectors), expected_version=0)
    write_s = time.perf_counter() - t
    mem = MnemisMemory(embedder=syn.embedder)
    mem._store = store  # until MnemisMemory(backend="falkordb://...") is wired in the engine
    t = time.perf_counter()
    mem.messages(NS)  # loads the namespace from FalkorDB and rebuilds the in-process indexes
    load_s = time.perf_counter() - t
    for text, _ in syn.queries[:5]:
        mem.search(text, k=10, namespace=NS)
    lat = []
    for text, _ in syn.queries[:n_queries]:
        t = time.perf_counter()
        mem.search(text, k=10, namespace=NS)
        lat.append(time.perf_counter() - t)
    t = time.perf_counter()
    for _ in range(20):
        store.version(NS)  # what a multi-process reader pays per query to notice other writers
    version_ms = (time.perf_counter() - t) / 20 * 1000
    store.delete(NS)
    store.close()
    return {
        "falkordb_write_s": round(write_s, 3),
        "falkordb_load_s": round(load_s, 3),
        "falkordb_dual_p50_ms": _pct(lat, 50),
        "falkordb_dual_p95_ms": _pct(lat, 95),
        "falkordb_version_check_ms": round(version_ms, 3),
    }


def ready_to_ingest(mem: MnemisMemory, st: NamespaceState, syn: Synthetic) -> dict[str, float]:
    """Make ``st`` (served by ``mem``) what a load from ``mem``'s store gives, with the builder's index
    built and the process's first ingest done; returns the seconds each part took.

    Every node and edge ``generate`` made waits in the graph's change journal, so the first ingest
    would write the whole graph (and leave the store a graph without its messages); the builder's
    index is built on its first use, by the first ingest after a load; and a process loads its
    word tables and tokenizer on its first ingest. All are one-off costs, not those of the
    messages an ingest adds."""
    t = time.perf_counter()
    # Into a namespace of its own: the N-node memory is left as it was.
    for batch in syn.ingest_batches[:1]:
        mem.add_messages(batch, namespace=f"{NS}-warm-up")
    warm_s = time.perf_counter() - t
    t = time.perf_counter()
    # The builder's limits first: setting them on a built index groups every parent again.
    mem.builder.steps.place.prepare(st)
    index = st.build_index()
    index.ready(st)
    index.speakers(st)  # counted on first use, apart from the rest
    index_s = time.perf_counter() - t
    t = time.perf_counter()
    delta = Delta(st.graph.take_changes(), list(syn.messages), syn.vectors)
    st.version = mem._store.write(NS, delta, st.version, {"embedder_id": syn.embedder.id, "dim": str(st.dim)})
    return {
        "first_ingest_s": round(warm_s, 3),
        "builder_index_s": round(index_s, 3),
        "bulk_store_s": round(time.perf_counter() - t, 3),
    }


def run_one(
    n_nodes: int, dim: int, n_queries: int, agreement_queries: int, seed: int = 0, falkordb: str | None = None
) -> dict:
    import faiss

    from mnemis_integrations.core.retrieval import cache as rcache

    rss0 = _rss()
    tg = time.perf_counter()
    syn = generate(n_nodes, dim, seed, n_queries)
    gen_s = time.perf_counter() - tg
    graph_nodes = len(syn.graph)

    tb = time.perf_counter()
    st = NamespaceState.restore(NS, dim, syn.graph, syn.messages, [m.id for m in syn.messages], syn.vectors)
    st.lexical.scores("warm up")  # BM25 is built lazily on the first query: count it here
    state_s = time.perf_counter() - tb
    ta = time.perf_counter()
    ann = st.msg_vectors.approximate or st.node_vectors.approximate
    for idx in (st.msg_vectors, st.node_vectors):
        if idx.approximate:
            idx.build_ann()
    ann_s = time.perf_counter() - ta

    mem = MnemisMemory(embedder=syn.embedder)
    mem._dim = dim
    mem._states[NS] = st
    rss_built = _rss()

    # Dense-only: exact faiss flat top-10 over the same message vectors (the plain dense baseline).
    flat = faiss.IndexFlatIP(dim)
    flat.add(np.ascontiguousarray(syn.vectors))
    dense_t, embed_t, dual_t = [], [], []
    for _, vec in syn.queries:
        t = time.perf_counter()
        flat.search(vec.reshape(1, dim), 10)
        dense_t.append(time.perf_counter() - t)
    for text, _ in syn.queries[:5]:  # warm-up: memoised visible set, entity tables, path cache
        mem.search(text, k=10, namespace=NS)
    hits_per_query = []
    for text, _ in syn.queries:
        t = time.perf_counter()
        syn.embedder.embed_queries([text])
        embed_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        hits = mem.search(text, k=10, namespace=NS)
        dual_t.append(time.perf_counter() - t - embed_t[-1])
        hits_per_query.append([h.node_id for h in hits])

    # Agreement of the funnel with exact scoring of every node (the small-graph path).
    agree = None
    if rcache.is_large(st) and agreement_queries > 0:
        saved = rcache.FUNNEL_MIN_NODES
        overlaps = []
        try:
            rcache.FUNNEL_MIN_NODES = 10**12
            for (text, _), funnel_ids in list(zip(syn.queries, hits_per_query, strict=True))[
                :agreement_queries
            ]:
                exact = [h.node_id for h in mem.search(text, k=10, namespace=NS)]
                overlaps.append(len(set(exact) & set(funnel_ids)) / max(1, len(exact)))
        finally:
            rcache.FUNNEL_MIN_NODES = saved
        agree = round(float(np.mean(overlaps)), 3)

    # Incremental ingest into the N-node memory, through the public API (in-memory store).
    ready = ready_to_ingest(mem, st, syn)
    before = len(st.graph)
    ti = time.perf_counter()
    persist = 0.0
    n_msgs = 0
    for batch in syn.ingest_batches:
        rep = mem.add_messages(batch, namespace=NS)
        persist += rep.timings.get("persist_s", 0.0)
        n_msgs += rep.added
    ingest_s = time.perf_counter() - ti
    created = len(mem._states[NS].graph) - before

    out = {
        "nodes": graph_nodes,
        "requested_nodes": n_nodes,
        "counts": syn.counts,
        "dim": dim,
        "queries": len(syn.queries),
        "dual_p50_ms": _pct(dual_t, 50),
        "dual_p95_ms": _pct(dual_t, 95),
        "dense_p50_ms": _pct(dense_t, 50),
        "dense_p95_ms": _pct(dense_t, 95),
        "embed_p50_ms": _pct(embed_t, 50),
        "embedder": "PrecomputedEmbedder (fixed clustered random unit vectors, no model)",
        "dense_baseline": "faiss.IndexFlatIP top-10 over the message vectors, 1 thread",
        "funnel": rcache.is_large(st),
        "ann": bool(ann),
        "funnel_top10_agreement": agree,
        "generate_s": round(gen_s, 3),
        "index_build_s": round(state_s + ann_s, 3),
        "state_build_s": round(state_s, 3),
        "ann_build_s": round(ann_s, 3),
        "ingest_messages": n_msgs,
        "ingest_nodes_created": created,
        "ingest_s": round(ingest_s, 3),
        "ingest_persist_s": round(persist, 3),
        "ingest_nodes_per_s": round(created / ingest_s, 2) if ingest_s else None,
        "ingest_messages_per_s": round(n_msgs / ingest_s, 2) if ingest_s else None,
        "bulk_load_nodes_per_s": round(graph_nodes / (state_s + ann_s), 1),
        **ready,
        "rss_bytes_per_node": int((rss_built - rss0) / graph_nodes),
        "dual_over_dense_p50": round(_pct(dual_t, 50) / max(_pct(dense_t, 50), 1e-9), 3),
        "dual_over_dense_p95": round(_pct(dual_t, 95) / max(_pct(dense_t, 95), 1e-9), 3),
    }
    if falkordb:
        out.update(falkordb_part(falkordb, syn, st, dim, n_queries))
    return out


_GROWTH = (
    "dual_p50_ms",
    "dual_p95_ms",
    "dense_p50_ms",
    "dense_p95_ms",
    "index_build_s",
    "ingest_nodes_per_s",
    "builder_index_s",
    "rss_bytes_per_node",
)


def growth_table(runs: list[dict]) -> str:
    """Each cost per N, and how it grew from the previous N (x: ratio of costs, for a ratio of N)."""
    lines = ["| metric | " + " | ".join(f"N={r['nodes']}" for r in runs) + " |", "|---|" + "---|" * len(runs)]
    extra = (
        "dual_over_dense_p50",
        "dual_over_dense_p95",
        "funnel_top10_agreement",
        "falkordb_dual_p50_ms",
        "falkordb_write_s",
        "falkordb_load_s",
    )
    for key in _GROWTH + extra:
        cells = []
        for i, r in enumerate(runs):
            v = r.get(key)
            cell = "-" if v is None else f"{v:g}"
            if i and key in _GROWTH and v and runs[i - 1].get(key):
                cell += f" (x{v / runs[i - 1][key]:.2f} for x{r['nodes'] / runs[i - 1]['nodes']:.1f} N)"
            cells.append(cell)
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--nodes", type=int, nargs="+", required=True, help="graph sizes to measure, each in a fresh process"
    )
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--agreement-queries", type=int, default=20, help="queries also run with exact scoring")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", dest="json_out", help="write the results here")
    ap.add_argument(
        "--falkordb",
        help="also store each memory in this FalkorDB (falkordb://host:port), reload "
        "it and time queries on the reloaded memory",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:  # one size, result as JSON on stdout
        print(
            json.dumps(
                run_one(
                    args.nodes[0], args.dim, args.queries, args.agreement_queries, args.seed, args.falkordb
                )
            )
        )
        return 0
    runs = []
    for n in args.nodes:
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            "--nodes",
            str(n),
            "--dim",
            str(args.dim),
            "--queries",
            str(args.queries),
            "--agreement-queries",
            str(args.agreement_queries),
            "--seed",
            str(args.seed),
        ]
        if args.falkordb:
            cmd += ["--falkordb", args.falkordb]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return proc.returncode
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        runs.append(r)
        print(
            json.dumps(
                {
                    k: r[k]
                    for k in (
                        "nodes",
                        "dual_p50_ms",
                        "dual_p95_ms",
                        "dense_p50_ms",
                        "dense_p95_ms",
                        "ingest_nodes_per_s",
                        "index_build_s",
                        "rss_bytes_per_node",
                        "funnel_top10_agreement",
                        "falkordb_dual_p50_ms",
                    )
                    if k in r
                }
            ),
            flush=True,
        )
    print()
    print(growth_table(runs))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(runs[0] if len(runs) == 1 else runs, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
