"""What a search returns: one :class:`MemoryHit` per node, explaining how it was found."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

__all__ = ["MemoryHit", "Via"]


class Via:
    """Names of the mechanisms that can put a node into the results."""

    SEMANTIC = "semantic"
    EXPANSION = "expansion"
    RELATION = "relation"
    FALLBACK = "fallback"
    SUPPLEMENT = "supplement"
    SUCCESSOR = "successor"


@dataclass(frozen=True)
class MemoryHit:
    """One retrieved memory and the evidence of how it was found.

    Attributes:
        node_id: id of the graph node.
        kind: "concept", "subtopic", "fragment" or "entity".
        text: what a reader LLM is given. For a fragment: its summary line plus the
            raw messages it covers.
        source_ids: ids of the messages whose text appears in ``text``.
        score: fused score in [0, 1]; results are sorted by it, best first.
        semantic_score: normalised score from the semantic path (0 if it missed).
        relation_score: normalised score from the relation path (0 if it missed).
        via: mechanisms that produced it, e.g. ("semantic", "relation").
        path: labels from the top concept down to this node.
        time: the node's event time (latest message time for a fragment).
        status: "active", "superseded" or "archived".
        label: the node's short label.
        namespace: whose memory it is.
        successors: ids of nodes that supersede this one.
        focus: for a fragment, the ids of its messages ordered by how well they match the
            query, best first (what a token budget keeps first).
    """

    node_id: str
    kind: str
    text: str
    source_ids: tuple[str, ...]
    score: float
    semantic_score: float
    relation_score: float
    via: tuple[str, ...]
    path: tuple[str, ...]
    time: datetime | None
    status: str
    label: str = ""
    namespace: str = ""
    successors: tuple[str, ...] = field(default_factory=tuple)
    focus: tuple[str, ...] = field(default_factory=tuple)

    @property
    def path_str(self) -> str:
        return " > ".join(self.path)

    def to_dict(self) -> dict:
        return {
            "node_id": self.node_id,
            "kind": self.kind,
            "text": self.text,
            "source_ids": list(self.source_ids),
            "score": self.score,
            "semantic_score": self.semantic_score,
            "relation_score": self.relation_score,
            "via": list(self.via),
            "path": list(self.path),
            "path_str": self.path_str,
            "time": self.time.isoformat() if self.time else None,
            "status": self.status,
            "label": self.label,
            "namespace": self.namespace,
            "successors": list(self.successors),
            "focus": list(self.focus),
        }
