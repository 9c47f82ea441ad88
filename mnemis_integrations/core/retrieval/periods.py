"""The period a query names: "in July 2022", "on 8 May 2023", "before April 10, 2023", "2022年7月",
"between August 11 and August 15 2023".

Search reads it to put first what was said in that period (``fusion.period_weight``): asked "Where did
Joanna travel to in July 2022?", a memory should look at July 2022 before it weighs how alike the
words are.

A period needs its year. In a planning chat a date without one ("is it still on the 18th?", "the
May fair") is most often the date of something still to come, not the time it was talked about.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..text import MONTHS

__all__ = ["Period", "named_period"]

# "before a date" and "after a date" look this far from it ("the weekend before April 10, 2023").
AROUND = timedelta(days=14)

_SHORT = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sept", "sep", "oct", "nov", "dec")
_MONTH = r"(?P<month>" + "|".join(MONTHS) + "|" + "|".join(_SHORT) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# Longest form first: a day with its month and year, then a month and year, then a year alone.
_FORMS = (
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE),
    re.compile(r"(?P<year>(?:19|20)\d\d)\s*年\s*(?P<month>\d{1,2})\s*月(?:\s*(?P<day>\d{1,2})\s*[日号號])?"),
    # A year alone only after "in" / "在": "2022年的销售额" (the sales of 2022) is told after the year ended.
    re.compile(
        rf"\b(?:in|during|throughout)\s+{_YEAR}\b|[在于於]\s*(?P<zh_year>(?:19|20)\d\d)\s*年", re.IGNORECASE
    ),
)
# A range's other end may leave out what the dated end says: "between August 11 and August 15 2023",
# "from 3 to 9 May 2023", "2023年8月11日到15日".
_JOIN = r"(?:and|to|until|till|through|thru|-|–|—)"
_RANGE_AHEAD = re.compile(
    rf"\b(?:between|from)\s+(?:the\s+)?(?P<first>[\w.,\s]{{1,24}}?)\s*{_JOIN}\s+(?:the\s+)?$", re.IGNORECASE
)
_RANGE_OPENS = re.compile(r"(?:\b(?:between|from)\s+(?:the\s+)?|从\s*)$", re.IGNORECASE)
# "到" / "至" / "~" join a range alone; "to" / "and" only after "from" / "between".
_RANGE_BEHIND = re.compile(rf"^\s*(?:{_JOIN}\s+(?:the\s+)?|(?P<alone>[到至~～])\s*)", re.IGNORECASE)
_ZH_YEAR = rf"(?:{_YEAR}\s*年\s*)?"
_PARTIAL = (
    re.compile(rf"{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?\b", re.IGNORECASE),
    re.compile(rf"{_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?\b", re.IGNORECASE),
    re.compile(rf"{_MONTH}(?:,?\s+{_YEAR})?\b", re.IGNORECASE),
    re.compile(rf"{_ZH_YEAR}(?:(?P<month>\d{{1,2}})\s*月\s*)?(?P<day>\d{{1,2}})\s*[日号號]"),
    re.compile(rf"{_ZH_YEAR}(?P<month>\d{{1,2}})\s*月"),
    re.compile(rf"{_DAY}\b", re.IGNORECASE),
)
_BEFORE = re.compile(r"\b(?:before|prior to|until|till)\s+(?:the\s+)?$|之前$|以前$", re.IGNORECASE)
_AFTER = re.compile(r"\b(?:after|since)\s+(?:the\s+)?$", re.IGNORECASE)
_BEFORE_ZH = re.compile(r"^\s*(?:之前|以前)")
_AFTER_ZH = re.compile(r"^\s*(?:之后|以后)")


@dataclass(frozen=True)
class Period:
    """A stretch of time, ``start`` included, ``end`` not; both naive (a message's own wall-clock time is
    compared, whatever its offset)."""

    start: datetime
    end: datetime

    def holds(self, when: datetime, slack: timedelta = timedelta(0)) -> bool:
        """Is ``when`` in the period, or at most ``slack`` after it (a thing done in July is often told
        in the first days of August)?"""
        t = when.replace(tzinfo=None)
        return self.start <= t < self.end + slack


def _month_number(name: str) -> int:
    if name.isdigit():
        return int(name)
    low = name.lower().rstrip(".")
    return next(i for i, m in enumerate(MONTHS, 1) if m.startswith(low[:3]))


def _period_of(match: re.Match[str], anchor: datetime | None = None) -> Period | None:
    """The whole day, month or year the match names, its year and month taken from ``anchor`` (a range's
    dated end) where it leaves them out; None for a date no calendar holds ("31 June")."""
    parts = match.groupdict()
    year = int(parts.get("year") or parts.get("zh_year") or (anchor.year if anchor else 0))
    month, day = parts.get("month"), parts.get("day")
    try:
        if month is None and (anchor is None or day is None):
            return Period(datetime(year, 1, 1), datetime(year + 1, 1, 1))
        m = _month_number(month) if month else anchor.month
        if day is None:
            last = datetime(year, m, calendar.monthrange(year, m)[1])
            return Period(datetime(year, m, 1), last + timedelta(days=1))
        start = datetime(year, m, int(day))
    except ValueError:
        return None
    return Period(start, start + timedelta(days=1))


def _partial_period(text: str, anchor: datetime, *, whole: bool) -> Period | None:
    """The day or month a range's other end names (see ``_period_of``); ``whole``: ``text`` must be that
    date and nothing more, else it may go on."""
    for form in _PARTIAL:
        match = form.fullmatch(text.strip()) if whole else form.match(text)
        if match is not None:
            return _period_of(match, anchor)
    return None


def _range(period: Period, ahead: str, behind: str) -> Period | None:
    """The range a dated ``period`` ends or opens, from the first day to the end of the last, or None."""
    if (opened := _RANGE_AHEAD.search(ahead)) is not None:
        first = _partial_period(opened["first"], period.start, whole=True)
        if first is not None and first.start < period.start:
            return Period(first.start, period.end)
    joined = _RANGE_BEHIND.match(behind)
    if joined is not None and (joined["alone"] or _RANGE_OPENS.search(ahead)):
        last = _partial_period(behind[joined.end() :], period.start, whole=False)
        if last is not None and last.end > period.end:
            return Period(period.start, last.end)
    return None


def named_period(text: str) -> Period | None:
    """The period ``text`` names, the first one it names, or None.

    "before" a date is the fortnight up to it, "after" it the fortnight from its end; a range of dates
    runs from its first day to the end of its last.

    >>> named_period("Where did Joanna travel to in July 2022?")
    Period(start=datetime.datetime(2022, 7, 1, 0, 0), end=datetime.datetime(2022, 8, 1, 0, 0))
    >>> named_period("What did Caroline do on 8 May 2023?").start.date().isoformat()
    '2023-05-08'
    >>> p = named_period("What did Maria do the weekend before April 10, 2023?")
    >>> p.start.date().isoformat(), p.end.date().isoformat()
    ('2023-03-27', '2023-04-10')
    >>> named_period("2022年7月我们去了哪里？").end.date().isoformat()
    '2022-08-01'
    >>> p = named_period("Where was John between August 11 and August 15 2023?")
    >>> p.start.date().isoformat(), p.end.date().isoformat()
    ('2023-08-11', '2023-08-16')
    >>> named_period("Is the fair still on May 18?") is None, named_period("a budget of 2022 pounds") is None
    (True, True)
    """
    # In text order; where forms match at one place, the longest ("8 May 2023" over "May 2023").
    found = (m for form in _FORMS for m in form.finditer(text))
    for match in sorted(found, key=lambda m: (m.start(), m.start() - m.end())):
        period = _period_of(match)
        if period is None:
            continue
        ahead, behind = text[: match.start()], text[match.end() :]
        if (spanned := _range(period, ahead, behind)) is not None:
            return spanned
        if _BEFORE.search(ahead) or _BEFORE_ZH.match(behind):
            return Period(period.start - AROUND, period.start)
        if _AFTER.search(ahead) or _AFTER_ZH.match(behind):
            return Period(period.end, period.end + AROUND)
        return period
    return None
