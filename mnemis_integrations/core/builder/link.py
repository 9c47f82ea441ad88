"""Links between nodes: change cues (for `updates`, judged in ``updates.py``), `references`,
entities with their `mentions` and labelled relations.

The decisions are pure functions over plain data (:func:`pick_references`,
:func:`relation_label`); the ``link_*`` functions are the build's link steps that apply them to
a fragment just written.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from itertools import pairwise
from typing import TYPE_CHECKING

from ..changes import has_change_cue
from ..model import Edge, EdgeKind, Message, Node, NodeKind
from ..text import STOPWORDS, names, normalise_name
from .entities import EntityMention
from .relation_sources import READ_FROM, read_again
from .steps import BuildReport

if TYPE_CHECKING:
    from ..state import NamespaceState
    from .prompts import RelationItem

__all__ = [
    "has_change_cue",
    "link_entities",
    "READ_FROM",
    "link_model_relations",
    "link_references",
    "pick_references",
    "relation_label",
]

DISTINCTIVE_MAX_MENTIONS = 256

# Chat roles are not people: they would become entities mentioned by every fragment.
_ROLE_NAMES = frozenset({"user", "assistant", "system", "human", "ai", "bot", "tool"})


def pick_references(
    new_entities: set[str], candidates: list[tuple[str, set[str]]], limit: int, min_shared: int = 1
) -> list[str]:
    """Earlier fragments (in other subtopics) sharing the most distinctive entities.

    >>> pick_references({"a", "b"}, [("f1", {"a"}), ("f2", {"a", "b"}), ("f3", {"c"})], 2)
    ['f2', 'f1']
    """
    scored = Counter({fid: len(ents & new_entities) for fid, ents in candidates})
    return [fid for fid, c in sorted(scored.items(), key=lambda x: (-x[1], x[0])) if c >= min_shared][:limit]


def relation_label(between: str) -> str:
    """Name a relation from the words between two entities in one sentence.

    >>> relation_label(" confirmed the "), relation_label(" and "), relation_label("，确认了")
    ('confirmed', 'related_to', '确认了')
    """
    words = [
        w for w in re.findall(r"[\w'’]+", between.lower()) if w not in STOPWORDS and w not in {"and", "or"}
    ]
    return "_".join(words[:3]) if words else "related_to"


def link_entities(
    st: NamespaceState,
    frag: Node,
    msgs: list[Message],
    ments: list[list[EntityMention]],
    is_new: bool,
    rep: BuildReport,
) -> None:
    """Entities for the speakers and the named things of ``msgs`` (new ones created), the
    relations their sentences state, and ``mentions`` edges from ``frag`` to each."""
    g = st.graph
    ent_ids: list[str] = []
    for m, ms in zip(msgs, ments, strict=True):
        speaker = m.speaker.strip()
        pairs = [(speaker, True)] if speaker and speaker.lower() not in _ROLE_NAMES else []
        pairs += [(em.name, False) for em in ms]
        for name, _ in pairs:
            eid = _entity(st, name, m.timestamp, rep)
            if eid and eid not in ent_ids:
                ent_ids.append(eid)
        _sentence_relations(st, frag, m, ms)
    idx = st.build_index()
    had = set() if is_new else {e.dst for e in g.out_edges(frag.id, EdgeKind.MENTIONS)}
    for eid in ent_ids:
        g.add_edge(Edge(frag.id, eid, EdgeKind.MENTIONS, created_at=frag.event_time))
        if eid not in had:
            idx.mention_added(st, frag, eid)


def _entity(st: NamespaceState, name: str, when: datetime | None, rep: BuildReport) -> str | None:
    eid = st.entities.get(name)
    if eid is not None:
        return eid
    key = normalise_name(name)
    if not key:
        return None
    eid = f"e:{key}"
    if not st.graph.has(eid):
        st.graph.add_node(
            Node(
                id=eid,
                kind=NodeKind.ENTITY,
                label=name,
                namespace=st.namespace,
                created_at=when,
                event_time=when,
            )
        )
        rep.entities_created += 1
    st.entities.add(key, eid)
    return eid


def _sentence_relations(st: NamespaceState, frag: Node, m: Message, ms: list[EntityMention]) -> None:
    """Labelled relations between entities named in one sentence, in reading order."""
    if len(ms) < 2:
        return
    for sent in re.split(r"(?<=[.!?。！？])\s*", m.text):
        found = []
        for em in ms:
            hit = re.search(rf"(?<!\w){re.escape(em.name)}(?!\w)", sent, re.IGNORECASE)
            if hit:
                found.append((hit.start(), em))
        found.sort(key=lambda x: x[0])
        for (pa, a), (pb, b) in pairwise(found):
            if a.key == b.key:
                continue
            ea, eb = st.entities.get(a.key), st.entities.get(b.key)
            if ea and eb:
                label = relation_label(sent[pa + len(a.name) : pb])
                _add_relation(st, frag, ea, eb, label, m.timestamp, [m.id])


def link_model_relations(st: NamespaceState, frag: Node, relations: Sequence[RelationItem]) -> None:
    """The relations the model found in the fragment's segment, between entities it mentions."""
    msgs = st.fragment_messages(frag.id)
    for r in relations:
        a, b = st.entities.get(r.source), st.entities.get(r.target)
        if a and b and a != b:
            label = "_".join(r.relation.lower().split()[:3])
            both = [m.id for m in msgs if names(m.text, r.source) and names(m.text, r.target)]
            _add_relation(st, frag, a, b, label, frag.event_time, both or [m.id for m in msgs])


def _add_relation(
    st: NamespaceState, frag: Node, a: str, b: str, label: str, when: datetime | None, read_from: list[str]
) -> None:
    """The relation a -> b, read (again) from these messages of ``frag``: one edge, which counts
    the messages it was read from while ``frag`` records which they are (``relation_sources``)."""
    prior = st.graph.edge(a, b, EdgeKind.RELATION, label)
    read = read_again(st.graph, frag, (a, b, label), read_from, prior, st.version)
    st.graph.add_edge(Edge(a, b, EdgeKind.RELATION, label=label, created_at=when, properties=read))


def _distinctive(st: NamespaceState, frag_id: str, counts: dict[str, int], n_frag: int) -> set[str]:
    """The entities of a fragment that few others mention: at most a fifth of the fragments, and
    never more than ``DISTINCTIVE_MAX_MENTIONS`` (a name hundreds of fragments share tells none
    of them apart, and intersecting its mention set would cost as much as the memory is large)."""
    limit = min(max(2, int(0.2 * n_frag)), DISTINCTIVE_MAX_MENTIONS)
    return {e.dst for e in st.graph.out_edges(frag_id, EdgeKind.MENTIONS) if counts.get(e.dst, 0) <= limit}


def link_references(st: NamespaceState, frag: Node, limit: int) -> None:
    """``references`` edges to the ``limit`` earlier fragments (in other subtopics) sharing the
    most distinctive entities with this one, ties by id, as :func:`pick_references` ranks them
    (the build index counts the shared entities on its mention sets, not fragment by fragment)."""
    if limit <= 0:
        return
    idx = st.build_index()
    mine = _distinctive(st, frag.id, idx.counts(st, st.mentioned_ids(frag.id)), idx.fragment_count(st))
    if not mine:
        return
    parent = st.parent_id(frag.id)

    def skip(fid: str) -> bool:
        return fid == frag.id or (parent is not None and st.parent_id(fid) == parent)

    for other in idx.references(st, mine, limit, skip):
        st.graph.add_edge(Edge(frag.id, other, EdgeKind.REFERENCES, created_at=frag.created_at))
