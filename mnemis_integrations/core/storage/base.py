"""The storage contract: raw messages with their vectors, plus the graph, per namespace.

Every change to a namespace is one :class:`Delta` written by :meth:`GraphStore.write`: the
messages and vectors added or removed and the graph elements created, changed or removed,
nothing else, so the cost of a write follows the size of the change, not of the namespace.
A write is atomic and conditional: it names the version its copy was read at and is refused
whole (:class:`ConcurrentWriteError`) when another writer has moved the namespace since.

Versions never go back. Each write takes the next value of one store-wide sequence, so a
namespace that was deleted and created again never shows a version an old copy has seen: a
copy compares its version with :meth:`GraphStore.version` and drops itself when they differ.
A namespace that does not exist has version 0.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from ...errors import EmbedderMismatchError, StoreError
from ..graph import GraphChanges
from ..model import Message

__all__ = [
    "ConcurrentWriteError",
    "Delta",
    "GraphStore",
    "StoredNamespace",
    "message_from_row",
    "native_errors_as_store_errors",
    "refuse_another_embedder",
    "refuse_stale_copy",
    "split_rows",
    "vector_rows",
]

T = TypeVar("T")


class ConcurrentWriteError(StoreError):
    """Another writer changed the namespace since this copy was read; nothing was written.

    The engine reloads the namespace and builds the change again; a caller sees it only if
    that keeps failing."""


def native_errors_as_store_errors(
    native: Callable[[], type[Exception]], describe: Callable[[Any, Exception], str]
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A decorator for a store's methods: its backend's own errors (``native()``, looked up only
    when one is raised, so an optional client is not imported before) reach callers as
    :class:`StoreError` with ``describe(store, error)``; a ``ConcurrentWriteError`` passes as it is."""

    def decorate(method: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> T:
            try:
                return method(self, *args, **kwargs)
            except Exception as e:
                if isinstance(e, native()):
                    raise StoreError(describe(self, e)) from e
                raise

        return wrapper

    return decorate


def refuse_stale_copy(namespace: str, current: int, expected: int) -> None:
    """Refuse a write or a removal made from a copy read at version ``expected``: the namespace is
    at ``current`` now."""
    if current != expected:
        raise ConcurrentWriteError(
            f"namespace {namespace!r} was written by another writer (version {current}, this copy {expected})"
        )


def refuse_another_embedder(stored: str | None, meta: dict[str, str] | None) -> None:
    """Inside a write: refuse ``meta`` naming another embedder than the one the store holds
    vectors of (an object opened before the store's first write is not checked on open)."""
    given = (meta or {}).get("embedder_id")
    if stored is not None and given is not None and stored != given:
        raise EmbedderMismatchError(stored, given)


def message_from_row(
    id: str, speaker: str, text: str, timestamp: str | None, seq: int, metadata: str | None
) -> Message:
    """A stored message row (metadata as JSON text, or none) as a :class:`Message`: every backend's reader."""
    return Message.from_dict(
        {
            "id": id,
            "speaker": speaker,
            "text": text,
            "timestamp": timestamp,
            "seq": seq,
            "metadata": json.loads(metadata) if metadata else None,
        }
    )


@dataclass
class StoredNamespace:
    graph: dict
    messages: list[Message]
    vector_keys: list[str]
    vectors: np.ndarray
    version: int  # the version these rows were read at (in the same transaction)
    passages: dict[str, np.ndarray] = field(default_factory=dict)  # message id -> its passage vectors


def vector_rows(delta: Delta) -> list[tuple[Message, np.ndarray]]:
    """Each new message of ``delta`` with the vector rows a store keeps for it, as one float32
    array: its own vector, then its passages' (``core.passages``). A store keeps them together, so
    a message removed takes its passage vectors with it."""
    if not delta.new_messages:
        return []
    out = []
    for m, v in zip(delta.new_messages, delta.new_vectors, strict=True):  # type: ignore[arg-type]
        rows = [np.asarray(v, np.float32).reshape(1, -1)]
        if m.id in delta.new_passages:
            rows.append(np.asarray(delta.new_passages[m.id], np.float32))
        out.append((m, np.concatenate(rows)))
    return out


def split_rows(
    keyed_rows: list[tuple[str, np.ndarray]], dim: int
) -> tuple[list[str], np.ndarray, dict[str, np.ndarray]]:
    """``(message ids, their vectors, passage vectors by message)`` from the rows a store kept per
    message (:func:`vector_rows`), each a flat or 2-D float32 array."""
    keys = [k for k, _ in keyed_rows]
    shaped = [np.asarray(r, np.float32).reshape(-1, dim) for _, r in keyed_rows]
    vectors = np.stack([r[0] for r in shaped]) if shaped else np.zeros((0, dim), np.float32)
    passages = {k: r[1:] for k, r in zip(keys, shaped, strict=True) if len(r) > 1}
    return keys, vectors, passages


@dataclass
class Delta:
    """One write of one namespace."""

    graph: GraphChanges = field(default_factory=GraphChanges)
    new_messages: list[Message] = field(default_factory=list)
    new_vectors: np.ndarray | None = None  # one row per new message
    new_passages: dict[str, np.ndarray] = field(default_factory=dict)  # new message id -> passage rows
    removed_messages: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.graph or self.new_messages or self.removed_messages)


class GraphStore(Protocol):
    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def stored_dim(self) -> int | None:
        """Vector dimension from the stored rows (stores written before the ``dim`` meta row)."""
        ...

    def namespaces(self) -> list[str]: ...

    def version(self, namespace: str) -> int:
        """The namespace's version now; 0 when it does not exist."""
        ...

    def load(self, namespace: str, dim: int) -> StoredNamespace | None: ...

    def write(
        self, namespace: str, delta: Delta, expected_version: int, meta: dict[str, str] | None = None
    ) -> int:
        """Apply ``delta`` atomically if the namespace is still at ``expected_version``.

        ``meta`` rows (embedder id, dimension) are written with it. Returns the new version.

        Raises:
            ConcurrentWriteError: the namespace moved past ``expected_version``; nothing written.
        """
        ...

    def delete(self, namespace: str, expected_version: int | None = None) -> None:
        """Remove the namespace whole (its version then reads 0; the sequence never goes back).

        With ``expected_version``, only if the namespace is still at that version.

        Raises:
            ConcurrentWriteError: the namespace moved past ``expected_version``; nothing removed.
        """
        ...

    def purge(self) -> None:
        """Leave no recoverable copy of deleted or replaced rows (forgetting for privacy)."""
        ...

    def close(self) -> None: ...
