"""``MnemisMemoryMiddleware``: recall into the system prompt before each model call, save each turn after."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from ..core.engine import MnemisMemory, check_count
from ..core.messages import utc_now
from ._convert import format_documents, last_turn, message_record
from ._namespaces import check_namespace_template, fill_namespace, is_namespace_template, run_value
from .retriever import MnemisRetriever

__all__ = ["DEFAULT_HEADER", "MnemisMemoryMiddleware"]

logger = logging.getLogger(__name__)

DEFAULT_HEADER = (
    "Long-term memory: what you remember about this user from earlier conversations, "
    "most relevant first. Each line starts with its topic path, broadest topic first."
)

NamespaceSource = str | Callable[[Runtime], str] | None


class MnemisMemoryMiddleware(AgentMiddleware):
    """Gives a ``create_agent`` agent Mnemis long-term memory.

    Before every model call it recalls memories for the latest user message and appends them,
    each with its hierarchy path (``- [Shopping > Refunds] ...``), to the system prompt; the
    agent state is not changed. The recall runs as a :class:`MnemisRetriever`, so callbacks and
    tracers see it as a retriever run (``on_retriever_start`` / ``on_retriever_end``) inside the
    model call. After the agent finishes, it ingests the turn (the latest user
    message and the assistant's text replies) into the memory. A saved message's id comes from
    the run's ``thread_id``, its role, its text and how often that role said that text before in
    the conversation, not from its LangChain id, which LangGraph makes up anew on every run for a
    message sent without one: a turn retried, or a history re-sent by a client without a
    checkpointer, is stored once and known as the window. Give such a client's runs a
    ``thread_id`` (``config={"configurable": {"thread_id": ...}}``) to keep two conversations that
    open with the same words apart. The system message it appends to keeps its other fields
    (``additional_kwargs`` such as a ``cache_control`` block, ``name``, ``id``).

    Several instances can serve one agent (a user's memory and a team's): each is named after its
    namespace (``MnemisMemoryMiddleware[team-{team_id}]``), which ``create_agent`` needs unique;
    give ``name=`` when two namespaces are functions.

    Args:
        memory: the memory to recall from and save to.
        namespace: a fixed namespace; a template such as ``"{user_id}"`` or ``"team-{team_id}"``,
            filled on each run from the runtime context (``agent.invoke(..., context=...)``) or
            else ``config["configurable"]`` (see :func:`~.tools.create_recall_tool`); a function
            of the LangGraph ``Runtime`` returning one (e.g. ``lambda rt: rt.context.user_id``);
            or ``None`` for the memory's default.
        k: how many memories to inject.
        header: the line above the injected memories.
        save_turns: whether to ingest each turn after the agent runs.
        max_chars: cut each injected memory to this many characters (``None``: no cut).
        max_tokens: fit the injected memories into this many tokens (``MnemisMemory.fit_to_budget``:
            fragments narrowed to their best-matching messages first); ``None``: no budget.
        clock: gives the timestamp of saved messages (UTC now by default; pass one in tests).
        name: the middleware's name in the agent graph; by default the class name with the
            namespace (or the namespace function's name) in brackets.

    Raises:
        InvalidQueryError: ``k`` is not an integer from 1 to the memory's ``limits.max_k``, or
            ``max_tokens`` is not a positive integer (a ``ValueError``).
        ConfigError: a malformed namespace template.

    Example:
        .. code-block:: python

            from langchain.agents import create_agent
            agent = create_agent(model, tools=[...], middleware=[MnemisMemoryMiddleware(mem, namespace="u1")])
            agent.invoke({"messages": [{"role": "user", "content": "Any news on my refund?"}]})

            # user and team memory side by side
            middleware = [MnemisMemoryMiddleware(mem, namespace="{user_id}"),
                          MnemisMemoryMiddleware(mem, namespace="team-{team_id}", save_turns=False)]
    """

    def __init__(
        self,
        memory: MnemisMemory,
        *,
        namespace: NamespaceSource = None,
        k: int = 5,
        header: str = DEFAULT_HEADER,
        save_turns: bool = True,
        max_chars: int | None = None,
        max_tokens: int | None = None,
        clock: Callable[[], datetime] = utc_now,
        name: str | None = None,
    ) -> None:
        super().__init__()
        # checked as the search checks them, now rather than at the agent's first model call
        check_count("k", k, memory.config.limits.max_k)
        if max_tokens is not None:
            check_count("max_tokens", max_tokens)
        if isinstance(namespace, str) and is_namespace_template(namespace):
            check_namespace_template(namespace)
        self.memory = memory
        self.namespace = namespace
        self._name = name if name is not None else _default_name(namespace)
        self.k = k
        self.header = header
        self.save_turns = save_turns
        self.max_chars = max_chars
        self.max_tokens = max_tokens
        self.clock = clock

    @property
    def name(self) -> str:
        return self._name

    # -- recall ----------------------------------------------------------------------------------

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        query = _latest_user_text(request.messages)
        if not query:
            return handler(request)
        docs = self._retriever(request.runtime).invoke(query, exclude_messages=_in_window(request.messages))
        return handler(self._with_recall(request, docs))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        query = _latest_user_text(request.messages)
        if not query:
            return await handler(request)
        docs = await self._retriever(request.runtime).ainvoke(
            query, exclude_messages=_in_window(request.messages)
        )
        return await handler(self._with_recall(request, docs))

    def _retriever(self, runtime: Runtime | None) -> MnemisRetriever:
        # Invoked as a Runnable, which picks up the agent's callbacks from the running graph.
        return MnemisRetriever(memory=self.memory, k=self.k, max_tokens=self.max_tokens, **self._ns(runtime))

    def _with_recall(self, request: ModelRequest, docs: Sequence[Document]) -> ModelRequest:
        logger.debug("recalled %d memories into the system prompt", len(docs))
        block = format_documents(docs, header=self.header, max_chars=self.max_chars)
        if not block:
            return request
        return request.override(system_message=_append_to_system(request.system_message, block))

    # -- save ------------------------------------------------------------------------------------

    def after_agent(self, state: AgentState, runtime: Runtime) -> dict[str, Any] | None:
        if self.save_turns and (records := self._turn_records(state["messages"])):
            self.memory.add_messages(records, **self._ns(runtime))
        return None

    async def aafter_agent(self, state: AgentState, runtime: Runtime) -> dict[str, Any] | None:
        if self.save_turns and (records := self._turn_records(state["messages"])):
            await self.memory.aadd_messages(records, **self._ns(runtime))
        return None

    def _turn_records(self, messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
        start = last_turn([m.type for m in messages])
        now = self.clock()
        return [
            message_record(message_id=mid, role=m.type, text=m.text, timestamp=now)
            for m, mid in zip(messages[start:], _message_ids(messages)[start:], strict=True)
            if mid is not None
        ]

    def _ns(self, runtime: Runtime | None) -> dict[str, str]:
        if self.namespace is None:
            return {}
        if callable(self.namespace):
            return {"namespace": self.namespace(runtime)}
        if is_namespace_template(self.namespace):
            context = getattr(runtime, "context", None)
            filled = fill_namespace(self.namespace, lambda name: run_value(name, context, _configurable()))
            return {"namespace": filled}
        return {"namespace": self.namespace}


def _default_name(namespace: NamespaceSource) -> str:
    """``MnemisMemoryMiddleware[<namespace>]``: ``create_agent`` refuses two middlewares of one name,
    and LangGraph node names may not hold ``':'`` or ``'|'``."""
    base = MnemisMemoryMiddleware.__name__
    if namespace is None:
        return base
    label = getattr(namespace, "__name__", "<lambda>") if callable(namespace) else namespace
    if label == "<lambda>":
        return base
    return f"{base}[{label.replace(':', '.').replace('|', '.')}]"


def _configurable() -> dict[str, Any]:
    """The run's ``configurable``, read where a middleware hook runs (inside the graph)."""
    try:
        return get_config().get("configurable", {})
    except RuntimeError:  # called outside a run, e.g. in a unit test
        return {}


def _latest_user_text(messages: Sequence[BaseMessage]) -> str:
    for m in reversed(messages):
        if m.type == "human":
            return m.text.strip()
    return ""


def _append_to_system(system: SystemMessage | None, block: str) -> SystemMessage:
    if system is None:
        return SystemMessage(content=block)
    if isinstance(system.content, str):
        content: str | list[str | dict] = f"{system.content}\n\n{block}" if system.content else block
    else:
        content = [*system.content, {"type": "text", "text": block}]
    # A copy, not a new message: a provider reads more than the text (an Anthropic cache_control
    # block in a part or in additional_kwargs), and the name and id stay the caller's.
    return system.model_copy(update={"content": content})


def _in_window(messages: Sequence[BaseMessage]) -> set[str]:
    """Ids, as saved turns get them, of the messages the model sees anyway: recalling a memory made
    only of them would repeat the conversation into the prompt. Their own ids too, which turns
    saved by earlier versions carry."""
    pairs = [(m, mid) for m, mid in zip(messages, _message_ids(messages), strict=True) if mid is not None]
    return {mid for _, mid in pairs} | {str(m.id) for m, _ in pairs if m.id}


def _message_ids(messages: Sequence[BaseMessage]) -> list[str | None]:
    """The Mnemis id of each message a turn saves (user and assistant text), ``None`` for the rest.

    Made from the run's thread, the role, the text and how often that role said that text before
    in the conversation, not from the message's own id: LangGraph gives a message that arrives
    without one a new id on every run, so the history a client without a checkpointer re-sends
    would be new messages each time (saved again, and not known as the window). A retried turn is
    stored once; the same words said again later in the conversation are a new message.
    """
    thread = str(_configurable().get("thread_id", ""))
    said: Counter[tuple[str, str]] = Counter()
    out: list[str | None] = []
    for m in messages:
        if m.type not in ("human", "ai") or not m.text.strip():
            out.append(None)
            continue
        said[m.type, m.text] += 1
        key = "\x1f".join((thread, m.type, str(said[m.type, m.text]), m.text))
        out.append(f"{m.type}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:16]}")
    return out
