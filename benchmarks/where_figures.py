"""Every figure of BENCHMARKS.md's "Where it stands" that its three tables do not hold, read off the
bench runs the tables are read from (``bench_table.py --split-tables``), so that a round that adds
conversations measures them again instead of carrying them over by hand.

    python benchmarks/where_figures.py --incremental DIR --full DIR --ask-at-time DIR [...] \
        [--suite PATH ...] [--not-fresh ID,ID,...]

The flags are ``bench_table.py``'s, each repeatable (a whole-suite run and the fresh pairs' runs
read as one). It prints, per part of the suite (``tune``, ``holdout``):

- current state first over the questions that decide it, evolution questions apart, and within what
  a 256- and a 512-token budget show, per protocol, with the best flat system's figure beside it;
- Mnemis minus dense and chunk3 with 95% intervals over conversations, per protocol (the "How sure"
  table's rows, ``\\*`` where the interval leaves out zero);
- over every question: MRR, R@5, R@10, ``tied_top5`` and ``equal_top5`` (and which questions tie);
- how many conversation-budget pairs at 256 and 512 tokens Mnemis is under a flat system in;
- update links (precision, recall, false demotions) and subtopic / concept purity, per part and
  language, from each incremental run's ``scenarios.json``;
- the fresh conversations' figures: the held-out part without ``--not-fresh`` (the published figures
  leave out the first ten held-out conversations, run before the fresh tests were sealed:
  indep_bakery, indep_garment, indep_reno, indep_restaurant, indep_teashop, indep_vetclinic,
  indep_cycleclub, indep_guesthouse, indep_clinicdental, indep_schoolpta);
- in bulk, the held-out questions whose first hit holds only messages written after the question
  was asked (which its evidence, fixed at its time, cannot hold), per system.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from bench_table import (
    CSF,
    CSF256,
    CSF512,
    MNEMIS,
    RECALL,
    Rows,
    add_run_arguments,
    below,
    fmt,
    load_runs,
    mean,
    only,
    run_records,
)

from mnemis_integrations.errors import ConfigError
from mnemis_integrations.evaluation.paired import QuestionScores, paired_bootstrap
from mnemis_integrations.evaluation.scenario_data import Scenario
from mnemis_integrations.evaluation.scenarios import default_suite_paths, load_scenarios, scenario_of

PARTS = ("tune", "holdout")
COMPARED = ("dense", "chunk3")  # the "How sure" table's flat systems
ALL_QUESTIONS = ("mrr", "recall@5", "recall@10", "tied_top5", "equal_top5")


def _evolution(scores: Mapping[str, QuestionScores]) -> list[QuestionScores]:
    return [v for v in scores.values() if v.category == "evolution"]


def state_first(rows: Rows, label: str) -> list[str]:
    """Current state first, overall and within a 256- and 512-token budget, evolution questions apart."""
    m = rows[MNEMIS]
    csf, n = mean(m.values(), CSF)
    evo, n_evo = mean(_evolution(m), CSF)
    within = " / ".join(fmt(mean(m.values(), k)[0]) for k in (CSF256, CSF512))
    within_evo = " / ".join(fmt(mean(_evolution(m), k)[0]) for k in (CSF256, CSF512))
    line = (
        f"{label}: current state first {fmt(csf)} ({n}; evolution {fmt(evo)}, {n_evo}); "
        f"within 256 / 512 tokens {within} (evolution {within_evo})"
    )
    flat = {s: mean(r.values(), CSF256)[0] for s, r in rows.items() if s != MNEMIS}
    flat = {s: v for s, v in flat.items() if v is not None}
    if flat:
        best = max(flat, key=flat.__getitem__)
        line += f"; best flat system within 256 tokens {best} {fmt(flat[best])}"
    return [line]


def signed(x: float) -> str:
    """A difference at three decimals with its sign; zero as ".000"."""
    text = fmt(abs(x))
    return ".000" if text == ".000" else ("-" if x < 0 else "+") + text


def sure_rows(rows: Rows, label: str) -> list[str]:
    """The "How sure" table's rows: Mnemis minus each compared system, starred beyond luck."""
    out = []
    for system in (s for s in COMPARED if s in rows):
        cells = []
        for metric in (*RECALL, CSF, "recall@5", "mrr"):
            try:
                d = paired_bootstrap(rows[system], rows[MNEMIS], metric)
            except ConfigError:  # no question both runs score on it (current state first, asked early)
                cells.append("–")
                continue
            star = "\\*" if d.low > 0 or d.high < 0 else ""
            cells.append(f"{signed(d.delta)}{star} ({signed(d.low)} to {signed(d.high)})")
        out.append(f"| {label} | {system} | " + " | ".join(cells) + " |")
    return out


def all_questions(rows: Rows, label: str, systems: Iterable[str]) -> list[str]:
    out = []
    for system in (s for s in systems if s in rows):
        r = rows[system]
        values = {k: mean(r.values(), k)[0] for k in ALL_QUESTIONS}
        cells = [f"{k} {v:.4f}" for k, v in values.items() if v is not None]
        ties = sorted(q for q, v in r.items() if v.scores.get("equal_top5"))
        # which questions tie is read for Mnemis, whose first hits should not; a flat system's are many
        named = f"; equal: {ties}" if ties and len(ties) <= 10 else ""
        out.append(f"{label}, {system} ({len(r)} questions): " + ", ".join(cells) + named)
    return out


def pairs_under(rows: Rows, budgets: tuple[int, ...] = (256, 512)) -> str:
    """How many (conversation, budget) pairs Mnemis is under the best flat system in, at three decimals."""
    convs = sorted({v.conversation for v in rows[MNEMIS].values()})
    under: Counter[int] = Counter()
    for conv in convs:
        sub = only(rows, lambda v, conv=conv: v.conversation == conv)
        for b in budgets:
            metric = f"budget_recall@{b}"
            mine = mean(sub[MNEMIS].values(), metric)[0]
            if any(below(mine, mean(r.values(), metric)[0]) for s, r in sub.items() if s != MNEMIS):
                under[b] += 1
    per = ", ".join(f"{under[b]} at {b}" for b in budgets)
    total = len(convs) * len(budgets)
    return f"{sum(under.values())} of {total} conversation-budget pairs under a flat system ({per})"


def recall_line(rows: Rows, system: str) -> str:
    r = rows[system]
    csf, n = mean(r.values(), CSF)
    evo, n_evo = mean(_evolution(r), CSF)
    recall = " / ".join(fmt(mean(r.values(), m)[0]) for m in RECALL)
    return f"{system} {recall}, current state first {fmt(csf)} ({n}; evolution {fmt(evo)}, {n_evo})"


def structure(folders: Iterable[str | Path]) -> dict[str, dict]:
    """Scenario id -> the incremental runs' structure figures for Mnemis (``scenarios.json``)."""
    per: dict[str, dict] = {}
    for folder in folders:
        path = Path(folder) / "scenarios.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        for item in data.get("structure", {}).get(MNEMIS, {}).get("per_scenario", []):
            per[item["scenario"]] = item
    return per


def links(per: Mapping[str, dict], groups: Mapping[str, Callable[[str, dict], bool]]) -> list[str]:
    out = []
    for label, pick in groups.items():
        t: Counter[str] = Counter()
        for sid, item in per.items():
            if not pick(sid, item):
                continue
            u = item["updates"]
            t.update(edges=u["edges"], correct=u["correct"], annotated=u["annotated"], covered=u["covered"])
            t.update(demoted=u["false_demotions"])
            for level in ("subtopic", "concept"):
                p = item.get("purity", {}).get(level)
                if p:
                    t.update({f"{level}_majority": p["majority"], f"{level}_messages": p["messages"]})
        if not t["edges"] and not t["annotated"]:
            continue
        purity = " / ".join(
            fmt(t[f"{lv}_majority"] / t[f"{lv}_messages"]) if t[f"{lv}_messages"] else "–"
            for lv in ("subtopic", "concept")
        )
        precision = fmt(t["correct"] / t["edges"] if t["edges"] else None)
        recall = fmt(t["covered"] / t["annotated"] if t["annotated"] else None)
        out.append(
            f"{label}: update links {precision} ({t['correct']}/{t['edges']}) / {recall} "
            f"({t['covered']}/{t['annotated']}), false demotions {t['demoted']}; "
            f"purity subtopic / concept {purity}"
        )
    return out


def written_later(
    scenarios: Iterable[Scenario], folders: Iterable[str | Path], part: str = "holdout"
) -> list[str]:
    """Bulk: the questions of ``part`` whose first hit holding messages holds only messages written
    after the question was asked, per system."""
    when, asked, parts = {}, {}, {}
    for sc in scenarios:
        when |= {m.id: m.timestamp for m in sc.messages}
        asked |= {q.id: q.asked_at for q in sc.questions}
        parts[sc.id] = sc.split
    later: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for _path, r in run_records(folders):
        qid = r["question_id"]
        if parts.get(scenario_of(r["conversation"])) != part or qid not in asked:
            continue
        total[r["system"]] += 1
        first = next((ids for ids in r.get("top_source_ids", []) if ids), None)
        if first and all(m in when and when[m] > asked[qid] for m in first):
            later[r["system"]] += 1
    return [f"{s}: {later[s]} of {total[s]} ({fmt(later[s] / total[s])})" for s in sorted(total)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(ap)
    ap.add_argument("--suite", action="append", help="scenario files or folders (default: the bench's suite)")
    ap.add_argument(
        "--not-fresh", default="", help="comma-separated held-out conversations left out of the fresh set"
    )
    args = ap.parse_args(argv)
    if not args.incremental:
        ap.error("name at least one --incremental run")
    scenarios = load_scenarios(list(args.suite or default_suite_paths()))
    part_of = {sc.id: sc.split for sc in scenarios}
    language = {sc.id: sc.language for sc in scenarios}
    not_fresh = {c for c in args.not_fresh.split(",") if c}
    runs = {
        "incremental": load_runs(args.incremental),
        "bulk": load_runs(args.full) if args.full else {},
        "ask-at-time": load_runs(args.ask_at_time) if args.ask_at_time else {},
    }
    lines: list[str] = []
    for part in PARTS:

        def in_part(v: QuestionScores, part: str = part) -> bool:
            return part_of.get(v.conversation) == part

        for label, rows in runs.items():
            if MNEMIS not in rows:
                continue
            flat = runs["incremental"] if label == "ask-at-time" else rows
            mine = only({MNEMIS: rows[MNEMIS], **{s: r for s, r in flat.items() if s != MNEMIS}}, in_part)
            if mine[MNEMIS]:
                lines += state_first(mine, f"{part}, {label}")
                if label != "ask-at-time":
                    lines += sure_rows(mine, f"{part}, {label}")
    lines.append("")
    lines += all_questions(runs["incremental"], "incremental", (MNEMIS, "chunk3", "dense"))
    if MNEMIS in runs["bulk"]:
        lines += all_questions(runs["bulk"], "bulk", (MNEMIS,))
    lines += ["", pairs_under(runs["incremental"]), ""]
    fresh = only(
        runs["incremental"],
        lambda v: part_of.get(v.conversation) == "holdout" and v.conversation not in not_fresh,
    )
    n_fresh = len({v.conversation for v in fresh.get(MNEMIS, {}).values()})
    lines.append(f"fresh held-out conversations: {n_fresh}")
    lines += [recall_line(fresh, s) for s in ("mnemis", "dense", "hybrid", "chunk3", "bm25") if s in fresh]
    lines.append("")
    per = structure(args.incremental)
    groups: dict[str, Callable[[str, dict], bool]] = {}
    for part in PARTS:
        groups[part] = lambda sid, item, part=part: part_of.get(sid) == part
        for lang in sorted({language[c] for c in part_of if part_of[c] == part}):
            groups[f"{part}, {lang}"] = lambda sid, item, part=part, lang=lang: (
                part_of.get(sid) == part and language.get(sid) == lang
            )
    groups["fresh"] = lambda sid, item: part_of.get(sid) == "holdout" and sid not in not_fresh
    lines += links(per, groups)
    if args.full:
        lines += ["", "bulk, held-out questions whose first hit was written after the question:"]
        lines += written_later(scenarios, args.full)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
