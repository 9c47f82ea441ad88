"""The part of a long message that answers a query, for a budget with no room for all of it.

A pasted document or a tool's output can outgrow a small budget alone: shown whole or not at
all, it is never shown at 256 tokens, and a reader gets only summaries. :func:`excerpt` keeps
its sentences that share the query's rarest terms (BM25's terms, weighted by idf), as many as
fit, in their order, with ``…`` where text was left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from ..text import lexical_terms

__all__ = ["excerpt", "sentences"]

# A sentence ends at . ! ? (or their CJK forms) before a space, or at a line break.
_ENDS = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")
_GAP = "…"


def sentences(text: str) -> list[str]:
    """``text`` cut into its sentences (and lines), blanks dropped.

    >>> sentences("Berlin grew. Madrid fell!\\nNext line 好的。再见")
    ['Berlin grew.', 'Madrid fell!', 'Next line 好的。', '再见']
    """
    return [s.strip() for s in _ENDS.split(text) if s and s.strip()]


def _cut(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """The longest word-boundary prefix of ``text`` within ``max_tokens`` (with the gap mark)."""
    words = text.split(" ") if " " in text else list(text)
    joiner = " " if " " in text else ""
    lo, hi = 0, len(words)
    while lo < hi:  # the most words whose prefix fits
        mid = (lo + hi + 1) // 2
        if count(joiner.join(words[:mid]) + _GAP) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return joiner.join(words[:lo]) + _GAP if lo else ""


def excerpt(
    text: str,
    query: str,
    max_tokens: int,
    count: Callable[[str], int],
    rarity: Mapping[str, float] | None = None,
) -> str:
    """At most ``max_tokens`` of ``text``: its sentences holding the most of ``query``'s terms, in order.

    A sentence scores the summed ``rarity`` (default 1) of the query terms it holds; the best
    are taken while they fit, ties by position; with no query word anywhere the text's opening
    sentences are taken. Left-out text is marked ``…``; a best sentence longer than the limit
    alone is cut at a word.

    >>> doc = "Intro here. Costs in Madrid fell. Berlin revenue grew by 9%. Outro."
    >>> excerpt(doc, "Berlin revenue?", 8, lambda s: len(s.split()))
    '… Berlin revenue grew by 9%. …'
    >>> excerpt(doc, "Tokyo?", 7, lambda s: len(s.split()))
    'Intro here. Costs in Madrid fell. …'
    """
    parts = sentences(text)
    if not parts:
        return ""
    weight = rarity or {}
    wanted = set(lexical_terms(query))
    scores = [sum(weight.get(t, 1.0) for t in set(lexical_terms(p)) & wanted) for p in parts]
    matching = sorted((i for i in range(len(parts)) if scores[i]), key=lambda i: (-scores[i], i))
    taken: set[int] = set()
    if not matching:  # nothing matches: the opening reads best
        for i in range(len(parts)):
            if count(_join(parts, taken | {i})) > max_tokens:
                break
            taken.add(i)
    for i in matching:  # the best first; one that does not fit leaves room for a shorter one
        if count(_join(parts, taken | {i})) <= max_tokens:
            taken.add(i)
    if not taken:
        return _cut(parts[matching[0] if matching else 0], max_tokens, count)
    return _join(parts, taken)


def _join(parts: list[str], taken: set[int]) -> str:
    out: list[str] = []
    last = -1
    for i in sorted(taken):
        if i != last + 1:
            out.append(_GAP)
        out.append(parts[i])
        last = i
    if last != len(parts) - 1:
        out.append(_GAP)
    return " ".join(out)
