"""Retrieval metrics over ranked hits (pure functions, no I/O).

Two families, because they answer different questions:

* **budget recall**: would a reader LLM given the top hits, packed into a token budget,
  see the evidence turns? It looks at the *text* of hits, so systems whose hits are
  summaries, windows or single turns are compared on equal terms.
* **Recall@k and MRR over source ids**: does the ranking point at the right messages?
  It trusts each hit's ``source_ids``.

Every per-question function returns a float in [0, 1]; :func:`aggregate` averages them
per category.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "TIE_METRICS",
    "aggregate",
    "budget_recall",
    "budget_recalls",
    "equal_top5",
    "hits_within",
    "normalise_text",
    "pack_context",
    "percentile",
    "recall_at_k",
    "recalls_within",
    "reciprocal_rank",
    "tied_at_top",
    "tied_top5",
]

TokenCounter = Callable[[str], int]

_WS = re.compile(r"\s+")


def _default_counter() -> TokenCounter:
    from ..core.tokens import count_tokens  # tiktoken loads on first use, not when metrics is imported

    return count_tokens


def normalise_text(text: str) -> str:
    """Lower-case and collapse whitespace, the form evidence matching compares.

    Examples:
        >>> normalise_text("  Hello\\n  World ")
        'hello world'
    """
    return _WS.sub(" ", text).strip().lower()


def pack_context(texts: Sequence[str], budget: int, count: TokenCounter | None = None) -> list[str]:
    """The longest prefix of ``texts`` whose token counts sum to at most ``budget``.

    Packing stops at the first hit that does not fit instead of skipping it and trying
    smaller, lower-ranked ones: a reader is given the best hits in rank order, and
    skipping would reward systems with many tiny low-ranked hits.

    Args:
        texts: hit texts, best first.
        budget: token budget.
        count: token counter; cl100k_base by default.

    Examples:
        >>> words = lambda s: len(s.split())
        >>> pack_context(["a b", "c d e", "f"], 5, words)
        ['a b', 'c d e']
        >>> pack_context(["a b", "c d e f", "g"], 5, words)  # "g" fits but comes after a miss
        ['a b']
    """
    count = count or _default_counter()
    used = 0
    out = []
    for t in texts:
        n = count(t)
        if used + n > budget:
            break
        used += n
        out.append(t)
    return out


def _found(context_texts: Iterable[str], evidence_texts: Sequence[str]) -> float:
    # Hits are normalised one by one and joined with "\n", which normalisation has removed
    # from every text, so a match can never straddle two hits.
    context = "\n".join(normalise_text(t) for t in context_texts)
    if not evidence_texts:
        return 0.0
    # An evidence turn without text (an image-only LoCoMo turn) is inside every context, an empty
    # one too: it is never counted as seen.
    hits = sum(1 for e in evidence_texts if (wanted := normalise_text(e)) and wanted in context)
    return hits / len(evidence_texts)


def budget_recall(
    hit_texts: Sequence[str], evidence_texts: Sequence[str], budget: int, count: TokenCounter | None = None
) -> float:
    """Share of evidence turns whose normalised text is inside the packed context.

    Args:
        hit_texts: hit texts, best first.
        evidence_texts: raw text of each evidence turn.
        budget: token budget for :func:`pack_context`.
        count: token counter; cl100k_base by default.

    Returns:
        A value in [0, 1]; 0 when there is no evidence.

    Examples:
        >>> words = lambda s: len(s.split())
        >>> hits = ["[8 May 2023] Ann: I adopted a  CAT", "[9 May 2023] Bob: nice", "Ann: its name is Tom"]
        >>> budget_recall(hits, ["I adopted a cat", "its name is Tom"], 8, words)
        0.5
        >>> budget_recall(hits, ["I adopted a cat", "its name is Tom"], 100, words)
        1.0
    """
    return _found(pack_context(hit_texts, budget, count), evidence_texts)


def budget_recalls(
    hit_texts: Sequence[str],
    evidence_texts: Sequence[str],
    budgets: Sequence[int],
    count: TokenCounter | None = None,
) -> dict[int, float]:
    """:func:`budget_recall` at several budgets, counting each hit's tokens once.

    Examples:
        >>> words = lambda s: len(s.split())
        >>> budget_recalls(["x y", "a b c"], ["a b c"], [2, 4, 5], words)
        {2: 0.0, 4: 0.0, 5: 1.0}
    """
    return recalls_within(hit_texts, evidence_texts, hits_within(hit_texts, budgets, count))


def recalls_within(
    hit_texts: Sequence[str], evidence_texts: Sequence[str], shown: Mapping[int, int]
) -> dict[int, float]:
    """Budget -> the share of evidence turns inside the first ``shown[budget]`` hits (:func:`hits_within`'s
    counts), for a caller that has packed the hits already.

    Examples:
        >>> recalls_within(["x y", "a b c"], ["a b c"], {2: 1, 5: 2})
        {2: 0.0, 5: 1.0}
    """
    return {b: _found(hit_texts[:n], evidence_texts) for b, n in shown.items()}


def hits_within(
    hit_texts: Sequence[str], budgets: Sequence[int], count: TokenCounter | None = None
) -> dict[int, int]:
    """Budget -> how many of the first hits a reader gets when they are appended in rank order while the
    total stays within it (packing stops at the first hit that does not fit).

    Examples:
        >>> hits_within(["x y", "a b c"], [2, 4, 5], lambda s: len(s.split()))
        {2: 1, 4: 1, 5: 2}
    """
    count = count or _default_counter()
    sizes = []
    total = 0
    for t in hit_texts:
        if total > max(budgets, default=0):
            break  # later hits cannot fit any budget
        total += count(t)
        sizes.append(total)
    out = {}
    for b in budgets:
        n = 0
        while n < len(sizes) and sizes[n] <= b:
            n += 1
        out[b] = n
    return out


def recall_at_k(hit_source_ids: Sequence[Sequence[str]], evidence_ids: Sequence[str], k: int) -> float:
    """Share of evidence ids inside the union of the first ``k`` hits' source ids.

    Examples:
        >>> recall_at_k([("D1:1", "D1:2"), ("D2:5",), ("D3:1",)], ["D1:2", "D3:1"], 2)
        0.5
        >>> recall_at_k([("D1:1", "D1:2"), ("D2:5",), ("D3:1",)], ["D1:2", "D3:1"], 3)
        1.0
    """
    if not evidence_ids:
        return 0.0
    seen: set[str] = set()
    for ids in hit_source_ids[:k]:
        seen.update(ids)
    return sum(1 for e in set(evidence_ids) if e in seen) / len(set(evidence_ids))


def reciprocal_rank(hit_source_ids: Sequence[Sequence[str]], evidence_ids: Sequence[str]) -> float:
    """1 / rank of the first hit whose source ids include any evidence id; 0 if none does.

    Only the hits passed in are looked at (the runner passes all ``k`` it asked for).

    Examples:
        >>> reciprocal_rank([("D1:1",), ("D4:2", "D4:3"), ("D2:2",)], ["D4:3", "D2:2"])
        0.5
        >>> reciprocal_rank([("D1:1",)], ["D9:9"])
        0.0
    """
    wanted = set(evidence_ids)
    for rank, ids in enumerate(hit_source_ids, start=1):
        if wanted.intersection(ids):
            return 1.0 / rank
    return 0.0


def tied_at_top(scores: Sequence[float], n: int = 5, tolerance: float = 1e-3) -> float:
    """1.0 when two neighbours among the first ``n`` scores differ by at most ``tolerance`` x the
    first score (a ranking whose order there the scores do not explain), else 0.0. Relative to the
    first score, so it reads the same for scores in [0, 1] and for rank fusion's small ones.

    Examples:
        >>> tied_at_top([0.9, 0.693, 0.693, 0.5]), tied_at_top([0.9, 0.693, 0.683, 0.5])
        (1.0, 0.0)
        >>> tied_at_top([0.033, 0.0328, 0.0325]), tied_at_top([0.9, 0.8, 0.7, 0.6, 0.5, 0.5])
        (0.0, 0.0)
    """
    head = list(scores[:n])
    if len(head) < 2:
        return 0.0
    close = tolerance * abs(head[0])
    return float(any(abs(a - b) <= close for a, b in zip(head, head[1:], strict=False)))


def tied_top5(question: Any, hits: Sequence[Any], conv: Any) -> float:
    """:func:`tied_at_top` over the hits' ``score``, as an extra metric of the runner (``extra_metrics``:
    question, hits best first, conversation)."""
    return tied_at_top([float(h.score) for h in hits])


def equal_top5(question: Any, hits: Sequence[Any], conv: Any) -> float:
    """1.0 when two neighbours among the first five hits have exactly the same ``score``: an order no
    score gives, only the ranking's tie-break. :func:`tied_top5` also counts scores apart by less than
    a thousandth of the first, which a rule that steps placed hits under one score can leave."""
    return tied_at_top([float(h.score) for h in hits], tolerance=0.0)


# name -> metric, for run_benchmark(extra_metrics=...): near and exact ties among the first hits.
TIE_METRICS = {"tied_top5": tied_top5, "equal_top5": equal_top5}


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method), without numpy.

    Examples:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
        2.5
        >>> percentile([10.0], 95)
        10.0
    """
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def aggregate(
    records: Iterable[Mapping[str, Any]],
    *,
    label: Callable[[Any], str] = str,
    exclude_from_overall: Iterable[Any] = (),
) -> dict[str, Any]:
    """Average per-question scores overall and per category.

    Each record is ``{"category": ..., "scores": {name: float | None}}``; ``None`` means the
    metric does not apply to that question and leaves it out of that metric's mean.

    Args:
        records: per-question results of one system.
        label: category value -> display name.
        exclude_from_overall: categories kept out of "overall" (still reported on their own).

    Returns:
        ``{"overall": {"n": int, name: mean, ...}, "categories": {label: {...}}}``;
        a mean is ``None`` when no question had that metric.

    Examples:
        >>> recs = [{"category": 1, "scores": {"r": 1.0}}, {"category": 1, "scores": {"r": 0.0}},
        ...         {"category": 5, "scores": {"r": 1.0}}]
        >>> agg = aggregate(recs, exclude_from_overall={5})
        >>> agg["overall"], agg["categories"]["1"], agg["categories"]["5"]
        ({'n': 2, 'r': 0.5}, {'n': 2, 'r': 0.5}, {'n': 1, 'r': 1.0})
    """
    excluded = set(exclude_from_overall)
    groups: dict[str, list[Mapping[str, float | None]]] = {}
    overall: list[Mapping[str, float | None]] = []
    order: list[Any] = []
    for r in records:
        cat = r["category"]
        name = label(cat)
        if name not in groups:
            groups[name] = []
            order.append(cat)
        groups[name].append(r["scores"])
        if cat not in excluded:
            overall.append(r["scores"])

    def mean(rows: list[Mapping[str, float | None]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(rows)}
        names: list[str] = []
        for row in rows:
            names.extend(k for k in row if k not in names)
        for k in names:
            vals = [row[k] for row in rows if row.get(k) is not None]
            out[k] = sum(vals) / len(vals) if vals else None  # type: ignore[arg-type]
        return out

    def sort_key(cat: Any) -> tuple[int, Any]:
        # Integer categories in numeric order first, then labels alphabetically.
        return (0, cat) if isinstance(cat, int) else (1, str(cat))

    cats = {label(c): mean(groups[label(c)]) for c in sorted(order, key=sort_key)}
    return {"overall": mean(overall), "categories": cats}


def cached_counter() -> TokenCounter:
    """A cl100k_base token counter that remembers each text's count (hits repeat across budgets and
    questions)."""
    from ..core.tokens import count_tokens

    seen: dict[str, int] = {}

    def count(text: str) -> int:
        n = seen.get(text)
        if n is None:
            n = seen[text] = count_tokens(text)
        return n

    return count
