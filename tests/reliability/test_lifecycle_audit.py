"""Resource lifecycle: forked children, a full disk, and what the process keeps after a forget.

The fork tests fork this process (as a ``multiprocessing`` pool on Linux does), let the child
report through a pipe, and always end it with ``os._exit`` so it never runs pytest's own exit.
"""

from __future__ import annotations

import gc
import os
import random
import select
import string
import time
import tracemalloc

import pytest

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import StoreError

fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
NS = "life"


def _message(i: int, text: str) -> dict:
    return {"id": f"m{i}", "speaker": "ann", "text": text}


def _in_child(body, wait_s: float = 20.0, meanwhile=None) -> str | None:
    """Run ``body()`` in a forked child; its answer (``"ok"`` or the error it raised), or ``None``
    when it gave none within ``wait_s`` (the child is then killed). ``meanwhile()``: what the parent
    does while the child runs."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            body()
            os.write(w, b"ok")
        except BaseException as e:
            os.write(w, repr(e).encode()[:1000])
        finally:
            os._exit(0)
    os.close(w)
    try:
        if meanwhile is not None:
            meanwhile()
        ready, _, _ = select.select([r], [], [], wait_s)
        if not ready:
            os.kill(pid, 9)
            return None
        return os.read(r, 1000).decode()
    finally:
        os.close(r)
        os.waitpid(pid, 0)


def _in_child_while_parent_closes(mem: MnemisMemory, body) -> str | None:
    """``body()`` in a forked child, with the parent closing ``mem`` while the child is still at work."""

    def close_at_half_a_second() -> None:
        time.sleep(0.5)
        mem.close()

    return _in_child(lambda: body(lambda: time.sleep(1.0)), meanwhile=close_at_half_a_second)


def _parent_memory(tmp_path) -> tuple[str, MnemisMemory]:
    """A SQLite memory holding one message the parent wrote, and its path."""
    path = str(tmp_path / "mem.db")
    mem = MnemisMemory(path, embedder=HashingEmbedder())
    mem.add_messages([_message(0, "the parent wrote this")], namespace=NS)
    return path, mem


@fork_only
def test_a_forked_child_that_opens_its_own_memory_keeps_its_writes_after_the_parent_closes(tmp_path):
    path, mem = _parent_memory(tmp_path)

    def child(wait_for_parent_close):
        own = MnemisMemory(path, embedder=HashingEmbedder())  # the child's own, as it should be
        own.add_messages([_message(1, "the child wrote this first")], namespace=NS)
        wait_for_parent_close()
        own.add_messages([_message(2, "the child wrote this after the parent closed")], namespace=NS)
        own.close()

    assert _in_child_while_parent_closes(mem, child) == "ok"  # both writes acknowledged
    with MnemisMemory(path, embedder=HashingEmbedder()) as again:
        assert [m.id for m in again.messages(NS)] == ["m0", "m1", "m2"]


@fork_only
def test_a_forked_child_writing_through_the_parents_memory_keeps_its_writes(tmp_path):
    path, mem = _parent_memory(tmp_path)

    def child(wait_for_parent_close):
        wait_for_parent_close()
        mem.add_messages([_message(1, "the child wrote this through the inherited memory")], namespace=NS)

    assert _in_child_while_parent_closes(mem, child) == "ok"
    with MnemisMemory(path, embedder=HashingEmbedder()) as again:
        assert [m.id for m in again.messages(NS)] == ["m0", "m1"]


@fork_only
def test_a_forked_child_can_use_a_store_with_an_async_embed_function():
    from langgraph.store.base import PutOp

    from mnemis_integrations.langchain import MnemisStore

    async def embed(texts):
        return HashingEmbedder().embed_passages(list(texts)).tolist()

    store = MnemisStore(index={"embed": embed})
    store.put(("notes", "u1"), "tea", {"text": "the user drinks green tea"})  # the embed loop starts here

    def child():
        store.batch([PutOp(("notes", "u1"), "coffee", {"text": "the user also likes coffee"})])
        assert store.search(("notes", "u1"), query="coffee")

    assert _in_child(child, wait_s=15) == "ok"  # None: the child waits forever on a loop with no thread


def test_a_write_refused_by_a_full_disk_says_so(tmp_path):
    mem = MnemisMemory(str(tmp_path / "mem.db"), embedder=HashingEmbedder())
    mem.add_messages([_message(0, "first")], namespace=NS)
    conn = mem._store._conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages + 2}")  # a file that cannot grow: a full disk
    with pytest.raises(StoreError, match="database or disk is full"):
        mem.add_messages([_message(i, "x" * 5000 + str(i)) for i in range(1, 40)], namespace=NS)
    conn.execute("PRAGMA max_page_count=1073741823")
    mem.add_messages([_message(99, "after the disk was freed")], namespace=NS)  # the file is usable
    assert [m.id for m in mem.messages(NS)] == ["m0", "m99"]
    mem.close()


def _long_texts(seed: int, n: int, chars: int) -> list[str]:
    """``n`` distinct texts of about ``chars`` characters, all of one small vocabulary (whose words the
    first call leaves in the word caches, so a later call adds only its texts)."""
    rnd = random.Random(seed)
    vocabulary = ["".join(random.Random(w).choices(string.ascii_lowercase, k=6)) for w in range(200)]
    return [
        "Moved the launch to Friday. " + " ".join(rnd.choices(vocabulary, k=chars // 7)) for _ in range(n)
    ]


def _ingest_search_forget_close(texts: list[str]) -> None:
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages([_message(i, t) for i, t in enumerate(texts)], namespace=NS)
    mem.search("launch Friday", namespace=NS)
    mem.forget([f"m{i}" for i in range(len(texts))], namespace=NS)
    mem.close()


def test_forgotten_texts_are_not_kept_by_the_process_after_the_memory_is_gone():
    _ingest_search_forget_close(_long_texts(0, 20, 25_000))  # libraries load and warm up here
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _ingest_search_forget_close(_long_texts(1, 20, 25_000))  # 0.5 MB of text, all forgotten
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # the texts' own caches keep every forgotten text (up to 4,096 of up to 1,000,000 characters)
    assert kept < 100_000, f"{kept / 1e6:.1f} MB of a forgotten, closed and dropped memory kept"
