"""Legacy MnemisClassicMemory (langchain-classic BaseMemory): formatted recall in, exchanges saved."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from fakes import empty_memory, seeded_memory
from langchain_core.documents import Document

from mnemis_integrations.langchain.classic import MnemisClassicMemory

FIXED = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)


def make_memory(mem=None, **kwargs) -> MnemisClassicMemory:
    return MnemisClassicMemory(
        memory=mem or seeded_memory("u1"), namespace="u1", k=3, clock=lambda: FIXED, **kwargs
    )


def test_load_memory_variables_returns_recall_with_paths():
    memory = make_memory()
    expected = memory.memory.search("refund order", k=3, namespace="u1")
    text = memory.load_memory_variables({"input": "refund order"})["history"]
    assert memory.memory_variables == ["history"]
    assert text.startswith(memory.header)
    assert f"- [{expected[0].path_str}] " in text and expected[0].path


def test_return_docs_gives_documents_with_metadata():
    docs = make_memory(return_docs=True, memory_key="ctx").load_memory_variables({"question": "beagle vet"})[
        "ctx"
    ]
    assert docs and all(isinstance(d, Document) and d.metadata["path_str"] for d in docs)


def test_save_context_ingests_input_and_output():
    memory = make_memory(empty_memory())
    memory.save_context({"input": "I love green tea."}, {"response": "Noted!"})
    stored = memory.memory.messages("u1")
    assert [(m.speaker, m.text, m.timestamp) for m in stored] == [
        ("user", "I love green tea.", FIXED),
        ("assistant", "Noted!", FIXED),
    ]
    assert "green tea" in memory.load_memory_variables({"input": "what tea do I like"})["history"]


async def test_async_save_and_load():
    memory = make_memory(empty_memory())
    await memory.asave_context({"input": "My sister visits in June."}, {"output": "Lovely."})
    loaded = await memory.aload_memory_variables({"input": "sister June"})
    assert "sister" in loaded["history"]


def test_empty_memory_loads_an_empty_string():
    assert make_memory(empty_memory()).load_memory_variables({"input": "anything"}) == {"history": ""}


def test_ambiguous_keys_must_be_named():
    memory = make_memory(empty_memory())
    with pytest.raises(ValueError, match="input key"):
        memory.load_memory_variables({"a": "x", "b": "y"})
    with pytest.raises(ValueError, match="output_key"):
        memory.save_context({"input": "hi"}, {"x": "1", "y": "2"})


def test_clear_is_refused_because_long_term_memory_is_kept():
    with pytest.raises(NotImplementedError, match="namespace"):
        make_memory().clear()
