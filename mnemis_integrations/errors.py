"""One error hierarchy for the whole library.

Every failure a caller can provoke with bad input is a :class:`MnemisError`
subclass that carries the offending value, so callers can catch the base class
or one precise kind.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DuplicateMessageError",
    "EmbedderMismatchError",
    "InvalidMessageError",
    "InvalidNameError",
    "InvalidNamespaceError",
    "InvalidQueryError",
    "MessageFileError",
    "MissingDependencyError",
    "MnemisError",
    "NamespaceNotFoundError",
    "NodeNotFoundError",
    "StoreError",
]


class MnemisError(Exception):
    """Base class of every error Mnemis raises on purpose."""


class InvalidMessageError(MnemisError, ValueError):
    """A message is missing a field or has a field of the wrong type or value."""

    def __init__(self, reason: str, *, message_id: str | None = None, index: int | None = None):
        where = []
        if message_id is not None:
            where.append(f"id={message_id!r}")
        if index is not None:
            where.append(f"index={index}")
        super().__init__(f"invalid message ({', '.join(where) or 'unknown'}): {reason}")
        self.message_id = message_id
        self.index = index
        self.reason = reason


class DuplicateMessageError(InvalidMessageError):
    """The same message id arrived again with different content."""

    def __init__(self, message_id: str, *, index: int | None = None):
        super().__init__(
            "this id is already stored with different text, speaker or metadata",
            message_id=message_id,
            index=index,
        )


class InvalidNameError(MnemisError, ValueError):
    """A node id or an edge's label holds a character no store can key it by (a NUL, a lone surrogate).

    ``field`` names what holds it (``"node id"``, ``"relation label"``, ...), ``value`` is the name as given.
    """

    def __init__(self, field: str, value: str, reason: str):
        super().__init__(f"{field} {value!r} {reason}")
        self.field = field
        self.value = value
        self.reason = reason


class InvalidQueryError(MnemisError, ValueError):
    """A search was asked with an empty query or an impossible ``k``."""


class InvalidNamespaceError(MnemisError, ValueError):
    """A namespace name is empty, too long, or holds characters we refuse."""

    def __init__(self, namespace: object):
        super().__init__(
            f"invalid namespace {namespace!r}: "
            "use 1-128 characters of letters, digits, '_', '-', '.', ':' or '@'"
        )
        self.namespace = namespace


class NamespaceNotFoundError(MnemisError, KeyError):
    """The namespace holds no memory yet."""

    def __init__(self, namespace: str):
        super().__init__(namespace)
        self.namespace = namespace

    def __str__(self) -> str:
        return f"namespace {self.namespace!r} holds no memory (add messages to it first)"


class NodeNotFoundError(MnemisError, KeyError):
    """No node with this id exists in the namespace."""

    def __init__(self, node_id: str):
        super().__init__(node_id)
        self.node_id = node_id

    def __str__(self) -> str:
        return f"node {self.node_id!r} not found"


class MessageFileError(MnemisError, ValueError):
    """A file of messages (``mnemis ingest FILE``) cannot be read, or one of its messages is invalid.

    ``line`` is the 1-based line of a JSONL file (or of a JSON syntax error), ``None`` when unknown.
    """

    def __init__(self, path: str, reason: str, *, line: int | None = None):
        super().__init__(f"{path}{'' if line is None else f':{line}'}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


class StoreError(MnemisError):
    """The persistent store cannot be opened or written."""


class EmbedderMismatchError(StoreError):
    """A store was opened with a different embedder than the one its vectors were made with."""

    def __init__(self, stored: str, given: str):
        super().__init__(
            f"this store's vectors were made by embedder {stored!r} but {given!r} was given; "
            "open it with the same embedder or re-embed into a new store"
        )
        self.stored = stored
        self.given = given


class ConfigError(MnemisError, ValueError):
    """A configuration value or a named variant is unknown or out of range."""


class MissingDependencyError(MnemisError, ImportError):
    """An optional integration was used without its extra installed."""

    def __init__(self, package: str, extra: str):
        super().__init__(f"{package} is not installed; run: pip install 'mnemis-integrations[{extra}]'")
        self.package = package
        self.extra = extra
