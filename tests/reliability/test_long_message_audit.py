"""A long message shown under a budget: its excerpt is the message's own text, in order, cut only
between what a reader reads as one character or one word, every left-out part marked ``…``, and
within its cap as the library counts tokens."""

from __future__ import annotations

import jieba
import pytest

from mnemis_integrations import MemoryConfig, MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.passages import windows
from mnemis_integrations.core.retrieval.excerpt import excerpt
from mnemis_integrations.core.tokens import count_tokens

# Chinese as it is pasted: no spaces, no punctuation
ZH = (
    "我们今天讨论了季度预算和招聘计划还有柏林办公室的收入增长情况"
    + "明年准备在慕尼黑开设新的分公司并且招聘更多的工程师"
)
FAMILY = "👨\u200d👩\u200d👧\u200d👦"  # one emoji: four people joined by zero-width joiners


def shown_parts(text: str, shown: str) -> list[tuple[int, int]]:
    """Where each part of an excerpt (between its ``…`` marks) lies in ``text``, in order; a part
    that is not the message's own text from there on fails."""
    at, out = 0, []
    for part in (p.strip() for p in shown.split("…")):
        if part:
            start = text.find(part, at)
            assert start >= 0, f"{part!r} is not the message's text (after offset {at})"
            out.append((start, start + len(part)))
            at = start + len(part)
    return out


@pytest.mark.parametrize("text", [ZH * 10, "好的。再见。" * 200])
def test_an_excerpt_of_chinese_adds_no_space_the_message_does_not_hold(text):
    for budget in (30, 60, 120, 200):
        shown = excerpt(text, "Tokyo", budget, count_tokens)  # nothing matches: the opening is shown
        assert shown and count_tokens(shown) <= budget
        shown_parts(text, shown)


def test_an_excerpt_is_never_cut_inside_an_emoji():
    text = FAMILY * 300
    for budget in range(2, 60):
        shown = excerpt(text, "family", budget, count_tokens)
        assert count_tokens(shown) <= budget
        assert shown.replace("…", "").strip().replace(FAMILY, "") == "", (budget, shown)
    for piece in windows(text, 40, count_tokens):
        assert piece.replace(FAMILY, "") == ""


def test_an_excerpt_of_chinese_is_cut_between_words():
    text = ZH * 10
    bounds = {0}
    for word in jieba.lcut(text):  # Chinese words as the library reads them (jieba)
        bounds.add(max(bounds) + len(word))
    for budget in range(4, 40):
        shown = excerpt(text, "柏林收入", budget, count_tokens)
        assert count_tokens(shown) <= budget
        for start, end in shown_parts(text, shown):
            assert start in bounds and end in bounds, (budget, shown)


def test_an_excerpt_that_starts_after_the_message_does_says_so():
    middle = "The Berlin revenue grew by nine percent over the whole of the last quarter."
    text = "Intro sentence here that is long enough. " * 3 + middle + " Outro sentence follows here."
    for budget in range(count_tokens(middle) - 2, count_tokens(middle) + 3):
        shown = excerpt(text, "Berlin revenue", budget, count_tokens)
        assert "Berlin" in shown and count_tokens(shown) <= budget
        assert shown.startswith("…"), shown  # the intro was left out


@pytest.mark.parametrize("excerpt_tokens", [1, 2, 3])
def test_a_small_excerpt_size_is_searched_with_not_divided_by_zero(excerpt_tokens):
    report = "The team met on Monday to go over the agenda for the quarter. " * 40
    doc = report + "Revenue in the Berlin office grew by 14 percent."
    mem = MnemisMemory(
        embedder=HashingEmbedder(), config=MemoryConfig().with_(context={"excerpt_tokens": excerpt_tokens})
    )
    mem.add_messages(
        [
            {"id": "doc", "speaker": "tool", "text": doc},
            {"id": "q", "speaker": "user", "text": "Can you check the quarterly report?"},
        ],
        namespace="u1",
    )
    for budget in (5, 20, 50):
        hits = mem.search("Berlin revenue", k=5, namespace="u1", max_tokens=budget)
        assert sum(count_tokens(h.text) for h in hits) <= budget
    assert count_tokens(excerpt(report, "agenda", excerpt_tokens, count_tokens)) <= excerpt_tokens
