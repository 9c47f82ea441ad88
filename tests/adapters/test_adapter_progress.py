"""The stores that ingest for their framework draw add_messages' progress bar when asked, and only then."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from langgraph.store.base import PutOp
from llama_index.core.schema import TextNode

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.langchain import MnemisStore
from mnemis_integrations.llama_index import MnemisPropertyGraphStore

NOW = datetime(2025, 6, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("shown", [False, True])
def test_a_langgraph_store_batch_shows_progress_on_request(capsys, shown):
    """Before: MnemisStore took no show_progress; a batch of puts was ingested without a bar."""
    store = MnemisStore(MnemisMemory(embedder=HashingEmbedder()), clock=lambda: NOW, show_progress=shown)
    store.batch([_put(i) for i in range(5)])
    assert ("mnemis" in capsys.readouterr().err) is shown
    assert len(store.search(("memories", "u1"), query="tea", limit=10)) == 5


@pytest.mark.parametrize("shown", [False, True])
def test_a_property_graph_store_shows_progress_while_documents_are_ingested(capsys, shown):
    """Before: MnemisPropertyGraphStore took no show_progress; upserted text nodes went in silently."""
    mem = MnemisMemory(embedder=HashingEmbedder())
    store = MnemisPropertyGraphStore(memory=mem, namespace="docs", clock=lambda: NOW, show_progress=shown)
    store.upsert_llama_nodes([TextNode(id_=f"n{i}", text=f"Tea note number {i}.") for i in range(4)])
    assert ("mnemis docs" in capsys.readouterr().err) is shown
    assert {m.id for m in mem.messages(namespace="docs")} == {"n0", "n1", "n2", "n3"}


def _put(i: int) -> PutOp:
    return PutOp(("memories", "u1"), f"k{i}", {"text": f"The user drinks tea number {i}."})
