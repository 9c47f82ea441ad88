"""Namespace states built by hand (no builder), small enough to follow by eye, for the retrieval
modules' unit tests: the graph is exactly what the test says, so a score can be worked out."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.graph import MemoryGraph
from mnemis_integrations.core.maintenance.supersede import supersede
from mnemis_integrations.core.model import Edge, EdgeKind, Message, Node, NodeKind
from mnemis_integrations.core.state import NamespaceState

EMB = HashingEmbedder()
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)

# Two concepts, three subtopics, six one-message fragments; m<i> is said on day i - 1.
OFFICE = {
    "c_work": {
        "s_billing": {
            "f_refund": ["The refund for order 42 timed out at the bank callback."],
            "f_pricing": ["Acme wants the pricing plan with seats by Friday."],
        },
        "s_hosting": {
            "f_plan_a": ["We prioritise plan A for the hosting migration."],
            "f_plan_b": ["Pause plan A: we switched to plan B for the hosting migration."],
        },
    },
    "c_life": {
        "s_food": {
            "f_lunch": ["Lunch at the noodle place on Friday works."],
            "f_tea": ["Carol wants green tea in the kitchen."],
        },
    },
}


def entity_id(name: str) -> str:
    return f"e_{name.lower()}"


def toy_state(
    tree: dict[str, dict[str, dict[str, list[str]]]] = OFFICE,
    *,
    mentions: dict[str, list[str]] | None = None,
    related: tuple[tuple[str, str], ...] = (),
    updates: tuple[tuple[str, ...], ...] = (),
    speaker: str = "Ann",
) -> NamespaceState:
    """The state of ``tree`` (concept id -> subtopic id -> fragment id -> its message texts).

    Each node's label is its id. Messages are m1, m2, ... in tree order, a day apart; a fragment's
    ``created_at`` is its first message's time and its ``event_time`` its last one's; a parent
    spans its children the same way. ``mentions``: fragment id -> entity names (node
    ``entity_id(name)``); ``related``: entity name pairs joined by a ``relation`` edge;
    ``updates``: (new, old) fragment pairs, ``old`` superseded at ``new``'s time; a pair may add
    the message of ``new`` that replaces one of ``old`` (new, old, replacing id, replaced id).
    """
    ns = "u"
    g = MemoryGraph(ns)
    msgs: list[Message] = []
    for concept, subtopics in tree.items():
        _add(g, concept, NodeKind.CONCEPT)
        for subtopic, fragments in subtopics.items():
            _add(g, subtopic, NodeKind.SUBTOPIC, parent=concept)
            for fragment, texts in fragments.items():
                said = []
                for text in texts:
                    n = len(msgs)
                    msgs.append(Message(f"m{n + 1}", speaker, text, T0 + timedelta(days=n), seq=n))
                    said.append(msgs[-1])
                _add(g, fragment, NodeKind.FRAGMENT, parent=subtopic, said=said)
    for fragment, names in (mentions or {}).items():
        for name in names:
            if not g.has(entity_id(name)):
                g.add_node(Node(entity_id(name), NodeKind.ENTITY, name, ns))
            g.add_edge(Edge(fragment, entity_id(name), EdgeKind.MENTIONS))
    for a, b in related:
        g.add_edge(Edge(entity_id(a), entity_id(b), EdgeKind.RELATION))
    for new, old, *messages in updates:
        replacing, replaced = messages if messages else (None, None)
        supersede(
            g,
            old_id=old,
            new_id=new,
            when=g.get(new).created_at,
            replaced=(replaced,) if replaced else (),
            replaced_by=(replacing,) if replacing else (),
        )
    g.take_changes()
    vecs = EMB.embed_passages([m.text for m in msgs])
    return NamespaceState.restore(ns, EMB.dim, g, msgs, [m.id for m in msgs], vecs)


def _add(g: MemoryGraph, nid: str, kind: NodeKind, *, parent: str | None = None, said=()) -> None:
    g.add_node(
        Node(
            nid,
            kind,
            nid,
            g.namespace,
            summary=" ".join(m.text for m in said) or nid,
            source_ids=[m.id for m in said],
            created_at=said[0].timestamp if said else None,
            event_time=said[-1].timestamp if said else None,
        )
    )
    if parent is not None:
        g.add_edge(Edge(nid, parent, EdgeKind.BELONGS_TO))
        _span(g, parent, said)


def _span(g: MemoryGraph, nid: str, said) -> None:
    """Widen ``nid`` and its ancestors' times to cover ``said``."""
    if not said:
        return
    node = g.get(nid)
    if node.created_at is None or said[0].timestamp < node.created_at:
        node.created_at = said[0].timestamp
    if node.event_time is None or said[-1].timestamp > node.event_time:
        node.event_time = said[-1].timestamp
    up = g.parent(nid)
    if up is not None:
        _span(g, up.id, said)


def hierarchy(st: NamespaceState) -> set[str]:
    """Every concept, subtopic and fragment id: what a search without ``as_of`` may return."""
    kinds = (NodeKind.CONCEPT, NodeKind.SUBTOPIC, NodeKind.FRAGMENT)
    return {n.id for n in st.graph.nodes() if n.kind in kinds}
