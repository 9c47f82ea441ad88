"""Write a run's results: ``results.json``, ``per_question.jsonl``, ``results.md`` and a plot.

Everything here reads the plain dict returned by :func:`.runner.run_benchmark`, so a saved
``results.json`` can be re-rendered without re-running anything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import MissingDependencyError

__all__ = ["markdown_report", "plot_recall_vs_budget", "write_reports"]

_MULTI_HOP = "multi-hop"


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def _ratio(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _category_budgets(budgets: Sequence[int]) -> list[int]:
    # The per-category tables show a tight and a roomy budget: 512 and 2048 when run,
    # else the smallest and largest budgets that were.
    wanted = [b for b in (512, 2048) if b in budgets]
    return wanted or sorted({min(budgets), max(budgets)})


def markdown_report(result: Mapping[str, Any]) -> str:
    """Render a run as Markdown: the main table, per-category tables, and notes."""
    cfg = result["config"]
    budgets: list[int] = cfg["budgets"]
    systems: Mapping[str, Any] = result["systems"]
    excluded = result["dataset"].get("excluded_from_overall", [])
    has_mh = any(_MULTI_HOP in s["categories"] for s in systems.values())
    ref = cfg.get("reference_system") or "reference"

    header = ["system"] + [f"R@{b}tok" for b in budgets]
    if has_mh:
        header += [f"MH@{b}tok" for b in budgets]
    header += ["R@5", "R@10", "MRR", "ingest s", f"ingest ×{ref}", "p50 ms", "p95 ms", "p50 ×", "p95 ×"]
    rows = []
    for name, s in systems.items():
        o = s["overall"]
        mh = s["categories"].get(_MULTI_HOP, {})
        t = s["timing"]
        row = [name] + [_num(o.get(f"budget_recall@{b}")) for b in budgets]
        if has_mh:
            row += [_num(mh.get(f"budget_recall@{b}")) for b in budgets]
        row += [
            _num(o.get("recall@5")),
            _num(o.get("recall@10")),
            _num(o.get("mrr")),
            _num(t["ingest_s"], 2),
            _ratio(t.get("ingest_ratio")),
            _num(t["latency_ms_p50"], 1),
            _num(t["latency_ms_p95"], 1),
            _ratio(t.get("p50_ratio")),
            _ratio(t.get("p95_ratio")),
        ]
        rows.append(row)

    n_overall = next(iter(systems.values()))["overall"]["n"] if systems else 0
    lines = [f"# Retrieval benchmark: {result['benchmark']}", ""]
    lines.append(
        f"Overall = {n_overall} questions"
        + (f", excluding {', '.join(excluded)} (reported apart)" if excluded else "")
        + ". R@Ntok = evidence recall within an N-token context; "
        + (f"MH = {_MULTI_HOP} only; " if has_mh else "")
        + f"R@5/R@10/MRR over hit source ids; timings relative to `{ref}`."
    )
    lines.append("")
    lines += _table(header, rows)

    cats: list[str] = []
    for s in systems.values():
        cats.extend(c for c in s["categories"] if c not in cats)
    first = next(iter(systems.values()), {"categories": {}})
    for b in _category_budgets(budgets):
        lines += ["", f"## Evidence recall per category at {b} tokens", ""]
        head = ["system"] + [
            f"{c} (n={first['categories'].get(c, {}).get('n', 0)}){' *' if c in excluded else ''}"
            for c in cats
        ]
        head.append("overall")
        body = [
            [name]
            + [_num(s["categories"].get(c, {}).get(f"budget_recall@{b}")) for c in cats]
            + [_num(s["overall"].get(f"budget_recall@{b}"))]
            for name, s in systems.items()
        ]
        lines += _table(head, body)
    if any(c in excluded for c in cats):
        lines += ["", "\\* reported apart, not part of overall."]

    extra = [m for m in cfg.get("metrics", []) if not m.startswith(("budget_recall@", "recall@", "mrr"))]
    if extra:
        lines += ["", "## Extra metrics (overall)", ""]
        lines += _table(
            ["system"] + extra, [[n] + [_num(s["overall"].get(m)) for m in extra] for n, s in systems.items()]
        )

    d = result["dataset"]
    ev = d["evidence"]
    lines += [
        "",
        "## Notes",
        "",
        f"- Data: {d['conversations']} conversation(s) ({', '.join(cfg['conversations'])}), "
        f"{d['messages']} messages, "
        f"{d['questions_asked']} questions asked, {d['questions_excluded_no_evidence']} left out for having "
        "no valid evidence.",
        f"- Evidence repairs: {ev['normalised']} normalised, {ev['split']} split, {ev['dropped']} dropped "
        f"({ev['dropped_malformed']} malformed, {ev['dropped_dangling']} dangling).",
        f"- k = {cfg['k']} hits per question; embedder `{cfg['embedder']}`. Hits are packed in rank order "
        "until the next one would overflow the budget (cl100k_base tokens), except for a system with its own "
        "budget fitting (`mnemis`: `fit_to_budget`), which fills the budget from the same ranked hits; its "
        "plain rank-order packing is reported as `prefix_recall@B` in the extra metrics, and its latency "
        "includes fitting the largest budget.",
        "- Embeddings shared between systems through a cache are charged to each system at their "
        "original cost.",
    ]
    return "\n".join(lines) + "\n"


def plot_recall_vs_budget(result: Mapping[str, Any], path: str | Path) -> Path:
    """Left: overall evidence recall vs budget, one line per system. Right: per-category
    recall at the largest budget, one bar per system.

    Raises:
        MissingDependencyError: matplotlib (the ``bench`` extra) is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependencyError("matplotlib", "bench") from exc

    budgets: list[int] = result["config"]["budgets"]
    systems: Mapping[str, Any] = result["systems"]
    excluded = set(result["dataset"].get("excluded_from_overall", []))
    # A Figure with its own Agg canvas never touches pyplot's global state or backend choice.
    fig = Figure(figsize=(13, 5), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2, width_ratios=[1, 1.4])

    for name, s in systems.items():
        ys = [s["overall"].get(f"budget_recall@{b}") for b in budgets]
        left.plot(budgets, [math.nan if y is None else y for y in ys], marker="o", label=name)
    left.set_xscale("log", base=2)
    left.set_xticks(budgets, [str(b) for b in budgets])
    left.set_xlabel("context budget (cl100k tokens)")
    left.set_ylabel("evidence recall (overall)")
    left.set_ylim(0, 1)
    left.grid(True, alpha=0.3)
    left.set_title(f"{result['benchmark']}: recall vs budget")
    left.legend(loc="lower right")

    top = max(budgets)
    cats: list[str] = ["overall"]
    for s in systems.values():
        cats.extend(c for c in s["categories"] if c not in cats)
    width = 0.8 / max(len(systems), 1)
    for i, (name, s) in enumerate(systems.items()):
        vals = []
        for c in cats:
            block = s["overall"] if c == "overall" else s["categories"].get(c, {})
            v = block.get(f"budget_recall@{top}")
            vals.append(0.0 if v is None else v)
        right.bar(
            [j + (i - (len(systems) - 1) / 2) * width for j in range(len(cats))], vals, width, label=name
        )
    right.set_xticks(range(len(cats)), [f"{c}\n(apart)" if c in excluded else c for c in cats])
    # Headroom above 1.0 keeps the legend off the bars.
    right.set_ylim(0, 1.15)
    right.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    right.set_ylabel(f"evidence recall at {top} tokens")
    right.set_title(f"per category at {top} tokens")
    right.grid(True, axis="y", alpha=0.3)
    right.legend(fontsize="small", ncols=min(len(systems), 6), loc="upper center")

    out = Path(path)
    fig.savefig(out, dpi=110)
    return out


def _clean(value: Any) -> Any:
    # JSON has no NaN: write null instead so every reader can load the file.
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_reports(result: Mapping[str, Any], out_dir: str | Path, *, plot: bool = True) -> dict[str, Path]:
    """Write every report file into ``out_dir`` (created if missing).

    Args:
        result: what :func:`.runner.run_benchmark` returned.
        out_dir: target folder.
        plot: also draw ``recall_vs_budget.png`` (needs matplotlib).

    Returns:
        Report kind -> path: ``json``, ``per_question``, ``markdown`` and, when drawn, ``png``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = {k: v for k, v in result.items() if k != "per_question"}
    paths = {
        "json": out / "results.json",
        "per_question": out / "per_question.jsonl",
        "markdown": out / "results.md",
    }
    paths["json"].write_text(json.dumps(_clean(summary), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    with paths["per_question"].open("w", encoding="utf-8") as f:
        for system, records in result.get("per_question", {}).items():
            for r in records:
                f.write(json.dumps(_clean({"system": system, **r}), allow_nan=False) + "\n")
    paths["markdown"].write_text(markdown_report(result), encoding="utf-8")
    if plot:
        paths["png"] = plot_recall_vs_budget(result, out / "recall_vs_budget.png")
    return paths
