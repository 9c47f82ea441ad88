"""Review the proposed hierarchy: export it as JSON, edit it, apply it back.

The exported document is the whole concept > subtopic > fragment tree of a namespace::

    {"format": "mnemis.hierarchy/1", "namespace": "u1", "concepts": [
        {"id": "c:m01", "label": "Orders", "subtopics": [
            {"id": "s:m01", "label": "Refund delays", "fragments": [
                {"id": "f:m01", "label": "refund (1 May 2024)", "summary": "..."}]}]}]}

Edit it by hand or with the pure helpers (:func:`rename`, :func:`merge`, :func:`split`,
:func:`move`), then :func:`apply_hierarchy` makes the graph match it: labels are set,
``belongs_to`` edges rewired, parents with an ``id`` of ``null`` created, and concepts or
subtopics left with no child removed. Fragments and messages are never deleted: a document
that leaves out a fragment, names it twice or names an unknown node is refused whole. The
originals a compaction archived are not in the document (their overview stands for them) and
cannot be moved by it.
"""

from __future__ import annotations

import copy
from typing import Any

from ...errors import ConfigError, NodeNotFoundError
from ..graph import MemoryGraph
from ..model import Edge, EdgeKind, Node, NodeKind, Status

__all__ = ["FORMAT", "ReviewError", "apply_hierarchy", "export_hierarchy", "merge", "move", "rename", "split"]

FORMAT = "mnemis.hierarchy/1"


class ReviewError(ConfigError):
    """An edited hierarchy document cannot be applied; nothing was changed."""


def _key(n: Node) -> tuple:
    return (n.created_at is None, n.created_at, n.id)


def export_hierarchy(graph: MemoryGraph) -> dict[str, Any]:
    """The hierarchy as plain JSON-ready data (fragments without a parent go under a ``null`` concept)."""
    concepts = []
    for c in sorted(graph.nodes(NodeKind.CONCEPT), key=_key):
        subs = []
        for s in sorted((k for k in graph.children(c.id) if k.kind == NodeKind.SUBTOPIC), key=_key):
            frags = [
                {"id": f.id, "label": f.label, "summary": f.summary}
                for f in sorted(graph.children(s.id), key=_key)
                if f.kind == NodeKind.FRAGMENT
            ]
            subs.append({"id": s.id, "label": s.label, "fragments": frags})
        concepts.append({"id": c.id, "label": c.label, "subtopics": subs})
    orphans = [f for f in graph.nodes(NodeKind.FRAGMENT) if graph.parent(f.id) is None]
    loose_subs = [s for s in graph.nodes(NodeKind.SUBTOPIC) if graph.parent(s.id) is None]
    if orphans or loose_subs:
        subs = [
            {
                "id": s.id,
                "label": s.label,
                "fragments": [
                    {"id": f.id, "label": f.label, "summary": f.summary}
                    for f in sorted(graph.children(s.id), key=_key)
                    if f.kind == NodeKind.FRAGMENT
                ],
            }
            for s in sorted(loose_subs, key=_key)
        ]
        if orphans:
            subs.append(
                {
                    "id": None,
                    "label": "unfiled",
                    "fragments": [
                        {"id": f.id, "label": f.label, "summary": f.summary}
                        for f in sorted(orphans, key=_key)
                    ],
                }
            )
        concepts.append({"id": None, "label": "unfiled", "subtopics": subs})
    return {"format": FORMAT, "namespace": graph.namespace, "concepts": concepts}


# ------------------------------------------------------------------------------ pure edits


def _find(doc: dict, node_id: str) -> tuple[str, dict, list]:
    """(level, entry, the list holding it)."""
    for c in doc["concepts"]:
        if c.get("id") == node_id:
            return "concept", c, doc["concepts"]
        for s in c["subtopics"]:
            if s.get("id") == node_id:
                return "subtopic", s, c["subtopics"]
            for f in s["fragments"]:
                if f.get("id") == node_id:
                    return "fragment", f, s["fragments"]
    raise ReviewError(f"no node {node_id!r} in the hierarchy document")


def rename(doc: dict, node_id: str, label: str) -> dict:
    """A copy of ``doc`` with ``node_id`` (a concept, subtopic or fragment) relabelled."""
    if not label.strip():
        raise ReviewError("a label must not be empty")
    out = copy.deepcopy(doc)
    _find(out, node_id)[1]["label"] = label.strip()
    return out


def merge(doc: dict, sources: list[str], into: str) -> dict:
    """A copy with the children of ``sources`` moved under ``into`` (same level); the sources vanish."""
    out = copy.deepcopy(doc)
    level, target, _ = _find(out, into)
    child_key = {"concept": "subtopics", "subtopic": "fragments"}.get(level)
    if child_key is None:
        raise ReviewError("only concepts and subtopics can be merged")
    for sid in sources:
        if sid == into:
            continue
        lv, entry, holder = _find(out, sid)
        if lv != level:
            raise ReviewError(f"cannot merge {lv} {sid!r} into {level} {into!r}")
        target[child_key].extend(entry[child_key])
        holder.remove(entry)
    return out


def split(doc: dict, subtopic: str, fragments: list[str], label: str) -> dict:
    """A copy where ``fragments`` leave ``subtopic`` for a new subtopic ``label`` under the same concept."""
    out = copy.deepcopy(doc)
    level, entry, holder = _find(out, subtopic)
    if level != "subtopic":
        raise ReviewError(f"{subtopic!r} is a {level}; only subtopics can be split")
    moving = [f for f in entry["fragments"] if f["id"] in set(fragments)]
    if len(moving) != len(set(fragments)):
        raise ReviewError(f"not every fragment of {fragments} is in subtopic {subtopic!r}")
    entry["fragments"] = [f for f in entry["fragments"] if f["id"] not in set(fragments)]
    holder.insert(holder.index(entry) + 1, {"id": None, "label": label, "fragments": moving})
    return out


def move(doc: dict, fragment: str, to: str) -> dict:
    """A copy with ``fragment`` moved under subtopic ``to``."""
    out = copy.deepcopy(doc)
    level, entry, holder = _find(out, fragment)
    tl, target, _ = _find(out, to)
    if level != "fragment" or tl != "subtopic":
        raise ReviewError("move takes a fragment and a subtopic")
    holder.remove(entry)
    target["fragments"].append(entry)
    return out


# ------------------------------------------------------------------------------ apply


def _entries(holder: dict, key: str, level: str) -> list[dict]:
    """``holder[key]`` (absent: none), checked to be a list of objects: a document read from a
    file may hold anything."""
    entries = holder.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ReviewError(f"the {level} entries of {holder.get('id')!r} must be a list of objects")
    return entries


def _check(graph: MemoryGraph, doc: Any) -> None:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("concepts"), list):
        raise ReviewError(f"not a {FORMAT} document")
    seen: dict[str, str] = {}
    for c in _entries(doc, "concepts", "concept"):
        subs = _entries(c, "subtopics", "subtopic")
        entries = (
            [("concept", c)]
            + [("subtopic", s) for s in subs]
            + [("fragment", f) for s in subs for f in _entries(s, "fragments", "fragment")]
        )
        for level, e in entries:
            nid, label = e.get("id"), e.get("label")
            if not isinstance(nid, (str, type(None))) or not isinstance(label, (str, type(None))):
                raise ReviewError(f"a {level}'s id and label must be strings or null, got {nid!r}, {label!r}")
            if level != "fragment" and not (label or "").strip() and nid is None:
                raise ReviewError(f"a new {level} needs a label")
            if nid is None:
                if level == "fragment":
                    raise ReviewError("a fragment entry has no id")
                continue
            if nid in seen:
                raise ReviewError(f"{nid!r} appears twice")
            seen[nid] = level
            try:
                node = graph.get(nid)
            except NodeNotFoundError:
                raise ReviewError(f"no node {nid!r} in namespace {graph.namespace!r}") from None
            if node.kind.value != level:
                raise ReviewError(f"{nid!r} is a {node.kind.value}, listed as a {level}")
            if node.status == Status.ARCHIVED:  # under its archive node, which compaction owns
                raise ReviewError(f"{nid!r} is archived by compaction; uncompact it to move it")
    # archived originals stay under their archive node: their overview stands for them here
    missing = [
        f.id for f in graph.nodes(NodeKind.FRAGMENT) if f.id not in seen and f.status != Status.ARCHIVED
    ]
    if missing:
        raise ReviewError(
            f"fragment(s) {missing[:5]} are missing from the document; fragments are never dropped"
        )


def _new_id(graph: MemoryGraph, prefix: str, seed: str) -> str:
    base = f"{prefix}:{seed.split(':', 1)[-1]}"
    nid, n = base, 1
    while graph.has(nid):
        n += 1
        nid = f"{base}#{n}"
    return nid


def _set_parent(graph: MemoryGraph, child: str, parent: str | None, when) -> None:
    for e in graph.out_edges(child, EdgeKind.BELONGS_TO):
        if e.dst != parent:
            graph.remove_edge(e.src, e.dst, EdgeKind.BELONGS_TO)
    if parent is not None and not any(e.dst == parent for e in graph.out_edges(child, EdgeKind.BELONGS_TO)):
        graph.add_edge(Edge(child, parent, EdgeKind.BELONGS_TO, created_at=when))


def apply_hierarchy(graph: MemoryGraph, doc: dict) -> dict[str, int]:
    """Make ``graph``'s hierarchy match ``doc`` (validated first: all or nothing).

    Returns:
        Counts: ``renamed``, ``moved``, ``created``, ``removed``.

    Raises:
        ReviewError: the document is malformed, names unknown nodes, or drops a fragment.
    """
    _check(graph, doc)
    stats = {"renamed": 0, "moved": 0, "created": 0, "removed": 0}
    old_parents = {
        n.id: (graph.parent(n.id).id if graph.parent(n.id) else None)
        for n in graph.nodes()
        if n.kind in (NodeKind.SUBTOPIC, NodeKind.FRAGMENT)
    }
    for c in doc["concepts"]:
        subs = c.get("subtopics", [])
        first_frag = next((f["id"] for s in subs for f in s.get("fragments", [])), None)
        cid = c.get("id")
        if cid is None and c.get("label") != "unfiled":
            seed = graph.get(first_frag) if first_frag else None
            cid = _new_id(graph, "c", first_frag or "new")
            graph.add_node(
                Node(
                    cid,
                    NodeKind.CONCEPT,
                    c["label"].strip(),
                    graph.namespace,
                    created_at=seed.created_at if seed else None,
                    event_time=seed.event_time if seed else None,
                    properties={"named_by": "review"},
                )
            )
            stats["created"] += 1
        elif cid is not None and c.get("label") and graph.get(cid).label != c["label"]:
            graph.get(cid).label = c["label"]
            graph.get(cid).properties["named_by"] = "review"
            stats["renamed"] += 1
        for s in subs:
            frags = [f["id"] for f in s.get("fragments", [])]
            sid = s.get("id")
            if sid is None:
                if s.get("label") == "unfiled" and c.get("id") is None:
                    for fid in frags:
                        _set_parent(graph, fid, None, None)
                    continue
                seed = graph.get(frags[0]) if frags else None
                sid = _new_id(graph, "s", frags[0] if frags else "new")
                graph.add_node(
                    Node(
                        sid,
                        NodeKind.SUBTOPIC,
                        s["label"].strip(),
                        graph.namespace,
                        created_at=seed.created_at if seed else None,
                        event_time=seed.event_time if seed else None,
                        properties={"named_by": "review"},
                    )
                )
                stats["created"] += 1
            elif s.get("label") and graph.get(sid).label != s["label"]:
                graph.get(sid).label = s["label"]
                graph.get(sid).properties["named_by"] = "review"
                stats["renamed"] += 1
            _set_parent(graph, sid, cid, graph.get(sid).created_at)
            if old_parents.get(sid, cid) != cid:
                stats["moved"] += 1
            for fid in frags:
                _set_parent(graph, fid, sid, graph.get(fid).created_at)
                if old_parents.get(fid) != sid:
                    stats["moved"] += 1
            for f in s.get("fragments", []):
                if f.get("label") and graph.get(f["id"]).label != f["label"]:
                    graph.get(f["id"]).label = f["label"]
                    stats["renamed"] += 1
    # Parents left with no child at all are removed (an archive child keeps its subtopic).
    for kind in (NodeKind.SUBTOPIC, NodeKind.CONCEPT):
        for n in graph.nodes(kind):
            if not graph.children(n.id):
                graph.remove_node(n.id)
                stats["removed"] += 1
    return stats
