"""Current state first: does the state in force reach the reader before the one it replaced?

The scenario suite's evolution questions (and some others) name the messages stating the
``current`` state and the ``superseded`` one(s); :func:`current_state_first` decides one
ranked result list, and :data:`EXTRA_METRICS` plugs it into :func:`~.runner.run_benchmark`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .datasets import Conversation, Question

__all__ = ["EXTRA_METRICS", "current_state_first", "current_state_first_rate"]


# ---------------------------------------------------------------------------- metrics


def _sources(hit: Any) -> Iterable[str]:
    if isinstance(hit, Mapping):
        return hit.get("source_ids", ())
    return getattr(hit, "source_ids", ())


def current_state_first(
    hits: Sequence[Any],
    current_ids: Iterable[str],
    superseded_ids: Iterable[str],
    *,
    k: int | None = None,
) -> bool | None:
    """Does the current state reach the reader before the state it replaced?

    Looks for the first hit (best first) whose ``source_ids`` include any current id and the
    first that includes any superseded id.

    Args:
        hits: results best first; each has ``source_ids`` (an attribute, e.g.
            :class:`~mnemis_integrations.core.retrieval.results.MemoryHit`, or a mapping key).
        current_ids: message ids stating the current state.
        superseded_ids: message ids stating the replaced state(s).
        k: look only at the first ``k`` hits; all of them when ``None``.

    Returns:
        ``True`` when the current state's first hit ranks strictly above the superseded
        state's first hit, or the superseded state never appears; also ``True`` when both
        first appear in the *same* hit (the reader sees both together, and the engine marks
        the newer one). ``False`` when the superseded state comes first or the current state
        never appears while the superseded one does. ``None`` when neither appears.

    Examples:
        >>> hits = [{"source_ids": ["m1"]}, {"source_ids": ["m7", "m2"]}]
        >>> current_state_first(hits, ["m7"], ["m1"]), current_state_first(hits, ["m1"], ["m7"])
        (False, True)
        >>> current_state_first(hits, ["m7"], ["m2"]), current_state_first(hits, ["m9"], ["m8"])
        (True, None)
    """
    cur, old = set(current_ids), set(superseded_ids)
    first_cur = first_old = None
    for rank, hit in enumerate(hits if k is None else hits[:k]):
        ids = set(_sources(hit))
        if first_cur is None and ids & cur:
            first_cur = rank
        if first_old is None and ids & old:
            first_old = rank
        if first_cur is not None and first_old is not None:
            break
    if first_cur is None and first_old is None:
        return None
    if first_cur is None:
        return False
    return first_old is None or first_cur <= first_old


def current_state_first_rate(outcomes: Iterable[bool | None]) -> float | None:
    """Share of ``True`` among the outcomes that are not ``None``; ``None`` if there are none.

    Examples:
        >>> current_state_first_rate([True, False, None, True])
        0.6666666666666666
    """
    decided = [o for o in outcomes if o is not None]
    return sum(1 for o in decided if o) / len(decided) if decided else None


def _current_state_first_metric(question: Question, hits: Sequence[Any], conv: Conversation) -> float | None:
    current = question.extra.get("current", ())
    superseded = question.extra.get("superseded", ())
    if not current or not superseded or not question.extra.get("state_applies", True):
        return None
    outcome = current_state_first(hits, current, superseded)
    return None if outcome is None else float(outcome)


# Read on the list, and (``<name>@<budget>``) on what each budget shows: the state in force must reach the
# reader within the context, not only high in the list.
_current_state_first_metric.per_budget = True  # type: ignore[attr-defined]

# name -> (question, hits best first, conversation) -> float | None, for run_benchmark(extra_metrics=...).
EXTRA_METRICS = {"current_state_first": _current_state_first_metric}
