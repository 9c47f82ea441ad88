"""Validation at the boundary: turn user input into :class:`Message` objects or raise a typed error."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidMessageError, InvalidNamespaceError, InvalidQueryError
from .config import LimitsConfig
from .model import Message

__all__ = ["coerce_messages", "parse_moment", "parse_timestamp", "validate_namespace"]

_NAMESPACE = re.compile(r"[A-Za-z0-9_.:@\-]{1,128}")


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


def parse_timestamp(value: Any, *, message_id: str | None = None, index: int | None = None) -> datetime | None:
    """datetime, ISO-8601 string or None; naive times are taken as UTC so all compare.

    >>> parse_timestamp("2025-03-01T10:00:00")
    datetime.datetime(2025, 3, 1, 10, 0, tzinfo=datetime.timezone.utc)
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidMessageError(f"timestamp {value!r} is not ISO-8601", message_id=message_id, index=index) from None
    else:
        raise InvalidMessageError(
            f"timestamp must be a datetime, an ISO-8601 string or None, not {type(value).__name__}",
            message_id=message_id,
            index=index,
        )
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)


def parse_moment(value: Any, name: str) -> datetime:
    """A query-side time (``as_of``, ``before``): a datetime or ISO-8601 string, else :class:`InvalidQueryError`.

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
        raise InvalidMessageError(f"'id' has {len(mid)} characters; the limit is {limits.max_id_chars}", index=i)
    if not _encodable(mid):
        raise InvalidMessageError("'id' is not valid Unicode (lone surrogate)", index=i)
    if any(ord(c) < 32 or ord(c) == 127 for c in mid):
        raise InvalidMessageError("'id' contains a control character (NUL, newline, ...)", index=i)
    return mid


def _encodable(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def coerce_messages(raw: Iterable[Any], limits: LimitsConfig) -> list[Message]:
    """Validate every message before anything is written; the first bad one raises."""
    if isinstance(raw, (str, bytes, dict)):
        raise InvalidMessageError("messages must be a list of messages, not a single " + type(raw).__name__)
    items = list(raw)
    if len(items) > limits.max_batch_messages:
        raise InvalidMessageError(f"batch of {len(items)} messages exceeds the limit of {limits.max_batch_messages}")
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
        if not _encodable(text):
            raise InvalidMessageError("'text' is not valid Unicode (lone surrogate)", message_id=mid, index=i)
        if "\x00" in text:
            raise InvalidMessageError("'text' contains a NUL character", message_id=mid, index=i)
        if len(text) > limits.max_message_chars:
            raise InvalidMessageError(
                f"'text' has {len(text)} characters; the limit is {limits.max_message_chars}", message_id=mid, index=i
            )
        speaker = _field(item, "speaker", _field(item, "role", ""))
        if speaker is None:
            speaker = ""
        if not isinstance(speaker, str):
            raise InvalidMessageError(f"'speaker' must be a string, not {type(speaker).__name__}", message_id=mid, index=i)
        if len(speaker) > 256 or "\x00" in speaker or not _encodable(speaker):
            raise InvalidMessageError("'speaker' is longer than 256 characters, holds NUL or is not valid Unicode",
                                      message_id=mid, index=i)
        ts = parse_timestamp(_field(item, "timestamp"), message_id=mid, index=i)
        m = Message(id=mid, speaker=speaker.strip() or "user", text=text, timestamp=ts)
        if mid in seen:
            if (seen[mid].text, seen[mid].speaker) != (m.text, m.speaker):
                from ..errors import DuplicateMessageError

                raise DuplicateMessageError(mid)
            continue
        seen[mid] = m
        out.append(m)
    return out
