"""Two runs compared question by question (`evaluation.paired`, `mnemis bench compare`): the interval
resamples conversations, so a gain carried by one conversation is not called more than luck."""

from __future__ import annotations

import json

import pytest

from mnemis_integrations.errors import ConfigError
from mnemis_integrations.evaluation.cli import main
from mnemis_integrations.evaluation.paired import QuestionScores, load_question_scores, paired_bootstrap


def _run(values: dict[str, float | None], metric: str = "mrr") -> dict[str, QuestionScores]:
    """Question ids ``c<k>-q<j>`` -> one metric's value, each in conversation ``c<k>``."""
    return {q: QuestionScores(q.split("-q")[0], "vague", {metric: v}) for q, v in values.items()}


def _grid(conversations: int, per: int, value: float) -> dict[str, float | None]:
    return {f"c{c}-q{j}": value for c in range(conversations) for j in range(per)}


def test_identical_runs_differ_by_nothing():
    runs = _grid(6, 3, 0.5)
    d = paired_bootstrap(_run(runs), _run(runs), "mrr")
    assert (d.delta, d.low, d.high, d.up, d.down) == (0.0, 0.0, 0.0, 0, 0)
    assert not d.significant


def test_a_gain_on_every_conversation_is_significant():
    base = _grid(8, 2, 0.5)
    other = {q: 0.6 for q in base}
    d = paired_bootstrap(_run(base), _run(other), "mrr")
    assert d.delta == pytest.approx(0.1)
    assert d.low == pytest.approx(0.1) and d.high == pytest.approx(0.1)
    assert d.significant and d.up == 16 and d.down == 0


def test_a_gain_carried_by_one_conversation_is_not_significant():
    base = _grid(10, 2, 0.0)
    other = dict(base, **{"c0-q0": 1.0, "c0-q1": 1.0})
    d = paired_bootstrap(_run(base), _run(other), "mrr", draws=4000)
    assert d.delta == pytest.approx(0.1)
    # Many draws leave conversation c0 out: then nothing differs.
    assert d.low == 0.0 and d.high > 0.1
    assert not d.significant


def test_questions_a_metric_does_not_apply_to_are_left_out():
    base = {"c0-q0": 1.0, "c0-q1": None, "c1-q0": 0.0}
    other = {"c0-q0": 1.0, "c0-q1": 1.0, "c1-q0": 1.0, "c2-q0": 1.0}  # c2 is in one run only
    d = paired_bootstrap(
        _run(base, "current_state_first"), _run(other, "current_state_first"), "current_state_first"
    )
    assert (d.questions, d.conversations) == (2, 2)
    assert d.base == 0.5 and d.other == 1.0


def test_the_same_seed_gives_the_same_interval():
    base = {f"c{c}-q0": c / 10 for c in range(7)}
    other = {q: v + (0.2 if q < "c3" else -0.05) for q, v in base.items()}
    a = paired_bootstrap(_run(base), _run(other), "mrr", seed=3)
    b = paired_bootstrap(_run(base), _run(other), "mrr", seed=3)
    assert (a.low, a.high) == (b.low, b.high)
    assert a.low < a.delta < a.high


def test_bad_requests_are_refused():
    runs = _run(_grid(2, 1, 1.0))
    with pytest.raises(ConfigError, match="no question"):
        paired_bootstrap(runs, runs, "recall@5")
    with pytest.raises(ConfigError, match="draws"):
        paired_bootstrap(runs, runs, "mrr", draws=0)
    with pytest.raises(ConfigError, match="confidence"):
        paired_bootstrap(runs, runs, "mrr", confidence=1.0)


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_both_row_formats_are_read_under_the_bench_names(tmp_path):
    sweep = _write(
        tmp_path / "sweep.jsonl",
        [
            {
                "question_id": "indep_villa-q05",
                "split": "holdout",
                "class": "evolution",
                "R@256": 0.5,
                "CSF": None,
            }
        ],
    )
    bench = _write(
        tmp_path / "bench.jsonl",
        [
            {
                "system": s,
                "question_id": "conv-26:q0",
                "conversation": "conv-26",
                "category": 2,
                "scores": {"mrr": v},
            }
            for s, v in (("mnemis", 1.0), ("dense", 0.5))
        ],
    )
    got = load_question_scores(sweep)["indep_villa-q05"]
    assert (got.conversation, got.category) == ("indep_villa", "evolution")
    assert got.scores == {"budget_recall@256": 0.5, "current_state_first": None}
    assert load_question_scores(bench, "dense")["conv-26:q0"] == QuestionScores("conv-26", "2", {"mrr": 0.5})
    with pytest.raises(ConfigError, match="several systems"):
        load_question_scores(bench)
    with pytest.raises(ConfigError, match="no rows of system"):
        load_question_scores(bench, "chunk3")
    with pytest.raises(ConfigError, match="no per-question rows"):
        load_question_scores(tmp_path / "missing")


def test_bench_compare_prints_each_metric_and_marks_a_clear_difference(tmp_path, capsys):
    rows = [
        {
            "system": s,
            "question_id": f"c{c}-q{j}",
            "conversation": f"c{c}",
            "category": "vague",
            "scores": {"budget_recall@256": 0.4 if s == "dense" else 0.6, "mrr": 0.5},
        }
        for s in ("mnemis", "dense")
        for c in range(5)
        for j in range(2)
    ]
    path = _write(tmp_path / "per_question.jsonl", rows)
    code = main(
        ["bench", "compare", str(tmp_path), str(path), "--system", "dense", "--other-system", "mnemis"]
    )
    out = capsys.readouterr().out
    assert code == 0
    recall = next(line for line in out.splitlines() if line.startswith("| budget_recall@256"))
    assert "+0.2000 *" in recall and "10 / 0" in recall
    mrr = next(line for line in out.splitlines() if line.startswith("| mrr"))
    assert "+0.0000 |" in mrr and "*" not in mrr


def test_an_ask_at_time_run_is_resampled_by_scenario_not_by_question_step(tmp_path):
    """Protocol ask_at_time names each step's memory "<scenario>@<step>": its questions are read as
    their scenario's, so two steps of one scenario are drawn together."""
    run = tmp_path / "aat"
    run.mkdir()
    rows = [
        {"system": "mnemis", "question_id": f"indep_villa-q0{i}", "conversation": f"indep_villa@0{i}",
         "category": "vague", "scores": {"mrr": 1.0}}
        for i in (1, 2)
    ]  # fmt: skip
    (run / "per_question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = load_question_scores(run)
    assert {q.conversation for q in got.values()} == {"indep_villa"}
