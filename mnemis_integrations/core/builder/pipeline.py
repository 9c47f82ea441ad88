"""Incremental offline building: segment -> summarise -> abstract -> link.

New messages attach to the existing hierarchy: the last open segment may be
continued, new fragments join existing subtopics, new subtopics join existing
concepts. No LLM and no extra embedding: every hierarchy vector is a centroid of
the message vectors already computed.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ..config import BuildConfig
from ..embedders import EmbedderProfile
from ..maintenance.supersede import supersede
from ..model import Edge, EdgeKind, Message, Node, NodeKind, Status
from ..state import NamespaceState
from ..text import content_words, normalise_name
from ..tokens import count_tokens
from .abstract import Placement, ReviewHook, accept_all, choose_parent, label_from_keywords
from .entities import EntityMention, extract_entities
from .link import has_change_cue, pick_references, pick_superseded_many, relation_label
from .segment import segment
from .summarise import fragment_label, headline, keywords_for, summary_line

__all__ = ["BuildReport", "OfflineBuilder"]


@dataclass
class BuildReport:
    fragments_created: int = 0
    fragments_extended: int = 0
    subtopics_created: int = 0
    concepts_created: int = 0
    entities_created: int = 0
    updates_linked: int = 0
    touched: set[str] = field(default_factory=set)


# Chat roles are not people: they would become entities mentioned by every fragment.
_ROLE_NAMES = frozenset({"user", "assistant", "system", "human", "ai", "bot", "tool"})


def _ts_key(m: Message):
    return (m.timestamp is None, m.timestamp.timestamp() if m.timestamp else 0.0, m.seq)


class OfflineBuilder:
    """Deterministic builder; the same inputs always give the same graph."""

    def __init__(self, config: BuildConfig, profile: EmbedderProfile, review: ReviewHook = accept_all):
        self.cfg = config
        self.profile = profile
        self.review = review

    def _t(self, name: str) -> float:
        v = getattr(self.cfg, name)
        return v if v is not None else getattr(self.profile, name)

    # ---------------------------------------------------------------- entry point
    def ingest(self, st: NamespaceState, new: list[Message], vectors: np.ndarray) -> BuildReport:
        rep = BuildReport()
        new, vectors = self._accept_messages(st, new, vectors)

        tail_frag = self._open_tail(st, new)
        tail = None
        if tail_frag is not None:
            tmsgs = st.fragment_messages(tail_frag.id)
            tail = (tmsgs, st.msg_vectors.get_many([m.id for m in tmsgs]))
        segments = segment(
            new,
            vectors,
            max_messages=self.cfg.max_segment_messages,
            min_messages=self.cfg.min_segment_messages,
            time_gap_minutes=self.cfg.time_gap_minutes,
            drift_threshold=self._t("drift_threshold"),
            tail=tail,
            max_tokens=self.cfg.max_segment_tokens,
            count_tokens=count_tokens,
        )
        mentions = extract_entities([m.text for m in new], known=st.entities.keys())
        for seg in segments:
            if seg and seg[0] == -1:
                idx = seg[1:]
                frag = tail_frag
                rep.fragments_extended += 1
            else:
                idx = seg
                frag = None
            msgs = [new[i] for i in idx]
            ments = [mentions[i] for i in idx]
            self._add_fragment(st, frag, msgs, ments, rep)
        self._relabel(st, rep)
        return rep

    @staticmethod
    def _accept_messages(st: NamespaceState, new: list[Message], vectors: np.ndarray) -> tuple[list[Message], np.ndarray]:
        """Put new messages, in time order, into the state's message table and indexes."""
        order = sorted(range(len(new)), key=lambda i: _ts_key(new[i]))
        new = [new[i] for i in order]
        vectors = vectors[order] if len(order) else vectors
        for m in new:
            st.messages[m.id] = m
        st.msg_vectors.upsert([m.id for m in new], vectors)
        st.lexical.add([m.id for m in new], [m.text for m in new])
        return new, vectors

    # ---------------------------------------------------------------- fragments
    def _open_tail(self, st: NamespaceState, new: list[Message]) -> Node | None:
        """The latest fragment, if the new messages may continue it (it ends the stream and is not full)."""
        if not new or not st.messages:
            return None
        # A compaction overview is never continued: its messages must stay those of its originals.
        frags = [f for f in st.graph.nodes(NodeKind.FRAGMENT) if f.status == Status.ACTIVE and "overview_of" not in f.properties]
        if not frags:
            return None
        last = max(frags, key=lambda f: (f.event_time is None, f.event_time.timestamp() if f.event_time else 0, f.id))
        last_msgs = st.fragment_messages(last.id)
        if not last_msgs or len(last_msgs) >= self.cfg.max_segment_messages:
            return None
        if _ts_key(last_msgs[-1]) > _ts_key(new[0]):
            return None  # out-of-order arrival: start a fresh fragment rather than rewrite history
        return last

    def _add_fragment(
        self, st: NamespaceState, frag: Node | None, msgs: list[Message], ments: list[list[EntityMention]], rep: BuildReport
    ) -> None:
        g = st.graph
        is_new = frag is None
        if is_new:
            fid = f"f:{msgs[0].id}"
            frag = Node(
                id=fid,
                kind=NodeKind.FRAGMENT,
                label="",
                namespace=st.namespace,
                created_at=msgs[0].timestamp,
                event_time=msgs[-1].timestamp,
            )
            g.add_node(frag)
            rep.fragments_created += 1
            old_tokens: set[str] = set()
        else:
            old_tokens = set(content_words(" ".join(m.text for m in st.fragment_messages(frag.id))))
        frag.source_ids = list(dict.fromkeys(frag.source_ids + [m.id for m in msgs]))
        frag.event_time = msgs[-1].timestamp or frag.event_time
        for m in msgs:
            st.msg_fragment[m.id] = frag.id
        all_msgs = st.fragment_messages(frag.id)
        tokens = set(content_words(" ".join(m.text for m in all_msgs)))
        st.df.update(tokens - old_tokens)
        n_frag = max(1, len(g.nodes(NodeKind.FRAGMENT)))
        frag.keywords = keywords_for([m.text for m in all_msgs], st.df, n_frag, self.cfg.keywords_per_fragment)

        # entities: speakers and named things
        ent_ids: list[str] = []
        for m, ms in zip(msgs, ments):
            speaker = m.speaker.strip()
            pairs = [(speaker, True)] if speaker and speaker.lower() not in _ROLE_NAMES else []
            pairs += [(em.name, False) for em in ms]
            for name, _ in pairs:
                eid = self._entity(st, name, m.timestamp, rep)
                if eid and eid not in ent_ids:
                    ent_ids.append(eid)
            self._relations(st, m, ms)
        for eid in ent_ids:
            g.add_edge(Edge(frag.id, eid, EdgeKind.MENTIONS, created_at=frag.event_time))
        mentioned = [g.get(e.dst).label for e in g.out_edges(frag.id, EdgeKind.MENTIONS)]
        frag.summary = summary_line(all_msgs, mentioned, frag.keywords)
        frag.properties["headline"] = headline(frag.summary, self.cfg.headline_terms)
        frag.label = fragment_label(frag.keywords, frag.created_at)
        st.refresh_vectors([frag.id])
        rep.touched.add(frag.id)

        if is_new:
            self._place(st, frag, rep)
            self._link_updates(st, frag, all_msgs, rep)
            self._link_references(st, frag)
        parent = g.parent(frag.id)
        if parent is not None:
            rep.touched.add(parent.id)
            st.refresh_vectors([parent.id])
            grand = g.parent(parent.id)
            if grand is not None:
                rep.touched.add(grand.id)
                st.refresh_vectors([grand.id])

    def _entity(self, st: NamespaceState, name: str, when: datetime | None, rep: BuildReport) -> str | None:
        eid = st.entities.get(name)
        if eid is not None:
            return eid
        key = normalise_name(name)
        if not key:
            return None
        eid = f"e:{key}"
        if not st.graph.has(eid):
            st.graph.add_node(
                Node(id=eid, kind=NodeKind.ENTITY, label=name, namespace=st.namespace, created_at=when, event_time=when)
            )
            rep.entities_created += 1
        st.entities.add(key, eid)
        return eid

    def _relations(self, st: NamespaceState, m: Message, ms: list[EntityMention]) -> None:
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
            for (pa, a), (pb, b) in zip(found, found[1:]):
                if a.key == b.key:
                    continue
                ea, eb = st.entities.get(a.key), st.entities.get(b.key)
                if ea and eb:
                    label = relation_label(sent[pa + len(a.name) : pb])
                    st.graph.add_edge(Edge(ea, eb, EdgeKind.RELATION, label=label, created_at=m.timestamp))

    # ---------------------------------------------------------------- hierarchy
    def _place(self, st: NamespaceState, frag: Node, rep: BuildReport) -> None:
        g = st.graph
        v = st.node_vectors.get(frag.id)
        subs = [s for s in g.nodes(NodeKind.SUBTOPIC) if s.id in st.node_vectors]
        sid, sim = choose_parent(
            v,
            [s.id for s in subs],
            st.node_vectors.get_many([s.id for s in subs]),
            [len(g.children(s.id)) for s in subs],
            self._t("subtopic_threshold"),
            self.cfg.max_subtopic_fragments,
        )
        p = self.review(Placement(frag.id, "subtopic", sid, sim, g.get(sid).label if sid else ", ".join(frag.keywords[:2])))
        sid = p.parent_id
        if sid is None or not g.has(sid):
            sid = f"s:{frag.id[2:]}"
            g.add_node(
                Node(id=sid, kind=NodeKind.SUBTOPIC, label=p.label or "misc", namespace=st.namespace,
                     created_at=frag.created_at, event_time=frag.event_time)
            )
            rep.subtopics_created += 1
            g.add_edge(Edge(frag.id, sid, EdgeKind.BELONGS_TO, created_at=frag.created_at))
            st.refresh_vectors([sid])
            self._place_subtopic(st, g.get(sid), rep)
        else:
            g.add_edge(Edge(frag.id, sid, EdgeKind.BELONGS_TO, created_at=frag.created_at))
        rep.touched.add(sid)

    def _place_subtopic(self, st: NamespaceState, sub: Node, rep: BuildReport) -> None:
        g = st.graph
        v = st.node_vectors.get(sub.id)
        cons = [c for c in g.nodes(NodeKind.CONCEPT) if c.id in st.node_vectors]
        cid, sim = choose_parent(
            v,
            [c.id for c in cons],
            st.node_vectors.get_many([c.id for c in cons]),
            [len(g.children(c.id)) for c in cons],
            self._t("concept_threshold"),
            self.cfg.max_concept_subtopics,
        )
        p = self.review(Placement(sub.id, "concept", cid, sim, g.get(cid).label if cid else sub.label))
        cid = p.parent_id
        if cid is None or not g.has(cid):
            cid = f"c:{sub.id[2:]}"
            g.add_node(
                Node(id=cid, kind=NodeKind.CONCEPT, label=p.label or "misc", namespace=st.namespace,
                     created_at=sub.created_at, event_time=sub.event_time)
            )
            rep.concepts_created += 1
        g.add_edge(Edge(sub.id, cid, EdgeKind.BELONGS_TO, created_at=sub.created_at))
        st.refresh_vectors([cid])
        rep.touched.add(cid)

    def _relabel(self, st: NamespaceState, rep: BuildReport) -> None:
        g = st.graph
        speakers = {m.speaker.lower() for m in st.messages.values()}
        touched = [g.get(n) for n in rep.touched if g.has(n)]
        for node in sorted(touched, key=lambda n: n.kind != NodeKind.SUBTOPIC):
            if node.kind not in (NodeKind.SUBTOPIC, NodeKind.CONCEPT):
                continue
            kids = g.children(node.id)
            if node.kind == NodeKind.CONCEPT:
                kw_lists = [kw for s in kids for kw in [self._subtopic_keywords(st, s.id)]]
                node.label = label_from_keywords(kw_lists, top=1, exclude=lambda k: k in speakers).title()
            else:
                node.label = label_from_keywords([f.keywords for f in kids], top=2, exclude=lambda k: k in speakers)
                node.keywords = self._subtopic_keywords(st, node.id)
                node.summary = "; ".join(f.summary for f in kids[-3:])
            times = [k.event_time for k in kids if k.event_time]
            if times:
                node.event_time = max(times)

    @staticmethod
    def _subtopic_keywords(st: NamespaceState, sid: str) -> list[str]:
        c: Counter = Counter()
        for f in st.graph.children(sid):
            for r, kw in enumerate(f.keywords):
                c[kw] += 1.0 / (1 + r)
        return [k for k, _ in sorted(c.items(), key=lambda x: (-x[1], x[0]))[:6]]

    # ---------------------------------------------------------------- links
    def _distinctive(self, st: NamespaceState, frag_id: str, counts: dict[str, int], n_frag: int) -> set[str]:
        limit = max(2, int(0.2 * n_frag))
        return {e.dst for e in st.graph.out_edges(frag_id, EdgeKind.MENTIONS) if counts.get(e.dst, 0) <= limit}

    def _link_updates(self, st: NamespaceState, frag: Node, msgs: list[Message], rep: BuildReport) -> None:
        cue_ids = [m.id for m in msgs if has_change_cue(m.text)]
        if not cue_ids:
            return
        g = st.graph
        frags = [f for f in g.nodes(NodeKind.FRAGMENT) if f.id != frag.id and f.status == Status.ACTIVE]
        if not frags:
            return
        counts = st.entity_fragment_counts()
        n = len(frags) + 1
        mine = self._distinctive(st, frag.id, counts, n)
        parent = g.parent(frag.id)
        cands = []
        for f in frags:
            if f.event_time and frag.created_at and f.event_time > frag.created_at:
                continue
            keys = [m for m in f.source_ids if m in st.msg_vectors]
            fp = g.parent(f.id)
            cands.append((f.id, st.msg_vectors.get_many(keys), self._distinctive(st, f.id, counts, n),
                          parent is not None and fp is not None and fp.id == parent.id))
        olds = pick_superseded_many(st.msg_vectors.get_many(cue_ids), mine, cands, self._t("update_threshold"))
        if olds:
            for old in olds:
                supersede(g, old_id=old, new_id=frag.id, when=frag.created_at)
            rep.updates_linked += len(olds)

    def _link_references(self, st: NamespaceState, frag: Node) -> None:
        if self.cfg.references_per_fragment <= 0:
            return
        g = st.graph
        counts = st.entity_fragment_counts()
        frags = g.nodes(NodeKind.FRAGMENT)
        mine = self._distinctive(st, frag.id, counts, len(frags))
        if not mine:
            return
        parent = g.parent(frag.id)
        cands = []
        for eid in mine:
            for e in g.in_edges(eid, EdgeKind.MENTIONS):
                if e.src == frag.id:
                    continue
                fp = g.parent(e.src)
                if parent is not None and fp is not None and fp.id == parent.id:
                    continue
                cands.append(e.src)
        cand_sets = [(fid, self._distinctive(st, fid, counts, len(frags))) for fid in dict.fromkeys(cands)]
        for other in pick_references(mine, cand_sets, self.cfg.references_per_fragment):
            g.add_edge(Edge(frag.id, other, EdgeKind.REFERENCES, created_at=frag.created_at))
