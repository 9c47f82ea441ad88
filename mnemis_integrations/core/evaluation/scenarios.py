"""Mnemis's own scenario suite: synthetic multi-week conversations and the questions that test them.

Each bundled scenario (``mnemis_integrations/data/scenarios/*.json``) is one invented
conversation of two or three speakers whose topics interleave over several weeks, in
English or Chinese, with the traps that plain chunk-and-embed retrieval falls into: near
duplicates across unrelated threads, decisions reversed once or twice, and relations spread
over distant messages. Its questions come in three classes (SPEC section 7):

- ``vague``: "how did that hosting thing end up?";
- ``relational``: "which version of the proposal did Acme accept?";
- ``evolution``: "after the offline plan was dropped, what replaced it?", with the ids of the
  messages stating the ``current`` state and the ``superseded`` one(s).

The protocol is *ask at time*: ingest the messages in time order, incrementally, and ask
each question of a memory that holds only the messages up to its ``asked_at``
(:func:`iter_ingest_plan`). For an evolution question asked before a later reversal,
``current`` is what was current then.

:func:`load_benchmark` turns the suite into the :class:`~.datasets.Benchmark` that
:func:`~.runner.run_benchmark` scores, and :data:`EXTRA_METRICS` adds the
current-state-first metric (:func:`current_state_first`) to its report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import MnemisError
from .datasets import Benchmark, Conversation, Question

__all__ = [
    "EXTRA_METRICS",
    "LANGUAGES",
    "PROTOCOLS",
    "QUESTION_CLASSES",
    "DemoConversation",
    "IngestStep",
    "Scenario",
    "ScenarioError",
    "ScenarioMessage",
    "ScenarioQuestion",
    "current_state_first",
    "current_state_first_rate",
    "iter_ingest_plan",
    "load_benchmark",
    "load_demo_conversation",
    "load_scenario",
    "load_scenarios",
    "messages_until",
    "scenario_from_dict",
]

QUESTION_CLASSES = ("vague", "relational", "evolution")
LANGUAGES = ("en", "zh")
PROTOCOLS = ("ask_at_time", "full")

_PACKAGE = "mnemis_integrations"
_SCENARIO_DIR = ("data", "scenarios")
_DEMO_FILE = ("data", "demo_conversation.json")
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
    """One message of a scenario; ``timestamp`` is always timezone-aware."""

    id: str
    speaker: str
    text: str
    timestamp: datetime

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
class Scenario:
    """One conversation with its questions.

    ``messages`` are in time order (ties keep file order); ``questions`` in file order.
    """

    id: str
    language: str
    title: str
    messages: tuple[ScenarioMessage, ...]
    questions: tuple[ScenarioQuestion, ...]

    @cached_property
    def by_id(self) -> Mapping[str, ScenarioMessage]:
        """Message id -> message."""
        return {m.id: m for m in self.messages}

    def message(self, message_id: str) -> ScenarioMessage:
        """The message with this id; raises :class:`ScenarioError` when there is none."""
        try:
            return self.by_id[message_id]
        except KeyError:
            raise ScenarioError("no such message", source=self.id, item=message_id) from None


class IngestStep(NamedTuple):
    """One step of the ask-at-time protocol: ingest ``messages``, then ask ``questions``."""

    messages: tuple[ScenarioMessage, ...]
    questions: tuple[ScenarioQuestion, ...]


@dataclass(frozen=True)
class DemoConversation:
    """The bundled bilingual demo: messages to ingest and suggested queries."""

    messages: tuple[ScenarioMessage, ...]
    queries: tuple[str, ...]


# ---------------------------------------------------------------------------- parsing


def _parse_time(value: Any, *, source: str, item: str | None, field: str) -> datetime:
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


def _parse_messages(raw: Any, *, source: str) -> tuple[ScenarioMessage, ...]:
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
                timestamp=_parse_time(m.get("timestamp"), source=source, item=mid, field="timestamp"),
            )
        )
    # Stable: messages with equal timestamps keep their file order.
    return tuple(sorted(out, key=lambda m: m.timestamp))


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
    asked_at = _parse_time(q.get("asked_at"), source=source, item=qid, field="asked_at")
    evidence = _ids(q, "evidence", source=source, item=qid)
    current = _ids(q, "current", source=source, item=qid)
    superseded = _ids(q, "superseded", source=source, item=qid)
    if not evidence:
        raise ScenarioError("'evidence' is empty", source=source, item=qid)
    for key, ids in (("evidence", evidence), ("current", current), ("superseded", superseded)):
        for mid in ids:
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
    return ScenarioQuestion(
        id=qid,
        text=_text(q, "question", source=source, item=qid),
        category=category,
        asked_at=asked_at,
        evidence=evidence,
        current=current,
        superseded=superseded,
        answer=_text(q, "answer", source=source, item=qid),
    )


def scenario_from_dict(data: Any, *, source: str = "") -> Scenario:
    """Build and validate one :class:`Scenario` from its JSON object.

    Raises:
        ScenarioError: a field is missing or malformed, an id is duplicated or dangling,
            or a question's evidence comes after its ``asked_at``.
    """
    if not isinstance(data, Mapping):
        raise ScenarioError("a scenario must be a JSON object", source=source)
    sid = data.get("id")
    if not isinstance(sid, str) or not _ID.match(sid):
        raise ScenarioError(f"id {sid!r} must be 1-100 letters, digits, '_', '-', '.' or ':'", source=source)
    source = source or sid
    language = data.get("language")
    if language not in LANGUAGES:
        raise ScenarioError(
            f"language {language!r} is unknown; valid languages: {', '.join(LANGUAGES)}", source=source
        )
    messages = _parse_messages(data.get("messages"), source=source)
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
    )


# ---------------------------------------------------------------------------- loading


def _read_json(text: str, *, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"invalid JSON ({exc})", source=source) from exc


def _bundled(*parts: str) -> Any:
    node = resources.files(_PACKAGE)
    for part in parts:
        node = node / part
    return node


def load_scenario(path: str | Path) -> Scenario:
    """Load and validate one scenario file.

    Raises:
        ScenarioError: the file is unreadable, not JSON, or fails validation.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot read the file ({exc})", source=str(p)) from exc
    return scenario_from_dict(_read_json(text, source=str(p)), source=p.name)


def load_scenarios(path: str | Path | None = None) -> list[Scenario]:
    """Load and validate a scenario suite.

    Args:
        path: a folder of ``*.json`` scenario files, or one such file; ``None`` loads the
            suite bundled with the package (found with :mod:`importlib.resources`, so it also
            works from an installed wheel).

    Returns:
        The scenarios, sorted by id.

    Raises:
        ScenarioError: a file fails validation, the folder holds no scenario, or a scenario,
            message or question id appears in two files.

    Examples:
        >>> suite = load_scenarios()
        >>> sorted({s.language for s in suite})
        ['en', 'zh']
    """
    if path is None:
        folder = _bundled(*_SCENARIO_DIR)
        entries = sorted((e for e in folder.iterdir() if e.name.endswith(".json")), key=lambda e: e.name)
        scenarios = [
            scenario_from_dict(_read_json(e.read_text(encoding="utf-8"), source=e.name), source=e.name)
            for e in entries
        ]
        where = "the bundled suite"
    else:
        p = Path(path)
        if p.is_dir():
            scenarios = [load_scenario(f) for f in sorted(p.glob("*.json"))]
        elif p.is_file():
            scenarios = [load_scenario(p)]
        else:
            raise ScenarioError("no such file or folder", source=str(p))
        where = str(p)
    if not scenarios:
        raise ScenarioError("no scenario files (*.json) found", source=where)
    _check_unique(scenarios)
    return sorted(scenarios, key=lambda s: s.id)


def _check_unique(scenarios: Sequence[Scenario]) -> None:
    seen: set[str] = set()
    for s in scenarios:
        if s.id in seen:
            raise ScenarioError("scenario id is used by two files", item=s.id)
        seen.add(s.id)
    owner: dict[tuple[str, str], str] = {}
    for s in scenarios:
        keys = [("message", m.id) for m in s.messages] + [("question", q.id) for q in s.questions]
        for kind, key in keys:
            first = owner.setdefault((kind, key), s.id)
            if first != s.id:
                raise ScenarioError(f"{kind} id is used by two scenarios ({first!r} and {s.id!r})", item=key)


def load_demo_conversation() -> DemoConversation:
    """The bundled bilingual demo conversation (``data/demo_conversation.json``) for ``mnemis demo``.

    Raises:
        ScenarioError: the bundled file is malformed.
    """
    source = "/".join(_DEMO_FILE)
    data = _read_json(_bundled(*_DEMO_FILE).read_text(encoding="utf-8"), source=source)
    if not isinstance(data, Mapping):
        raise ScenarioError("the demo must be a JSON object", source=source)
    queries = data.get("queries")
    if (
        not isinstance(queries, list)
        or not queries
        or not all(isinstance(q, str) and q.strip() for q in queries)
    ):
        raise ScenarioError("'queries' must be a non-empty list of strings", source=source)
    return DemoConversation(
        messages=_parse_messages(data.get("messages"), source=source), queries=tuple(queries)
    )


# ---------------------------------------------------------------------------- protocol


def messages_until(scenario: Scenario, t: datetime | str) -> tuple[ScenarioMessage, ...]:
    """The messages a memory holds at time ``t``: those stamped at or before it, in time order.

    Args:
        scenario: a loaded scenario.
        t: a timezone-aware datetime or ISO-8601 string.

    Raises:
        ScenarioError: ``t`` is not a time or has no timezone.

    Examples:
        >>> s = load_scenarios()[0]
        >>> len(messages_until(s, s.messages[2].timestamp))
        3
    """
    cutoff = _parse_time(t, source=scenario.id, item=None, field="t")
    return tuple(m for m in scenario.messages if m.timestamp <= cutoff)


def iter_ingest_plan(scenario: Scenario) -> Iterator[IngestStep]:
    """Steps of the ask-at-time protocol, in time order.

    Each step holds the messages that arrived since the previous step and the questions to
    ask once they are ingested: a memory fed the steps' messages in order holds exactly
    :func:`messages_until` ``asked_at`` when each question comes up. Questions that see the
    same messages share a step (ordered by ``asked_at``, then file order); a last step with
    no questions carries any messages after the final question. Every message appears once.

    Examples:
        >>> s = load_scenarios()[0]
        >>> steps = list(iter_ingest_plan(s))
        >>> sum(len(step.messages) for step in steps) == len(s.messages)
        True
    """
    questions = sorted(scenario.questions, key=lambda q: q.asked_at)
    messages = scenario.messages
    start = 0
    i = 0
    while i < len(questions):
        cutoff = start
        while cutoff < len(messages) and messages[cutoff].timestamp <= questions[i].asked_at:
            cutoff += 1
        group = [questions[i]]
        i += 1
        # Later questions with no message in between see the same memory: same step.
        while i < len(questions) and (
            cutoff == len(messages) or messages[cutoff].timestamp > questions[i].asked_at
        ):
            group.append(questions[i])
            i += 1
        yield IngestStep(messages[start:cutoff], tuple(group))
        start = cutoff
    if start < len(messages):
        yield IngestStep(messages[start:], ())


# ---------------------------------------------------------------------------- metrics


def _sources(hit: Any) -> Iterable[str]:
    if isinstance(hit, Mapping):
        return hit.get("source_ids", ())
    return getattr(hit, "source_ids", ())


def current_state_first(
    hits: Sequence[Any],
    current_ids: Iterable[str],
    superseded_ids: Iterable[str],
    *,
    k: int | None = None,
) -> bool | None:
    """Does the current state reach the reader before the state it replaced?

    Looks for the first hit (best first) whose ``source_ids`` include any current id and the
    first that includes any superseded id.

    Args:
        hits: results best first; each has ``source_ids`` (an attribute, e.g.
            :class:`~mnemis_integrations.core.retrieval.results.MemoryHit`, or a mapping key).
        current_ids: message ids stating the current state.
        superseded_ids: message ids stating the replaced state(s).
        k: look only at the first ``k`` hits; all of them when ``None``.

    Returns:
        ``True`` when the current state's first hit ranks strictly above the superseded
        state's first hit, or the superseded state never appears; also ``True`` when both
        first appear in the *same* hit (the reader sees both together, and the engine marks
        the newer one). ``False`` when the superseded state comes first or the current state
        never appears while the superseded one does. ``None`` when neither appears.

    Examples:
        >>> hits = [{"source_ids": ["m1"]}, {"source_ids": ["m7", "m2"]}]
        >>> current_state_first(hits, ["m7"], ["m1"]), current_state_first(hits, ["m1"], ["m7"])
        (False, True)
        >>> current_state_first(hits, ["m7"], ["m2"]), current_state_first(hits, ["m9"], ["m8"])
        (True, None)
    """
    cur, old = set(current_ids), set(superseded_ids)
    first_cur = first_old = None
    for rank, hit in enumerate(hits if k is None else hits[:k]):
        ids = set(_sources(hit))
        if first_cur is None and ids & cur:
            first_cur = rank
        if first_old is None and ids & old:
            first_old = rank
        if first_cur is not None and first_old is not None:
            break
    if first_cur is None and first_old is None:
        return None
    if first_cur is None:
        return False
    return first_old is None or first_cur <= first_old


def current_state_first_rate(outcomes: Iterable[bool | None]) -> float | None:
    """Share of ``True`` among the outcomes that are not ``None``; ``None`` if there are none.

    Examples:
        >>> current_state_first_rate([True, False, None, True])
        0.6666666666666666
    """
    decided = [o for o in outcomes if o is not None]
    return sum(1 for o in decided if o) / len(decided) if decided else None


def _current_state_first_metric(question: Question, hits: Sequence[Any], conv: Conversation) -> float | None:
    current = question.extra.get("current", ())
    superseded = question.extra.get("superseded", ())
    if not current or not superseded or not question.extra.get("state_applies", True):
        return None
    outcome = current_state_first(hits, current, superseded)
    return None if outcome is None else float(outcome)


# name -> (question, hits best first, conversation) -> float | None, for run_benchmark(extra_metrics=...).
EXTRA_METRICS = {"current_state_first": _current_state_first_metric}


# ---------------------------------------------------------------------------- benchmark


def _to_question(q: ScenarioQuestion, scenario: Scenario, *, state_applies: bool) -> Question:
    return Question(
        id=q.id,
        text=q.text,
        evidence_ids=q.evidence,
        category=q.category,
        answer=q.answer,
        extra={
            "scenario": scenario.id,
            "language": scenario.language,
            "asked_at": q.asked_at.isoformat(),
            "current": q.current,
            "superseded": q.superseded,
            "state_applies": state_applies,
        },
    )


def load_benchmark(path: str | Path | None = None, *, protocol: str = "ask_at_time") -> Benchmark:
    """The scenario suite as a :class:`~.datasets.Benchmark` for :func:`~.runner.run_benchmark`.

    Question categories are the classes (``vague``, ``relational``, ``evolution``); evidence
    stays message ids; ``Question.extra`` holds ``current``, ``superseded`` and ``asked_at``,
    which :data:`EXTRA_METRICS` reads.

    Args:
        path: as for :func:`load_scenarios` (``None``: the bundled suite).
        protocol: ``"ask_at_time"`` (default) emits one conversation per ingest step, named
            ``"<scenario>@<step>"`` and holding every message up to that step, so a runner that
            ingests a conversation whole still asks each question of a memory holding only the
            messages up to ``asked_at`` (at the price of re-ingesting each prefix).
            ``"full"`` emits one conversation per scenario with every message; questions asked
            before the last message then see later messages, so their current-state metric is
            left out (``None``).

    Raises:
        ScenarioError: the data fails validation, or ``protocol`` is unknown.
    """
    if protocol not in PROTOCOLS:
        raise ScenarioError(f"protocol {protocol!r} is unknown; valid protocols: {', '.join(PROTOCOLS)}")
    scenarios = load_scenarios(path)
    conversations: list[Conversation] = []
    for s in scenarios:
        turn_texts = {m.id: m.text for m in s.messages}
        if protocol == "full":
            last = s.messages[-1].timestamp
            conversations.append(
                Conversation(
                    id=s.id,
                    messages=[m.to_dict() for m in s.messages],
                    questions=[_to_question(q, s, state_applies=q.asked_at >= last) for q in s.questions],
                    turn_texts=turn_texts,
                )
            )
            continue
        held: list[ScenarioMessage] = []
        for n, step in enumerate(iter_ingest_plan(s), start=1):
            held.extend(step.messages)
            if not step.questions:
                continue
            conversations.append(
                Conversation(
                    id=f"{s.id}@{n:02d}",
                    messages=[m.to_dict() for m in held],
                    questions=[_to_question(q, s, state_applies=True) for q in step.questions],
                    turn_texts={m.id: turn_texts[m.id] for m in held},
                )
            )
    return Benchmark(
        name="scenarios",
        conversations=conversations,
        category_names={c: c for c in QUESTION_CLASSES},
        source=str(path) if path is not None else "bundled: mnemis_integrations/data/scenarios",
    )
