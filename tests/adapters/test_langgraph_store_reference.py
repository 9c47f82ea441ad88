"""MnemisStore against LangGraph's own InMemoryStore: what the BaseStore contract fixes must agree."""

from __future__ import annotations

import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import MnemisError
from mnemis_integrations.langchain import MnemisStore
from mnemis_integrations.langchain.store import item_level_config

NS = ("memories", "u1")
OTHER = ("memories", "u2")


def make_store() -> MnemisStore:
    return MnemisStore(MnemisMemory(embedder=HashingEmbedder(), config=item_level_config()))


def found(store, namespace, query: str) -> set[str]:
    return {i.key for i in store.search(namespace, query=query, limit=10)}


def test_a_failed_batch_leaves_recall_as_it_was():
    # The second put is refused by the memory; the first put's overwrite must not have forgotten
    # the value the backing store still holds.
    store = make_store()
    store.put(NS, "drink", {"text": "User drinks green tea every morning"})
    with pytest.raises(MnemisError):
        store.batch(
            [
                PutOp(NS, "drink", {"text": "User switched to black coffee"}),
                PutOp(OTHER, "bad", {"text": "contains a NUL \x00 character"}),
            ]
        )
    assert store.get(NS, "drink").value == {"text": "User drinks green tea every morning"}
    assert "drink" in found(store, NS, "green tea every morning")
    assert [m.text for m in store.memory.messages("memories:u1")] == ["User drinks green tea every morning"]


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"text": "tea", 1: "one"}, id="non-string-key"),
        pytest.param({"text": "lone surrogate \ud800"}, id="lone-surrogate"),
    ],
)
def test_a_value_the_reference_stores_gets_no_bare_builtin_error(value):
    reference = InMemoryStore()
    reference.put(NS, "k", value)
    assert reference.get(NS, "k").value == value
    store = make_store()
    try:
        store.put(NS, "k", value)
    except MnemisError:
        return  # refused with a typed error: acceptable
    assert store.get(NS, "k").value == value
