"""MnemisStore conformance: exact-key operations, recall-backed search, batch semantics, create_agent."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import pytest
from fakes import ScriptedChatModel, call_tool, empty_memory
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.tools import tool
from langgraph.store.base import GetOp, PutOp, SearchOp
from langgraph.store.base import InvalidNamespaceError as LangGraphNamespaceError
from langgraph.store.memory import InMemoryStore

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import ConfigError
from mnemis_integrations.langchain import MnemisRetriever, MnemisSearchItem, MnemisStore
from mnemis_integrations.langchain.store import item_level_config

NS = ("memories", "u1")
FIXED = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)

FACTS = {
    "tea": {"text": "User drinks green tea every morning, never coffee.", "kind": "preference", "n": 1},
    "rex": {"text": "User's beagle Rex needs his vaccines at the vet.", "kind": "pet", "n": 2},
    "lisbon": {"text": "User plans a June trip to Lisbon with a sister.", "kind": "travel", "n": 3},
    "refund": {"text": "User's refund for order 1234 timed out on the website.", "kind": "shopping", "n": 4},
    "vet": {"text": "The vet clinic on Elm Street has vaccine slots on Friday.", "kind": "pet", "n": 5},
}


def item_memory() -> MnemisMemory:
    return MnemisMemory(embedder=HashingEmbedder(), config=item_level_config())


def make_store(**kwargs) -> MnemisStore:
    return MnemisStore(item_memory(), clock=lambda: FIXED, **kwargs)


def message_texts(store: MnemisStore, namespace: str) -> list[str]:
    return [m.text for m in store.memory.messages(namespace)]


@pytest.fixture
def store() -> MnemisStore:
    s = make_store()
    for key, value in FACTS.items():
        s.put(NS, key, value)
    return s


# -- exact-key operations ------------------------------------------------------------------------


def test_put_then_get_returns_the_value(store):
    item = store.get(NS, "tea")
    assert item is not None and item.value == FACTS["tea"] and item.key == "tea" and item.namespace == NS
    assert store.get(NS, "nope") is None
    assert store.get(("memories", "u2"), "tea") is None


def test_put_overwrites_and_delete_removes(store):
    store.put(NS, "tea", {"text": "User switched to oolong tea."})
    assert store.get(NS, "tea").value == {"text": "User switched to oolong tea."}
    store.delete(NS, "tea")
    assert store.get(NS, "tea") is None


def test_list_namespaces_is_answered_by_the_backing_store(store):
    store.put(("memories", "u2"), "a", {"text": "Hello there"})
    store.put(("notes", "u1"), "b", {"text": "Buy milk"})
    assert store.list_namespaces() == [("memories", "u1"), ("memories", "u2"), ("notes", "u1")]
    assert store.list_namespaces(prefix=("memories",)) == [("memories", "u1"), ("memories", "u2")]
    assert store.list_namespaces(suffix=("u1",)) == [("memories", "u1"), ("notes", "u1")]
    assert store.list_namespaces(max_depth=1) == [("memories",), ("notes",)]


def test_search_without_query_lists_items_with_filter_offset_limit(store):
    pets = store.search(NS, filter={"kind": "pet"})
    assert sorted(i.key for i in pets) == ["rex", "vet"]
    everything = [i.key for i in store.search(NS, limit=100)]
    assert sorted(everything) == sorted(FACTS)
    assert [i.key for i in store.search(NS, limit=2, offset=1)] == everything[1:3]


def test_a_custom_backing_store_holds_the_values():
    backing = InMemoryStore()
    s = MnemisStore(item_memory(), backing=backing, clock=lambda: FIXED)
    s.put(NS, "tea", FACTS["tea"])
    assert backing.get(NS, "tea").value == FACTS["tea"]


# -- recall-backed search ------------------------------------------------------------------------


def test_every_put_is_ingested_into_memory(store):
    texts = sorted(message_texts(store, "memories:u1"))
    expected = sorted(f"{v['text']}\n{v['kind']}\nn: {v['n']}" for v in FACTS.values())
    assert texts == expected


def test_putting_the_same_value_again_stores_one_message(store):
    store.put(NS, "tea", FACTS["tea"])
    assert len(store.memory.messages("memories:u1")) == len(FACTS)


def test_query_search_finds_the_put_item_with_score_and_path(store):
    results = store.search(NS, query="what does the user drink in the morning? tea or coffee")
    assert results and results[0].key == "tea"
    top = results[0]
    assert isinstance(top, MnemisSearchItem)
    assert top.value == FACTS["tea"] and top.namespace == NS
    assert 0.0 <= top.score <= 1.0 and top.path and top.path_str == " > ".join(top.path)
    assert top.dict()["mnemis"]["path_str"] == top.path_str
    assert len({(i.namespace, i.key) for i in results}) == len(results)


def test_query_search_honours_filter(store):
    results = store.search(NS, query="beagle vet vaccines", filter={"kind": "pet"}, limit=10)
    assert results and {i.key for i in results} <= {"rex", "vet"}
    assert store.search(NS, query="beagle vet vaccines", filter={"kind": "no-such-kind"}) == []


def test_query_search_pages_with_offset_and_limit(store):
    full = [i.key for i in store.search(NS, query="user", limit=10)]
    assert len(full) >= 4
    assert [i.key for i in store.search(NS, query="user", limit=2)] == full[:2]
    assert [i.key for i in store.search(NS, query="user", limit=2, offset=2)] == full[2:4]


def test_overwritten_value_is_found_by_its_new_text_not_its_old_one(store):
    store.put(NS, "tea", {"text": "User now prefers espresso macchiato.", "kind": "preference", "n": 1})
    new = store.search(NS, query="espresso macchiato", limit=1)
    assert [i.key for i in new] == ["tea"] and new[0].value["text"].startswith("User now prefers")
    old = store.search(NS, query="green tea every morning", limit=10)
    assert all(i.value["text"] != FACTS["tea"]["text"] for i in old)


def test_deleted_item_is_never_returned_by_search(store):
    store.delete(NS, "refund")
    assert all(i.key != "refund" for i in store.search(NS, query="refund order 1234 timed out", limit=10))


def test_prefix_search_covers_every_namespace_below(store):
    store.put(("memories", "u2"), "dentist", {"text": "User two booked a dentist visit for Tuesday."})
    results = store.search(("memories",), query="dentist visit Tuesday", limit=10)
    assert (("memories", "u2"), "dentist") in {(i.namespace, i.key) for i in results}
    assert store.search(("memories", "u2"), query="green tea", limit=10)[0].namespace == ("memories", "u2")


def test_query_search_on_an_unknown_namespace_is_empty(store):
    assert store.search(("memories", "nobody"), query="tea") == []


def test_put_with_index_false_is_stored_but_not_recalled():
    s = make_store()
    s.put(NS, "secret", {"text": "The vault code is 9876."}, index=False)
    assert s.get(NS, "secret").value == {"text": "The vault code is 9876."}
    assert s.search(NS, query="vault code") == []


def test_put_index_fields_choose_what_is_ingested():
    s = make_store(fields=["text"])
    s.put(NS, "a", {"text": "Likes hiking in the Alps.", "note": "zebra-ignored"})
    s.put(NS, "b", {"text": "Plays chess.", "note": "xylophone"}, index=["note"])
    assert set(message_texts(s, "memories:u1")) == {"Likes hiking in the Alps.", "xylophone"}


def test_one_value_put_again_with_other_index_fields_is_ingested_by_those_fields_only():
    s = make_store()
    s.put(NS, "a", {"text": "Likes hiking.", "note": "owns a kayak"}, index=["text"])
    s.put(NS, "a", {"text": "Likes hiking.", "note": "owns a kayak"}, index=["note"])
    assert message_texts(s, "memories:u1") == ["owns a kayak"]
    assert [i.key for i in s.search(NS, query="kayak", limit=1)] == ["a"]


# -- deleting and overwriting -------------------------------------------------------------------

PASSPORT = {"text": "User's passport number is X4471922, renewed in 2023.", "kind": "document"}


def test_a_deleted_item_is_forgotten_by_the_memory_so_no_retriever_finds_it(store):
    """Before: delete() removed the item from the store's view only; a MnemisRetriever (or
    memory.search) over the same namespace still returned the passport number."""
    store.put(NS, "passport", PASSPORT)
    store.delete(NS, "passport")
    assert all(i.key != "passport" for i in store.search(NS, query="passport number", limit=10))
    assert all("X4471922" not in m.text for m in store.memory.messages("memories:u1"))
    retriever = MnemisRetriever(memory=store.memory, namespace="memories:u1", k=10)
    docs = retriever.invoke("passport number X4471922")
    assert docs and all("X4471922" not in d.page_content for d in docs)
    hits = store.memory.search("passport number X4471922", k=10, namespace="memories:u1")
    assert hits and all("X4471922" not in h.text for h in hits)


def test_a_deleted_item_leaves_no_byte_of_its_text_in_a_persisted_memory(tmp_path):
    path = tmp_path / "store.db"
    s = MnemisStore(
        MnemisMemory(path, embedder=HashingEmbedder(), config=item_level_config()), clock=lambda: FIXED
    )
    s.put(NS, "tea", FACTS["tea"])
    s.put(NS, "passport", PASSPORT)
    s.delete(NS, "passport")
    on_disk = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"X4471922" not in on_disk and b"green tea" in on_disk


def test_deleting_the_last_item_of_a_namespace_leaves_no_memory_there():
    s = make_store()
    s.put(NS, "passport", PASSPORT)
    s.delete(NS, "passport")
    assert s.memory.namespaces() == []
    assert MnemisRetriever(memory=s.memory, namespace="memories:u1").invoke("passport number") == []


def test_an_overwrite_keeps_only_the_new_version_in_memory(store):
    """Before: both versions stayed in memory, and recall answered from the old text as well."""
    store.put(NS, "tea", {"text": "User switched to oolong tea.", "kind": "preference", "n": 1})
    texts = message_texts(store, "memories:u1")
    assert len(texts) == len(FACTS)
    assert any("oolong" in t for t in texts) and not any("green tea" in t for t in texts)


def test_a_put_without_indexing_forgets_the_text_an_earlier_put_ingested():
    s = make_store()
    s.put(NS, "passport", PASSPORT)
    s.put(NS, "passport", {"text": "(redacted)"}, index=False)
    assert s.memory.namespaces() == []
    assert s.get(NS, "passport").value == {"text": "(redacted)"}


def test_memory_messages_that_are_not_store_items_are_never_forgotten_by_a_store():
    s = make_store()
    s.memory.add_messages(
        [{"id": "chat-1", "speaker": "user", "text": "Hi, I like tea."}], namespace="memories:u1"
    )
    s.put(NS, "tea", FACTS["tea"])
    s.delete(NS, "tea")
    assert [m.id for m in s.memory.messages("memories:u1")] == ["chat-1"]


async def test_async_delete_and_overwrite_forget_the_earlier_text():
    s = make_store()
    await s.aput(NS, "passport", PASSPORT)
    await s.aput(NS, "tea", FACTS["tea"])
    await s.aput(NS, "tea", {"text": "User switched to oolong tea."})
    await s.adelete(NS, "passport")
    assert message_texts(s, "memories:u1") == ["User switched to oolong tea."]


# -- ranking -------------------------------------------------------------------------------------


def test_prefix_search_ranks_items_of_every_namespace_on_one_scale():
    """Before: each namespace's recall scores were normalised on their own and merged as if
    comparable, so u2's one unrelated item (its namespace's best, 0.8) ranked above a matching u1 item."""
    s = make_store()
    s.put(("memories", "u1"), "tea", {"text": "User drinks green tea every morning."})
    s.put(("memories", "u1"), "matcha", {"text": "User likes matcha tea with oat milk."})
    s.put(("memories", "u1"), "rex", {"text": "User's beagle Rex needs vaccines at the vet."})
    s.put(("memories", "u2"), "car", {"text": "The car needs new winter tyres."})
    results = s.search(("memories",), query="which tea does the user drink?", limit=4)
    assert [(i.namespace[-1], i.key) for i in results[:2]] == [("u1", "tea"), ("u1", "matcha")]
    assert results[-1].key in {"car", "rex"} and results[1].score > max(r.score for r in results[2:])
    alone = s.search(("memories", "u2"), query="which tea does the user drink?")
    assert alone[0].score == next(i.score for i in results if i.key == "car")


def test_a_store_over_a_default_memory_ranks_the_items_of_one_fragment_one_by_one():
    """Before: items that arrived together shared their fragment's hit, so every one scored the
    same (0.933 x5) and came back in put order."""
    s = MnemisStore(empty_memory(), clock=lambda: FIXED)
    s.batch([PutOp(NS, key, value) for key, value in FACTS.items()])
    assert len({n.id for n in s.memory.graph("memories:u1").nodes() if n.kind.value == "fragment"}) < len(
        FACTS
    )
    results = s.search(NS, query="beagle Rex vaccines at the vet", limit=5)
    scores = [i.score for i in results]
    assert [i.key for i in results[:2]] == ["rex", "vet"]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[1] > scores[2] >= 0


def test_a_store_without_a_memory_makes_an_item_level_one_with_the_default_embedder():
    """Before: MnemisStore() needed a memory, and MnemisStore(MnemisMemory()) scored items 0.000."""
    s = MnemisStore(clock=lambda: FIXED)
    assert s.memory.config.build.max_segment_messages == 1
    s.put(NS, "tea", {"text": "User drinks green tea every morning"})
    s.put(NS, "rex", {"text": "User's beagle Rex needs vaccines"})
    s.put(NS, "lisbon", {"text": "User plans a trip to Lisbon in June"})
    results = s.search(NS, query="what does the user drink?")
    assert results[0].key == "tea" and results[0].score > 0
    assert results[0].score > results[1].score >= results[2].score


def _hashing_embed(texts: list[str]) -> list[list[float]]:
    return HashingEmbedder().embed_passages(texts).tolist()


def test_index_config_is_read_as_langgraph_stores_read_it():
    s = MnemisStore(index={"dims": 256, "embed": _hashing_embed, "fields": ["text"]}, clock=lambda: FIXED)
    s.put(NS, "a", {"text": "Likes hiking in the Alps.", "note": "zebra"})
    s.put(NS, "b", {"text": "Plays chess on Sundays.", "note": "xylophone"})
    assert message_texts(s, "memories:u1") == ["Likes hiking in the Alps.", "Plays chess on Sundays."]
    assert s.memory.config.build.max_segment_messages == 1
    assert s.search(NS, query="hiking in the Alps")[0].key == "a"


def test_index_config_that_contradicts_other_arguments_is_refused():
    with pytest.raises(ConfigError, match="embedder"):
        MnemisStore(item_memory(), index={"embed": _hashing_embed})
    with pytest.raises(ConfigError, match="fields"):
        MnemisStore(item_memory(), index={"fields": ["text"]}, fields=["note"])


# -- validation ----------------------------------------------------------------------------------


def test_a_batch_with_a_namespace_langgraph_refuses_writes_nothing():
    s = make_store()
    with pytest.raises(LangGraphNamespaceError):
        s.batch([PutOp(NS, "ok", {"text": "first"}), PutOp(("a.b",), "k", {"text": "second"})])
    assert s.get(NS, "ok") is None
    assert s.memory.namespaces() == []


@pytest.mark.parametrize(
    "namespace",
    [
        ("users", "user:42"),
        ("memories", "john smith"),
        ("memories", "Zoë"),
        ("org/team", "notes"),
        ("memories", "auth0|5f7c8ec7c33c6c004bbafe82"),
        ("memories", "x" * 129),
    ],
)
def test_labels_langgraph_accepts_are_stored_recalled_listed_and_forgotten(namespace):
    """Before: each of these raised InvalidNamespaceError, though LangGraph's own stores take them."""
    s = make_store()
    s.put(namespace, "tea", FACTS["tea"])
    s.put(("memories", "other"), "rex", FACTS["rex"])
    assert s.get(namespace, "tea").value == FACTS["tea"]
    assert [i.key for i in s.search(namespace, query="green tea every morning", limit=5)] == ["tea"]
    assert namespace in s.list_namespaces()
    s.delete(namespace, "tea")
    assert s.memory.namespaces() == ["memories:other"]


def test_langgraph_label_rules_still_apply():
    with pytest.raises(LangGraphNamespaceError):
        make_store().put(("a.b",), "k", {"text": "x"})


# -- batch semantics -----------------------------------------------------------------------------


def test_reads_in_a_batch_see_the_state_before_its_writes():
    s = make_store()
    s.put(NS, "tea", FACTS["tea"])
    results = s.batch(
        [
            PutOp(NS, "rex", FACTS["rex"]),
            GetOp(NS, "rex"),
            SearchOp(NS, query="beagle Rex vaccines vet", limit=10),
            PutOp(NS, "tea", None),
            GetOp(NS, "tea"),
        ]
    )
    assert results[0] is None and results[3] is None
    assert results[1] is None
    assert all(i.key != "rex" for i in results[2])
    assert results[4].value == FACTS["tea"]
    # ...and the writes are applied once the batch is done
    assert s.get(NS, "rex").value == FACTS["rex"] and s.get(NS, "tea") is None
    assert s.search(NS, query="beagle Rex vaccines vet", limit=1)[0].key == "rex"


async def test_async_batch_has_the_same_semantics():
    s = make_store()
    results = await s.abatch(
        [PutOp(NS, "rex", FACTS["rex"]), GetOp(NS, "rex"), SearchOp(NS, query="beagle", limit=5)]
    )
    assert results[1] is None and results[2] == []
    assert (await s.aget(NS, "rex")).value == FACTS["rex"]
    found = await s.asearch(NS, query="beagle Rex vaccines", limit=1)
    assert [i.key for i in found] == ["rex"]
    await s.adelete(NS, "rex")
    assert await s.asearch(NS, query="beagle Rex vaccines") == []


def test_last_put_of_a_key_in_a_batch_wins():
    s = make_store()
    s.batch([PutOp(NS, "k", {"text": "first draft"}), PutOp(NS, "k", {"text": "final answer"})])
    assert s.get(NS, "k").value == {"text": "final answer"}
    assert message_texts(s, "memories:u1") == ["final answer"]


# -- inside an agent -----------------------------------------------------------------------------


@dataclass
class UserContext:
    user_id: str


@tool
def save_memory(text: str, runtime: ToolRuntime[UserContext]) -> str:
    """Save one fact about the user."""
    runtime.store.put(("memories", runtime.context.user_id), "fact-1", {"text": text})
    return "saved"


@tool
def search_memory(query: str, runtime: ToolRuntime[UserContext]) -> str:
    """Search saved facts about the user."""
    items = runtime.store.search(("memories", runtime.context.user_id), query=query, limit=3)
    return "\n".join(f"[{i.path_str}] {i.value['text']}" for i in items) or "nothing"


def test_create_agent_tools_write_to_and_recall_from_the_store():
    store = make_store()
    model = ScriptedChatModel.of(
        call_tool("save_memory", text="User is allergic to peanuts."),
        "Noted.",
        call_tool("search_memory", call_id="call-2", query="peanuts allergy"),
        lambda msgs: "You told me: " + msgs[-1].text,
    )
    agent = create_agent(model, tools=[save_memory, search_memory], store=store, context_schema=UserContext)
    agent.invoke(
        {"messages": [{"role": "user", "content": "Remember I'm allergic to peanuts"}]},
        context=UserContext("u9"),
    )
    assert store.get(("memories", "u9"), "fact-1").value == {"text": "User is allergic to peanuts."}

    out = agent.invoke(
        {"messages": [{"role": "user", "content": "What am I allergic to?"}]}, context=UserContext("u9")
    )
    answer = out["messages"][-1].text
    assert answer.startswith("You told me: [") and "peanuts" in answer
    assert model.calls == 4


def test_with_a_default_memory_items_sharing_a_fragment_are_all_found():
    """Puts that arrive together may share one fragment; each of them is still a search result."""
    s = MnemisStore(empty_memory(), clock=lambda: FIXED)
    s.batch([PutOp(NS, key, value) for key, value in FACTS.items()])
    found = {i.key for i in s.search(NS, query="beagle Rex vaccines vet", limit=10)}
    assert {"rex", "vet"} <= found
