"""Fragments -> subtopics -> concepts, incrementally, with a review hook.

A new fragment joins the most similar subtopic when the cosine clears the
embedder's subtopic threshold (and the subtopic is not full); otherwise it
founds a new subtopic, which then joins or founds a concept the same way. Labels
come from the members' keywords. A :class:`ReviewHook` sees every proposal
before it is applied and may accept, rename, merge or split.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

__all__ = ["Placement", "ReviewHook", "accept_all", "choose_parent", "label_from_keywords"]


@dataclass(frozen=True)
class Placement:
    """A proposal: put ``child_id`` under ``parent_id`` (or under a new parent when None)."""

    child_id: str
    level: Literal["subtopic", "concept"]
    parent_id: str | None
    similarity: float
    label: str  # the label the parent will carry


class ReviewHook(Protocol):
    def __call__(self, placement: Placement) -> Placement: ...


def accept_all(placement: Placement) -> Placement:
    return placement


def choose_parent(
    vector: np.ndarray,
    parent_ids: list[str],
    parent_vectors: np.ndarray,
    sizes: Sequence[int] | Callable[[str], int],
    threshold: float,
    max_size: int,
) -> tuple[str | None, float]:
    """Best parent for ``vector`` among those not full, or None if none clears ``threshold``.

    ``sizes``: the parents' sizes, or a function of a parent id asked only for the parents
    that clear the threshold, most similar first, until one is not full.

    >>> import numpy as np
    >>> choose_parent(np.array([1.0, 0.0]), ["a", "b"], np.array([[0.0, 1.0], [0.9, 0.436]]), [1, 1], 0.8, 5)
    ('b', 0.9)
    >>> choose_parent(np.array([1.0, 0.0]), ["a"], np.array([[0.0, 1.0]]), [1], 0.8, 5)
    (None, 0.0)
    >>> choose_parent(
    ...     np.array([1.0, 0.0]),
    ...     ["a", "b"],
    ...     np.array([[1.0, 0.0], [0.9, 0.436]]),
    ...     {"a": 5, "b": 1}.get,
    ...     0.8,
    ...     5,
    ... )
    ('b', 0.9)
    """
    if not parent_ids:
        return None, 0.0
    sims = parent_vectors @ vector
    for i in np.argsort(-sims):
        if sims[i] < threshold:
            break
        if (sizes(parent_ids[int(i)]) if callable(sizes) else sizes[i]) < max_size:
            return parent_ids[int(i)], round(float(sims[i]), 6)
    return None, 0.0


def label_from_keywords(
    keyword_lists: list[list[str]], top: int = 2, exclude: Callable[[str], bool] | None = None
) -> str:
    """Label a parent by the keywords its members share most (earlier keywords weigh more).

    >>> label_from_keywords([["refund", "timeout"], ["refund", "bank"], ["lunch"]])
    'refund & lunch'
    """
    score: Counter = Counter()
    for kws in keyword_lists:
        for rank, kw in enumerate(kws):
            if exclude is None or not exclude(kw):
                score[kw] += 1.0 / (1 + rank)
    picked = [kw for kw, _ in sorted(score.items(), key=lambda x: (-x[1], x[0]))[:top]]
    return " & ".join(picked) or "misc"
