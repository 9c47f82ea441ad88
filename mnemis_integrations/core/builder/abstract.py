"""Fragments -> subtopics -> concepts, incrementally, with a review hook.

A new fragment joins the most similar subtopic when the cosine clears the
embedder's subtopic threshold (and the subtopic is not full); otherwise it
founds a new subtopic, which then joins or founds a concept the same way. Labels
come from the members' keywords. A :class:`ReviewHook` sees every proposal
before it is applied and may accept, rename, merge or split.

:class:`Placer` is the offline builder's place step; :func:`relabel_parents` renames
and refreshes the parents a build or a maintenance step touched.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

import numpy as np

from ..config import BuildConfig
from ..embedders import EmbedderProfile
from ..indexes.incremental import full_group
from ..model import Edge, EdgeKind, Message, Node, NodeKind
from .steps import BuildReport, Segment, setting
from .summarise import shared_words, topic_words_of

if TYPE_CHECKING:
    from ..state import NamespaceState
    from .prompts import FragmentSummary, PlacementProposal

__all__ = [
    "CURATED_NAMES",
    "Placement",
    "Placer",
    "ReviewHook",
    "accept_all",
    "choose_parent",
    "detach",
    "keyword_names",
    "label_from_keywords",
    "relabel_parents",
]

# Every lookup a new fragment makes is bounded, whatever the size of the namespace: it asks a
# nearest-neighbour search for a few candidates, or the build index's per-entity sets, instead of
# scanning every node. Placement widens its candidates (x4) only while a candidate not yet seen
# could still change the decision, so it decides as a scan of the whole namespace would, up to
# the cap below (never reached on LoCoMo or the scenario suite; on 20k cycled LoCoMo turns, i.e.
# every conversation 7 times over, placement met its cap 30 times).
PLACE_CANDIDATES = 32  # nearest subtopics (concepts) first offered to choose_parent: parents are few
# and rarely full, so the nearest non-full one above the threshold is almost always among them
PLACE_MAX_CANDIDATES = 512  # past this many parents none of which is chosen, a new parent is founded
_EPS = 1e-4  # faiss and numpy may round a cosine differently: the bounds keep this much slack

# Who named a node, in ``properties["named_by"]``, when its label must survive relabelling.
CURATED_NAMES = ("llm", "review")


@dataclass(frozen=True)
class Placement:
    """A proposal: put ``child_id`` under ``parent_id`` (or under a new parent when None)."""

    child_id: str
    level: Literal["subtopic", "concept"]
    parent_id: str | None
    similarity: float
    label: str  # the label the parent will carry


class ReviewHook(Protocol):
    def __call__(self, placement: Placement) -> Placement: ...


def accept_all(placement: Placement) -> Placement:
    return placement


def choose_parent(
    vector: np.ndarray,
    parent_ids: list[str],
    parent_vectors: np.ndarray,
    sizes: Sequence[int] | Callable[[str], int],
    threshold: float,
    max_size: int,
) -> tuple[str | None, float]:
    """Best parent for ``vector`` among those not full, or None if none clears ``threshold``.

    ``sizes``: the parents' sizes, or a function of a parent id asked only for the parents
    that clear the threshold, most similar first, until one is not full.

    >>> import numpy as np
    >>> choose_parent(np.array([1.0, 0.0]), ["a", "b"], np.array([[0.0, 1.0], [0.9, 0.436]]), [1, 1], 0.8, 5)
    ('b', 0.9)
    >>> choose_parent(np.array([1.0, 0.0]), ["a"], np.array([[0.0, 1.0]]), [1], 0.8, 5)
    (None, 0.0)
    >>> choose_parent(
    ...     np.array([1.0, 0.0]),
    ...     ["a", "b"],
    ...     np.array([[1.0, 0.0], [0.9, 0.436]]),
    ...     {"a": 5, "b": 1}.get,
    ...     0.8,
    ...     5,
    ... )
    ('b', 0.9)
    """
    if not parent_ids:
        return None, 0.0
    sims = parent_vectors @ vector
    for i in np.argsort(-sims):
        if sims[i] < threshold:
            break
        if (sizes(parent_ids[int(i)]) if callable(sizes) else sizes[i]) < max_size:
            return parent_ids[int(i)], round(float(sims[i]), 6)
    return None, 0.0


def label_from_keywords(
    keyword_lists: list[list[str]], top: int = 2, exclude: Callable[[str], bool] | None = None
) -> str:
    """Label a parent by the keywords its members share most (earlier keywords weigh more).

    >>> label_from_keywords([["refund", "timeout"], ["refund", "bank"], ["lunch"]])
    'refund & lunch'
    """
    score: Counter = Counter()
    for kws in keyword_lists:
        for rank, kw in enumerate(kws):
            if exclude is None or not exclude(kw):
                score[kw] += 1.0 / (1 + rank)
    picked = [kw for kw, _ in sorted(score.items(), key=lambda x: -x[1])[:top]]  # ties: first seen first
    return " & ".join(picked) or "misc"


def keyword_names(
    st: NamespaceState,
    texts: list[list[Message]],
    summaries: list[FragmentSummary | None],
    is_new: list[bool],
) -> dict[int, PlacementProposal]:
    """The offline name step: no names up front. A founded parent takes its first child's
    keywords, and :func:`relabel_parents` renames it from all its children's."""
    return {}


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


class Placer:
    """The offline place step: the nearest parent that can take a new fragment, by vector (every
    lookup bounded, see ``PLACE_CANDIDATES``), as the review hook confirms it, or a new one."""

    def __init__(self, config: BuildConfig, profile: EmbedderProfile, review: ReviewHook = accept_all):
        self.cfg = config
        self.profile = profile
        self.review = review

    def prepare(self, st: NamespaceState) -> None:
        """Full parents are kept in their own group of the node vectors: at 100k most are full."""
        st.build_index().set_capacity(
            st,
            {
                NodeKind.SUBTOPIC: self.cfg.max_subtopic_fragments,
                NodeKind.CONCEPT: self.cfg.max_concept_subtopics,
            },
        )

    def place(self, st: NamespaceState, frag: Node, seg: Segment, rep: BuildReport) -> None:
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
        threshold = setting(self.cfg, self.profile, level.threshold)
        capacity = getattr(self.cfg, level.capacity)
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
        self,
        st: NamespaceState,
        vector: np.ndarray,
        kind: NodeKind,
        threshold: float,
        max_size: int,
    ) -> tuple[str | None, float]:
        """``choose_parent`` over the nodes of ``kind`` nearest to ``vector`` (not over all of them).

        Raw (the profile's default): the nearest ``PLACE_CANDIDATES`` parents clearing the
        threshold are scored exactly; only when every one of them is full are more asked for (x4,
        up to ``PLACE_MAX_CANDIDATES``), so the choice is the one a scan of every parent makes: the
        most similar non-full one.

        Centred (``centred_placement``): similarities are taken from the namespace's centre as it
        stood when the fragment's last message arrived (a batch's later messages are not indexed
        yet). e5-style embedders put every text of a conversation near one direction, where raw
        cosines cannot tell topics apart and fragments filled the same few parents in turn (time
        buckets, not topics). The raw-nearest ``PLACE_CANDIDATES`` parents are scored first, more
        (x4, up to the cap) while none is chosen: a parent ranked low by raw cosine but high
        centred can be missed.
        """
        idx = st.build_index()
        idx.ready(st)  # node vectors are grouped by kind from here on

        def size(pid: str) -> int:  # asked only of parents clearing the threshold, most similar first
            return idx.child_count(st, pid)

        centred = bool(setting(self.cfg, self.profile, "centred_placement"))
        # The centre is the mean of the messages indexed so far: those built up to this fragment.
        centre = st.msg_vectors.mean() if centred else None
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


def detach(st: NamespaceState, child: Node, rep: BuildReport) -> bool:
    """Take ``child`` out of its parent, and the parents it leaves empty out of the hierarchy, so
    that it can be placed again. False, and nothing changed, when a parent it would leave empty is
    named by a model or a reviewer or holds links other than the hierarchy's."""
    g = st.graph
    idx = st.build_index()
    parent = g.parent(child.id)
    if parent is None:
        return True
    emptied: list[str] = []
    node: Node | None = parent
    below = child.id
    while node is not None and all(c.id == below for c in g.children(node.id)):
        edges = g.in_edges(node.id) + g.out_edges(node.id)
        if node.properties.get("named_by") in CURATED_NAMES or any(
            e.kind != EdgeKind.BELONGS_TO for e in edges
        ):
            return False
        emptied.append(node.id)
        below, node = node.id, g.parent(node.id)
    g.remove_edge(child.id, parent.id, EdgeKind.BELONGS_TO)
    idx.child_removed(parent.id)
    for nid, up in st.remove_emptied(emptied):
        idx.parent_removed(nid)
        rep.touched.discard(nid)
        if up is not None:
            idx.child_removed(up)
    if node is not None:  # the nearest parent left with other children: its vector loses the child's
        kept = [node.id] + [a.id for a in g.ancestors(node.id)]
        for nid in kept:  # one level at a time: a concept's mean reads its subtopic's new vector
            st.refresh_vectors([nid])
        rep.touched.update(kept)
    return True


def relabel_parents(st: NamespaceState, touched: set[str]) -> None:
    """Rename the subtopics and concepts among ``touched`` from their children's words (a name
    the model or a reviewer gave stays) and refresh their keywords, summaries and times."""
    g = st.graph
    idx = st.build_index()
    speakers = idx.speakers(st)
    nodes = [g.get(n) for n in touched if g.has(n)]
    for node in sorted(nodes, key=lambda n: n.kind != NodeKind.SUBTOPIC):
        if node.kind not in (NodeKind.SUBTOPIC, NodeKind.CONCEPT):
            continue
        kids = g.children(node.id)
        named = node.properties.get("named_by") in CURATED_NAMES
        if node.kind == NodeKind.CONCEPT:
            if not named:
                # The word most of its fragments share, so its biggest subtopic names it: scored per
                # subtopic instead, a one-fragment subtopic weighed as much as a twenty-fragment one.
                words = [topic_words_of(f) for s in kids for f in g.children(s.id)]
                node.label = label_from_keywords(words, top=1, exclude=lambda k: k in speakers).title()
        else:
            if not named:
                node.label = label_from_keywords(
                    [topic_words_of(f) for f in kids], top=2, exclude=lambda k: k in speakers
                )
            node.keywords = shared_words(kids, lambda f: f.keywords)
            node.summary = "; ".join(f.summary for f in kids[-3:])
        times = [k.event_time for k in kids if k.event_time]
        if times:
            node.event_time = max(times)
    # An update judge that supersedes once the batch is written (the model's) has not told the
    # build index: the targets of the touched nodes' updates leave the active set.
    idx.status_changed(st, [e.dst for n in touched if g.has(n) for e in g.out_edges(n, EdgeKind.UPDATES)])
    idx.settle(st)
