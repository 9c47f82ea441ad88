"""MnemisMemoryBlock: long-term memory for llama_index.core.memory.Memory and the agents built on it."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from llama_fakes import RecallingLLM, make_memory, offline_settings
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import MessageStatus

from mnemis_integrations.llama_index import MnemisMemoryBlock
from mnemis_integrations.llama_index._convert import chat_message_id

NOW = datetime(2025, 4, 1, 9, 0, tzinfo=timezone.utc)
REFUND = "My refund for order 42 timed out at the bank."


@pytest.fixture(autouse=True)
def _offline():
    with offline_settings():
        yield


@pytest.fixture
def mem():
    return make_memory(messages=())


def block_for(mem, **kwargs) -> MnemisMemoryBlock:
    return MnemisMemoryBlock(memory=mem, namespace="u1", clock=lambda: NOW, **kwargs)


_ENGINES: list = []


@pytest.fixture(autouse=True)
async def _short_term_engines():
    """Each short-term Memory gets its own SQLite engine, disposed while the test's event loop is
    still open: left to the garbage collector, aiosqlite's worker thread would report to a closed
    loop during some later test."""
    yield
    while _ENGINES:
        await _ENGINES.pop().dispose()


def short_term(session_id: str, block: MnemisMemoryBlock, **kwargs) -> Memory:
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import StaticPool

    engine = create_async_engine("sqlite+aiosqlite:///:memory:", poolclass=StaticPool)
    _ENGINES.append(engine)
    return Memory.from_defaults(session_id=session_id, memory_blocks=[block], async_engine=engine, **kwargs)


def stored_texts(mem) -> list[str]:
    return [m.text for m in mem.messages("u1")]


async def test_put_message_is_searchable_after_a_read_without_any_flush(mem):
    memory = short_term("s1", block_for(mem))
    await memory.aput(ChatMessage(role="user", content=REFUND))
    await memory.aget()

    assert await memory.aget_all(status=MessageStatus.ARCHIVED) == []  # nothing was flushed
    (stored,) = mem.messages("u1")
    assert (stored.id, stored.speaker, stored.text, stored.timestamp) == (
        chat_message_id("s1", "user", REFUND),
        "user",
        REFUND,
        NOW,
    )
    assert mem.search("refund order 42", k=1, namespace="u1")[0].source_ids == (stored.id,)


async def test_messages_put_directly_into_the_block_are_searchable(mem):
    block = block_for(mem)
    await block.aput([ChatMessage(role="user", content=REFUND)], session_id="s1")
    assert REFUND in mem.search("refund", k=1, namespace="u1")[0].text


async def test_commit_stores_every_message_of_a_session_that_was_never_read(mem):
    block = block_for(mem, ingest_on_read=False)
    memory = short_term("s1", block)
    await memory.aput_messages(
        [ChatMessage(role="user", content=REFUND), ChatMessage(role="assistant", content="I escalated it.")]
    )
    assert "u1" not in mem.namespaces()

    assert await block.acommit(memory) == 2
    assert stored_texts(mem) == [REFUND, "I escalated it."]
    assert await block.acommit(memory) == 0


def test_sync_commit_stores_the_session(mem):
    block = block_for(mem, ingest_on_read=False)
    memory = short_term("s1", block)
    memory.put(ChatMessage(role="user", content=REFUND))
    assert block.commit(memory) == 1
    assert stored_texts(mem) == [REFUND]


async def test_flushed_messages_reach_mnemis_through_aput(mem):
    block = block_for(mem, ingest_on_read=False)
    memory = short_term("s1", block, token_limit=40, token_flush_size=10, chat_history_token_ratio=0.5)
    for i in range(6):
        await memory.aput(
            ChatMessage(role="user", content=f"note {i}: the refund for order {40 + i} is late")
        )
        await memory.aput(ChatMessage(role="assistant", content=f"noted {i}"))

    archived = [m.content for m in await memory.aget_all(status=MessageStatus.ARCHIVED)]
    active = [m.content for m in await memory.aget_all(status=MessageStatus.ACTIVE)]
    assert archived and active
    assert stored_texts(mem) == archived  # exactly what was flushed, in order
    assert "note 0: the refund for order 40 is late" in stored_texts(mem)


async def test_a_message_seen_on_read_and_again_on_flush_is_stored_once(mem):
    block = block_for(mem)
    memory = short_term("s1", block, token_limit=40, token_flush_size=10, chat_history_token_ratio=0.5)
    for i in range(6):
        await memory.aput(
            ChatMessage(role="user", content=f"note {i}: the refund for order {40 + i} is late")
        )
        await memory.aget()
        await memory.aput(ChatMessage(role="assistant", content=f"noted {i}"))
        await memory.aget()

    texts = stored_texts(mem)
    assert len(texts) == len(set(texts)) == 12


async def test_same_text_in_two_sessions_is_two_messages(mem):
    for session in ("s1", "s2"):
        memory = short_term(session, block_for(mem))
        await memory.aput(ChatMessage(role="user", content="hello again"))
        await memory.aget()
    assert [m.id for m in mem.messages("u1")] == [
        chat_message_id("s1", "user", "hello again"),
        chat_message_id("s2", "user", "hello again"),
    ]


async def test_roles_filter_keeps_other_roles_out(mem):
    memory = short_term("s1", block_for(mem, roles=["user"]))
    await memory.aput_messages(
        [ChatMessage(role="user", content=REFUND), ChatMessage(role="assistant", content="ok, escalated")]
    )
    await memory.aget()
    assert stored_texts(mem) == [REFUND]


async def test_next_session_recalls_the_previous_one_in_the_system_message(mem):
    first = short_term("s1", block_for(mem))
    await first.aput(ChatMessage(role="user", content=REFUND))
    first_view = await first.aget()
    # memories (and topics) made only of messages still in the short-term window are not repeated
    assert [(m.role.value, m.content) for m in first_view] == [("user", REFUND)]

    second = short_term("s2", block_for(mem))
    await second.aput(ChatMessage(role="user", content="What happened with the refund for order 42?"))
    system, user = await second.aget()
    assert system.role.value == "system" and user.role.value == "user"
    assert "<long_term_memory>" in system.content
    assert f"user: {REFUND}" in system.content


async def test_reading_an_empty_namespace_recalls_nothing():
    block = MnemisMemoryBlock(memory=make_memory(messages=()), namespace="u1", ingest_on_read=False)
    assert await block.aget([ChatMessage(role="user", content="anything?")], session_id="s1") == ""
    assert await block.aget([], session_id="s1") == ""


async def test_function_agent_recalls_across_sessions_and_stores_both_sides(mem):
    llm = RecallingLLM()
    agent = FunctionAgent(llm=llm, tools=[], system_prompt="You are a support agent.")

    await agent.run(REFUND, memory=short_term("monday", block_for(mem)))
    # both sides of the first session are in long-term memory, although nothing was flushed
    assert stored_texts(mem)[0] == REFUND
    assert [m.speaker for m in mem.messages("u1")] == ["user", "assistant"]

    answer = await agent.run(
        "What happened with my refund for order 42?", memory=short_term("friday", block_for(mem))
    )
    assert "timed out at the bank" in str(answer)
    system_text = "\n".join(m.content for m in llm.prompts[-1] if m.role.value == "system")
    assert "You are a support agent." in system_text and f"user: {REFUND}" in system_text


async def test_a_message_longer_than_the_query_limit_still_reads_and_is_stored(mem):
    block = block_for(mem)
    long_text = "filler " * 3000 + REFUND
    assert len(long_text) > mem.config.limits.max_query_chars
    recalled = await block.aget([ChatMessage(role="user", content=long_text)], session_id="s1")
    assert recalled == ""  # the only memory is the message in context
    assert stored_texts(mem) == [long_text]


async def test_max_tokens_fits_what_the_block_recalls_into_the_budget():
    from mnemis_integrations.core.tokens import count_tokens

    mem = make_memory()  # the seeded conversation
    query = [ChatMessage(role="user", content="refund order 42 bank")]
    unlimited = await block_for(mem, ingest_on_read=False, max_chars=None, similarity_top_k=10)._aget(query)
    budgeted = await block_for(
        mem, ingest_on_read=False, max_chars=None, similarity_top_k=10, max_tokens=40
    )._aget(query)
    assert unlimited and budgeted and count_tokens(budgeted) < count_tokens(unlimited)
    from mnemis_integrations.llama_index._convert import format_hits

    fitted = mem.search("refund order 42 bank", k=10, namespace="u1", max_tokens=40)
    assert budgeted == format_hits(fitted, max_chars=None)
