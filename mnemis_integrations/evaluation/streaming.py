"""The incremental protocol's order of events: one message at a time, questions as time comes.

An agent fills its memory as the conversation goes, one message per call, and asks its
questions in between. :func:`stream_plan` lays that out for one conversation: every message
becomes its own ``ingest`` event, in the conversation's (time) order, and each question is
asked once every message stamped at or before its ``asked_at`` is in and no later one is.
The runner (:func:`~.runner.run_benchmark` on a benchmark with ``stream=True``) follows it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from itertools import pairwise
from typing import Any, Literal

from ..errors import ConfigError
from .datasets import Question

__all__ = ["Event", "asked_at", "stream_plan"]

Event = tuple[Literal["ingest", "ask"], Any]


def asked_at(question: Question) -> datetime | None:
    """The time a question is asked (``extra["asked_at"]``, a datetime or ISO-8601 string), if any.

    Examples:
        >>> asked_at(Question("q", "?", ("m1",), "vague", extra={"asked_at": "2025-01-02T09:00:00+00:00"}))
        datetime.datetime(2025, 1, 2, 9, 0, tzinfo=datetime.timezone.utc)
    """
    value = question.extra.get("asked_at")
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(f"question {question.id!r}: asked_at {value!r} is not an ISO-8601 time") from None


def _check_order(messages: Sequence[dict[str, Any]]) -> None:
    stamps = [m.get("timestamp") for m in messages]
    if any(t is None for t in stamps):
        raise ConfigError("streaming needs a timestamp on every message")
    for a, b in pairwise(stamps):
        if b < a:
            raise ConfigError(f"streaming needs messages in time order ({b} comes after {a})")


def stream_plan(messages: Sequence[dict[str, Any]], questions: Sequence[Question]) -> Iterator[Event]:
    """Events for one conversation: ``("ingest", message)`` and ``("ask", question)``, in order.

    Questions are asked in ``asked_at`` order (ties and questions without a time keep their
    order; those without a time come last, after every message). A question comes before the
    first message stamped after its ``asked_at``; every message appears exactly once.

    Raises:
        ConfigError: a message has no timestamp, the messages are out of time order, or an
            ``asked_at`` is not a time.

    Examples:
        >>> from datetime import timezone
        >>> t = lambda d: datetime(2025, 1, d, tzinfo=timezone.utc)
        >>> ms = [{"id": f"m{d}", "timestamp": t(d)} for d in (1, 2, 2, 5)]
        >>> qs = [Question(f"q{d}", "?", ("m1",), "x", extra={"asked_at": t(d)}) for d in (4, 2)]
        >>> [(kind, x["id"] if kind == "ingest" else x.id) for kind, x in stream_plan(ms, qs)]
        [('ingest', 'm1'), ('ingest', 'm2'), ('ingest', 'm2'), ('ask', 'q2'), ('ask', 'q4'), ('ingest', 'm5')]
    """
    _check_order(messages)
    timed = [(asked_at(q), i, q) for i, q in enumerate(questions)]
    pending = sorted((t, i, q) for t, i, q in timed if t is not None)
    untimed = [q for t, _, q in timed if t is None]
    nxt = 0
    for m in messages:
        while nxt < len(pending) and pending[nxt][0] < m["timestamp"]:
            yield "ask", pending[nxt][2]
            nxt += 1
        yield "ingest", m
    for _, _, q in pending[nxt:]:
        yield "ask", q
    for q in untimed:
        yield "ask", q
