"""Filter audit: metadata filters and scoping (``filter``, ``as_of``, ``exclude_messages``).

Each test here failed before its fix; the docstring says what was wrong.
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
# One conversation, one fragment: a1 and a3 by email, a2 in chat, a minute apart.
INVOICE = [
    {
        "id": "a1",
        "speaker": "ana",
        "text": "The Acme invoice 7 is overdue by two weeks.",
        "timestamp": T0,
        "metadata": {"channel": "email"},
    },
    {
        "id": "a2",
        "speaker": "li",
        "text": "Acme invoice 7 was paid by card yesterday.",
        "timestamp": T0 + timedelta(minutes=1),
        "metadata": {"channel": "chat"},
    },
    {
        "id": "a3",
        "speaker": "ana",
        "text": "Great, so the Acme invoice 7 is settled now.",
        "timestamp": T0 + timedelta(minutes=2),
        "metadata": {"channel": "email"},
    },
]


@pytest.fixture
def invoice() -> MnemisMemory:
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(INVOICE, namespace="u1")
    assert [n.source_ids for n in mem.graph("u1").nodes() if n.kind == "fragment"] == [["a1", "a2", "a3"]]
    return mem


@pytest.mark.parametrize(
    "scoping, seen",
    [
        ({"filter": {"channel": "chat"}}, "a2"),  # the fragment shows a2 alone
        ({"as_of": T0 + timedelta(seconds=30)}, "a1"),  # only a1 was said by then
    ],
)
def test_a_fragment_showing_only_messages_the_reader_sees_is_left_out(invoice, scoping, seen):
    """``exclude_messages`` left a hit out only when every message of its node was seen, so a
    fragment that a filter or ``as_of`` narrowed to messages all in the reader's window came back,
    its text nothing but those messages (``exclude_messages`` promises such a hit is left out, as it
    would add nothing)."""
    hits = invoice.search("Acme invoice", namespace="u1", **scoping)
    assert [h.source_ids for h in hits if h.kind == "fragment"] == [(seen,)]  # the premise
    again = invoice.search("Acme invoice", namespace="u1", exclude_messages=[seen], **scoping)
    assert [h.source_ids for h in again if h.kind == "fragment"] == []


class Channel(str, enum.Enum):
    EMAIL = "email"


@pytest.mark.parametrize("value", [Channel.EMAIL, np.str_("email")], ids=["str-enum", "numpy-str"])
def test_a_str_subclass_metadata_value_is_stored_as_a_plain_str(tmp_path, value):
    """A metadata value of a ``str`` subclass (a ``str`` enum, numpy's ``str_``) was kept as given in
    memory but read back as a plain ``str`` from the file: the same batch sent again after a reopen
    raised ``DuplicateMessageError`` (sending a batch again is idempotent), and a hit's metadata held
    another type before the reopen than after. Numbers are made plain ``int`` / ``float`` already."""
    path = str(tmp_path / "mem.db")
    batch = [dict(INVOICE[0], metadata={"channel": value})]
    with MnemisMemory(path=path, embedder=HashingEmbedder()) as mem:
        mem.add_messages(batch, namespace="u1")
        before = mem.messages("u1")[0].metadata
    with MnemisMemory(path=path, embedder=HashingEmbedder()) as mem:
        assert mem.add_messages(batch, namespace="u1").skipped == 1
        assert type(before["channel"]) is type(mem.messages("u1")[0].metadata["channel"]) is str
        hits = mem.search("Acme invoice", namespace="u1", filter={"channel": "email"})
        assert [h.metadata for h in hits if h.kind == "fragment"] == [{"channel": "email"}]


def test_the_property_graph_index_retriever_applies_its_filters():
    """``MnemisPropertyGraphIndex.as_retriever(filters=...)`` took ``filters`` as LlamaIndex's own
    index does (it hands them to its vector sub-retriever) and dropped them: the default Mnemis
    sub-retriever searched unfiltered, so messages the filter excludes came back."""
    pytest.importorskip("llama_index.core")
    from llama_fakes import offline_settings
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    from mnemis_integrations.llama_index import MnemisPropertyGraphIndex, MnemisPropertyGraphStore

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(INVOICE, namespace="u1")
    store = MnemisPropertyGraphStore(memory=mem, namespace="u1")
    only_chat = MetadataFilters(filters=[MetadataFilter(key="channel", value="chat")])
    with offline_settings():
        index = MnemisPropertyGraphIndex.from_existing(property_graph_store=store)
        nodes = index.as_retriever(similarity_top_k=3, filters=only_chat).retrieve("Acme invoice")
    shown = {m for n in nodes for m in n.node.metadata["source_ids"]}
    assert shown == {"a2"}
