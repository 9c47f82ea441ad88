"""Segment -> fragment text fields: keywords, a one-line summary and a label.

Offline and extractive: keywords by tf-idf against the namespace's fragments,
a templated summary naming the speakers, the key entities and the keywords (so
no entity or number of the segment is dropped from the summary line), and a
label for hierarchy paths. The model's summaries, where the LLM builder has them, replace
these once the fragment is placed (:func:`apply_model_summary`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from ..model import Message, Node
from ..text import content_words, format_date, keyword_terms

if TYPE_CHECKING:
    from .prompts import FragmentSummary

__all__ = [
    "TOPIC_WORDS",
    "apply_model_summary",
    "fragment_label",
    "headline",
    "keep_extractive",
    "keywords_for",
    "summary_line",
    "topic_words",
]

# Fragment property holding its topic_words(): what parent labels are made of.
TOPIC_WORDS = "topic_words"

_NUMBER = re.compile(r"\b\d[\d,.:/%-]*\b")


def keywords_for(
    texts: list[str], df: Counter, n_docs: int, top: int, terms: Callable[[str], list[str]] = content_words
) -> list[str]:
    """Top ``top`` tokens (``terms`` of each text) by tf-idf against fragment document frequencies.

    >>> keywords_for(["refund refund timeout", "the bank callback"], Counter({"bank": 9}), 10, 3)
    ['refund', 'timeout', 'callback']
    """
    tf = Counter(t for text in texts for t in terms(text) if not t.isdigit())
    scored = []
    for tok, c in tf.items():
        idf = math.log((n_docs + 1) / (df.get(tok, 0) + 1)) + 1.0
        # Longer tokens carry more meaning; tiny ones are often fragments of names.
        scored.append((c * idf * min(len(tok), 6) / 6, tok))
    # Equal scores (each word said once, none seen before: most short fragments) keep the order the
    # words were said in; an alphabetical tie-break named a quarter of the labels with an a- or b-word.
    scored.sort(key=lambda x: -x[0])
    return [t for _, t in scored[:top]]


def topic_words(texts: list[str], df: Counter, n_docs: int, top: int) -> list[str]:
    """The words that name what the texts are about, best first: :func:`keywords_for` over
    :func:`~..text.keyword_terms` (nouns, whole Chinese words), which parent labels are made of.

    >>> topic_words(["地板我想全屋铺实木的", "那不铺实木了，改成SPC石塑地板"], Counter(), 10, 2)
    ['地板', '实木']
    """
    return keywords_for(texts, df, n_docs, top, terms=keyword_terms)


def summary_line(messages: list[Message], entities: list[str], keywords: list[str]) -> str:
    """One sentence: who spoke, about what (entities first, then keywords, then numbers).

    >>> m = [Message("1", "Ana", "Nordwind Foods wants 40 seats", None)]
    >>> summary_line(m, ["Ana", "Nordwind Foods"], ["nordwind", "seats"])
    'Ana on Nordwind Foods, seats, 40'
    """
    speakers = list(dict.fromkeys(m.speaker for m in messages))
    folded_speakers = {s.lower() for s in speakers}
    names = [e for e in entities if e.lower() not in folded_speakers][:3]
    # A keyword already inside a name ("nordwind" in "Nordwind Foods") adds tokens, not meaning.
    inside = " ".join(names).lower()
    about: list[str] = []
    for term in names + [k for k in keywords if k.lower() not in inside and k.lower() not in folded_speakers]:
        if term.lower() not in {a.lower() for a in about}:
            about.append(term)
    numbers = list(dict.fromkeys(n for m in messages for n in _NUMBER.findall(m.text)))[:2]
    who = " & ".join(speakers[:3])
    what = ", ".join(about[:5] + numbers)
    return f"{who} on {what}" if what else f"{who} talked"


def headline(summary: str, items: int) -> str:
    """The summary's topic part cut to ``items`` terms: the line a reader sees above the raw messages.

    The raw messages follow it with every name and number, so the headline only has to say what the
    fragment is about; each extra term costs context tokens on every hit.

    >>> headline("Ana & Li on Nordwind Foods, Team, on-prem, 40", 3)
    'Nordwind Foods, Team, on-prem'
    """
    _, _, what = summary.partition(" on ")
    return ", ".join([t.strip() for t in what.split(",") if t.strip()][:items])


def topic_words_of(node: Node) -> list[str]:
    """What a fragment is about, for its own label and its parents' (its keywords when it was built
    without topic words)."""
    return node.properties.get(TOPIC_WORDS) or node.keywords


def shared_words(nodes: Iterable[Node], words_of: Callable[[Node], list[str]], top: int = 6) -> list[str]:
    """The ``top`` words of ``nodes`` (``words_of`` each), the most shared first: a word's earlier
    ranks weigh more.

    >>> shared_words([Node("a", "fragment", "", "u", keywords=["tiles", "grout"]),
    ...               Node("b", "fragment", "", "u", keywords=["grout"])], lambda n: n.keywords)
    ['grout', 'tiles']
    """
    c: Counter = Counter()
    for n in nodes:
        for r, w in enumerate(words_of(n)):
            c[w] += 1.0 / (1 + r)
    return [w for w, _ in sorted(c.items(), key=lambda x: -x[1])[:top]]  # ties: first seen first


def fragment_label(keywords: list[str], when: datetime | None) -> str:
    head = ", ".join(keywords[:2]) or "conversation"
    return f"{head} ({format_date(when)})" if when else head


def keep_extractive(texts: list[list[Message]]) -> list[FragmentSummary | None]:
    """The offline summarise step: every fragment keeps its extractive keywords and summary line."""
    return [None] * len(texts)


def apply_model_summary(frag: Node, summary: FragmentSummary | None) -> None:
    """The model's summary and keywords (its own keywords kept when the model gave none) replace the
    fragment's extractive ones, and its label follows the keywords."""
    if summary is None:
        return
    frag.summary = summary.summary
    if summary.keywords:
        frag.keywords = summary.keywords
    frag.label = fragment_label(frag.keywords, frag.created_at)
