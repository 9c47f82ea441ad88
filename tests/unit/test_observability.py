"""What MnemisMemory tells its user while it works: progress bars on request, log records."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from _over_time import T0

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder

TOPICS = ("refund for order {i} timed out", "hosting migration plan {i}", "noodle lunch on day {i}")
MANY = [
    {
        "id": f"m{i}",
        "speaker": "ann",
        "text": TOPICS[i % 3].format(i=i),
        "timestamp": T0 + timedelta(minutes=i),
    }
    for i in range(70)
]


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def embed_passages(self, texts):
        self.batches.append(len(texts))
        return super().embed_passages(texts)


def shape(mem: MnemisMemory, namespace: str) -> list[tuple]:
    return sorted((n.id, n.kind.value, n.label, tuple(n.source_ids)) for n in mem.graph(namespace).nodes())


def test_show_progress_draws_a_bar_of_the_messages_on_stderr(capsys):
    """Before: ``add_messages`` took no ``show_progress``; ingesting a large history was silent
    for minutes (embedding is most of an ingest). After: a tqdm bar counts the messages."""
    embedder = CountingEmbedder()
    MnemisMemory(embedder=embedder).add_messages(MANY, namespace="u1", show_progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "mnemis u1" in err and "70/70" in err
    assert embedder.batches == [32, 32, 6]  # the bar can move while the embedder works


def test_progress_is_off_by_default(capsys):
    embedder = CountingEmbedder()
    MnemisMemory(embedder=embedder).add_messages(MANY, namespace="u1")
    assert capsys.readouterr() == ("", "")
    assert embedder.batches == [70]  # one call for the batch, as before


def test_progress_counts_messages_already_stored_as_done(capsys):
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(MANY[:60], namespace="u1")
    mem.add_messages(MANY, namespace="u1", show_progress=True)
    err = capsys.readouterr().err
    assert "60/70" in err and "70/70" in err and "32/70" not in err


def test_the_graph_does_not_depend_on_show_progress():
    quiet, shown = MnemisMemory(embedder=HashingEmbedder()), MnemisMemory(embedder=HashingEmbedder())
    quiet.add_messages(MANY, namespace="u1")
    shown.add_messages(MANY, namespace="u1", show_progress=True)
    assert shape(quiet, "u1") == shape(shown, "u1")


async def test_async_ingest_shows_progress_too(capsys):
    await MnemisMemory(embedder=HashingEmbedder()).aadd_messages(MANY, namespace="u1", show_progress=True)
    assert "70/70" in capsys.readouterr().err


def test_ingest_and_search_are_logged_at_debug_level(caplog):
    """Before: no module of the package had a logger. After: the engine logs what it did."""
    mem = MnemisMemory(embedder=HashingEmbedder())
    with caplog.at_level(logging.DEBUG, logger="mnemis_integrations"):
        mem.add_messages(MANY, namespace="u1")
        mem.search("refund timed out", namespace="u1")
    engine = [r.getMessage() for r in caplog.records if r.name == "mnemis_integrations.core.engine"]
    assert any("added 70 messages" in m for m in engine)
    assert any(m.startswith("namespace 'u1': ") and " hits in " in m for m in engine)
    assert all(r.levelno == logging.DEBUG for r in caplog.records)


@pytest.mark.parametrize(
    "module",
    [
        "core.engine",
        "core.builder.llm_builder",
        "core.storage.sqlite",
        "core.storage.falkordb",
        "langchain.middleware",
    ],
)
def test_modules_that_do_notable_work_have_a_logger_named_after_them(module):
    import importlib

    mod = importlib.import_module(f"mnemis_integrations.{module}")
    assert mod.logger.name == f"mnemis_integrations.{module}"
