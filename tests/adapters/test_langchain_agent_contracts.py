"""Agent-facing contracts: what the model may send a memory tool is what its schema accepts, and a
call the schema lets through does not end the agent run."""

from __future__ import annotations

import pytest
from fakes import ScriptedChatModel, call_tool, echo_last_tool_result, empty_memory, seeded_memory
from langchain.agents import create_agent

from mnemis_integrations.langchain import create_recall_tool, create_remember_tool


def run_one_tool_call(tool, **args):
    model = ScriptedChatModel.of(call_tool(tool.name, **args), echo_last_tool_result(""))
    return create_agent(model, tools=[tool]).invoke({"messages": [{"role": "user", "content": "go"}]})


@pytest.mark.parametrize("query", ["", "   "])
def test_recall_schema_refuses_a_blank_query_and_the_agent_run_survives_it(query):
    tool = create_recall_tool(seeded_memory("u1"), namespace="u1")
    assert "query" in tool.tool_call_schema.model_json_schema()["required"]
    out = run_one_tool_call(tool, query=query)
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]
    assert out["messages"][2].status == "error"


def test_remember_schema_refuses_a_blank_fact_and_stores_nothing():
    mem = empty_memory()
    tool = create_remember_tool(mem, namespace="u1")
    out = run_one_tool_call(tool, content="   ")
    assert out["messages"][2].status == "error"
    assert mem.namespaces() == [] or mem.messages("u1") == []
