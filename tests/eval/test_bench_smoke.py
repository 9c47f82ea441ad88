"""The benchmark harness end to end on a tiny invented LoCoMo-shaped fixture, offline and fast."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import ConfigError
from mnemis_integrations.evaluation import (
    Benchmark,
    Conversation,
    EmbeddingCache,
    Question,
    load_locomo,
    make_system,
    run_benchmark,
    write_reports,
)
from mnemis_integrations.evaluation.baselines import tokenize
from mnemis_integrations.evaluation.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "tiny_locomo.json"
BASELINES = ["bm25", "dense", "hybrid", "chunk3"]


def _in_unit_range(value):
    return value is None or 0.0 <= value <= 1.0


def test_locomo_reader_builds_messages_with_captions_and_minute_steps():
    bench = load_locomo(FIXTURE)
    conv = bench.conversations[0]
    assert [m["id"] for m in conv.messages[:2]] == ["D1:1", "D1:2"]
    assert conv.messages[1]["timestamp"] == datetime(2024, 3, 3, 9, 16)
    assert conv.messages[4]["text"].endswith(" [shares an image: a photo of a blue ceramic bowl on a table]")
    assert conv.turn_texts["D1:5"] == "Here is the bowl I made at the trial lesson."
    assert conv.messages[5]["session_date"] == "17 March 2024"
    ev = bench.evidence
    assert (ev.normalised, ev.split, ev.dropped_malformed, ev.dropped_dangling) == (2, 2, 1, 1)
    assert ev.questions_without_evidence == 1


def test_unknown_system_error_lists_every_valid_name():
    with pytest.raises(ConfigError) as info:
        make_system("bm99", HashingEmbedder())
    for name in ("mnemis", "bm25", "dense", "hybrid", "chunk3"):
        assert name in str(info.value)


def test_tokenize_keeps_chinese_bigrams_and_drops_english_stopwords():
    assert tokenize("What did she say about 退款超时?") == ["say", "退款", "款超", "超时"]


def test_embedding_cache_charges_reused_vectors_at_their_cost():
    cache = EmbeddingCache(HashingEmbedder())
    first = cache.embed_passages(["refund timed out", "lunch plans"])
    again = cache.embed_passages(["lunch plans"])
    assert (cache.misses, cache.hits) == (2, 1)
    assert cache.credit_s > 0
    assert (again[0] == first[1]).all()
    assert cache.id == "hashing-256"  # the protocol's attributes are forwarded


def test_embedding_cache_kept_on_disk_charges_a_later_run_what_the_vectors_first_cost(tmp_path):
    path = tmp_path / "vectors.npz"
    first = EmbeddingCache(HashingEmbedder())
    made = first.embed_passages(["refund timed out", "退款超时了"])
    first.embed_queries(["refund timed out"])
    first.save(path)

    later = EmbeddingCache(HashingEmbedder())
    assert later.load(path) == 3  # passages and queries are kept apart
    again = later.embed_passages(["退款超时了", "refund timed out"])
    assert (later.misses, later.hits) == (0, 2)
    assert (again[0] == made[1]).all() and (again[1] == made[0]).all()
    cost = {text: spent for (kind, text), (_, spent) in first._store.items() if kind == "p"}
    assert later.credit_s == pytest.approx(cost["退款超时了"] + cost["refund timed out"])

    # saving adds to the file: what another run wrote there stays
    other = EmbeddingCache(HashingEmbedder())
    other.embed_passages(["lunch plans"])
    other.save(path)
    assert EmbeddingCache(HashingEmbedder()).load(path) == 4

    # another embedder's vectors are not this one's
    assert EmbeddingCache(HashingEmbedder(dim=64)).load(path) == 0
    assert EmbeddingCache(HashingEmbedder()).load(tmp_path / "none.npz") == 0


def test_bench_cli_with_a_vector_cache_embeds_nothing_twice_and_scores_the_same(
    tmp_path, capsys, monkeypatch
):
    def run(out, *extra):
        args = ["bench", "locomo", "--data", str(FIXTURE), "--systems", "dense,mnemis", "--embedder"]
        assert (
            main([*args, "hashing", "--budgets", "16,64", "--k", "8", "--out", str(out), "--no-plot", *extra])
            == 0
        )
        rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
        return [{k: v for k, v in row.items() if k != "latency_ms"} for row in rows]  # all but the clock

    cache = tmp_path / "vectors.npz"
    plain = run(tmp_path / "plain")
    filled = run(tmp_path / "filled", "--vector-cache", str(cache))
    held = EmbeddingCache(HashingEmbedder()).load(cache)

    embedded = []
    for name in ("embed_passages", "embed_queries"):
        real = getattr(HashingEmbedder, name)
        monkeypatch.setattr(
            HashingEmbedder, name, lambda self, texts, real=real: embedded.extend(texts) or real(self, texts)
        )
    capsys.readouterr()
    reused = run(tmp_path / "reused", "--vector-cache", str(cache))
    assert f"{held} vectors read" in capsys.readouterr().err
    assert held > 0 and set(embedded) == {"warm up"}  # only the model's warm-up, which bypasses the cache
    assert plain and plain == filled == reused


def test_chunk3_hits_hold_three_turn_windows_of_one_session():
    bench = load_locomo(FIXTURE)
    conv = bench.conversations[0]
    chunk = make_system("chunk3", EmbeddingCache(HashingEmbedder()))
    chunk.ingest(conv.messages, conv.id)
    hits = chunk.search("pottery class teacher Marguerite", 10, conv.id)
    assert {h.source_ids for h in hits} == {
        ("D1:1", "D1:2", "D1:3"),
        ("D1:4", "D1:5"),
        ("D2:1", "D2:2", "D2:3"),
        ("D2:4",),
        ("D3:1", "D3:2", "D3:3"),
    }
    assert hits[0].text.startswith("[")


def test_bench_cli_writes_reports_with_scores_in_unit_range(tmp_path, capsys):
    out = tmp_path / "bench"
    code = main(
        [
            "bench",
            "locomo",
            "--data",
            str(FIXTURE),
            "--systems",
            ",".join(BASELINES),
            "--embedder",
            "hashing",
            "--budgets",
            "16,32,64",
            "--k",
            "8",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    assert "| chunk3 |" in capsys.readouterr().out

    result = json.loads((out / "results.json").read_text())
    assert result["dataset"]["evidence"]["split"] == 2
    assert result["dataset"]["questions_excluded_no_evidence"] == 1
    assert list(result["systems"]) == BASELINES
    for block in result["systems"].values():
        assert block["overall"]["n"] == 7  # 9 questions, minus 1 without evidence, minus 1 adversarial
        assert block["categories"]["adversarial"]["n"] == 1
        for scores in [block["overall"], *block["categories"].values()]:
            assert all(_in_unit_range(v) for k, v in scores.items() if k != "n")
        assert block["timing"]["latency_ms_p95"] >= block["timing"]["latency_ms_p50"] >= 0
    assert result["systems"]["dense"]["timing"]["ingest_ratio"] == 1.0

    md = (out / "results.md").read_text()
    assert md.count("\n| ") >= 3 * (1 + len(BASELINES))
    assert (out / "recall_vs_budget.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = (out / "per_question.jsonl").read_text().splitlines()
    assert len(lines) == 8 * len(BASELINES)


def test_runner_takes_generic_questions_with_string_categories_and_extra_metrics(tmp_path):
    """The scenario suite reuses the runner: free-text categories, extra fields, extra metrics."""
    t0 = datetime(2024, 1, 1, 9, 0)
    messages = [
        {"id": "m1", "speaker": "user", "text": "The offline launch plan is set for June.", "timestamp": t0},
        {"id": "m2", "speaker": "user", "text": "Lunch was great today.", "timestamp": t0.replace(hour=10)},
        {
            "id": "m3",
            "speaker": "user",
            "text": "We dropped the offline plan; launch goes online.",
            "timestamp": t0.replace(day=5),
        },
    ]
    q = Question("s1:q0", "What is the launch plan now?", ("m1", "m3"), "evolution", extra={"current": "m3"})

    def current_first(question, hits, conversation):
        return 1.0 if hits and question.extra["current"] in hits[0].source_ids else 0.0

    bench = Benchmark(
        "scenarios", [Conversation("s1", messages, [q], turn_texts={m["id"]: m["text"] for m in messages})]
    )
    result = run_benchmark(
        bench,
        ["bm25", "dense"],
        budgets=[64],
        k=3,
        embedder=HashingEmbedder(),
        extra_metrics={"current_state_first": current_first},
    )
    for block in result["systems"].values():
        assert list(block["categories"]) == ["evolution"]
        assert _in_unit_range(block["overall"]["current_state_first"])
        assert block["overall"]["budget_recall@64"] == 1.0
    paths = write_reports(result, tmp_path, plot=False)
    assert "current_state_first" in paths["markdown"].read_text()


def test_a_per_budget_metric_is_also_read_on_what_each_budget_shows():
    """An extra metric marked ``per_budget`` is scored on the list and, as ``<name>@<budget>``, on the
    hits that fit each budget (rank-order packing for a flat system): a hit left out counts for none."""
    t0 = datetime(2024, 1, 1, 9, 0)
    long = "The launch plan was set for June with the offline team, the venue and the budget agreed. " * 3
    messages = [
        {"id": "m1", "speaker": "user", "text": long, "timestamp": t0},
        {"id": "m2", "speaker": "user", "text": "Launch plan now online.", "timestamp": t0.replace(day=5)},
    ]
    q = Question("s1:q0", "What is the launch plan now?", ("m1", "m2"), "evolution")

    def hits_seen(question, hits, conversation):
        return float(len(hits))

    hits_seen.per_budget = True
    bench = Benchmark(
        "scenarios", [Conversation("s1", messages, [q], turn_texts={m["id"]: m["text"] for m in messages})]
    )
    seen = {"seen": hits_seen}
    result = run_benchmark(
        bench, ["dense"], budgets=[10, 2000], k=2, embedder=HashingEmbedder(), extra_metrics=seen
    )
    overall = result["systems"]["dense"]["overall"]
    assert overall["seen"] == 2.0 and overall["seen@2000"] == 2.0
    assert overall["seen@10"] < 2.0  # the long message does not fit 10 tokens


def test_a_system_with_its_own_budget_fitting_is_scored_on_it_and_its_plain_packing_is_reported():
    from types import SimpleNamespace

    t0 = datetime(2024, 1, 1, 9, 0)
    messages = [{"id": "m1", "speaker": "user", "text": "The launch moved to June.", "timestamp": t0}]
    bench = Benchmark(
        "fit",
        [
            Conversation(
                "s1",
                messages,
                [Question("s1:q0", "When is the launch?", ("m1",), 1)],
                turn_texts={"m1": "The launch moved to June."},
            )
        ],
    )
    whole = SimpleNamespace(text="filler " * 40 + "The launch moved to June.", source_ids=("m1",))
    narrowed = SimpleNamespace(text="The launch moved to June.", source_ids=("m1",))
    fitted_budgets = []

    class Fitting:
        def ingest(self, messages, namespace):
            pass

        def search(self, query, k, namespace):
            return [whole]

        def fit(self, hits, budget, query):
            fitted_budgets.append(budget)
            return [narrowed] if budget < 40 else list(hits)

    result = run_benchmark(
        bench,
        ["fitting", "bm25"],
        budgets=[16, 64],
        k=3,
        embedder=HashingEmbedder(),
        factory=lambda name, emb: Fitting() if name == "fitting" else make_system(name, emb),
    )
    fitting, bm25 = result["systems"]["fitting"]["overall"], result["systems"]["bm25"]["overall"]
    assert fitted_budgets == [16, 64]
    assert (fitting["budget_recall@16"], fitting["prefix_recall@16"]) == (1.0, 0.0)
    assert (fitting["budget_recall@64"], fitting["prefix_recall@64"]) == (1.0, 1.0)
    assert "prefix_recall@16" not in bm25 or bm25["prefix_recall@16"] is None
