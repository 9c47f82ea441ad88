"""MnemisMemoryMiddleware inside create_agent: recall with paths in the system prompt, turns saved."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import pytest
from fakes import ScriptedChatModel, call_tool, echo_last_tool_result, empty_memory, seeded_memory
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langgraph.checkpoint.memory import InMemorySaver

from mnemis_integrations.langchain import MnemisMemoryMiddleware, create_recall_tool
from mnemis_integrations.langchain._convert import format_hits
from mnemis_integrations.langchain.middleware import DEFAULT_HEADER

FIXED = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)
QUESTION = "Has my refund for order 1234 arrived?"


def texts(mem, namespace):
    return [m.text for m in mem.messages(namespace)]


def make_agent(mem, model, **kwargs):
    middleware = MnemisMemoryMiddleware(
        mem, namespace=kwargs.pop("namespace", "u1"), k=3, clock=lambda: FIXED
    )
    return create_agent(
        model,
        tools=kwargs.pop("tools", []),
        system_prompt="You are a helpful assistant.",
        middleware=[middleware],
        **kwargs,
    )


def test_system_prompt_gets_recall_with_hierarchy_paths():
    mem = seeded_memory("u1")
    expected = mem.search(QUESTION, k=3, namespace="u1")  # before the turn is saved
    model = ScriptedChatModel.of("Not yet, sorry.")
    make_agent(mem, model).invoke({"messages": [{"role": "user", "content": QUESTION}]})

    assert expected and all(hit.path for hit in expected)
    assert model.last_system_prompt == "You are a helpful assistant.\n\n" + format_hits(
        expected, header=DEFAULT_HEADER
    )
    assert f"- [{expected[0].path_str}] " in model.last_system_prompt


def test_recall_does_not_enter_the_agent_state():
    mem = seeded_memory("u1")
    out = make_agent(mem, ScriptedChatModel.of("Not yet.")).invoke(
        {"messages": [{"role": "user", "content": QUESTION}]}
    )
    assert [m.type for m in out["messages"]] == ["human", "ai"]
    assert all(DEFAULT_HEADER not in m.text for m in out["messages"])


def test_each_turn_is_saved_to_memory():
    mem = seeded_memory("u1")
    before = len(mem.messages("u1"))
    make_agent(mem, ScriptedChatModel.of("Not yet, sorry.")).invoke(
        {"messages": [{"role": "user", "content": QUESTION}]}
    )
    saved = mem.messages("u1")[before:]
    assert [(m.speaker, m.text) for m in saved] == [("user", QUESTION), ("assistant", "Not yet, sorry.")]


def test_a_new_memory_gets_its_first_turn_and_no_recall_block():
    mem = empty_memory()
    model = ScriptedChatModel.of("Hello!")
    make_agent(mem, model).invoke({"messages": [{"role": "user", "content": "Hi, I'm Ana."}]})
    assert model.last_system_prompt == "You are a helpful assistant."
    assert texts(mem, "u1") == ["Hi, I'm Ana.", "Hello!"]


def test_turns_in_one_thread_are_saved_once_each():
    mem = empty_memory()
    model = ScriptedChatModel.of("Noted, Ana.", "You like green tea.")
    agent = make_agent(mem, model, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [{"role": "user", "content": "I'm Ana and I love green tea."}]}, cfg)
    agent.invoke({"messages": [{"role": "user", "content": "What do I like to drink?"}]}, cfg)
    assert texts(mem, "u1") == [
        "I'm Ana and I love green tea.",
        "Noted, Ana.",
        "What do I like to drink?",
        "You like green tea.",
    ]
    # the first turn is in the thread's window: recalling it would only repeat it
    assert model.last_system_prompt == "You are a helpful assistant."


def test_recall_leaves_out_what_the_window_already_shows_and_keeps_the_rest():
    """Before: a thread's own earlier turns came back as memories in the system prompt, the
    conversation twice over (the LlamaIndex memory block already left them out). Now both do."""
    mem = empty_memory()
    old = {"id": "old-1", "speaker": "user", "text": "I love green tea.", "timestamp": "2023-01-01T09:00:00Z"}
    mem.add_messages([old], namespace="u1")
    model = ScriptedChatModel.of("Noted.", "You like green tea.")
    agent = make_agent(mem, model, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "new"}}
    agent.invoke({"messages": [{"role": "user", "content": "My cat is called Miso."}]}, cfg)
    agent.invoke({"messages": [{"role": "user", "content": "What do I like to drink? My cat Miso?"}]}, cfg)
    recalled = model.last_system_prompt.split(DEFAULT_HEADER, 1)[-1]
    assert DEFAULT_HEADER in model.last_system_prompt and "green tea" in recalled  # said long before
    assert "Miso" not in recalled  # this thread's own turn, in the window


def test_tool_calls_and_tool_results_are_not_saved_but_the_answer_is():
    mem = seeded_memory("u1")
    before = len(mem.messages("u1"))
    model = ScriptedChatModel.of(call_tool("recall_memory", query="beagle vet"), echo_last_tool_result())
    agent = make_agent(mem, model, tools=[create_recall_tool(mem, namespace="u1", k=2)])
    out = agent.invoke({"messages": [{"role": "user", "content": "When is Rex's vet visit?"}]})
    assert model.calls == 2
    saved = mem.messages("u1")[before:]
    assert [m.speaker for m in saved] == ["user", "assistant"]
    assert saved[1].text == out["messages"][-1].text and saved[1].text.startswith("From memory: - [")


@dataclass
class UserContext:
    user_id: str


def test_namespace_can_come_from_the_runtime_context():
    mem = seeded_memory("u1")
    model = ScriptedChatModel.of("ok")
    agent = make_agent(mem, model, namespace=lambda rt: rt.context.user_id, context_schema=UserContext)
    agent.invoke(
        {"messages": [{"role": "user", "content": "Plan my Lisbon trip"}]}, context=UserContext("u7")
    )
    assert model.last_system_prompt == "You are a helpful assistant."  # u7 has no memory yet
    assert texts(mem, "u7") == ["Plan my Lisbon trip", "ok"]


async def test_async_agent_recalls_and_saves():
    mem = seeded_memory("u1")
    before = len(mem.messages("u1"))
    model = ScriptedChatModel.of("Not yet.")
    await make_agent(mem, model).ainvoke({"messages": [{"role": "user", "content": QUESTION}]})
    assert DEFAULT_HEADER in model.last_system_prompt
    assert len(mem.messages("u1")) == before + 2


def test_save_turns_can_be_switched_off():
    mem = seeded_memory("u1")
    before = len(mem.messages("u1"))
    middleware = MnemisMemoryMiddleware(mem, namespace="u1", save_turns=False)
    create_agent(ScriptedChatModel.of("ok"), middleware=[middleware]).invoke(
        {"messages": [{"role": "user", "content": "hi"}]}
    )
    assert len(mem.messages("u1")) == before


def test_max_tokens_fits_the_injected_memories_into_the_budget():
    mem = seeded_memory("u1")
    full = mem.search(QUESTION, k=10, namespace="u1")
    fitted = mem.search(QUESTION, k=10, namespace="u1", max_tokens=60)
    assert [h.text for h in fitted] != [h.text for h in full]  # the budget changed what is injected
    model = ScriptedChatModel.of("Not yet, sorry.")
    middleware = MnemisMemoryMiddleware(mem, namespace="u1", k=10, max_tokens=60, clock=lambda: FIXED)
    create_agent(
        model, tools=[], system_prompt="You are a helpful assistant.", middleware=[middleware]
    ).invoke({"messages": [{"role": "user", "content": QUESTION}]})
    assert model.last_system_prompt == "You are a helpful assistant.\n\n" + format_hits(
        fitted, header=DEFAULT_HEADER
    )


@dataclass
class TeamContext:
    user_id: str
    team_id: str


def test_user_and_team_memory_middlewares_work_side_by_side_in_one_agent():
    """Before: two MnemisMemoryMiddleware in one create_agent failed with "Please remove duplicate
    middleware instances" (both were named after the class)."""
    mem = seeded_memory("u1")
    mem.add_messages(
        [
            {
                "id": "t1",
                "speaker": "lead",
                "text": "The team standup moved to 9:30 on Mondays.",
                "timestamp": FIXED,
            }
        ],
        namespace="team-acme",
    )
    user = MnemisMemoryMiddleware(mem, namespace="{user_id}", k=2, clock=lambda: FIXED)
    team = MnemisMemoryMiddleware(
        mem, namespace="team-{team_id}", k=1, header="Team memory:", save_turns=False, clock=lambda: FIXED
    )
    assert (user.name, team.name) == (
        "MnemisMemoryMiddleware[{user_id}]",
        "MnemisMemoryMiddleware[team-{team_id}]",
    )
    model = ScriptedChatModel.of("Noted.")
    agent = create_agent(model, tools=[], middleware=[user, team], context_schema=TeamContext)
    agent.invoke(
        {"messages": [{"role": "user", "content": "Did my refund arrive before the team standup?"}]},
        context=TeamContext("u1", "acme"),
    )
    prompt = model.last_system_prompt
    assert DEFAULT_HEADER in prompt and "Team memory:\n- [" in prompt and "9:30" in prompt
    assert "refund" in prompt.split("Team memory:")[0].lower()
    assert texts(mem, "u1")[-2:] == ["Did my refund arrive before the team standup?", "Noted."]
    assert texts(mem, "team-acme") == ["The team standup moved to 9:30 on Mondays."]


def test_middlewares_are_named_after_their_namespace_or_function():
    def team_of(runtime):
        return runtime.context.team_id

    mem = empty_memory()
    assert MnemisMemoryMiddleware(mem).name == "MnemisMemoryMiddleware"
    assert MnemisMemoryMiddleware(mem, namespace="memories:u1").name == "MnemisMemoryMiddleware[memories.u1]"
    assert MnemisMemoryMiddleware(mem, namespace=team_of).name == "MnemisMemoryMiddleware[team_of]"
    assert MnemisMemoryMiddleware(mem, namespace=lambda rt: "x", name="team").name == "team"


def test_a_template_namespace_falls_back_to_configurable_without_a_context():
    mem = seeded_memory("u1")
    model = ScriptedChatModel.of("Not yet.")
    middleware = MnemisMemoryMiddleware(mem, namespace="{user_id}", k=2, clock=lambda: FIXED)
    create_agent(model, tools=[], middleware=[middleware]).invoke(
        {"messages": [{"role": "user", "content": QUESTION}]}, config={"configurable": {"user_id": "u1"}}
    )
    assert DEFAULT_HEADER in model.last_system_prompt and "refund" in model.last_system_prompt.lower()
    assert texts(mem, "u1")[-2:] == [QUESTION, "Not yet."]


class RetrieverRuns(BaseCallbackHandler):
    """Records the retriever runs the callbacks see: (name, query) at start, documents at end."""

    def __init__(self) -> None:
        self.started: list[tuple[str, str]] = []
        self.ended: list[list[Document]] = []

    def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None, **kwargs):
        self.started.append((kwargs.get("name"), query))

    def on_retriever_end(self, documents, *, run_id, parent_run_id=None, **kwargs):
        self.ended.append(list(documents))


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_recall_is_traced_as_a_retriever_run(mode):
    """Before: the middleware called ``memory.search`` directly, so callbacks (LangSmith, a
    custom tracer) saw the model call but no trace of what was recalled. After: the recall is a
    retriever run inside the agent's run, with the query and the injected documents."""
    mem = seeded_memory("u1")
    expected = mem.search(QUESTION, k=3, namespace="u1")
    runs = RetrieverRuns()
    agent = make_agent(mem, ScriptedChatModel.of("Not yet."))
    state = {"messages": [{"role": "user", "content": QUESTION}]}
    config = {"callbacks": [runs]}
    if mode == "sync":
        agent.invoke(state, config)
    else:
        await agent.ainvoke(state, config)
    assert runs.started == [("MnemisRetriever", QUESTION)]
    assert [[d.id for d in docs] for docs in runs.ended] == [[h.node_id for h in expected]]
    assert runs.ended[0][0].metadata["path_str"] == expected[0].path_str
