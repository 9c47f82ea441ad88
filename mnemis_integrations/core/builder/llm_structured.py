"""Structured output from any chat model: extract, repair, validate, retry (bounded).

No framework's structured-output feature is relied on, so this works with any model,
including tiny local ones that wrap JSON in prose or code fences, leave trailing commas, or
stop mid-object when they hit their token limit.

The loop for one step (:func:`ask`):

1. call the model;
2. :func:`extract_json` takes the first JSON object out of the reply, repairing trailing
   commas, unquoted ``None``/``True``, and truncation (open strings and brackets are closed,
   a dangling key or half value is dropped);
3. the step's pydantic schema validates it, then the step's own ``check`` (indices in range,
   every message covered, ...);
4. on failure the model is asked again with its answer and the errors appended, at most
   ``max_retries`` times; after that :func:`ask` returns ``None`` and the caller falls back.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ..protocols import ChatModel
from ..tokens import count_tokens

__all__ = ["JSONRepairError", "StepStats", "Usage", "ask", "extract_json"]

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

_ERRORS_KEPT = 5


class JSONRepairError(ValueError):
    """No JSON object could be read out of a reply, even after repair."""


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)(?:```|$)", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_PY_LITERALS = {"None": "null", "True": "true", "False": "false"}
# No answer nests past a few levels: a cut-off reply open this deep is a model stuck repeating one
# token, and cutting it back item by item would take minutes.
_MAX_OPEN = 32
# A truncated reply is cut back one item at a time, each cut scanning and parsing what is left: a
# reply stuck repeating ", " (thousands of empty items) would cost one whole scan per comma.
# Truncation costs the last item or two; past this many cuts the reply is refused (and asked again).
_MAX_CUTS = 32


def _string_states(text: str, start: int = 0) -> Iterator[tuple[int, str, bool]]:
    r"""Each character from ``start`` with whether the text is inside a JSON string right after it.

    >>> [(c, inside) for _, c, inside in _string_states('a"b\\"c"d')]  # doctest: +NORMALIZE_WHITESPACE
    [('a', False), ('"', True), ('b', True), ('\\', True),
     ('"', True), ('c', True), ('"', False), ('d', False)]
    """
    in_str = esc = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        yield i, ch, in_str


def _scan(text: str, start: int) -> tuple[int, list[str], bool]:
    """Walk from ``start`` (an opening bracket): (end index or -1, open-bracket stack, inside a string)."""
    stack: list[str] = []
    in_str = False
    for i, ch, in_str in _string_states(text, start):
        if in_str:
            continue
        if ch in "{[":
            stack.append(ch)
        elif ch in "}]" and stack and ((ch == "}" and stack[-1] == "{") or (ch == "]" and stack[-1] == "[")):
            stack.pop()
            if not stack:
                return i, [], False
    return -1, stack, in_str


def _fix_literals(s: str) -> str:
    """Python literals and trailing commas outside strings."""
    out: list[str] = []
    skip_to = 0
    for i, ch, in_str in _string_states(s):
        if i < skip_to:
            continue
        if not in_str and ch != '"':
            lit = next((lit for lit in _PY_LITERALS if s.startswith(lit, i)), None)
            if lit is not None and not (i and (s[i - 1].isalnum() or s[i - 1] == "_")):
                out.append(_PY_LITERALS[lit])
                skip_to = i + len(lit)
                continue
        out.append(ch)
    return _TRAILING_COMMA.sub(r"\1", "".join(out))


def _close_truncated(s: str, stack: list[str], in_str: bool) -> str:
    """Close a cut-off object: end an open string, drop a dangling key or half value, close brackets."""
    if in_str:
        s += '"'
    s = s.rstrip()
    # A dangling `"key":` or `"key"` inside an object, or a trailing comma, cannot stand.
    for _ in range(3):
        before = s
        s = re.sub(r',\s*"[^"\\]*"\s*:?\s*$', "", s) if stack and stack[-1] == "{" else s
        s = re.sub(r'"[^"\\]*"\s*:\s*$', "", s)
        s = re.sub(r"[,:]\s*$", "", s)
        s = re.sub(r"(?<![\w\"\]}])-?\d*\.?$", "", s) if s.endswith((".", "-")) else s
        if stack and stack[-1] == "{" and re.search(r'\{\s*"[^"\\]*"\s*$', s):
            s = re.sub(r'"[^"\\]*"\s*$', "", s)
        if s == before:
            break
    return s + "".join("}" if b == "{" else "]" for b in reversed(stack))


def _loads(s: str) -> Any:
    """``json.loads``, failing as on any invalid JSON where a reply stuck repeating one token makes
    it fail otherwise (an integer past Python's digit limit, nesting past the recursion limit)."""
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as e:
        raise json.JSONDecodeError(f"unreadable ({type(e).__name__})", s, 0) from None


def extract_json(text: str) -> Any:
    """The first JSON object (or array) in a model reply, repaired if needed.

    Raises:
        JSONRepairError: nothing that parses as JSON could be recovered.

    Examples:
        >>> extract_json('Sure! ```json\\n{"a": [1, 2,], "b": None}\\n``` Hope it helps')
        {'a': [1, 2], 'b': None}
        >>> extract_json('{"items": [{"i": 0, "name": "Plan B"}, {"i": 1, "na')
        {'items': [{'i': 0, 'name': 'Plan B'}, {'i': 1}]}
        >>> extract_json('{"summary": "Ana moved the launch to May 3')
        {'summary': 'Ana moved the launch to May 3'}
    """
    if not isinstance(text, str) or not text.strip():
        raise JSONRepairError("the reply is empty")
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    last_error = "no '{' or '[' in the reply"
    for cand in candidates:
        starts = [i for i in (cand.find("{"), cand.find("[")) if i >= 0]
        if not starts:
            continue
        start = min(starts)
        end, stack, in_str = _scan(cand, start)
        if len(stack) > _MAX_OPEN:
            last_error = f"more than {_MAX_OPEN} brackets left open"
            continue
        raw = cand[start : end + 1] if end >= 0 else _close_truncated(cand[start:], stack, in_str)
        for attempt in (raw, _fix_literals(raw)):
            try:
                return _loads(attempt)
            except json.JSONDecodeError as e:
                last_error = f"invalid JSON ({e.msg} at position {e.pos})"
        if end < 0:
            # Truncated with something odd in the tail: cut back to the last complete item and close.
            cut = max(raw.rfind(","), 0)
            for _ in range(_MAX_CUTS):
                if cut <= 0:
                    break
                head = cand[start : start + cut]
                _, st2, in2 = _scan(head + " ", 0)
                try:
                    return _loads(_fix_literals(_close_truncated(head, st2, in2)))
                except json.JSONDecodeError:
                    cut = head.rfind(",")
    raise JSONRepairError(last_error)


# ---------------------------------------------------------------------------------- accounting


@dataclass
class StepStats:
    """What one builder step cost and how it went, over one ingest."""

    calls: int = 0
    retries: int = 0
    repaired: int = 0  # answers that needed JSON repair or a fix-up of their content
    fallbacks: int = 0  # batches handed to the offline builder
    llm_batches: int = 0  # batches that used the model's answer
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: list[str] = field(default_factory=list)  # the last few validation errors, for diagnosis

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self.__dict__.items()}


class Usage:
    """Thread-safe per-step counters for one ingest, with tiktoken (cl100k) token counts."""

    def __init__(self, prompt_cost_per_1k: float = 0.0, completion_cost_per_1k: float = 0.0):
        self.steps: dict[str, StepStats] = {}
        self._lock = threading.Lock()
        self.prompt_cost_per_1k = prompt_cost_per_1k
        self.completion_cost_per_1k = completion_cost_per_1k

    def step(self, name: str) -> StepStats:
        with self._lock:
            return self.steps.setdefault(name, StepStats())

    def add(self, name: str, **counts: int) -> None:
        with self._lock:
            s = self.steps.setdefault(name, StepStats())
            for k, v in counts.items():
                setattr(s, k, getattr(s, k) + v)

    def error(self, name: str, message: str) -> None:
        with self._lock:
            errs = self.steps.setdefault(name, StepStats()).errors
            errs.append(message[:300])
            del errs[:-_ERRORS_KEPT]

    def absorb(self, other: Usage) -> None:
        """Add ``other``'s counts to these (``other`` finished: no call adds to it any more)."""
        with self._lock:
            for name, theirs in other.steps.items():
                ours = self.steps.setdefault(name, StepStats())
                for k, v in theirs.__dict__.items():
                    if isinstance(v, int):
                        setattr(ours, k, getattr(ours, k) + v)
                ours.errors.extend(theirs.errors)
                del ours.errors[:-_ERRORS_KEPT]

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.steps.values())

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.steps.values())

    @property
    def cost(self) -> float:
        return (
            self.prompt_tokens * self.prompt_cost_per_1k
            + self.completion_tokens * self.completion_cost_per_1k
        ) / 1000

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "steps": {k: v.to_dict() for k, v in sorted(self.steps.items())},
        }


# ---------------------------------------------------------------------------------- the loop


@dataclass
class Answer(Generic[T]):
    value: T
    repaired: bool


def _errors_of(exc: ValidationError) -> list[str]:
    out = []
    for e in exc.errors()[:8]:
        where = ".".join(str(p) for p in e.get("loc", ())) or "(top level)"
        out.append(f"{where}: {e.get('msg', 'invalid')}")
    return out


def ask(
    chat: ChatModel,
    step: str,
    messages: list[dict[str, str]],
    schema: type[T],
    usage: Usage,
    *,
    max_retries: int,
    check: Callable[[T], tuple[T, list[str], bool]] | None = None,
) -> T | None:
    """Ask ``chat`` for an answer matching ``schema``; ``None`` when every try failed.

    Args:
        chat: the model.
        step: the step's name, for ``usage``.
        messages: the prompt.
        schema: the pydantic response schema.
        usage: counters to add to.
        max_retries: extra tries after the first (so at most ``1 + max_retries`` calls).
        check: the step's own validation: returns (possibly fixed answer, errors, was_fixed).
            Errors make the answer count as invalid.

    A chat whose ``wants_schema`` is true is also given the schema as JSON schema, for providers
    that constrain decoding to it (the answer is validated all the same).
    A model that raises (a timeout, a refused request) counts as an invalid answer: the step
    retries, then falls back; no exception escapes, so no message is lost to a model fault.
    """
    convo = list(messages)
    json_schema = schema.model_json_schema() if getattr(chat, "wants_schema", False) else None
    for attempt in range(1 + max(0, max_retries)):
        if attempt:
            usage.add(step, retries=1)
        usage.add(step, calls=1, prompt_tokens=sum(count_tokens(m["content"]) for m in convo))
        try:
            reply = (
                chat.complete(convo, schema=json_schema) if json_schema is not None else chat.complete(convo)
            )
        except Exception as e:  # noqa: BLE001 - any model failure means: try again, then fall back
            usage.error(step, f"model call failed: {type(e).__name__}: {e}")
            logger.debug("%s: model call %d failed: %s: %s", step, attempt + 1, type(e).__name__, e)
            continue
        reply = reply if isinstance(reply, str) else str(reply)
        usage.add(step, completion_tokens=count_tokens(reply))
        errors: list[str]
        fixed = False
        try:
            data = extract_json(reply)
            try:
                strict = _loads(reply.strip())
                fixed = strict != data
            except json.JSONDecodeError:
                fixed = True
            value = schema.model_validate(data)
            errors = []
            if check is not None:
                value, errors, was_fixed = check(value)
                fixed = fixed or was_fixed
        except JSONRepairError as e:
            errors = [str(e)]
        except ValidationError as e:
            errors = _errors_of(e)
        if not errors:
            if fixed:
                usage.add(step, repaired=1)
            return value
        usage.error(step, "; ".join(errors))
        logger.debug("%s: answer %d invalid: %s", step, attempt + 1, "; ".join(errors))
        convo = list(messages) + [
            {"role": "assistant", "content": reply[:4000]},
            {
                "role": "user",
                "content": "That answer was not valid:\n- "
                + "\n- ".join(errors)
                + "\nReply again with only the corrected JSON object, nothing else.",
            },
        ]
    return None
