"""What a reader LLM sees for each kind of node."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from ..model import Node, NodeKind
from ..state import NamespaceState
from ..text import format_date

__all__ = ["render"]


def render(
    st: NamespaceState,
    node: Node,
    path: list[str] | tuple[str, ...],
    only: Collection[str] | None = None,
    as_of: datetime | None = None,
) -> tuple[str, tuple[str, ...]]:
    """(text, source ids shown in it).

    A fragment gives its dated summary line and the raw messages it covers (with ``only``:
    just those of them, still in conversation order); a subtopic or concept gives its path
    and the summaries beneath it (no raw text, so no source ids). With ``as_of``, a subtopic
    sums up only the fragments complete by then, so a time-travel answer shows no later text.
    """
    if node.kind == NodeKind.FRAGMENT:
        msgs = st.fragment_messages(node.id)
        if only is not None:
            msgs = [m for m in msgs if m.id in only]
        when = format_date(msgs[0].timestamp) if msgs and msgs[0].timestamp else ""
        # An offline fragment shows its short headline; a model-written summary is shown whole.
        line = node.properties.get("headline", node.summary)
        head = f"[{when}] {line}".strip() if when else line
        lines = [head] + [f"{m.speaker}: {m.text}" for m in msgs]
        return "\n".join(lines), tuple(m.id for m in msgs)
    if node.kind == NodeKind.SUBTOPIC and as_of is not None:
        done = [
            k
            for k in st.graph.children(node.id)
            if k.kind == NodeKind.FRAGMENT
            and (k.created_at is None or k.created_at <= as_of)
            and (k.event_time is None or k.event_time <= as_of)
        ]
        summary = "; ".join(k.summary for k in done[-3:])
        return (f"{' > '.join(path)}: {summary}" if summary else " > ".join(path)), ()
    if node.kind in (NodeKind.SUBTOPIC, NodeKind.ARCHIVE):
        return f"{' > '.join(path)}: {node.summary}".strip(), ()
    if node.kind == NodeKind.CONCEPT:
        kids = [c.label for c in st.graph.children(node.id)]
        return f"{node.label}: " + "; ".join(kids[:8]), ()
    return node.label, ()
