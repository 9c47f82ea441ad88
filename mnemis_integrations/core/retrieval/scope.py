"""What a filtered search may return: the messages a metadata filter lets through, and the nodes
that hold them.

A fragment covers several messages, so a filter is applied per message:

- a message is *in scope* when its metadata matches the filter (and, with ``as_of``, it was said
  by then, or is undated);
- a fragment is kept when at least one of its messages is in scope, and it shows (text,
  ``source_ids``, metadata, and the message-level evidence its score is built from) only those;
- a subtopic, concept or archive node is kept when a fragment beneath it is.

The scope narrows the visible set before either path runs, so ranking, top-up and budget fitting
work inside it and ``k`` results still come back when the scope holds that many. What a fragment
is as a whole (its centroid, its summary line, the entities it mentions) stays computed over all
its messages: a filter selects evidence, it is not an access boundary (namespaces are).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..filters import MetadataFilter
from ..model import Node, NodeKind
from ..state import NamespaceState
from .cache import is_large, memo

__all__ = ["Scope", "scope_of"]


@dataclass(frozen=True)
class Scope:
    messages: frozenset[str]
    nodes: frozenset[str]

    def shown(self, node: Node) -> set[str] | None:
        """The messages of a fragment a hit may show; ``None`` for other kinds (they show none)."""
        if node.kind != NodeKind.FRAGMENT:
            return None
        return {m for m in node.source_ids if m in self.messages}


def scope_of(st: NamespaceState, flt: MetadataFilter, as_of: datetime | None) -> Scope:
    """The scope of ``flt`` in ``st`` (memoised per write version on large graphs, like the visible set)."""
    if is_large(st):
        return memo(st, "scope", (flt.key, as_of), lambda: _compute(st, flt, as_of))
    return _compute(st, flt, as_of)


def _compute(st: NamespaceState, flt: MetadataFilter, as_of: datetime | None) -> Scope:
    messages = frozenset(
        m.id
        for m in st.messages.values()
        if flt.matches(m.metadata) and (as_of is None or m.timestamp is None or m.timestamp <= as_of)
    )
    nodes: set[str] = set()
    for frag in st.graph.nodes(NodeKind.FRAGMENT):
        if not any(m in messages for m in frag.source_ids):
            continue
        nid: str | None = frag.id
        while nid is not None and nid not in nodes:
            nodes.add(nid)
            nid = st.parent_id(nid)
    return Scope(messages, frozenset(nodes))
