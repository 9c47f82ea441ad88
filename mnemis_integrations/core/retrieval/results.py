"""What a search returns: one :class:`MemoryHit` per node, explaining how it was found."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..model import Message

__all__ = ["MemoryHit", "Via", "metadata_of", "said_last"]


class Via:
    """Names of the mechanisms that can put a node into the results."""

    SEMANTIC = "semantic"
    EXPANSION = "expansion"
    RELATION = "relation"
    FALLBACK = "fallback"
    SUPPLEMENT = "supplement"
    SUCCESSOR = "successor"
    # Shares a specific entity with one of the first hits (search's bridge step), scored up after them.
    BRIDGE = "bridge"
    # The conversation's next stretch after one of the first hits whose best match ends it (search's
    # continuation step), scored up after that hit.
    CONTINUATION = "continuation"
    # Placed before an older hit it restates with a change, where the builder linked no update
    # (search's newer-first rule: it shares that hit's score), or read first among the first hits of
    # a question about the end state (it keeps its own score): this says why it stands first.
    NEWER = "newer"
    # Said in the period the query names ("in July 2022"), and scored up for it (``fusion.period_weight``).
    PERIOD = "period"


@dataclass(frozen=True)
class MemoryHit:
    """One retrieved memory and the evidence of how it was found.

    Attributes:
        node_id: id of the graph node.
        kind: "concept", "subtopic", "fragment" or "entity".
        text: what a reader LLM is given. For a fragment: its summary line plus the
            raw messages it covers.
        source_ids: ids of the messages whose text appears in ``text``.
        score: fused score in [0, 1]. Results come best first by this score, save where search's
            placement rules (step 5 of :func:`~.search.dual_path_search`) move a hit up. A successor
            placed before the hit it replaces, or a newer restatement before the older one, takes
            that hit's score when its own is lower (the hit steps just under it), so scores stay
            non-increasing; but among the first few hits of a question not about the past, a newer
            hit read before an older one on the same matter keeps its own score (its ``via`` holds
            ``"newer"``), so there a lower score can come first.
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
            query, best first (what a token budget keeps first); in a superseded hit near the
            top and its successor, the message their ``updates`` link names leads when it is one
            of the two best (``fusion.link_focus_hits``).
        metadata: the message metadata every message in ``source_ids`` shares (a key whose
            value differs between them, or that one of them lacks, is left out); ``{}`` for a
            concept or subtopic, which shows no message.
        message_metadata: message id -> that message's metadata, for the messages in
            ``source_ids`` that carry any.
        excerpted: the messages of ``source_ids`` that ``text`` shows only in part: a token budget
            had no room for the whole message and kept its sentences matching the query.
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
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)
    message_metadata: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False)
    excerpted: tuple[str, ...] = field(default_factory=tuple)

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
            "metadata": dict(self.metadata),
            "message_metadata": {m: dict(md) for m, md in self.message_metadata.items()},
            "excerpted": list(self.excerpted),
        }

    def to_metadata(self) -> dict[str, Any]:
        """Flat metadata for a framework document (LangChain ``Document``, LlamaIndex ``TextNode``).

        Every field of :meth:`to_dict` except ``text`` and ``metadata``, then the shared message
        metadata merged in at the top level, as document stores put their own fields. A message
        key named like a hit field (``score``, ``time``, ...) does not replace that field: it
        stays readable in ``message_metadata``.

        >>> h = MemoryHit("n1", "fragment", "t", ("m1",), 0.9, 0.8, 0.0, (), (), None, "active",
        ...               metadata={"channel": "email", "score": 5},
        ...               message_metadata={"m1": {"channel": "email", "score": 5}})
        >>> md = h.to_metadata()
        >>> md["channel"], md["score"], md["message_metadata"]["m1"]["score"]
        ('email', 0.9, 5)
        """
        md = self.to_dict()
        md.pop("text")
        shared = md.pop("metadata")
        for key, value in shared.items():
            md.setdefault(key, value)
        return md


def metadata_of(messages: Iterable[Message]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``(shared, per message)`` metadata of the messages a hit shows (see :class:`MemoryHit`).

    >>> from mnemis_integrations.core.model import Message
    >>> a = Message("a", "ann", "x", None, metadata={"channel": "email", "n": 1})
    >>> b = Message("b", "bob", "y", None, metadata={"channel": "email", "n": 2})
    >>> metadata_of([a, b])[0]
    {'channel': 'email'}
    """
    shown = list(messages)
    per = {m.id: dict(m.metadata) for m in shown if m.metadata}
    if not per or len(per) < len(shown):
        return {}, per
    first, *rest = per.values()
    shared = {
        k: v
        for k, v in first.items()
        if all(k in md and type(md[k]) is type(v) and md[k] == v for md in rest)
    }
    return shared, per


def said_last(messages: Iterable[Message], default: datetime | None) -> datetime | None:
    """When the latest of the messages a hit shows was said (``default`` when none is dated): the
    time of a hit narrowed to some of its messages.

    >>> from datetime import timezone
    >>> from mnemis_integrations.core.model import Message
    >>> t = datetime(2025, 3, 1, tzinfo=timezone.utc)
    >>> said_last([Message("a", "ann", "x", t), Message("b", "bob", "y", None)], None) == t
    True
    """
    return max((m.timestamp for m in messages if m.timestamp is not None), default=default)
