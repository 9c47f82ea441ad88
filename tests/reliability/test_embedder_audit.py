"""Embedders that answer badly: another dimension under the same id, a vector holding NaN or
infinity, too few rows, an async embed function. Each gets a typed error before anything is written
or mixed, or works."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from mnemis_integrations import EmbedderMismatchError, MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import ConfigError, InvalidMessageError, InvalidQueryError

NS = "audit"
_HASH = HashingEmbedder(32)


def _msgs(ids, text="the refund for order {} timed out at the bank callback"):
    return [{"id": i, "speaker": "ana", "text": text.format(i)} for i in ids]


class _Rows:
    """The hashing embedder, except that a text holding ``bad`` gets the row ``row`` (raw, as a
    model would answer), and ``short`` drops the last row of a batch."""

    id = "audit-rows"
    profile = _HASH.profile

    def __init__(self, bad: str = "poison", row: float = np.nan, short: bool = False):
        self.bad, self.row, self.short = bad, row, short

    def _rows(self, texts):
        out = _HASH.embed_passages(list(texts)).copy()
        for i, t in enumerate(texts):
            if self.bad in t:
                out[i] = self.row
        return out[:-1] if self.short and len(texts) > 1 else out

    def embed_queries(self, texts):
        return self._rows(texts)

    def embed_passages(self, texts):
        return self._rows(texts)


@pytest.mark.parametrize("row", [np.nan, np.inf])
def test_a_message_embedded_as_nan_or_infinity_is_refused_and_the_memory_stays_searchable(tmp_path, row):
    """One non-finite vector stored made every later search of the namespace come back empty."""
    db = str(tmp_path / "m.db")
    with MnemisMemory(db, embedder=_Rows(row=row)) as mem:
        mem.add_messages(_msgs(["a", "b"]), namespace=NS)
        version = mem._store.version(NS)
        with pytest.raises(InvalidMessageError) as err:
            mem.add_messages(_msgs(["c"]) + _msgs(["p"], "poison pill {}"), namespace=NS)
        assert err.value.message_id == "p" and err.value.index == 1
        assert mem._store.version(NS) == version
        assert [m.id for m in mem.messages(NS)] == ["a", "b"]
        assert mem.search("refund bank callback", namespace=NS)


@pytest.mark.parametrize("row", [np.nan, np.inf])
def test_a_query_the_embedder_gives_nan_or_infinity_is_an_invalid_query_error(row):
    """As a NaN query vector given to nearest_nodes is refused, not answered with no hits at all."""
    mem = MnemisMemory(embedder=_Rows(row=row))
    mem.add_messages(_msgs(["a", "b"]), namespace=NS)
    with pytest.raises(InvalidQueryError):
        mem.search("poison refund", namespace=NS)
    with pytest.raises(InvalidQueryError):
        mem.nearest_nodes("poison refund", namespace=NS)


def test_an_embedder_giving_fewer_rows_than_texts_is_a_typed_error_and_writes_nothing(tmp_path):
    db = str(tmp_path / "m.db")
    with MnemisMemory(db, embedder=_Rows(short=True)) as mem:
        mem.add_messages(_msgs(["a"]), namespace=NS)
        with pytest.raises(ConfigError):
            mem.add_messages(_msgs(["b", "c"]), namespace=NS)
        assert [m.id for m in mem.messages(NS)] == ["a"]


def test_reopening_with_the_same_embedder_id_but_another_dimension_is_embedder_mismatch(tmp_path):
    """A LangChain Embeddings without a model name gets its class as its id, so two sizes of one class
    share an id: the stored dimension must refuse the other one, in every call that embeds."""
    db = str(tmp_path / "m.db")
    with MnemisMemory(db, embedder=DeterministicFakeEmbedding(size=16)) as mem:
        mem.add_messages(_msgs(["a", "b"]), namespace=NS)
    with MnemisMemory(db, embedder=DeterministicFakeEmbedding(size=32)) as other:
        assert other.embedder.id == "langchain/DeterministicFakeEmbedding"
        with pytest.raises(EmbedderMismatchError):
            other.add_messages(_msgs(["c"]), namespace=NS)
        with pytest.raises(EmbedderMismatchError):
            other.add_messages(_msgs(["c"]), namespace="fresh")
        with pytest.raises(EmbedderMismatchError):
            other.search("refund", namespace=NS)
        with pytest.raises(EmbedderMismatchError):
            other.nearest_nodes("refund", namespace=NS)
        with pytest.raises(EmbedderMismatchError):
            other.score_messages("refund", {NS: ["a"]})
    with MnemisMemory(db, embedder=DeterministicFakeEmbedding(size=16)) as mem:
        assert mem.namespaces() == [NS]
        assert [m.id for m in mem.messages(NS)] == ["a", "b"]


async def _embed(texts):
    return _HASH.embed_passages(list(texts)).tolist()


async def test_a_store_given_an_async_embed_function_embeds_with_it():
    """LangGraph's index config takes an async embed function; the store accepted one and then every
    put failed with LangGraph's bare ValueError (no sync function to call)."""
    from mnemis_integrations.langchain import MnemisStore

    store = MnemisStore(index={"embed": _embed, "fields": ["text"]})
    await store.aput(("u",), "refund", {"text": "the refund timed out at the bank"})
    await store.aput(("u",), "lunch", {"text": "lunch at the noodle place on Friday"})
    hits = await store.asearch(("u",), query="refund bank", limit=1)
    assert [h.key for h in hits] == ["refund"]


def test_a_store_given_an_async_embed_function_embeds_with_it_on_the_sync_paths_too():
    from mnemis_integrations.langchain import MnemisStore

    store = MnemisStore(index={"embed": _embed, "fields": ["text"]})
    store.put(("u",), "tea", {"text": "green tea every morning"})
    store.put(("u",), "lunch", {"text": "lunch at the noodle place on Friday"})
    assert store.search(("u",), query="green tea", limit=1)[0].key == "tea"


async def test_an_async_embed_function_runs_on_one_loop_also_from_inside_a_running_one():
    """An async client is bound to the loop it first ran on: a fresh loop per call broke it, and a
    sync put from a coroutine (a running loop) could not start one at all."""
    from mnemis_integrations.langchain import MnemisStore

    loops = set()

    async def embed(texts):
        loops.add(id(asyncio.get_running_loop()))
        return _HASH.embed_passages(list(texts)).tolist()

    store = MnemisStore(index={"embed": embed, "fields": ["text"]})
    store.put(("u",), "tea", {"text": "green tea every morning"})  # sync, inside this test's loop
    store.put(("u",), "lunch", {"text": "lunch at the noodle place on Friday"})
    assert store.search(("u",), query="green tea", limit=1)[0].key == "tea"
    assert len(loops) == 1
