"""Incremental building: segment -> summarise -> abstract -> link, one step object each.

:func:`run_steps` is the pipeline every builder runs, over its :class:`~.steps.BuildSteps`;
:class:`OfflineBuilder` runs it over the offline steps (:func:`offline_steps`).

New messages attach to the existing hierarchy: the last open segment may be
continued, new fragments join existing subtopics, new subtopics join existing
concepts. Offline there is no LLM and no extra embedding: every hierarchy vector is a
centroid of the message vectors already computed.

A batch's messages enter the message vectors and the lexical index segment by segment, as
each is built, so that what the steps read of the namespace is what a stream of one message
at a time would have shown them: the update judge's neighbours, word rarities and ranks (its
weights are fitted on features taken that way; it reads a segment's own later messages as not
arrived yet), and placement's centre. Placement itself may differ: a batch places a new
fragment with all its messages, a stream when its first arrives.
"""

from __future__ import annotations

import numpy as np

from ..config import BuildConfig
from ..embedders import EmbedderProfile
from ..model import EdgeKind, Message, Node, NodeKind, time_order
from ..state import NamespaceState, message_words
from .abstract import Placer, ReviewHook, accept_all, detach, keyword_names, relabel_parents
from .entities import find_entities
from .link import link_entities, link_model_relations, link_references
from .segment import OfflineSegmenter, open_tail
from .steps import BuildReport, BuildSteps, Segment
from .summarise import (
    TOPIC_WORDS,
    apply_model_summary,
    fragment_label,
    headline,
    keep_extractive,
    keywords_for,
    summary_line,
    topic_words,
    topic_words_of,
)
from .updates import OfflineUpdateJudge

__all__ = ["BuildReport", "OfflineBuilder", "offline_steps", "run_steps"]


def offline_steps(
    config: BuildConfig, profile: EmbedderProfile, review: ReviewHook = accept_all
) -> BuildSteps:
    """The offline builder's steps: deterministic, no model."""
    return BuildSteps(
        segment=OfflineSegmenter(config, profile),
        summarise=keep_extractive,
        entities=find_entities,
        name=keyword_names,
        place=Placer(config, profile, review),
        updates=OfflineUpdateJudge(config),
    )


class OfflineBuilder:
    """Deterministic builder; the same inputs always give the same graph.

    ``steps`` are :func:`offline_steps`; replace one (``dataclasses.replace``) to build with
    another implementation of that step.
    """

    def __init__(self, config: BuildConfig, profile: EmbedderProfile, review: ReviewHook = accept_all):
        self.cfg = config
        self.profile = profile
        self.review = review
        self.steps = offline_steps(config, profile, review)

    def ingest(self, st: NamespaceState, new: list[Message], vectors: np.ndarray) -> BuildReport:
        rep = BuildReport()
        run_steps(self.steps, self.cfg, st, new, vectors, rep)
        return rep


def run_steps(
    steps: BuildSteps,
    cfg: BuildConfig,
    st: NamespaceState,
    new: list[Message],
    vectors: np.ndarray,
    rep: BuildReport,
) -> None:
    """Build ``new`` (with their ``vectors``) into ``st`` with ``steps``, counting into ``rep``."""
    new, vectors = _accept_messages(st, new, vectors)
    steps.place.prepare(st)
    tail_frag = open_tail(st, new, cfg.max_segment_messages)
    tail = st.fragment_messages(tail_frag.id) if tail_frag is not None else []
    segments = steps.segment(st, new, vectors, tail)
    texts = [(tail if seg[0] == -1 else []) + [new[i] for i in seg if i >= 0] for seg in segments]
    summaries = steps.summarise(texts)
    mentions, relations = steps.entities(st, new, segments)
    names = steps.name(st, texts, summaries, [seg[0] != -1 for seg in segments])

    created: list[tuple[str, list[Message]]] = []
    for k, seg in enumerate(segments):
        idx = [i for i in seg if i >= 0]
        frag = tail_frag if seg[0] == -1 else None
        if frag is not None:
            rep.fragments_extended += 1
        _index_messages(st, [new[i] for i in idx], vectors[idx])
        segment = Segment(
            messages=[new[i] for i in idx],
            mentions=[mentions[i] for i in idx],
            extends=frag,
            summary=summaries[k],
            placement=names.get(k),
            relations=relations.get(k, []),
        )
        written = _add_fragment(steps, cfg, st, segment, rep)
        if frag is None:
            created.append((written.id, segment.messages))
    # A segmenter swapped in may leave messages out: indexed all the same, as a reopened store does.
    left_out = [i for i, m in enumerate(new) if m.id not in st.lexical]
    if left_out:
        _index_messages(st, [new[i] for i in left_out], vectors[left_out])
    steps.updates.batch_added(st, created, rep)
    relabel_parents(st, rep.touched)


def _accept_messages(
    st: NamespaceState, new: list[Message], vectors: np.ndarray
) -> tuple[list[Message], np.ndarray]:
    """Put new messages, in time order, into the state's message table (their vectors and words
    are indexed as their segments are built: :func:`_index_messages`)."""
    idx = st.build_index(starting=True)
    idx.ingesting = True
    order = sorted(range(len(new)), key=lambda i: time_order(new[i]))
    new = [new[i] for i in order]
    vectors = vectors[order] if len(order) else vectors
    idx.messages_added([m for m in new if m.id not in st.messages])
    for m in new:
        st.messages[m.id] = m
    return new, vectors


def _index_messages(st: NamespaceState, msgs: list[Message], vectors: np.ndarray) -> None:
    """Index one segment's messages, just before it is built: the batch's later messages are not
    indexed yet, as in a stream they would not have arrived."""
    st.msg_vectors.upsert([m.id for m in msgs], vectors)
    st.lexical.add([m.id for m in msgs], [m.text for m in msgs])


def _add_fragment(
    steps: BuildSteps, cfg: BuildConfig, st: NamespaceState, seg: Segment, rep: BuildReport
) -> Node:
    """Write one segment as a new fragment or into the open one, then place, judge and link it."""
    g = st.graph
    msgs = seg.messages
    frag = seg.extends
    is_new = frag is None
    if frag is None:
        frag = Node(
            id=f"f:{msgs[0].id}",
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
        old_tokens = st.fragment_words(frag.id)
    idx = st.build_index()
    frag.source_ids = list(dict.fromkeys(frag.source_ids + [m.id for m in msgs]))
    frag.event_time = msgs[-1].timestamp or frag.event_time
    idx.fragment_written(st, frag, created=is_new)
    for m in msgs:
        st.msg_fragment[m.id] = frag.id
    all_msgs = st.fragment_messages(frag.id)
    texts = [m.text for m in all_msgs]
    st.df.update(message_words(all_msgs) - old_tokens)
    n_frag = max(1, idx.fragment_count(st))
    frag.keywords = keywords_for(texts, st.df, n_frag, cfg.keywords_per_fragment)
    frag.properties[TOPIC_WORDS] = topic_words(texts, st.df, n_frag, cfg.keywords_per_fragment)
    g.touch(frag.id)

    link_entities(st, frag, msgs, seg.mentions, is_new, rep)
    mentioned = [g.get(e.dst).label for e in g.out_edges(frag.id, EdgeKind.MENTIONS)]
    frag.summary = summary_line(all_msgs, mentioned, frag.keywords)
    frag.properties["headline"] = headline(frag.summary, cfg.headline_terms)
    frag.label = fragment_label(topic_words_of(frag), frag.created_at)
    st.refresh_vectors([frag.id])
    rep.touched.add(frag.id)

    if is_new or (len(old_tokens) < cfg.place_again_until_words and detach(st, frag, rep)):
        steps.place.place(st, frag, seg, rep)
    steps.updates.fragment_added(st, frag, msgs, rep)
    if is_new:
        link_references(st, frag, cfg.references_per_fragment)
    parent = g.parent(frag.id)
    if parent is not None:
        rep.touched.add(parent.id)
        st.refresh_vectors([parent.id])
        grand = g.parent(parent.id)
        if grand is not None:
            rep.touched.add(grand.id)
            st.refresh_vectors([grand.id])
    # The model's text and relations come last, as they always have: placement labels a founded
    # subtopic with the extractive keywords, and only relabelling or the model renames it.
    apply_model_summary(frag, seg.summary)
    link_model_relations(st, frag, seg.relations)
    return frag
