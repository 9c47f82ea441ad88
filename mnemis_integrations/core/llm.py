"""Wrap any chat model into the framework-free :class:`~.protocols.ChatModel`.

Duck-typed and lazy: nothing here imports LangChain or LlamaIndex at module level, so the
core stays framework-free. A LangChain ``BaseChatModel`` is called with ``.invoke`` and its
reply read from ``.content``; a LlamaIndex ``LLM`` with ``.chat``; a plain callable gets the
message dicts and returns text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from .protocols import ChatModel

__all__ = ["CallableChat", "LangChainChat", "LlamaIndexChat", "as_chat_model"]

_LC_ROLES = {"system": "system", "user": "human", "assistant": "ai"}


def _text_of(content: Any) -> str:
    """Message content as text: a string, or a list of content blocks (LangChain's multimodal shape)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    return "" if content is None else str(content)


class LangChainChat:
    """A LangChain chat model (anything with ``.invoke(list[tuple[role, text]])``)."""

    def __init__(self, model: Any):
        self.model = model

    def complete(self, messages: list[dict[str, str]]) -> str:
        reply = self.model.invoke([(_LC_ROLES.get(m["role"], m["role"]), m["content"]) for m in messages])
        return _text_of(getattr(reply, "content", reply))

    def __repr__(self) -> str:
        return f"LangChainChat({type(self.model).__name__})"


class LlamaIndexChat:
    """A LlamaIndex LLM (anything with ``.chat(list[ChatMessage])``)."""

    def __init__(self, llm: Any):
        self.llm = llm

    def complete(self, messages: list[dict[str, str]]) -> str:
        from llama_index.core.llms import ChatMessage

        reply = self.llm.chat([ChatMessage(role=m["role"], content=m["content"]) for m in messages])
        msg = getattr(reply, "message", reply)
        return _text_of(getattr(msg, "content", msg))

    def __repr__(self) -> str:
        return f"LlamaIndexChat({type(self.llm).__name__})"


class CallableChat:
    """A function ``messages -> text``."""

    def __init__(self, fn: Callable[[list[dict[str, str]]], str]):
        self.fn = fn

    def complete(self, messages: list[dict[str, str]]) -> str:
        return _text_of(self.fn(messages))


def _module_root(obj: Any) -> str:
    return (type(obj).__module__ or "").split(".", 1)[0]


def as_chat_model(model: Any) -> ChatModel:
    """Wrap ``model`` as a :class:`ChatModel`.

    Args:
        model: an object with ``complete(messages) -> str`` (used as is), a LangChain chat
            model, a LlamaIndex LLM, or a callable taking the message dicts.

    Raises:
        ConfigError: ``model`` is none of these.

    Examples:
        >>> chat = as_chat_model(lambda messages: '{"ok": true}')
        >>> chat.complete([{"role": "user", "content": "hi"}])
        '{"ok": true}'
    """
    if isinstance(model, (LangChainChat, LlamaIndexChat, CallableChat)):
        return model
    root = _module_root(model)
    # Check frameworks before the protocol: a LlamaIndex LLM also has a ``complete`` method,
    # with another signature.
    if root.startswith("llama_index") or (hasattr(model, "chat") and hasattr(model, "metadata")):
        return LlamaIndexChat(model)
    if root.startswith("langchain") or (hasattr(model, "invoke") and hasattr(model, "_generate")):
        return LangChainChat(model)
    if isinstance(model, ChatModel):
        return model
    if hasattr(model, "invoke"):
        return LangChainChat(model)
    if callable(model):
        return CallableChat(model)
    raise ConfigError(
        f"cannot use {type(model).__name__} as a chat model; pass a LangChain chat model, a LlamaIndex LLM, "
        "an object with complete(messages) -> str, or a callable"
    )
