"""The LangChain cookbook scripts run offline and print recall with hierarchy paths."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("missing", ["langchain_openai", "vcr"])
def test_llm_builder_cookbook_fails_when_a_dependency_is_missing(missing):
    """Before: without langchain-openai or vcrpy the script printed a hint and exited 0, so CI's
    loop over the cookbook passed without running it. After: exit status 1, the hint on stderr."""
    hide = (
        f"import runpy, sys; sys.modules[{missing!r}] = None; "
        f"runpy.run_path({str(COOKBOOK / 'llm_builder.py')!r}, run_name='__main__')"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(COOKBOOK.parent), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, env=env)
    assert done.returncode == 1
    assert "pip install 'mnemis-integrations[llm]' vcrpy" in done.stderr and done.stdout == ""
