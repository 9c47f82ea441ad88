"""What a reader LLM sees for each kind of node."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from ..model import Node, NodeKind
from ..state import NamespaceState
from ..temporal import is_overview
from ..text import date_span, format_date

__all__ = ["memory_block", "memory_line", "render"]


def render(
    st: NamespaceState,
    node: Node,
    path: list[str] | tuple[str, ...],
    only: Collection[str] | None = None,
    as_of: datetime | None = None,
    order: Sequence[str] = (),
    excerpts: Mapping[str, str] | None = None,
    headline: bool = True,
) -> tuple[str, tuple[str, ...]]:
    """(text, source ids shown in it).

    A fragment gives its dated summary line and the raw messages it covers (with ``only``:
    just those of them, still in conversation order). A compaction overview spans several
    conversations: it gives their dates and its messages in ``order`` (the search's focus, best
    match first), so a reader meets the lines that answer before the rest. A subtopic or concept
    gives its path and the summaries beneath it (no raw text, so no source ids). With ``as_of``, a
    subtopic sums up only the fragments complete by then, a concept names only the subtopics begun by
    then, and a fragment that grew later shows its date alone: its headline was made from all its
    messages, so a time-travel answer shows no later text. ``headline``: False shows the date alone
    (a budget narrowing a hit that showed none). ``excerpts``: message id -> the text shown for it
    instead of the whole (a budget's excerpt).
    """
    if node.kind == NodeKind.FRAGMENT:
        msgs = st.fragment_messages(node.id)
        later = as_of is not None and any(m.timestamp is not None and m.timestamp > as_of for m in msgs)
        if only is not None:
            msgs = [m for m in msgs if m.id in only]
        when = format_date(msgs[0].timestamp) if msgs and msgs[0].timestamp else ""
        # An offline fragment shows its short headline; a model-written summary is shown whole.
        line = node.properties.get("headline", node.summary) if headline and not later else ""
        if is_overview(node):
            times = [m.timestamp for m in msgs if m.timestamp]
            when = date_span(min(times), max(times)) if times else ""
            line = "overview"
            rank = {m: i for i, m in enumerate(order)}
            msgs = sorted(msgs, key=lambda m: rank.get(m.id, len(rank)))
        head = f"[{when}] {line}".strip() if when else line
        cut = excerpts or {}
        lines = ([head] if head else []) + [f"{m.speaker}: {cut.get(m.id, m.text)}" for m in msgs]
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
        kids = [
            c.label
            for c in st.graph.children(node.id)
            if as_of is None or c.created_at is None or c.created_at <= as_of
        ]
        return f"{node.label}: " + "; ".join(kids[:8]), ()
    return node.label, ()


def memory_line(
    path_str: str,
    text: str,
    *,
    status: str = "active",
    when: datetime | None = None,
    max_chars: int | None = None,
    one_line: bool = False,
) -> str:
    """One recalled memory as a prompt line: ``[path] (status) text (date)``, the status only when not
    active, the date only when given, the text cut at ``max_chars``. Continuation lines are indented
    by two spaces so each memory stays one item of a list; ``one_line`` folds them into one line.

    >>> memory_line("Home > Pets", "Rex is a beagle", status="superseded")
    '[Home > Pets] (superseded) Rex is a beagle'
    >>> print(memory_line("Work", "summary\\nuser: detail"))
    [Work] summary
      user: detail
    >>> memory_line("Work", "summary\\nuser: detail", when=datetime(2025, 3, 2), max_chars=12, one_line=True)
    '[Work] summary user… (2025-03-02)'
    """
    if one_line:
        text = " ".join(text.split())
    else:
        text = "\n  ".join(line.rstrip() for line in text.strip().splitlines() if line.strip())
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars].rstrip() + "…"
    if status and status != "active":
        text = f"({status}) {text}"
    if when is not None:
        text = f"{text} ({when.date().isoformat()})"
    return f"[{path_str}] {text}" if path_str else text


def memory_block(lines: Sequence[str], *, header: str, empty: str = "") -> str:
    """Memory lines as one block under ``header``, one ``- `` item each; ``empty`` when there are none.

    >>> print(memory_block(["[Work] a", "b"], header="Memory:"))
    Memory:
    - [Work] a
    - b
    """
    if not lines:
        return empty
    items = [f"- {line}" for line in lines]
    return "\n".join([header, *items]) if header else "\n".join(items)
