"""Labels name topics: nouns, whole Chinese words, no numbers or chat verbs."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

from _toy_graph import toy_state

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.builder.abstract import relabel_parents
from mnemis_integrations.core.builder.summarise import TOPIC_WORDS, topic_words
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.model import NodeKind
from mnemis_integrations.core.text import jieba_tagger, keyword_terms

T0 = datetime(2026, 8, 4, 9, 0, tzinfo=timezone.utc)
ZH = [
    "厨房打通做开放式，再加一个岛台",
    "那不铺实木了，改成SPC石塑地板，耐刮防水",
    "佳居第二版报价发来了：总价24.9万，工期70天",
    "拆墙的时候发现厨房那面墙里有燃气管",
    "家电实际花了6.5万，旧沙发也留着",
    "地板我想全屋铺实木的，脚感好",
]
EN = [
    "Confirmed: Dana approved the 12-min talk at EcoSoil",
    "Booked the Lisbon flights, train up to Porto",
    "Committee meeting moved to Oct 14, 10am",
    "The incubator was recalibrated, holding 25.0",
]


def _labels(texts: list[str]) -> list[str]:
    mem = MnemisMemory(embedder=HashingEmbedder())
    for i, t in enumerate(texts):
        mem.add_messages(
            [{"id": f"m{i}", "speaker": "ana", "text": t, "timestamp": T0 + timedelta(hours=6 * i)}],
            namespace="u",
        )
    g = mem.graph("u")
    parents = [n.label for n in g.nodes(NodeKind.SUBTOPIC) + g.nodes(NodeKind.CONCEPT)]
    # a fragment's label: its words, then its date in brackets
    fragments = [n.label.rsplit(" (", 1)[0].replace(", ", " & ") for n in g.nodes(NodeKind.FRAGMENT)]
    return parents + fragments


def _parts(texts: list[str]) -> list[str]:
    return [p.strip().lower() for label in _labels(texts) for p in label.split("&")]


def test_chinese_labels_are_whole_words():
    """Fragment labels too: before, "开放, 放式" and "这个, 个方" (pieces of the search bigrams)."""
    words = {w.word.lower() for t in ZH for w in jieba_tagger().cut(t)}
    parts = _parts(ZH)
    assert len(parts) > len(ZH) and all(p in words or p.isascii() for p in parts), parts


def test_english_labels_carry_no_numbers_past_forms_or_chat_verbs():
    parts = _parts(EN)
    assert parts
    assert not [
        p for p in parts if any(c.isdigit() for c in p) or p.endswith("ed") or p in {"approves", "attached"}
    ]


def test_topic_words_rank_nouns_first():
    assert keyword_terms("Dana approved the 12-min talk") == ["dana", "talk"]
    assert (
        topic_words(["the kitchen tiles arrived, kitchen grout is grey, 40 boxes"], Counter(), 10, 2)[0]
        == "kitchen"
    )
    assert "arrived" not in topic_words(["the kitchen tiles arrived"], Counter(), 10, 4)


def test_words_known_only_as_verbs_adjectives_or_adverbs_name_no_topic():
    """Labels seen on LoCoMo and the scenario suite: "believe & control", "boxhop & across",
    "adorable & adaptable"; activities stay, and so do names the lexicon does not know."""
    assert keyword_terms("I believe the boxes go across, it's adorable and adaptable") == ["boxes"]
    assert keyword_terms("Getting into camping and fishing with Hetzner folks") == [
        "camping",
        "fishing",
        "hetzner",
        "folks",
    ]


def test_equal_scores_keep_the_order_words_were_said_in():
    """Each word said once, none seen before: the first said leads, not the first in the alphabet
    (which named a quarter of the labels after an a- or b-word)."""
    said = ["zellige for the kitchen backsplash"]
    assert topic_words(said, Counter(), 10, 3) == ["zellige", "kitchen", "backsplash"]


def test_a_concept_is_named_by_the_word_most_of_its_fragments_share():
    """Scored per subtopic, a one-fragment subtopic said first ("bookcase") weighed as much as a
    three-fragment one and named the concept."""
    tree = {
        "c": {
            "s_small": {"f1": ["The landlord wants the bookcase gone."]},
            "s_big": {
                "f2": ["Rehearsal moved to Monday."],
                "f3": ["Rehearsal ran late, Dom is off book."],
                "f4": ["First Monday rehearsal at the hall."],
            },
        }
    }
    st = toy_state(tree)
    words = {
        "f1": ["bookcase", "landlord"],
        "f2": ["rehearsal"],
        "f3": ["rehearsal", "book"],
        "f4": ["rehearsal"],
    }
    for fid, w in words.items():
        st.graph.get(fid).properties[TOPIC_WORDS] = w
    relabel_parents(st, {"c", "s_small", "s_big"})
    assert st.graph.get("c").label == "Rehearsal"
    assert st.graph.get("s_small").label == "bookcase & landlord"


def test_exclamations_name_no_topic():
    """A tune conversation's concept was named "啊啊啊" (jieba tags the sound, and "太棒了", as names)."""
    assert keyword_terms("啊啊啊啊我外甥女也太棒了吧😭 周岁前就能自己走了") == ["外甥女"]
    assert keyword_terms("hahaha the barn lol") == ["barn"]
    assert keyword_terms("豆豆今天会走路了")[0] == "豆豆"  # a child's pet name doubles its character too
