"""The async API against its sync twins: the same errors for the same input, no half-done write
after a cancel, and no wait on a namespace lock on the event loop.

A cancel stops the awaiting coroutine, not the thread it awaits: a write already handed to a
thread still completes, so what the coroutine was to do after it must complete too.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.base import PutOp

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import InvalidMessageError
from mnemis_integrations.langchain import MnemisChatMessageHistory, MnemisStore
from mnemis_integrations.langchain.store import item_level_config
from mnemis_integrations.llama_index import MnemisPropertyGraphStore

NS = ("memories", "u1")


class GatedEmbedder(HashingEmbedder):
    """Once ``gate`` is set, embedding says it started and waits (10 s at most) to be released."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = False
        self.started = threading.Event()
        self.release = threading.Event()

    def embed_passages(self, texts):
        if self.gate:
            self.started.set()
            self.release.wait(10)
        return super().embed_passages(texts)


def gate_purge(mem: MnemisMemory) -> tuple[threading.Event, threading.Event]:
    """Make the store's purge (the last step of a forget, in its thread) wait to be released."""
    started, release = threading.Event(), threading.Event()
    purge = mem._store.purge

    def gated() -> None:
        started.set()
        release.wait(10)
        purge()

    mem._store.purge = gated
    return started, release


async def settled(check, timeout: float = 5.0) -> bool:
    """Whether ``check()`` holds within ``timeout`` seconds of loop time."""
    for _ in range(int(timeout / 0.02)):
        if check():
            return True
        await asyncio.sleep(0.02)
    return check()


def msgs(prefix: str, n: int) -> list[dict]:
    return [
        {"id": f"{prefix}{i}", "speaker": "ann", "text": f"refund {prefix} number {i} went to the courier"}
        for i in range(n)
    ]


# -- the async twin refuses what the sync one refuses, with the same error ----------------------


@pytest.mark.parametrize("bad", [None, 5, "one message as text", {"id": "1", "speaker": "a", "text": "x"}])
async def test_aadd_messages_refuses_a_non_list_as_add_messages_does(bad):
    mem = MnemisMemory(embedder=HashingEmbedder())
    with pytest.raises(InvalidMessageError) as sync_error:
        mem.add_messages(bad, namespace="ns")
    with pytest.raises(InvalidMessageError) as async_error:
        await mem.aadd_messages(bad, namespace="ns")
    assert str(async_error.value) == str(sync_error.value)


# -- a cancelled write is done whole or not at all ------------------------------------------------


async def test_history_aforget_cancelled_still_erases_the_message_from_the_window():
    mem = MnemisMemory(embedder=HashingEmbedder())
    history = MnemisChatMessageHistory(mem, namespace="u1")
    await history.aadd_messages(
        [HumanMessage("my card number is 4242 4242", id="m1"), HumanMessage("the refund is late", id="m2")]
    )
    started, release = gate_purge(mem)
    task = asyncio.create_task(history.aforget(["m1"]))
    assert await asyncio.to_thread(started.wait, 5)
    task.cancel()  # the forget runs on in its thread: m1 leaves the memory
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await settled(lambda: "m1" not in {m.id for m in mem.messages("u1")})
    # the erased text must not stay in the window the model is shown
    assert await settled(lambda: "m1" not in {m.id for m in history.messages})


async def test_history_aadd_messages_cancelled_still_puts_the_stored_message_in_the_window():
    emb = GatedEmbedder()
    mem = MnemisMemory(embedder=emb)
    history = MnemisChatMessageHistory(mem, namespace="u1")
    emb.gate = True
    task = asyncio.create_task(history.aadd_messages([HumanMessage("my refund is late", id="m1")]))
    assert await asyncio.to_thread(emb.started.wait, 5)
    task.cancel()  # the ingest runs on in its thread: m1 is stored
    emb.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await settled(lambda: "m1" in {m.id for m in mem.messages("u1")})
    assert await settled(lambda: "m1" in {m.id for m in history.messages})


async def test_store_adelete_cancelled_leaves_no_item_that_recall_lost():
    mem = MnemisMemory(embedder=HashingEmbedder(), config=item_level_config())
    store = MnemisStore(mem)
    await store.aput(NS, "tea", {"text": "User drinks green tea every morning"})
    started, release = gate_purge(mem)
    task = asyncio.create_task(store.abatch([PutOp(NS, "tea", None)]))
    assert await asyncio.to_thread(started.wait, 5)
    task.cancel()  # the forget runs on in its thread: the item's message leaves the memory
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await settled(lambda: not mem.namespaces())
    # deleted whole (no item) or not at all (recall finds it): not an item recall can never find
    assert await settled(lambda: store.get(NS, "tea") is None)


# -- reads wait for a namespace lock off the event loop -------------------------------------------


@pytest.mark.parametrize("read", ["aget", "aget_triplets", "aget_rel_map", "aget_schema"])
async def test_graph_store_async_read_lets_the_loop_run_while_a_write_holds_the_namespace(read):
    emb = GatedEmbedder()
    mem = MnemisMemory(embedder=emb)
    mem.add_messages(msgs("a", 3), namespace="pg")
    store = MnemisPropertyGraphStore(memory=mem, namespace="pg")
    args = (store.get(),) if read == "aget_rel_map" else ()
    emb.gate = True  # the next ingest embeds holding the namespace's lock
    write = asyncio.create_task(mem.aadd_messages(msgs("b", 2), namespace="pg"))
    assert await asyncio.to_thread(emb.started.wait, 5)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    t = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    threading.Timer(0.3, emb.release.set).start()
    before = ticks
    await getattr(store, read)(*args)  # awaited directly: a task around it would let the ticker run first
    during = ticks - before
    t.cancel()
    await write
    assert during > 0, f"{read} blocked the event loop while it waited for the namespace"
