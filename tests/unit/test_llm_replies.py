"""Model replies a build must survive (degenerate JSON, backwards update links, a speaker with a
colon), and what a forget must undo of what a model wrote (its names, its relations)."""

from __future__ import annotations

import json

import pytest
from fakes import CONVERSATION
from test_llm_builder import Router, build, context_of, fake

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.builder.llm_builder import LLMBuildConfig, LLMBuilder
from mnemis_integrations.core.builder.llm_structured import JSONRepairError, extract_json
from mnemis_integrations.core.builder.relation_sources import read_from
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.model import EdgeKind, NodeKind

_SEQUENTIAL = LLMBuildConfig(max_concurrency=1)


def covered(mem: MnemisMemory) -> list[str]:
    return sorted(m for f in mem.graph("u1").nodes(NodeKind.FRAGMENT) for m in f.source_ids)


# ------------------------------------------------------------------------------ degenerate replies


DEGENERATE = {
    # a small model stuck repeating one token: json.loads raises ValueError / RecursionError,
    # not JSONDecodeError
    "digits": '{"new_topic_at": [' + "1" * 5000 + "]}",
    "brackets": "[" * 5000,
    "objects": '{"a": ' * 3000,
    "items": "[1," * 3000,
}


@pytest.mark.parametrize("reply", DEGENERATE.values(), ids=DEGENERATE.keys())
def test_a_degenerate_reply_is_a_repair_error(reply):
    with pytest.raises(JSONRepairError):
        extract_json(reply)


@pytest.mark.parametrize("reply", DEGENERATE.values(), ids=DEGENERATE.keys())
def test_a_degenerate_reply_falls_back_and_loses_no_message(reply):
    router = Router(segment=[reply])
    mem, builder, _ = build(router, LLMBuildConfig(max_retries=0, max_concurrency=1))
    assert covered(mem) == sorted(m["id"] for m in CONVERSATION)
    assert builder.last_usage.steps["segment"].fallbacks == 1


def test_a_degenerate_prefix_before_a_valid_fenced_answer_does_not_escape():
    # The answer in the fence is read; the check whether it needed repair parses the whole reply.
    reply = "[" * 5000 + '```json\n{"new_topic_at": [0, 3, 6, 9]}\n```'
    router = Router(segment=[reply])
    mem, builder, _ = build(router, LLMBuildConfig(max_retries=0, max_concurrency=1))
    assert len(mem.graph("u1").nodes(NodeKind.FRAGMENT)) == 4
    st = builder.last_usage.steps["segment"]
    assert (st.llm_batches, st.repaired) == (1, 1)


# ------------------------------------------------------------------------------ updates direction


PLAN = [
    {"id": "a1", "speaker": "ana", "text": "We go with Plan A for the Atlas launch."},
    {"id": "a2", "speaker": "ben", "text": "Atlas launch: Plan A is paused, Plan B now."},
]


class Backwards(Router):
    """Judges every new fact to update the first earlier fact it is shown."""

    def __call__(self, messages) -> str:
        if not messages[0].text.startswith("You decide"):
            return super().__call__(messages)
        ctx = context_of(messages[1].text)
        pairs = [
            {"new": ctx["new"][0]["n"], "earlier": e["n"], "verdict": "updates"} for e in ctx["earlier"][:1]
        ]
        return json.dumps({"judgements": pairs})


@pytest.mark.parametrize("timestamp", ["2025-03-01", None], ids=["same-day", "undated"])
def test_an_update_judgement_never_links_an_older_fragment_to_a_newer_one(timestamp):
    """With one fragment per update call, the first fragment was offered the second (written
    later in the same ingest) as an earlier fact: the answer that it updates it superseded the
    newer fact by the older one."""
    router = Backwards(segment=[{"new_topic_at": [0, 1]}])
    config = LLMBuildConfig(max_concurrency=1, batch_fragments=1)
    mem, _, _ = build(router, config, messages=[{**m, "timestamp": timestamp} for m in PLAN])
    g = mem.graph("u1")
    assert [f.id for f in g.nodes(NodeKind.FRAGMENT)] == ["f:a1", "f:a2"]
    assert [(e.src, e.dst) for e in g.edges(EdgeKind.UPDATES)] == [("f:a2", "f:a1")]
    assert g.get("f:a2").status.value == "active"


# ------------------------------------------------------------------------------ erasure of model text


def _texts(mem: MnemisMemory) -> str:
    g = mem.graph("u1")
    nodes = [f"{n.label} {n.summary} {' '.join(n.keywords)}" for n in g.nodes()]
    edges = [e.label or "" for e in g.edges()]
    return " | ".join(nodes + edges).lower()


def _naming_parents_after_order_1234() -> Router:
    """The model names the refund fragment's subtopic and concept after order 1234 (said in m01)."""
    return Router(
        abstract=[
            {
                "placements": [
                    {"f": 0, "subtopic": "Order 1234 refund", "concept": "Order 1234"},
                    {"f": 1, "subtopic": "Rex's vet visits", "concept": "Pets"},
                    {"f": 2, "subtopic": "Lisbon trip", "concept": "Travel"},
                    {"f": 3, "subtopic": "Morning drinks", "concept": "Preferences"},
                ]
            }
        ]
    )


def test_a_forgotten_number_does_not_survive_in_a_parent_the_model_named():
    """The model named the refund subtopic and concept after order 1234 (m01): once m01 is
    forgotten no remaining message holds 1234, yet the names kept it."""
    router = _naming_parents_after_order_1234()
    mem, _, _ = build(router)
    assert "1234" in _texts(mem)
    mem.forget(["m01"], namespace="u1")
    assert "1234" not in _texts(mem)


def test_a_relation_the_model_found_records_the_messages_it_was_read_from():
    """What lets a forget remove it (its label seldom quotes the text: "vaccinated_at")."""
    msgs = [
        *CONVERSATION[:4],
        {**CONVERSATION[4], "text": "Rex has his vaccines at the clinic on Elm Street on Friday."},
        {**CONVERSATION[5], "text": "Elm Street is closed for roadworks all week."},
    ]
    router = Router(
        entities=[
            {
                "entities": [{"name": "Rex"}, {"name": "Elm Street"}],
                "relations": [{"source": "Rex", "relation": "vaccinated at", "target": "Elm Street"}],
            }
        ]
    )
    mem, _, _ = build(router, messages=msgs)
    g = mem.graph("u1")
    (edge,) = [e for e in g.edges(EdgeKind.RELATION) if e.label == "vaccinated_at"]
    read = read_from(g, edge)
    stored = {m.id: m.text for m in mem.messages("u1")}
    assert read and set(read) <= set(stored)
    naming_both = [i for i in read if "Rex" in stored[i] and "Elm Street" in stored[i]]
    assert naming_both in ([], read)  # the messages that name both, when one of them does


def test_a_parent_the_model_named_is_named_again_after_a_forget_also_once_reopened(tmp_path):
    router = _naming_parents_after_order_1234()
    emb = HashingEmbedder()
    path = tmp_path / "m.db"
    builder = LLMBuilder(fake(router), config=_SEQUENTIAL, embedder=emb)
    mem = MnemisMemory(embedder=emb, builder=builder, path=str(path))
    mem.add_messages(CONVERSATION, namespace="u1")
    mem.forget(["m01"], namespace="u1")
    mem.close()
    again = MnemisMemory(embedder=emb, path=str(path))
    assert "1234" not in _texts(again)
    # the other parents keep the model's names
    assert {"Pets", "Rex's vet visits"} <= {n.label for n in again.graph("u1").nodes()}


# ------------------------------------------------------------------------------ prompts


def test_a_speaker_with_a_colon_does_not_leak_into_the_segment_prompts_text():
    router = Router()
    msgs = [{**CONVERSATION[0], "speaker": "Dr: Lee"}, *CONVERSATION[1:3]]
    build(router, messages=msgs)
    first = context_of(router.prompts["segment"][0][1].text)["messages"][0]
    assert (first["speaker"], first["text"]) == ("Dr: Lee", msgs[0]["text"])
