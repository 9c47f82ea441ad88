"""The part of a long message that answers a query, for a budget with no room for all of it.

A pasted document or a tool's output can outgrow a small budget alone: shown whole or not at
all, it is never shown at 256 tokens, and a reader gets only summaries. :func:`excerpt` keeps
its sentences that share the query's rarest terms (BM25's terms, weighted by idf), as many as
fit, in their order, with ``…`` where text was left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ..passages import characters, passages, pieces, text_lines
from ..text import lexical_terms, text_cache

__all__ = ["excerpt"]

_GAP = "…"


def _cut(units: list[tuple[str, int, bool]], i: int, max_tokens: int, count: Callable[[str], int]) -> str:
    """The longest prefix of passage ``i`` within ``max_tokens``, cut between words (or
    :func:`~..passages.characters`), with the gap marks of the text left out before and after it."""
    text = units[i][0]
    words, joiner = (text.split(" "), " ") if " " in text else (characters(text), "")
    lead = _GAP + " " if i else ""

    def shown(n: int) -> str:
        rest = n < len(words) or i < len(units) - 1
        return lead + joiner.join(words[:n]) + (_GAP if rest else "")

    lo, hi = 0, len(words)
    while lo < hi:  # the most words whose prefix fits
        mid = (lo + hi + 1) // 2
        if count(shown(mid)) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return shown(lo) if lo else ""


def excerpt(
    text: str,
    query: str,
    max_tokens: int,
    count: Callable[[str], int],
    rarity: Mapping[str, float] | None = None,
) -> str:
    """At most ``max_tokens`` of ``text``: its passages (short lines whole, else sentences:
    :func:`~..passages.passages`) holding the most of ``query``'s terms, in order.

    A passage scores the summed ``rarity`` (default 1) of the query terms it holds; the best
    are taken while they fit, ties by position; with no query word anywhere the text's opening
    passages are taken. Left-out text is marked ``…``; a best passage longer than the limit
    alone is cut at a word.

    >>> doc = "Intro here. Costs in Madrid fell. Berlin revenue grew by 9%. Outro."
    >>> excerpt(doc, "Berlin revenue?", 8, lambda s: len(s.split()))
    '… Berlin revenue grew by 9%. …'
    >>> excerpt(doc, "Tokyo?", 9, lambda s: len(s.split()))
    'Intro here. Costs in Madrid fell. …'
    """
    units, sizes, terms = _analysed(text, max_tokens, count)
    if not units:
        return ""
    weight = rarity or {}
    wanted = set(lexical_terms(query))
    # fsum: the same total whatever order the set of terms is read in (set order varies by process)
    scores = [math.fsum(weight.get(t, 1.0) for t in held & wanted) for held in terms]
    matching = sorted((i for i in range(len(units)) if scores[i]), key=lambda i: (-scores[i], i))
    # Passages are measured once (a long message is met again by every search that finds it); a
    # selection is estimated as their sum plus a token for each separator and the closing gap
    # mark, then the excerpt itself is measured and trimmed, weakest passage first, until it fits.
    taken: list[int] = []
    room = max_tokens - 1
    for i in matching or range(len(units)):  # nothing matches: the opening reads best
        if sizes[i] + 1 <= room:
            taken.append(i)
            room -= sizes[i] + 1
        elif not matching:
            break
    while taken and count(_join(units, set(taken))) > max_tokens:
        taken.pop()
    if not taken:
        return _cut(units, matching[0] if matching else 0, max_tokens, count)
    return _join(units, set(taken))


@text_cache(maxsize=256)
def _analysed(
    text: str, max_tokens: int, count: Callable[[str], int]
) -> tuple[list[tuple[str, int, bool]], list[int], list[frozenset[str]]]:
    """A text's passages (each with its line, and whether it follows the one before with no space
    between: Chinese sentences, a passage cut by characters), each one's tokens and its lexical
    terms; a passage longer than the limit (a JSON payload, clauses with no full stop) in even
    pieces of half of it, so the part that matches can be shown."""
    lines = text_lines(text)
    units = []
    end = 0
    for unit, line in passages(text, max_tokens, count):
        cut = count(unit) > max_tokens
        for piece in pieces(unit, max(1, max_tokens // 2), count) if cut else [unit]:
            if not units or units[-1][1] != line:
                end = 0
            start = lines[line].find(piece, end)
            units.append((piece, line, start == end > 0))
            end = (start if start >= 0 else end) + len(piece)  # a piece not found (never yet) glues nothing
    return units, [count(u) for u, _, _ in units], [frozenset(lexical_terms(u)) for u, _, _ in units]


def _join(units: list[tuple[str, int, bool]], taken: set[int]) -> str:
    """The taken passages in order: a line break between lines, ``…`` where passages were left out."""
    out = ""
    last = -1
    for i in sorted(taken):
        text, line, glued = units[i]
        if last >= 0:
            out += "\n" if line != units[last][1] else "" if glued and i == last + 1 else " "
        if i != last + 1:
            out += _GAP + " "
        out += text
        last = i
    if last != len(units) - 1:
        out += " " + _GAP
    return out
