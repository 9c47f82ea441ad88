"""What the offline builder asks of a namespace for every new fragment, kept up to date as it
builds instead of recomputed from the whole graph: the latest open fragment, fragment counts,
which fragments mention an entity, the speakers' names, the fragments holding a message.

:meth:`NamespaceState.build_index` hands out one :class:`BuildIndex` per state. It is built from
the graph on first use (one pass, e.g. after a reopen) and then kept by the builder's own writes.
It is dropped and built again, on next use, as soon as the state was changed by anything else:
a hand edit or maintenance (they derive the state's indexes again, replacing them), or forgetting
(fewer messages). Between writes nothing is checked but the node count and those identities.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..model import EdgeKind, Node, NodeKind, Status, moment

if TYPE_CHECKING:
    from ..graph import GraphChanges
    from ..state import NamespaceState

__all__ = ["PARENT_KINDS", "BuildIndex", "full_group", "time_key"]

TimeKey = tuple[bool, int, int, str]


def time_key(when, node_id: str, seq: int = 0) -> TimeKey:
    """Sort key of a node by a time, latest last; a node without that time sorts after every dated one,
    and nodes of one time by ``seq``, then id."""
    return (when is None, moment(when) if when is not None else 0, seq, node_id)


def fragment_key(st: NamespaceState, node: Node) -> TimeKey:
    """A fragment's place in the open timeline: its event time, then the arrival of its latest message,
    so that two fragments ending in one minute read in the order they were told (not by id: a stream
    would then continue the wrong one), then its id."""
    seq = max((st.messages[m].seq for m in node.source_ids if m in st.messages), default=0)
    return time_key(node.event_time, node.id, seq)


PARENT_KINDS = (NodeKind.SUBTOPIC, NodeKind.CONCEPT)


def full_group(kind: NodeKind) -> str:
    """The node-vector group of the full parents of ``kind`` (the others are in ``kind.value``)."""
    return f"{kind.value}:full"


def _is_open(node: Node) -> bool:
    # A compaction overview is never continued: its messages must stay those of its originals.
    return (
        node.kind == NodeKind.FRAGMENT
        and node.status == Status.ACTIVE
        and "overview_of" not in node.properties
    )


class BuildIndex:
    """Incremental views of one namespace's graph for the offline builder.

    Examples:
        >>> from mnemis_integrations.core.state import NamespaceState
        >>> from mnemis_integrations.core.model import Node, NodeKind, Edge, EdgeKind
        >>> st = NamespaceState.empty("u", 2)
        >>> for i in (1, 2):
        ...     st.graph.add_node(Node(f"f{i}", NodeKind.FRAGMENT, "", "u"))
        >>> st.graph.add_node(Node("e", NodeKind.ENTITY, "Ann", "u"))
        >>> st.graph.add_edge(Edge("f1", "e", EdgeKind.MENTIONS))
        >>> idx = st.build_index()
        >>> (
        ...     idx.open_tail(st).id,
        ...     idx.fragment_count(st),
        ...     idx.mention_count(st, "e"),
        ...     idx.references(st, {"e"}, 3),
        ... )
        ('f2', 2, 1, ['f1'])
    """

    def __init__(self, st: NamespaceState):
        self._graph = st.graph
        self._node_vectors = st.node_vectors
        self._entities = st.entities
        self._msg_fragment = st.msg_fragment
        self.n_messages = len(st.messages)
        self.n_nodes = len(st.graph)
        # True from the first step of an ingest to its last: the builder's own writes (and those of
        # a builder extending it) are then under way and the counts above are settled at the end.
        self.ingesting = False
        self._built = False
        # A search asks only for the timeline (``following``): built alone, it costs a sixth of the
        # whole index on a large graph. Any write before the whole is built drops it.
        self._timeline_built = False
        self._speakers: Counter | None = None
        self.capacity: dict[NodeKind, int] = {}  # children a parent of each kind takes: see set_capacity

    # ------------------------------------------------------------------ validity
    def matches(self, st: NamespaceState) -> bool:
        """Whether this index still describes ``st`` (nothing but the builder changed it)."""
        return (
            self._graph is st.graph
            and self._node_vectors is st.node_vectors
            and self._entities is st.entities
            and self._msg_fragment is st.msg_fragment
            and self.n_messages == len(st.messages)
            and self.n_nodes == len(st.graph)
        )

    def settle(self, st: NamespaceState) -> None:
        """End of a builder write: what ``st`` holds now is what this index describes."""
        self.ingesting = False
        self.n_messages = len(st.messages)
        self.n_nodes = len(st.graph)

    def _build(self, st: NamespaceState) -> None:
        """One pass over the graph (first use, or after someone else changed the state)."""
        g = st.graph
        self._timeline: list[TimeKey] = []
        self.fragments = 0
        self.active: set[str] = set()
        self._extra_holders: dict[str, list[str]] = {}
        self._child_counts: dict[str, int] = {}  # parent id -> children, counted on first ask
        # entity id -> the nodes mentioning it, as a set and as a list sorted by id
        self._mentions: dict[str, set[str]] = {}
        self._mention_order: dict[str, list[str]] = {}
        for n in g.nodes():
            if n.kind == NodeKind.FRAGMENT:
                self.fragments += 1
                if n.status == Status.ACTIVE:
                    self.active.add(n.id)
                if _is_open(n):
                    self._timeline.append(fragment_key(st, n))
                for mid in n.source_ids:
                    if st.msg_fragment.get(mid) != n.id:
                        self._extra_holders.setdefault(mid, []).append(n.id)
            elif n.kind == NodeKind.ENTITY:
                # what st.entity_fragment_counts counts: every `mentions` edge into the entity
                srcs = [e.src for e in g.in_edges(n.id, EdgeKind.MENTIONS)]
                self._mentions[n.id] = set(srcs)
                self._mention_order[n.id] = sorted(srcs)
        self._set_timeline(self._timeline)
        # Placement asks for the nearest subtopics / concepts that can still take a child
        # without ranking every fragment or passing over the full parents one by one.
        st.node_vectors.partition(lambda key: self._placement_group(st, key))
        self._built = True

    def _placement_group(self, st: NamespaceState, key: str) -> str | None:
        """The node-vector group of a hierarchy parent: its kind, or :func:`full_group` once it is
        full; other nodes are in none. Asked again whenever the parent's vector is written, which
        the builder does after giving it a child and forget does after taking one away."""
        g = st.graph
        if not g.has(key):
            return None
        kind = g.get(key).kind
        if kind not in PARENT_KINDS:
            return None
        cap = self.capacity.get(kind)
        return kind.value if cap is None or self._count(st, key) < cap else full_group(kind)

    def set_capacity(self, st: NamespaceState, capacity: dict[NodeKind, int]) -> None:
        """How many children a subtopic / concept takes (the builder's limits); full parents then
        leave the placement groups. A change of limits regroups every parent once."""
        if capacity != self.capacity:
            self.capacity = dict(capacity)
            if self._built:
                st.node_vectors.partition(lambda key: self._placement_group(st, key))

    def ready(self, st: NamespaceState) -> None:
        """Build now, if not built yet."""
        if not self._built:
            self._build(st)

    # ------------------------------------------------------------------ the open tail
    def open_tail(self, st: NamespaceState) -> Node | None:
        """The latest active fragment (by event time, then id) that is not a compaction overview."""
        self.ready(st)
        g, line = st.graph, self._timeline
        while line:
            key = line[-1]
            fid = key[-1]
            node = g.get(fid) if g.has(fid) else None
            if node is None or self._tail_key.get(fid) != key or not _is_open(node):
                line.pop()  # gone, moved, superseded or archived: a later write re-enters it if needed
                if self._tail_key.get(fid) == key:
                    del self._tail_key[fid]
                continue
            now = fragment_key(st, node)
            if now != key:  # its time changed behind the builder's back: file it where it belongs
                self._file(fid, now)
                continue
            return node
        return None

    def _file(self, fid: str, key: TimeKey | None) -> None:
        """File fragment ``fid`` in the open timeline under ``key`` (None: it is not open), its entry
        under another key taken out. Entries of fragments gone or renamed stay until met: ``open_tail``
        drops them, ``following`` passes over them (an entry counts only while ``_tail_key`` holds it)."""
        old = self._tail_key.pop(fid, None)
        if old is not None and old != key:
            i = bisect.bisect_left(self._timeline, old)
            if i < len(self._timeline) and self._timeline[i] == old:
                del self._timeline[i]
        if key is not None:
            self._tail_key[fid] = key
            if old != key:
                bisect.insort(self._timeline, key)

    def _timeline_ready(self, st: NamespaceState) -> None:
        """The open fragments' timeline, alone when the whole index is not built yet."""
        if self._built or self._timeline_built:
            return
        self._set_timeline([fragment_key(st, n) for n in st.graph.nodes(NodeKind.FRAGMENT) if _is_open(n)])
        self._timeline_built = True

    def _set_timeline(self, keys: list[TimeKey]) -> None:
        """The open fragments' time keys, sorted, and each fragment's key."""
        keys.sort()
        self._timeline = keys
        self._tail_key = {k[-1]: k for k in keys}

    def _unfollowed_write(self) -> None:
        """A write the index does not follow: a timeline built alone (for a search) is now stale. The
        whole index, once built, keeps its own timeline and never reads this flag."""
        self._timeline_built = False

    def following(self, st: NamespaceState, fragment_id: str) -> str | None:
        """The open fragment right after ``fragment_id`` by event time (the conversation's next
        stretch), or None: the fragment is not open (superseded, archived, an overview) or is the
        latest. Entries a write has made stale are passed over, not removed: a search only reads."""
        self._timeline_ready(st)
        g, line = st.graph, self._timeline
        key = self._tail_key.get(fragment_id)
        if key is None or not g.has(fragment_id) or not _is_open(g.get(fragment_id)):
            return None
        for i in range(bisect.bisect_right(line, key), len(line)):
            fid = line[i][-1]
            node = g.get(fid) if g.has(fid) else None
            if node is not None and self._tail_key.get(fid) == line[i] and _is_open(node):
                return fid
        return None

    def fragment_written(self, st: NamespaceState, node: Node, created: bool) -> None:
        """A fragment was created, or given more messages (its event time may have moved)."""
        if not self._built:
            self._unfollowed_write()
            return
        if created:
            self.fragments += 1
            if node.status == Status.ACTIVE:
                self.active.add(node.id)
        self._file(node.id, fragment_key(st, node) if _is_open(node) else None)

    def graph_changed(self, st: NamespaceState, changes: GraphChanges, nodes_before: int) -> None:
        """Follow a change other than the builder's that ``NamespaceState.derive_changes`` derives
        locally (no ``belongs_to`` edge, no message of a fragment changed; every node's earlier form
        in ``changes.earlier``); the graph held ``nodes_before`` nodes before it."""
        if self.n_nodes != nodes_before:  # out of step already: built again on next use
            return
        self.n_nodes = len(st.graph)
        if not self._built:
            earlier = [changes.earlier[i] for i in changes.removed_nodes]
            if any(n.kind == NodeKind.FRAGMENT for n in [*changes.nodes, *filter(None, earlier)]):
                self._unfollowed_write()
            return
        g = st.graph
        for node_id in changes.removed_nodes:
            before = changes.earlier[node_id]
            if before is None:  # made and removed within the change
                continue
            if before.kind == NodeKind.FRAGMENT:
                self.fragments -= 1
                self.active.discard(node_id)
                self._file(node_id, None)
            self._mentions.pop(node_id, None)
            self._mention_order.pop(node_id, None)
            self._child_counts.pop(node_id, None)
        mentions = EdgeKind.MENTIONS.value
        for src, dst, key in changes.removed_edges:  # one put back is among the added below
            if key == mentions and dst in self._mentions:
                self._drop_mention(dst, src)
        for node in changes.nodes:
            if node.kind == NodeKind.ENTITY:
                self._mentions.setdefault(node.id, set())
                self._mention_order.setdefault(node.id, [])
            elif node.kind == NodeKind.FRAGMENT:
                if changes.earlier[node.id] is None:
                    self.fragments += 1
                if node.status == Status.ACTIVE:
                    self.active.add(node.id)
                else:
                    self.active.discard(node.id)
                self._file(node.id, fragment_key(st, node) if _is_open(node) else None)
        for edge in changes.edges:
            if edge.kind == EdgeKind.MENTIONS and g.get(edge.dst).kind == NodeKind.ENTITY:
                self._add_mention(edge.dst, edge.src)

    # ------------------------------------------------------------------ fragments
    def fragment_count(self, st: NamespaceState) -> int:
        self.ready(st)
        return self.fragments

    def active_count(self, st: NamespaceState) -> int:
        self.ready(st)
        return len(self.active)

    def status_changed(self, st: NamespaceState, node_ids) -> None:
        """These fragments may have left (or entered) the active set, and the open timeline."""
        if not self._built:
            self._unfollowed_write()
            return
        g = st.graph
        for nid in node_ids:
            node = g.get(nid) if g.has(nid) else None
            if node is not None and node.kind == NodeKind.FRAGMENT and node.status == Status.ACTIVE:
                self.active.add(nid)
            else:
                self.active.discard(nid)
            if node is not None and _is_open(node):
                # reopened (a forget took its successor): open_tail may have dropped its entry
                # while it was closed, so it is filed again unless it is still in place
                self._file(nid, fragment_key(st, node))

    def child_count(self, st: NamespaceState, parent_id: str) -> int:
        """``st.child_count(parent_id)``, counted once and then kept by :meth:`child_added`: placement
        asks it of every full parent it passes over, and there are more of those as memory grows."""
        self.ready(st)
        return self._count(st, parent_id)

    def _count(self, st: NamespaceState, parent_id: str) -> int:
        n = self._child_counts.get(parent_id)
        if n is None:
            n = self._child_counts[parent_id] = st.child_count(parent_id)
        return n

    def child_added(self, parent_id: str) -> None:
        """The builder gave ``parent_id`` one more child (``belongs_to`` edge)."""
        if self._built and parent_id in self._child_counts:
            self._child_counts[parent_id] += 1

    def child_removed(self, parent_id: str) -> None:
        """The builder took one child from ``parent_id`` (to place it again)."""
        if self._built and parent_id in self._child_counts:
            self._child_counts[parent_id] -= 1

    def parent_removed(self, parent_id: str) -> None:
        """The builder removed an emptied parent."""
        if self._built:
            self._child_counts.pop(parent_id, None)

    def holders(self, st: NamespaceState, message_id: str) -> list[str]:
        """Ids of the fragments whose messages include ``message_id`` (several after compaction)."""
        self.ready(st)
        first = st.msg_fragment.get(message_id)
        extra = self._extra_holders.get(message_id, [])
        return ([first] if first is not None else []) + [f for f in extra if f != first]

    # ------------------------------------------------------------------ entities
    def mention_count(self, st: NamespaceState, eid: str) -> int:
        """Number of ``mentions`` edges into entity ``eid`` (0 for an id that is no entity)."""
        self.ready(st)
        return len(self._mentions.get(eid, ()))

    def counts(self, st: NamespaceState, entity_ids) -> dict[str, int]:
        """``st.entity_fragment_counts()`` restricted to ``entity_ids``."""
        self.ready(st)
        return {e: len(self._mentions[e]) for e in entity_ids if e in self._mentions}

    def references(
        self,
        st: NamespaceState,
        entity_ids: Iterable[str],
        limit: int,
        skip: Callable[[str], bool] | None = None,
    ) -> list[str]:
        """``pick_references(entity_ids, candidates, limit)`` over every node mentioning one of
        ``entity_ids`` (those ``skip`` rejects left out): most entities shared first, ties by id.

        Exact, at the cost of set intersections (in C) instead of a loop over every mention:
        the nodes sharing two or more come from pairwise intersections, those sharing one from
        the id-sorted lists, read from the start only until ``limit`` are found.
        """
        self.ready(st)
        ents = sorted(
            (e for e in set(entity_ids) if self._mentions.get(e)), key=lambda e: len(self._mentions[e])
        )
        sets = [self._mentions[e] for e in ents]
        multi: set[str] = set()
        for i, a in enumerate(sets):
            for b in sets[i + 1 :]:
                multi |= a & b
        picked: list[str] = []
        if multi:
            shared: Counter = Counter()
            for a in sets:
                shared.update(a & multi)
            by_count: dict[int, list[str]] = {}
            for node_id, c in shared.items():
                by_count.setdefault(c, []).append(node_id)
            for c in sorted(by_count, reverse=True):
                for node_id in sorted(by_count[c]):
                    if skip is None or not skip(node_id):
                        picked.append(node_id)
                        if len(picked) >= limit:
                            return picked
        for node_id in heapq.merge(*(self._mention_order[e] for e in ents)):
            if len(picked) >= limit:
                break
            if node_id not in multi and (skip is None or not skip(node_id)):
                picked.append(node_id)
        return picked

    def mention_added(self, st: NamespaceState, src: Node, eid: str) -> None:
        """A new ``mentions`` edge ``src -> eid`` (not one that was there already)."""
        if not self._built:
            return
        if st.graph.get(eid).kind == NodeKind.ENTITY:
            self._add_mention(eid, src.id)

    def _add_mention(self, eid: str, node_id: str) -> None:
        ids = self._mentions.setdefault(eid, set())
        if node_id not in ids:
            ids.add(node_id)
            bisect.insort(self._mention_order.setdefault(eid, []), node_id)

    def _drop_mention(self, eid: str, node_id: str) -> None:
        ids = self._mentions.get(eid)
        if ids is not None and node_id in ids:
            ids.discard(node_id)
            order = self._mention_order[eid]
            del order[bisect.bisect_left(order, node_id)]

    def entity_renamed(self, old: str, new: str) -> None:
        """Entity ``old`` is ``new`` now (``forget`` named it again): its mentions follow it."""
        if not self._built:
            return
        self._mention_order.pop(old, None)
        for node_id in self._mentions.pop(old, set()):
            self._add_mention(new, node_id)

    # ------------------------------------------------------------------ speakers
    def speakers(self, st: NamespaceState) -> Counter:
        """Lower-cased speaker name -> number of stored messages said by that name."""
        if self._speakers is None:
            self._speakers = Counter(m.speaker.lower() for m in st.messages.values())
        return self._speakers

    def messages_added(self, messages) -> None:
        """Messages that were not stored before entered the state."""
        self.n_messages += len(messages)
        if self._speakers is not None:
            self._speakers.update(m.speaker.lower() for m in messages)

    # ------------------------------------------------------------------ forgetting
    def before_forget(self, st: NamespaceState, fragment_ids) -> dict[str, list[str]]:
        """What the index holds about fragments a forget is about to change: what they mention."""
        if not self._built or not self.matches(st):
            return {}
        return {f: st.mentioned_ids(f) for f in fragment_ids}

    def forgotten(
        self,
        st: NamespaceState,
        messages,
        before: dict[str, list[str]],
        renamed: dict[str, str],
        removed_entities,
        reactivated,
    ) -> None:
        """Follow a forget instead of rebuilding: ``messages`` left the state; the fragments in
        ``before`` (ids as they were) changed, were renamed (``renamed``) or went; entities went."""
        if not self._built or not before:
            self._unfollowed_write()
            return  # nothing built to follow: the next use builds it from the state
        g = st.graph
        gone_ids = {m.id for m in messages}
        self._child_counts.clear()  # emptied parents went, renamed ones moved: counted again on next ask
        for mid in gone_ids:
            self._extra_holders.pop(mid, None)
        if self._speakers is not None:
            self._speakers.subtract(m.speaker.lower() for m in messages)
            self._speakers += Counter()  # drop names no message says any more
        for old, eids in before.items():
            for eid in eids:
                self._drop_mention(eid, old)
            self.active.discard(old)
            new = renamed.get(old, old)
            if new != old or not g.has(new):
                self._tail_key.pop(old, None)  # a timeline entry no longer in _tail_key is dropped when met
            if not g.has(new):
                self.fragments -= 1
                continue
            node = g.get(new)
            for eid in st.mentioned_ids(new):
                if g.get(eid).kind == NodeKind.ENTITY:
                    self._add_mention(eid, new)
            if node.status == Status.ACTIVE:
                self.active.add(new)
            self._file(new, fragment_key(st, node) if _is_open(node) else None)
            if new != old:
                for mid in node.source_ids:
                    holders = self._extra_holders.get(mid)
                    if holders:
                        self._extra_holders[mid] = [new if h == old else h for h in holders]
        for eid in removed_entities:
            self._mentions.pop(eid, None)
            self._mention_order.pop(eid, None)
        self.status_changed(st, reactivated)
        self.settle(st)
