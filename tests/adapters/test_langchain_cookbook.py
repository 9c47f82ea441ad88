"""The LangChain cookbook scripts run offline and print recall with hierarchy paths."""

from __future__ import annotations

import runpy
from pathlib import Path

COOKBOOK = Path(__file__).resolve().parents[2] / "cookbook"


def run_script(name: str) -> dict:
    return runpy.run_path(str(COOKBOOK / name), run_name="cookbook")["run"]()


def test_retriever_chain_cookbook_prints_paths_and_answers_from_memory(capsys):
    result = run_script("langchain_retriever_chain.py")
    out = capsys.readouterr().out
    top = result["docs"][0].metadata
    assert f"[{top['path_str']}]" in out and top["path"]
    assert {"m1", "m2"} & set(top["source_ids"])
    assert result["answer"].startswith("From what you told me earlier: [")
    assert {"m4", "m5"} & set(result["later"].metadata["source_ids"])


def test_agent_cookbook_recalls_monday_on_friday_through_middleware_tool_and_store(capsys):
    result = run_script("langchain_agent.py")
    out = capsys.readouterr().out
    assert "- [" in result["injected"] and "order 42" in result["injected"]
    assert result["tool_message"].artifact and result["tool_message"].text.startswith("- [")
    assert result["facts"][0].key == "contact" and result["facts"][0].path
    assert f"[{result['facts'][0].path_str}]" in out
    assert len(result["memory"].messages("u1")) == 4
