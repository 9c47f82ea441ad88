"""The scenario file format: plain data classes and the parser that validates one file.

A scenario file is one JSON object::

    {"id": "atlas", "language": "en", "title": "...",
     "split": "tune",                       # optional: "tune" (default) or "holdout"
     "messages": [{"id", "speaker", "text", "timestamp", "topic"?}, ...],
     "questions": [{"id", "question", "class", "asked_at", "evidence",
                    "current"?, "superseded"?, "answer"}, ...],
     "supersessions": [{"new": id, "old": [ids], "kind": "reversal"}, ...]}   # optional

``topic`` (a message's annotated topic) and ``supersessions`` (every place where a later
message replaces what earlier ones stated) are annotations of the conversation itself, used
by the structure metrics (:mod:`.structure`); a file without them still runs every retrieval
metric. :mod:`.scenarios` loads files and folders and turns them into benchmarks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from ..errors import MnemisError

__all__ = [
    "LANGUAGES",
    "QUESTION_CLASSES",
    "SPLITS",
    "SUPERSESSION_KINDS",
    "Scenario",
    "ScenarioError",
    "ScenarioMessage",
    "ScenarioQuestion",
    "Supersession",
    "parse_messages",
    "parse_supersessions",
    "parse_time",
    "scenario_from_dict",
]

QUESTION_CLASSES = ("vague", "relational", "evolution")
LANGUAGES = ("en", "zh")
SPLITS = ("tune", "holdout")
SUPERSESSION_KINDS = ("reversal", "correction", "gradual", "cancellation", "second_change")
# Scenario ids become namespaces ("<id>@<step>"), so they keep to the namespace alphabet.
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


class ScenarioError(MnemisError, ValueError):
    """A scenario file is malformed or fails validation.

    Attributes:
        source: the file or scenario the problem was found in.
        item: the offending message or question id, when there is one.
        reason: what is wrong.
    """

    def __init__(self, reason: str, *, source: str = "", item: str | None = None):
        where = source or "scenario"
        if item is not None:
            where += f", {item!r}"
        super().__init__(f"{where}: {reason}")
        self.source = source
        self.item = item
        self.reason = reason


@dataclass(frozen=True)
class ScenarioMessage:
    """One message of a scenario; ``timestamp`` is always timezone-aware.

    ``topic`` is the annotated topic tag, when the file has one; systems never see it.
    """

    id: str
    speaker: str
    text: str
    timestamp: datetime
    topic: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``{"id", "speaker", "text", "timestamp"}`` dict that systems ingest (timestamp as datetime)."""
        return {"id": self.id, "speaker": self.speaker, "text": self.text, "timestamp": self.timestamp}


@dataclass(frozen=True)
class ScenarioQuestion:
    """One question, asked at ``asked_at`` of a memory holding the messages up to then.

    Attributes:
        id: unique across the suite.
        text: the question as a user would ask it (paraphrased, not copied from the evidence).
        category: its class, one of :data:`QUESTION_CLASSES` (``"class"`` in the files).
        asked_at: when it is asked; every id below names a message at or before this time.
        evidence: ids of the messages needed to answer it.
        current: ids of the messages stating the state current at ``asked_at`` (always set
            for evolution questions; a subset of ``evidence``).
        superseded: ids of the messages stating the replaced state(s) (always set for
            evolution questions; a subset of ``evidence``, all older than ``current``).
        answer: a short gold answer.
    """

    id: str
    text: str
    category: str
    asked_at: datetime
    evidence: tuple[str, ...]
    current: tuple[str, ...]
    superseded: tuple[str, ...]
    answer: str


@dataclass(frozen=True)
class Supersession:
    """An annotated change: message ``new`` replaces what the ``old`` messages stated.

    ``kind`` is one of :data:`SUPERSESSION_KINDS`; every ``old`` message comes before ``new``.
    """

    new: str
    old: tuple[str, ...]
    kind: str


@dataclass(frozen=True)
class Scenario:
    """One conversation with its questions and annotations.

    ``messages`` are in time order (ties keep file order); ``questions`` in file order.
    ``supersessions`` is ``None`` when the file has no ``supersessions`` key (unannotated),
    and a possibly empty tuple when it has one. ``source`` names the file it came from.
    """

    id: str
    language: str
    title: str
    messages: tuple[ScenarioMessage, ...]
    questions: tuple[ScenarioQuestion, ...]
    split: str = "tune"
    supersessions: tuple[Supersession, ...] | None = None
    source: str = field(default="", compare=False)

    @cached_property
    def by_id(self) -> Mapping[str, ScenarioMessage]:
        """Message id -> message."""
        return {m.id: m for m in self.messages}

    @property
    def topics(self) -> dict[str, str]:
        """Message id -> annotated topic, for the messages that have one."""
        return {m.id: m.topic for m in self.messages if m.topic is not None}

    def message(self, message_id: str) -> ScenarioMessage:
        """The message with this id; raises :class:`ScenarioError` when there is none."""
        try:
            return self.by_id[message_id]
        except KeyError:
            raise ScenarioError("no such message", source=self.id, item=message_id) from None


# ---------------------------------------------------------------------------- fields


def parse_time(value: Any, *, source: str, item: str | None, field: str) -> datetime:
    """A timezone-aware datetime from a datetime or an ISO-8601 string (``Z`` accepted)."""
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            ts = datetime.fromisoformat(text)
        except ValueError:
            raise ScenarioError(
                f"{field} {value!r} is not an ISO-8601 time", source=source, item=item
            ) from None
    else:
        raise ScenarioError(f"{field} must be an ISO-8601 string, got {value!r}", source=source, item=item)
    if ts.tzinfo is None or ts.utcoffset() is None:
        raise ScenarioError(f"{field} {value!r} has no timezone", source=source, item=item)
    return ts


def _text(d: Mapping[str, Any], key: str, *, source: str, item: str | None) -> str:
    value = d.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(f"{key!r} must be a non-empty string", source=source, item=item)
    return value


def _ids(d: Mapping[str, Any], key: str, *, source: str, item: str) -> tuple[str, ...]:
    value = d.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ScenarioError(f"{key!r} must be a list of message ids", source=source, item=item)
    if len(set(value)) != len(value):
        raise ScenarioError(f"{key!r} repeats an id", source=source, item=item)
    return tuple(value)


def _topic(m: Mapping[str, Any], *, source: str, item: str) -> str | None:
    if "topic" not in m:
        return None
    return _text(m, "topic", source=source, item=item).strip()


def parse_messages(raw: Any, *, source: str) -> tuple[ScenarioMessage, ...]:
    """Validate a ``messages`` list; returns the messages in time order (ties keep file order)."""
    if not isinstance(raw, list) or not raw:
        raise ScenarioError("'messages' must be a non-empty list", source=source)
    out: list[ScenarioMessage] = []
    seen: set[str] = set()
    for i, m in enumerate(raw):
        if not isinstance(m, Mapping):
            raise ScenarioError(f"message #{i} is not an object", source=source)
        mid = _text(m, "id", source=source, item=f"message #{i}")
        if mid in seen:
            raise ScenarioError("duplicate message id", source=source, item=mid)
        seen.add(mid)
        out.append(
            ScenarioMessage(
                id=mid,
                speaker=_text(m, "speaker", source=source, item=mid),
                text=_text(m, "text", source=source, item=mid),
                timestamp=parse_time(m.get("timestamp"), source=source, item=mid, field="timestamp"),
                topic=_topic(m, source=source, item=mid),
            )
        )
    # Stable: messages with equal timestamps keep their file order.
    return tuple(sorted(out, key=lambda m: m.timestamp))


# ---------------------------------------------------------------------------- questions


def _check_question_ids(
    qid: str,
    asked_at: datetime,
    ids: Mapping[str, tuple[str, ...]],
    by_id: Mapping[str, ScenarioMessage],
    source: str,
) -> None:
    for key, values in ids.items():
        for mid in values:
            msg = by_id.get(mid)
            if msg is None:
                raise ScenarioError(
                    f"{key} names message {mid!r}, which does not exist", source=source, item=qid
                )
            if msg.timestamp > asked_at:
                raise ScenarioError(
                    f"{key} message {mid!r} ({msg.timestamp.isoformat()}) is after asked_at "
                    f"({asked_at.isoformat()})",
                    source=source,
                    item=qid,
                )


def _check_states(
    qid: str,
    category: str,
    ids: Mapping[str, tuple[str, ...]],
    by_id: Mapping[str, ScenarioMessage],
    source: str,
) -> None:
    evidence, current, superseded = ids["evidence"], ids["current"], ids["superseded"]
    if category == "evolution" and not (current and superseded):
        raise ScenarioError(
            "an evolution question needs non-empty 'current' and 'superseded'", source=source, item=qid
        )
    if set(current) & set(superseded):
        raise ScenarioError("a message is both current and superseded", source=source, item=qid)
    if not set(current) | set(superseded) <= set(evidence):
        raise ScenarioError(
            "'current' and 'superseded' ids must also be in 'evidence'", source=source, item=qid
        )
    if current and superseded:
        newest_old = max(by_id[s].timestamp for s in superseded)
        oldest_new = min(by_id[c].timestamp for c in current)
        if newest_old >= oldest_new:
            raise ScenarioError(
                "every 'superseded' message must be older than every 'current' one", source=source, item=qid
            )


def _parse_question(q: Any, i: int, by_id: Mapping[str, ScenarioMessage], *, source: str) -> ScenarioQuestion:
    if not isinstance(q, Mapping):
        raise ScenarioError(f"question #{i} is not an object", source=source)
    qid = _text(q, "id", source=source, item=f"question #{i}")
    category = q.get("class")
    if category not in QUESTION_CLASSES:
        raise ScenarioError(
            f"class {category!r} is unknown; valid classes: {', '.join(QUESTION_CLASSES)}",
            source=source,
            item=qid,
        )
    asked_at = parse_time(q.get("asked_at"), source=source, item=qid, field="asked_at")
    ids = {key: _ids(q, key, source=source, item=qid) for key in ("evidence", "current", "superseded")}
    if not ids["evidence"]:
        raise ScenarioError("'evidence' is empty", source=source, item=qid)
    _check_question_ids(qid, asked_at, ids, by_id, source)
    _check_states(qid, category, ids, by_id, source)
    return ScenarioQuestion(
        id=qid,
        text=_text(q, "question", source=source, item=qid),
        category=category,
        asked_at=asked_at,
        evidence=ids["evidence"],
        current=ids["current"],
        superseded=ids["superseded"],
        answer=_text(q, "answer", source=source, item=qid),
    )


# ---------------------------------------------------------------------------- annotations


def _parse_supersession(raw: Any, i: int, order: Mapping[str, int], *, source: str) -> Supersession:
    item = f"supersession #{i}"
    if not isinstance(raw, Mapping):
        raise ScenarioError("is not an object", source=source, item=item)
    new = _text(raw, "new", source=source, item=item)
    old = _ids(raw, "old", source=source, item=item)
    kind = raw.get("kind")
    if kind not in SUPERSESSION_KINDS:
        raise ScenarioError(
            f"kind {kind!r} is unknown; valid kinds: {', '.join(SUPERSESSION_KINDS)}",
            source=source,
            item=item,
        )
    if not old:
        raise ScenarioError("'old' is empty", source=source, item=item)
    for mid in (new, *old):
        if mid not in order:
            raise ScenarioError(f"names message {mid!r}, which does not exist", source=source, item=item)
    for mid in old:
        if order[mid] >= order[new]:
            raise ScenarioError(
                f"old message {mid!r} does not come before new message {new!r}", source=source, item=item
            )
    return Supersession(new=new, old=old, kind=kind)


def _parse_supersessions(
    data: Mapping[str, Any], messages: tuple[ScenarioMessage, ...], *, source: str
) -> tuple[Supersession, ...] | None:
    if "supersessions" not in data:
        return None
    order = {m.id: n for n, m in enumerate(messages)}
    return parse_supersessions(data["supersessions"], order, source=source)


def parse_supersessions(raw: Any, order: Mapping[str, int], *, source: str) -> tuple[Supersession, ...]:
    """A list of supersessions (a scenario file's ``supersessions``, or another annotation of the
    same messages), checked: each names a new message and older ones among ``order`` (message id ->
    its place in the conversation), and none appears twice.

    Raises:
        ScenarioError: not a list, a malformed entry, an unknown or misordered message, a duplicate.
    """
    if not isinstance(raw, list):
        raise ScenarioError("'supersessions' must be a list", source=source)
    out = tuple(_parse_supersession(r, i, order, source=source) for i, r in enumerate(raw))
    seen: set[tuple[str, frozenset[str]]] = set()
    for i, s in enumerate(out):
        key = (s.new, frozenset(s.old))
        if key in seen:
            raise ScenarioError("duplicate supersession", source=source, item=f"supersession #{i}")
        seen.add(key)
    return out


def _parse_split(data: Mapping[str, Any], *, source: str) -> str:
    split = data.get("split", "tune")
    if split not in SPLITS:
        raise ScenarioError(f"split {split!r} is unknown; valid splits: {', '.join(SPLITS)}", source=source)
    return split


# ---------------------------------------------------------------------------- scenario


def scenario_from_dict(data: Any, *, source: str = "") -> Scenario:
    """Build and validate one :class:`Scenario` from its JSON object.

    Raises:
        ScenarioError: a field is missing or malformed, an id is duplicated or dangling,
            a question's evidence comes after its ``asked_at``, or an annotation is invalid
            (an unknown split or supersession kind, a supersession naming a missing message
            or an ``old`` message not before its ``new`` one, an empty topic).
    """
    if not isinstance(data, Mapping):
        raise ScenarioError("a scenario must be a JSON object", source=source)
    sid = data.get("id")
    if not isinstance(sid, str) or not _ID.match(sid):
        raise ScenarioError(f"id {sid!r} must be 1-100 letters, digits, '_', '-', '.' or ':'", source=source)
    file_name = source
    source = source or sid
    language = data.get("language")
    if language not in LANGUAGES:
        raise ScenarioError(
            f"language {language!r} is unknown; valid languages: {', '.join(LANGUAGES)}", source=source
        )
    messages = parse_messages(data.get("messages"), source=source)
    by_id = {m.id: m for m in messages}
    raw_questions = data.get("questions")
    if not isinstance(raw_questions, list):
        raise ScenarioError("'questions' must be a list", source=source)
    questions = tuple(_parse_question(q, i, by_id, source=source) for i, q in enumerate(raw_questions))
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise ScenarioError("duplicate question id", source=source, item=q.id)
        seen.add(q.id)
    return Scenario(
        id=sid,
        language=language,
        title=_text(data, "title", source=source, item=None),
        messages=messages,
        questions=questions,
        split=_parse_split(data, source=source),
        supersessions=_parse_supersessions(data, messages, source=source),
        source=file_name or sid,
    )
