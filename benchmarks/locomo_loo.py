"""Leave-one-conversation-out over LoCoMo dev: does a setting chosen on four conversations hold on the fifth?

    python benchmarks/locomo_loo.py NAME=bench-out/locomo-a NAME=bench-out/locomo-b ... \
        [--system mnemis] [--objective budget_recall@512] [--md OUT]

Each ``NAME=FOLDER`` is the output of one ``mnemis bench locomo --out FOLDER`` run with one
setting (one candidate value of a knob). For every fold, the setting with the best mean
``--objective`` on the other four conversations is picked, and its figures on the held-out
conversation are reported; the folds are averaged (weighted by questions, as the bench's overall
figures are). Beside it: each setting's own figures on all five, so a knob fitted to the whole
of dev shows up as a gap between the best single setting and the leave-one-out row.
Adversarial questions (category 5) are left out, as in the bench's overall figures.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

BUDGETS = (256, 512, 1024, 2048)
ADVERSARIAL = 5
MULTI_HOP = 1


def load(folder: str, system: str) -> dict[str, list[dict]]:
    """Per conversation, the per-question scores of ``system`` (adversarial questions left out)."""
    out: dict[str, list[dict]] = defaultdict(list)
    for line in (Path(folder) / "per_question.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["system"] == system and row["category"] != ADVERSARIAL:
            out[row["conversation"]].append(row)
    return out


def mean(rows: list[dict], metric: str) -> float:
    return sum(r["scores"][metric] for r in rows) / max(len(rows), 1)


def figures(rows: list[dict]) -> dict[str, float]:
    mh = [r for r in rows if r["category"] == MULTI_HOP]
    out = {f"R@{b}": mean(rows, f"budget_recall@{b}") for b in BUDGETS}
    out |= {f"MH@{b}": mean(mh, f"budget_recall@{b}") for b in BUDGETS}
    return out


def leave_one_out(
    runs: dict[str, dict[str, list[dict]]], objective: str
) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """The held-out figures of the setting each fold picks, pooled over folds; and the picks."""
    convs = sorted(set.intersection(*(set(r) for r in runs.values())))
    held: list[dict] = []
    picks = []
    for conv in convs:

        def tuned(name: str, conv: str = conv) -> float:
            rows = [q for c in convs if c != conv for q in runs[name][c]]
            return mean(rows, objective)

        best = max(sorted(runs), key=tuned)
        picks.append((conv, best))
        held += runs[best][conv]
    return figures(held), picks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="NAME=FOLDER, one per setting")
    ap.add_argument("--system", default="mnemis")
    ap.add_argument("--objective", default="budget_recall@512")
    ap.add_argument("--md", help="also write the table here")
    args = ap.parse_args(argv)
    runs = {}
    for spec in args.runs:
        name, _, folder = spec.partition("=")
        runs[name] = load(folder, args.system)
    cols = [f"R@{b}" for b in BUDGETS] + [f"MH@{b}" for b in BUDGETS]
    lines = ["| setting | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for name, per_conv in runs.items():
        f = figures([q for rows in per_conv.values() for q in rows])
        lines.append(f"| {name} (all five) | " + " | ".join(f"{f[c]:.3f}" for c in cols) + " |")
    loo, picks = leave_one_out(runs, args.objective)
    lines.append(
        f"| leave-one-out, picked by {args.objective} | " + " | ".join(f"{loo[c]:.3f}" for c in cols) + " |"
    )
    lines += ["", "Picks per held-out conversation: " + ", ".join(f"{c}: {n}" for c, n in picks)]
    text = "\n".join(lines)
    print(text)
    if args.md:
        Path(args.md).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
