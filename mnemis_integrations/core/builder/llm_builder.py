"""LLM-powered graph building with any LangChain chat model or LlamaIndex LLM.

:class:`LLMBuilder` is a drop-in ``builder=`` for :class:`~mnemis_integrations.MnemisMemory`.
It runs the offline pipeline's skeleton (messages stored first, fragments created,
placed, linked) and asks the model, with structured output, for what the offline builder
approximates: topic boundaries, one-sentence summaries and keywords, subtopic and concept
names, entities and relations, and update/contradiction judgements.

Robustness: every answer is extracted, repaired and validated (:mod:`.llm_structured`,
:mod:`.llm_checks`); an invalid answer is retried at most ``max_retries`` times, then that
step falls back to the offline builder for that batch. Each step can be switched to
``"offline"`` on its own. Every message is stored and lands in exactly one fragment
whatever the model returns: segmentation answers are boundaries over the batch, so
coverage holds by construction.

Example:
    >>> from mnemis_integrations import MnemisMemory
    >>> from mnemis_integrations.core.embedders import HashingEmbedder
    >>> emb = HashingEmbedder()
    >>> broken = lambda messages: "Sorry, I cannot help with that."
    >>> builder = LLMBuilder(broken, embedder=emb, config=LLMBuildConfig(max_retries=0))
    >>> mem = MnemisMemory(embedder=emb, builder=builder)
    >>> mem.add_messages([{"id": "1", "speaker": "ann", "text": "Plan A is approved."}], namespace="u").added
    1
    >>> builder.last_usage.steps["segment"].fallbacks
    1
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..config import BuildConfig
from ..embedders import EmbedderProfile, as_embedder, profile_for
from ..llm import SchemaRequest, as_chat_model
from ..model import Edge, EdgeKind, Message, Node, NodeKind, Status
from ..state import NamespaceState
from ..text import format_date, normalise_name
from . import prompts as P
from .abstract import Placement, ReviewHook, accept_all
from .entities import EntityMention, extract_entities
from .llm_checks import check_entities, check_placements, check_segments, check_summaries, check_updates
from .llm_structured import Usage, ask
from .pipeline import BuildReport, OfflineBuilder
from .segment import segment
from .summarise import fragment_label

__all__ = ["STEPS", "LLMBuildConfig", "LLMBuildReport", "LLMBuilder"]

logger = logging.getLogger(__name__)

STEPS = ("segment", "summarise", "abstract", "entities", "updates")
Mode = Literal["llm", "offline"]
X = TypeVar("X")
Y = TypeVar("Y")


class LLMBuildConfig(BaseModel):
    """Which steps use the model, and how hard to try."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    segment: Mode = Field("llm", description="Topic boundaries.")
    summarise: Mode = Field("llm", description="One-sentence summary and keywords per fragment.")
    abstract: Mode = Field("llm", description="Subtopic and concept names for new fragments.")
    entities: Mode = Field("llm", description="Entities (granularity rule) and labelled relations.")
    updates: Mode = Field("llm", description="updates/contradicts judgements against earlier facts.")
    max_retries: int = Field(2, ge=0, le=10, description="Extra tries after an invalid answer, per call.")
    batch_messages: int = Field(24, ge=2, description="Messages per segmentation call.")
    batch_fragments: int = Field(
        6, ge=1, description="Fragments per summarise/abstract/entities/updates call."
    )
    max_concurrency: int = Field(4, ge=1, description="Model calls in flight at once.")
    update_candidates: int = Field(
        4, ge=1, description="Earlier facts shown per new fact for update judgements."
    )
    max_line_chars: int = Field(
        400, ge=40, description="Longer messages are cut in prompts (never in storage)."
    )
    prompt_cost_per_1k: float = Field(
        0.0, ge=0, description="Price per 1k prompt tokens, for the cost report."
    )
    completion_cost_per_1k: float = Field(0.0, ge=0, description="Price per 1k completion tokens.")

    @classmethod
    def only(cls, *steps: str, **kw: Any) -> LLMBuildConfig:
        """The model for ``steps``, the offline builder for the rest.

        >>> LLMBuildConfig.only("summarise", "entities").segment
        'offline'
        """
        unknown = set(steps) - set(STEPS)
        if unknown:
            from ...errors import ConfigError

            raise ConfigError(f"unknown step(s) {sorted(unknown)}; valid steps: {', '.join(STEPS)}")
        return cls(**{s: ("llm" if s in steps else "offline") for s in STEPS}, **kw)


class LLMBuildReport(BuildReport):
    """A :class:`BuildReport` plus the model usage of the ingest (calls, retries, fallbacks, tokens, cost)."""

    def __init__(self) -> None:
        super().__init__()
        self.usage: dict[str, Any] = {}


class LLMBuilder(OfflineBuilder):
    """Build the memory graph with a chat model, falling back to the offline builder per step.

    Args:
        model: a LangChain chat model, a LlamaIndex LLM, an object with
            ``complete(messages) -> str`` or a callable ``messages -> str``.
        config: per-step switches and limits.
        build: the offline builder's config (segment caps, thresholds) used by fallbacks.
        embedder: the memory's embedder (only its similarity profile is read), or pass ``profile``.
        review: sees every placement before it is applied, as with the offline builder.
        schema_request: ask the provider for output constrained to each step's JSON schema
            (see :func:`mnemis_integrations.core.llm.openai_json_schema`); LangChain and
            LlamaIndex models only. Answers are validated either way.
    """

    def __init__(
        self,
        model: Any,
        *,
        config: LLMBuildConfig | None = None,
        build: BuildConfig | None = None,
        embedder: Any = None,
        profile: EmbedderProfile | None = None,
        review: ReviewHook = accept_all,
        schema_request: SchemaRequest | None = None,
    ):
        if profile is None:
            profile = profile_for(as_embedder(embedder)) if embedder is not None else profile_for(None)
        super().__init__(build or BuildConfig(), profile, review)
        self.chat = as_chat_model(model, schema_request)
        self.llm = config or LLMBuildConfig()
        self.last_usage = Usage()
        self._seg: dict[str, Any] = {}  # what the model said about the fragment being added

    # ------------------------------------------------------------------ helpers
    def _map(self, fn: Callable[[X], Y], items: Sequence[X]) -> list[Y]:
        if self.llm.max_concurrency <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.llm.max_concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    def _line(self, m: Message) -> str:
        text = m.text if len(m.text) <= self.llm.max_line_chars else m.text[: self.llm.max_line_chars] + "..."
        return f"{m.speaker}: {text}"

    def _ask(self, step: str, messages, schema, check):
        """One batch's validated answer, or None when the batch falls back; counted either way."""
        ans = ask(
            self.chat, step, messages, schema, self._usage, max_retries=self.llm.max_retries, check=check
        )
        self._usage.add(step, **({"fallbacks": 1} if ans is None else {"llm_batches": 1}))
        return ans

    def _batches(self, n: int, size: int) -> list[list[int]]:
        return [list(range(i, min(n, i + size))) for i in range(0, n, size)]

    # ------------------------------------------------------------------ entry point
    def ingest(self, st: NamespaceState, new: list[Message], vectors: np.ndarray) -> LLMBuildReport:
        self._usage = Usage(self.llm.prompt_cost_per_1k, self.llm.completion_cost_per_1k)
        rep = LLMBuildReport()
        new, vectors = self._accept_messages(st, new, vectors)

        tail_frag = self._open_tail(st, new)
        tail_msgs = st.fragment_messages(tail_frag.id) if tail_frag is not None else []
        segments = self._segments(st, new, vectors, tail_msgs)
        texts = [([*tail_msgs] if seg[0] == -1 else []) + [new[i] for i in seg if i >= 0] for seg in segments]
        summaries = self._summaries(texts)
        mentions = self._entities(st, new, segments)
        is_new = [seg[0] != -1 for seg in segments]
        placements = self._placements(st, texts, summaries, is_new)

        created: list[tuple[str, list[Message]]] = []
        for k, seg in enumerate(segments):
            idx = [i for i in seg if i >= 0]
            frag = tail_frag if seg[0] == -1 else None
            if frag is not None:
                rep.fragments_extended += 1
            msgs = [new[i] for i in idx]
            self._seg = {
                "summary": summaries[k],
                "placement": placements.get(k),
                "relations": mentions[1].get(k, []),
            }
            self._add_fragment(st, frag, msgs, [mentions[0][i] for i in idx], rep)
            if frag is None:
                created.append((st.msg_fragment[msgs[0].id], msgs))
        self._seg = {}
        self._updates(st, created, rep)
        self._relabel(st, rep)
        rep.usage = self._usage.to_dict()
        self.last_usage = self._usage
        _warn_on_fallbacks(self._usage, st.namespace)
        return rep

    # ------------------------------------------------------------------ 1. segment
    def _segments(
        self, st: NamespaceState, new: list[Message], vectors: np.ndarray, tail: list[Message]
    ) -> list[list[int]]:
        cfg = self.cfg
        tail_arg = (tail, st.msg_vectors.get_many([m.id for m in tail])) if tail else None

        def offline(lo: int, hi: int, with_tail: bool) -> tuple[set[int], bool]:
            segs = segment(
                new[lo:hi],
                vectors[lo:hi],
                max_messages=cfg.max_segment_messages,
                min_messages=cfg.min_segment_messages,
                time_gap_minutes=cfg.time_gap_minutes,
                drift_threshold=self._t("drift_threshold"),
                tail=tail_arg if with_tail else None,
            )
            cuts = {lo + s[0] for s in segs if s[0] != -1}
            return cuts, bool(segs) and segs[0][0] == -1

        batches = self._batches(len(new), self.llm.batch_messages)
        if self.llm.segment == "offline":
            results = [offline(b[0], b[-1] + 1, k == 0) for k, b in enumerate(batches)]
        else:

            def one(kb: tuple[int, list[int]]) -> tuple[set[int], bool]:
                k, b = kb
                earlier = tail[-3:] if k == 0 else [new[i] for i in range(max(0, b[0] - 2), b[0])]
                ctx: P.SegmentContext = {
                    "earlier": [self._line(m) for m in earlier],
                    "messages": [
                        {"i": j, "speaker": new[i].speaker, "text": self._line(new[i]).split(": ", 1)[1]}
                        for j, i in enumerate(b)
                    ],
                }
                ans = self._ask(
                    "segment", P.segment_messages(ctx), P.SegmentAnswer, lambda a: check_segments(a, len(b))
                )
                if ans is None:
                    return offline(b[0], b[-1] + 1, k == 0)
                cuts = {b[0] + j for j in ans.new_topic_at}
                if k == 0 and not tail:
                    cuts.add(0)
                return cuts, k == 0 and bool(tail) and 0 not in ans.new_topic_at

            results = self._map(one, list(enumerate(batches)))
        cuts: set[int] = set()
        continues = False
        for k, (c, cont) in enumerate(results):
            cuts |= c
            continues = continues or (k == 0 and cont)
        if not continues:
            cuts.add(0)
        # Hard rules the model cannot overrule: a long silence cuts, and no segment outgrows the cap.
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
    def _summaries(self, texts: list[list[Message]]) -> list[P.FragmentSummary | None]:
        out: list[P.FragmentSummary | None] = [None] * len(texts)
        if self.llm.summarise == "offline" or not texts:
            return out

        def one(b: list[int]) -> None:
            bodies = {j: [self._line(m) for m in texts[k]] for j, k in enumerate(b)}
            ctx: P.SummariseContext = {"fragments": [{"f": j, "lines": ls} for j, ls in bodies.items()]}
            joined = {j: "\n".join(ls) for j, ls in bodies.items()}
            ans = self._ask(
                "summarise",
                P.summarise_messages(ctx),
                P.SummariseAnswer,
                lambda a: check_summaries(a, joined, self.cfg.keywords_per_fragment),
            )
            if ans is None:
                return
            for s in ans.summaries:
                out[b[s.f]] = s

        self._map(one, self._batches(len(texts), self.llm.batch_fragments))
        return out

    # ------------------------------------------------------------------ 3. abstract
    def _placements(
        self, st: NamespaceState, texts, summaries, is_new: list[bool]
    ) -> dict[int, P.PlacementProposal]:
        out: dict[int, P.PlacementProposal] = {}
        todo = [k for k, n in enumerate(is_new) if n]
        if self.llm.abstract == "offline" or not todo:
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
            return {"f": j, "summary": " / ".join(self._line(m) for m in texts[k])[:300], "keywords": []}

        # One call per batch, in order: later batches see the names earlier ones proposed.
        for b in [[todo[i] for i in r] for r in self._batches(len(todo), self.llm.batch_fragments)]:
            ctx: P.AbstractContext = {
                "existing": existing,
                "fragments": [brief(j, k) for j, k in enumerate(b)],
            }
            frag_idx = list(range(len(b)))
            ans = self._ask(
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

    def _find(self, st: NamespaceState, kind: NodeKind, name: str) -> Node | None:
        key = normalise_name(name)
        for n in st.graph.nodes(kind):
            if normalise_name(n.label) == key and n.status != Status.ARCHIVED:
                return n
        return None

    def _place(self, st: NamespaceState, frag: Node, rep: BuildReport) -> None:
        prop: P.PlacementProposal | None = self._seg.get("placement")
        if prop is None:
            return super()._place(st, frag, rep)
        g = st.graph
        sub = self._find(st, NodeKind.SUBTOPIC, prop.subtopic)
        if sub is not None and len(g.children(sub.id)) >= self.cfg.max_subtopic_fragments:
            sub = None
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
        g.add_node(
            Node(
                id=sid,
                kind=NodeKind.SUBTOPIC,
                label=p.label or prop.subtopic,
                namespace=st.namespace,
                created_at=frag.created_at,
                event_time=frag.event_time,
                properties={"named_by": "llm"},
            )
        )
        rep.subtopics_created += 1
        g.add_edge(Edge(frag.id, sid, EdgeKind.BELONGS_TO, created_at=frag.created_at))
        st.refresh_vectors([sid])
        rep.touched.add(sid)
        con = self._find(st, NodeKind.CONCEPT, prop.concept)
        if con is not None and len(g.children(con.id)) >= self.cfg.max_concept_subtopics:
            con = None
        cp = self.review(Placement(sid, "concept", con.id if con else None, 0.0, prop.concept))
        cid = cp.parent_id
        if cid is None or not g.has(cid):
            cid = f"c:{sid[2:]}"
            g.add_node(
                Node(
                    id=cid,
                    kind=NodeKind.CONCEPT,
                    label=cp.label or prop.concept,
                    namespace=st.namespace,
                    created_at=frag.created_at,
                    event_time=frag.event_time,
                    properties={"named_by": "llm"},
                )
            )
            rep.concepts_created += 1
        g.add_edge(Edge(sid, cid, EdgeKind.BELONGS_TO, created_at=frag.created_at))
        st.build_index().child_added(cid)
        st.refresh_vectors([cid])
        rep.touched.add(cid)

    # ------------------------------------------------------------------ fragment text
    def _add_fragment(self, st, frag, msgs, ments, rep) -> None:
        super()._add_fragment(st, frag, msgs, ments, rep)
        node = st.graph.get(st.msg_fragment[msgs[0].id])
        s: P.FragmentSummary | None = self._seg.get("summary")
        if s is not None:
            node.summary = s.summary
            if s.keywords:
                node.keywords = s.keywords
            node.label = fragment_label(node.keywords, node.created_at)
        for r in self._seg.get("relations", []):
            a, b = st.entities.get(r.source), st.entities.get(r.target)
            if a and b and a != b:
                label = "_".join(r.relation.lower().split()[:3])
                st.graph.add_edge(Edge(a, b, EdgeKind.RELATION, label=label, created_at=node.event_time))

    # ------------------------------------------------------------------ 4. entities
    def _entities(self, st: NamespaceState, new: list[Message], segments: list[list[int]]):
        """(mentions per new message, relations per segment index)."""
        offline = extract_entities([m.text for m in new], known=st.entities.keys())
        relations: dict[int, list[P.RelationItem]] = {}
        if self.llm.entities == "offline" or not new:
            return offline, relations
        mentions = list(offline)

        def one(b: list[int]) -> None:
            segs = {j: [i for i in segments[k] if i >= 0] for j, k in enumerate(b)}
            bodies = {j: [self._line(new[i]) for i in idx] for j, idx in segs.items()}
            ctx: P.EntitiesContext = {"fragments": [{"f": j, "lines": ls} for j, ls in bodies.items()]}
            texts = {j: "\n".join(new[i].text for i in idx) for j, idx in segs.items()}
            ans = self._ask(
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

        self._map(one, self._batches(len(segments), self.llm.batch_fragments))
        return mentions, relations

    # ------------------------------------------------------------------ 5. updates
    def _link_updates(self, st, frag, msgs, rep) -> None:
        if self.llm.updates == "offline" or not self._seg:
            super()._link_updates(st, frag, msgs, rep)
        # else: judged for the whole batch in _updates, once every new fragment is placed.

    def _candidates(self, st: NamespaceState, fid: str) -> list[str]:
        g = st.graph
        frag = g.get(fid)
        mine = {e.dst for e in g.out_edges(fid, EdgeKind.MENTIONS)}
        parent = g.parent(fid)
        v = st.node_vectors.get(fid)
        scored = []
        for f in g.nodes(NodeKind.FRAGMENT):
            if f.id == fid or f.status != Status.ACTIVE:
                continue
            if f.event_time and frag.created_at and f.event_time > frag.created_at:
                continue
            fp = g.parent(f.id)
            shared = mine & {e.dst for e in g.out_edges(f.id, EdgeKind.MENTIONS)}
            if not shared and not (parent is not None and fp is not None and fp.id == parent.id):
                continue
            scored.append((float(st.node_vectors.get(f.id) @ v) if f.id in st.node_vectors else 0.0, f.id))
        scored.sort(reverse=True)
        return [f for _, f in scored[: self.llm.update_candidates]]

    def _updates(
        self, st: NamespaceState, created: list[tuple[str, list[Message]]], rep: BuildReport
    ) -> None:
        if self.llm.updates == "offline" or not created:
            return
        g = st.graph

        def fact(n: int, fid: str) -> P.Fact:
            node = g.get(fid)
            return {
                "n": n,
                "time": format_date(node.event_time) if node.event_time else "",
                "text": node.summary,
            }

        from ..maintenance.supersede import supersede

        def one(b: list[tuple[str, list[Message]]]) -> None:
            cands = {fid: self._candidates(st, fid) for fid, _ in b}
            earlier_ids = list(dict.fromkeys(c for cs in cands.values() for c in cs if c not in cands))
            if not any(cands.values()):
                return
            index = {fid: n for n, fid in enumerate(earlier_ids + [fid for fid, _ in b])}
            ids = {n: fid for fid, n in index.items()}
            ctx: P.UpdatesContext = {
                "earlier": [fact(index[f], f) for f in earlier_ids],
                "new": [fact(index[f], f) for f, _ in b],
            }
            ans = self._ask(
                "updates",
                P.updates_messages(ctx),
                P.UpdatesAnswer,
                lambda a: check_updates(a, {index[f] for f in earlier_ids}, {index[f] for f, _ in b}),
            )
            if ans is None:
                for fid, msgs in b:
                    OfflineBuilder._link_updates(self, st, g.get(fid), msgs, rep)
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
        for i in range(0, len(created), self.llm.batch_fragments):
            one(created[i : i + self.llm.batch_fragments])


def _warn_on_fallbacks(usage: Usage, namespace: str) -> None:
    """One WARNING per ingest in which some step fell back to the offline builder: the ingest
    itself succeeds, so a model that cannot answer at all (a wrong API key, a dead endpoint)
    would otherwise go unnoticed behind a normal-looking report."""
    fell_back = {name: s for name, s in usage.steps.items() if s.fallbacks}
    if not fell_back:
        return
    steps = ", ".join(
        f"{name} {s.fallbacks} of {s.fallbacks + s.llm_batches}" for name, s in fell_back.items()
    )
    last = next((s.errors[-1] for s in reversed(list(fell_back.values())) if s.errors), "no error recorded")
    logger.warning(
        "LLM builder fell back to the offline builder in namespace %r (batches per step: %s); last error: %s",
        namespace,
        steps,
        last,
    )
