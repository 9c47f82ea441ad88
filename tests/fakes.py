"""Offline fakes shared by the adapter tests.

``ScriptedChatModel`` is a tool-calling chat model with a script: each model call takes the next
entry, which is an ``AIMessage``, a string, or a function of the prompt messages returning
either. ``bind_tools`` returns the model itself, so ``create_agent`` accepts it. It counts its
calls and keeps every prompt it was sent, so tests can assert on what the model saw, and that
an offline path made no call (``model.calls == 0``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

Step = AIMessage | str | Callable[[list[BaseMessage]], AIMessage | str]


class ScriptedChatModel(GenericFakeChatModel):
    """A fake tool-calling chat model that plays a script, one entry per call."""

    messages: Iterator[Step] = Field(default_factory=lambda: iter(()))
    """The script; give a list to :meth:`of` rather than an iterator."""
    calls: int = 0
    """How many times the model was called."""
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    """The messages of every call, in order."""
    bound_tools: list[Any] = Field(default_factory=list)
    """The tools of the last ``bind_tools``."""

    @classmethod
    def of(cls, *steps: Step) -> ScriptedChatModel:
        return cls(messages=iter(steps))

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        self.bound_tools = list(tools)
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        self.prompts.append(list(messages))
        try:
            step = next(self.messages)
        except StopIteration:
            raise AssertionError(f"ScriptedChatModel ran out of script at call {self.calls}") from None
        if callable(step):
            step = step(list(messages))
        message = AIMessage(content=step) if isinstance(step, str) else step
        return ChatResult(generations=[ChatGeneration(message=message)])

    @property
    def _llm_type(self) -> str:
        return "scripted-fake-chat-model"

    @property
    def last_system_prompt(self) -> str:
        """The system message text of the latest call ('' if it had none)."""
        if not self.prompts:
            return ""
        first = self.prompts[-1][0] if self.prompts[-1] else None
        return first.text if first is not None and first.type == "system" else ""


def call_tool(name: str, call_id: str = "call-1", **args: Any) -> AIMessage:
    """An assistant message that asks for one tool call."""
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    )


def echo_last_tool_result(prefix: str = "From memory: ") -> Callable[[list[BaseMessage]], str]:
    """A script step that answers with the content of the latest tool result."""

    def step(messages: list[BaseMessage]) -> str:
        tool_results = [m for m in messages if isinstance(m, ToolMessage)]
        return prefix + (tool_results[-1].text if tool_results else "(nothing)")

    return step


# ---------------------------------------------------------------------------------------------
# A small conversation across three topics, for memories the tests search.
# ---------------------------------------------------------------------------------------------

CONVERSATION: list[dict[str, Any]] = [
    {
        "id": "m01",
        "speaker": "user",
        "text": "My refund for order 1234 has not arrived yet.",
        "timestamp": "2024-05-01T09:00:00+00:00",
    },
    {
        "id": "m02",
        "speaker": "assistant",
        "text": "Refunds usually take five business days to arrive.",
        "timestamp": "2024-05-01T09:01:00+00:00",
    },
    {
        "id": "m03",
        "speaker": "user",
        "text": "The refund request timed out twice on the website.",
        "timestamp": "2024-05-01T09:02:00+00:00",
    },
    {
        "id": "m04",
        "speaker": "user",
        "text": "My beagle Rex needs a vet appointment for his vaccines.",
        "timestamp": "2024-05-02T10:00:00+00:00",
    },
    {
        "id": "m05",
        "speaker": "assistant",
        "text": "The vet clinic on Elm Street has vaccine slots on Friday.",
        "timestamp": "2024-05-02T10:01:00+00:00",
    },
    {
        "id": "m06",
        "speaker": "user",
        "text": "Rex the beagle hates the car ride to the vet.",
        "timestamp": "2024-05-02T10:02:00+00:00",
    },
    {
        "id": "m07",
        "speaker": "user",
        "text": "I am planning a trip to Lisbon in June with my sister.",
        "timestamp": "2024-05-03T11:00:00+00:00",
    },
    {
        "id": "m08",
        "speaker": "assistant",
        "text": "Lisbon in June is warm; book the trip flights early.",
        "timestamp": "2024-05-03T11:01:00+00:00",
    },
    {
        "id": "m09",
        "speaker": "user",
        "text": "My sister wants to visit the Lisbon tram museum on the trip.",
        "timestamp": "2024-05-03T11:02:00+00:00",
    },
    {
        "id": "m10",
        "speaker": "user",
        "text": "I drink green tea every morning, never coffee.",
        "timestamp": "2024-05-04T08:00:00+00:00",
    },
]


def seeded_memory(namespace: str = "u1", messages: list[dict[str, Any]] | None = None):
    """An in-memory Mnemis memory with the hashing embedder, holding ``CONVERSATION`` in ``namespace``."""
    from mnemis_integrations import MnemisMemory
    from mnemis_integrations.core.embedders import HashingEmbedder

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(CONVERSATION if messages is None else messages, namespace=namespace)
    return mem


def empty_memory():
    """An in-memory Mnemis memory with the hashing embedder and nothing in it."""
    from mnemis_integrations import MnemisMemory
    from mnemis_integrations.core.embedders import HashingEmbedder

    return MnemisMemory(embedder=HashingEmbedder())


def sqlite_file_bytes(path) -> bytes:
    """Every byte of a SQLite store on disk: the file, its write-ahead log and any rollback journal."""
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
