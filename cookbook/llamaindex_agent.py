"""A LlamaIndex agent that remembers across sessions, with Mnemis as its long-term memory. Offline.

    python cookbook/llamaindex_agent.py

``MnemisMemoryBlock`` plugs into ``llama_index.core.memory.Memory``: each session has its own
short-term memory (its ``session_id``), while every message also lands in Mnemis under the
user's namespace, so a later session recalls it. The block stores what ``Memory`` shows it on
every read and what ``Memory`` flushes, so nothing waits for the short-term window to overflow.

Offline by design: the "LLM" below is a scripted function-calling mock that answers with the
memories it was given. Replace it with any LlamaIndex function-calling LLM, e.g.
``OpenAI(model=...)``, and drop ``embedder=`` to use the bundled multilingual e5 model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core import Settings
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.llama_index import MnemisMemoryBlock


def scripted_answer(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """Stand-in for a real LLM: quote the first long-term memory Mnemis put in the system message."""
    system = "\n".join(
        b.text for m in messages if m.role.value == "system" for b in m.blocks if isinstance(b, TextBlock)
    )
    recalled = [line[2:] for line in system.splitlines() if line.startswith("- [")]
    if not recalled:
        return ChatMessage(role="assistant", content="Noted. I will remember that.")
    return ChatMessage(role="assistant", content=f"From an earlier conversation: {recalled[0]}")


def session(mem: MnemisMemory, user_id: str, session_id: str, chat_db: AsyncEngine) -> Memory:
    """Short-term memory for one session, with Mnemis as the long-term block for this user."""
    block = MnemisMemoryBlock(memory=mem, namespace=user_id, similarity_top_k=3)
    return Memory.from_defaults(
        session_id=session_id, memory_blocks=[block], token_limit=8000, async_engine=chat_db
    )


async def run() -> list[str]:
    Settings.embed_model = MockEmbedding(embed_dim=8)  # never used, but keeps LlamaIndex away from OpenAI
    llm = MockFunctionCallingLLM(response_generator=scripted_answer)
    Settings.llm = llm
    agent = FunctionAgent(llm=llm, tools=[], system_prompt="You are a helpful support agent.")

    mem = MnemisMemory(embedder=HashingEmbedder())  # MnemisMemory(path="memory.db") to keep it on disk
    answers = []
    turns = [
        ("monday", "My refund for order 42 timed out at the bank, please look into it."),
        ("monday", "Also, I prefer email over phone calls."),
        ("friday", "Any news on the refund for order 42?"),
    ]
    # LlamaIndex keeps short-term chat in SQL; one in-process database for every session here,
    # closed before the event loop ends.
    chat_db = create_async_engine("sqlite+aiosqlite:///:memory:", poolclass=StaticPool)
    memories = {}
    try:
        for session_id, text in turns:
            memory = memories.setdefault(session_id, session(mem, "customer-7", session_id, chat_db))
            reply = await agent.run(text, memory=memory)
            answers.append(str(reply))
            print(f"[{session_id}] user: {text}\n[{session_id}] agent: {reply}\n")
    finally:
        await chat_db.dispose()

    print(
        f"Mnemis now holds {len(mem.messages('customer-7'))} messages for customer-7 (nothing was flushed)."
    )
    return answers


def main() -> list[str]:
    return asyncio.run(run())


if __name__ == "__main__":
    main()
