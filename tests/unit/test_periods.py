"""The period a query names (``core/retrieval/periods.py``): the forms a date takes with its year, in English
and Chinese, "before" and "after" a date, and the dates that name no period."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from mnemis_integrations.core.retrieval.periods import Period, named_period


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("Where did Joanna travel to in July 2022?", (2022, 7, 1), (2022, 8, 1)),
        ("What did Maria start in December, 2023?", (2023, 12, 1), (2024, 1, 1)),
        ("What did Caroline do on 8 May 2023?", (2023, 5, 8), (2023, 5, 9)),
        ("What happened on the 8th of May 2023?", (2023, 5, 8), (2023, 5, 9)),
        ("What happened on May 8th, 2023?", (2023, 5, 8), (2023, 5, 9)),
        ("the Sept. 2022 trip", (2022, 9, 1), (2022, 10, 1)),
        ("Which tournament did Nate win in the beginning of November 2022?", (2022, 11, 1), (2022, 12, 1)),
        ("What did they do in 2021?", (2021, 1, 1), (2022, 1, 1)),
        ("2022年7月我们去了哪里？", (2022, 7, 1), (2022, 8, 1)),
        ("2023年5月8号做了什么？", (2023, 5, 8), (2023, 5, 9)),
        ("我们在2021年做了什么？", (2021, 1, 1), (2022, 1, 1)),
        ("What did Maria do the weekend before April 10, 2023?", (2023, 3, 27), (2023, 4, 10)),
        ("What did he do after 3 June 2022?", (2022, 6, 4), (2022, 6, 18)),
        ("2023年5月8日之前做了什么？", (2023, 4, 24), (2023, 5, 8)),
    ],
)
def test_a_date_with_its_year_names_its_day_month_or_year(text, start, end):
    assert named_period(text) == Period(datetime(*start), datetime(*end))


@pytest.mark.parametrize(
    "text",
    [
        "Is the fair still on May 18?",  # no year: likely a date still to come in a planning chat
        "酒席是哪天来着？我记得是18号",
        "2021年的预算是多少？",  # the budget of 2021, likely told before or after it
        "we sold 2022 tickets",
        "What did we decide in May?",
        "",
    ],
)
def test_a_date_without_its_year_or_no_calendar_date_names_no_period(text):
    assert named_period(text) is None


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("Where was John between August 11 and August 15 2023?", (2023, 8, 11), (2023, 8, 16)),
        ("What did she do from 3 to 9 May 2023?", (2023, 5, 3), (2023, 5, 10)),
        ("between the 3rd and the 9th of May 2023", (2023, 5, 3), (2023, 5, 10)),
        ("from May 3, 2023 to May 9, 2023", (2023, 5, 3), (2023, 5, 10)),
        ("between 28 December 2022 and 4 January 2023", (2022, 12, 28), (2023, 1, 5)),
        ("from 3 May 2023 to June", (2023, 5, 3), (2023, 7, 1)),
        ("from July to September 2022", (2022, 7, 1), (2022, 10, 1)),
        ("2023年8月11日到15日我们在哪？", (2023, 8, 11), (2023, 8, 16)),
        ("从2023年8月11日至9月2日做了什么？", (2023, 8, 11), (2023, 9, 3)),
    ],
)
def test_a_range_of_dates_runs_from_its_first_day_to_the_end_of_its_last(text, start, end):
    assert named_period(text) == Period(datetime(*start), datetime(*end))


def test_a_date_followed_by_what_is_not_a_date_stays_one_day():
    assert named_period("2023年8月11日到了北京") == Period(datetime(2023, 8, 11), datetime(2023, 8, 12))
    assert named_period("from 9 May 2023 to the venue") == Period(datetime(2023, 5, 9), datetime(2023, 5, 10))
    # An end before the dated one is no range: read as the dated day alone.
    assert named_period("between 20 and 9 May 2023") == Period(datetime(2023, 5, 9), datetime(2023, 5, 10))


def test_the_first_period_named_is_taken_and_a_day_no_calendar_holds_names_its_month():
    assert named_period("the 31 June 2023 deadline") == Period(datetime(2023, 6, 1), datetime(2023, 7, 1))
    assert named_period("in March 2022, not April 2022").start == datetime(2022, 3, 1)


def test_a_message_counts_by_its_own_wall_clock_time_with_the_slack_after_the_period():
    july = named_period("in July 2022")
    assert july.holds(datetime(2022, 7, 31, 23, 30, tzinfo=timezone(timedelta(hours=8))))
    assert not july.holds(datetime(2022, 8, 3))
    assert july.holds(datetime(2022, 8, 3), timedelta(days=7))
    assert not july.holds(datetime(2022, 6, 30, 23, 59))
