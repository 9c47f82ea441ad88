"""The scenario bench's runs read as BENCHMARKS.md's tables read them: every system side by side,
Mnemis's bulk and ask-at-time rows under them, then where Mnemis stands against each flat system.

    python benchmarks/bench_table.py --incremental DIR [--full DIR] [--ask-at-time DIR] \
        [--split holdout --suite PATH ...] [--by-conversation] [--by-class]

Each DIR is a ``mnemis bench scenarios --out`` folder (its ``per_question.jsonl``); each flag is
repeatable, so runs over parts of the suite (a fresh test's pair, the rest on another commit) are
read as one. A question answered in two runs of one protocol is an error: which row counts would
be a guess. ``--split`` keeps the conversations of one part (``tune`` or ``holdout``), read from the
scenario files under ``--suite`` (default: the bench's suite).

The table's cells: budget recall at 256 / 512 / 1,024 / 2,048 tokens; current state first on the
ranked list (n: the questions that decide it; evolution questions apart); the same within what a 256-
and a 512-token budget show; MRR. Below it, Mnemis minus each flat system per budget with a 95%
interval from resampling whole conversations (``evaluation/paired.py``): "above" or "under" where
the interval leaves out zero, "within luck" where it does not.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from mnemis_integrations.evaluation.paired import QuestionScores, paired_bootstrap
from mnemis_integrations.evaluation.scenarios import default_suite_paths, load_scenarios, scenario_of

BUDGETS = (256, 512, 1024, 2048)
RECALL = tuple(f"budget_recall@{b}" for b in BUDGETS)
CSF, CSF256, CSF512, MRR = "current_state_first", "current_state_first@256", "current_state_first@512", "mrr"
MNEMIS = "mnemis"
ORDER = (MNEMIS, "dense", "hybrid", "bm25", "chunk3")  # a fresh test's table; any other system after them
SUITE_ORDER = ("bm25", "dense", "hybrid", "chunk3")  # the suite's tables, after Mnemis

Rows = dict[str, dict[str, QuestionScores]]  # system -> question id -> scores


def run_records(folders: Iterable[str | Path]) -> Iterator[tuple[Path, dict]]:
    """Each per-question record of the runs under ``folders`` (a folder or its ``per_question.jsonl``),
    with the file it came from."""
    for folder in folders:
        path = Path(folder)
        path = path / "per_question.jsonl" if path.is_dir() else path
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield path, json.loads(line)


def load_runs(folders: Iterable[str | Path]) -> Rows:
    """Every system's rows of the runs under ``folders``, one protocol; a question twice is an error."""
    rows: Rows = defaultdict(dict)
    for path, r in run_records(folders):
        system, qid = r["system"], r["question_id"]
        if qid in rows[system]:
            raise SystemExit(f"{qid} ({system}) is in two runs of one protocol, {path} and another")
        rows[system][qid] = QuestionScores(scenario_of(r["conversation"]), r.get("category", ""), r["scores"])
    return dict(rows)


def splits_of(paths: Iterable[str | Path]) -> dict[str, str]:
    """Conversation id -> its part (``tune`` / ``holdout``), from the scenario files under ``paths``."""
    return {sc.id: sc.split for sc in load_scenarios(list(paths))}


def only(rows: Rows, pick: Callable[[QuestionScores], bool]) -> Rows:
    """Every system's rows of the questions ``pick`` keeps."""
    return {s: {q: v for q, v in r.items() if pick(v)} for s, r in rows.items()}


def keep(rows: Rows, wanted: set[str] | None) -> Rows:
    return rows if wanted is None else only(rows, lambda v: v.conversation in wanted)


def mean(scores: Iterable[QuestionScores], metric: str) -> tuple[float | None, int]:
    vals = [float(v) for s in scores if (v := s.scores.get(metric)) is not None]
    return (sum(vals) / len(vals) if vals else None, len(vals))


def below(value: float | None, ref: float | None) -> bool:
    """Is ``value`` under ``ref`` as the tables print them (three decimals)?"""
    return value is not None and ref is not None and round(value, 3) < round(ref, 3)


def fmt(x: float | None) -> str:
    if x is None:
        return "–"
    s = f"{x:.3f}"
    return s[1:] if s.startswith("0") else s


def row(label: str, scores: Mapping[str, QuestionScores], within: bool = True) -> str:
    qs = list(scores.values())
    recall = [fmt(mean(qs, m)[0]) for m in RECALL]
    csf, n = mean(qs, CSF)
    evo, n_evo = mean([q for q in qs if q.category == "evolution"], CSF)
    csf_cell = (
        f"{fmt(csf)} ({n}; evolution {fmt(evo)}, {n_evo})" if label.lower() == MNEMIS else f"{fmt(csf)} ({n})"
    )
    within_cell = f"{fmt(mean(qs, CSF256)[0])} / {fmt(mean(qs, CSF512)[0])}" if within else ""
    return f"| {label} | " + " | ".join([*recall, csf_cell, within_cell, fmt(mean(qs, MRR)[0])]) + " |"


def table(inc: Rows, full: Rows, aat: Rows) -> list[str]:
    out = [
        "| system | R@256 | R@512 | R@1,024 | R@2,048 | current state first "
        "| within 256 / 512 tokens | MRR |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = [s for s in ORDER if s in inc] + sorted(s for s in inc if s not in ORDER)
    out += [row("Mnemis" if s == MNEMIS else s, inc[s]) for s in order if s in inc]
    if MNEMIS in full:
        out.append(row("Mnemis, bulk", full[MNEMIS], within=False))
    if MNEMIS in aat:
        out.append(row("Mnemis, ask-at-time", aat[MNEMIS], within=False))
    return out


def standing(rows: Rows, label: str) -> list[str]:
    """Mnemis minus each flat system, per budget, with the conversations' luck."""
    out = []
    for system in sorted(s for s in rows if s != MNEMIS):
        cells = []
        for b, metric in zip(BUDGETS, RECALL, strict=True):
            d = paired_bootstrap(rows[system], rows[MNEMIS], metric)
            verdict = "above" if d.low > 0 else "under" if d.high < 0 else "within luck"
            cells.append(f"{b}: {d.delta:+.3f} ({d.low:+.3f} to {d.high:+.3f}, {verdict})")
        out.append(f"- {label} against {system}: " + "; ".join(cells))
    return out


def unders(rows: Rows, group_of, label: str) -> list[str]:
    """Each group (a conversation, a class) and budget where Mnemis is under a flat system."""
    out = []
    groups = sorted({group_of(q) for q in rows[MNEMIS].values()})
    for g in groups:
        sub = only(rows, lambda v, g=g: group_of(v) == g)
        mine = [fmt(mean(sub[MNEMIS].values(), m)[0]) for m in RECALL]
        losses = []
        for b, metric in zip(BUDGETS, RECALL, strict=True):
            m, _ = mean(sub[MNEMIS].values(), metric)
            for system in sorted(s for s in sub if s != MNEMIS):
                f, _ = mean(sub[system].values(), metric)
                if below(m, f):
                    losses.append(f"{system} at {b} ({fmt(m)} / {fmt(f)})")
        n = len(sub[MNEMIS])
        verdict = "under " + ", ".join(losses) if losses else "above or level with every flat system"
        out.append(f"- {label} {g} ({n} questions): Mnemis {' / '.join(mine)}; {verdict}")
    return out


CLASSES = ("vague", "relational", "evolution", "overall")


def cell(values: list[float | None], best: list[float | None], mark: str) -> str:
    """R@256 / 512 / 1,024 / 2,048; each value wrapped in ``mark`` where ``best`` says so."""
    out = []
    for v, b in zip(values, best, strict=True):
        text = fmt(v)
        out.append(f"{mark}{text}{mark}" if below(v, b) else text)
    return " / ".join(out)


def split_table(mine: Rows, flat: Rows, parts: Mapping[str, str]) -> list[str]:
    """The suite's table per part and class: Mnemis (from ``mine``) beside every flat system (from
    ``flat``); **bold** the best flat system at each budget, *italics* Mnemis under it."""
    systems = [s for s in SUITE_ORDER if s in flat] + sorted(
        s for s in flat if s not in SUITE_ORDER and s != MNEMIS
    )
    out = [
        "| split, class (n) | Mnemis R@256 / 512 / 1,024 / 2,048 | "
        + " | ".join(systems)
        + " | CSF Mnemis (n) | best flat CSF |",
        "|" + "---|" * (len(systems) + 4),
    ]
    for part in ("tune", "holdout"):
        for cls in CLASSES:

            def pick(
                rows: Mapping[str, QuestionScores], part: str = part, cls: str = cls
            ) -> list[QuestionScores]:
                return [
                    q
                    for q in rows.values()
                    if parts.get(q.conversation) == part and cls in ("overall", q.category)
                ]

            m = pick(mine[MNEMIS])
            if not m:
                continue
            recall = {s: [mean(pick(flat[s]), r)[0] for r in RECALL] for s in systems}
            best = [
                max((recall[s][i] for s in systems if recall[s][i] is not None), default=None)
                for i in range(4)
            ]
            flat_cells = []
            for s in systems:
                vals = recall[s]
                flat_cells.append(
                    " / ".join(
                        f"**{fmt(v)}**"
                        if v is not None and b is not None and round(v, 3) == round(b, 3)
                        else fmt(v)
                        for v, b in zip(vals, best, strict=True)
                    )
                )
            csf, n = mean(m, CSF)
            flat_csf = {s: mean(pick(flat[s]), CSF)[0] for s in systems}
            top = max(
                (s for s in systems if flat_csf[s] is not None), key=lambda s: flat_csf[s], default=None
            )
            top_cell = f"{top} {fmt(flat_csf[top])}" if top else "–"
            out.append(
                f"| {part}, {cls} ({len(m)}) | {cell([mean(m, r)[0] for r in RECALL], best, '*')} | "
                + " | ".join(flat_cells)
                + f" | {fmt(csf)} ({n}) | {top_cell} |"
            )
    return out


def add_run_arguments(ap: argparse.ArgumentParser) -> None:
    """The run folders, one flag per protocol, each repeatable (runs over parts of the suite read as one)."""
    ap.add_argument(
        "--incremental", action="append", default=[], help="a bench run folder, protocol incremental"
    )
    ap.add_argument("--full", action="append", default=[], help="a bench run folder, protocol full")
    ap.add_argument(
        "--ask-at-time", action="append", default=[], help="a bench run folder, protocol ask_at_time"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(ap)
    ap.add_argument("--split", choices=("tune", "holdout"), help="one part of the suite only")
    ap.add_argument(
        "--suite", action="append", help="scenario files or folders naming each conversation's part"
    )
    ap.add_argument(
        "--by-conversation", action="store_true", help="where Mnemis is under a flat system, each chat"
    )
    ap.add_argument("--by-class", action="store_true", help="the same per question class")
    ap.add_argument(
        "--split-tables",
        action="store_true",
        help="the suite's tables per part and class, by protocol (ask-at-time beside the stream's flat rows)",
    )
    args = ap.parse_args(argv)
    if not args.incremental:
        ap.error("name at least one --incremental run")
    parts = splits_of(args.suite or default_suite_paths()) if args.split or args.split_tables else {}
    wanted = {c for c, part in parts.items() if part == args.split} if args.split else None
    inc, full, aat = (keep(load_runs(f), wanted) for f in (args.incremental, args.full, args.ask_at_time))
    if args.split_tables:
        tables = [("incremental", inc, inc), ("bulk", full, full), ("ask-at-time", aat, inc)]
        for label, mine, flat in tables:
            if MNEMIS in mine:
                print(f"{label}:\n" + "\n".join(split_table(mine, flat, parts)) + "\n")
        return 0
    if MNEMIS not in inc:
        raise SystemExit("the incremental runs hold no Mnemis rows")
    n_q, n_c = len(inc[MNEMIS]), len({q.conversation for q in inc[MNEMIS].values()})
    lines = [f"{n_c} conversations, {n_q} questions" + (f" ({args.split})" if args.split else ""), ""]
    lines += table(inc, full, aat) + [""]
    lines += standing(inc, "incremental")
    if MNEMIS in full and len(full) > 1:
        lines += standing(full, "bulk")
    if args.by_conversation:
        lines += [""] + unders(inc, lambda q: q.conversation, "conversation")
    if args.by_class:
        lines += [""] + unders(inc, lambda q: q.category, "class")
        if MNEMIS in full and len(full) > 1:
            lines += unders(full, lambda q: q.category, "bulk, class")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
