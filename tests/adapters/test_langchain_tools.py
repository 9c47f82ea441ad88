"""The recall and remember tools: path-prefixed lines for the model, Documents as the artifact,
namespaces per run, and the langchain-tests tool suites."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest
from fakes import ScriptedChatModel, call_tool, echo_last_tool_result, empty_memory, seeded_memory
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from mnemis_integrations.errors import ConfigError
from mnemis_integrations.langchain import MnemisRetriever, create_recall_tool, create_remember_tool
from mnemis_integrations.langchain.tools import NO_RECALL

FIXED = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)


def tool_call(query: str, call_id: str = "c1") -> dict:
    return {"type": "tool_call", "id": call_id, "name": "recall_memory", "args": {"query": query}}


def test_tool_message_shows_paths_and_keeps_documents_as_artifact():
    tool = create_recall_tool(seeded_memory("u1"), namespace="u1", k=3)
    msg = tool.invoke(tool_call("refund timed out"))
    assert isinstance(msg, ToolMessage) and msg.tool_call_id == "c1"
    docs = msg.artifact
    assert len(docs) == 3 and all(isinstance(d, Document) for d in docs)
    items = msg.content.split("\n- ")
    assert len(items) == 3 and items[0].startswith("- ")
    for item, doc in zip(items, docs, strict=True):
        assert item.removeprefix("- ").startswith(
            f"[{doc.metadata['path_str']}] {doc.page_content.strip().splitlines()[0][:20]}"
        )
    assert all("score" in d.metadata and "source_ids" in d.metadata for d in docs)


async def test_tool_runs_async_with_the_same_content():
    tool = create_recall_tool(seeded_memory("u1"), namespace="u1", k=3)
    sync = tool.invoke(tool_call("beagle vet"))
    asyn = await tool.ainvoke(tool_call("beagle vet"))
    assert asyn.content == sync.content


def test_tool_says_nothing_was_found_for_an_empty_memory():
    msg = create_recall_tool(empty_memory(), namespace="u1").invoke(tool_call("anything"))
    assert (msg.content, msg.artifact) == (NO_RECALL, [])


def test_tool_namespace_can_come_from_the_run_config():
    mem = seeded_memory("u1")
    mem.add_messages(
        [{"id": "x1", "speaker": "user", "text": "Book a dentist visit for Tuesday."}], namespace="u2"
    )
    tool = create_recall_tool(mem, namespace=lambda cfg: cfg["configurable"]["user_id"])
    msg = tool.invoke(tool_call("dentist visit"), config={"configurable": {"user_id": "u2"}})
    assert msg.artifact and {s for d in msg.artifact for s in d.metadata["source_ids"]} == {"x1"}


def test_tool_accepts_a_ready_retriever_and_exposes_a_query_schema():
    retriever = MnemisRetriever(memory=seeded_memory("u1"), namespace="u1", k=1)
    tool = create_recall_tool(retriever, name="remember")
    assert tool.name == "remember"
    assert set(tool.tool_call_schema.model_json_schema()["properties"]) == {"query"}
    assert (
        len(
            tool.invoke(
                {"type": "tool_call", "id": "c", "name": "remember", "args": {"query": "tea"}}
            ).artifact
        )
        == 1
    )


# -- namespace per run, as LangMem's tools take it -----------------------------------------------


@dataclass
class UserContext:
    user_id: str


def test_template_namespace_is_filled_from_the_agent_runtime_context():
    """Before: the recall tool could only read ``configurable`` through a function; a ``"{user_id}"``
    template was taken as a namespace name and refused."""
    mem = seeded_memory("u1")
    mem.add_messages(
        [{"id": "x1", "speaker": "user", "text": "Book a dentist visit for Tuesday."}], namespace="u2"
    )
    model = ScriptedChatModel.of(call_tool("recall_memory", query="dentist visit"), echo_last_tool_result())
    agent = create_agent(
        model, tools=[create_recall_tool(mem, namespace="{user_id}")], context_schema=UserContext
    )
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "When is my dentist?"}]}, context=UserContext("u2")
    )
    tool_message = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert {s for d in tool_message.artifact for s in d.metadata["source_ids"]} == {"x1"}


def test_template_namespace_is_filled_from_configurable_outside_an_agent():
    mem = seeded_memory("team-acme")
    tool = create_recall_tool(mem, namespace="team-{team_id}", k=2)
    msg = tool.invoke(tool_call("refund timed out"), config={"configurable": {"team_id": "acme"}})
    assert len(msg.artifact) == 2 and all(d.metadata["namespace"] == "team-acme" for d in msg.artifact)


def test_a_run_without_the_templates_value_is_a_config_error_naming_it():
    tool = create_recall_tool(seeded_memory("u1"), namespace="{user_id}")
    with pytest.raises(ConfigError, match="user_id"):
        tool.invoke(tool_call("refund"))


@pytest.mark.parametrize("bad", ["{user id}", "{user_id", "users/{user_id}"])
def test_a_malformed_template_is_refused_when_the_tool_is_built(bad):
    with pytest.raises(ConfigError):
        create_recall_tool(empty_memory(), namespace=bad)


def test_remember_then_recall_in_an_agent_stays_in_the_users_namespace():
    mem = empty_memory()
    tools = [
        create_remember_tool(mem, namespace="{user_id}", clock=lambda: FIXED),
        create_recall_tool(mem, namespace="{user_id}"),
    ]
    model = ScriptedChatModel.of(
        call_tool("remember", content="User is allergic to peanuts."),
        "Noted.",
        call_tool("recall_memory", call_id="call-2", query="peanuts allergy"),
        echo_last_tool_result(),
    )
    agent = create_agent(model, tools=tools, context_schema=UserContext)
    user = UserContext("auth0|5f7c8ec7")
    agent.invoke({"messages": [{"role": "user", "content": "I'm allergic to peanuts"}]}, context=user)
    assert mem.namespaces() == ["auth0.7c5f7c8ec7"]
    [stored] = mem.messages("auth0.7c5f7c8ec7")
    assert (stored.speaker, stored.text, stored.timestamp) == (
        "memory",
        "User is allergic to peanuts.",
        FIXED,
    )
    out = agent.invoke({"messages": [{"role": "user", "content": "What am I allergic to?"}]}, context=user)
    assert "peanuts" in out["messages"][-1].text


def test_remembering_a_fact_twice_stores_it_once():
    mem = empty_memory()
    tool = create_remember_tool(mem, namespace="u1")
    first = tool.invoke({"content": "User drinks green tea."})
    again = tool.invoke({"content": "User drinks green tea. "})
    assert first.startswith("Remembered") and again.startswith("Already remembered")
    assert [m.text for m in mem.messages("u1")] == ["User drinks green tea."]


async def test_remember_runs_async():
    mem = empty_memory()
    await create_remember_tool(mem, namespace="u1").ainvoke({"content": "User plans a trip to Lisbon."})
    assert [m.text for m in mem.messages("u1")] == ["User plans a trip to Lisbon."]


# -- langchain-tests standard suites ---------------------------------------------------------------


@functools.cache
def shared_memory():
    return seeded_memory("u1")


class RecallToolParams:
    @property
    def tool_constructor(self):
        return create_recall_tool

    @property
    def tool_constructor_params(self) -> dict:
        return {"memory": shared_memory(), "namespace": "u1", "k": 3}

    @property
    def tool_invoke_params_example(self) -> dict:
        return {"query": "refund timed out"}


class RememberToolParams:
    @property
    def tool_constructor(self):
        return create_remember_tool

    @property
    def tool_constructor_params(self) -> dict:
        return {"memory": empty_memory(), "namespace": "u1", "clock": lambda: FIXED}

    @property
    def tool_invoke_params_example(self) -> dict:
        return {"content": "User drinks green tea every morning."}


class TestRecallToolUnit(RecallToolParams, ToolsUnitTests):
    pass


class TestRecallToolIntegration(RecallToolParams, ToolsIntegrationTests):
    pass


class TestRememberToolUnit(RememberToolParams, ToolsUnitTests):
    pass


class TestRememberToolIntegration(RememberToolParams, ToolsIntegrationTests):
    pass
