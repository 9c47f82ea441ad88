"""How well single messages match a query, on one scale whatever namespace they come from.

A search's scores are normalised over what that one search saw (min-max within a namespace), so
every namespace's best hit reads near 1 whatever it holds, and all messages of one fragment share
its score. A caller that merges several namespaces' results, or ranks the messages inside a hit
one by one (a LangGraph store item is one message), needs a score that means the same everywhere:

- dense: the message's cosine to the query, rescaled so that the embedder's relevance threshold
  (the one the semantic path keeps nodes at) is 0 and an identical text 1, so e5's compressed
  cosines and spread embedders' read alike;
- lexical: the share of the query's terms the message holds, each term weighted by its idf over
  the messages compared, so a word all of them hold counts little;

mixed with the semantic path's ``lexical_weight``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np

__all__ = ["calibrated_cosine", "message_match", "term_coverage"]


def calibrated_cosine(cosines: np.ndarray, threshold: float) -> np.ndarray:
    """Cosines rescaled so ``threshold`` is 0 and 1 stays 1, clipped to [0, 1].

    >>> calibrated_cosine(np.array([0.78, 0.89, 1.0, 0.5]), 0.78).round(2).tolist()
    [0.0, 0.5, 1.0, 0.0]
    """
    span = max(1.0 - threshold, 1e-9)
    return np.clip((np.asarray(cosines, np.float64) - threshold) / span, 0.0, 1.0)


def term_coverage(query_terms: Collection[str], message_terms: Sequence[Collection[str]]) -> np.ndarray:
    """Per message, the idf-weighted share of the query's distinct terms it holds.

    The idf is BM25's, over the messages given: a term every message holds weighs little, one
    that none holds still counts in the whole (so no message covers a query it half answers).

    >>> term_coverage({"tea", "user"}, [{"tea", "user"}, {"user", "dog"}, set()]).round(2).tolist()
    [1.0, 0.32, 0.0]
    """
    terms = set(query_terms)
    if not terms or not message_terms:
        return np.zeros(len(message_terms))
    n = len(message_terms)
    df = {t: sum(t in m for m in message_terms) for t in terms}
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    # fsum: the same total whatever order the set of terms is read in (set order varies by process)
    whole = math.fsum(idf.values())
    return np.array([math.fsum(idf[t] for t in terms if t in m) / whole for m in message_terms])


def message_match(
    cosines: np.ndarray,
    query_terms: Collection[str],
    message_terms: Sequence[Collection[str]],
    *,
    threshold: float,
    lexical_weight: float,
) -> np.ndarray:
    """Each message's match in [0, 1]: calibrated cosine and term coverage, mixed.

    >>> scores = message_match(
    ...     np.array([0.9, 0.6]), {"tea"}, [{"tea"}, set()], threshold=0.5, lexical_weight=0.5
    ... )
    >>> scores.round(2).tolist()
    [0.9, 0.1]
    """
    dense = calibrated_cosine(cosines, threshold)
    lexical = term_coverage(query_terms, message_terms)
    return (1 - lexical_weight) * dense + lexical_weight * lexical
