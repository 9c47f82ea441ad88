"""The incremental protocol: one memory per scenario, fed one message per call in time order,
each question asked when the stream reaches its ``asked_at``; then the split-aware report."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import ConfigError
from mnemis_integrations.evaluation import EmbeddingCache, make_system, run_benchmark
from mnemis_integrations.evaluation.cli import main
from mnemis_integrations.evaluation.datasets import Question
from mnemis_integrations.evaluation.scenario_report import scenario_summary, write_scenario_reports
from mnemis_integrations.evaluation.scenarios import (
    EXTRA_METRICS,
    benchmark_from_scenarios,
    messages_until,
    scenario_from_dict,
)
from mnemis_integrations.evaluation.streaming import stream_plan
from mnemis_integrations.evaluation.structure import inspector

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def _at(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).isoformat()


def tiny(sid: str = "inc", split: str = "tune") -> dict:
    """Two topics, one reversal; questions asked mid-stream (two at the same time), at a
    message's exact time, and after the last message."""
    texts = [
        ("A", "The venue for the offsite is the lake house.", "offsite"),
        ("B", "Budget for the laptop refresh is ten thousand.", "laptops"),
        ("A", "Catering at the lake house is booked.", "offsite"),
        ("B", "Change of plan: the offsite moves to the city hotel.", "offsite"),
        ("A", "Laptops ordered, delivery in two weeks.", "laptops"),
        ("B", "The city hotel confirmed the rooms.", "offsite"),
    ]
    messages = [
        {"id": f"{sid}-m{i}", "speaker": sp, "text": tx, "timestamp": _at(24 * i), "topic": tp}
        for i, (sp, tx, tp) in enumerate(texts, start=1)
    ]

    def q(n, cls, at, evidence, current=(), superseded=()):
        return {
            "id": f"{sid}-q{n}",
            "question": f"question {n} about the offsite venue and laptops",
            "class": cls,
            "asked_at": at,
            "evidence": [f"{sid}-m{e}" for e in evidence],
            "current": [f"{sid}-m{e}" for e in current],
            "superseded": [f"{sid}-m{e}" for e in superseded],
            "answer": "x",
        }

    return {
        "id": sid,
        "language": "en",
        "title": "tiny",
        "split": split,
        "messages": messages,
        "questions": [
            q(1, "evolution", _at(24 * 4 + 1), [1, 4], [4], [1]),
            q(2, "relational", _at(24 * 2 + 5), [2]),
            q(3, "vague", _at(24 * 2 + 5), [1, 2]),
            q(4, "relational", _at(24 * 5), [5]),  # exactly at m5's time: m5 is in
            q(5, "vague", _at(24 * 9), [6]),
        ],
        "supersessions": [{"new": f"{sid}-m4", "old": [f"{sid}-m1", f"{sid}-m3"], "kind": "reversal"}],
    }


class Recorder:
    """A fake system that remembers each ingest call and what it held when each question came."""

    def __init__(self):
        self.calls: list[list[str]] = []
        self.held: dict[str, list[str]] = {}
        self.seen_at: dict[str, list[str]] = {}

    def ingest(self, messages, namespace):
        self.calls.append([m["id"] for m in messages])
        self.held.setdefault(namespace, []).extend(m["id"] for m in messages)

    def search(self, query, k, namespace):
        n = int(query.split()[1])
        self.seen_at[f"{namespace}-q{n}"] = list(self.held.get(namespace, []))
        return []


def _run(scenarios, systems, factory=make_system, **kw):
    bench = benchmark_from_scenarios(scenarios, protocol="incremental")
    return run_benchmark(
        bench,
        systems,
        budgets=[64, 256],
        k=5,
        embedder=HashingEmbedder(),
        extra_metrics=EXTRA_METRICS,
        factory=factory,
        **kw,
    )


def test_each_question_sees_exactly_the_messages_up_to_its_time_fed_one_per_call():
    scenario = scenario_from_dict(tiny())
    rec = Recorder()
    _run([scenario], ["rec"], factory=lambda name, emb: rec)
    assert rec.calls == [[m.id] for m in scenario.messages]  # one message per call, in time order
    for q in scenario.questions:
        assert rec.seen_at[q.id] == [m.id for m in messages_until(scenario, q.asked_at)], q.id
    assert rec.seen_at["inc-q4"][-1] == "inc-m5"
    assert len(rec.seen_at["inc-q2"]) == len(rec.seen_at["inc-q3"]) == 2


def test_one_memory_per_scenario_namespace():
    scenarios = [scenario_from_dict(tiny("s1")), scenario_from_dict(tiny("s2"))]
    rec = Recorder()
    result = _run(scenarios, ["rec"], factory=lambda name, emb: rec)
    assert {ns: len(ids) for ns, ids in rec.held.items()} == {"s1": 6, "s2": 6}
    assert result["config"]["feed"] == "stream"
    assert len(result["per_question"]["rec"]) == 10


def test_stream_plan_asks_in_time_order_and_refuses_unsorted_messages():
    ms = [{"id": "a", "timestamp": T0}, {"id": "b", "timestamp": T0 + timedelta(days=2)}]
    late = Question("late", "?", ("a",), "vague", extra={"asked_at": T0 + timedelta(days=3)})
    early = Question("early", "?", ("a",), "vague", extra={"asked_at": (T0 + timedelta(days=1)).isoformat()})
    untimed = Question("untimed", "?", ("a",), "vague")
    plan = [(k, x["id"] if k == "ingest" else x.id) for k, x in stream_plan(ms, [untimed, late, early])]
    assert plan == [("ingest", "a"), ("ask", "early"), ("ingest", "b"), ("ask", "late"), ("ask", "untimed")]
    with pytest.raises(ConfigError, match="time order"):
        list(stream_plan(ms[::-1], [late]))
    with pytest.raises(ConfigError, match="timestamp"):
        list(stream_plan([{"id": "x"}], []))


def test_baselines_fed_one_message_at_a_time_embed_each_unit_once():
    scenario = scenario_from_dict(tiny())
    cache = EmbeddingCache(HashingEmbedder())
    dense = make_system("dense", cache)
    for m in scenario.messages:
        dense.ingest([m.to_dict()], "ns")
    assert (cache.misses, cache.hits) == (6, 0)
    assert [h.source_ids for h in dense.search("city hotel rooms", 6, "ns")][0] == ("inc-m6",)


def test_mnemis_streams_and_the_report_splits_tune_from_holdout(tmp_path):
    scenarios = [scenario_from_dict(tiny("s1")), scenario_from_dict(tiny("s2", split="holdout"))]
    result = _run(scenarios, ["mnemis", "bm25"], inspect=inspector(scenarios))
    assert set(result["inspections"]) == {"mnemis"}  # baselines have no graph
    summary = scenario_summary(result, scenarios, protocol="incremental")
    assert summary["splits"] == ["tune", "holdout", "all"]
    for split, n in (("tune", 5), ("holdout", 5), ("all", 10)):
        for system in ("mnemis", "bm25"):
            agg = summary["scores"][split][system]
            assert agg["overall"]["n"] == n
            assert set(agg["categories"]) == {"vague", "relational", "evolution"}
    structure = summary["structure"]["mnemis"]["splits"]
    assert structure["all"]["scenarios"] == 2 and structure["holdout"]["scenarios"] == 1
    assert structure["all"]["updates"]["annotated"] == 2
    assert 0.0 < structure["all"]["purity"]["subtopic"]["purity"] <= 1.0
    paths = write_scenario_reports(summary, tmp_path)
    md = paths["scenario_markdown"].read_text()
    assert "split `holdout`" in md and "| mnemis | evolution (n=2) |" in md
    assert json.loads(paths["scenario_json"].read_text())["without_topics"] == []


def test_a_suite_of_two_languages_reports_each_ones_structure_apart(tmp_path):
    assert "languages" not in _summary([tiny("s1"), tiny("s2")])["structure"]["mnemis"]  # one language
    summary = _summary([tiny("s1"), {**tiny("s2", split="holdout"), "language": "zh"}])
    by_language = summary["structure"]["mnemis"]["languages"]
    assert set(by_language["all"]) == {"en", "zh"} and set(by_language["holdout"]) == {"zh"}
    assert by_language["all"]["zh"]["scenarios"] == 1
    splits = summary["structure"]["mnemis"]["splits"]
    assert by_language["all"]["zh"]["updates"] == splits["holdout"]["updates"]
    md = write_scenario_reports(summary, tmp_path)["scenario_markdown"].read_text()
    assert "### Per language" in md and "| mnemis | all, zh | 1 (1 / 1) |" in md


def _summary(raw: list[dict]) -> dict:
    scenarios = [scenario_from_dict(d) for d in raw]
    result = _run(scenarios, ["mnemis"], inspect=inspector(scenarios))
    return scenario_summary(result, scenarios, protocol="incremental")


def test_cli_runs_the_incremental_protocol_on_several_suites(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b.json"
    a.mkdir()
    (a / "s1.json").write_text(json.dumps(tiny("s1")), encoding="utf-8")
    plain = tiny("s2", split="holdout")
    plain.pop("supersessions")
    for m in plain["messages"]:
        m.pop("topic")
    b.write_text(json.dumps(plain), encoding="utf-8")
    out = tmp_path / "out"
    code = main(
        [
            "bench",
            "scenarios",
            "--suite",
            str(a),
            "--suite",
            str(b),
            "--systems",
            "bm25,dense",
            "--embedder",
            "hashing",
            "--budgets",
            "64,256",
            "--k",
            "5",
            "--out",
            str(out),
            "--no-plot",
        ]
    )
    assert code == 0
    assert "## Evidence recall, split `holdout`" in capsys.readouterr().out
    summary = json.loads((out / "scenarios.json").read_text())
    assert summary["protocol"] == "incremental"
    assert summary["without_topics"] == summary["without_supersessions"] == ["b.json"]
    assert json.loads((out / "results.json").read_text())["config"]["feed"] == "stream"
