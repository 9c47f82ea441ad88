"""Offline fixtures for the LlamaIndex adapter tests: a small memory, explicit Settings, a scripted agent LLM.

LlamaIndex reaches for OpenAI whenever ``Settings.llm``/``Settings.embed_model`` are unset, so
every test that builds a LlamaIndex component sets both through :func:`offline_settings`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from llama_index.core import Settings
from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder

# Two topics a week apart; the refund conversation is the one the queries ask about.
CONVERSATION = [
    {
        "id": "m1",
        "speaker": "user",
        "text": "My refund for order 42 timed out at the bank.",
        "timestamp": "2025-03-01T10:00:00",
    },
    {
        "id": "m2",
        "speaker": "assistant",
        "text": "I escalated the refund for order 42 to the payments team.",
        "timestamp": "2025-03-01T10:01:00",
    },
    {
        "id": "m3",
        "speaker": "user",
        "text": "Let's get lunch on Friday at the noodle bar.",
        "timestamp": "2025-03-08T12:00:00",
    },
    {
        "id": "m4",
        "speaker": "user",
        "text": "Alice confirmed the pricing plan B for Project Atlas.",
        "timestamp": "2025-03-09T09:00:00",
    },
]


# similarity_top_k values a retriever refuses when built: not positive, not an int, a bool, past limits.max_k
BAD_TOP_K = [0, -3, 2.5, 5.0, "3", None, True, 1_001]


def make_memory(
    path: str | None = None, *, namespace: str = "u1", messages: Sequence[dict] = CONVERSATION
) -> MnemisMemory:
    """A memory over the deterministic hashing embedder, holding ``messages`` in ``namespace``."""
    mem = MnemisMemory(path, embedder=HashingEmbedder())
    if messages:
        mem.add_messages(list(messages), namespace=namespace)
    return mem


@contextmanager
def offline_settings() -> Iterator[None]:
    """Set ``Settings.llm = MockLLM()`` and an 8-d ``MockEmbedding``; restore the previous values after."""
    old_llm, old_embed = Settings._llm, Settings._embed_model
    Settings.llm = MockLLM()
    Settings.embed_model = MockEmbedding(embed_dim=8)
    try:
        yield
    finally:
        Settings._llm, Settings._embed_model = old_llm, old_embed


def _system_text(messages: Sequence[ChatMessage]) -> str:
    return "\n".join(
        b.text for m in messages if m.role.value == "system" for b in m.blocks if isinstance(b, TextBlock)
    )


class RecallingLLM(MockFunctionCallingLLM):
    """A function-calling mock that answers with the long-term memories ``Memory`` put in the
    system message (or ``"I remember nothing."``), and records every prompt it was sent."""

    _prompts: list = PrivateAttr(default_factory=list)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.response_generator = self._answer

    @property
    def prompts(self) -> list[list[ChatMessage]]:
        return self._prompts

    def _answer(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self._prompts.append(list(messages))
        lines = [line[2:] for line in _system_text(messages).splitlines() if line.startswith("- [")]
        return ChatMessage(
            role="assistant", content="I remember: " + " | ".join(lines) if lines else "I remember nothing."
        )
