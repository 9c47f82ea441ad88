"""Benchmark data as plain objects: conversations of messages plus questions with evidence.

The runner only sees :class:`Benchmark`, :class:`Conversation` and :class:`Question`, so any
suite that can produce them (LoCoMo here, our own scenarios in ``scenarios.py``) is scored by
the same code. LoCoMo is read from a caller-supplied path: its CC BY-NC licence keeps it out
of this repository.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..core.text import MONTHS
from ..errors import ConfigError

__all__ = [
    "LOCOMO_CATEGORIES",
    "Benchmark",
    "Conversation",
    "EvidenceStats",
    "Question",
    "Session",
    "core_message",
    "format_session_date",
    "load_locomo",
    "normalise_evidence",
    "parse_locomo_datetime",
]

# LoCoMo's numeric ids; the paper lists them in another order (see /work/shared/data/SOURCES.md).
LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

_MONTHS = MONTHS


@dataclass(frozen=True)
class Question:
    """One question to ask a system, with the message ids that answer it.

    Attributes:
        id: unique within the benchmark.
        text: the question as asked.
        evidence_ids: message ids that hold the answer, already normalised; may be empty,
            in which case the question is counted but left out of the scores.
        category: a LoCoMo id (``int``) or a free label (``str``) from another suite.
        answer: the gold answer, for reports only.
        extra: suite-specific fields that extra metrics may read (e.g. the id of the
            message holding the current state of a fact).
    """

    id: str
    text: str
    evidence_ids: tuple[str, ...]
    category: int | str
    answer: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Session:
    """One dated session of a conversation: its index, start time and message ids, in order."""

    index: int
    start: datetime
    message_ids: tuple[str, ...]


CORE_MESSAGE_KEYS = ("id", "speaker", "text", "timestamp")


def core_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a :class:`Conversation` message that a memory ingests (the turn baselines'
    ``session`` keys left out).

    >>> core_message({"id": "D1:1", "speaker": "ann", "text": "hi", "timestamp": None, "session": 1})
    {'id': 'D1:1', 'speaker': 'ann', 'text': 'hi', 'timestamp': None}
    """
    return {k: message[k] for k in CORE_MESSAGE_KEYS if k in message}


@dataclass
class Conversation:
    """Messages to ingest into one namespace, and the questions asked about them.

    Attributes:
        id: used as the namespace.
        messages: ``{"id", "speaker", "text", "timestamp"}`` dicts in order, plus the optional
            ``"session"`` (int) and ``"session_date"`` (e.g. "8 May 2023") keys that the
            turn baselines use for their date prefix and chunk windows. Systems that take
            only the four core keys should drop the others.
        questions: the questions, in dataset order.
        sessions: the dated sessions, in order.
        turn_texts: message id -> the raw turn text that evidence matching looks for
            (for LoCoMo, the ``text`` field without the image caption).
    """

    id: str
    messages: list[dict[str, Any]]
    questions: list[Question]
    sessions: list[Session] = field(default_factory=list)
    turn_texts: dict[str, str] = field(default_factory=dict)


@dataclass
class EvidenceStats:
    """How many evidence strings needed repair while loading.

    Attributes:
        normalised: ids rewritten into canonical form ("D:11:26" -> "D11:26", "D30:05" -> "D30:5").
        split: strings that held several ids ("D8:6; D9:17").
        dropped_malformed: empty or unparseable ids ("D").
        dropped_dangling: well-formed ids of turns that do not exist.
        questions_without_evidence: questions left with no valid evidence id.
        examples: ``"conv: raw -> result"`` lines, one per repair, for the report.
    """

    normalised: int = 0
    split: int = 0
    dropped_malformed: int = 0
    dropped_dangling: int = 0
    questions_without_evidence: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        return self.dropped_malformed + self.dropped_dangling

    def add(self, other: EvidenceStats) -> None:
        self.normalised += other.normalised
        self.split += other.split
        self.dropped_malformed += other.dropped_malformed
        self.dropped_dangling += other.dropped_dangling
        self.questions_without_evidence += other.questions_without_evidence
        self.examples.extend(other.examples)

    def to_dict(self) -> dict[str, Any]:
        return {
            "normalised": self.normalised,
            "split": self.split,
            "dropped": self.dropped,
            "dropped_malformed": self.dropped_malformed,
            "dropped_dangling": self.dropped_dangling,
            "questions_without_evidence": self.questions_without_evidence,
            "examples": list(self.examples),
        }


@dataclass
class Benchmark:
    """A named suite: conversations plus how its categories are reported.

    Attributes:
        name: e.g. "locomo".
        conversations: each one is ingested into its own namespace.
        category_names: maps category values to display names; values not listed are shown as-is.
        exclude_from_overall: categories reported apart and kept out of "overall"
            (LoCoMo's adversarial category 5, whose questions have no true answer).
        evidence: repair counts from loading.
        source: where the data came from (a path), for the report.
        stream: feed each conversation to a system one message per ingest call, in order,
            asking each question once the stream reaches the ``asked_at`` in its ``extra``
            (see :mod:`.streaming`); otherwise a conversation is ingested whole, then asked.
    """

    name: str
    conversations: list[Conversation]
    category_names: dict[int | str, str] = field(default_factory=dict)
    exclude_from_overall: frozenset[int | str] = frozenset()
    evidence: EvidenceStats = field(default_factory=EvidenceStats)
    source: str = ""
    stream: bool = False

    def category_label(self, category: int | str) -> str:
        return self.category_names.get(category, str(category))

    @property
    def n_messages(self) -> int:
        return sum(len(c.messages) for c in self.conversations)

    @property
    def n_questions(self) -> int:
        return sum(len(c.questions) for c in self.conversations)


_EVIDENCE_ID = re.compile(r"^D:?(\d+):(\d+)$")
_EVIDENCE_SEP = re.compile(r"[;,\s]+")


def normalise_evidence(
    raw: Iterable[str], valid_ids: set[str] | frozenset[str], *, where: str = ""
) -> tuple[tuple[str, ...], EvidenceStats]:
    """Repair a LoCoMo evidence list into existing, canonical dialogue ids.

    Strings holding several ids are split; ids are rewritten to ``D<session>:<turn>`` with
    no leading zeros; empty, unparseable and dangling ids are dropped; duplicates are
    removed keeping the first.

    Args:
        raw: the ``evidence`` field of one QA.
        valid_ids: every ``dia_id`` of the conversation.
        where: a label (conversation id) put in front of each example line.

    Returns:
        The repaired ids in order, and the repairs made (``questions_without_evidence``
        is left at 0: the caller knows whether the question had evidence to begin with).

    Examples:
        >>> ids, st = normalise_evidence(["D8:6; D9:17", "D:11:26", "D30:05", "D", "D99:1"],
        ...                              {"D8:6", "D9:17", "D11:26", "D30:5"})
        >>> ids
        ('D8:6', 'D9:17', 'D11:26', 'D30:5')
        >>> (st.split, st.normalised, st.dropped_malformed, st.dropped_dangling)
        (1, 2, 1, 1)
    """
    stats = EvidenceStats()
    out: list[str] = []
    prefix = f"{where}: " if where else ""
    for item in raw:
        text = str(item).strip()
        parts = [p for p in _EVIDENCE_SEP.split(text) if p]
        if len(parts) > 1:
            stats.split += 1
            stats.examples.append(f"{prefix}split {text!r} -> {parts}")
        if not parts:
            parts = [""]
        for part in parts:
            m = _EVIDENCE_ID.match(part)
            if m is None:
                stats.dropped_malformed += 1
                stats.examples.append(f"{prefix}dropped malformed {part!r}")
                continue
            canonical = f"D{int(m.group(1))}:{int(m.group(2))}"
            if canonical != part:
                stats.normalised += 1
                stats.examples.append(f"{prefix}normalised {part!r} -> {canonical!r}")
            if canonical not in valid_ids:
                stats.dropped_dangling += 1
                stats.examples.append(f"{prefix}dropped dangling {canonical!r}")
                continue
            if canonical not in out:
                out.append(canonical)
    return tuple(out), stats


_LOCOMO_DT = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.IGNORECASE
)


def parse_locomo_datetime(text: str) -> datetime:
    """Parse LoCoMo's session stamp, independent of the process locale.

    Examples:
        >>> parse_locomo_datetime("1:56 pm on 8 May, 2023")
        datetime.datetime(2023, 5, 8, 13, 56)
        >>> parse_locomo_datetime("12:09 am on 1 February, 2023")
        datetime.datetime(2023, 2, 1, 0, 9)
    """
    m = _LOCOMO_DT.match(text)
    if m is None:
        raise ConfigError(
            f"cannot parse LoCoMo session date {text!r} (expected e.g. '1:56 pm on 8 May, 2023')"
        )
    hour, minute, ampm, day, month, year = m.groups()
    month_l = month.lower()
    # Accept both "September" and "Sept"/"Sep".
    matches = [i for i, name in enumerate(_MONTHS) if name.startswith(month_l[:3])]
    if not matches:
        raise ConfigError(f"unknown month {month!r} in LoCoMo session date {text!r}")
    # A 12-hour clock: "13:05 pm" or "0:30 am" would otherwise be read as some other time.
    if not 1 <= int(hour) <= 12:
        raise ConfigError(f"hour {hour} is not on a 12-hour clock in LoCoMo session date {text!r}")
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    try:
        return datetime(int(year), matches[0] + 1, int(day), h, int(minute))
    except ValueError as exc:
        raise ConfigError(f"LoCoMo session date {text!r} is no calendar time ({exc})") from None


def format_session_date(dt: datetime) -> str:
    """The date prefix the turn baselines put on each unit.

    Examples:
        >>> format_session_date(datetime(2023, 5, 8, 13, 56))
        '8 May 2023'
    """
    return f"{dt.day} {_MONTHS[dt.month - 1].capitalize()} {dt.year}"


def _session_numbers(conv: dict[str, Any]) -> list[int]:
    # Some samples carry date stamps for sessions that hold no turns (conv-26 has 35 stamps, 19
    # sessions); only keys naming a turn list count.
    nums = []
    for key, value in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(value, list) and value:
            nums.append(int(m.group(1)))
    return sorted(nums)


def _field(d: Any, key: str, where: str) -> Any:
    """``d[key]``, or a :class:`ConfigError` naming the field and where it is missing."""
    if not isinstance(d, Mapping) or key not in d:
        raise ConfigError(f"{where}: LoCoMo field {key!r} is missing")
    return d[key]


def _category(qa: Mapping[str, Any], where: str) -> int:
    value = _field(qa, "category", where)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: LoCoMo category {value!r} is not a number") from None


def _read_sample(sample: dict[str, Any]) -> tuple[Conversation, EvidenceStats]:
    conv_id = str(sample["sample_id"])
    conv = _field(sample, "conversation", conv_id)
    messages: list[dict[str, Any]] = []
    sessions: list[Session] = []
    turn_texts: dict[str, str] = {}
    for n in _session_numbers(conv):
        start = parse_locomo_datetime(_field(conv, f"session_{n}_date_time", conv_id))
        date = format_session_date(start)
        ids = []
        for i, turn in enumerate(conv[f"session_{n}"]):
            where = f"{conv_id} session_{n} turn #{i}"
            dia_id = str(_field(turn, "dia_id", where))
            speaker = str(_field(turn, "speaker", where))
            text = str(turn.get("text", ""))
            caption = turn.get("blip_caption")
            full = text + (f" [shares an image: {caption}]" if caption else "")
            messages.append(
                {
                    "id": dia_id,
                    "speaker": speaker,
                    "text": full,
                    # One minute per turn keeps order and the gaps between sessions.
                    "timestamp": start + timedelta(minutes=i),
                    "session": n,
                    "session_date": date,
                }
            )
            turn_texts[dia_id] = text
            ids.append(dia_id)
        sessions.append(Session(index=n, start=start, message_ids=tuple(ids)))

    stats = EvidenceStats()
    valid = frozenset(turn_texts)
    questions = []
    for i, qa in enumerate(sample.get("qa", [])):
        where = f"{conv_id} qa #{i}"
        text = str(_field(qa, "question", where))
        category = _category(qa, where)
        evidence, st = normalise_evidence(qa.get("evidence") or [], valid, where=conv_id)
        if not evidence:
            st.questions_without_evidence += 1
        stats.add(st)
        answer = qa.get("answer", qa.get("adversarial_answer"))
        questions.append(
            Question(
                id=f"{conv_id}:q{i}",
                text=text,
                evidence_ids=evidence,
                category=category,
                answer=None if answer is None else str(answer),
            )
        )
    return Conversation(conv_id, messages, questions, sessions, turn_texts), stats


def load_locomo(path: str | Path, conversations: Sequence[str] | None = None) -> Benchmark:
    """Read a LoCoMo JSON file (a list of samples) into a :class:`Benchmark`.

    Args:
        path: the ``locomo10.json``-shaped file; never bundled with this package.
        conversations: ``sample_id`` values to keep, in the order given; all when ``None``.

    Returns:
        The benchmark, with category 5 (adversarial) marked as reported apart.

    Raises:
        ConfigError: the file is not a JSON list of samples, a sample lacks a field the reader
            needs, an asked-for conversation is missing, or a session date cannot be parsed.
    """
    with open(path, encoding="utf-8") as f:
        try:
            samples = json.load(f)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not JSON ({exc})") from None
    if not isinstance(samples, list):
        raise ConfigError(f"{path} must hold a list of LoCoMo samples, not a {type(samples).__name__}")
    by_id = {str(_field(s, "sample_id", f"{path}, sample #{i}")): s for i, s in enumerate(samples)}
    wanted = list(conversations) if conversations else list(by_id)
    missing = [c for c in wanted if c not in by_id]
    if missing:
        raise ConfigError(f"conversations {missing} not in {path}; available: {', '.join(by_id)}")
    stats = EvidenceStats()
    convs = []
    for cid in wanted:
        conv, st = _read_sample(by_id[cid])
        convs.append(conv)
        stats.add(st)
    return Benchmark(
        name="locomo",
        conversations=convs,
        category_names=dict(LOCOMO_CATEGORIES),
        exclude_from_overall=frozenset({5}),
        evidence=stats,
        source=str(path),
    )
