"""The build steps as seams: one step swapped into the offline builder's composition, the rest
unchanged, and what the batch steps say about a segment reaching the per-fragment steps."""

from __future__ import annotations

from dataclasses import replace

from fakes import CONVERSATION

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.builder import entities, llm_steps, summarise, updates
from mnemis_integrations.core.builder.abstract import Placer, keyword_names
from mnemis_integrations.core.builder.llm_builder import LLMBuildConfig, LLMBuilder
from mnemis_integrations.core.builder.llm_structured import Usage
from mnemis_integrations.core.builder.pipeline import OfflineBuilder
from mnemis_integrations.core.builder.prompts import FragmentSummary, PlacementProposal, RelationItem
from mnemis_integrations.core.config import BuildConfig
from mnemis_integrations.core.embedders import HashingEmbedder, profile_for
from mnemis_integrations.core.model import EdgeKind, NodeKind
from mnemis_integrations.core.protocols import Builder


def offline(emb: HashingEmbedder) -> OfflineBuilder:
    return OfflineBuilder(BuildConfig(), profile_for(emb))


def built(builder, messages=CONVERSATION, emb=None) -> MnemisMemory:
    mem = MnemisMemory(embedder=emb or HashingEmbedder(), builder=builder)
    mem.add_messages(messages, namespace="u")
    return mem


def fragments(mem: MnemisMemory) -> list[tuple[str, list[str]]]:
    return [(f.id, f.source_ids) for f in mem.graph("u").nodes(NodeKind.FRAGMENT)]


def test_both_builders_are_builders():
    emb = HashingEmbedder()
    assert isinstance(offline(emb), Builder)
    assert isinstance(LLMBuilder(lambda messages: "", embedder=emb), Builder)
    assert isinstance(MnemisMemory(embedder=emb).builder, Builder)


def test_a_summariser_swapped_in_replaces_the_extractive_text_and_nothing_else():
    emb = HashingEmbedder()
    seen: list[list[str]] = []

    def shouting(texts):
        seen.extend([m.id for m in t] for t in texts)
        return [
            FragmentSummary(f=k, summary=t[0].text.upper(), keywords=["loud", t[0].id])
            for k, t in enumerate(texts)
        ]

    builder = offline(emb)
    builder.steps = replace(builder.steps, summarise=shouting)
    mem, plain = built(builder, emb=emb), built(offline(emb), emb=emb)

    assert fragments(mem) == fragments(plain)
    assert seen == [ids for _, ids in fragments(plain)]  # one text per segment, whole
    frag = mem.graph("u").get("f:m01")
    assert frag.summary == "MY REFUND FOR ORDER 1234 HAS NOT ARRIVED YET."
    assert frag.keywords == ["loud", "m01"] and frag.label.startswith("loud, m01")
    # the extractive headline and topic words stay: the model's summary never replaced them
    assert frag.properties["headline"] == plain.graph("u").get("f:m01").properties["headline"]


def test_a_segmenter_swapped_in_decides_the_fragments():
    emb = HashingEmbedder()
    builder = offline(emb)
    builder.steps = replace(
        builder.steps, segment=lambda st, new, vectors, tail: [[i] for i in range(len(new))]
    )
    mem = built(builder, emb=emb)
    assert fragments(mem) == [(f"f:{m['id']}", [m["id"]]) for m in CONVERSATION]


def test_messages_a_segmenter_leaves_out_are_still_indexed():
    """Messages are indexed as their segments are built; one in no segment is indexed all the same."""
    emb = HashingEmbedder()
    builder = offline(emb)
    builder.steps = replace(builder.steps, segment=lambda st, new, vectors, tail: [[0]])
    mem = built(builder, emb=emb)
    st = mem._states["u"]
    assert all(m["id"] in st.lexical and m["id"] in st.msg_vectors for m in CONVERSATION)


def test_a_segment_led_by_minus_one_continues_the_open_fragment():
    emb = HashingEmbedder()
    builder = offline(emb)
    builder.steps = replace(
        builder.steps,
        segment=lambda st, new, vectors, tail: [[-1, *range(len(new))]] if tail else [list(range(len(new)))],
    )
    mem = MnemisMemory(embedder=emb, builder=builder)
    mem.add_messages(CONVERSATION[:2], namespace="u")
    rep = mem.add_messages(CONVERSATION[2:3], namespace="u")
    assert fragments(mem) == [("f:m01", ["m01", "m02", "m03"])]
    assert rep.added == 1


def test_model_names_place_fragments_without_a_model():
    """The LLM builder's place step in the offline composition, fed by a namer that files every
    fragment by its first word: parents are found or founded by name and keep it."""
    emb = HashingEmbedder()

    def by_first_word(st, texts, summaries, is_new):
        return {
            k: PlacementProposal(f=k, subtopic=f"{t[0].text.split()[0]} notes", concept="Everything")
            for k, (t, new) in enumerate(zip(texts, is_new, strict=True))
            if new
        }

    builder = offline(emb)
    steps = builder.steps
    builder.steps = replace(
        steps, name=by_first_word, place=llm_steps.ProposedPlacer(steps.place, builder.cfg, builder.review)
    )
    g = built(builder, emb=emb).graph("u")
    first_word = {m["id"]: m["text"].split()[0] for m in CONVERSATION}
    frags = g.nodes(NodeKind.FRAGMENT)
    assert [g.parent(f.id).label for f in frags] == [f"{first_word[f.source_ids[0]]} notes" for f in frags]
    assert len(g.nodes(NodeKind.SUBTOPIC)) == len({first_word[f.source_ids[0]] for f in frags}) < len(frags)
    assert all(s.properties.get("named_by") == "llm" for s in g.nodes(NodeKind.SUBTOPIC))
    assert [c.label for c in g.nodes(NodeKind.CONCEPT)] == ["Everything"]


def test_the_place_and_update_steps_get_what_the_batch_steps_said_about_their_segment():
    emb = HashingEmbedder()
    placed, judged, batches = [], [], []

    class Recording:
        def __init__(self, inner):
            self.inner = inner

        def prepare(self, st):
            self.inner.prepare(st)

        def place(self, st, frag, seg, rep):
            placed.append(
                (
                    frag.id,
                    [m.id for m in seg.messages],
                    seg.summary.summary,
                    [r.relation for r in seg.relations],
                )
            )
            self.inner.place(st, frag, seg, rep)

        def fragment_added(self, st, frag, msgs, rep):
            judged.append((frag.id, [m.id for m in msgs]))
            self.inner.fragment_added(st, frag, msgs, rep)

        def batch_added(self, st, created, rep):
            batches.append([(fid, [m.id for m in msgs]) for fid, msgs in created])

    def find(st, new, segments):
        mentions, _ = entities.find_entities(st, new, segments)
        return mentions, {
            k: [RelationItem(source="a", relation=f"rel {k}", target="b")] for k in range(len(segments))
        }

    def summaries(texts):
        return [FragmentSummary(f=k, summary=f"segment {k}", keywords=[]) for k in range(len(texts))]

    builder = offline(emb)
    steps = builder.steps
    builder.steps = replace(
        steps,
        summarise=summaries,
        entities=find,
        place=Recording(steps.place),
        updates=Recording(steps.updates),
    )
    mem = built(builder, emb=emb)
    frags = fragments(mem)
    assert placed == [(fid, ids, f"segment {k}", [f"rel {k}"]) for k, (fid, ids) in enumerate(frags)]
    assert judged == frags and batches == [frags]


def test_the_llm_builder_composes_its_steps_per_config():
    """The model's step where the config says "llm", the offline builder's elsewhere; segmenting
    and placing are the LLM builder's own either way (windows and hard rules, the model's names
    when it gave any)."""

    def composed(config: LLMBuildConfig):
        builder = LLMBuilder(lambda messages: "", embedder=HashingEmbedder(), config=config)
        return builder.steps_for(llm_steps.ModelCalls(builder.chat, builder.llm, Usage()))

    some = composed(LLMBuildConfig.only("summarise", "updates"))
    assert isinstance(some.segment, llm_steps.LLMSegmenter) and not some.segment.ask_model
    assert isinstance(some.summarise, llm_steps.LLMSummariser)
    assert some.entities is entities.find_entities and some.name is keyword_names
    assert isinstance(some.place, llm_steps.ProposedPlacer) and isinstance(some.place.fallback, Placer)
    assert isinstance(some.updates, llm_steps.LLMUpdateJudge)
    assert isinstance(some.updates.fallback, updates.OfflineUpdateJudge)

    every = composed(LLMBuildConfig())
    assert every.segment.ask_model
    assert isinstance(every.entities, llm_steps.LLMEntityFinder) and isinstance(
        every.name, llm_steps.LLMNamer
    )
    nothing = composed(LLMBuildConfig.only())
    assert nothing.summarise is summarise.keep_extractive and isinstance(
        nothing.updates, updates.OfflineUpdateJudge
    )


def test_model_relations_link_the_entities_the_fragment_mentions():
    emb = HashingEmbedder()

    def find(st, new, segments):
        mentions, _ = entities.find_entities(st, new, segments)
        return mentions, {
            k: [RelationItem(source="Rex", relation="Goes To The Vet", target="Elm Street")]
            for k in range(len(segments))
        }

    builder = offline(emb)
    builder.steps = replace(builder.steps, entities=find)
    g = built(builder, emb=emb).graph("u")
    labels = {(e.src, e.dst, e.label) for e in g.edges(EdgeKind.RELATION)}
    assert ("e:rex", "e:elm street", "goes_to_the") in labels
