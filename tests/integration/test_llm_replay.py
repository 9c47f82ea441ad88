"""Replay tests: real HTTP exchanges between ChatOpenAI and llama.cpp's server running Gemma 3 270M.

The cassettes in ``cassettes/`` were recorded by ``scripts/record_cassettes.py``; here they are
only replayed (``record_mode="none"``), with sockets disabled. A 270M model answers badly, which
is the point: these tests show the repair, retry and fallback paths on real model output.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mnemis_integrations.core.builder.llm_builder import LLMBuildConfig
from mnemis_integrations.core.model import NodeKind

pytest.importorskip("langchain_openai")
vcr = pytest.importorskip("vcr")

ROOT = Path(__file__).resolve().parents[2]
CASSETTES = Path(__file__).parent / "cassettes"
if (
    not (CASSETTES / "cookbook_llm_builder.yaml").exists()
    or not (CASSETTES / "truncated_summaries.yaml").exists()
):
    pytest.skip("cassettes not recorded yet: run scripts/record_cassettes.py", allow_module_level=True)


@pytest.fixture(scope="module")
def cookbook():
    spec = importlib.util.spec_from_file_location(
        "cookbook_llm_builder", ROOT / "cookbook" / "llm_builder.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(autouse=True)
def _replay_only(monkeypatch):
    monkeypatch.delenv("MNEMIS_RECORD", raising=False)


def covered(mem, ns="acme") -> list[str]:
    return sorted(m for f in mem.graph(ns).nodes(NodeKind.FRAGMENT) for m in f.source_ids)


def test_cookbook_run_replays_every_recorded_exchange(cookbook):
    with cookbook.cassette() as cas:
        mem, builder = cookbook.build()
    assert cas.all_played and cas.play_count == len(cas)
    usage = builder.last_usage.to_dict()
    assert sum(s["calls"] for s in usage["steps"].values()) == len(cas)
    assert covered(mem) == [m["id"] for m in cookbook.CHAT]  # no message lost, whatever the model said
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    for step, s in usage["steps"].items():
        # Every batch either used a validated answer or fell back: nothing is left half-done.
        assert s["llm_batches"] + s["fallbacks"] >= 1, step
        assert s["calls"] <= (s["llm_batches"] + s["fallbacks"]) * (1 + cookbook.CONFIG.max_retries), step


def test_cookbook_prints_the_hierarchy(cookbook, capsys):
    result = cookbook.main()
    out = capsys.readouterr().out
    assert "- concept:" in out and "- subtopic:" in out and "- fragment:" in out
    assert "model usage:" in out and result["usage"]["steps"]


def test_truncated_real_answers_are_retried_then_fall_back_to_offline(cookbook):
    """Capped at 40 tokens, Gemma's summaries stop mid-JSON: the builder repairs what it can,
    retries once with the errors appended, and otherwise keeps the offline summaries."""
    cfg = LLMBuildConfig.only("summarise", max_retries=1, max_concurrency=1)
    with cookbook.cassette(CASSETTES / "truncated_summaries.yaml") as cas:
        mem, builder = cookbook.build(config=cfg, max_tokens=40)
    assert cas.all_played
    assert all(b'"finish_reason":"length"' in r["body"]["string"] for r in cas.responses)  # really cut off
    s = builder.last_usage.steps["summarise"]
    assert s.calls == len(cas) == 1 + s.retries
    # The cut-off JSON was closed and parsed: what failed is the schema (no keywords before the cut),
    # then the retry, so the step fell back to the offline summaries.
    assert s.errors and all(e.endswith("keywords: Field required") for e in s.errors)
    assert (s.retries, s.fallbacks, s.llm_batches) == (1, 1, 0)
    assert covered(mem) == [m["id"] for m in cookbook.CHAT]
    assert all(f.summary for f in mem.graph("acme").nodes(NodeKind.FRAGMENT))


def test_replay_refuses_an_unrecorded_request(cookbook):
    """A changed prompt must not reach the network: replay fails instead (and no model answer means
    fallback)."""
    cfg = LLMBuildConfig.only("segment", max_retries=0, max_concurrency=1)
    with cookbook.cassette() as cas:
        mem, builder = cookbook.build(messages=cookbook.CHAT[:2], config=cfg)
    s = builder.last_usage.steps["segment"]
    assert (s.calls, s.fallbacks) == (1, 1) and "CannotOverwriteExistingCassetteException" in s.errors[0]
    assert covered(mem) == ["1", "2"] and cas.play_count == 0
