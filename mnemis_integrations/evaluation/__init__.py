"""Retrieval benchmarks: datasets, baselines, metrics, a side-by-side runner and reports.

Typical use is the ``mnemis bench`` command (:mod:`.cli`); from Python::

    from mnemis_integrations.evaluation import load_locomo, run_benchmark, write_reports

    bench = load_locomo("locomo10.json", ["conv-26"])
    result = run_benchmark(bench, ["bm25", "dense", "hybrid"])
    write_reports(result, "bench-results")

Heavy libraries (bm25s, faiss, tiktoken, matplotlib, the engine) load on first use.
"""

from .baselines import (
    BaselineHit,
    BM25Retriever,
    Chunk3Retriever,
    DenseRetriever,
    EmbeddingCache,
    HybridRetriever,
)
from .datasets import (
    Benchmark,
    Conversation,
    EvidenceStats,
    Question,
    Session,
    load_locomo,
    normalise_evidence,
)
from .metrics import aggregate, budget_recall, budget_recalls, pack_context, recall_at_k, reciprocal_rank
from .report import markdown_report, plot_recall_vs_budget, write_reports
from .runner import DEFAULT_BUDGETS, DEFAULT_K, SYSTEM_NAMES, make_system, run_benchmark

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_K",
    "SYSTEM_NAMES",
    "BM25Retriever",
    "BaselineHit",
    "Benchmark",
    "Chunk3Retriever",
    "Conversation",
    "DenseRetriever",
    "EmbeddingCache",
    "EvidenceStats",
    "HybridRetriever",
    "Question",
    "Session",
    "aggregate",
    "budget_recall",
    "budget_recalls",
    "load_locomo",
    "make_system",
    "markdown_report",
    "normalise_evidence",
    "pack_context",
    "plot_recall_vs_budget",
    "recall_at_k",
    "reciprocal_rank",
    "run_benchmark",
    "write_reports",
]
