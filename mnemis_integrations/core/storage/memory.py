"""In-process store (the default): plain copies, so a failed write can be rolled back by reloading."""

from __future__ import annotations

import copy
import json

import numpy as np

from ..model import Message
from .base import StoredNamespace

__all__ = ["InMemoryStore"]


class InMemoryStore:
    def __init__(self):
        self._meta: dict[str, str] = {}
        self._ns: dict[str, tuple[str, list[Message], list[str], np.ndarray]] = {}

    def get_meta(self, key: str) -> str | None:
        return self._meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self._meta[key] = value

    def stored_dim(self) -> int | None:
        for _, _, _, vecs in self._ns.values():
            if len(vecs):
                return int(vecs.shape[1])
        return None

    def namespaces(self) -> list[str]:
        return sorted(self._ns)

    def load(self, namespace: str, dim: int) -> StoredNamespace | None:
        if namespace not in self._ns:
            return None
        graph_json, msgs, keys, vecs = self._ns[namespace]
        return StoredNamespace(json.loads(graph_json), list(msgs), list(keys), vecs.copy())

    def save(self, namespace, new_messages, new_vectors, graph, meta=None) -> None:
        graph_json = json.dumps(graph)
        self._meta.update(meta or {})
        _, msgs, keys, vecs = self._ns.get(namespace, ("", [], [], np.zeros((0, new_vectors.shape[1]), np.float32)))
        self._ns[namespace] = (
            graph_json,
            msgs + list(new_messages),
            keys + [m.id for m in new_messages],
            np.concatenate([vecs, np.asarray(new_vectors, np.float32)]) if len(new_messages) else vecs,
        )

    def replace(self, namespace, messages, vectors, graph) -> None:
        self._ns[namespace] = (json.dumps(graph), list(messages), [m.id for m in messages], copy.deepcopy(vectors))

    def delete(self, namespace: str) -> None:
        self._ns.pop(namespace, None)

    def purge(self) -> None:
        """Nothing to do: a replaced or deleted namespace leaves no copy behind in process memory."""

    def close(self) -> None:
        pass
