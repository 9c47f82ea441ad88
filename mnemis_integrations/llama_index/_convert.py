"""Pure conversions between Mnemis data and LlamaIndex shapes.

Nothing here imports LlamaIndex: every function takes and returns plain data (dicts,
strings, core ``Node``/``Edge`` objects), so the module is tested without the framework.
The adapters wrap the results in ``TextNode``, ``EntityNode``, ``ChunkNode`` or ``Relation``.

Property-graph mapping (see :class:`~.graph_store.MnemisPropertyGraphStore`):

* an ``entity`` node is an ``EntityNode`` whose ``name`` is the node's label; its LlamaIndex
  id is that name (LlamaIndex identifies entities by name);
* ``concept``, ``subtopic``, ``fragment`` and ``archive`` nodes are ``ChunkNode`` objects whose
  id is the Mnemis node id, whose label is the kind and whose text is the summary line;
* a labelled entity relation is a ``Relation`` with that label; the structural edges are
  relations labelled ``BELONGS_TO`` (child -> parent), ``MENTIONS``, ``UPDATES`` (new -> old),
  ``REFERENCES`` and ``CONTRADICTS``;
* node fields appear as properties (``kind``, ``status``, ``keywords``, times, ...); any other
  property is the caller's own and is kept as given.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..core.builder.relation_sources import READ_COUNTS, READ_FROM, RELATIONS_READ
from ..core.graph import MemoryGraph, edge_key
from ..core.messages import iso_moment, parse_timestamp
from ..core.model import Edge, EdgeKind, Node, NodeKind, Status
from ..core.retrieval.render import memory_block, memory_line
from ..core.retrieval.results import MemoryHit
from ..errors import InvalidMessageError, InvalidNameError, InvalidQueryError

__all__ = [
    "DEFAULT_ENTITY_LABEL",
    "DERIVED_PROPERTIES",
    "DOCUMENT_SPEAKER",
    "DOCUMENT_TIME_KEYS",
    "FILTER_OPERATORS",
    "FIELD_PROPERTIES",
    "LABEL_PROPERTY",
    "LLM_METADATA_KEYS",
    "STRUCTURAL_LABELS",
    "chat_message_id",
    "chat_record",
    "core_filter",
    "document_record",
    "edge_kind_for_label",
    "entity_node_id",
    "format_hit",
    "format_hits",
    "kind_for_chunk",
    "llama_id",
    "matches_properties",
    "metadata_exclusions",
    "node_view",
    "orphaned_extractions",
    "own_properties",
    "refuse_nul",
    "public_properties",
    "relation_label",
    "relation_properties",
    "short_label",
    "split_node_properties",
    "split_relation_properties",
]

# ---------------------------------------------------------------------------------------------
# Hits -> TextNode metadata and prompt text
# ---------------------------------------------------------------------------------------------

# The metadata a reader LLM sees in front of each node's text (LlamaIndex prints every metadata
# key by default). The scores, ids and lists stay in metadata for code, out of the prompt.
LLM_METADATA_KEYS = ("path_str", "time", "status")


# LlamaIndex ``FilterOperator`` values -> Mnemis filter operators. The others (``any``, ``all``,
# ``contains``, ``text_match``, ``is_empty``) test list values or text, which message metadata
# (flat scalars) has no use for.
FILTER_OPERATORS = {
    "==": "$eq",
    "!=": "$ne",
    "in": "$in",
    "nin": "$nin",
    ">": "$gt",
    ">=": "$gte",
    "<": "$lt",
    "<=": "$lte",
}


def core_filter(filters: Any) -> dict[str, Any] | None:
    """A LlamaIndex ``MetadataFilters`` as a Mnemis ``search(filter=...)`` dict (a dict, one
    already, as it is).

    Read by attribute (``filters``, ``condition``; ``key``, ``operator``, ``value``), so it
    works without LlamaIndex imported. Nested ``MetadataFilters`` and the ``and`` / ``or``
    conditions translate; ``not`` and the operators outside :data:`FILTER_OPERATORS` raise.

    Raises:
        InvalidQueryError: an operator or condition Mnemis does not support, or ``filters`` is
            neither a ``MetadataFilters`` nor a dict.

    Examples:
        >>> from types import SimpleNamespace as F
        >>> core_filter(F(condition="and", filters=[F(key="channel", operator="==", value="email"),
        ...                                         F(key="priority", operator=">=", value=2)]))
        {'$and': [{'channel': {'$eq': 'email'}}, {'priority': {'$gte': 2}}]}
    """
    if filters is None or isinstance(filters, Mapping):
        return filters
    # read by attribute below, where a list of MetadataFilter or a string fails with AttributeError
    if not hasattr(filters, "filters"):
        raise InvalidQueryError(
            "filters must be a LlamaIndex MetadataFilters or a Mnemis filter dict, "
            f"not {type(filters).__name__}"
        )
    condition = _enum_value(getattr(filters, "condition", None)) or "and"
    if condition not in ("and", "or"):
        raise InvalidQueryError(
            f"MetadataFilters condition {condition!r} is not supported; use 'and' or 'or'"
        )
    parts = []
    for f in filters.filters:
        if hasattr(f, "filters"):
            nested = core_filter(f)
            if nested is not None:
                parts.append(nested)
            continue
        op = _enum_value(getattr(f, "operator", None)) or "=="
        if op not in FILTER_OPERATORS:
            raise InvalidQueryError(
                f"MetadataFilter operator {op!r} on {f.key!r} is not supported; "
                f"supported: {', '.join(FILTER_OPERATORS)}"
            )
        parts.append({f.key: {FILTER_OPERATORS[op]: f.value}})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {f"${condition}": parts}


def _enum_value(value: Any) -> Any:
    return getattr(value, "value", value)


def metadata_exclusions(metadata: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(excluded_llm_metadata_keys, excluded_embed_metadata_keys)`` for a hit's metadata.

    The LLM sees only :data:`LLM_METADATA_KEYS`; no metadata is embedded.

    Examples:
        >>> llm, embed = metadata_exclusions({"path_str": "A", "score": 1.0, "node_id": "n"})
        >>> llm, embed
        (['score', 'node_id'], ['path_str', 'score', 'node_id'])
    """
    keys = list(metadata)
    return [k for k in keys if k not in LLM_METADATA_KEYS], keys


def format_hit(hit: MemoryHit, *, max_chars: int | None = None) -> str:
    """One recalled memory as a prompt line: ``[A > B] (superseded) text (2025-03-02)``.

    Examples:
        >>> h = MemoryHit("n1", "fragment", "refund is late", (), 1.0, 1.0, 0.0, (),
        ...               ("Work", "Refunds"), datetime(2025, 3, 2, 9, 30), "superseded")
        >>> format_hit(h)
        '[Work > Refunds] (superseded) refund is late (2025-03-02)'
        >>> format_hit(h, max_chars=6)
        '[Work > Refunds] (superseded) refund… (2025-03-02)'
    """
    return memory_line(
        hit.path_str, hit.text, status=hit.status, when=hit.time, max_chars=max_chars, one_line=True
    )


def format_hits(
    hits: Sequence[MemoryHit],
    *,
    header: str = "Long-term memories (most relevant first; [topic path] content (date)):",
    max_chars: int | None = None,
) -> str:
    """Recall as one text block, one ``- [path] text`` line per hit; ``""`` when there are none.

    Examples:
        >>> format_hits([])
        ''
    """
    return memory_block([format_hit(h, max_chars=max_chars) for h in hits], header=header)


# ---------------------------------------------------------------------------------------------
# Chat messages -> Mnemis messages
# ---------------------------------------------------------------------------------------------


def chat_message_id(session_id: str | None, role: str, text: str) -> str:
    """A stable Mnemis message id for one chat message: ``"<session>:<digest of role and text>"``.

    ``ChatMessage`` carries no id, and the same message reaches a memory block several times
    (each time the short-term memory is read, and once more when it is flushed). Deriving the
    id from the session and content makes every delivery after the first a no-op. The price:
    the same text said twice by the same role in one session is stored once.

    Examples:
        >>> chat_message_id("s1", "user", "hi") == chat_message_id("s1", "user", "hi")
        True
        >>> chat_message_id("s1", "user", "hi") == chat_message_id("s2", "user", "hi")
        False
        >>> chat_message_id(None, "user", "hi").startswith("default:")
        True
    """
    digest = hashlib.sha256(f"{role}\x1f{text}".encode()).hexdigest()[:16]
    return f"{session_id or 'default'}:{digest}"


def chat_record(
    *, session_id: str | None, role: str, text: str, timestamp: datetime | None
) -> dict[str, Any]:
    """The dict :meth:`MnemisMemory.add_messages` takes, for one LlamaIndex chat message.

    Examples:
        >>> r = chat_record(session_id="s1", role="user", text="hi", timestamp=None)
        >>> r["speaker"], r["text"], r["id"] == chat_message_id("s1", "user", "hi")
        ('user', 'hi', True)
    """
    return {
        "id": chat_message_id(session_id, role, text),
        "speaker": role,
        "text": text,
        "timestamp": timestamp,
    }


# Documents (LlamaIndex text nodes) become messages said by this speaker.
DOCUMENT_SPEAKER = "document"
# Metadata keys read, first present first, for a document's time: ours, then the dates
# SimpleDirectoryReader writes ("creation_date": "2025-03-02").
DOCUMENT_TIME_KEYS = ("timestamp", "created_at", "date", "creation_date", "last_modified_date")


def document_record(
    node_id: str,
    text: str,
    metadata: Mapping[str, Any],
    *,
    now: datetime,
    time_keys: Sequence[str] = DOCUMENT_TIME_KEYS,
) -> dict[str, Any]:
    """The dict :meth:`MnemisMemory.add_messages` takes for one LlamaIndex text node.

    The message id is the node id, so the node, its message and everything built from it are
    deleted together. The time is the first of ``time_keys`` present in ``metadata``, else ``now``.

    Raises:
        InvalidMessageError: the time found in ``metadata`` is not a datetime or ISO-8601 string.

    Examples:
        >>> r = document_record("c1", "Logan works for LlamaIndex.", {"date": "2024-05-01"},
        ...                     now=datetime(2025, 1, 1))
        >>> r["id"], r["speaker"], r["timestamp"].isoformat()
        ('c1', 'document', '2024-05-01T00:00:00+00:00')
        >>> document_record("c1", "x", {}, now=datetime(2025, 1, 1))["timestamp"].year
        2025
        >>> document_record("c1", "x", {"date": "March"}, now=datetime(2025, 1, 1))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        mnemis_integrations.errors.InvalidMessageError: ...metadata 'date': timestamp 'March' is not...
    """
    when: Any = now
    key = next((k for k in time_keys if metadata.get(k) is not None), None)
    if key is not None:
        try:
            when = parse_timestamp(metadata[key], message_id=node_id)
        except InvalidMessageError as e:
            raise InvalidMessageError(f"metadata {key!r}: {e.reason}", message_id=node_id) from None
    return {"id": node_id, "speaker": DOCUMENT_SPEAKER, "text": text, "timestamp": when}


# ---------------------------------------------------------------------------------------------
# Property graph: nodes
# ---------------------------------------------------------------------------------------------

DEFAULT_ENTITY_LABEL = "entity"  # LlamaIndex's own default EntityNode label
# Kept in a node's own properties when its LlamaIndex label is not derivable from its kind
# (an EntityNode labelled "PERSON", a ChunkNode labelled "text_chunk"); never shown as a property.
LABEL_PROPERTY = "_llama_label"
# Properties that read and write node fields.
FIELD_PROPERTIES = (
    "summary",
    "keywords",
    "aliases",
    "source_ids",
    "status",
    "created_at",
    "event_time",
    "valid_until",
)
# Properties computed on read and ignored on write (the store owns them).
DERIVED_PROPERTIES = ("node_id", "kind", "namespace")
_TIME_FIELDS = ("created_at", "event_time", "valid_until")
_LIST_FIELDS = ("keywords", "aliases", "source_ids")
_CHUNK_KINDS = {k.value: k for k in NodeKind if k != NodeKind.ENTITY}


def llama_id(node: Node) -> str:
    """The id LlamaIndex knows a node by: an entity's name (as ``EntityNode.id`` makes it), else the node id.

    Examples:
        >>> llama_id(Node("e1", NodeKind.ENTITY, 'Acme "Inc"', "u1"))
        'Acme  Inc '
        >>> llama_id(Node("f1", NodeKind.FRAGMENT, "chat", "u1"))
        'f1'
    """
    return node.label.replace('"', " ") if node.kind == NodeKind.ENTITY else node.id


def refuse_nul(what: str, value: str) -> None:
    """A name, id or label becomes a node's or edge's key in every store; a NUL in it is stored by
    some and refused by others (FalkorDB cuts a query at it), so none takes it. Refused here, before
    any is resolved, the error names the LlamaIndex field; it is the error a hand edit gets.

    Examples:
        >>> refuse_nul("entity name", "Ac" + chr(0) + "me")
        Traceback (most recent call last):
        ...
        mnemis_integrations.errors.InvalidNameError: entity name 'Ac\\x00me' holds a NUL character
    """
    if chr(0) in value:
        raise InvalidNameError(what, value, "holds a NUL character")


def entity_node_id(name: str) -> str:
    """The Mnemis node id given to an entity first written through the property-graph store.

    Examples:
        >>> entity_node_id("Logan")
        'pg-entity:Logan'
    """
    return f"pg-entity:{name}"


# Where relations were read from (the fragment's records, the edge's counts): the memory's own
# bookkeeping for forget, naming message ids, not properties a LlamaIndex caller gave.
_BOOKKEEPING = frozenset({RELATIONS_READ, READ_COUNTS, READ_FROM})


def public_properties(node: Node, own: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A node's LlamaIndex properties: its own properties, then its fields.

    ``kind``, ``status`` and ``node_id`` are always present; lists, times and the summary only
    when set (a chunk's summary is its text, so it is not repeated).

    Examples:
        >>> n = Node("e1", NodeKind.ENTITY, "Logan", "u1", keywords=["ceo"])
        >>> public_properties(n, {"age": 28, "_llama_label": "PERSON"})
        {'age': 28, 'node_id': 'e1', 'kind': 'entity', 'status': 'active', 'keywords': ['ceo']}
    """
    props = {k: v for k, v in (own or {}).items() if k != LABEL_PROPERTY and k not in _BOOKKEEPING}
    props.update(node_id=node.id, kind=node.kind.value, status=node.status.value)
    if node.kind == NodeKind.ENTITY and node.summary:
        props["summary"] = node.summary
    for name in _LIST_FIELDS:
        if getattr(node, name):
            props[name] = list(getattr(node, name))
    for name in _TIME_FIELDS:
        value = getattr(node, name)
        if value is not None:
            props[name] = value.isoformat()
    return props


def node_view(node: Node, own: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the adapter needs to build a LlamaIndex node.

    Returns ``{"type": "entity", "name", "label", "properties"}`` for an entity, else
    ``{"type": "chunk", "id", "text", "label", "properties"}``.

    Examples:
        >>> node_view(Node("e1", NodeKind.ENTITY, "Logan", "u1"), {"_llama_label": "PERSON"})["label"]
        'PERSON'
        >>> v = node_view(Node("s1", NodeKind.SUBTOPIC, "Refunds", "u1", summary="Refund failures"))
        >>> v["type"], v["id"], v["text"], v["label"]
        ('chunk', 's1', 'Refund failures', 'subtopic')
    """
    own = own or {}
    props = public_properties(node, own)
    if node.kind == NodeKind.ENTITY:
        return {
            "type": "entity",
            "name": node.label,
            "label": own.get(LABEL_PROPERTY, DEFAULT_ENTITY_LABEL),
            "properties": props,
        }
    return {
        "type": "chunk",
        "id": node.id,
        "text": node.summary or node.label,
        "label": own.get(LABEL_PROPERTY, node.kind.value),
        "properties": props,
    }


def _as_time(name: str, value: Any) -> datetime | None:
    # Naive taken as UTC, as a message's time is: a naive node time would fail every comparison
    # with the aware ones the memory holds (a search's ``as_of``) with a TypeError.
    if value is None:
        return None
    moment = iso_moment(value) if isinstance(value, str) else value if isinstance(value, datetime) else None
    if moment is None:
        raise ValueError(f"property {name!r} must be a datetime or an ISO-8601 string, not {value!r}")
    return parse_timestamp(moment)


def split_node_properties(properties: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split written properties into ``(node field updates, the caller's own properties)``.

    Derived properties (``node_id``, ``kind``, ``namespace``) are dropped: the store owns them.

    Raises:
        ValueError: a field property has a value the field cannot take (the message lists
            the valid statuses).

    Examples:
        >>> fields, own = split_node_properties({"age": 28, "status": "superseded", "kind": "entity",
        ...                                      "created_at": "2025-03-02T09:00:00"})
        >>> fields["status"], fields["created_at"].day, own
        (<Status.SUPERSEDED: 'superseded'>, 2, {'age': 28})
        >>> split_node_properties({"status": "pending"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: property 'status' must be one of active, superseded, archived, not 'pending'
    """
    fields: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for key, value in properties.items():
        if key in DERIVED_PROPERTIES or key == LABEL_PROPERTY:
            continue
        if key not in FIELD_PROPERTIES:
            own[key] = value
        elif key == "status":
            try:
                fields["status"] = Status(value.value if isinstance(value, Status) else value)
            except ValueError:
                valid = ", ".join(s.value for s in Status)
                raise ValueError(f"property 'status' must be one of {valid}, not {value!r}") from None
        elif key in _TIME_FIELDS:
            fields[key] = _as_time(key, value)
        elif key in _LIST_FIELDS:
            fields[key] = [value] if isinstance(value, str) else [str(v) for v in value]
        else:  # summary
            fields[key] = "" if value is None else str(value)
    return fields, own


def own_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    """Written properties kept whole as the caller's own, none read as a node field: a text node's
    metadata (a document's ``status`` or ``keywords`` is the document's, not the node's). Derived
    properties are dropped, as :func:`split_node_properties` drops them.

    Examples:
        >>> own_properties({"status": "draft", "keywords": 5, "kind": "invoice"})
        {'status': 'draft', 'keywords': 5}
    """
    return {k: v for k, v in properties.items() if k not in DERIVED_PROPERTIES and k != LABEL_PROPERTY}


def kind_for_chunk(label: str, properties: Mapping[str, Any], existing: NodeKind | None = None) -> NodeKind:
    """The Mnemis kind of a written ``ChunkNode``.

    Its label when that names a hierarchy kind; else a ``kind`` property naming one; else the
    existing node's kind; else ``fragment`` (a text chunk is concrete content).

    Examples:
        >>> kind_for_chunk("subtopic", {}).value, kind_for_chunk("text_chunk", {}).value
        ('subtopic', 'fragment')
        >>> kind_for_chunk("text_chunk", {"kind": "concept"}).value
        'concept'
    """
    if label in _CHUNK_KINDS:
        return _CHUNK_KINDS[label]
    kind = properties.get("kind")
    if isinstance(kind, str) and kind in _CHUNK_KINDS:
        return _CHUNK_KINDS[kind]
    if existing is not None and existing != NodeKind.ENTITY:
        return existing
    return NodeKind.FRAGMENT


def short_label(text: str, max_chars: int = 60) -> str:
    """The label (shown in hierarchy paths) of a chunk written through the store: its text's start.

    Examples:
        >>> short_label("Logan works for LlamaIndex since 2023.", max_chars=20)
        'Logan works for…'
        >>> short_label("  short  ")
        'short'
    """
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars].rsplit(" ", 1)[0] or text[:max_chars]
    return cut.rstrip() + "…"


# ---------------------------------------------------------------------------------------------
# Property graph: relations
# ---------------------------------------------------------------------------------------------

# Structural edge kinds appear as upper-case relation labels, as LlamaIndex's own structural
# relations do ("SOURCE", "MENTIONS", "NEXT").
STRUCTURAL_LABELS = {k.value.upper(): k for k in EdgeKind if k != EdgeKind.RELATION}


def relation_label(edge: Edge) -> str:
    """The ``Relation.label`` of an edge: its label for an entity relation, else its kind upper-cased.

    Examples:
        >>> relation_label(Edge("f", "s", EdgeKind.BELONGS_TO))
        'BELONGS_TO'
        >>> relation_label(Edge("a", "b", EdgeKind.RELATION, label="works_for"))
        'works_for'
    """
    return edge.label if edge.kind == EdgeKind.RELATION else edge.kind.value.upper()


def edge_kind_for_label(label: str) -> tuple[EdgeKind, str]:
    """``(kind, edge label)`` for a written ``Relation.label``; the inverse of :func:`relation_label`.

    Examples:
        >>> edge_kind_for_label("MENTIONS")
        (<EdgeKind.MENTIONS: 'mentions'>, '')
        >>> edge_kind_for_label("WORKS_FOR")
        (<EdgeKind.RELATION: 'relation'>, 'WORKS_FOR')
    """
    if label in STRUCTURAL_LABELS:
        return STRUCTURAL_LABELS[label], ""
    if not label:
        raise ValueError("a Relation needs a non-empty label")
    return EdgeKind.RELATION, label


def relation_properties(edge: Edge, own: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A relation's properties: the caller's own, plus ``weight`` when not 1 and ``created_at`` when set.

    Examples:
        >>> relation_properties(Edge("a", "b", EdgeKind.RELATION, "knows", weight=0.5), {"since": 2023})
        {'since': 2023, 'weight': 0.5}
    """
    props = {k: v for k, v in (own or {}).items() if k not in _BOOKKEEPING}
    if edge.weight != 1.0:
        props["weight"] = edge.weight
    if edge.created_at is not None:
        props["created_at"] = edge.created_at.isoformat()
    return props


def split_relation_properties(properties: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split written relation properties into ``(edge field values, the caller's own)``.

    Examples:
        >>> split_relation_properties({"since": 2023, "weight": "0.5"})
        ({'weight': 0.5}, {'since': 2023})
    """
    fields: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for key, value in properties.items():
        if key == "weight":
            fields["weight"] = float(value)
        elif key == "created_at":
            fields["created_at"] = _as_time(key, value)
        else:
            own[key] = value
    return fields, own


def orphaned_extractions(
    graph: MemoryGraph, removed: set[str], source_key: str
) -> tuple[list[Edge], list[str]]:
    """What an extractor wrote from text nodes that are gone: ``(relations, entity ids)`` to delete.

    A relation goes when its ``source_key`` property names a node in ``removed``. An entity
    goes when it names a source no longer in the graph and would have no relation left: an
    entity another text still relates to stays. Nodes written without ``source_key`` (by hand,
    or by Mnemis's own builder) are never chosen.

    Examples:
        >>> g = MemoryGraph("u1")
        >>> for nid in ("pg-entity:Logan", "pg-entity:Acme"):
        ...     g.add_node(Node(nid, NodeKind.ENTITY, nid[10:], "u1", properties={"src": "c1"}))
        >>> g.add_edge(Edge("pg-entity:Logan", "pg-entity:Acme", EdgeKind.RELATION, "works_for",
        ...                 properties={"src": "c1"}))
        >>> edges, entities = orphaned_extractions(g, {"c1"}, "src")
        >>> [e.label for e in edges], sorted(entities)
        (['works_for'], ['pg-entity:Acme', 'pg-entity:Logan'])
    """
    # Both read the graph's indexes by source, kept as it changes, not every edge and entity. The
    # entities are looked for under every source that is gone, not only the removed ones: one whose
    # text went earlier, while another relation held it, may have lost that relation since (a delete
    # by relation name, a forget's dropped mentions), and goes now. That is a lookup per source, not
    # a read of every node.
    by_edge_source, by_entity_source = _source_keys(source_key)
    edges = graph.edges_keyed(by_edge_source, removed)
    dropped = {edge_key(e) for e in edges}
    gone = [s for s in graph.node_key_values(by_entity_source) if not graph.has(s)]
    entities = [
        n.id for n in graph.nodes_keyed(by_entity_source, gone) if not graph.has_edges_besides(n.id, dropped)
    ]
    return edges, entities


@functools.cache
def _source_keys(source_key: str) -> tuple[Callable[[Edge], Any], Callable[[Node], Any]]:
    """The keys of the graph's indexes of edges and of entities by their ``source_key`` property: one
    function each per property name, so every call finds the same index."""

    def of_edge(edge: Edge) -> Any:
        value = edge.properties.get(source_key)
        return value if isinstance(value, str) else None  # removed text nodes are named by str ids

    def of_entity(node: Node) -> Any:
        value = node.properties.get(source_key) if node.kind == NodeKind.ENTITY else None
        return value if isinstance(value, Hashable) else None

    return of_edge, of_entity


def matches_properties(properties: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """Whether every wanted property is present with an equal value (an empty filter matches all).

    Examples:
        >>> matches_properties({"age": 28, "kind": "entity"}, {"age": 28})
        True
        >>> matches_properties({"age": 28}, {"age": 28, "city": "Paris"})
        False
    """
    if not wanted:
        return True
    missing = object()
    return all(properties.get(k, missing) == v for k, v in wanted.items())
