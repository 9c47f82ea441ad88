"""The small interfaces the core depends on. Frameworks plug in through these."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from .builder.abstract import ReviewHook
    from .builder.steps import BuildReport
    from .config import BuildConfig
    from .embedders import EmbedderProfile
    from .model import Message
    from .state import NamespaceState

__all__ = ["Builder", "CallScoped", "ChatModel", "Embedder", "MemoryBound", "Tokenizer"]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors.

    ``id`` names the model; it is stored with the vectors so that a store is never
    searched with vectors from another model.
    """

    id: str

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class Tokenizer(Protocol):
    def count(self, text: str) -> int: ...


@runtime_checkable
class ChatModel(Protocol):
    """The one call the LLM builder needs from a chat model, framework-free.

    ``messages`` are ``{"role": "system" | "user" | "assistant", "content": str}`` dicts; the
    reply is the assistant's text. :func:`mnemis_integrations.core.llm.as_chat_model` wraps a
    LangChain chat model, a LlamaIndex LLM or a plain callable into this shape. A chat that sets
    ``wants_schema`` is called as ``complete(messages, schema=json_schema)`` instead.
    """

    def complete(self, messages: list[dict[str, str]]) -> str: ...


@runtime_checkable
class Builder(Protocol):
    """What :class:`~mnemis_integrations.MnemisMemory` calls to turn new messages into graph nodes:
    :class:`~.builder.pipeline.OfflineBuilder` (the default) or :class:`~.builder.llm_builder.LLMBuilder`.

    ``ingest`` gets a working copy of the namespace's state, the messages not stored yet (their
    ``seq`` assigned) and their vectors, one row each. It may change that state and nothing else:
    when it raises, the memory drops the copy and the store stays as it was.
    """

    def ingest(self, st: NamespaceState, messages: list[Message], vectors: np.ndarray) -> BuildReport: ...


@runtime_checkable
class MemoryBound(Protocol):
    """A :class:`Builder` made apart from the memory, which wants what the memory was made with: its
    embedder's similarity thresholds (cosine scales differ by model, so thresholds are only right for
    the embedder that made the vectors), its build config and its review hook.

    :class:`~mnemis_integrations.MnemisMemory` calls ``bind_memory`` once, when it takes the
    builder. A builder given its own settings keeps them; it raises
    :class:`~mnemis_integrations.errors.ConfigError` when it cannot build for that memory (it was
    given another embedder, or serves another memory made otherwise), and the memory is not made then.
    """

    def bind_memory(
        self, embedder_id: str, profile: EmbedderProfile, build: BuildConfig, review: ReviewHook
    ) -> None: ...


@runtime_checkable
class CallScoped(Protocol):
    """A :class:`Builder` that reports on one ``add_messages`` call as a whole, though the call may
    build more than once: when another writer moved the namespace first, the call's write is
    refused and the build redone on fresh state. :class:`~.builder.llm_builder.LLMBuilder` counts
    the model calls of every try, each paid for, in ``last_usage``.

    :class:`~mnemis_integrations.MnemisMemory` runs all the tries of one call, and no other call's,
    inside ``ingest_call()``, in the calling thread; an ``ingest`` outside it is a call of its own.
    """

    def ingest_call(self) -> AbstractContextManager[None]: ...
