"""Validation at the boundary: turn user input into :class:`Message` objects or raise a typed error."""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidMessageError, InvalidNamespaceError, InvalidQueryError
from .config import LimitsConfig
from .model import Message

__all__ = [
    "coerce_messages",
    "encodable",
    "id_characters_problem",
    "iso_moment",
    "message_batch",
    "parse_moment",
    "parse_timestamp",
    "utc_now",
    "validate_metadata",
    "validate_namespace",
]

_NAMESPACE = re.compile(r"[A-Za-z0-9_.:@\-]{1,128}")


def utc_now() -> datetime:
    """The time the adapters give a message recorded without one (a chat turn, a stored item)."""
    return datetime.now(timezone.utc)


def validate_namespace(namespace: Any) -> str:
    """Return the namespace if valid, else raise :class:`InvalidNamespaceError`.

    >>> validate_namespace("user-1")
    'user-1'
    >>> _NAMESPACE.fullmatch("u1\\n") is None  # a trailing newline is refused too
    True
    """
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise InvalidNamespaceError(namespace)
    return namespace


def parse_timestamp(
    value: Any, *, message_id: str | None = None, index: int | None = None
) -> datetime | None:
    """datetime, ISO-8601 string or None; naive times are taken as UTC so all compare.

    >>> parse_timestamp("2025-03-01T10:00:00")
    datetime.datetime(2025, 3, 1, 10, 0, tzinfo=datetime.timezone.utc)
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        # A fixed offset, as a store reads it back: two times in one ZoneInfo compare by wall clock,
        # so across a DST fall-back the later one (fold=1) could sort first.
        offset = value.utcoffset()
        return value.replace(tzinfo=timezone.utc if offset is None else timezone(offset))
    if isinstance(value, str):
        dt = iso_moment(value)
        if dt is None:
            raise InvalidMessageError(
                f"timestamp {value!r} is not ISO-8601", message_id=message_id, index=index
            )
        return dt
    raise InvalidMessageError(
        f"timestamp must be a datetime, an ISO-8601 string or None, not {type(value).__name__}",
        message_id=message_id,
        index=index,
    )


def iso_moment(text: str) -> datetime | None:
    """An ISO-8601 string as an aware datetime (naive times taken as UTC), or ``None`` if it is not one.

    >>> iso_moment("2025-03-01T10:00:00Z").isoformat(), iso_moment("lunch")
    ('2025-03-01T10:00:00+00:00', None)
    """
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)


def parse_moment(value: Any, name: str) -> datetime:
    """A query-side time (``as_of``, ``before``): a datetime or ISO-8601 string, else
    :class:`InvalidQueryError`.

    >>> parse_moment("2025-03-01", "as_of").year
    2025
    """
    try:
        moment = parse_timestamp(value)
    except InvalidMessageError as e:
        raise InvalidQueryError(f"{name}: {e.reason}") from None
    if moment is None:
        raise InvalidQueryError(f"{name} must be a datetime or an ISO-8601 string, not None")
    return moment


def _check_id(mid: Any, i: int, limits: LimitsConfig) -> str:
    if mid is None:
        raise InvalidMessageError("missing 'id'", index=i)
    if not isinstance(mid, str) or not mid.strip():
        raise InvalidMessageError("'id' must be a non-empty string", index=i)
    if len(mid) > limits.max_id_chars:
        raise InvalidMessageError(
            f"'id' has {len(mid)} characters; the limit is {limits.max_id_chars}", index=i
        )
    problem = id_characters_problem(mid)
    if problem:
        raise InvalidMessageError(f"'id' {problem}", index=i)
    return mid


def id_characters_problem(mid: str) -> str | None:
    """Why a message id's characters are refused (a lone surrogate, a control character), or None."""
    if not encodable(mid):
        return "is not valid Unicode (lone surrogate)"
    if any(ord(c) < 32 or ord(c) == 127 for c in mid):
        return "contains a control character (NUL, newline, ...)"
    return None


def name_characters_problem(name: str) -> str | None:
    """Why a node id or an edge's label cannot key a node or edge in every store, or None: the
    in-memory and SQLite stores would keep a NUL where FalkorDB cuts its query at it, and a lone
    surrogate is stored in memory but cannot be encoded for either persistent store.

    >>> name_characters_problem("Ac" + chr(0) + "me"), name_characters_problem("Acme")
    ('holds a NUL character', None)
    """
    if "\x00" in name:
        return "holds a NUL character"
    if not encodable(name):
        return "is not valid Unicode (lone surrogate)"
    return None


# Metadata travels as JSON and as FalkorDB properties: integers must fit a signed 64-bit one.
_INT_RANGE = (-(2**63), 2**63 - 1)


def validate_metadata(
    raw: Any, limits: LimitsConfig, *, message_id: str | None = None, index: int | None = None
) -> dict[str, str | int | float | bool]:
    """A message's ``metadata`` as a fresh flat dict, or :class:`InvalidMessageError`.

    Keys: non-empty strings, not starting with ``$`` (filter operators do), no control
    characters. Values: ``str``, ``int``, ``float`` (finite) or ``bool``; numpy-style numbers
    become plain ``int`` / ``float``, a ``str`` subclass (a ``str`` enum) a plain ``str``. Nested
    values, ``None`` and datetimes are refused (store a time as an ISO-8601 string: filters
    compare such strings as times).

    >>> validate_metadata({"channel": "email", "priority": 2}, LimitsConfig())
    {'channel': 'email', 'priority': 2}
    >>> validate_metadata({"tags": ["a"]}, LimitsConfig())  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    mnemis_integrations.errors.InvalidMessageError: ...
    """
    if raw is None:
        return {}

    def bad(reason: str) -> InvalidMessageError:
        return InvalidMessageError(f"'metadata' {reason}", message_id=message_id, index=index)

    if not isinstance(raw, Mapping):
        raise bad(f"must be a dict of str keys to str, int, float or bool values, not {type(raw).__name__}")
    if len(raw) > limits.max_metadata_keys:
        raise bad(f"has {len(raw)} keys; the limit is {limits.max_metadata_keys}")
    out: dict[str, str | int | float | bool] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.strip():
            raise bad(f"keys must be non-empty strings, got {key!r}")
        if (
            key.startswith("$")
            or len(key) > 128
            or not encodable(key)
            or any(ord(c) < 32 or ord(c) == 127 for c in key)
        ):
            raise bad(f"key {key!r} is refused: at most 128 characters, no leading '$', no control character")
        out[key] = _metadata_value(key, value, limits, bad)
    return out


def _metadata_value(
    key: str, value: Any, limits: LimitsConfig, bad: Callable[[str], Exception]
) -> str | int | float | bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if len(value) > limits.max_metadata_chars or "\x00" in value or not encodable(value):
            raise bad(
                f"value of {key!r} is longer than {limits.max_metadata_chars} characters, holds NUL "
                "or is not valid Unicode"
            )
        # a str subclass (a str enum, numpy's str_) is read back from a store as a plain str: kept
        # as given, the same batch sent again after a reopen would differ from what is stored
        return str.__str__(value)
    if isinstance(value, numbers.Integral):
        if not _INT_RANGE[0] <= int(value) <= _INT_RANGE[1]:
            raise bad(f"value of {key!r} does not fit a signed 64-bit integer")
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise bad(f"value of {key!r} must be a finite number, not {value!r}")
        return float(value)
    if isinstance(value, (Mapping, list, tuple, set)):
        hint = "nested values are not supported (metadata is flat)"
    elif isinstance(value, datetime):
        hint = "store a time as an ISO-8601 string (filters compare those as times)"
    elif value is None:
        hint = "leave the key out instead of None"
    else:
        hint = f"{type(value).__name__} is not supported"
    raise bad(f"value of {key!r} must be a str, int, float or bool: {hint}")


def encodable(s: str) -> bool:
    """Whether ``s`` encodes as UTF-8 (no lone surrogate), as an embedder, a tokenizer or a store needs."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def same_content(a: Message, b: Message) -> bool:
    """Whether two deliveries of one message id carry the same message (a re-delivery, not a conflict)."""
    return (a.text, a.speaker, _typed(a.metadata)) == (b.text, b.speaker, _typed(b.metadata))


def _typed(metadata: Mapping[str, Any]) -> dict[str, tuple[type, Any]]:
    return {k: (type(v), v) for k, v in metadata.items()}  # True, 1 and 1.0 are different metadata


def message_batch(raw: Any) -> list[Any]:
    """``raw`` read once into a list, refused (:class:`InvalidMessageError`) if it is one message or
    no iterable: a string or a dict would otherwise read as its characters or keys."""
    if isinstance(raw, (str, bytes, dict)):
        raise InvalidMessageError("messages must be a list of messages, not a single " + type(raw).__name__)
    try:
        return list(raw)
    except TypeError:
        raise InvalidMessageError(f"messages must be a list of messages, not {type(raw).__name__}") from None


def coerce_messages(
    raw: Iterable[Any], limits: LimitsConfig, *, indexes: list[int] | None = None
) -> list[Message]:
    """Validate every message before anything is written; the first bad one raises.

    ``indexes``, when given, receives each returned message's index in ``raw``: a re-delivery
    within the batch is dropped, so a later error names the message by where the caller put it."""
    items = message_batch(raw)
    if len(items) > limits.max_batch_messages:
        raise InvalidMessageError(
            f"batch of {len(items)} messages exceeds the limit of {limits.max_batch_messages}"
        )
    out: list[Message] = []
    seen: dict[str, Message] = {}
    for i, item in enumerate(items):
        mid = _check_id(_field(item, "id"), i, limits)
        text = _field(item, "text", _field(item, "content"))
        if not isinstance(text, str):
            raise InvalidMessageError(
                f"'text' must be a string, not {type(text).__name__}", message_id=mid, index=i
            )
        if not text.strip():
            raise InvalidMessageError("'text' is empty", message_id=mid, index=i)
        if not encodable(text):
            raise InvalidMessageError("'text' is not valid Unicode (lone surrogate)", message_id=mid, index=i)
        if "\x00" in text:
            raise InvalidMessageError("'text' contains a NUL character", message_id=mid, index=i)
        if len(text) > limits.max_message_chars:
            raise InvalidMessageError(
                f"'text' has {len(text)} characters; the limit is {limits.max_message_chars}",
                message_id=mid,
                index=i,
            )
        speaker = _field(item, "speaker", _field(item, "role", ""))
        if speaker is None:
            speaker = ""
        if not isinstance(speaker, str):
            raise InvalidMessageError(
                f"'speaker' must be a string, not {type(speaker).__name__}", message_id=mid, index=i
            )
        if len(speaker) > 256 or "\x00" in speaker or not encodable(speaker):
            raise InvalidMessageError(
                "'speaker' is longer than 256 characters, holds NUL or is not valid Unicode",
                message_id=mid,
                index=i,
            )
        ts = parse_timestamp(_field(item, "timestamp"), message_id=mid, index=i)
        metadata = validate_metadata(_field(item, "metadata"), limits, message_id=mid, index=i)
        m = Message(id=mid, speaker=speaker.strip() or "user", text=text, timestamp=ts, metadata=metadata)
        if mid in seen:
            if not same_content(seen[mid], m):
                from ..errors import DuplicateMessageError

                raise DuplicateMessageError(mid, index=i)
            continue
        seen[mid] = m
        out.append(m)
        if indexes is not None:
            indexes.append(i)
    return out
