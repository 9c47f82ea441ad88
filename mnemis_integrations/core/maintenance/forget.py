"""Forgetting for privacy: remove messages everywhere, unlike archiving.

The namespace is rebuilt from the messages that remain, with the builder that built it and
the stored message vectors (nothing is embedded again), so no summary, keyword, label or
entity that quoted a forgotten message survives. The engine then rewrites the namespace in
the store and purges the file (:meth:`~..storage.sqlite.SQLiteStore.purge`).

What a rebuild does not replay: hand edits made through ``MnemisMemory.edit`` and
compaction (run ``compact`` again). Message ids of what was forgotten are not kept anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Message
from ..state import NamespaceState

__all__ = ["ForgetReport", "rebuild_without", "split_forgotten"]


@dataclass(frozen=True)
class ForgetReport:
    """What one ``forget`` call did."""

    namespace: str
    forgotten: int
    not_found: tuple[str, ...] = ()
    namespace_deleted: bool = False


def split_forgotten(messages: Iterable[Message], ids: Iterable[str]) -> tuple[list[Message], list[str], list[str]]:
    """(messages kept in arrival order, ids forgotten, ids asked for that were not stored).

    >>> ms = [Message("a", "x", "hi", None, 0), Message("b", "x", "secret", None, 1)]
    >>> kept, gone, missing = split_forgotten(ms, ["b", "zz"]); [m.id for m in kept], gone, missing
    (['a'], ['b'], ['zz'])
    """
    wanted = list(dict.fromkeys(ids))
    msgs = sorted(messages, key=lambda m: m.seq)
    stored = {m.id for m in msgs}
    drop = {i for i in wanted if i in stored}
    return [m for m in msgs if m.id not in drop], [i for i in wanted if i in drop], [i for i in wanted if i not in stored]


def rebuild_without(
    namespace: str, dim: int, builder: Any, kept: list[Message], vectors: np.ndarray
) -> NamespaceState:
    """A fresh namespace state built from ``kept`` (arrival order) and their ``vectors`` (rows).

    Built in one batch, the graph can differ in detail from one grown over many batches, but
    it holds exactly the kept messages and nothing derived from the forgotten ones.
    """
    st = NamespaceState.empty(namespace, dim)
    if kept:
        builder.ingest(st, list(kept), np.asarray(vectors, np.float32))
    return st
