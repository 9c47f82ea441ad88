"""Fit ranked hits into a reader's token budget: breadth first, then depth.

A fragment hit carries several messages, and usually only one or two of them match the query.
Shown whole, a few fragments fill a small budget and crowd out evidence that sits elsewhere
(questions whose answer is spread over sessions suffer most); cut to single messages, the
turns around a match are lost. So the budget is spent in three passes, rank order kept:

1. breadth: the first ``breadth_hits`` hits, each fragment narrowed to its
   ``breadth_messages`` best-matching messages (``MemoryHit.focus``);
2. depth: round after round, each of those fragments gets its next best message back;
3. more breadth: further hits, each narrowed to ``later_messages``, while they fit;
   then, with room left, the depth rounds run again over every shown hit.

A hit that does not fit ends the adding of hits (a later, smaller one would jump the ranking).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from ..config import ContextConfig
from .results import MemoryHit

__all__ = ["fit_to_budget"]

Rerender = Callable[[MemoryHit, Collection[str]], MemoryHit]


def fit_to_budget(
    hits: Sequence[MemoryHit],
    max_tokens: int,
    config: ContextConfig,
    rerender: Rerender,
    count: Callable[[str], int],
) -> list[MemoryHit]:
    """The hits, in their order, narrowed so that their texts total at most ``max_tokens``.

    Args:
        hits: ranked hits, best first.
        max_tokens: the budget, counted with ``count`` over each hit's ``text``.
        config: how many hits and messages the breadth pass shows.
        rerender: the hit showing only the given message ids (its headline kept).
        count: tokens of a text.
    """
    shown: dict[int, MemoryHit] = {}
    kept: dict[int, list[str]] = {}
    cost: dict[int, int] = {}
    used = 0

    def narrowable(i: int) -> bool:
        return hits[i].kind == "fragment" and len(hits[i].focus) > 0

    def attempt(i: int, ids: list[str] | None) -> bool:
        nonlocal used
        hit = hits[i] if ids is None or len(ids) >= len(hits[i].focus) else rerender(hits[i], ids)
        c = count(hit.text)
        if used - cost.get(i, 0) + c > max_tokens:
            return False
        used += c - cost.get(i, 0)
        shown[i], cost[i] = hit, c
        if ids is not None:
            kept[i] = ids
        return True

    def add_hits(indexes: Iterable[int], messages: int) -> bool:
        """Show these hits, each narrowed to ``messages`` (to its best one if that is too long),
        until one does not fit (then False)."""
        for i in indexes:
            ids = list(hits[i].focus[:messages]) if narrowable(i) else None
            if not attempt(i, ids) and not (ids is not None and len(ids) > 1 and attempt(i, ids[:1])):
                return False
        return True

    def widen() -> None:
        grew = True
        while grew:
            grew = False
            for i in sorted(kept):
                rest = [m for m in hits[i].focus if m not in kept[i]]
                if rest and attempt(i, kept[i] + rest[:1]):
                    grew = True

    first = min(config.breadth_hits, len(hits))
    all_fit = add_hits(range(first), config.breadth_messages)
    widen()
    if all_fit:
        later = list(range(first, len(hits)))
        if config.defer_summaries:
            # Parent summaries ranked among the later hits hold no message: they wait until the
            # fragments shown have their messages back.
            add_hits([i for i in later if hits[i].kind == "fragment"], config.later_messages)
            widen()
            add_hits([i for i in later if hits[i].kind != "fragment"], config.later_messages)
        else:
            add_hits(later, config.later_messages)
        widen()  # room left after the later hits (a small memory shows them all): give messages back
    return [shown[i] for i in sorted(shown)]
