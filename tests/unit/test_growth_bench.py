"""benchmarks/growth.py runs end to end on a tiny LoCoMo-shaped fixture (a smoke test: no timing asserted)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench_modules import bench_module

from mnemis_integrations.core.embedders import HashingEmbedder

ROOT = Path(__file__).resolve().parents[2]
TOPICS = [
    "the refund for order {i} timed out",
    "lunch on Friday at the noodle place {i}",
    "my sister's wedding in June, table {i}",
    "the hiking trail near the lake, mile {i}",
]


def _growth_module():
    return bench_module("growth")


def _fixture(path: Path) -> None:
    """Two conversations, 30 turns in all, LoCoMo's layout."""
    samples = []
    for c, (n_turns, date) in enumerate([(18, "1:56 pm on 8 May, 2023"), (12, "10:00 am on 2 June, 2023")]):
        turns = [
            {
                "speaker": "Ann" if i % 2 else "Ben",
                "dia_id": f"D1:{i + 1}",
                "text": TOPICS[i % 4].format(i=i).capitalize() + ".",
            }
            for i in range(n_turns)
        ]
        samples.append(
            {
                "sample_id": f"conv-{c}",
                "conversation": {
                    "speaker_a": "Ann",
                    "speaker_b": "Ben",
                    "session_1_date_time": date,
                    "session_1": turns,
                },
                "qa": [
                    {
                        "question": f"What happened with {TOPICS[q][:12]}?",
                        "answer": "x",
                        "evidence": ["D1:1"],
                        "category": 1,
                    }
                    for q in range(4)
                ],
            }
        )
    path.write_text(json.dumps(samples))


def test_growth_smoke_run_writes_json_and_markdown(tmp_path):
    g = _growth_module()
    data, out_json, out_md = tmp_path / "locomo.json", tmp_path / "g.json", tmp_path / "g.md"
    _fixture(data)

    msgs = g.cycle_messages(g.load_locomo_turns(str(data), 4)[0], 45)
    assert len({m["id"] for m in msgs}) == 45 and msgs[30]["id"] == "c1-conv-0:D1:1"
    assert msgs[30]["timestamp"] > max(m["timestamp"] for m in msgs[:30])

    rc = g.main(
        [
            "--locomo",
            str(data),
            "--sizes",
            "20,40",
            "--batch",
            "10",
            "--queries",
            "4",
            "--adds",
            "3",
            "--forgets",
            "2",
            "--embed-sample",
            "8",
            "--cache",
            "",
            "--json",
            str(out_json),
            "--md",
            str(out_md),
        ],
        inner=HashingEmbedder(),
    )
    assert rc == 0
    res = json.loads(out_json.read_text())
    assert [r["n"] for r in res["runs"]] == [20, 40]
    for r in res["runs"]:
        assert r["ingested"] == r["n"] and r["embed_misses"] == 0
        for key in (
            "bulk_s",
            "add1_p50_ms",
            "add1_base_p50_ms",
            "forget_p50_ms",
            "search_p50_ms",
            "reopen_search_s",
            "store_mb",
        ):
            assert isinstance(r[key], (int, float)) and math.isfinite(r[key]) and r[key] > 0, key
    assert res["runs"][1]["bulk_s_x"] > 0
    assert len(res["targets"]["sqlite"]) == 3
    assert "| add1_p50_ms |" in out_md.read_text()


def test_growth_records_did_not_finish_past_the_time_limit(tmp_path):
    g = _growth_module()
    data, out_json = tmp_path / "locomo.json", tmp_path / "g.json"
    _fixture(data)
    g.main(
        [
            "--locomo",
            str(data),
            "--sizes",
            "20",
            "--batch",
            "10",
            "--queries",
            "2",
            "--max-seconds",
            "0",
            "--embed-sample",
            "4",
            "--cache",
            "",
            "--json",
            str(out_json),
        ],
        inner=HashingEmbedder(),
    )
    res = json.loads(out_json.read_text())
    assert "did_not_finish" in res["runs"][0]
    assert not any(t["pass"] for t in res["targets"]["sqlite"])
