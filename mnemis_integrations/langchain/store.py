"""``MnemisStore``: a LangGraph ``BaseStore`` whose ``search(query=...)`` is Mnemis dual-path recall.

Exact-key operations (get, put, delete, list) go to a backing store (an ``InMemoryStore`` unless
you pass another, e.g. a ``PostgresStore``). Every put is also ingested into the memory, and a
search with a ``query`` is answered by recall over the memory, then mapped back to the items.

How names map:
    A store namespace tuple becomes the Mnemis namespace of its labels joined with ``':'``:
    ``("memories", "u1")`` -> ``"memories:u1"``. Any label LangGraph accepts is taken: characters
    a Mnemis namespace cannot hold are escaped reversibly (``("users", "user:42")`` ->
    ``"users:user.3a42"``), and a name past 128 characters is shortened with a digest (see
    :func:`._namespaces.namespace_to_str`). ``list_namespaces`` answers with the labels as given.
    Each put becomes one message with id ``"<key>#<value digest>:<text digest>"`` and the value's
    text (see :func:`._convert.value_to_text`), so re-putting the same value stores it once. Any
    key LangGraph accepts is taken: one a message id cannot hold (a control character, a lone
    surrogate, or past 236 characters under the default ``limits.max_id_chars``) is named in the
    id by its digest, ``"<key digest>#<value digest>:<text digest>:k"``, and kept, escaped, in the
    message's ``store_key`` metadata, which must fit ``limits.max_metadata_chars`` (else the put
    is refused with ``InvalidMessageError``). A text holding NUL is refused too, whatever the key.

Deleting and overwriting:
    A delete, or a put that replaces a value, also ``forget`` s the item's earlier messages in the
    memory (text gone from the graph, the indexes and a persisted file), so a
    ``MnemisRetriever`` or ``memory.search`` over the same namespace no longer finds the old text.

What search returns:
    Items whose *current* value was recalled: a hit names messages, each message names a key
    and a version, and only keys whose stored value still has that version are returned.
    ``filter`` is applied to the current value, then ``offset``/``limit``. Recall finds the
    candidates, in every namespace under the prefix; they are then ranked by how well each item
    alone matches the query (:meth:`MnemisMemory.score_messages`: calibrated cosine and query-term
    coverage), a score on one scale for every namespace, so items of several namespaces merge
    fairly and items sharing a fragment are still told apart. Results are
    :class:`MnemisSearchItem` s, which carry the hit's ``path``, ``path_str``, ``via``,
    ``node_id`` and ``recall_score`` besides ``score``.

Granularity:
    A store given no memory makes one with :func:`item_level_config`, which keeps every item in
    a fragment of its own; a memory shared with chat turns groups messages that arrive together
    on one topic into one fragment, and the items of a fragment then share its path.

Batches:
    Reads in one batch (get, search, list) all see the state from before the batch; its writes
    are applied afterwards, memory first, then the backing store.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from langgraph.store.base.embed import ensure_embeddings
from langgraph.store.memory import InMemoryStore

from ..core import recipes
from ..core.config import MemoryConfig
from ..core.engine import MnemisMemory
from ..core.messages import coerce_messages, utc_now
from ..core.retrieval.results import MemoryHit
from ..errors import ConfigError, NamespaceNotFoundError
from ._convert import (
    keys_in_recall_order,
    matches_filter,
    stale_message_ids,
    store_message_id,
    store_message_metadata,
    value_digest,
    value_to_text,
)
from ._namespaces import namespace_to_str

__all__ = ["MnemisSearchItem", "MnemisStore", "item_level_config"]

# Recall asks for this many hits per wanted item, because a hit may name items that the filter
# or a later overwrite removes; it doubles on each retry until the memory has no more hits.
_RECALL_FACTOR = 2
_MIN_RECALL_K = 10
_LIST_PAGE = 1000


class MnemisSearchItem(SearchItem):
    """A ``SearchItem`` that also says where its best hit sits in the memory hierarchy.

    ``score`` is the item's own match to the query (comparable across namespaces).

    Attributes:
        path: labels from the top concept down to the hit that found this item.
        via: how that hit was found, e.g. ``("semantic", "relation")``.
        node_id: the hit's node id.
        recall_score: the hit's score within its namespace's recall.
    """

    __slots__ = ("node_id", "path", "recall_score", "via")

    def __init__(self, item: Item, hit: MemoryHit, score: float) -> None:
        super().__init__(
            namespace=item.namespace,
            key=item.key,
            value=item.value,
            created_at=item.created_at,
            updated_at=item.updated_at,
            score=score,
        )
        self.path = hit.path
        self.via = hit.via
        self.node_id = hit.node_id
        self.recall_score = hit.score

    @property
    def path_str(self) -> str:
        """The path as ``"A > B > C"``."""
        return " > ".join(self.path)

    def dict(self) -> dict:
        d = super().dict()
        d["mnemis"] = {
            "path": list(self.path),
            "path_str": self.path_str,
            "via": list(self.via),
            "node_id": self.node_id,
            "recall_score": self.recall_score,
        }
        return d


def item_level_config(base: MemoryConfig | None = None) -> MemoryConfig:
    """A config that keeps every message in a fragment of its own, for a memory behind a store.

    Mnemis groups messages that arrive together on one topic into one fragment, and a fragment
    hit names all its messages; store items are independent facts, so a memory dedicated to a
    store recalls them one by one when each is its own fragment. Subtopics and concepts still
    group them, so paths stay meaningful. A :class:`MnemisStore` given no memory uses it.

    Examples:
        >>> item_level_config().build.max_segment_messages
        1
    """
    base = base if base is not None else recipes.DEFAULT
    return base.with_(build={"max_segment_messages": 1, "min_segment_messages": 1})


_loop: asyncio.AbstractEventLoop | None = None
_loop_guard = threading.Lock()


def _embedding_loop() -> asyncio.AbstractEventLoop:
    """The event loop async embed functions run on: one, in a daemon thread, made on first use."""
    global _loop
    with _loop_guard:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="mnemis-embed", daemon=True).start()
        return _loop


def _forget_loop_in_child() -> None:
    # A forked child has the loop but not the thread that runs it: its first embed would wait forever.
    global _loop, _loop_guard
    _loop, _loop_guard = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only; elsewhere no process is forked
    os.register_at_fork(after_in_child=_forget_loop_in_child)


def _memory_for(memory: MnemisMemory | None, index: IndexConfig | None) -> MnemisMemory:
    embed = (index or {}).get("embed")
    if memory is not None:
        if embed is not None:
            raise ConfigError(
                "index['embed'] sets the embedder of the memory the store makes; with memory= given, "
                "pass the embedder to MnemisMemory(embedder=...) instead"
            )
        return memory
    if isinstance(embed, str):
        embed = ensure_embeddings(embed)  # a "provider:model" string, as LangGraph reads it
    elif inspect.iscoroutinefunction(embed):
        # LangGraph wraps one into an Embeddings that only embeds asynchronously, and the memory
        # embeds synchronously: run it on one loop of the store's own, from any thread (a fresh loop
        # per call would break an async client bound to the first, and none can start inside a
        # running one)
        afn = embed

        def embed(texts: Sequence[str]) -> Any:
            return asyncio.run_coroutine_threadsafe(afn(list(texts)), _embedding_loop()).result()

        embed.__name__ = getattr(afn, "__name__", "embed")
    return MnemisMemory(embedder=embed, config=item_level_config())


def _fields_for(fields: Sequence[str] | None, index: IndexConfig | None) -> list[str] | None:
    indexed = (index or {}).get("fields")
    if fields is not None and indexed is not None:
        raise ConfigError("give the ingested fields once: fields= or index['fields'], not both")
    chosen = fields if fields is not None else indexed
    return list(chosen) if chosen is not None else None


@dataclass
class _NamespaceWrites:
    """What a batch's writes do to one Mnemis namespace."""

    messages: list[dict[str, Any]] = field(default_factory=list)  # new message records to ingest
    latest: dict[str, str | None] = field(default_factory=dict)  # key -> its new message id (None: none)


@dataclass
class _Plan:
    ops: list[Op]
    results: list[Result]
    plain: list[int]  # ops the backing store answers
    recalls: list[int]  # searches with a query
    puts: list[PutOp]
    writes: dict[str, _NamespaceWrites]


class _Candidate(NamedTuple):
    namespace: tuple[str, ...]
    name: str  # the Mnemis namespace
    key: str
    digest: str
    message_id: str
    hit: MemoryHit


class MnemisStore(BaseStore):
    """LangGraph long-term store backed by Mnemis recall; pass it to ``create_agent(store=...)``.

    Args:
        memory: the memory every put is ingested into and every query search recalls from;
            ``None`` makes an in-memory one with :func:`item_level_config` (and ``index['embed']``
            as its embedder, the offline default without).
        index: LangGraph's index config, as ``InMemoryStore(index=...)`` takes it: ``embed`` (an
            ``Embeddings``, a function, or a ``"provider:model"`` string) for the memory the store
            makes, ``fields`` as below; ``dims`` is accepted and not needed (Mnemis reads the
            dimension off the vectors).
        backing: the exact-key store for values; a fresh ``InMemoryStore`` if omitted.
        fields: which value fields to ingest (LangGraph path syntax, e.g. ``["text", "tags[*]"]``);
            ``None`` (or ``["$"]``) ingests the whole value. A put's own ``index=[...]`` overrides
            this, and ``index=False`` stores the value without ingesting it.
        speaker: the speaker name ingested messages get.
        clock: gives the timestamp of ingested messages (UTC now by default; pass one in tests).
        show_progress: draw a tqdm bar (stderr) while a batch's items are ingested.

    Raises:
        ConfigError: ``index['embed']`` together with ``memory``, or both ``fields`` and
            ``index['fields']``.

    Example:
        .. code-block:: python

            store = MnemisStore(index={"embed": embeddings, "fields": ["text"]})
            store.put(("memories", "u1"), "tea", {"text": "User drinks green tea, no sugar"})
            store.get(("memories", "u1"), "tea").value
            hits = store.search(("memories", "u1"), query="what does the user drink?", limit=3)
            hits[0].key, hits[0].score, hits[0].path_str
            store.delete(("memories", "u1"), "tea")   # also forgotten by the memory
    """

    def __init__(
        self,
        memory: MnemisMemory | None = None,
        *,
        index: IndexConfig | None = None,
        backing: BaseStore | None = None,
        fields: Sequence[str] | None = None,
        speaker: str = "memory",
        clock: Callable[[], datetime] = utc_now,
        show_progress: bool = False,
    ) -> None:
        self.fields = _fields_for(fields, index)
        self.memory = _memory_for(memory, index)
        self.backing = backing if backing is not None else InMemoryStore()
        self.speaker = speaker
        self.clock = clock
        self.show_progress = show_progress  # a tqdm bar per batch of writes, as add_messages draws
        self.supports_ttl = self.backing.supports_ttl
        self.ttl_config = self.backing.ttl_config

    # -- batch -----------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        plan = self._plan(ops)
        if plan.plain:
            for i, r in zip(plan.plain, self.backing.batch([plan.ops[i] for i in plan.plain]), strict=True):
                plan.results[i] = r
        for i in plan.recalls:
            plan.results[i] = self._recall(plan.ops[i])
        for ns, writes in plan.writes.items():
            if writes.messages:
                self.memory.add_messages(writes.messages, namespace=ns, show_progress=self.show_progress)
            self._retire(ns, writes.latest)
        if plan.puts:
            self.backing.batch(plan.puts)
        return plan.results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        plan = self._plan(ops)
        if plan.plain:
            for i, r in zip(
                plan.plain, await self.backing.abatch([plan.ops[i] for i in plan.plain]), strict=True
            ):
                plan.results[i] = r
        for i in plan.recalls:
            plan.results[i] = await self._arecall(plan.ops[i])
        if plan.puts:
            # Shielded: a cancel does not stop a memory write (it runs on in its thread), so the
            # rest of the writes must follow it, or the memory and the backing store disagree.
            await asyncio.shield(self._awrite(plan))
        return plan.results

    async def _awrite(self, plan: _Plan) -> None:
        for ns, writes in plan.writes.items():
            if writes.messages:
                await self.memory.aadd_messages(
                    writes.messages, namespace=ns, show_progress=self.show_progress
                )
            await asyncio.to_thread(self._retire, ns, writes.latest)
        await self.backing.abatch(plan.puts)

    def _plan(self, ops: Iterable[Op]) -> _Plan:
        """Validate every op and sort them into backing reads, recall searches and writes.

        Everything that can be refused is refused here, before the batch touches any state.
        """
        ops = list(ops)
        plain: list[int] = []
        recalls: list[int] = []
        puts: list[PutOp] = []
        for i, op in enumerate(ops):
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                puts.append(op)
            elif isinstance(op, SearchOp) and op.query:
                recalls.append(i)
            elif isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
                plain.append(i)
            else:
                raise ValueError(f"unknown store operation {type(op).__name__}")
        writes = self._writes_for(puts)
        for ns_writes in writes.values():
            # The memory would refuse a message only after earlier namespaces were written.
            coerce_messages(ns_writes.messages, self.memory.config.limits)
        return _Plan(ops, [None] * len(ops), plain, recalls, puts, writes)

    def _writes_for(self, puts: list[PutOp]) -> dict[str, _NamespaceWrites]:
        # The last put of a key in a batch wins, as in LangGraph's own stores.
        last: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in puts:
            last[(tuple(op.namespace), op.key)] = op
        now = self.clock()
        max_id_chars = self.memory.config.limits.max_id_chars
        out: dict[str, _NamespaceWrites] = defaultdict(_NamespaceWrites)
        for op in last.values():
            writes = out[namespace_to_str(op.namespace)]
            writes.latest[op.key] = None
            if op.value is None or op.index is False:
                continue
            text = self._text_of(op.value, self.fields if op.index is None else op.index)
            if text.strip():
                message_id = store_message_id(op.key, op.value, text, max_chars=max_id_chars)
                writes.latest[op.key] = message_id
                writes.messages.append(
                    {
                        "id": message_id,
                        "speaker": self.speaker,
                        "text": text,
                        "timestamp": now,
                        "metadata": store_message_metadata(op.key, message_id),
                    }
                )
        return dict(out)

    def _retire(self, namespace: str, latest: dict[str, str | None]) -> None:
        """Forget the messages of the written keys that are not their latest version."""
        try:
            stored = self.memory.messages(namespace)
        except NamespaceNotFoundError:
            return
        stale = stale_message_ids(((m.id, m.metadata) for m in stored), latest)
        if stale:
            self.memory.forget(stale, namespace=namespace)

    @staticmethod
    def _text_of(value: Any, fields: Sequence[str] | None) -> str:
        if fields is None or list(fields) == ["$"]:
            return value_to_text(value)
        texts = [
            t
            for f in fields
            for t in ([value_to_text(value)] if f == "$" else get_text_at_path(value, tokenize_path(f)))
        ]
        return "\n".join(t for t in texts if t)

    # -- recall ----------------------------------------------------------------------------------

    # -- recall: one sequence of steps, run by a sync and an async driver ------------------------

    def _recall(self, op: SearchOp) -> list[SearchItem]:
        steps, answer = self._recall_steps(op), None
        try:
            while True:
                kind, args = steps.send(answer)
                if kind == "backing":
                    answer = self.backing.batch(args)
                elif kind == "search":
                    answer = self._search_one(*args)
                else:
                    answer = self.memory.score_messages(*args)
        except StopIteration as done:
            return done.value

    async def _arecall(self, op: SearchOp) -> list[SearchItem]:
        steps, answer = self._recall_steps(op), None
        try:
            while True:
                kind, args = steps.send(answer)
                if kind == "backing":
                    answer = await self.backing.abatch(args)
                elif kind == "search":
                    answer = await self._asearch_one(*args)
                else:
                    answer = await self.memory.ascore_messages(*args)
        except StopIteration as done:
            return done.value

    def _recall_steps(self, op: SearchOp) -> Generator[tuple[str, Any], Any, list[SearchItem]]:
        """A prefix search, as the calls it needs: it yields ``("backing", ops)`` (a batch of the
        backing store), ``("search", (query, k, namespace))`` and ``("score", (query, ids))``, and is
        sent each answer, so the sync and the async store run the same steps."""
        found: list[tuple[str, ...]] = []
        prefix = tuple(op.namespace_prefix)
        conditions = (MatchCondition(match_type="prefix", path=prefix),) if prefix else None
        while True:
            page = (yield "backing", [ListNamespacesOp(conditions, None, _LIST_PAGE, len(found))])[0]
            found.extend(page)
            if len(page) < _LIST_PAGE:
                break
        # A list_namespaces prefix reads "*" as a wildcard; a search prefix is literal (LangGraph's stores).
        spaces = [(tuple(ns), namespace_to_str(ns)) for ns in found if tuple(ns[: len(prefix)]) == prefix]
        want = op.offset + op.limit
        max_k = self.memory.config.limits.max_k
        k = min(max_k, max(_MIN_RECALL_K, want * _RECALL_FACTOR))
        while True:
            per_ns, exhausted = {}, True
            for ns, name in spaces:
                hits = yield "search", (op.query, k, name)
                exhausted &= len(hits) < k or k >= max_k
                per_ns[(ns, name)] = hits
            candidates = _candidates(per_ns)
            items = yield "backing", [GetOp(c.namespace, c.key, op.refresh_ttl) for c in candidates]
            kept = _keep_current(candidates, items, op.filter)
            if len(kept) >= want or exhausted:
                scores = yield "score", (op.query, _ids_by_namespace(kept))
                return _ranked(kept, scores)[op.offset : want]
            k = min(2 * k, max_k)

    def _search_one(self, query: str, k: int, namespace: str) -> list[MemoryHit]:
        try:
            return list(self.memory.search(query, k=k, namespace=namespace))
        except NamespaceNotFoundError:
            return []

    async def _asearch_one(self, query: str, k: int, namespace: str) -> list[MemoryHit]:
        try:
            return list(await self.memory.asearch(query, k=k, namespace=namespace))
        except NamespaceNotFoundError:
            return []


def _candidates(per_ns: dict[tuple[tuple[str, ...], str], list[MemoryHit]]) -> list[_Candidate]:
    """Every item version the hits name, each namespace's in its recall order."""
    return [
        _Candidate(ns, name, key, digest, message_id, hit)
        for (ns, name), hits in per_ns.items()
        for key, digest, message_id, hit in keys_in_recall_order(hits)
    ]


def _keep_current(
    candidates: list[_Candidate], items: list[Item | None], filter: dict[str, Any] | None
) -> list[tuple[_Candidate, Item]]:
    """Candidates whose item still exists with the recalled version and passes the filter."""
    kept: list[tuple[_Candidate, Item]] = []
    seen: set[tuple[tuple[str, ...], str]] = set()
    for c, item in zip(candidates, items, strict=True):
        if item is None or (c.namespace, c.key) in seen or value_digest(item.value) != c.digest:
            continue
        if not matches_filter(item.value, filter):
            continue
        seen.add((c.namespace, c.key))
        kept.append((c, item))
    return kept


def _ids_by_namespace(kept: list[tuple[_Candidate, Item]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for c, _ in kept:
        out[c.name].append(c.message_id)
    return out


def _ranked(kept: list[tuple[_Candidate, Item]], scores: dict[tuple[str, str], float]) -> list[SearchItem]:
    """The kept items as search results, best item score first (recall order among equals)."""
    results = [MnemisSearchItem(item, c.hit, scores.get((c.name, c.message_id), 0.0)) for c, item in kept]
    results.sort(key=lambda r: -r.score)  # stable
    return results
