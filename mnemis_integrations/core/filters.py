"""The metadata filter language of ``search(..., filter=...)``: parsed once, matched per message.

The shape follows MongoDB and LangGraph's ``InMemoryStore`` (and langchain-mongodb's pre-filters):

- ``{"channel": "email"}``: equality, the same as ``{"channel": {"$eq": "email"}}``;
- ``{"k": {"$ne": v}}``, ``{"k": {"$in": [v, ...]}}``, ``{"k": {"$nin": [v, ...]}}``;
- ``{"k": {"$gt" | "$gte" | "$lt" | "$lte": x}}``: numbers compare as numbers; a ``datetime`` or an
  ISO-8601 string as a time (the stored value must then be an ISO-8601 string too, any offset,
  naive taken as UTC); any other string in code-point order;
- several keys, or several operators on one key: all must hold; ``{"$and": [f, ...]}`` and
  ``{"$or": [f, ...]}`` combine whole filters.

Types are strict: ``True`` never equals ``1`` and ``"1"`` never equals ``1`` (``1`` equals ``1.0``).
A message without the key fails every operator except ``$ne`` and ``$nin`` (as in MongoDB).
Equality on strings is exact; pass a ``datetime`` to ``$eq`` / ``$in`` to compare as a time.
Anything else (an unknown operator, a nested filter, a list where a value belongs, ``None``,
a number past a float's range, ``$and`` / ``$or`` nested over 32 deep) raises
:class:`~mnemis_integrations.errors.InvalidQueryError` before any search work.
"""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidQueryError
from .messages import iso_moment
from .text import text_cache

__all__ = ["COMPARISONS", "OPERATORS", "MetadataFilter", "all_of"]

Metadata = Mapping[str, Any]
Test = Callable[[Metadata], bool]

COMPARISONS = ("$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte")
OPERATORS = (*COMPARISONS, "$and", "$or")
_MISSING = object()
# No real filter nests ``$and`` / ``$or`` this deep; a deeper one would exhaust Python's stack while
# parsed or matched (RecursionError) instead of being refused.
_MAX_DEPTH = 32


class _Shown(reprlib.Repr):
    """Errors show a bad value shortened: a hostile one (a list nested thousands deep, a million
    items, an int of more digits than ``str`` writes) would cost a RecursionError, a ValueError or
    a message of megabytes."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = 120

    def repr_int(self, x: int, level: int) -> str:
        return f"<an int of {x.bit_length()} bits>" if x.bit_length() > 1024 else super().repr_int(x, level)


_SHOWN = _Shown()


class MetadataFilter:
    """A parsed filter: ``matches(metadata)`` for one message; ``key`` names it for caches.

    Examples:
        >>> f = MetadataFilter.parse({"channel": "email", "priority": {"$gte": 2}})
        >>> f.matches({"channel": "email", "priority": 3}), f.matches({"channel": "email", "priority": 1})
        (True, False)
        >>> MetadataFilter.parse({"day": {"$lte": "2025-03-01"}}).matches(
        ...     {"day": "2025-02-28T23:00:00-02:00"}
        ... )
        False
        >>> MetadataFilter.parse({}) is None
        True
    """

    def __init__(self, test: Test, key: str):
        self._test = test
        self.key = key

    @classmethod
    def parse(cls, spec: Any) -> MetadataFilter | None:
        """The filter ``spec`` describes; ``None`` for ``None`` or ``{}`` (no filter).

        Raises:
            InvalidQueryError: ``spec`` is not a filter of the language above.
        """
        if spec is None:
            return None
        if not isinstance(spec, Mapping):
            raise InvalidQueryError(
                f"filter must be a dict such as {{'channel': 'email'}}, not {type(spec).__name__}"
            )
        if not spec:
            return None
        return cls(_conjunction(spec), json.dumps(spec, sort_keys=True, default=_json_default))

    def matches(self, metadata: Metadata) -> bool:
        return self._test(metadata)

    def __repr__(self) -> str:
        return f"MetadataFilter({self.key})"


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):  # a filter, or a key's operators, given as another mapping type
        return dict(value)
    return {"$time": value.isoformat()}  # only datetimes are left: parsing refused everything else


def _conjunction(spec: Mapping, depth: int = 0) -> Test:
    tests = [_clause(key, value, depth) for key, value in spec.items()]
    return tests[0] if len(tests) == 1 else lambda md: all(t(md) for t in tests)


def _clause(key: Any, value: Any, depth: int) -> Test:
    if not isinstance(key, str) or not key:
        raise InvalidQueryError(f"filter keys must be non-empty strings, got {_SHOWN.repr(key)}")
    if key in ("$and", "$or"):
        if (
            not isinstance(value, (list, tuple))
            or not value
            or not all(isinstance(v, Mapping) and v for v in value)
        ):
            raise InvalidQueryError(
                f"{key} takes a non-empty list of non-empty filters, got {_SHOWN.repr(value)}"
            )
        if depth >= _MAX_DEPTH:
            raise InvalidQueryError(f"filter nests $and / $or more than {_MAX_DEPTH} deep")
        parts = [_conjunction(v, depth + 1) for v in value]
        if key == "$and":
            return lambda md: all(p(md) for p in parts)
        return lambda md: any(p(md) for p in parts)
    if key.startswith("$"):
        raise InvalidQueryError(f"unknown filter operator {key!r} at the top level; valid there: $and, $or")
    if isinstance(value, Mapping):
        if not value:
            raise InvalidQueryError(f"filter on {key!r} is an empty dict; give a value or operators")
        tests = []
        for op, arg in value.items():
            if not isinstance(op, str) or not op.startswith("$"):
                raise InvalidQueryError(
                    f"filter on {key!r} holds {_SHOWN.repr(op)}: metadata is flat, so a filter value is a "
                    f"plain value or a dict of operators ({', '.join(COMPARISONS)})"
                )
            tests.append(_comparison(key, op, arg))
        return tests[0] if len(tests) == 1 else lambda md: all(t(md) for t in tests)
    return _comparison(key, "$eq", value)


def _comparison(key: str, op: str, arg: Any) -> Test:
    if op in ("$eq", "$ne"):
        same = _equality(key, op, arg)
        if op == "$eq":
            return lambda md: same(md.get(key, _MISSING))
        return lambda md: not same(md.get(key, _MISSING))
    if op in ("$in", "$nin"):
        if not isinstance(arg, (list, tuple)):
            raise InvalidQueryError(f"{op} on {key!r} takes a list of values, got {_SHOWN.repr(arg)}")
        options = [_equality(key, op, a) for a in arg]
        if op == "$in":
            return lambda md: any(o(md.get(key, _MISSING)) for o in options)
        return lambda md: not any(o(md.get(key, _MISSING)) for o in options)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return _ordering(key, op, arg)
    raise InvalidQueryError(f"unknown filter operator {op!r} on {key!r}; valid: {', '.join(COMPARISONS)}")


def _equality(key: str, op: str, arg: Any) -> Callable[[Any], bool]:
    """``value -> bool``: whether a stored value equals ``arg``, types kept apart."""
    if isinstance(arg, bool):
        return lambda v: isinstance(v, bool) and v == arg
    if isinstance(arg, (int, float)):
        _finite(key, op, arg)
        return lambda v: _is_number(v) and v == arg
    if isinstance(arg, str):
        return lambda v: isinstance(v, str) and v == arg
    if isinstance(arg, datetime):
        moment = _aware(arg)
        return lambda v: isinstance(v, str) and _as_time(v) == moment
    raise InvalidQueryError(
        f"{op} on {key!r} compares with a str, int, float, bool or datetime, "
        f"not {type(arg).__name__} ({_SHOWN.repr(arg)})"
    )


def _ordering(key: str, op: str, arg: Any) -> Test:
    compare: Callable[[Any, Any], bool] = {
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }[op]
    if isinstance(arg, bool) or not isinstance(arg, (int, float, str, datetime)):
        raise InvalidQueryError(
            f"{op} on {key!r} compares with a number, a time or a string, not {_SHOWN.repr(arg)}"
        )
    if isinstance(arg, (int, float)):
        _finite(key, op, arg)

        def numbers(md: Metadata) -> bool:
            v = md.get(key, _MISSING)
            return _is_number(v) and compare(v, arg)

        return numbers
    moment = _aware(arg) if isinstance(arg, datetime) else iso_moment(arg)
    if moment is not None:

        def times(md: Metadata) -> bool:
            v = md.get(key, _MISSING)
            t = _as_time(v) if isinstance(v, str) else None
            return t is not None and compare(t, moment)

        return times

    def strings(md: Metadata) -> bool:
        v = md.get(key, _MISSING)
        return isinstance(v, str) and compare(v, arg)

    return strings


def _finite(key: str, op: str, arg: float) -> None:
    try:
        finite = math.isfinite(arg)
    except OverflowError:  # an int past a float's range: no stored number compares with it
        finite = False
    if not finite:
        raise InvalidQueryError(f"{op} on {key!r} needs a finite number, got {_SHOWN.repr(arg)}")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


@text_cache(maxsize=65536)
def _as_time(text: str) -> datetime | None:
    """A stored string read as a time (cached: the same values are compared query after query)."""
    return iso_moment(text)


def all_of(*specs: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """One filter that holds where every given one does (``None`` and ``{}`` are left out).

    A retriever's own filter and a per-call one combine this way: a call narrows the scope,
    it never widens it.

    >>> all_of({"channel": "email"}, None)
    {'channel': 'email'}
    >>> all_of({"channel": "email"}, {"priority": 2})
    {'$and': [{'channel': 'email'}, {'priority': 2}]}
    >>> all_of(None, {}) is None
    True

    Raises:
        InvalidQueryError: one of them is not a filter.
    """
    given = [dict(s) for s in specs if MetadataFilter.parse(s) is not None]  # a malformed one raises here
    if not given:
        return None
    return given[0] if len(given) == 1 else {"$and": given}
