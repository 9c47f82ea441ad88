"""Plain data of the memory graph: nodes, edges, messages. No I/O here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from enum import Enum

__all__ = [
    "HIERARCHY_KINDS",
    "Edge",
    "EdgeKind",
    "Message",
    "Node",
    "NodeKind",
    "Status",
    "moment",
    "time_order",
]


class NodeKind(str, Enum):
    CONCEPT = "concept"
    SUBTOPIC = "subtopic"
    FRAGMENT = "fragment"
    ENTITY = "entity"
    ARCHIVE = "archive"


HIERARCHY_KINDS = (NodeKind.CONCEPT, NodeKind.SUBTOPIC, NodeKind.FRAGMENT)


class EdgeKind(str, Enum):
    BELONGS_TO = "belongs_to"  # child -> parent in the hierarchy
    UPDATES = "updates"  # new -> old: the new fact supersedes the old one
    REFERENCES = "references"  # two nodes speak of the same matter
    CONTRADICTS = "contradicts"
    MENTIONS = "mentions"  # fragment -> entity
    RELATION = "relation"  # labelled entity -> entity relation; the label says which


class Status(str, Enum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"


@dataclass(frozen=True)
class Message:
    """One raw message as acknowledged by the store. Never lost, never rewritten.

    ``metadata`` is the caller's own: a flat dict of str / int / float / bool values (checked by
    :func:`~.metadata.validate_metadata`), stored with the message and selected by search filters.
    """

    id: str
    speaker: str
    text: str
    timestamp: datetime | None
    seq: int = 0  # arrival order inside the namespace; breaks timestamp ties
    metadata: dict[str, str | int | float | bool] = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "speaker": self.speaker,
            "text": self.text,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "seq": self.seq,
            "metadata": dict(self.metadata),
        }

    def detached(self) -> Message:
        """This message with a copy of its ``metadata``: frozen, it still holds a mutable dict."""
        return replace(self, metadata=dict(self.metadata)) if self.metadata else self

    @classmethod
    def from_dict(cls, d: dict) -> Message:
        ts = d.get("timestamp")
        return cls(
            id=d["id"],
            speaker=d["speaker"],
            text=d["text"],
            timestamp=datetime.fromisoformat(ts) if ts else None,
            seq=int(d.get("seq", 0)),
            metadata=dict(d.get("metadata") or {}),
        )


def time_order(m: Message) -> tuple[bool, int, int]:
    """Sort key of messages in the order they were said: undated last, ties by arrival (``seq``)."""
    return (m.timestamp is None, moment(m.timestamp) if m.timestamp else 0, m.seq)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def moment(t: datetime) -> int:
    """``t`` in microseconds since 1970 (naive taken as UTC), a sort key exact at any date: a float of
    seconds (``t.timestamp()``) no longer tells microseconds apart after the year 2242.

    >>> t = datetime(2300, 1, 1, tzinfo=timezone.utc)
    >>> moment(t.replace(microsecond=2)) - moment(t.replace(microsecond=1))
    1
    """
    aware = t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)
    return (aware - _EPOCH) // timedelta(microseconds=1)


@dataclass
class Node:
    """A node of the memory graph.

    ``label`` is the short name shown in hierarchy paths; ``summary`` the one-line
    description; ``source_ids`` the raw messages the node was built from.
    """

    id: str
    kind: NodeKind
    label: str
    namespace: str
    summary: str = ""
    keywords: list[str] = field(default_factory=list)
    source_ids: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    event_time: datetime | None = None
    status: Status = Status.ACTIVE
    valid_until: datetime | None = None  # set when a successor supersedes this node
    aliases: list[str] = field(default_factory=list)
    properties: dict = field(
        default_factory=dict
    )  # free-form, JSON-serialisable (e.g. from a PropertyGraphStore)

    # A node held by a MemoryGraph reports every field assignment to that graph's change journal,
    # so a write persists only the nodes that changed (in-place edits of ``properties`` and the
    # lists go through ``MemoryGraph.touch``).
    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        journal = self.__dict__.get("_journal")
        if journal is not None:
            journal[self.id] = None

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "label": self.label,
            "namespace": self.namespace,
            "summary": self.summary,
            "keywords": list(self.keywords),
            "source_ids": list(self.source_ids),
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "event_time": self.event_time.isoformat() if self.event_time else None,
            "status": self.status.value,
            "valid_until": self.valid_until.isoformat() if self.valid_until else None,
            "aliases": list(self.aliases),
            "properties": dict(self.properties),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Node:
        def dt(v):
            return datetime.fromisoformat(v) if v else None

        return cls(
            id=d["id"],
            kind=NodeKind(d["kind"]),
            label=d["label"],
            namespace=d["namespace"],
            summary=d.get("summary", ""),
            keywords=list(d.get("keywords", [])),
            source_ids=list(d.get("source_ids", [])),
            created_at=dt(d.get("created_at")),
            event_time=dt(d.get("event_time")),
            status=Status(d.get("status", "active")),
            valid_until=dt(d.get("valid_until")),
            aliases=list(d.get("aliases", [])),
            properties=dict(d.get("properties", {})),
        )


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    kind: EdgeKind
    label: str = ""  # for RELATION edges: the relation name, e.g. "confirmed"
    weight: float = 1.0
    created_at: datetime | None = None
    properties: dict = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict:
        return {
            "properties": dict(self.properties),
            "src": self.src,
            "dst": self.dst,
            "kind": self.kind.value,
            "label": self.label,
            "weight": self.weight,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Edge:
        ts = d.get("created_at")
        return cls(
            src=d["src"],
            dst=d["dst"],
            kind=EdgeKind(d["kind"]),
            label=d.get("label", ""),
            weight=float(d.get("weight", 1.0)),
            created_at=datetime.fromisoformat(ts) if ts else None,
            properties=dict(d.get("properties", {})),
        )
