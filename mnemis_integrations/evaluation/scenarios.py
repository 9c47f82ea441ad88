"""Mnemis's own scenario suite: synthetic multi-week conversations and the questions that test them.

Each scenario of the bundled suite (``benchmarks/scenarios/bundled/*.json``) is one invented
conversation of two or three speakers whose topics interleave over several weeks, in
English or Chinese, with the traps that plain chunk-and-embed retrieval falls into: near
duplicates across unrelated threads, decisions reversed once or twice, and relations spread
over distant messages. Its questions come in three classes (SPEC section 7):

- ``vague``: "how did that hosting thing end up?";
- ``relational``: "which version of the proposal did Acme accept?";
- ``evolution``: "after the offline plan was dropped, what replaced it?", with the ids of the
  messages stating the ``current`` state and the ``superseded`` one(s).

Files written apart from the engine's tuning live in ``benchmarks/scenarios/independent/``;
a file's ``split`` says whether it may be tuned on (``tune``) or only measured (``holdout``).
Both folders belong to the source repository, not to the installed package (the wheel ships
only the demo conversation): they are found under the working directory or the checkout this
package runs from, and elsewhere a suite is named by path.
The file format and its optional annotations (message topics, supersessions) are described in
:mod:`.scenario_data`.

Protocols (:data:`PROTOCOLS`): each question is asked of a memory that holds only the messages
up to its ``asked_at``. ``incremental`` keeps one memory per scenario, fed one message at a
time in time order, asking each question when the stream reaches it (the runner streams;
:func:`~.streaming.stream_plan`); ``ask_at_time`` rebuilds a memory per ingest step
(:func:`iter_ingest_plan`); ``full`` ingests everything first. For an evolution question
asked before a later reversal, ``current`` is what was current then.

:func:`load_benchmark` turns the suite into the :class:`~.datasets.Benchmark` that
:func:`~.runner.run_benchmark` scores, and :data:`EXTRA_METRICS` adds the
current-state-first metric (:func:`current_state_first`) and ties among the first five hits
(:func:`~.metrics.tied_at_top`) to its report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from .current_state import EXTRA_METRICS as STATE_METRICS
from .current_state import current_state_first, current_state_first_rate
from .datasets import Benchmark, Conversation, Question
from .metrics import TIE_METRICS
from .scenario_data import (
    LANGUAGES,
    QUESTION_CLASSES,
    SPLITS,
    SUPERSESSION_KINDS,
    Scenario,
    ScenarioError,
    ScenarioMessage,
    ScenarioQuestion,
    Supersession,
    parse_messages,
    parse_time,
    scenario_from_dict,
)

__all__ = [
    "BUNDLED_DIR",
    "EXTRA_METRICS",
    "INDEPENDENT_DIR",
    "LANGUAGES",
    "PROTOCOLS",
    "QUESTION_CLASSES",
    "SPLITS",
    "SUPERSESSION_KINDS",
    "DemoConversation",
    "IngestStep",
    "Scenario",
    "ScenarioError",
    "ScenarioMessage",
    "ScenarioQuestion",
    "Supersession",
    "benchmark_from_scenarios",
    "bundled_suite_dir",
    "current_state_first",
    "current_state_first_rate",
    "default_suite_paths",
    "iter_ingest_plan",
    "load_benchmark",
    "load_demo_conversation",
    "load_scenario",
    "load_scenarios",
    "messages_until",
    "scenario_from_dict",
    "scenario_of",
]


# name -> metric, for run_benchmark(extra_metrics=...): current state first, and ties at the top.
EXTRA_METRICS = {**STATE_METRICS, **TIE_METRICS}

PROTOCOLS = ("incremental", "ask_at_time", "full")
# The two suites, relative to the working directory or to a source checkout.
BUNDLED_DIR = Path("benchmarks", "scenarios", "bundled")
INDEPENDENT_DIR = Path("benchmarks", "scenarios", "independent")

_PACKAGE = "mnemis_integrations"
_DEMO_FILE = ("data", "demo_conversation.json")
_CHECKOUT = Path(__file__).resolve().parents[2]

PathLike = str | Path


class IngestStep(NamedTuple):
    """One step of the ask-at-time protocol: ingest ``messages``, then ask ``questions``."""

    messages: tuple[ScenarioMessage, ...]
    questions: tuple[ScenarioQuestion, ...]


@dataclass(frozen=True)
class DemoConversation:
    """The bundled bilingual demo: messages to ingest and suggested queries."""

    messages: tuple[ScenarioMessage, ...]
    queries: tuple[str, ...]


# ---------------------------------------------------------------------------- loading


def _read_json(text: str, *, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"invalid JSON ({exc})", source=source) from exc


def _package_data(*parts: str) -> Any:
    node = resources.files(_PACKAGE)
    for part in parts:
        node = node / part
    return node


def load_scenario(path: PathLike) -> Scenario:
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


def _load_path(path: PathLike) -> list[Scenario]:
    p = Path(path)
    if p.is_dir():
        found = [load_scenario(f) for f in sorted(p.glob("*.json"))]
    elif p.is_file():
        found = [load_scenario(p)]
    else:
        raise ScenarioError("no such file or folder", source=str(p))
    if not found:
        raise ScenarioError("no scenario files (*.json) found", source=str(p))
    return found


def _find_suite(folder: Path) -> Path | None:
    for root in (Path.cwd(), _CHECKOUT):
        found = root / folder
        if found.is_dir() and any(found.glob("*.json")):
            return found
    return None


def _suite_not_found(*folders: Path) -> ScenarioError:
    return ScenarioError(
        f"no scenario file found there under the working directory ({Path.cwd()}) or beside the "
        f"package ({_CHECKOUT}); the scenario suites are part of the source repository, not of the installed "
        "package: run from a checkout, or name scenario files or folders with --suite PATH "
        "(load_scenarios(PATH) in Python)",
        source=" or ".join(f.as_posix() for f in folders),
    )


def bundled_suite_dir() -> Path:
    """The bundled suite's folder, ``benchmarks/scenarios/bundled``.

    Looked for under the working directory first, then in the source checkout this package runs
    from.

    Raises:
        ScenarioError: neither holds a scenario file there (an installed package outside a
            checkout); the message says to name the suite with ``--suite``.
    """
    folder = _find_suite(BUNDLED_DIR)
    if folder is None:
        raise _suite_not_found(BUNDLED_DIR)
    return folder


def default_suite_paths() -> list[Path]:
    """What ``mnemis bench scenarios`` loads by default.

    The bundled folder ``benchmarks/scenarios/bundled``, then the independent folder
    ``benchmarks/scenarios/independent``, each where it holds a scenario file, looked for under
    the working directory first and then in the source checkout this package runs from.

    Raises:
        ScenarioError: neither folder is found (an installed package outside a checkout); the
            message says to name the suite with ``--suite``.
    """
    paths = [f for f in (_find_suite(BUNDLED_DIR), _find_suite(INDEPENDENT_DIR)) if f is not None]
    if not paths:
        raise _suite_not_found(BUNDLED_DIR, INDEPENDENT_DIR)
    return paths


def load_scenarios(path: PathLike | Sequence[PathLike | None] | None = None) -> list[Scenario]:
    """Load and validate a scenario suite from one or several places.

    Args:
        path: a folder of ``*.json`` scenario files, one such file, or a list of them (``None``
            in the list stands for the bundled suite); ``None`` loads the bundled suite
            (:func:`bundled_suite_dir`).

    Returns:
        The scenarios, sorted by id.

    Raises:
        ScenarioError: a file fails validation, a folder holds no scenario, a path does not
            exist, the bundled suite is not found, or a scenario, message or question id appears
            in two files.

    Examples:
        >>> suite = load_scenarios()
        >>> sorted({s.language for s in suite})
        ['en', 'zh']
    """
    places = list(path) if isinstance(path, (list, tuple)) else [path]
    if not places:
        raise ScenarioError("no scenario paths given")
    scenarios: list[Scenario] = []
    for place in places:
        scenarios.extend(_load_path(bundled_suite_dir() if place is None else place))
    _check_unique(scenarios)
    return sorted(scenarios, key=lambda s: s.id)


def _check_unique(scenarios: Sequence[Scenario]) -> None:
    seen: dict[str, str] = {}
    for s in scenarios:
        if s.id in seen:
            raise ScenarioError(
                f"scenario id is used by two files ({seen[s.id]!r} and {s.source!r})", item=s.id
            )
        seen[s.id] = s.source
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
    data = _read_json(_package_data(*_DEMO_FILE).read_text(encoding="utf-8"), source=source)
    if not isinstance(data, Mapping):
        raise ScenarioError("the demo must be a JSON object", source=source)
    queries = data.get("queries")
    if (
        not isinstance(queries, list)
        or not queries
        or not all(isinstance(q, str) and q.strip() for q in queries)
    ):
        raise ScenarioError("'queries' must be a non-empty list of strings", source=source)
    messages = parse_messages(data.get("messages"), source=source)
    return DemoConversation(messages=messages, queries=tuple(queries))


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
    cutoff = parse_time(t, source=scenario.id, item=None, field="t")
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
            "split": scenario.split,
            "asked_at": q.asked_at.isoformat(),
            "current": q.current,
            "superseded": q.superseded,
            "state_applies": state_applies,
        },
    )


def _whole(s: Scenario, *, early_state: bool) -> Conversation:
    last = s.messages[-1].timestamp
    return Conversation(
        id=s.id,
        messages=[m.to_dict() for m in s.messages],
        questions=[_to_question(q, s, state_applies=early_state or q.asked_at >= last) for q in s.questions],
        turn_texts={m.id: m.text for m in s.messages},
    )


_STEP_MARK = "@"  # protocol ask_at_time names each step's conversation "<scenario>@<step>"


def scenario_of(conversation_id: str) -> str:
    """The scenario an ask-at-time step's conversation belongs to; any other id unchanged.

    >>> scenario_of("indep_villa@07"), scenario_of("indep_villa"), scenario_of("a@b")
    ('indep_villa', 'indep_villa', 'a@b')
    """
    head, mark, step = conversation_id.rpartition(_STEP_MARK)
    return head if mark and step.isdigit() else conversation_id


def _steps(s: Scenario) -> Iterator[Conversation]:
    turn_texts = {m.id: m.text for m in s.messages}
    held: list[ScenarioMessage] = []
    for n, step in enumerate(iter_ingest_plan(s), start=1):
        held.extend(step.messages)
        if not step.questions:
            continue
        yield Conversation(
            id=f"{s.id}{_STEP_MARK}{n:02d}",
            messages=[m.to_dict() for m in held],
            questions=[_to_question(q, s, state_applies=True) for q in step.questions],
            turn_texts={m.id: turn_texts[m.id] for m in held},
        )


def benchmark_from_scenarios(
    scenarios: Sequence[Scenario], *, protocol: str = "ask_at_time", source: str = ""
) -> Benchmark:
    """Loaded scenarios as a :class:`~.datasets.Benchmark` under ``protocol`` (see :func:`load_benchmark`).

    Raises:
        ScenarioError: ``protocol`` is unknown.
    """
    if protocol not in PROTOCOLS:
        raise ScenarioError(f"protocol {protocol!r} is unknown; valid protocols: {', '.join(PROTOCOLS)}")
    if protocol == "ask_at_time":
        conversations = [c for s in scenarios for c in _steps(s)]
    else:
        conversations = [_whole(s, early_state=protocol == "incremental") for s in scenarios]
    return Benchmark(
        name="scenarios",
        conversations=conversations,
        category_names={c: c for c in QUESTION_CLASSES},
        source=source,
        stream=protocol == "incremental",
    )


def _describe(path: PathLike | Sequence[PathLike | None] | None) -> str:
    places = list(path) if isinstance(path, (list, tuple)) else [path]
    return ", ".join(f"bundled: {BUNDLED_DIR.as_posix()}" if p is None else str(p) for p in places)


def load_benchmark(
    path: PathLike | Sequence[PathLike | None] | None = None, *, protocol: str = "ask_at_time"
) -> Benchmark:
    """The scenario suite as a :class:`~.datasets.Benchmark` for :func:`~.runner.run_benchmark`.

    Question categories are the classes (``vague``, ``relational``, ``evolution``); evidence
    stays message ids; ``Question.extra`` holds ``current``, ``superseded``, ``asked_at`` and
    the file's ``split``, which :data:`EXTRA_METRICS` and the scenario report read.

    Args:
        path: as for :func:`load_scenarios` (``None``: the bundled suite).
        protocol: ``"ask_at_time"`` (default here) emits one conversation per ingest step,
            named ``"<scenario>@<step>"`` and holding every message up to that step, so a
            runner that ingests a conversation whole still asks each question of a memory
            holding only the messages up to ``asked_at`` (at the price of re-ingesting each
            prefix). ``"incremental"`` emits one conversation per scenario and marks the
            benchmark ``stream``: the runner feeds one message per ingest call and asks each
            question when the stream reaches its ``asked_at``. ``"full"`` emits one
            conversation per scenario with every message, ingested at once; questions asked
            before the last message then see later messages, so their current-state metric is
            left out (``None``).

    Raises:
        ScenarioError: the data fails validation, or ``protocol`` is unknown.
    """
    if protocol not in PROTOCOLS:
        raise ScenarioError(f"protocol {protocol!r} is unknown; valid protocols: {', '.join(PROTOCOLS)}")
    return benchmark_from_scenarios(load_scenarios(path), protocol=protocol, source=_describe(path))
