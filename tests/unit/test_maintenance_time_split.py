"""The health check's time split, chosen cut by cut, against the first version that weighed every set of
cuts (kept here as the oracle): the same cuts on thousands of random splits, ties included."""

import random
from datetime import datetime, timedelta, timezone
from itertools import combinations

import pytest

from mnemis_integrations.core.maintenance.health import _time_cuts

T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)


def _reference_time_cuts(ts, max_span_days, max_parts):
    """The split as first written: every set of cuts weighed (the oracle)."""
    dated = [t.timestamp() for t in ts if t is not None]

    def span(a, b):
        b = min(b, len(dated) - 1)
        return (dated[b] - dated[a]) / 86400.0 if a < b else 0.0

    silence = [dated[k + 1] - dated[k] if k + 1 < len(dated) else 0.0 for k in range(len(ts) - 1)]

    def widest(cuts):
        return max(span(a, b) for a, b in zip((0, *(c + 1 for c in cuts)), (*cuts, len(ts) - 1), strict=True))

    def silences(cuts):
        return sorted((silence[c] for c in cuts), reverse=True)

    most = min(max_parts, len(ts)) - 1
    for n in range(1, most + 1):
        fits = [c for c in combinations(range(len(ts) - 1), n) if widest(c) <= max_span_days]
        if fits:
            return list(max(fits, key=silences))
    options = list(combinations(range(len(ts) - 1), most))
    return list(min(options, key=lambda c: (widest(c), [-s for s in silences(c)])))


def _times(rng, n):
    """Sorted times on a coarse grid (many equal silences and equal times), some undated last."""
    step = rng.choice([1, 3, 6, 12])  # hours
    dated = sorted(T0 + timedelta(hours=step * rng.randint(0, 24 * 60 // step)) for _ in range(n))
    undated = rng.choice([0, 0, 0, 1, 2, n])
    return dated[: n - min(undated, n)] + [None] * min(undated, n)


def test_the_time_split_chooses_as_weighing_every_set_of_cuts():
    rng = random.Random(7)
    for _ in range(3000):
        n = rng.randint(1, 11)
        ts = _times(rng, n)
        limit = rng.choice([0.0, 1.0, 2.5, 6.0, 14.0, 30.0, 90.0, -1.0])
        parts = rng.randint(1, 5)
        assert _time_cuts(ts, limit, parts) == _reference_time_cuts(ts, limit, parts), (ts, limit, parts)


@pytest.mark.parametrize("parts", [2, 3])
def test_an_even_conversation_is_still_cut_where_the_widest_part_is_shortest(parts):
    ts = [T0 + timedelta(days=6 * d) for d in range(8)]
    assert _time_cuts(ts, 14.0, parts) == _reference_time_cuts(ts, 14.0, parts)
