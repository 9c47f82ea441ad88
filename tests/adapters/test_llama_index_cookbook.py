"""The LlamaIndex cookbook scripts run offline (pytest-socket would fail any network call)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from llama_fakes import offline_settings

COOKBOOK = Path(__file__).resolve().parents[2] / "cookbook"


@pytest.fixture(autouse=True)
def _restore_settings():
    with offline_settings():  # the scripts set Settings themselves; put the test's back afterwards
        yield


def test_query_engine_cookbook_answers_from_the_pricing_conversation(capsys):
    result = runpy.run_path(str(COOKBOOK / "llamaindex_query_engine.py"))["main"]()
    out = capsys.readouterr().out

    assert "Sources, with how Mnemis found each:" in out
    assert "4" in result["sources"][0]["source_ids"]  # "Acme confirmed the Pro plan today"
    assert "Acme confirmed the Pro plan today." in result["answer"]
    assert [s["node_id"] for s in result["pg_sources"]] == [s["node_id"] for s in result["sources"]]


def test_agent_cookbook_recalls_the_refund_in_a_later_session(capsys):
    answers = runpy.run_path(str(COOKBOOK / "llamaindex_agent.py"))["main"]()
    out = capsys.readouterr().out

    assert answers[:2] == ["Noted. I will remember that."] * 2  # nothing to recall yet on Monday
    assert answers[2].startswith("From an earlier conversation:") and "timed out at the bank" in answers[2]
    assert "nothing was flushed" in out


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("llamaindex_query_engine.py", "Acme confirmed the Pro plan today"),
        ("llamaindex_agent.py", "timed out at the bank"),
    ],
)
def test_cookbook_script_runs_as_main(script, expected, capsys):
    runpy.run_path(str(COOKBOOK / script), run_name="__main__")
    assert expected in capsys.readouterr().out
