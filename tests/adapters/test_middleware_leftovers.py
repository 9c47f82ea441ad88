"""MnemisMemoryMiddleware leftovers: the system message keeps what it carried besides its text, and
messages re-sent without ids (an agent without a checkpointer) keep one identity across turns."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from fakes import ScriptedChatModel, empty_memory, seeded_memory
from langchain.agents import create_agent
from langchain_core.messages import SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from mnemis_integrations.langchain import MnemisMemoryMiddleware
from mnemis_integrations.langchain.middleware import DEFAULT_HEADER

FIXED = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)
QUESTION = "Has my refund for order 1234 arrived?"
CACHED = {"type": "ephemeral"}


def make_agent(mem, model, system_prompt="You are a helpful assistant."):
    middleware = MnemisMemoryMiddleware(mem, namespace="u1", k=3, clock=lambda: FIXED)
    return create_agent(model, tools=[], system_prompt=system_prompt, middleware=[middleware])


async def run(agent, state, mode):
    if mode == "sync":
        return agent.invoke(state)
    return await agent.ainvoke(state)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("content", ["str", "parts"])
async def test_recall_keeps_the_system_messages_kwargs_metadata_name_and_id(mode, content):
    """Before: the system message was rebuilt from its content alone, so an Anthropic cache_control
    block (in a content part or in additional_kwargs), its name, id and response_metadata were lost."""
    parts = [{"type": "text", "text": "You are a helpful assistant.", "cache_control": CACHED}]
    system = SystemMessage(
        content="You are a helpful assistant." if content == "str" else parts,
        additional_kwargs={"cache_control": CACHED},
        response_metadata={"source": "app"},
        name="persona",
        id="sys-1",
    )
    model = ScriptedChatModel.of("Not yet.")
    await run(make_agent(seeded_memory("u1"), model, system), {"messages": [("user", QUESTION)]}, mode)

    sent = model.prompts[-1][0]
    assert sent.type == "system" and DEFAULT_HEADER in sent.text
    assert (sent.additional_kwargs, sent.response_metadata, sent.name, sent.id) == (
        {"cache_control": CACHED},
        {"source": "app"},
        "persona",
        "sys-1",
    )
    if content == "parts":
        assert sent.content[0] == parts[0]
        assert sent.content[1]["type"] == "text" and sent.content[1]["text"].startswith(DEFAULT_HEADER)
    assert system.text == "You are a helpful assistant."  # the caller's message is left as it was


def history(*texts: str) -> list[dict[str, str]]:
    """A conversation as a client without a checkpointer re-sends it: plain dicts, no ids."""
    return [{"role": ("user", "assistant")[i % 2], "content": t} for i, t in enumerate(texts)]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_history_resent_without_ids_is_not_recalled_into_the_prompt(mode):
    """Before: the agent state gave each re-sent message a fresh id, so the turns saved earlier no
    longer matched the window and came back as memories: the conversation twice over."""
    mem = empty_memory()
    old = {"id": "old-1", "speaker": "user", "text": "I love green tea.", "timestamp": "2023-01-01T09:00:00Z"}
    mem.add_messages([old], namespace="u1")
    model = ScriptedChatModel.of("Noted.", "You like green tea.")
    agent = make_agent(mem, model)
    await run(agent, {"messages": history("My cat is called Miso.")}, mode)
    turn2 = history("My cat is called Miso.", "Noted.", "What do I like to drink? My cat Miso?")
    await run(agent, {"messages": turn2}, mode)

    recalled = model.last_system_prompt.split(DEFAULT_HEADER, 1)[-1]
    assert DEFAULT_HEADER in model.last_system_prompt and "green tea" in recalled  # said long before
    assert "Miso" not in recalled  # in the window the client re-sent


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_turn_resent_without_ids_is_saved_once(mode):
    """A retried request (the same history and question, no ids) stores its messages once; the same
    words said again in a later turn are a new message."""
    mem = empty_memory()
    agent = make_agent(mem, ScriptedChatModel.of("Noted.", "Noted.", "Hi again."))
    await run(agent, {"messages": history("Hi, I'm Ana.")}, mode)
    await run(agent, {"messages": history("Hi, I'm Ana.")}, mode)  # the retry
    await run(agent, {"messages": history("Hi, I'm Ana.", "Noted.", "Hi, I'm Ana.")}, mode)
    assert [(m.speaker, m.text) for m in mem.messages("u1")] == [
        ("user", "Hi, I'm Ana."),
        ("assistant", "Noted."),
        ("user", "Hi, I'm Ana."),
        ("assistant", "Hi again."),
    ]


def test_the_same_words_in_two_threads_are_two_messages():
    """Ids made from the content are kept apart per thread: two conversations that open alike both
    stay in memory."""
    mem = empty_memory()
    agent = create_agent(
        ScriptedChatModel.of("Hello!", "Hello!"),
        middleware=[MnemisMemoryMiddleware(mem, namespace="u1", clock=lambda: FIXED)],
        checkpointer=InMemorySaver(),
    )
    for thread in ("t1", "t2"):
        agent.invoke({"messages": history("Hi, I'm Ana.")}, {"configurable": {"thread_id": thread}})
    assert [m.text for m in mem.messages("u1")] == ["Hi, I'm Ana.", "Hello!"] * 2
