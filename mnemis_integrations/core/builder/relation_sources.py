"""Where a relation was read from, so that ``forget`` removes it with the last message that stated it
(its label seldom quotes them: "vaccinated_at" read from "has his vaccines at the clinic on Elm St").

A relation edge once listed every message it was read from (``READ_FROM``), and each restatement
rewrote that list whole: the bytes one message wrote grew with how often the relation had been
stated. Now the fragment a message joins records which relations that message was read for
(``RELATIONS_READ``): its node is written anyway when the message joins it, and it holds a
bounded number of messages. The edge keeps only how many messages recorded it, under a token of
its own (``READ_COUNTS``, token -> count): an edge removed some other way (its entity forgotten, a
hand edit) and read again later starts a new token (made at a later version), which the old
records do not count against.
An entity merge adds the two edges' counts, each under its own token, so no record is rewritten.

A relation holds while its legacy list (kept as written by stores made before records) or any
count is left; an edge with neither was written before relations recorded their messages.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from ..graph import EdgeKey, MemoryGraph, edge_key
from ..model import Edge, EdgeKind, Node, NodeKind, Status
from ..temporal import status_at

__all__ = [
    "READ_COUNTS",
    "READ_FROM",
    "RELATIONS_READ",
    "RelationsFed",
    "fed_by",
    "merged_sources",
    "read_again",
    "read_from",
    "read_status",
    "records_sources",
    "sources_after",
    "strip_records",
]

# On a relation edge written by a store before records: the ids of the messages it was read from.
READ_FROM = "read_from"
# On a relation edge: token -> how many messages recorded it under that token.
READ_COUNTS = "read_counts"
# On a fragment: message id -> [[src, dst, label, token], ...], the relations it was read for.
RELATIONS_READ = "relations_read"

_SOURCES = (READ_FROM, READ_COUNTS)


def records_sources(properties: dict) -> bool:
    """Does an edge with these properties record the messages it was read from?

    >>> records_sources({READ_COUNTS: {"t": 1}}), records_sources({READ_FROM: ["m1"]}), records_sources({})
    (True, True, False)
    """
    return READ_FROM in properties or READ_COUNTS in properties


def read_again(
    graph: MemoryGraph,
    frag: Node,
    key: tuple[str, str, str],
    message_ids: Iterable[str],
    prior: Edge | None,
    version: int,
) -> dict:
    """The provenance properties of the relation ``key`` (src, dst, label) once ``message_ids``, all
    of ``frag``, were read for it (``version``: the namespace's, read before this write); each one
    not counted yet is recorded on ``frag``."""
    before = prior.properties if prior is not None else {}
    legacy = list(before.get(READ_FROM, ()))
    counts = dict(before.get(READ_COUNTS, {}))
    records = frag.properties.get(RELATIONS_READ, {})
    added: dict[str, list] = {}
    for mid in dict.fromkeys(message_ids):
        mine = records.get(mid, [])
        # a message on the legacy list, or recorded under any token of this edge, counts already
        if mid in legacy or any(r[3] in counts for r in mine):
            continue
        if not counts:
            counts[_token(key, version)] = 0
        token = next(iter(counts))
        added[mid] = [*mine, [*key, token]]
        counts[token] += 1
    if added:
        frag.properties[RELATIONS_READ] = {**records, **added}  # a new dict: a copy may share the old
        graph.touch(frag.id)
    out: dict = {}
    if legacy:
        out[READ_FROM] = legacy
    if counts:
        out[READ_COUNTS] = counts
    return out


def _token(key: tuple[str, str, str], version: int) -> str:
    """An edge's token, from its key and the namespace's version when the edge was made: the same in
    every build of the same writes, told apart from an edge of the same key made again after it was
    removed (a later write), and 64 bits, since a forget counts records by token alone and no two
    edges' tokens may meet. Nothing in it comes from a message id, which a forget must not leave.

    >>> _token(("e:a", "e:b", "works_at"), 3) == _token(("e:a", "e:b", "works_at"), 3)
    True
    >>> _token(("e:a", "e:b", "works_at"), 3) == _token(("e:a", "e:b", "works_at"), 4)
    False
    """
    return hashlib.blake2b("\x1f".join((*key, str(version))).encode(), digest_size=8).hexdigest()


@dataclass
class RelationsFed:
    """What forgotten messages had been read for: per token, how many of them; the keys
    (src, dst, label) their records name."""

    counts: Counter = field(default_factory=Counter)
    keys: dict[tuple[str, str, str], None] = field(default_factory=dict)


def fed_by(fragments: Iterable[Node], gone: Collection[str]) -> RelationsFed:
    """The relations the messages ``gone`` were read for, from the records of ``fragments``
    (those that held them: a message's records lie on the fragment it joined)."""
    fed = RelationsFed()
    for frag in fragments:
        records = frag.properties.get(RELATIONS_READ)
        if not records:
            continue
        for mid in records.keys() & gone:  # a fragment's few messages, not every forgotten one
            for src, dst, label, token in records[mid]:
                fed.counts[token] += 1
                fed.keys[(src, dst, label)] = None
    return fed


def strip_records(graph: MemoryGraph, frag: Node, gone: Collection[str]) -> None:
    """A forgotten message's records go with it (they name it)."""
    records = frag.properties.get(RELATIONS_READ)
    if not records or not any(m in records for m in gone):
        return
    left = {m: r for m, r in records.items() if m not in gone}
    if left:
        frag.properties[RELATIONS_READ] = left
    else:
        del frag.properties[RELATIONS_READ]
    graph.touch(frag.id)


def sources_after(properties: dict, gone: Collection[str], fed: Counter) -> dict | None:
    """An edge's properties once the messages ``gone`` are forgotten (``fed``: what their records
    count), or None when it was read from none of the others.

    >>> sources_after({READ_COUNTS: {"t": 2}, "x": 1}, {"m1"}, Counter({"t": 1}))
    {'x': 1, 'read_counts': {'t': 1}}
    >>> sources_after({READ_FROM: ["m1"], READ_COUNTS: {"t": 1}}, {"m1"}, Counter({"t": 1})) is None
    True
    >>> sources_after({READ_FROM: ["m1", "m2"]}, {"m1"}, Counter())
    {'read_from': ['m2']}
    """
    legacy = [m for m in properties.get(READ_FROM, ()) if m not in gone]
    counts = {t: n - fed[t] for t, n in properties.get(READ_COUNTS, {}).items() if n - fed[t] > 0}
    if not legacy and not counts:
        return None
    out = {k: v for k, v in properties.items() if k not in _SOURCES}
    if legacy:
        out[READ_FROM] = legacy
    if counts:
        out[READ_COUNTS] = counts
    return out


def merged_sources(kept: dict, moved: dict) -> dict:
    """The provenance properties of two edges merged into one (an entity merge): read from the
    messages of both; from unknown messages when either does not record its own.

    >>> merged_sources({READ_FROM: ["m1"]}, {READ_FROM: ["m2", "m1"], READ_COUNTS: {"t": 1}})
    {'read_from': ['m1', 'm2'], 'read_counts': {'t': 1}}
    >>> merged_sources({READ_COUNTS: {"t": 1}}, {})
    {}
    """
    if not records_sources(kept) or not records_sources(moved):
        return {}
    legacy = list(dict.fromkeys([*kept.get(READ_FROM, ()), *moved.get(READ_FROM, ())]))
    counts = Counter(kept.get(READ_COUNTS, {}))
    counts.update(moved.get(READ_COUNTS, {}))
    out: dict = {}
    if legacy:
        out[READ_FROM] = legacy
    if counts:
        out[READ_COUNTS] = dict(counts)
    return out


def _tokens_recorded(node: Node) -> tuple[str, ...] | None:
    """The tokens a fragment's records name (the key the graph files fragments under, for
    :func:`read_from` and :func:`read_status`); None for any other node."""
    records = node.properties.get(RELATIONS_READ) if node.kind == NodeKind.FRAGMENT else None
    if not records:
        return None
    return tuple(dict.fromkeys(r[3] for rs in records.values() for r in rs))


def _messages_held(node: Node) -> tuple[str, ...] | None:
    """A fragment's message ids (the key for relations that list their messages); None for any other node."""
    return tuple(node.source_ids) if node.kind == NodeKind.FRAGMENT else None


def read_from(graph: MemoryGraph, edge: Edge) -> list[str]:
    """The ids of the messages a relation was read from, for inspection: its legacy list, then
    the messages recorded under its tokens. The graph files fragments by the tokens they record, so
    this reads the fragments that restated the relation, not every fragment."""
    tokens = set(edge.properties.get(READ_COUNTS, {}))
    out = list(edge.properties.get(READ_FROM, ()))
    for frag in graph.nodes_keyed(_tokens_recorded, tokens, each=True):
        for mid, records in frag.properties.get(RELATIONS_READ, {}).items():
            if any(r[3] in tokens for r in records):
                out.append(mid)
    return list(dict.fromkeys(out))


def read_status(
    graph: MemoryGraph, edges: Iterable[Edge], fragments: Iterable[Node] | None = None
) -> dict[EdgeKey, Status]:
    """Edge key -> status, for each relation among ``edges`` that records what it was read from: superseded
    once every fragment it was read from is (a fragment compaction archived counts as what it was before),
    active otherwise. A relation read from messages whose fact was replaced is no current fact either, though
    the edge stays for the entities it joins. One that records nothing (written by hand) gets no status.
    ``fragments``: the fragments to read; by default only those that recorded these relations or hold the
    messages they list (the graph files fragments by both), so a call costs what the relations were read from,
    not what the namespace holds."""
    wanted = [e for e in edges if e.kind == EdgeKind.RELATION and records_sources(e.properties)]
    if not wanted:
        return {}
    tokens = {t for e in wanted for t in e.properties.get(READ_COUNTS, {})}
    listed = {m for e in wanted for m in e.properties.get(READ_FROM, ())}
    by_token: dict[str, list[Status]] = {}
    by_message: dict[str, list[Status]] = {}
    if fragments is None:
        found = {n.id: n for n in graph.nodes_keyed(_tokens_recorded, tokens, each=True)}
        if listed:
            found.update((n.id, n) for n in graph.nodes_keyed(_messages_held, listed, each=True))
        fragments = found.values()
    for frag in fragments:
        if frag.kind != NodeKind.FRAGMENT:
            continue
        standing = status_at(graph, frag, None, include_archived=True)
        if standing is None:  # an overview: its originals hold the records
            continue
        for records in frag.properties.get(RELATIONS_READ, {}).values():
            for *_, token in records:
                if token in tokens:
                    by_token.setdefault(token, []).append(standing)
        for mid in listed.intersection(frag.source_ids):
            by_message.setdefault(mid, []).append(standing)
    out: dict[EdgeKey, Status] = {}
    for e in wanted:
        seen = [s for t in e.properties.get(READ_COUNTS, {}) for s in by_token.get(t, ())]
        seen += [s for m in e.properties.get(READ_FROM, ()) for s in by_message.get(m, ())]
        if seen:
            out[edge_key(e)] = (
                Status.SUPERSEDED if all(s == Status.SUPERSEDED for s in seen) else Status.ACTIVE
            )
    return out
