"""MnemisChatMessageHistory: a chat window whose every message also lands in long-term memory."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone

import pytest
from fakes import ScriptedChatModel, empty_memory
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from mnemis_integrations.errors import DuplicateMessageError
from mnemis_integrations.langchain import MnemisChatMessageHistory, MnemisRetriever

FIXED = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)


def make_history(mem=None, **kwargs):
    return MnemisChatMessageHistory(mem or empty_memory(), "u1", clock=lambda: FIXED, **kwargs)


def test_added_messages_are_in_the_window_and_in_memory():
    history = make_history()
    history.add_user_message("My refund for order 1234 is late.")
    history.add_ai_message("I'm sorry, I will check the refund.")
    assert [(m.type, m.text) for m in history.messages] == [
        ("human", "My refund for order 1234 is late."),
        ("ai", "I'm sorry, I will check the refund."),
    ]
    stored = history.memory.messages("u1")
    assert [(m.speaker, m.text, m.timestamp) for m in stored] == [
        ("user", "My refund for order 1234 is late.", FIXED),
        ("assistant", "I'm sorry, I will check the refund.", FIXED),
    ]
    assert [m.id for m in stored] == [m.id for m in history.messages]


def test_clear_empties_the_window_but_memory_still_recalls():
    history = make_history()
    history.add_messages(
        [HumanMessage("My beagle Rex needs his vaccines."), AIMessage("The vet has slots on Friday.")]
    )
    history.clear()
    assert history.messages == []
    docs = MnemisRetriever(memory=history.memory, namespace="u1").invoke("beagle vaccines")
    assert docs and "Rex" in docs[0].page_content


def test_readding_a_message_with_its_id_stores_it_once():
    history = make_history()
    msg = HumanMessage("I drink green tea.", id="fixed-1")
    history.add_message(msg)
    history.add_message(msg)
    assert len(history.memory.messages("u1")) == 1


def test_same_id_with_other_text_is_refused_and_the_window_is_untouched():
    history = make_history()
    history.add_message(HumanMessage("I drink green tea.", id="fixed-1"))
    with pytest.raises(DuplicateMessageError):
        history.add_message(HumanMessage("I drink coffee.", id="fixed-1"))
    assert [m.text for m in history.messages] == ["I drink green tea."]


def test_a_custom_window_history_holds_the_messages():
    window = InMemoryChatMessageHistory()
    history = make_history(history=window)
    history.add_user_message("Plan my Lisbon trip.")
    assert [m.text for m in window.messages] == ["Plan my Lisbon trip."]


async def test_async_add_and_get():
    history = make_history()
    await history.aadd_messages([HumanMessage("Plan my Lisbon trip."), AIMessage("Sure, June is warm.")])
    assert [m.text for m in await history.aget_messages()] == ["Plan my Lisbon trip.", "Sure, June is warm."]
    assert len(history.memory.messages("u1")) == 2
    await history.aclear()
    assert history.messages == []


def test_runnable_with_message_history_ingests_each_exchange():
    mem = empty_memory()
    model = ScriptedChatModel.of("Noted: green tea.", "You drink green tea.")
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{input}")])
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: MnemisChatMessageHistory(mem, session_id, clock=lambda: FIXED),
        input_messages_key="input",
        history_messages_key="history",
    )
    cfg = {"configurable": {"session_id": "u1"}}
    chain.invoke({"input": "I drink green tea every morning."}, cfg)
    chain.invoke({"input": "What do I drink?"}, cfg)
    assert [m.text for m in mem.messages("u1")] == [
        "I drink green tea every morning.",
        "Noted: green tea.",
        "What do I drink?",
        "You drink green tea.",
    ]


def test_building_a_history_raises_no_deprecation_warning():
    """Before: each process's first history built an InMemoryChatMessageHistory as its window,
    which langchain-core 1.6.4 deprecated: a LangChainDeprecationWarning. A fresh interpreter,
    since LangChain warns once per process; warnings become errors after the imports, since
    importing langchain-core re-enables its own deprecation warnings as "default"."""
    code = (
        "import warnings\n"
        "from mnemis_integrations import MnemisMemory\n"
        "from mnemis_integrations.core.embedders import HashingEmbedder\n"
        "from mnemis_integrations.langchain import MnemisChatMessageHistory\n"
        "warnings.simplefilter('error')\n"
        "h = MnemisChatMessageHistory(MnemisMemory(embedder=HashingEmbedder()), 'u1')\n"
        "h.add_user_message('hello there')\n"
        "assert [m.text for m in h.messages] == ['hello there']\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_forget_erases_the_window_messages_from_memory_and_window_while_clear_keeps_memory():
    history = make_history()
    history.add_messages([HumanMessage("My passport number is X4471922.", id="p1")])
    history.clear()
    assert [m.id for m in history.memory.messages("u1")] == ["p1"]  # clear: window only
    history.add_messages(
        [HumanMessage("I drink green tea.", id="t1"), HumanMessage("Rex is my beagle.", id="r1")]
    )
    report = history.forget()
    assert (report.forgotten, history.messages) == (2, [])
    assert [m.id for m in history.memory.messages("u1")] == ["p1"]
    history.forget(["p1"])
    assert history.memory.namespaces() == []


def test_forget_named_messages_keeps_the_others_in_window_and_memory():
    history = make_history()
    history.add_messages(
        [HumanMessage("My passport number is X4471922.", id="p1"), AIMessage("Noted.", id="a1")]
    )
    history.forget(["p1"])
    assert [m.id for m in history.messages] == ["a1"]
    assert [m.id for m in history.memory.messages("u1")] == ["a1"]
    docs = MnemisRetriever(memory=history.memory, namespace="u1").invoke("passport number")
    assert all("X4471922" not in d.page_content for d in docs)


async def test_async_forget_erases_from_memory_and_window():
    history = make_history()
    await history.aadd_messages(
        [HumanMessage("My passport number is X4471922.", id="p1"), AIMessage("Noted.", id="a1")]
    )
    report = await history.aforget(["p1"])
    assert report.forgotten == 1
    assert [m.id for m in await history.aget_messages()] == ["a1"]
    assert [m.id for m in history.memory.messages("u1")] == ["a1"]
