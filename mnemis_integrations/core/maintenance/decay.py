"""Optional forgetting curve: relation strength fades with a half-life (SPEC section 5, "may").

Off by default (``RelationConfig.decay_half_life_days = None``). When set, the relation path
multiplies what a node gains by ``0.5 ** (age / half_life)``, its age measured in days back from
the newest event in the namespace (never from the clock, so results stay reproducible).
"""

from __future__ import annotations

from datetime import datetime

__all__ = ["age_days", "half_life_weight"]


def half_life_weight(age_days: float, half_life_days: float | None) -> float:
    """``0.5 ** (age / half_life)``; 1.0 when decay is off or the age is unknown or negative.

    >>> half_life_weight(30, 30), half_life_weight(60, 30), half_life_weight(10, None)
    (0.5, 0.25, 1.0)
    """
    if half_life_days is None or half_life_days <= 0 or age_days <= 0:
        return 1.0
    return 0.5 ** (age_days / half_life_days)


def age_days(when: datetime | None, reference: datetime | None) -> float:
    """Days from ``when`` back to ``reference``; 0 when either is unknown.

    >>> from datetime import datetime, timezone
    >>> age_days(datetime(2025, 3, 1, tzinfo=timezone.utc), datetime(2025, 3, 11, tzinfo=timezone.utc))
    10.0
    """
    if when is None or reference is None:
        return 0.0
    return (reference - when).total_seconds() / 86400.0
