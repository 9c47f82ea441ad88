"""Incremental offline building: segment -> summarise -> abstract -> link.

New messages attach to the existing hierarchy: the last open segment may be
continued, new fragments join existing subtopics, new subtopics join existing
concepts. No LLM and no extra embedding: every hierarchy vector is a centroid of
the message vectors already computed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from ..config import BuildConfig
from ..embedders import EmbedderProfile
from ..indexes.incremental import full_group
from ..maintenance.supersede import supersede
from ..model import Edge, EdgeKind, Message, Node, NodeKind, Status
from ..state import NamespaceState
from ..text import content_words, normalise_name
from ..tokens import count_tokens
from .abstract import Placement, ReviewHook, accept_all, choose_parent, label_from_keywords
from .entities import EntityMention, extract_entities
from .link import relation_label
from .segment import segment
from .summarise import TOPIC_WORDS, fragment_label, headline, keywords_for, summary_line, topic_words
from .updates import POOL, Earlier, replaced

__all__ = ["BuildReport", "OfflineBuilder"]

# Every lookup a new fragment makes is bounded, whatever the size of the namespace: it asks a
# nearest-neighbour search for a few candidates, or the build index's per-entity sets, instead of
# scanning every node. Placement and update linking widen their candidates (x4) only while a
# candidate not yet seen could still change the decision, so they decide as a scan of the whole
# namespace would, up to the caps below (never reached on LoCoMo or the scenario suite; on 20k
# cycled LoCoMo turns, i.e. every conversation 7 times over, placement met its cap 30 times).
PLACE_CANDIDATES = 32  # nearest subtopics (concepts) first offered to choose_parent: parents are few
# and rarely full, so the nearest non-full one above the threshold is almost always among them
PLACE_MAX_CANDIDATES = 512  # past this many parents none of which is chosen, a new parent is founded
DISTINCTIVE_MAX_MENTIONS = 256
OVERLAP_MAX_DF = 256  # update judgement follows only words held by at most this many messages
_EPS = 1e-4  # faiss and numpy may round a cosine differently: the bounds keep this much slack


class _Level(NamedTuple):
    name: str  # as the review hook sees it
    prefix: str  # of a founded parent's id
    threshold: str  # the BuildConfig / profile setting
    capacity: str  # the BuildConfig limit of children
    counter: str  # the BuildReport count of founded parents


_LEVELS = {
    NodeKind.SUBTOPIC: _Level(
        "subtopic", "s", "subtopic_threshold", "max_subtopic_fragments", "subtopics_created"
    ),
    NodeKind.CONCEPT: _Level(
        "concept", "c", "concept_threshold", "max_concept_subtopics", "concepts_created"
    ),
}


@dataclass
class BuildReport:
    fragments_created: int = 0
    fragments_extended: int = 0
    subtopics_created: int = 0
    concepts_created: int = 0
    entities_created: int = 0
    updates_linked: int = 0
    touched: set[str] = field(default_factory=set)


# Who named a node, in ``properties["named_by"]``, when its label must survive relabelling.
CURATED_NAMES = ("llm", "review")

# Chat roles are not people: they would become entities mentioned by every fragment.
_ROLE_NAMES = frozenset({"user", "assistant", "system", "human", "ai", "bot", "tool"})


def _topic_words(node: Node) -> list[str]:
    """What a fragment is about, for its parents' labels (its keywords when it was built without them)."""
    return node.properties.get(TOPIC_WORDS) or node.keywords


def _ts_key(m: Message):
    return (m.timestamp is None, m.timestamp.timestamp() if m.timestamp else 0.0, m.seq)


class OfflineBuilder:
    """Deterministic builder; the same inputs always give the same graph."""

    def __init__(self, config: BuildConfig, profile: EmbedderProfile, review: ReviewHook = accept_all):
        self.cfg = config
        self.profile = profile
        self.review = review
        self._unbuilt: tuple = (0.0, 0)  # during ingest: batch vectors not built yet (sum, count)

    def _t(self, name: str) -> float:
        v = getattr(self.cfg, name)
        return v if v is not None else getattr(self.profile, name)

    # ---------------------------------------------------------------- entry point
    def ingest(self, st: NamespaceState, new: list[Message], vectors: np.ndarray) -> BuildReport:
        rep = BuildReport()
        new, vectors = self._accept_messages(st, new, vectors)
        st.build_index().set_capacity(
            st,
            {
                NodeKind.SUBTOPIC: self.cfg.max_subtopic_fragments,
                NodeKind.CONCEPT: self.cfg.max_concept_subtopics,
            },
        )
        # (sum, count) of the batch's vectors whose messages are not built yet: see _centre
        self._unbuilt = (np.asarray(vectors, np.float64).sum(axis=0), len(new))

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
        mentions = extract_entities([m.text for m in new], known=st.entities.names())  # type: ignore[arg-type]
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
            later, k = self._unbuilt
            self._unbuilt = (later - np.asarray(vectors[idx], np.float64).sum(axis=0), k - len(idx))
            self._add_fragment(st, frag, msgs, ments, rep)
        self._relabel(st, rep)
        return rep

    @staticmethod
    def _accept_messages(
        st: NamespaceState, new: list[Message], vectors: np.ndarray
    ) -> tuple[list[Message], np.ndarray]:
        """Put new messages, in time order, into the state's message table and indexes."""
        idx = st.build_index(starting=True)
        idx.ingesting = True
        order = sorted(range(len(new)), key=lambda i: _ts_key(new[i]))
        new = [new[i] for i in order]
        vectors = vectors[order] if len(order) else vectors
        idx.messages_added([m for m in new if m.id not in st.messages])
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
        # The latest active fragment by (event time, id), never a compaction overview (its messages
        # must stay those of its originals); kept up to date by the build index, not searched for.
        last = st.build_index().open_tail(st)
        if last is None:
            return None
        last_msgs = st.fragment_messages(last.id)
        if not last_msgs or len(last_msgs) >= self.cfg.max_segment_messages:
            return None
        if _ts_key(last_msgs[-1]) > _ts_key(new[0]):
            return None  # out-of-order arrival: start a fresh fragment rather than rewrite history
        return last

    def _add_fragment(
        self,
        st: NamespaceState,
        frag: Node | None,
        msgs: list[Message],
        ments: list[list[EntityMention]],
        rep: BuildReport,
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
        idx = st.build_index()
        frag.source_ids = list(dict.fromkeys(frag.source_ids + [m.id for m in msgs]))
        frag.event_time = msgs[-1].timestamp or frag.event_time
        idx.fragment_written(st, frag, created=is_new)
        for m in msgs:
            st.msg_fragment[m.id] = frag.id
        all_msgs = st.fragment_messages(frag.id)
        tokens = set(content_words(" ".join(m.text for m in all_msgs)))
        st.df.update(tokens - old_tokens)
        n_frag = max(1, idx.fragment_count(st))
        frag.keywords = keywords_for(
            [m.text for m in all_msgs], st.df, n_frag, self.cfg.keywords_per_fragment
        )
        frag.properties[TOPIC_WORDS] = topic_words(
            [m.text for m in all_msgs], st.df, n_frag, self.cfg.keywords_per_fragment
        )
        g.touch(frag.id)

        # entities: speakers and named things
        ent_ids: list[str] = []
        for m, ms in zip(msgs, ments, strict=True):
            speaker = m.speaker.strip()
            pairs = [(speaker, True)] if speaker and speaker.lower() not in _ROLE_NAMES else []
            pairs += [(em.name, False) for em in ms]
            for name, _ in pairs:
                eid = self._entity(st, name, m.timestamp, rep)
                if eid and eid not in ent_ids:
                    ent_ids.append(eid)
            self._relations(st, m, ms)
        had = set() if is_new else {e.dst for e in g.out_edges(frag.id, EdgeKind.MENTIONS)}
        for eid in ent_ids:
            g.add_edge(Edge(frag.id, eid, EdgeKind.MENTIONS, created_at=frag.event_time))
            if eid not in had:
                idx.mention_added(st, frag, eid)
        mentioned = [g.get(e.dst).label for e in g.out_edges(frag.id, EdgeKind.MENTIONS)]
        frag.summary = summary_line(all_msgs, mentioned, frag.keywords)
        frag.properties["headline"] = headline(frag.summary, self.cfg.headline_terms)
        frag.label = fragment_label(frag.keywords, frag.created_at)
        st.refresh_vectors([frag.id])
        rep.touched.add(frag.id)

        if is_new:
            self._place(st, frag, rep)
        self._link_updates(st, frag, msgs, rep)
        if is_new:
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
            for (pa, a), (pb, b) in pairwise(found):
                if a.key == b.key:
                    continue
                ea, eb = st.entities.get(a.key), st.entities.get(b.key)
                if ea and eb:
                    label = relation_label(sent[pa + len(a.name) : pb])
                    st.graph.add_edge(Edge(ea, eb, EdgeKind.RELATION, label=label, created_at=m.timestamp))

    # ---------------------------------------------------------------- hierarchy
    def _place(self, st: NamespaceState, frag: Node, rep: BuildReport) -> None:
        """Put a new fragment under a subtopic (founding one, itself put under a concept, if none fits)."""
        self._place_under(st, frag, NodeKind.SUBTOPIC, ", ".join(frag.keywords[:2]), rep)

    def _place_under(
        self, st: NamespaceState, child: Node, kind: NodeKind, label: str, rep: BuildReport
    ) -> None:
        """One level of placement: the nearest parent of ``kind`` that can take ``child``, as the
        review hook confirms it, or a new parent (labelled ``label`` unless the hook names it); a
        new subtopic is then placed under a concept the same way."""
        g = st.graph
        level = _LEVELS[kind]
        threshold, capacity = self._t(level.threshold), getattr(self.cfg, level.capacity)
        pid, sim = self._nearest_parent(st, st.node_vectors.get(child.id), kind, threshold, capacity)
        p = self.review(Placement(child.id, level.name, pid, sim, g.get(pid).label if pid else label))
        pid = p.parent_id
        founded = pid is None or not g.has(pid)
        if founded:
            pid = f"{level.prefix}:{child.id[2:]}"
            g.add_node(
                Node(
                    id=pid,
                    kind=kind,
                    label=p.label or "misc",
                    namespace=st.namespace,
                    created_at=child.created_at,
                    event_time=child.event_time,
                )
            )
            setattr(rep, level.counter, getattr(rep, level.counter) + 1)
        g.add_edge(Edge(child.id, pid, EdgeKind.BELONGS_TO, created_at=child.created_at))
        # counted before the parent's vector is written next: that write may move a full parent out
        st.build_index().child_added(pid)
        if kind == NodeKind.CONCEPT or founded:
            st.refresh_vectors([pid])  # an existing subtopic's vector is written after its new fragment's
        if kind == NodeKind.SUBTOPIC and founded:
            sub = g.get(pid)
            self._place_under(st, sub, NodeKind.CONCEPT, sub.label, rep)
        rep.touched.add(pid)

    def _nearest_parent(
        self, st: NamespaceState, vector: np.ndarray, kind: NodeKind, threshold: float, max_size: int
    ) -> tuple[str | None, float]:
        """``choose_parent`` over the nodes of ``kind`` nearest to ``vector`` (not over all of them).

        Raw (the profile's default): the nearest ``PLACE_CANDIDATES`` parents clearing the
        threshold are scored exactly; only when every one of them is full are more asked for (x4,
        up to ``PLACE_MAX_CANDIDATES``), so the choice is the one a scan of every parent makes: the
        most similar non-full one.

        Centred (``centred_placement``): similarities are taken from the namespace's centre as it
        stood when the fragment's last message arrived (:meth:`_centre`). e5-style embedders put
        every text of a conversation near one direction, where raw cosines cannot tell topics
        apart and fragments filled the same few parents in turn (time buckets, not topics). The
        raw-nearest ``PLACE_CANDIDATES`` parents are scored first, more (x4, up to the cap) while
        none is chosen: a parent ranked low by raw cosine but high centred can be missed.
        """
        idx = st.build_index()
        idx.ready(st)  # node vectors are grouped by kind from here on

        def size(pid: str) -> int:  # asked only of parents clearing the threshold, most similar first
            return idx.child_count(st, pid)

        centred = bool(self._t("centred_placement"))
        centre = self._centre(st) if centred else None
        query = st.centred(vector[None, :], centre)[0] if centred else vector
        floor = None if centred else threshold - _EPS  # no raw floor for a centred threshold
        n = PLACE_CANDIDATES
        while True:
            found = st.node_vectors.nearest(vector, n, min_score=floor, group=kind.value)
            # The window is the n raw-nearest parents, full ones included, as a scan of every parent
            # ranks them; its open parents are the candidates. Full parents are kept apart and only
            # their scores read, so none is visited one by one (at 100k most parents are full).
            full = st.node_vectors.top_scores(vector, n, group=full_group(kind))
            if floor is not None:
                full = full[full >= floor]
            in_window = min(n, len(found) + len(full))
            if len(found) + len(full) > n:
                edge = np.sort(np.concatenate([np.array([s for _, s in found], np.float32), full]))[-n]
                found = [(k, s) for k, s in found if s >= edge]
            ids = [k for k, _ in found]
            parents = st.node_vectors.get_many(ids)
            if centred and ids:
                parents = st.centred(parents, centre)
            pid, sim = choose_parent(query, ids, parents, size, threshold, max_size)
            if pid is not None or in_window < n or n >= PLACE_MAX_CANDIDATES:
                return pid, sim
            n = min(4 * n, PLACE_MAX_CANDIDATES)

    def _centre(self, st: NamespaceState) -> np.ndarray:
        """The mean vector of the namespace's messages up to the one being built: the whole message
        index less the batch messages not built yet, so one batch places as message-by-message does."""
        total, n = st.msg_vectors.mean() * len(st.msg_vectors), len(st.msg_vectors)
        later, k = self._unbuilt
        return (total - later) / max(n - k, 1)

    def _relabel(self, st: NamespaceState, rep: BuildReport) -> None:
        g = st.graph
        idx = st.build_index()
        speakers = idx.speakers(st)
        touched = [g.get(n) for n in rep.touched if g.has(n)]
        for node in sorted(touched, key=lambda n: n.kind != NodeKind.SUBTOPIC):
            if node.kind not in (NodeKind.SUBTOPIC, NodeKind.CONCEPT):
                continue
            kids = g.children(node.id)
            # A name a reviewer or the model gave stays; keywords, summaries and times are refreshed.
            named = node.properties.get("named_by") in CURATED_NAMES
            if node.kind == NodeKind.CONCEPT:
                if not named:
                    words = [self._ranked(st, s.id, _topic_words) for s in kids]
                    node.label = label_from_keywords(words, top=1, exclude=lambda k: k in speakers).title()
            else:
                if not named:
                    node.label = label_from_keywords(
                        [_topic_words(f) for f in kids], top=2, exclude=lambda k: k in speakers
                    )
                node.keywords = self._subtopic_keywords(st, node.id)
                node.summary = "; ".join(f.summary for f in kids[-3:])
            times = [k.event_time for k in kids if k.event_time]
            if times:
                node.event_time = max(times)
        # A builder extending this one may supersede by itself: the new fragments' targets leave the
        # active set.
        idx.status_changed(
            st, [e.dst for n in rep.touched if g.has(n) for e in g.out_edges(n, EdgeKind.UPDATES)]
        )
        idx.settle(st)

    @staticmethod
    def _subtopic_keywords(st: NamespaceState, sid: str) -> list[str]:
        return OfflineBuilder._ranked(st, sid, lambda f: f.keywords)

    @staticmethod
    def _ranked(st: NamespaceState, sid: str, words_of: Callable[[Node], list[str]]) -> list[str]:
        """The words of a subtopic's fragments (``words_of``), the most shared first (earlier ranks
        weigh more)."""
        c: Counter = Counter()
        for f in st.graph.children(sid):
            for r, kw in enumerate(words_of(f)):
                c[kw] += 1.0 / (1 + r)
        return [k for k, _ in sorted(c.items(), key=lambda x: (-x[1], x[0]))[:6]]

    # ---------------------------------------------------------------- links
    def _distinctive(self, st: NamespaceState, frag_id: str, counts: dict[str, int], n_frag: int) -> set[str]:
        """The entities of a fragment that few others mention: at most a fifth of the fragments, and
        never more than ``DISTINCTIVE_MAX_MENTIONS`` (a name hundreds of fragments share tells none
        of them apart, and intersecting its mention set would cost as much as the memory is large)."""
        limit = min(max(2, int(0.2 * n_frag)), DISTINCTIVE_MAX_MENTIONS)
        return {
            e.dst for e in st.graph.out_edges(frag_id, EdgeKind.MENTIONS) if counts.get(e.dst, 0) <= limit
        }

    def _link_updates(self, st: NamespaceState, frag: Node, msgs: list[Message], rep: BuildReport) -> None:
        """Supersede the earlier fragments whose messages the new messages ``msgs`` (of ``frag``) replace.

        Each new message is judged against its nearest earlier messages by vector and by word
        overlap (:func:`updates.replaced`); its best-scoring candidate, if it clears
        ``update_min_score``, retires the active fragment holding it. A best candidate in this
        same fragment means the change happened inside it: nothing is linked. Both lookups are
        bounded (``POOL`` neighbours, rare words only), whatever the size of the namespace.
        """
        g = st.graph
        idx = st.build_index()
        own = set(frag.source_ids)
        olds: list[str] = []
        for m in msgs:
            if m.id not in st.msg_vectors or m.id not in st.lexical:
                continue
            said = _ts_key(m)

            def earlier(mid: str, m: Message = m, said: tuple = said) -> bool:
                other = st.messages.get(mid)
                return other is not None and mid != m.id and _ts_key(other) < said

            near = sorted(
                (
                    (k, c)
                    for k, c in st.msg_vectors.top(st.msg_vectors.get(m.id), 4 * POOL).items()
                    if earlier(k)
                ),
                key=lambda kc: (-kc[1], kc[0]),
            )[:POOL]
            by_overlap = st.lexical.overlapping(m.text, POOL, earlier, max_df=OVERLAP_MAX_DF)
            terms = st.lexical.terms(m.id)
            mine = st.lexical.weight(m.id)
            cosine = dict(near)
            pool = list(dict.fromkeys([k for k, _ in near] + [k for k, _ in by_overlap]))
            cands = []
            for k in pool:
                other = st.messages[k]
                cands.append(
                    Earlier(
                        k,
                        other.text,
                        other.speaker,
                        abs(m.seq - other.seq),
                        sum(st.lexical.idf(t) for t in terms & st.lexical.terms(k)),
                        st.lexical.weight(k),
                        cosine.get(k),
                    )
                )
            ranked = replaced(m.text, m.speaker, mine, cands)
            if not ranked or ranked[0][1] < self.cfg.update_min_score:
                continue
            best = ranked[0][0]
            if best in own:
                continue  # the change happened inside this fragment
            for fid in idx.holders(st, best):
                old = g.get(fid) if g.has(fid) and fid != frag.id else None
                if old is not None and old.kind == NodeKind.FRAGMENT and old.status == Status.ACTIVE:
                    supersede(g, old_id=fid, new_id=frag.id, when=m.timestamp or frag.created_at)
                    olds.append(fid)
        if olds:
            idx.status_changed(st, olds)
            rep.updates_linked += len(olds)

    def _link_references(self, st: NamespaceState, frag: Node) -> None:
        """``references`` edges to the earlier fragments (in other subtopics) sharing the most
        distinctive entities with this one, ties by id, as :func:`pick_references` ranks them
        (the build index counts the shared entities on its mention sets, not fragment by fragment)."""
        if self.cfg.references_per_fragment <= 0:
            return
        g = st.graph
        idx = st.build_index()
        mine = self._distinctive(
            st, frag.id, idx.counts(st, st.mentioned_ids(frag.id)), idx.fragment_count(st)
        )
        if not mine:
            return
        parent = st.parent_id(frag.id)

        def skip(fid: str) -> bool:
            return fid == frag.id or (parent is not None and st.parent_id(fid) == parent)

        for other in idx.references(st, mine, self.cfg.references_per_fragment, skip):
            g.add_edge(Edge(frag.id, other, EdgeKind.REFERENCES, created_at=frag.created_at))
