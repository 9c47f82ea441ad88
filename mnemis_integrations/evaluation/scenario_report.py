"""The scenario suite's own report: scores per split and class, and the graph's structure.

:func:`scenario_summary` reads a run (what :func:`~.runner.run_benchmark` returned, with
the :func:`~.structure.inspector` hook's ``inspections``) and the loaded scenarios, and
returns plain data: per split (``tune``, ``holdout``, and ``all``) and system, the means per
question class and overall; the structure figures per split and system; and which files
lacked the topic or supersession annotations. :func:`write_scenario_reports` writes it as
``scenarios.json`` and ``scenarios.md`` next to the generic report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import metrics, structure
from .report import _clean, _num, _table
from .scenario_data import QUESTION_CLASSES, SPLITS, Scenario

__all__ = ["markdown_scenario_report", "scenario_summary", "write_scenario_reports"]

ALL = "all"
CSF = "current_state_first"
CSF_BUDGETS = (256, 512)  # current state first also read on what these budgets show the reader


def _file_row(s: Scenario) -> dict[str, Any]:
    return {
        "scenario": s.id,
        "source": s.source,
        "split": s.split,
        "language": s.language,
        "messages": len(s.messages),
        "questions": len(s.questions),
        "topic_annotated_messages": len(s.topics),
        "supersessions": None if s.supersessions is None else len(s.supersessions),
    }


def _scores(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means overall and per class, plus how many questions decided current-state-first."""
    agg = metrics.aggregate(records)
    for block, rows in [(agg["overall"], records)] + [
        (agg["categories"][c], [r for r in records if r["category"] == c]) for c in agg["categories"]
    ]:
        block[f"{CSF}_n"] = sum(1 for r in rows if r["scores"].get(CSF) is not None)
    return agg


def _split_scores(result: Mapping[str, Any], split_of: Mapping[str, str], splits: Sequence[str]) -> dict:
    out: dict[str, dict[str, Any]] = {}
    for split in splits:
        out[split] = {
            name: _scores([r for r in records if split == ALL or split_of.get(r["question_id"]) == split])
            for name, records in result.get("per_question", {}).items()
        }
    return out


def _structure(result: Mapping[str, Any], splits: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, by_conv in result.get("inspections", {}).items():
        per = list(by_conv.values())
        in_split = {split: [p for p in per if split == ALL or p["split"] == split] for split in splits}
        out[name] = {
            "per_scenario": per,
            "splits": {split: structure.combine(held) for split, held in in_split.items()},
        }
        # The update judge reads cues and words of each language apart: a suite of two languages shows
        # each one's figures too (split -> language -> the same figures).
        languages = sorted({p.get("language") for p in per} - {None})
        if len(languages) > 1:
            out[name]["languages"] = {
                split: {
                    lang: structure.combine(mine)
                    for lang in languages
                    if (mine := [p for p in held if p.get("language") == lang])
                }
                for split, held in in_split.items()
            }
    return out


def scenario_summary(
    result: Mapping[str, Any], scenarios: Sequence[Scenario], *, protocol: str = ""
) -> dict[str, Any]:
    """The per-split, per-class and structure view of a scenario run (plain data, for JSON).

    Args:
        result: what :func:`~.runner.run_benchmark` returned for these scenarios.
        scenarios: the scenarios that were run (their splits and annotations).
        protocol: the protocol's name, for the report.
    """
    split_of = {q.id: s.split for s in scenarios for q in s.questions}
    splits = [sp for sp in SPLITS if any(s.split == sp for s in scenarios)] + [ALL]
    files = [_file_row(s) for s in scenarios]
    return {
        "protocol": protocol,
        "budgets": list(result["config"]["budgets"]),
        "splits": splits,
        "files": files,
        "without_topics": [f["source"] for f in files if not f["topic_annotated_messages"]],
        "without_supersessions": [f["source"] for f in files if f["supersessions"] is None],
        "scores": _split_scores(result, split_of, splits),
        "structure": _structure(result, splits),
    }


# ---------------------------------------------------------------------------- markdown


def _files_section(summary: Mapping[str, Any]) -> list[str]:
    rows = [
        [
            f["scenario"],
            f["source"],
            f["split"],
            f["language"],
            str(f["messages"]),
            str(f["questions"]),
            f"{f['topic_annotated_messages']}/{f['messages']}",
            "–" if f["supersessions"] is None else str(f["supersessions"]),
        ]
        for f in summary["files"]
    ]
    head = ["scenario", "file", "split", "lang", "messages", "questions", "topics", "supersessions"]
    lines = ["## Files", ""] + _table(head, rows)
    for key, what in (("without_topics", "message topics"), ("without_supersessions", "supersessions")):
        missing = summary[key]
        lines += ["", f"Without {what}: {', '.join(missing) if missing else 'none'}."]
    return lines


def _recall_section(summary: Mapping[str, Any]) -> list[str]:
    budgets = summary["budgets"]
    lines: list[str] = []
    for split in summary["splits"]:
        lines += ["", f"## Evidence recall, split `{split}`", ""]
        shown = [b for b in budgets if b in CSF_BUDGETS]
        head = ["system", "class"] + [f"R@{b}tok" for b in budgets] + ["CSF (n)"]
        head += [f"CSF within {' / '.join(map(str, shown))} tok"] if shown else []
        rows = []
        for name, agg in summary["scores"][split].items():
            blocks = [(c, agg["categories"][c]) for c in QUESTION_CLASSES if c in agg["categories"]]
            for cls, block in blocks + [("overall", agg["overall"])]:
                csf = f"{_num(block.get(CSF))} ({block.get(f'{CSF}_n', 0)})"
                within = [" / ".join(_num(block.get(f"{CSF}@{b}")) for b in shown)] if shown else []
                rows.append(
                    [name, f"{cls} (n={block['n']})"]
                    + [_num(block.get(f"budget_recall@{b}")) for b in budgets]
                    + [csf]
                    + within
                )
        lines += _table(head, rows)
    return lines


def _structure_rows(name: str, split: str, c: Mapping[str, Any]) -> list[str]:
    upd, pur = c.get("updates"), c.get("purity")
    sub = pur["subtopic"] if pur else {}
    con = pur["concept"] if pur else {}
    return [
        name,
        split,
        f"{c['scenarios']} ({upd['scenarios'] if upd else 0} / {pur['scenarios'] if pur else 0})",
        _num(c.get("concepts"), 1),
        _num(c.get("subtopics"), 1),
        f"{_num(upd['precision'])} ({upd['correct']}/{upd['edges']})" if upd else "–",
        _update_recall(upd),
        f"{upd['false_demotions']}/{upd['superseded_fragments']}" if upd else "–",
        _num(sub.get("purity")),
        _num(sub.get("inverse_purity")),
        _num(con.get("purity")),
        _num(con.get("inverse_purity")),
    ]


def _update_recall(upd: Mapping[str, Any] | None) -> str:
    if not upd:
        return "–"
    cell = f"{_num(upd['recall'])} ({upd['covered']}/{upd['annotated']}"
    within = upd.get("within_fragment", 0)
    return cell + (f"; {within} in one fragment)" if within else ")")


def _structure_section(summary: Mapping[str, Any]) -> list[str]:
    if not summary["structure"]:
        return ["", "## Structure", "", "No figures: no system with a graph, or protocol ask_at_time."]
    head = [
        "system",
        "split",
        "scenarios (annotated: supersessions / topics)",
        "concepts/scen",
        "subtopics/scen",
        "update P",
        "update R",
        "false demotions",
        "subtopic purity",
        "subtopic inv.",
        "concept purity",
        "concept inv.",
    ]
    rows = [
        _structure_rows(name, split, block["splits"][split])
        for name, block in summary["structure"].items()
        for split in summary["splits"]
    ]
    notes = [
        "",
        "Update P = correct fragment-to-fragment `updates` edges / all of them; update R = annotated "
        "supersessions covered by a correct edge (n in one fragment: annotated supersessions whose new "
        "and old messages one fragment holds, which no edge between fragments can cover); false "
        "demotions = superseded fragments holding no annotated old message / all superseded fragments. "
        "Purity over scenarios with the annotation (micro-averaged, weighted by messages); inv. = inverse "
        "purity (each topic's largest share in one node).",
    ]
    title = "## Structure (graph after each scenario is fully ingested)"
    by_language = [
        _structure_rows(name, f"{split}, {lang}", c)
        for name, block in summary["structure"].items()
        for split, langs in block.get("languages", {}).items()
        for lang, c in langs.items()
    ]
    languages = ["", "### Per language", ""] + _table(head, by_language) if by_language else []
    return ["", title, ""] + _table(head, rows) + notes + languages + _per_scenario_section(summary)


def _per_scenario_section(summary: Mapping[str, Any]) -> list[str]:
    head = [
        "system",
        "scenario",
        "split",
        "concepts",
        "subtopics",
        "fragments",
        "update P",
        "update R",
        "false demotions",
        "subtopic purity",
        "concept purity",
    ]
    rows = []
    for name, block in summary["structure"].items():
        for p in block["per_scenario"]:
            upd, pur = p.get("updates"), p.get("purity")
            rows.append(
                [
                    name,
                    p["scenario"],
                    p["split"],
                    str(p["concepts"]),
                    str(p["subtopics"]),
                    str(p["fragments"]),
                    f"{_num(upd['precision'])} ({upd['correct']}/{upd['edges']})" if upd else "–",
                    _update_recall(upd),
                    f"{upd['false_demotions']}/{upd['superseded_fragments']}" if upd else "–",
                    _num(pur["subtopic"]["purity"]) if pur else "–",
                    _num(pur["concept"]["purity"]) if pur else "–",
                ]
            )
    return ["", "### Per scenario", ""] + _table(head, rows)


def markdown_scenario_report(summary: Mapping[str, Any]) -> str:
    """Render :func:`scenario_summary` as Markdown."""
    lines = [
        "# Scenario suite: per split and class",
        "",
        f"Protocol `{summary['protocol']}`. R@Ntok = evidence recall within an N-token context; "
        "CSF = current-state-first over the questions that name a current and a superseded state "
        "(n = questions where either state was retrieved); within N tok: the same, read on what an N-token "
        "budget shows the reader (the engine's fitting for Mnemis, rank-order packing for the flat systems).",
        "",
    ]
    lines += _files_section(summary)
    lines += _recall_section(summary)
    lines += _structure_section(summary)
    return "\n".join(lines) + "\n"


def write_scenario_reports(summary: Mapping[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write ``scenarios.json`` and ``scenarios.md`` into ``out_dir`` (created if missing)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"scenario_json": out / "scenarios.json", "scenario_markdown": out / "scenarios.md"}
    paths["scenario_json"].write_text(
        json.dumps(_clean(dict(summary)), indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    paths["scenario_markdown"].write_text(markdown_scenario_report(summary), encoding="utf-8")
    return paths
