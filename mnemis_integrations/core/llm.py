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

__all__ = [
    "CallableChat",
    "LangChainChat",
    "LlamaIndexChat",
    "SchemaRequest",
    "as_chat_model",
    "llama_cpp_json_schema",
    "openai_json_schema",
]

SchemaRequest = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns a step's JSON schema into the keyword arguments that ask a provider for constrained output."""


def openai_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI-style structured output (also vLLM, recent llama.cpp ``llama-server``)."""
    name = str(schema.get("title") or "answer")
    return {"response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}}


def llama_cpp_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """llama-cpp-python's server: JSON mode with a schema, enforced by a grammar while decoding."""
    return {"response_format": {"type": "json_object", "schema": schema}}


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


class _FrameworkChat:
    """What the LangChain and LlamaIndex wrappers share: the model and the optional schema request."""

    def __init__(self, model: Any, schema_request: SchemaRequest | None = None):
        self.model = model
        self.schema_request = schema_request

    @property
    def wants_schema(self) -> bool:
        return self.schema_request is not None

    def _request_kwargs(self, schema: dict[str, Any] | None) -> dict[str, Any]:
        return self.schema_request(schema) if self.schema_request is not None and schema is not None else {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.model).__name__})"


class LangChainChat(_FrameworkChat):
    """A LangChain chat model (anything with ``.invoke(list[tuple[role, text]])``).

    With ``schema_request``, each call passes the step's JSON schema to ``invoke`` as the keyword
    arguments it returns (e.g. :func:`openai_json_schema`), so the provider constrains the reply.
    """

    def complete(self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None) -> str:
        reply = self.model.invoke(
            [(_LC_ROLES.get(m["role"], m["role"]), m["content"]) for m in messages],
            **self._request_kwargs(schema),
        )
        return _text_of(getattr(reply, "content", reply))


class LlamaIndexChat(_FrameworkChat):
    """A LlamaIndex LLM (anything with ``.chat(list[ChatMessage])``); ``schema_request`` as for LangChain."""

    def complete(self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None) -> str:
        from llama_index.core.llms import ChatMessage

        reply = self.model.chat(
            [ChatMessage(role=m["role"], content=m["content"]) for m in messages],
            **self._request_kwargs(schema),
        )
        msg = getattr(reply, "message", reply)
        return _text_of(getattr(msg, "content", msg))


class CallableChat:
    """A function ``messages -> text``."""

    def __init__(self, fn: Callable[[list[dict[str, str]]], str]):
        self.fn = fn

    def complete(self, messages: list[dict[str, str]]) -> str:
        return _text_of(self.fn(messages))


def _module_root(obj: Any) -> str:
    return (type(obj).__module__ or "").split(".", 1)[0]


def as_chat_model(model: Any, schema_request: SchemaRequest | None = None) -> ChatModel:
    """Wrap ``model`` as a :class:`ChatModel`.

    Args:
        model: an object with ``complete(messages) -> str`` (used as is), a LangChain chat
            model, a LlamaIndex LLM, or a callable taking the message dicts.
        schema_request: for a LangChain or LlamaIndex model, how to ask the provider for
            output constrained to each step's JSON schema (:func:`openai_json_schema`,
            :func:`llama_cpp_json_schema` or your own).

    Raises:
        ConfigError: ``model`` is none of these, or ``schema_request`` is given for a model
            that is not a LangChain or LlamaIndex one.

    Examples:
        >>> chat = as_chat_model(lambda messages: '{"ok": true}')
        >>> chat.complete([{"role": "user", "content": "hi"}])
        '{"ok": true}'
    """
    chat = _wrap(model, schema_request)
    if schema_request is None or getattr(chat, "schema_request", None) is schema_request:
        return chat
    if not isinstance(chat, _FrameworkChat):
        raise ConfigError("schema_request needs a LangChain chat model or a LlamaIndex LLM")
    return type(chat)(chat.model, schema_request)


def _wrap(model: Any, schema_request: SchemaRequest | None) -> ChatModel:
    if isinstance(model, (LangChainChat, LlamaIndexChat, CallableChat)):
        return model
    root = _module_root(model)
    # Check frameworks before the protocol: a LlamaIndex LLM also has a ``complete`` method,
    # with another signature.
    if root.startswith("llama_index") or (hasattr(model, "chat") and hasattr(model, "metadata")):
        return LlamaIndexChat(model, schema_request)
    if root.startswith("langchain") or (hasattr(model, "invoke") and hasattr(model, "_generate")):
        return LangChainChat(model, schema_request)
    if isinstance(model, ChatModel):
        return model
    if hasattr(model, "invoke"):
        return LangChainChat(model, schema_request)
    if callable(model):
        return CallableChat(model)
    raise ConfigError(
        f"cannot use {type(model).__name__} as a chat model; pass a LangChain chat model, a LlamaIndex LLM, "
        "an object with complete(messages) -> str, or a callable"
    )
