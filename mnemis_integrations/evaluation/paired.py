"""Two runs compared question by question: is a difference more than the luck of the conversations?

A change to search moves a handful of questions; a keep rule that reads the fourth decimal of a mean
cannot tell a real gain from which conversations happen to be in the suite. :func:`paired_bootstrap`
gives the mean difference with an interval: the two runs are compared on the same questions (paired),
and the resampling draws whole conversations with replacement (a cluster bootstrap), because the
questions of one conversation share its memory and do not vary independently; drawing questions
alone makes the interval too narrow.

:func:`load_question_scores` reads the per-question rows that ``mnemis bench`` and
``benchmarks/search_sweep.py`` write (``per_question.jsonl``), under one set of metric names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .scenarios import scenario_of

__all__ = ["METRIC_ALIASES", "PairedDifference", "QuestionScores", "load_question_scores", "paired_bootstrap"]

# ``search_sweep.py``'s short names -> the bench's score names.
METRIC_ALIASES = {
    "R@256": "budget_recall@256",
    "R@512": "budget_recall@512",
    "R@1024": "budget_recall@1024",
    "R@2048": "budget_recall@2048",
    "CSF": "current_state_first",
    "CSF@256": "current_state_first@256",  # on what a 256-token budget shows the reader
    "CSF@512": "current_state_first@512",
    "MRR": "mrr",
    "R@5": "recall@5",
}


@dataclass(frozen=True)
class QuestionScores:
    """One run's scores for one question: its conversation, its class and metric -> value (None: the
    metric does not apply, as current state first where neither state was retrieved)."""

    conversation: str
    category: str
    scores: Mapping[str, float | None]


@dataclass(frozen=True)
class PairedDifference:
    """``other`` minus ``base`` on one metric, over the questions both scored."""

    metric: str
    questions: int
    conversations: int
    base: float
    other: float
    delta: float
    low: float  # the interval's bounds, at ``confidence``
    high: float
    confidence: float
    up: int  # questions where ``other`` scores higher
    down: int

    @property
    def significant(self) -> bool:
        """The interval leaves out zero."""
        return self.low > 0 or self.high < 0


def paired_bootstrap(
    base: Mapping[str, QuestionScores],
    other: Mapping[str, QuestionScores],
    metric: str,
    *,
    draws: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedDifference:
    """The mean difference ``other - base`` on ``metric`` over the questions both runs scored, with a
    percentile interval from ``draws`` resamplings of their conversations.

    Each draw takes as many conversations as there are, with replacement, and the difference is the
    draw's summed difference over its question count, so a conversation weighs by its questions, as in
    the mean itself.

    >>> def run(first):
    ...     return {f"c{i}-q1": QuestionScores(f"c{i}", "", {"mrr": v}) for i, v in enumerate([first, 1.0])}
    >>> a, b = run(0.5), run(1.0)
    >>> d = paired_bootstrap(a, b, "mrr")
    >>> (d.delta, d.up, d.down, d.low <= 0.0 <= d.high)
    (0.25, 1, 0, True)
    """
    if draws < 1:
        raise ConfigError(f"draws must be at least 1, got {draws}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie between 0 and 1, got {confidence}")
    pairs = []
    for qid in sorted(base.keys() & other.keys()):
        x, y = base[qid].scores.get(metric), other[qid].scores.get(metric)
        if x is not None and y is not None:
            pairs.append((base[qid].conversation, float(x), float(y)))
    if not pairs:
        raise ConfigError(f"no question is scored on {metric!r} in both runs")
    conversations = sorted({c for c, _, _ in pairs})
    at = {c: i for i, c in enumerate(conversations)}
    diff_sum = np.zeros(len(conversations))
    count = np.zeros(len(conversations))
    for c, x, y in pairs:
        diff_sum[at[c]] += y - x
        count[at[c]] += 1
    picks = np.random.default_rng(seed).integers(0, len(conversations), size=(draws, len(conversations)))
    resampled = diff_sum[picks].sum(axis=1) / count[picks].sum(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(resampled, [tail, 1 - tail])
    xs = np.array([x for _, x, _ in pairs])
    ys = np.array([y for _, _, y in pairs])
    return PairedDifference(
        metric=metric,
        questions=len(pairs),
        conversations=len(conversations),
        base=float(xs.mean()),
        other=float(ys.mean()),
        delta=float((ys - xs).mean()),
        low=float(low),
        high=float(high),
        confidence=confidence,
        up=int((ys > xs).sum()),
        down=int((ys < xs).sum()),
    )


def load_question_scores(path: str | Path, system: str | None = None) -> dict[str, QuestionScores]:
    """Question id -> its scores, from a ``per_question.jsonl`` (or a folder holding one) written by
    ``mnemis bench`` (rows carry ``system`` and ``scores``) or by ``benchmarks/search_sweep.py``
    (short metric names: ``R@256``, ``CSF``, ``MRR``, ``R@5``, read as the bench's names).

    ``system``: which system's rows to read from a bench file holding several; required there.

    An ask-at-time run names each question step's memory ``<scenario>@<step>``; its questions are
    read as their scenario's, so the resampling draws whole scenarios there too.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "per_question.jsonl"
    if not p.is_file():
        raise ConfigError(f"no per-question rows at {p}")
    rows = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    systems = {r["system"] for r in rows if "system" in r}
    if systems:
        if system is None and len(systems) > 1:
            raise ConfigError(f"{p} holds several systems ({', '.join(sorted(systems))}): name one")
        wanted = system if system is not None else next(iter(systems))
        if wanted not in systems:
            raise ConfigError(
                f"{p} holds no rows of system {wanted!r} (it holds {', '.join(sorted(systems))})"
            )
        rows = [r for r in rows if r.get("system") == wanted]
    out: dict[str, QuestionScores] = {}
    for r in rows:
        qid = r["question_id"]
        if "scores" in r:
            scores = dict(r["scores"])
            category = str(r.get("category", ""))
        else:
            scores = {METRIC_ALIASES.get(k, k): v for k, v in r.items() if k in METRIC_ALIASES}
            category = r.get("class", "")
        out[qid] = QuestionScores(
            scenario_of(r.get("conversation") or _conversation_of(qid)), category, scores
        )
    return out


def _conversation_of(question_id: str) -> str:
    """``indep_villa-q05`` -> ``indep_villa``: the scenario suite's question ids name their conversation."""
    head, sep, _ = question_id.rpartition("-q")
    return head if sep else question_id
