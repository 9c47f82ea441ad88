"""``MnemisStore``: a LangGraph ``BaseStore`` whose ``search(query=...)`` is Mnemis dual-path recall.

Exact-key operations (get, put, delete, list) go to a backing store (an ``InMemoryStore`` unless
you pass another, e.g. a ``PostgresStore``). Every put is also ingested into the memory, and a
search with a ``query`` is answered by recall over the memory, then mapped back to the items.

How names map:
    A store namespace tuple becomes the Mnemis namespace of its labels joined with ``':'``:
    ``("memories", "u1")`` -> ``"memories:u1"``. Labels may hold letters, digits, ``_``, ``-`` and
    ``@`` (LangGraph forbids ``'.'``; ``':'`` is the separator), at most 128 characters in all;
    anything else raises :class:`~mnemis_integrations.errors.InvalidNamespaceError` before any write.
    Each put becomes one message with id ``"<key>#<value digest>:<text digest>"`` and the value's text
    (see :func:`._convert.value_to_text`), so re-putting the same value stores it once and an
    updated value becomes a new message.

What search returns:
    Items whose *current* value was recalled: a hit names messages, each message names a key
    and a version, and only keys whose stored value still has that version are returned (a
    deleted or overwritten item is never answered from its old text). ``filter`` is applied to
    the current value, then ``offset``/``limit``. A prefix covering several namespaces searches
    each one's memory and merges by score. Results are :class:`MnemisSearchItem` s, which carry
    the hit's ``path``, ``path_str``, ``via`` and ``node_id`` besides ``score``.

Granularity:
    Mnemis groups messages that arrive together on one topic into one fragment, and all items
    of a fragment share its hit. Give a store its own memory built with
    ``config=item_level_config()`` to rank items one by one.

Batches:
    Reads in one batch (get, search, list) all see the state from before the batch; its writes
    are applied afterwards, memory first, then the backing store.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
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
from langgraph.store.memory import InMemoryStore

from ..core import recipes
from ..core.config import MemoryConfig
from ..core.engine import MnemisMemory
from ..core.retrieval.results import MemoryHit
from ..errors import InvalidNamespaceError, NamespaceNotFoundError
from ._convert import (
    keys_in_recall_order,
    matches_filter,
    namespace_to_str,
    store_message_id,
    value_digest,
    value_to_text,
)

__all__ = ["MnemisSearchItem", "MnemisStore", "item_level_config"]

# Recall asks for this many hits per wanted item, because a hit may name items that the filter
# or a later overwrite removes; it doubles on each retry until the memory has no more hits.
_RECALL_FACTOR = 2
_MIN_RECALL_K = 10
_LIST_PAGE = 1000


class MnemisSearchItem(SearchItem):
    """A ``SearchItem`` that also says where its best hit sits in the memory hierarchy.

    Attributes:
        path: labels from the top concept down to the hit that found this item.
        via: how that hit was found, e.g. ``("semantic", "relation")``.
        node_id: the hit's node id.
    """

    __slots__ = ("node_id", "path", "via")

    def __init__(self, item: Item, hit: MemoryHit) -> None:
        super().__init__(
            namespace=item.namespace,
            key=item.key,
            value=item.value,
            created_at=item.created_at,
            updated_at=item.updated_at,
            score=hit.score,
        )
        self.path = hit.path
        self.via = hit.via
        self.node_id = hit.node_id

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
        }
        return d


def item_level_config(base: MemoryConfig | None = None) -> MemoryConfig:
    """A config that keeps every message in a fragment of its own, for a memory behind a store.

    Mnemis groups messages that arrive together on one topic into one fragment, and a fragment
    hit names all its messages; store items are independent facts, so a memory dedicated to a
    store ranks them one by one when each is its own fragment. Subtopics and concepts still
    group them, so paths stay meaningful.

    Examples:
        >>> item_level_config().build.max_segment_messages
        1
    """
    base = base if base is not None else recipes.DEFAULT
    return base.with_(build={"max_segment_messages": 1, "min_segment_messages": 1})


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class MnemisStore(BaseStore):
    """LangGraph long-term store backed by Mnemis recall; pass it to ``create_agent(store=...)``.

    Args:
        memory: the memory every put is ingested into and every query search recalls from.
        backing: the exact-key store for values; a fresh ``InMemoryStore`` if omitted.
        fields: which value fields to ingest (LangGraph path syntax, e.g. ``["text", "tags[*]"]``);
            ``None`` ingests the whole value. A put's own ``index=[...]`` overrides this, and
            ``index=False`` stores the value without ingesting it.
        speaker: the speaker name ingested messages get.
        clock: gives the timestamp of ingested messages (UTC now by default; pass one in tests).

    Example:
        .. code-block:: python

            store = MnemisStore(memory=MnemisMemory(config=item_level_config()))
            store.put(("memories", "u1"), "tea", {"text": "User drinks green tea, no sugar"})
            store.get(("memories", "u1"), "tea").value
            hits = store.search(("memories", "u1"), query="what does the user drink?", limit=3)
            hits[0].key, hits[0].score, hits[0].path_str
    """

    def __init__(
        self,
        memory: MnemisMemory,
        *,
        backing: BaseStore | None = None,
        fields: Sequence[str] | None = None,
        speaker: str = "memory",
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.memory = memory
        self.backing = backing if backing is not None else InMemoryStore()
        self.fields = list(fields) if fields is not None else None
        self.speaker = speaker
        self.clock = clock
        self.supports_ttl = self.backing.supports_ttl
        self.ttl_config = self.backing.ttl_config

    # -- batch -----------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops, results, plain, recalls, writes, ingest = self._plan(ops)
        if plain:
            for i, r in zip(plain, self.backing.batch([ops[i] for i in plain])):
                results[i] = r
        for i in recalls:
            results[i] = self._recall(ops[i])
        for ns, messages in ingest.items():
            self.memory.add_messages(messages, namespace=ns)
        if writes:
            self.backing.batch(writes)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops, results, plain, recalls, writes, ingest = self._plan(ops)
        if plain:
            for i, r in zip(plain, await self.backing.abatch([ops[i] for i in plain])):
                results[i] = r
        for i in recalls:
            results[i] = await self._arecall(ops[i])
        for ns, messages in ingest.items():
            await self.memory.aadd_messages(messages, namespace=ns)
        if writes:
            await self.backing.abatch(writes)
        return results

    def _plan(
        self, ops: Iterable[Op]
    ) -> tuple[list[Op], list[Result], list[int], list[int], list[PutOp], dict]:
        """Validate every op and sort them into backing reads, recall searches and writes.

        Everything that can be refused is refused here, before the batch touches any state.
        """
        ops = list(ops)
        plain: list[int] = []
        recalls: list[int] = []
        writes: list[PutOp] = []
        for i, op in enumerate(ops):
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                writes.append(op)
            elif isinstance(op, SearchOp) and op.query:
                recalls.append(i)
            elif isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
                plain.append(i)
            else:
                raise ValueError(f"unknown store operation {type(op).__name__}")
        return ops, [None] * len(ops), plain, recalls, writes, self._messages_for(writes)

    def _messages_for(self, writes: list[PutOp]) -> dict[str, list[dict[str, Any]]]:
        # The last put of a key in a batch wins, as in LangGraph's own stores.
        last: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in writes:
            last[(tuple(op.namespace), op.key)] = op
        now = self.clock()
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for op in last.values():
            ns = namespace_to_str(op.namespace)  # validates even deletes and unindexed puts
            if op.value is None or op.index is False:
                continue
            text = self._text_of(op.value, self.fields if op.index is None else op.index)
            if text.strip():
                out[ns].append(
                    {
                        "id": store_message_id(op.key, op.value, text),
                        "speaker": self.speaker,
                        "text": text,
                        "timestamp": now,
                    }
                )
        return dict(out)

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

    def _namespaces_under(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = []
        conditions = (MatchCondition(match_type="prefix", path=prefix),) if prefix else None
        while True:
            page = self.backing.batch([ListNamespacesOp(conditions, None, _LIST_PAGE, len(found))])[0]
            found.extend(page)
            if len(page) < _LIST_PAGE:
                return found

    async def _anamespaces_under(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = []
        conditions = (MatchCondition(match_type="prefix", path=prefix),) if prefix else None
        while True:
            page = (await self.backing.abatch([ListNamespacesOp(conditions, None, _LIST_PAGE, len(found))]))[
                0
            ]
            found.extend(page)
            if len(page) < _LIST_PAGE:
                return found

    def _first_k(self, op: SearchOp) -> tuple[int, int]:
        max_k = self.memory.config.limits.max_k
        return min(max_k, max(_MIN_RECALL_K, (op.offset + op.limit) * _RECALL_FACTOR)), max_k

    def _recall(self, op: SearchOp) -> list[SearchItem]:
        spaces = _mappable(self._namespaces_under(tuple(op.namespace_prefix)))
        want = op.offset + op.limit
        k, max_k = self._first_k(op)
        while True:
            per_ns, exhausted = {}, True
            for ns, name in spaces:
                hits = self._search_one(op.query, k, name)
                exhausted &= len(hits) < k or k >= max_k
                per_ns[ns] = hits
            candidates = _candidates(per_ns)
            items = self.backing.batch([GetOp(ns, key, op.refresh_ttl) for ns, key, _, _ in candidates])
            kept = _keep_current(candidates, items, op.filter)
            if len(kept) >= want or exhausted:
                return kept[op.offset : want]
            k = min(2 * k, max_k)

    async def _arecall(self, op: SearchOp) -> list[SearchItem]:
        spaces = _mappable(await self._anamespaces_under(tuple(op.namespace_prefix)))
        want = op.offset + op.limit
        k, max_k = self._first_k(op)
        while True:
            per_ns, exhausted = {}, True
            for ns, name in spaces:
                hits = await self._asearch_one(op.query, k, name)
                exhausted &= len(hits) < k or k >= max_k
                per_ns[ns] = hits
            candidates = _candidates(per_ns)
            items = await self.backing.abatch(
                [GetOp(ns, key, op.refresh_ttl) for ns, key, _, _ in candidates]
            )
            kept = _keep_current(candidates, items, op.filter)
            if len(kept) >= want or exhausted:
                return kept[op.offset : want]
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


def _mappable(namespaces: list[tuple[str, ...]]) -> list[tuple[tuple[str, ...], str]]:
    """Pair each backing namespace with its Mnemis name. One that cannot be named was never
    written through this store, so it has no memory to recall from."""
    out = []
    for ns in namespaces:
        try:
            out.append((tuple(ns), namespace_to_str(ns)))
        except InvalidNamespaceError:
            continue
    return out


def _candidates(
    per_ns: dict[tuple[str, ...], list[MemoryHit]],
) -> list[tuple[tuple[str, ...], str, str, MemoryHit]]:
    """``(namespace, key, digest, hit)`` for every item the hits name, best score first."""
    out = [
        (ns, key, digest, hit)
        for ns, hits in per_ns.items()
        for key, digest, hit in keys_in_recall_order(hits)
    ]
    out.sort(key=lambda c: -c[3].score)  # stable: keeps recall order within equal scores
    return out


def _keep_current(
    candidates: list[tuple[tuple[str, ...], str, str, MemoryHit]],
    items: list[Item | None],
    filter: dict[str, Any] | None,
) -> list[SearchItem]:
    """Keep candidates whose item still exists with the recalled version and passes the filter."""
    kept: list[SearchItem] = []
    seen: set[tuple[tuple[str, ...], str]] = set()
    for (ns, key, digest, hit), item in zip(candidates, items):
        if item is None or (ns, key) in seen or value_digest(item.value) != digest:
            continue
        if not matches_filter(item.value, filter):
            continue
        seen.add((ns, key))
        kept.append(MnemisSearchItem(item, hit))
    return kept
