"""In-process store (the default): plain copies, held as the persistent stores hold rows.

Nodes and edges are kept as their JSON text, so a write applies a delta as the other stores do
and nothing outside the store shares an object with it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

import numpy as np

from ..graph import edge_key
from ..model import Message
from .base import (
    Delta,
    StoredNamespace,
    refuse_another_embedder,
    refuse_stale_copy,
    split_rows,
    vector_rows,
)

__all__ = ["InMemoryStore"]


@dataclass
class _Namespace:
    version: int
    nodes: dict[str, str] = field(default_factory=dict)
    edges: dict[tuple[str, str, str], str] = field(default_factory=dict)
    messages: dict[str, Message] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)


class InMemoryStore:
    def __init__(self):
        self._meta: dict[str, str] = {}
        self._ns: dict[str, _Namespace] = {}
        self._seq = 0  # the store-wide write sequence: versions never go back
        self._lock = threading.Lock()

    def get_meta(self, key: str) -> str | None:
        return self._meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self._meta[key] = value

    def stored_dim(self) -> int | None:
        for ns in self._ns.values():
            for v in ns.vectors.values():
                return int(v.shape[-1])
        return None

    def namespaces(self) -> list[str]:
        return sorted(self._ns)

    def version(self, namespace: str) -> int:
        ns = self._ns.get(namespace)
        return ns.version if ns is not None else 0

    def load(self, namespace: str, dim: int) -> StoredNamespace | None:
        with self._lock:
            ns = self._ns.get(namespace)
            if ns is None:
                return None
            keys, vecs, passages = split_rows(list(ns.vectors.items()), dim)
            return StoredNamespace(
                {
                    "namespace": namespace,
                    "nodes": [json.loads(d) for d in ns.nodes.values()],
                    "edges": [json.loads(d) for d in ns.edges.values()],
                },
                [m.detached() for m in sorted(ns.messages.values(), key=lambda m: m.seq)],
                keys,
                vecs,
                ns.version,
                passages,
            )

    def write(
        self, namespace: str, delta: Delta, expected_version: int, meta: dict[str, str] | None = None
    ) -> int:
        # Everything that can fail (JSON of the nodes and edges, the vector rows) is done before
        # anything changes: a refused or failed write leaves the namespace and the sequence as they were.
        g = delta.graph
        nodes = [(n.id, json.dumps(n.to_dict())) for n in g.nodes]
        edges = [(edge_key(e), json.dumps(e.to_dict())) for e in g.edges]
        rows = [(m.detached(), r) for m, r in vector_rows(delta)]
        with self._lock:
            refuse_stale_copy(namespace, self.version(namespace), expected_version)
            refuse_another_embedder(self._meta.get("embedder_id"), meta)
            self._seq += 1
            ns = self._ns.get(namespace) or _Namespace(self._seq)
            ns.version = self._seq
            self._meta.update(meta or {})
            # popped first, a node put back is updated in last, where the graph put it
            for nid in g.removed_nodes:
                ns.nodes.pop(nid, None)
            for k in g.removed_edges:
                ns.edges.pop(k, None)
            ns.nodes.update(nodes)
            ns.edges.update(edges)
            for mid in delta.removed_messages:
                ns.messages.pop(mid, None)
                ns.vectors.pop(mid, None)
            for m, r in rows:
                ns.messages[m.id] = m
                ns.vectors[m.id] = r
            self._ns[namespace] = ns
            return ns.version

    def delete(self, namespace: str, expected_version: int | None = None) -> None:
        with self._lock:
            if expected_version is not None:
                refuse_stale_copy(namespace, self.version(namespace), expected_version)
            self._ns.pop(namespace, None)

    def purge(self) -> None:
        """Nothing to do: a deleted row leaves no copy behind in process memory."""

    def close(self) -> None:
        pass
