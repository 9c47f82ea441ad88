"""The LLM builder's steps: the model's implementation of each build step, with the offline one
as its fallback.

Each step asks the model through :class:`ModelCalls` (validated, repaired, retried and counted,
:mod:`.llm_structured`, :mod:`.llm_checks`); a batch whose answer stays invalid falls back to the
offline step for that batch. The batch steps (segment, summarise, entities, name) run before
any fragment is written and return one answer per segment, which the pipeline hands to the
per-fragment steps in a :class:`~.steps.Segment`: :class:`ProposedPlacer` places by the
model's names, :class:`LLMUpdateJudge` judges the batch once every fragment is placed
(:class:`LLMMessageUpdateJudge`, with ``build.update_links`` "message", each fragment's messages
as it is written).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from ..config import BuildConfig
from ..embedders import EmbedderProfile
from ..maintenance.supersede import supersede
from ..model import Edge, EdgeKind, Message, Node, NodeKind, Status, time_order
from ..protocols import ChatModel
from ..text import format_date, normalise_name
from . import prompts as P
from .abstract import Placement, ReviewHook
from .entities import EntityMention, find_entities, named_in
from .llm_checks import check_entities, check_placements, check_segments, check_summaries, check_updates
from .llm_structured import Usage, ask
from .segment import segment
from .steps import BuildReport, Placer, Segment, UpdateJudge, setting
from .updates import POOL, OfflineUpdateJudge, candidate_pool, linkable_fragments

if TYPE_CHECKING:
    from ..state import NamespaceState
    from .llm_builder import LLMBuildConfig

__all__ = [
    "LLMEntityFinder",
    "LLMMessageUpdateJudge",
    "LLMNamer",
    "LLMSegmenter",
    "LLMSummariser",
    "LLMUpdateJudge",
    "ModelCalls",
    "ProposedPlacer",
]

X = TypeVar("X")
Y = TypeVar("Y")

_TIE = 1e-4  # faiss and numpy may round a cosine differently


class ModelCalls:
    """The model as the LLM steps of one ingest see it: validated answers counted in ``usage``,
    at most ``max_concurrency`` calls at once, messages cut to prompt lines."""

    def __init__(self, chat: ChatModel, config: LLMBuildConfig, usage: Usage):
        self.chat = chat
        self.llm = config
        self.usage = usage

    def map(self, fn: Callable[[X], Y], items: Sequence[X]) -> list[Y]:
        if self.llm.max_concurrency <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.llm.max_concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    def text(self, m: Message) -> str:
        return m.text if len(m.text) <= self.llm.max_line_chars else m.text[: self.llm.max_line_chars] + "..."

    def line(self, m: Message) -> str:
        return f"{m.speaker}: {self.text(m)}"

    def ask(self, step: str, messages, schema, check):
        """One batch's validated answer, or None when the batch falls back; counted either way."""
        ans = ask(
            self.chat, step, messages, schema, self.usage, max_retries=self.llm.max_retries, check=check
        )
        self.usage.add(step, **({"fallbacks": 1} if ans is None else {"llm_batches": 1}))
        return ans

    @staticmethod
    def batches(n: int, size: int) -> list[list[int]]:
        return [list(range(i, min(n, i + size))) for i in range(0, n, size)]


# ------------------------------------------------------------------ 1. segment
class LLMSegmenter:
    """Topic boundaries over windows of ``batch_messages``: the model's, or the offline segmenter's
    where the model is not asked (``ask_model`` False) or its answer stays invalid. Hard rules the
    model cannot overrule follow: a long silence cuts, and no segment outgrows the cap."""

    def __init__(self, calls: ModelCalls, config: BuildConfig, profile: EmbedderProfile, *, ask_model: bool):
        self.calls = calls
        self.cfg = config
        self.profile = profile
        self.ask_model = ask_model

    def __call__(
        self, st: NamespaceState, new: list[Message], vectors: np.ndarray, tail: list[Message]
    ) -> list[list[int]]:
        cfg, calls = self.cfg, self.calls
        tail_arg = (tail, st.msg_vectors.get_many([m.id for m in tail])) if tail else None

        def offline(lo: int, hi: int, with_tail: bool) -> tuple[set[int], bool]:
            segs = segment(
                new[lo:hi],
                vectors[lo:hi],
                max_messages=cfg.max_segment_messages,
                min_messages=cfg.min_segment_messages,
                time_gap_minutes=cfg.time_gap_minutes,
                drift_threshold=setting(cfg, self.profile, "drift_threshold"),
                tail=tail_arg if with_tail else None,
            )
            cuts = {lo + s[0] for s in segs if s[0] != -1}
            return cuts, bool(segs) and segs[0][0] == -1

        batches = calls.batches(len(new), calls.llm.batch_messages)
        if not self.ask_model:
            results = [offline(b[0], b[-1] + 1, k == 0) for k, b in enumerate(batches)]
        else:

            def one(kb: tuple[int, list[int]]) -> tuple[set[int], bool]:
                k, b = kb
                earlier = tail[-3:] if k == 0 else [new[i] for i in range(max(0, b[0] - 2), b[0])]
                ctx: P.SegmentContext = {
                    "earlier": [calls.line(m) for m in earlier],
                    "messages": [
                        {"i": j, "speaker": new[i].speaker, "text": calls.text(new[i])}
                        for j, i in enumerate(b)
                    ],
                }
                ans = calls.ask(
                    "segment", P.segment_messages(ctx), P.SegmentAnswer, lambda a: check_segments(a, len(b))
                )
                if ans is None:
                    return offline(b[0], b[-1] + 1, k == 0)
                cuts = {b[0] + j for j in ans.new_topic_at}
                if k == 0 and not tail:
                    cuts.add(0)
                return cuts, k == 0 and bool(tail) and 0 not in ans.new_topic_at

            results = calls.map(one, list(enumerate(batches)))
        cuts: set[int] = set()
        continues = False
        for k, (c, cont) in enumerate(results):
            cuts |= c
            continues = continues or (k == 0 and cont)
        if not continues:
            cuts.add(0)
        out: list[list[int]] = []
        cur: list[int] = [-1] if continues else []
        size = len(tail) if continues else 0
        for i, m in enumerate(new):
            prev = new[i - 1] if i else (tail[-1] if continues else None)
            gap = (
                prev is not None
                and prev.timestamp
                and m.timestamp
                and (m.timestamp - prev.timestamp).total_seconds() / 60 > cfg.time_gap_minutes
            )
            if i in cuts or gap or size >= cfg.max_segment_messages:
                if cur and cur != [-1]:
                    out.append(cur)
                cur, size = [], 0
            cur.append(i)
            size += 1
        if cur and cur != [-1]:
            out.append(cur)
        return out


# ------------------------------------------------------------------ 2. summarise
class LLMSummariser:
    """One-sentence summaries and keywords, ``batch_fragments`` segments per call; None for the
    segments of a batch that falls back (they keep the extractive summary)."""

    def __init__(self, calls: ModelCalls, config: BuildConfig):
        self.calls = calls
        self.cfg = config

    def __call__(self, texts: list[list[Message]]) -> list[P.FragmentSummary | None]:
        calls = self.calls
        out: list[P.FragmentSummary | None] = [None] * len(texts)
        if not texts:
            return out

        def one(b: list[int]) -> None:
            bodies = {j: [calls.line(m) for m in texts[k]] for j, k in enumerate(b)}
            ctx: P.SummariseContext = {"fragments": [{"f": j, "lines": ls} for j, ls in bodies.items()]}
            joined = {j: "\n".join(ls) for j, ls in bodies.items()}
            key_names = {j: named_in(texts[k]) for j, k in enumerate(b)}
            ans = calls.ask(
                "summarise",
                P.summarise_messages(ctx),
                P.SummariseAnswer,
                lambda a: check_summaries(a, joined, self.cfg.keywords_per_fragment, key_names),
            )
            if ans is None:
                return
            for s in ans.summaries:
                out[b[s.f]] = s

        calls.map(one, calls.batches(len(texts), calls.llm.batch_fragments))
        return out


# ------------------------------------------------------------------ 3. entities
class LLMEntityFinder:
    """Entities (the granularity rule) and labelled relations per segment; a batch that falls
    back keeps the offline mentions and has no relations."""

    def __init__(self, calls: ModelCalls):
        self.calls = calls

    def __call__(
        self, st: NamespaceState, new: list[Message], segments: list[list[int]]
    ) -> tuple[list[list[EntityMention]], dict[int, list[P.RelationItem]]]:
        calls = self.calls
        offline, relations = find_entities(st, new, segments)
        if not new:
            return offline, relations
        mentions = list(offline)

        def one(b: list[int]) -> None:
            segs = {j: [i for i in segments[k] if i >= 0] for j, k in enumerate(b)}
            bodies = {j: [calls.line(new[i]) for i in idx] for j, idx in segs.items()}
            ctx: P.EntitiesContext = {"fragments": [{"f": j, "lines": ls} for j, ls in bodies.items()]}
            texts = {j: "\n".join(new[i].text for i in idx) for j, idx in segs.items()}
            ans = calls.ask(
                "entities", P.entities_messages(ctx), P.EntitiesAnswer, lambda a: check_entities(a, texts)
            )
            if ans is None:
                return
            for j, idx in segs.items():
                names = [e.name for e in ans.entities if j in e.fragments]
                for i in idx:
                    mentions[i] = [
                        EntityMention(normalise_name(n), n)
                        for n in names
                        if normalise_name(n) and normalise_name(n) in normalise_name(new[i].text)
                    ]
                keys = {normalise_name(n) for n in names}
                relations[b[j]] = [
                    r
                    for r in ans.relations
                    if normalise_name(r.source) in keys and normalise_name(r.target) in keys
                ]

        calls.map(one, calls.batches(len(segments), calls.llm.batch_fragments))
        return mentions, relations


# ------------------------------------------------------------------ 4. name (the "abstract" step)
class LLMNamer:
    """Subtopic and concept names for the new fragments, the existing names offered for reuse."""

    def __init__(self, calls: ModelCalls):
        self.calls = calls

    def __call__(
        self,
        st: NamespaceState,
        texts: list[list[Message]],
        summaries: list[P.FragmentSummary | None],
        is_new: list[bool],
    ) -> dict[int, P.PlacementProposal]:
        calls = self.calls
        out: dict[int, P.PlacementProposal] = {}
        todo = [k for k, n in enumerate(is_new) if n]
        if not todo:
            return out
        g = st.graph
        existing: list[P.ExistingSubtopic] = []
        for s in g.nodes(NodeKind.SUBTOPIC):
            c = g.parent(s.id)
            existing.append({"subtopic": s.label, "concept": c.label if c else s.label})
        existing = existing[-40:]

        def brief(j: int, k: int) -> P.FragmentBrief:
            s = summaries[k]
            if s is not None:
                return {"f": j, "summary": s.summary, "keywords": s.keywords}
            return {"f": j, "summary": " / ".join(calls.line(m) for m in texts[k])[:300], "keywords": []}

        # One call per batch, in order: later batches see the names earlier ones proposed.
        for b in [[todo[i] for i in r] for r in calls.batches(len(todo), calls.llm.batch_fragments)]:
            ctx: P.AbstractContext = {
                "existing": existing,
                "fragments": [brief(j, k) for j, k in enumerate(b)],
            }
            frag_idx = list(range(len(b)))
            ans = calls.ask(
                "abstract",
                P.abstract_messages(ctx),
                P.AbstractAnswer,
                lambda a, idx=frag_idx: check_placements(a, idx),
            )
            if ans is None:
                continue
            for p in ans.placements:
                out[b[p.f]] = p
                pair = {"subtopic": p.subtopic, "concept": p.concept}
                if pair not in existing:
                    existing.append(pair)  # type: ignore[arg-type]
        return out


# ------------------------------------------------------------------ 5. place
class ProposedPlacer:
    """Place a new fragment under the subtopic and concept the model named (found by name, or
    founded with that name), as the review hook confirms; ``fallback`` places the fragments the
    model named nothing for."""

    def __init__(self, fallback: Placer, config: BuildConfig, review: ReviewHook):
        self.fallback = fallback
        self.cfg = config
        self.review = review

    def prepare(self, st: NamespaceState) -> None:
        """Nothing: the LLM builder has never kept full parents in their own vector group (its
        fallback placement decides the same either way, only slower on very large namespaces)."""

    def place(self, st: NamespaceState, frag: Node, seg: Segment, rep: BuildReport) -> None:
        prop = seg.placement
        if prop is None:
            return self.fallback.place(st, frag, seg, rep)
        g = st.graph
        sub = _named(st, NodeKind.SUBTOPIC, prop.subtopic, self.cfg.max_subtopic_fragments)
        sim = (
            float(st.node_vectors.get(sub.id) @ st.node_vectors.get(frag.id))
            if sub is not None and sub.id in st.node_vectors
            else 0.0
        )
        p = self.review(Placement(frag.id, "subtopic", sub.id if sub else None, sim, prop.subtopic))
        if p.parent_id is not None and g.has(p.parent_id):
            g.add_edge(Edge(frag.id, p.parent_id, EdgeKind.BELONGS_TO, created_at=frag.created_at))
            st.build_index().child_added(p.parent_id)
            rep.touched.add(p.parent_id)
            return
        sid = f"s:{frag.id[2:]}"
        _found(st, NodeKind.SUBTOPIC, sid, p.label or prop.subtopic, frag)
        rep.subtopics_created += 1
        g.add_edge(Edge(frag.id, sid, EdgeKind.BELONGS_TO, created_at=frag.created_at))
        st.refresh_vectors([sid])
        rep.touched.add(sid)
        con = _named(st, NodeKind.CONCEPT, prop.concept, self.cfg.max_concept_subtopics)
        cp = self.review(Placement(sid, "concept", con.id if con else None, 0.0, prop.concept))
        cid = cp.parent_id
        if cid is None or not g.has(cid):
            cid = f"c:{sid[2:]}"
            _found(st, NodeKind.CONCEPT, cid, cp.label or prop.concept, frag)
            rep.concepts_created += 1
        g.add_edge(Edge(sid, cid, EdgeKind.BELONGS_TO, created_at=frag.created_at))
        st.build_index().child_added(cid)
        st.refresh_vectors([cid])
        rep.touched.add(cid)


def _named(st: NamespaceState, kind: NodeKind, name: str, capacity: int) -> Node | None:
    """The live node of ``kind`` labelled ``name`` (up to case and spacing), unless it is full."""
    key = normalise_name(name)
    for n in st.graph.nodes(kind):
        if normalise_name(n.label) == key and n.status != Status.ARCHIVED:
            return n if len(st.graph.children(n.id)) < capacity else None
    return None


def _found(st: NamespaceState, kind: NodeKind, node_id: str, label: str, frag: Node) -> None:
    """A new parent named by the model (or its reviewer): relabelling keeps the name."""
    st.graph.add_node(
        Node(
            id=node_id,
            kind=kind,
            label=label,
            namespace=st.namespace,
            created_at=frag.created_at,
            event_time=frag.event_time,
            properties={"named_by": "llm"},
        )
    )


# ------------------------------------------------------------------ 6. updates
class LLMUpdateJudge:
    """``updates`` / ``contradicts`` judgements for the batch's new fragments against the earlier
    facts nearest them, once every new fragment is placed; a batch that falls back is judged by
    ``fallback`` fragment by fragment."""

    def __init__(self, calls: ModelCalls, fallback: UpdateJudge):
        self.calls = calls
        self.fallback = fallback

    def fragment_added(self, st: NamespaceState, frag: Node, msgs: list[Message], rep: BuildReport) -> None:
        """Nothing yet: judged for the whole batch in :meth:`batch_added`."""

    def _candidates(self, st: NamespaceState, fid: str, later: set[str]) -> list[str]:
        """The earlier active fragments most similar to ``fid`` that share an entity or its parent."""
        g = st.graph
        frag = g.get(fid)
        mine = set(st.mentioned_ids(fid))
        parent = st.parent_id(fid)
        v = st.node_vectors.get(fid)

        def eligible(key: str) -> bool:
            f = st.node(key) if g.has(key) else None
            if f is None or f.kind != NodeKind.FRAGMENT or key == fid or key in later:
                return False
            if f.status != Status.ACTIVE or (
                f.event_time and frag.created_at and f.event_time > frag.created_at
            ):
                return False
            return (parent is not None and st.parent_id(key) == parent) or not mine.isdisjoint(
                st.mentioned_ids(key)
            )

        # Asked of the nearest-neighbour search, not of every fragment (the speakers' entities are
        # shared by most of them): widened while the last one found ties the n-th within rounding,
        # so that the ranking below (ties by id) is the one a scan of every fragment gives.
        n = self.calls.llm.update_candidates
        want = n
        while True:
            found = st.node_vectors.nearest(v, want, keep=eligible)
            if len(found) < want or found[-1][1] < found[n - 1][1] - _TIE:
                break
            want *= 2
        scored = sorted(((float(st.node_vectors.get(k) @ v), k) for k, _ in found), reverse=True)
        return [f for _, f in scored[:n]]

    def batch_added(
        self, st: NamespaceState, created: list[tuple[str, list[Message]]], rep: BuildReport
    ) -> None:
        if not created:
            return
        g = st.graph
        calls = self.calls

        def fact(n: int, fid: str) -> P.Fact:
            node = g.get(fid)
            return {
                "n": n,
                "time": format_date(node.event_time) if node.event_time else "",
                "text": node.summary,
            }

        def one(b: list[tuple[str, list[Message]]], later: set[str]) -> None:
            cands = {fid: self._candidates(st, fid, later) for fid, _ in b}
            earlier_ids = list(dict.fromkeys(c for cs in cands.values() for c in cs if c not in cands))
            if not any(cands.values()):
                return
            index = {fid: n for n, fid in enumerate(earlier_ids + [fid for fid, _ in b])}
            ids = {n: fid for fid, n in index.items()}
            ctx: P.UpdatesContext = {
                "earlier": [fact(index[f], f) for f in earlier_ids],
                "new": [fact(index[f], f) for f, _ in b],
            }
            ans = calls.ask(
                "updates",
                P.updates_messages(ctx),
                P.UpdatesAnswer,
                lambda a: check_updates(a, {index[f] for f in earlier_ids}, {index[f] for f, _ in b}),
            )
            if ans is None:
                for fid, msgs in b:
                    self.fallback.fragment_added(st, g.get(fid), msgs, rep)
                return
            for j in ans.judgements:
                new_id, old_id = ids[j.new], ids[j.earlier]
                when = g.get(new_id).created_at
                if j.verdict == "updates":
                    supersede(g, old_id=old_id, new_id=new_id, when=when)
                    rep.updates_linked += 1
                else:
                    g.add_edge(Edge(new_id, old_id, EdgeKind.CONTRADICTS, created_at=when))

        # Batches run in order, not concurrently: a fact one batch supersedes is not offered to the next.
        # Every fragment of the ingest is written by now: those after a batch are not earlier facts
        # for it, whatever their dates say (undated, or dated the same day).
        n = calls.llm.batch_fragments
        for i in range(0, len(created), n):
            one(created[i : i + n], {fid for fid, _ in created[i + n :]})
        # fragments told late among those the fallback judged: their later neighbours, judged again
        self.fallback.batch_added(st, created, rep)


class LLMMessageUpdateJudge(OfflineUpdateJudge):
    """``updates`` / ``contradicts`` judgements message by message, for ``build.update_links`` "message":
    as each fragment is written, its messages are asked against the earlier messages nearest each of them
    (the offline judge's candidate pool, :func:`~.updates.candidate_pool`, before its change gate, at most
    ``message_candidates`` per message); then a replacing message is linked as the offline judge links one,
    into every fragment holding the newest message it replaces, superseded ones too.

    Perfect judgements with these links put the current state first on .961 of the held-out evolution
    questions, against .940 for one link per fragment (BENCHMARKS.md, forty-fifth round): the structure
    is there for a judge right message by message. A fragment whose call falls back is judged offline, and
    so are the later messages near a fragment told late (an imported history), as the offline judge
    reads them again.
    """

    def __init__(self, calls: ModelCalls, config: BuildConfig):
        super().__init__(config)
        self.calls = calls
        # message id -> the earlier messages the model says it replaces, newest first; a message missing
        # here is judged offline (its fragment's call fell back, or it was not asked)
        self._replaced: dict[str, list[str]] = {}

    def fragment_added(self, st: NamespaceState, frag: Node, msgs: list[Message], rep: BuildReport) -> None:
        self._replaced = self._ask(st, frag, msgs)
        try:
            super().fragment_added(st, frag, msgs, rep)
        finally:
            self._replaced = {}

    def may_replace(self, m: Message, earlier: Sequence[Message]) -> bool:
        return m.id in self._replaced or super().may_replace(m, earlier)

    def scored_candidates(
        self, st: NamespaceState, m: Message, unsaid: Sequence[str]
    ) -> list[tuple[str, float]]:
        if m.id in self._replaced:
            return [(k, math.inf) for k in self._replaced[m.id]]
        return super().scored_candidates(st, m, unsaid)

    def _ask(self, st: NamespaceState, frag: Node, msgs: list[Message]) -> dict[str, list[str]]:
        """The model's judgements for ``msgs``: message id -> the earlier ones it replaces; {} when the
        call falls back. A contradiction is linked here, fragment to fragment."""
        own = set(frag.source_ids)
        n = self.calls.llm.message_candidates
        # a wider pool as more is shown: two thirds of it by vector, the rest by rare words
        size = max(POOL, 2 * n // 3)

        def shown(p: int, m: Message) -> list[str]:
            """The earlier messages ``m`` is shown with (the fragment's later messages not said yet)."""
            return [k for k in candidate_pool(st, m, [x.id for x in msgs[p + 1 :]], size) if k not in own][:n]

        union = {k for p, m in enumerate(msgs) for k in shown(p, m)}
        earlier = sorted(union, key=lambda k: time_order(st.messages[k]))
        if not earlier:
            return {m.id: [] for m in msgs}
        index = {mid: i for i, mid in enumerate([*earlier, *(m.id for m in msgs)])}
        ids = {i: mid for mid, i in index.items()}

        def fact(m: Message) -> P.Fact:
            return {
                "n": index[m.id],
                "time": format_date(m.timestamp) if m.timestamp else "",
                "text": self.calls.line(m),
            }

        ctx: P.UpdatesContext = {
            "earlier": [fact(st.messages[k]) for k in earlier],
            "new": [fact(m) for m in msgs],
        }
        ans = self.calls.ask(
            "updates",
            P.updates_messages(ctx),
            P.UpdatesAnswer,
            lambda a: check_updates(a, {index[k] for k in earlier}, {index[m.id] for m in msgs}),
        )
        if ans is None:
            return {}
        out: dict[str, list[str]] = {m.id: [] for m in msgs}
        for j in ans.judgements:
            new_id, old_id = ids[j.new], ids[j.earlier]
            if j.verdict == "updates":
                out[new_id].append(old_id)
            elif old_id not in own:
                for fid in linkable_fragments(st, st.build_index(), old_id, frag.id):
                    st.graph.add_edge(Edge(frag.id, fid, EdgeKind.CONTRADICTS, created_at=frag.created_at))
        for replaced in out.values():
            replaced.sort(key=lambda k: time_order(st.messages[k]), reverse=True)
        return out
