"""The memory graph of one namespace, over a networkx MultiDiGraph.

Nodes carry :class:`~.model.Node` objects under the ``node`` attribute; edges carry
their :class:`~.model.EdgeKind` as the multigraph key, so the same pair can be
linked by several kinds at once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from ..errors import NodeNotFoundError
from .model import Edge, EdgeKind, Node, NodeKind, Status

__all__ = ["EdgeKey", "GraphChanges", "MemoryGraph", "edge_key"]

EdgeKey = tuple[str, str, str]  # (src, dst, multigraph key)


def _kind_key(kind: EdgeKind, label: str) -> str:
    """The key of an edge among those joining the same two nodes: its kind, or its label for a relation."""
    return kind.value if kind != EdgeKind.RELATION else f"relation:{label}"


def edge_key(edge: Edge) -> EdgeKey:
    """An edge's identity: one edge per (src, dst, kind), or per relation label for relations."""
    return edge.src, edge.dst, _kind_key(edge.kind, edge.label)


@dataclass
class GraphChanges:
    """What changed in a graph since its journal was last taken: the delta a store writes."""

    # Added or changed, as they are now; those new to the graph (made, or put back) in the order it
    # put them last, so that rows made in this order read back in the graph's order.
    nodes: list[Node] = field(default_factory=list)
    # Removed, or removed and added again: put back, a node comes last in the graph's order, so a store
    # deletes its row and makes it again (as for edges), and a reopened graph orders it as this one.
    removed_nodes: list[str] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)  # added
    removed_edges: list[EdgeKey] = field(default_factory=list)
    # Node id -> the form the node had before (None: it was made), for the nodes of ``nodes`` and
    # ``removed_nodes`` that were replaced (``add_node``), removed or made; what derives from a node
    # can then be taken back (NamespaceState.derive_changes). A node changed in place has none: its
    # journal entry comes after the change (so has none the very node held, added again). Nor has
    # one removed and added again, as it moved: it now comes last in the graph's order. Stores
    # ignore it.
    earlier: dict[str, Node | None] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.nodes or self.removed_nodes or self.edges or self.removed_edges)


# An earlier form the journal cannot give: the node was changed in place, or removed and put back.
_UNKNOWN = Node("", NodeKind.ENTITY, "", "")


def _detached(node: Node) -> Node:
    """A copy of ``node`` whose lists and properties are its own: a replacement made with
    ``dataclasses.replace`` shares them with the node it replaces, and may change them in place."""
    return replace(
        node,
        keywords=list(node.keywords),
        source_ids=list(node.source_ids),
        aliases=list(node.aliases),
        properties=dict(node.properties),
    )


class _Journal(dict):
    """The ids of the nodes changed since the journal was last taken, in the order first changed
    (rows keep the order nodes were made in). While the graph keeps key indexes, it also gathers
    the ids written since those last looked (``unkeyed``, which taking the journal leaves): a
    field assigned in place reaches the graph only through here, and looking again at the whole
    journal at each lookup would make a change that looks names up as it goes cost the square of
    its size. ``earlier`` holds each node's form before its first change (``GraphChanges.earlier``),
    :data:`_UNKNOWN` when that first change was made in place (or added the very node held again)."""

    def __init__(self) -> None:
        super().__init__()
        self.unkeyed: dict[str, None] | None = None
        self.earlier: dict[str, Node | None] = {}

    def __setitem__(self, node_id: str, value: None) -> None:
        super().__setitem__(node_id, value)
        self.earlier.setdefault(node_id, _UNKNOWN)
        if self.unkeyed is not None:
            self.unkeyed[node_id] = None


class _KeyedNodes:
    """The nodes of a graph by one key of the caller's (with ``each``, by each of the values it
    gives), each with its place in the graph's order (networkx keeps nodes in the order they were
    first added: one put back again goes last). A node whose key is None is filed under no value: a
    key most nodes lack (a split subtopic's origin) makes no group of them all, made again each time
    one of them changes."""

    def __init__(self, key: Callable[[Node], Any], nodes: Iterable[Node], each: bool = False):
        self.key = key
        self.each = each
        self.entry: dict[str, tuple[tuple[Hashable, ...], int]] = {}  # node id -> (its values, its place)
        self.by_key: dict[Hashable, tuple[str, ...]] = {}
        self.next_place = 0
        for node in nodes:
            self.added(node)

    def _values(self, node: Node) -> tuple[Hashable, ...]:
        values = dict.fromkeys(self.key(node) or ()) if self.each else (self.key(node),)
        return tuple(v for v in values if v is not None)

    def added(self, node: Node) -> None:
        """``node`` was added, or one of its fields may have changed."""
        values, old = self._values(node), self.entry.get(node.id)
        if old is None:  # new to the graph (a removed node's entry went with it): networkx puts it last
            place = self.next_place
            self.next_place += 1
        elif old[0] == values:
            return
        else:
            place = old[1]
            self._unfile(node.id, old[0])
        self.entry[node.id] = (values, place)
        for value in values:
            self.by_key[value] = (*self.by_key.get(value, ()), node.id)

    def removed(self, node_id: str) -> None:
        old = self.entry.pop(node_id, None)
        if old is not None:
            self._unfile(node_id, old[0])

    def _unfile(self, node_id: str, values: tuple[Hashable, ...]) -> None:
        for value in values:
            left = tuple(i for i in self.by_key[value] if i != node_id)
            if left:
                self.by_key[value] = left
            else:
                del self.by_key[value]

    def ids(self, values: Iterable[Hashable]) -> list[str]:
        found = {i for v in values for i in self.by_key.get(v, ())}
        return sorted(found, key=lambda i: self.entry[i][1])


class _KeyedEdges:
    """The edges of a graph by one key of the caller's; an edge whose key is None is filed under none."""

    def __init__(self, key: Callable[[Edge], Any], edges: Iterable[Edge]):
        self.key = key
        self.value: dict[EdgeKey, Hashable] = {}
        self.by_key: dict[Hashable, dict[EdgeKey, None]] = {}
        for edge in edges:
            self.added(edge)

    def added(self, edge: Edge) -> None:
        k = edge_key(edge)
        self.removed(k)
        value = self.key(edge)
        if value is not None:
            self.value[k] = value
            self.by_key.setdefault(value, {})[k] = None

    def removed(self, k: EdgeKey) -> None:
        value = self.value.pop(k, None)  # None is never filed
        if value is not None:
            group = self.by_key[value]
            del group[k]
            if not group:
                del self.by_key[value]


class MemoryGraph:
    """Hierarchy (concept > subtopic > fragment), entities and typed edges of one namespace.

    Examples:
        >>> from mnemis_integrations.core.model import Node, NodeKind, Edge, EdgeKind
        >>> g = MemoryGraph("u1")
        >>> g.add_node(Node("c", NodeKind.CONCEPT, "Payments", "u1"))
        >>> g.add_node(Node("s", NodeKind.SUBTOPIC, "Refund failures", "u1"))
        >>> g.add_node(Node("f", NodeKind.FRAGMENT, "2025-03 conversation", "u1"))
        >>> g.add_edge(Edge("s", "c", EdgeKind.BELONGS_TO)); g.add_edge(Edge("f", "s", EdgeKind.BELONGS_TO))
        >>> g.hierarchy_path("f")
        ['Payments', 'Refund failures', '2025-03 conversation']
        >>> [n.id for n in g.children("c")]
        ['s']
    """

    def __init__(self, namespace: str):
        self.namespace = namespace
        self.g = nx.MultiDiGraph()
        # The change journal: what a write must persist (see take_changes).
        self._changed = _Journal()
        self._removed: set[str] = set()
        self._added_edges: dict[EdgeKey, Edge] = {}
        self._removed_edges: set[EdgeKey] = set()
        # Indexes by a caller's key (nodes_keyed), made on first use and kept by add_node and
        # remove_node; the nodes written since they last looked (a field assigned in place, which
        # reaches only the journal) are keyed again before the next lookup.
        self._keyed: dict[Callable[[Node], Hashable], _KeyedNodes] = {}
        # The same for edges (edges_keyed), kept by add_edge, remove_edge and remove_node.
        self._edges_keyed: dict[Callable[[Edge], Hashable], _KeyedEdges] = {}

    # ----- change journal -----
    def touch(self, node_id: str) -> None:
        """Record an in-place change of a node (its ``properties`` or lists) for the next write."""
        self._changed[node_id] = None

    def pending_changes(self) -> bool:
        return bool(self._changed or self._removed or self._added_edges or self._removed_edges)

    def take_changes(self) -> GraphChanges:
        """The changes since the last call (nodes as they are now), and a fresh journal."""
        g = self.g
        out = GraphChanges(
            nodes=[g._node[n]["node"] for n in self._changed if n in g],
            removed_nodes=sorted(self._removed),
            edges=[e for k, e in self._added_edges.items() if g.has_edge(*k)],
            removed_edges=sorted(self._removed_edges),
            earlier={i: node for i, node in self._changed.earlier.items() if node is not _UNKNOWN},
        )
        self.discard_changes()
        return out

    def discard_changes(self) -> None:
        self._changed.clear()
        self._changed.earlier.clear()
        self._removed.clear()
        self._added_edges.clear()
        self._removed_edges.clear()

    # ----- nodes -----
    def add_node(self, node: Node) -> None:
        held, earlier = self.g._node.get(node.id), self._changed.earlier
        if node.id not in earlier:
            # the very node held, added again: it may have been changed in place first, so what it
            # was is not known (as for touch)
            if held is None:
                earlier[node.id] = None
            else:
                earlier[node.id] = _UNKNOWN if held["node"] is node else _detached(held["node"])
        elif held is None and earlier[node.id] is not None:
            earlier[node.id] = _UNKNOWN  # removed before, so added back last: it moved
        if held is None:
            # networkx puts it last: so does the journal, whose order new rows are made in (an id
            # touched while absent would otherwise keep an earlier place)
            self._changed.pop(node.id, None)
        self.g.add_node(node.id, node=node)
        object.__setattr__(node, "_journal", self._changed)
        self._changed[node.id] = None
        if earlier[node.id] is None:  # made in this change: no stored row to delete, even if removed before
            self._removed.discard(node.id)
        for index in self._keyed.values():
            index.added(node)

    def get(self, node_id: str) -> Node:
        try:
            return self.g.nodes[node_id]["node"]
        except KeyError:
            raise NodeNotFoundError(node_id) from None

    def has(self, node_id: str) -> bool:
        return node_id in self.g

    def remove_node(self, node_id: str) -> None:
        if node_id not in self.g:
            raise NodeNotFoundError(node_id)
        if node_id not in self._changed.earlier:
            self._changed.earlier[node_id] = _detached(self.g._node[node_id]["node"])
        for src, dst, key in [*self.g.in_edges(node_id, keys=True), *self.g.out_edges(node_id, keys=True)]:
            self._added_edges.pop((src, dst, key), None)
            self._removed_edges.add((src, dst, key))
            for edge_index in self._edges_keyed.values():
                edge_index.removed((src, dst, key))
        object.__setattr__(self.g._node[node_id]["node"], "_journal", None)
        self.g.remove_node(node_id)
        self._changed.pop(node_id, None)
        self._removed.add(node_id)
        for index in self._keyed.values():
            index.removed(node_id)

    def nodes(self, kind: NodeKind | None = None, status: Status | None = None) -> list[Node]:
        out = []
        for _, data in self.g.nodes(data=True):
            n: Node = data["node"]
            if (kind is None or n.kind == kind) and (status is None or n.status == status):
                out.append(n)
        return out

    def __len__(self) -> int:
        return self.g.number_of_nodes()

    def nodes_keyed(
        self, key: Callable[[Node], Any], values: Iterable[Hashable], *, each: bool = False
    ) -> list[Node]:
        """The nodes whose ``key(node)`` is among ``values``, in the order :meth:`nodes` lists them;
        with ``each``, ``key`` gives a node several values (an iterable) and any of them finds it.

        The first call with a ``key`` (the same function each time) reads every node; the graph
        keeps that index from then on, so later calls cost what they find, not what the graph
        holds. ``key`` may read any field: an assigned one journals itself, a list or
        ``properties`` changed in place counts once :meth:`touch` names the node. Meant for a key
        that tells nodes nearly apart (a name, an id): the nodes sharing a value are kept as one
        small group, made again as one joins or leaves it. A node whose key is None is found by no
        value, so a key most nodes lack makes no such group of them.

        >>> g = MemoryGraph("u1")
        >>> for nid, label in (("a", "Acme"), ("b", "Bea"), ("c", "Acme")):
        ...     g.add_node(Node(nid, NodeKind.ENTITY, label, "u1"))
        >>> by_label = lambda n: n.label
        >>> [n.id for n in g.nodes_keyed(by_label, ["Acme"])]
        ['a', 'c']
        >>> g.get("b").label = "Acme"
        >>> [n.id for n in g.nodes_keyed(by_label, ["Acme"])]
        ['a', 'b', 'c']
        >>> g.get("c").aliases.append("Bea"); g.touch("c")
        >>> by_name = lambda n: (n.label, *n.aliases)
        >>> [n.id for n in g.nodes_keyed(by_name, ["Bea"], each=True)]
        ['c']
        """
        return [self.g._node[i]["node"] for i in self._node_index(key, each).ids(values)]

    def _node_index(self, key: Callable[[Node], Any], each: bool = False) -> _KeyedNodes:
        self._key_journaled()
        index = self._keyed.get(key)
        if index is None:
            index = self._keyed[key] = _KeyedNodes(key, self.nodes(), each)
            self._changed.unkeyed = {}
        return index

    def node_key_values(self, key: Callable[[Node], Any]) -> list[Hashable]:
        """The values some node's ``key`` gives, as :meth:`nodes_keyed` files them (one of its keys);
        as many as there are distinct values, however many nodes share each."""
        return list(self._node_index(key).by_key)

    def _key_journaled(self) -> None:
        """Key again the nodes written since the indexes last looked (a field assigned in place)."""
        unkeyed = self._changed.unkeyed
        if not unkeyed:
            return
        for node_id in unkeyed:
            data = self.g._node.get(node_id)
            if data is not None:
                for index in self._keyed.values():
                    index.added(data["node"])
        unkeyed.clear()

    # ----- edges -----
    def add_edge(self, edge: Edge) -> None:
        for end in (edge.src, edge.dst):
            if end not in self.g:
                raise NodeNotFoundError(end)
        k = edge_key(edge)
        self.g.add_edge(edge.src, edge.dst, key=k[2], edge=edge)
        # An edge taken out and put back (a fragment placed again) now comes after the others: it
        # stays among the removed, so a store deletes its row and makes it again, in that place too,
        # and a reopened graph lists a parent's children in the order this one does.
        self._added_edges[k] = edge
        for index in self._edges_keyed.values():
            index.added(edge)

    def remove_edge(self, src: str, dst: str, kind: EdgeKind, label: str = "") -> None:
        key = _kind_key(kind, label)
        if self.g.has_edge(src, dst, key):
            first = next(iter(self.g._succ[src][dst])) == key
            self._drop_edge(src, dst, key)
            rest = [d["edge"] for d in self.g._succ[src].get(dst, {}).values()]
            if first and rest:
                # A reopened graph places dst among src's neighbours (and src among dst's) where the
                # pair's first stored edge is: the first one gone, that is a later one's row, while
                # this graph kept the pair's place. Put back, the pair's other edges come last in
                # both, as an edge taken out and put back does.
                for e in rest:
                    self._drop_edge(src, dst, _kind_key(e.kind, e.label))
                for e in rest:
                    self.add_edge(e)

    def _drop_edge(self, src: str, dst: str, key: str) -> None:
        self.g.remove_edge(src, dst, key)
        self._added_edges.pop((src, dst, key), None)
        self._removed_edges.add((src, dst, key))
        for index in self._edges_keyed.values():
            index.removed((src, dst, key))

    def edge(self, src: str, dst: str, kind: EdgeKind, label: str = "") -> Edge | None:
        """The ``kind`` edge src -> dst (``label`` for a relation), or None."""
        data = self.g.get_edge_data(src, dst, _kind_key(kind, label))
        return data["edge"] if data is not None else None

    def edges(self, kind: EdgeKind | None = None) -> list[Edge]:
        return [d["edge"] for _, _, d in self.g.edges(data=True) if kind is None or d["edge"].kind == kind]

    def edges_keyed(self, key: Callable[[Edge], Any], values: Iterable[Hashable]) -> list[Edge]:
        """The edges whose ``key(edge)`` is among ``values``. As :meth:`nodes_keyed`: the first call
        with a ``key`` reads every edge, later ones cost what they find. ``key`` must read what an
        edge is written with (an edge is replaced whole, never changed in place, to change a key).

        >>> g = MemoryGraph("u1")
        >>> for nid in ("a", "b"):
        ...     g.add_node(Node(nid, NodeKind.ENTITY, nid, "u1"))
        >>> g.add_edge(Edge("a", "b", EdgeKind.RELATION, "knows", properties={"src": "c1"}))
        >>> by_src = lambda e: e.properties.get("src")
        >>> [e.label for e in g.edges_keyed(by_src, ["c1"])]
        ['knows']
        >>> g.remove_node("b")
        >>> g.edges_keyed(by_src, ["c1"])
        []
        """
        index = self._edges_keyed.get(key)
        if index is None:
            index = self._edges_keyed[key] = _KeyedEdges(key, self.edges())
        out = []
        for value in dict.fromkeys(values):
            for src, dst, k in index.by_key.get(value, ()):
                out.append(self.g.edges[src, dst, k]["edge"])
        return out

    def edges_between(self, src: str, dst: str, kind: EdgeKind | None = None) -> list[Edge]:
        """The edges src -> dst (of ``kind``): one lookup, whatever either node's other edges."""
        found = self.g.get_edge_data(src, dst) or {}
        return [d["edge"] for d in found.values() if kind is None or d["edge"].kind == kind]

    def has_edges_besides(self, node_id: str, excluded: Collection[EdgeKey]) -> bool:
        """Whether an edge of ``node_id`` is not in ``excluded``. Stops at the first such edge, so a
        node with thousands of edges (a speaker's entity) costs no more than its excluded edges."""
        for dst, keyed in self.g._succ[node_id].items():
            if any((node_id, dst, key) not in excluded for key in keyed):
                return True
        for src, keyed in self.g._pred[node_id].items():
            if any((src, node_id, key) not in excluded for key in keyed):
                return True
        return False

    def out_edges(self, node_id: str, kind: EdgeKind | None = None) -> list[Edge]:
        return [
            d["edge"]
            for _, _, d in self.g.out_edges(node_id, data=True)
            if kind is None or d["edge"].kind == kind
        ]

    def in_edges(self, node_id: str, kind: EdgeKind | None = None) -> list[Edge]:
        return list(self.iter_in_edges(node_id, kind))

    def iter_in_edges(self, node_id: str, kind: EdgeKind | None = None) -> Iterator[Edge]:
        """:meth:`in_edges` one at a time, for a caller that stops at the first it wants: a speaker's
        entity has thousands."""
        for _, _, d in self.g.in_edges(node_id, data=True):
            if kind is None or d["edge"].kind == kind:
                yield d["edge"]

    # ----- hierarchy -----
    def parent(self, node_id: str) -> Node | None:
        for e in self.out_edges(node_id, EdgeKind.BELONGS_TO):
            return self.get(e.dst)
        return None

    def children(self, node_id: str) -> list[Node]:
        return [self.get(e.src) for e in self.in_edges(node_id, EdgeKind.BELONGS_TO)]

    def sources_under(self, node_id: str) -> set[str]:
        """Ids of the messages a node stands for: its own sources and those of every node beneath it.

        >>> g = MemoryGraph("u1")
        >>> g.add_node(Node("s", NodeKind.SUBTOPIC, "Refunds", "u1"))
        >>> g.add_node(Node("f", NodeKind.FRAGMENT, "chat", "u1", source_ids=["m1", "m2"]))
        >>> g.add_edge(Edge("f", "s", EdgeKind.BELONGS_TO))
        >>> sorted(g.sources_under("s"))
        ['m1', 'm2']
        """
        out: set[str] = set()
        stack, seen = [node_id], {node_id}
        while stack:
            current = stack.pop()
            if not self.has(current):
                continue
            out.update(self.get(current).source_ids)
            for child in self.children(current):
                if child.id not in seen:
                    seen.add(child.id)
                    stack.append(child.id)
        return out

    def ancestors(self, node_id: str) -> list[Node]:
        """Parents from the nearest up to the top (cycle-safe)."""
        out, seen, cur = [], {node_id}, self.parent(node_id)
        while cur is not None and cur.id not in seen:
            out.append(cur)
            seen.add(cur.id)
            cur = self.parent(cur.id)
        return out

    def hierarchy_path(self, node_id: str) -> list[str]:
        """Labels from the top concept down to this node."""
        return [n.label for n in reversed(self.ancestors(node_id))] + [self.get(node_id).label]

    def successors_of(self, node_id: str) -> list[Node]:
        """Nodes that supersede ``node_id`` (the sources of ``updates`` edges pointing at it)."""
        return [self.get(e.src) for e in self.in_edges(node_id, EdgeKind.UPDATES)]

    def predecessors_of(self, node_id: str) -> list[Node]:
        return [self.get(e.dst) for e in self.out_edges(node_id, EdgeKind.UPDATES)]

    def latest_successors(self, node_id: str) -> list[Node]:
        """Follow the update chain to its current ends (A -> B -> C gives [C] for A)."""
        out, seen, frontier = [], {node_id}, [node_id]
        while frontier:
            nxt = []
            for nid in frontier:
                succ = [s for s in self.successors_of(nid) if s.id not in seen]
                if not succ and nid != node_id:
                    out.append(self.get(nid))
                for s in succ:
                    seen.add(s.id)
                    nxt.append(s.id)
            frontier = nxt
        return out

    # ----- traversal -----
    def edge_view(self, kinds: Iterable[EdgeKind]) -> nx.Graph:
        """An undirected read-only view holding only the given edge kinds (for traversal)."""
        wanted = {k.value if isinstance(k, EdgeKind) else str(k) for k in kinds}

        def keep(u, v, key):
            return key.split(":", 1)[0] in wanted

        return nx.subgraph_view(self.g, filter_edge=keep).to_undirected(as_view=True)

    def edges_near(
        self, node_ids: Iterable[str], depth: int, *, follow: Callable[[Edge], bool], limit: int
    ) -> list[Edge]:
        """At most ``limit`` edges within ``depth`` hops of ``node_ids``, nearest first, each once:
        breadth-first over both directions, along the edges ``follow`` accepts.

        >>> g = MemoryGraph("u")
        >>> for i in "abcd": g.add_node(Node(i, NodeKind.ENTITY, i, "u"))
        >>> g.add_edge(Edge("a", "b", EdgeKind.RELATION, "knows"))
        >>> g.add_edge(Edge("c", "b", EdgeKind.MENTIONS))
        >>> g.add_edge(Edge("c", "d", EdgeKind.RELATION, "owns"))
        >>> [(e.src, e.dst) for e in g.edges_near(["a"], 3, follow=lambda e: True, limit=10)]
        [('a', 'b'), ('c', 'b'), ('c', 'd')]
        >>> [(e.src, e.dst) for e in g.edges_near(["a"], 3, follow=lambda e: e.label != "owns", limit=10)]
        [('a', 'b'), ('c', 'b')]
        """
        frontier = list(node_ids)
        visited = set(frontier)
        seen: set[EdgeKey] = set()
        found: list[Edge] = []
        for _ in range(depth):
            nxt: list[str] = []
            for node_id in frontier:
                for edge in [*self.out_edges(node_id), *self.in_edges(node_id)]:
                    key = edge_key(edge)
                    if key in seen or not follow(edge):
                        continue
                    seen.add(key)
                    found.append(edge)
                    other = edge.dst if edge.src == node_id else edge.src
                    if other not in visited:
                        visited.add(other)
                        nxt.append(other)
            frontier = nxt
            if not frontier or len(found) >= limit:
                break
        return found[:limit]

    def iter_tree(self) -> Iterator[tuple[int, Node]]:
        """Depth-first over the hierarchy from each top node: (depth, node)."""
        tops = [
            n
            for n in self.nodes()
            if n.kind in (NodeKind.CONCEPT,)
            or (n.kind in (NodeKind.SUBTOPIC, NodeKind.FRAGMENT) and self.parent(n.id) is None)
        ]
        tops.sort(key=lambda n: (n.created_at is None, n.created_at, n.id))

        def walk(n: Node, depth: int):
            yield depth, n
            kids = sorted(self.children(n.id), key=lambda c: (c.created_at is None, c.created_at, c.id))
            for c in kids:
                yield from walk(c, depth + 1)

        for t in tops:
            yield from walk(t, 0)

    # ----- serialisation (plain data, never pickle) -----
    def to_data(self) -> dict:
        return {
            "namespace": self.namespace,
            "nodes": [n.to_dict() for n in self.nodes()],
            "edges": [e.to_dict() for e in self.edges()],
        }

    @classmethod
    def from_data(cls, data: dict) -> MemoryGraph:
        g = cls(data["namespace"])
        for nd in data["nodes"]:
            g.add_node(Node.from_dict(nd))
        for ed in data["edges"]:
            g.add_edge(Edge.from_dict(ed))
        g.discard_changes()  # what was read is what is stored
        return g
