"""Fit ranked hits into a reader's token budget, rank order kept.

A fragment hit carries several messages, and usually only one or two of them match the query.
Shown whole, a few fragments fill a small budget and crowd out evidence that sits elsewhere
(questions whose answer is spread over sessions suffer most); cut to single messages, the
turns around a match are lost. Two strategies (``ContextConfig.strategy``) share the budget
between places and depth:

- ``ranked`` (default): every message of every hit competes for the budget by a value that
  falls with the hit's rank by score, ``c / (rank + c)``, and with the message's place in the hit's
  ``focus`` (its match to the query), ``decay ** place``; the budget takes the most valuable
  messages first, each hit showing a prefix of its focus. A hit's best message counts at the hit's
  place in the list when that is better (``placed_first_message``): a hit search placed above
  better-scored ones (the state in force first) still shows it. So the best hit's second message
  competes with the next hit's first, and a low-ranked hit's best message with the top hits'
  weakest ones, whatever the budget.
- ``passes``: three fixed passes. The first ``breadth_hits`` hits narrowed to their
  ``breadth_messages`` best messages; round after round, each of those gets its next message
  back; further hits narrowed to ``later_messages`` while they fit (a hit that does not fit
  ends the adding: a later, smaller one would jump the ranking); then the rounds again.

Concept and subtopic summaries hold no message of their own: with ``defer_summaries`` they take
only the room the fragments leave.

A message that alone adds more than ``excerpt_tokens`` (a pasted document, a tool's output) and
does not fit the room left is shown cut to an excerpt of at most ``excerpt_tokens``, or half that
when the room is smaller, when the caller can make one (:mod:`.excerpt`): whole or not at all, it
would never be shown under a small budget.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from ..config import ContextConfig
from .results import MemoryHit

__all__ = ["fit_to_budget"]

# (hit, the messages it shows, those of them shown as an excerpt -> the excerpt's most tokens)
Rerender = Callable[[MemoryHit, Collection[str], Mapping[str, int]], MemoryHit]
TextOf = Callable[[MemoryHit, Collection[str], Mapping[str, int]], str]


class _Packing:
    """The hits shown so far, each whole or narrowed to some of its messages, and the tokens they use.

    A narrowed hit is only measured while the budget is shared (its text rendered and counted); the
    hits finally shown are built once, at the end: most of what is measured is not kept.
    """

    def __init__(
        self,
        hits: Sequence[MemoryHit],
        max_tokens: int,
        text_of: TextOf,
        count: Callable[[str], int],
        excerpt_tokens: int = 0,
    ) -> None:
        self.hits, self.max_tokens, self.text_of, self.count = hits, max_tokens, text_of, count
        self.excerpt_tokens = excerpt_tokens  # 0: no excerpts
        # hit -> the messages it shows, for a narrowable hit (all of them: shown whole); None: a hit
        # shown whole that has no messages to narrow
        self.shown: dict[int, list[str] | None] = {}
        self.cost: dict[int, int] = {}
        self.cut: dict[int, dict[str, int]] = {}  # hit -> its messages shown as an excerpt, and its size
        self.used = 0
        self._measured = 0  # the tokens of the last text tried

    def narrowable(self, i: int) -> bool:
        return self.hits[i].kind == "fragment" and len(self.hits[i].focus) > 0

    def attempt(self, i: int, ids: list[str] | None) -> bool:
        """Show hit ``i`` with only ``ids`` (``None``: whole) if the budget allows; False otherwise.

        The last of ``ids``, when it alone adds more than ``excerpt_tokens`` and does not fit
        whole, is tried as an excerpt."""
        cut = self.cut.get(i, {})
        if self._try(i, ids, cut):
            return True
        added = self._measured - self.cost.get(i, 0)
        if not (ids and self.excerpt_tokens and ids[-1] not in cut and added > self.excerpt_tokens):
            return False
        return any(
            self._try(i, ids, {**cut, ids[-1]: size})
            for size in (self.excerpt_tokens, self.excerpt_tokens // 2)
        )

    def _try(self, i: int, ids: list[str] | None, cut: Mapping[str, int]) -> bool:
        hit = self.hits[i]
        narrowed = self.narrowed(i, ids) or bool(cut)
        c = self._measured = self.count(self.text_of(hit, ids or (), cut) if narrowed else hit.text)
        if self.used - self.cost.get(i, 0) + c > self.max_tokens:
            return False
        self.used += c - self.cost.get(i, 0)
        self.shown[i], self.cost[i] = ids, c
        if cut:
            self.cut[i] = dict(cut)
        return True

    def narrowed(self, i: int, ids: list[str] | None) -> bool:
        return ids is not None and len(ids) < len(self.hits[i].focus)

    def messages_shown(self, i: int) -> list[str]:
        """The messages hit ``i`` shows so far, best match first (none while it is not shown)."""
        return self.shown.get(i) or []

    def result(self, rerender: Rerender) -> list[MemoryHit]:
        out = []
        for i in sorted(self.shown):
            ids, cut = self.shown[i], self.cut.get(i, {})
            out.append(
                rerender(self.hits[i], ids or (), cut) if self.narrowed(i, ids) or cut else self.hits[i]
            )
        return out


def fit_to_budget(
    hits: Sequence[MemoryHit],
    max_tokens: int,
    config: ContextConfig,
    rerender: Rerender,
    count: Callable[[str], int],
    text_of: TextOf | None = None,
    excerpts: bool = False,
) -> list[MemoryHit]:
    """The hits, in their order, narrowed so that their texts total at most ``max_tokens``.

    Args:
        hits: ranked hits, best first.
        max_tokens: the budget, counted with ``count`` over each hit's ``text``.
        config: the strategy and its settings.
        rerender: the hit showing only the given message ids (its headline kept).
        count: tokens of a text.
        text_of: the text ``rerender`` would give, without building the hit (its metadata);
            ``None``: ``rerender``'s.
        excerpts: the callbacks can show a message as an excerpt (``config.excerpt_tokens``).
    """
    packing = _Packing(
        hits,
        max_tokens,
        text_of or (lambda hit, ids, cut: rerender(hit, ids, cut).text),
        count,
        config.excerpt_tokens if excerpts else 0,
    )
    if config.strategy == "ranked":
        _fill_by_value(packing, config)
    else:
        _fill_in_passes(packing, config)
    return packing.result(rerender)


def _fill_by_value(packing: _Packing, config: ContextConfig) -> None:
    """Messages by falling value (hit rank, place in the hit's focus); one that does not fit is
    passed over, and so are the rest of its hit's (a hit shows a prefix of its focus)."""
    c, decay = config.rank_discount, config.message_decay
    # A hit's rank is its place by score: a rule that only changes the order the first hits are read
    # in (the end state first, retrieval.search) does not change how deep each is shown. Only its best
    # message, with ``placed_first_message``, counts at its place in the list when that is better, so a
    # hit placed above better-scored ones is not left out of a small budget that shows the state it
    # replaced. Equal values (c = 3, decay 0.7: rank 7's first message and rank 4's second) go by that
    # rank too, not by place in the list.
    by_score = sorted(range(len(packing.hits)), key=lambda i: (-packing.hits[i].score, i))
    rank = {i: r for r, i in enumerate(by_score)}
    units: list[tuple[bool, float, int, int, int]] = []
    for i, hit in enumerate(packing.hits):
        deferred = config.defer_summaries and hit.kind != "fragment"
        places = len(hit.focus) if packing.narrowable(i) else 1
        value = -(c / (rank[i] + c))
        units += [(deferred, value * decay**place, rank[i], place, i) for place in range(places)]
        if config.placed_first_message and i < rank[i]:
            # placed above better-scored hits: its best message counts at its place in the list
            units[-places] = (deferred, -(c / (i + c)), i, 0, i)
    for _deferred, _value, _rank, place, i in sorted(units):
        if not packing.narrowable(i):
            packing.attempt(i, None)
            continue
        kept = packing.messages_shown(i)
        if len(kept) == place:  # else an earlier message of this hit did not fit
            packing.attempt(i, [*kept, packing.hits[i].focus[place]])


def _fill_in_passes(packing: _Packing, config: ContextConfig) -> None:
    hits = packing.hits

    def add_hits(indexes: Iterable[int], messages: int) -> bool:
        """Show these hits, each narrowed to ``messages`` (to its best one if that is too long),
        until one does not fit (then False)."""
        for i in indexes:
            ids = list(hits[i].focus[:messages]) if packing.narrowable(i) else None
            fits = packing.attempt(i, ids)
            if not fits and not (ids is not None and len(ids) > 1 and packing.attempt(i, ids[:1])):
                return False
        return True

    def widen() -> None:
        grew = True
        while grew:
            grew = False
            for i in sorted(i for i, ids in packing.shown.items() if ids is not None):
                kept = packing.messages_shown(i)
                rest = [m for m in hits[i].focus if m not in kept]
                if rest and packing.attempt(i, kept + rest[:1]):
                    grew = True

    first = min(config.breadth_hits, len(hits))
    all_fit = add_hits(range(first), config.breadth_messages)
    widen()
    if all_fit:
        later = list(range(first, len(hits)))
        if config.defer_summaries:
            add_hits([i for i in later if hits[i].kind == "fragment"], config.later_messages)
            widen()
            add_hits([i for i in later if hits[i].kind != "fragment"], config.later_messages)
        else:
            add_hits(later, config.later_messages)
        widen()  # room left after the later hits (a small memory shows them all): give messages back
