"""A LangChain 1.x agent with Mnemis long-term memory: middleware, recall tool and store. Offline.

    python cookbook/langchain_agent.py

Three pieces, each optional:

* ``MnemisMemoryMiddleware`` recalls memories for every user message into the system prompt,
  each under its hierarchy path, and saves every finished turn into the memory;
* ``create_recall_tool`` lets the model search memory itself: it reads ``- [path] text`` lines,
  while the Documents (scores, provenance) stay on the ``ToolMessage.artifact``;
* ``MnemisStore`` is the agent's LangGraph store (``create_agent(store=...)``): tools put facts by
  key, and ``store.search(namespace, query=...)`` answers with Mnemis recall.

Two sessions (two threads) share one memory: what the user said on Monday is recalled on Friday.

Offline by design: the "chat model" is a scripted fake that calls tools and quotes what it was
given. Replace it with any tool-calling chat model (e.g. ``init_chat_model("openai:gpt-5")``)
and drop ``embedder=`` to use the bundled multilingual e5 embedder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.langchain import MnemisMemoryMiddleware, MnemisStore, create_recall_tool
from mnemis_integrations.langchain.store import item_level_config

Step = AIMessage | str | Callable[[list[BaseMessage]], AIMessage | str]


class ScriptedToolModel(GenericFakeChatModel):
    """Stand-in for a real tool-calling model: plays a script, one step per model call."""

    messages: Iterator[Step]
    seen_system_prompts: list[str] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedToolModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.seen_system_prompts.append(messages[0].text if messages[0].type == "system" else "")
        step = next(self.messages)
        step = step(messages) if callable(step) else step
        message = AIMessage(content=step) if isinstance(step, str) else step
        return ChatResult(generations=[ChatGeneration(message=message)])


def call(name: str, **args: Any) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": f"call-{name}", "type": "tool_call"}]
    )


def quote_tool_result(messages: list[BaseMessage]) -> str:
    result = [m for m in messages if isinstance(m, ToolMessage)][-1].text
    return "Here is what I found in my memory:\n" + result


@dataclass
class UserContext:
    user_id: str


@tool
def save_fact(key: str, fact: str, runtime: ToolRuntime[UserContext]) -> str:
    """Save one lasting fact about the user under a short key."""
    runtime.store.put(("facts", runtime.context.user_id), key, {"text": fact})
    return f"saved {key}"


def run() -> dict[str, Any]:
    clock = iter(datetime(2024, 5, 6, 9, 0, tzinfo=timezone.utc) + timedelta(days=4 * i) for i in range(100))
    now = {"t": next(clock)}

    def tick() -> datetime:
        return now["t"]

    embedder = HashingEmbedder()
    mem = MnemisMemory(
        embedder=embedder
    )  # the conversation memory; MnemisMemory(path="memory.db") keeps it on disk
    store = MnemisStore(
        MnemisMemory(embedder=embedder, config=item_level_config()), clock=tick
    )  # facts, one per item

    model = ScriptedToolModel(
        messages=iter(
            [
                # Monday: the model saves a lasting preference with a tool, then answers.
                call("save_fact", key="contact", fact="User prefers email over phone calls."),
                "I reopened the refund for order 42 and will write to you by email.",
                # Friday: memories are already in the system prompt; the model also searches itself.
                call("recall_memory", query="refund order 42 bank"),
                quote_tool_result,
            ]
        )
    )
    agent = create_agent(
        model,
        tools=[create_recall_tool(mem, namespace="u1", k=3), save_fact],
        system_prompt="You are a helpful support agent.",
        middleware=[MnemisMemoryMiddleware(mem, namespace=lambda rt: rt.context.user_id, k=3, clock=tick)],
        store=store,
        context_schema=UserContext,
        checkpointer=InMemorySaver(),
    )
    user = UserContext("u1")

    print("== Monday ==")
    monday = "My refund for order 42 timed out at the bank. Please email me, I never pick up the phone."
    out = agent.invoke(
        {"messages": [{"role": "user", "content": monday}]},
        {"configurable": {"thread_id": "monday"}},
        context=user,
    )
    print(f"user: {monday}\nagent: {out['messages'][-1].text}")

    now["t"] = next(clock)
    print("\n== Friday (new thread, same user) ==")
    friday = "Any news on the refund for order 42?"
    out = agent.invoke(
        {"messages": [{"role": "user", "content": friday}]},
        {"configurable": {"thread_id": "friday"}},
        context=user,
    )
    injected = model.seen_system_prompts[-2]
    print("System prompt the model saw (recall injected by the middleware):")
    print("  " + injected.replace("\n", "\n  "))
    tool_msg = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    print(f"recall_memory tool -> {len(tool_msg.artifact)} Documents; the model read:")
    print("  " + tool_msg.text.replace("\n", "\n  "))
    print(f"agent: {out['messages'][-1].text.splitlines()[0]} ...")

    facts = store.search(("facts", "u1"), query="how should we contact the user? email or phone", limit=2)
    print("\nStore search (dual-path recall over saved facts):")
    for item in facts:
        print(f"  {item.key}: {item.value['text']}  [{item.path_str}] score={item.score:.2f}")
    print(f"\nConversation memory now holds {len(mem.messages('u1'))} messages across both threads.")
    return {
        "injected": injected,
        "tool_message": tool_msg,
        "facts": facts,
        "answer": out["messages"][-1].text,
        "memory": mem,
    }


if __name__ == "__main__":
    run()
