"""MnemisStore keys against LangGraph's InMemoryStore: any key the reference takes, read back as given."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest
from langgraph.store.memory import InMemoryStore

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import InvalidMessageError
from mnemis_integrations.langchain import MnemisStore
from mnemis_integrations.langchain._convert import store_message_id
from mnemis_integrations.langchain.store import item_level_config

NS = ("memories", "u1")
NAME = "memories:u1"
TEA = {"text": "User drinks green tea every morning"}
COFFEE = {"text": "User switched to black coffee after lunch"}
FIXED = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)

# Keys the message id rules refuse as they are: control characters, a lone surrogate, past 236 characters.
ODD_KEYS = [
    pytest.param("line\nbreak", id="newline"),
    pytest.param("nul\x00key", id="nul"),
    pytest.param("tab\tand\x7fdel", id="tab-del"),
    pytest.param("lone \ud800 surrogate", id="surrogate"),
    pytest.param("k" * 237, id="237-chars"),
    pytest.param("long#" * 200, id="1000-chars-with-hashes"),
    pytest.param("%0025 escaped-looking\n", id="percent"),
]


def memory(path=None) -> MnemisMemory:
    return MnemisMemory(path, embedder=HashingEmbedder(), config=item_level_config())


def found(store, query: str) -> list[str]:
    return [i.key for i in store.search(NS, query=query, limit=10)]


def texts(store: MnemisStore) -> list[str]:
    return [m.text for m in store.memory.messages(NAME)]


@pytest.mark.parametrize("key", ODD_KEYS)
def test_a_key_the_reference_takes_is_put_got_searched_listed_and_deleted(key):
    reference, store = InMemoryStore(), MnemisStore(memory())
    for s in (reference, store):
        s.put(NS, key, TEA)
        s.put(NS, "plain", COFFEE)
    for s in (reference, store):
        assert s.get(NS, key).key == key and s.get(NS, key).value == TEA
        assert sorted(i.key for i in s.search(NS)) == sorted([key, "plain"])
    assert found(store, "green tea every morning")[0] == key
    assert store.search(NS, query="green tea", filter={"text": TEA["text"]})[0].key == key

    for s in (reference, store):
        s.delete(NS, key)
        assert s.get(NS, key) is None and [i.key for i in s.search(NS)] == ["plain"]
    assert key not in found(store, "green tea every morning")
    assert texts(store) == [COFFEE["text"]]


@pytest.mark.parametrize("key", ODD_KEYS)
def test_overwriting_an_odd_key_forgets_its_earlier_value(key):
    store = MnemisStore(memory())
    store.put(NS, key, TEA)
    store.put(NS, key, COFFEE)
    assert texts(store) == [COFFEE["text"]]
    assert [(i.key, i.value) for i in store.search(NS, query="green tea every morning")] == [(key, COFFEE)]


def test_odd_keys_are_found_again_after_the_memory_is_reopened(tmp_path):
    path, backing = tmp_path / "mem.db", InMemoryStore()
    keys = ["line\nbreak", "k" * 300]
    store = MnemisStore(memory(path), backing=backing)
    store.put(NS, keys[0], TEA)
    store.put(NS, keys[1], COFFEE)
    store.memory.close()

    reopened = MnemisStore(memory(path), backing=backing)
    assert found(reopened, "green tea every morning")[0] == keys[0]
    assert found(reopened, "black coffee after lunch")[0] == keys[1]
    reopened.delete(NS, keys[0])
    assert texts(reopened) == [COFFEE["text"]]


def test_a_nul_in_the_value_text_is_still_refused_with_a_typed_error():
    store = MnemisStore(memory())
    store.put(NS, "nul\x00key", TEA)
    with pytest.raises(InvalidMessageError, match="NUL"):
        store.put(NS, "nul\x00key", {"text": "a NUL \x00 in the text"})
    assert store.get(NS, "nul\x00key").value == TEA and texts(store) == [TEA["text"]]


def test_a_key_past_the_metadata_limit_is_refused_with_a_typed_error_before_any_write():
    # The escaped key must fit one metadata value (limits.max_metadata_chars); stored unindexed it fits.
    key = "k" * 5000
    store = MnemisStore(memory())
    store.put(NS, "plain", COFFEE)
    with pytest.raises(InvalidMessageError, match="store_key"):
        store.put(NS, key, TEA)
    assert store.get(NS, key) is None and texts(store) == [COFFEE["text"]]
    store.put(NS, key, TEA, index=False)
    assert store.get(NS, key).value == TEA


# -- keys that were fine keep their ids -----------------------------------------------------------

PLAIN_IDS = {
    # Written by the version before odd keys were taken: "<key>#<value digest>:<text digest>".
    "tea": "tea#e5a8012451f5:fbbee3",
    "k" * 236: "k" * 236 + "#e5a8012451f5:fbbee3",
    "user:42 #1": "user:42 #1#e5a8012451f5:fbbee3",
}


def test_a_key_that_fit_the_id_rules_keeps_its_id():
    for key, message_id in PLAIN_IDS.items():
        assert store_message_id(key, TEA, TEA["text"]) == message_id


def test_a_store_written_with_plain_ids_reads_back_unchanged(tmp_path):
    # The memory and backing store as the earlier version left them, ids written out by hand.
    path, backing = tmp_path / "mem.db", InMemoryStore()
    old = memory(path)
    old.add_messages(
        [
            {"id": mid, "speaker": "memory", "text": TEA["text"], "timestamp": FIXED}
            for mid in PLAIN_IDS.values()
        ],
        namespace=NAME,
    )
    old.close()
    for key in PLAIN_IDS:
        backing.put(NS, key, TEA)

    store = MnemisStore(memory(path), backing=backing)
    assert sorted(found(store, "green tea every morning")) == sorted(PLAIN_IDS)
    store.put(NS, "tea", TEA)  # the same value again: stored once, under the same id
    assert sorted(m.id for m in store.memory.messages(NAME)) == sorted(PLAIN_IDS.values())
    store.put(NS, "tea", COFFEE)
    store.delete(NS, "k" * 236)
    assert sorted(m.id for m in store.memory.messages(NAME)) == sorted(
        [PLAIN_IDS["user:42 #1"], store_message_id("tea", COFFEE, COFFEE["text"])]
    )
    assert found(store, "black coffee after lunch")[0] == "tea"


def test_the_async_store_takes_odd_keys_too():
    async def run(store: MnemisStore) -> list[tuple[str, dict]]:
        await store.aput(NS, "plain", {"text": "The vet clinic has slots on Friday"})
        await store.aput(NS, "line\nbreak", TEA)
        await store.aput(NS, "line\nbreak", COFFEE)
        hits = await store.asearch(NS, query="black coffee after lunch")
        await store.adelete(NS, "line\nbreak")
        return [(i.key, i.value) for i in hits]

    store = MnemisStore(memory())
    assert asyncio.run(run(store))[0] == ("line\nbreak", COFFEE)
    assert texts(store) == ["The vet clinic has slots on Friday"]
