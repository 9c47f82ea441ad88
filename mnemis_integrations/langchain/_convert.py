"""Pure conversions between Mnemis data and LangChain/LangGraph shapes.

Nothing here imports a framework: every function takes and returns plain data
(dicts, strings, tuples), so the whole module is tested without LangChain installed.
The adapters call these and wrap the results in ``Document``, ``SearchItem`` or
message objects.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..core.messages import id_characters_problem
from ..core.retrieval.render import memory_block, memory_line
from ..core.retrieval.results import MemoryHit

__all__ = [
    "format_documents",
    "format_hit",
    "format_hits",
    "keys_in_recall_order",
    "last_turn",
    "matches_filter",
    "message_record",
    "parse_store_message_id",
    "role_for_speaker",
    "speaker_for_role",
    "stale_message_ids",
    "store_message_id",
    "store_message_metadata",
    "value_digest",
    "value_to_text",
]


# ---------------------------------------------------------------------------------------------
# Hits -> prompt text (Document metadata: MemoryHit.to_metadata)
# ---------------------------------------------------------------------------------------------


def format_hit(hit: MemoryHit, *, max_chars: int | None = None) -> str:
    """One recalled memory as a prompt line: ``[A > B > C] text``.

    Examples:
        >>> from mnemis_integrations.core.retrieval.results import MemoryHit
        >>> h = MemoryHit("n1", "fragment", "refund is late", (), 1.0, 1.0, 0.0, (),
        ...               ("Work", "Refunds"), None, "active")
        >>> format_hit(h)
        '[Work > Refunds] refund is late'
        >>> format_hit(h, max_chars=6)
        '[Work > Refunds] refund…'
    """
    return memory_line(hit.path_str, hit.text, status=hit.status, max_chars=max_chars)


_HEADER = "Relevant memories (most relevant first; [topic path] then content):"


def format_hits(
    hits: Sequence[MemoryHit],
    *,
    header: str = _HEADER,
    empty: str = "",
    max_chars: int | None = None,
) -> str:
    """Recall as one block of text, one ``- [path] text`` line per hit, under ``header``.

    Returns ``empty`` when there are no hits.

    Examples:
        >>> format_hits([])
        ''
    """
    return memory_block([format_hit(h, max_chars=max_chars) for h in hits], header=header, empty=empty)


def format_documents(
    docs: Sequence[Any], *, header: str = _HEADER, empty: str = "", max_chars: int | None = None
) -> str:
    """:func:`format_hits` for the Documents of a ``MnemisRetriever`` (any objects with
    ``page_content`` and ``metadata`` holding ``path_str`` and ``status``): the same block.

    Examples:
        >>> from types import SimpleNamespace as Doc
        >>> doc = Doc(
        ...     page_content="Rex is a beagle", metadata={"path_str": "Home > Pets", "status": "active"}
        ... )
        >>> print(format_documents([doc], header="Memory:"))
        Memory:
        - [Home > Pets] Rex is a beagle
    """
    lines = [
        memory_line(
            d.metadata.get("path_str", ""),
            d.page_content,
            status=d.metadata.get("status", "active"),
            max_chars=max_chars,
        )
        for d in docs
    ]
    return memory_block(lines, header=header, empty=empty)


# ---------------------------------------------------------------------------------------------
# LangGraph store: message ids, values
# ---------------------------------------------------------------------------------------------


def value_digest(value: Mapping[str, Any]) -> str:
    """A short, stable digest of a stored value (canonical JSON, sha256, 12 hex digits)."""
    # A first dump makes every key a string, so sort_keys can order a value with keys of mixed types.
    plain = json.loads(json.dumps(value, default=str))
    canonical = json.dumps(plain, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:12]


# Metadata values refuse NUL and lone surrogates; "%" is escaped too, so that unescaping is exact.
_NOT_IN_METADATA = re.compile(r"[\x00%\ud800-\udfff]")
_ESCAPED = re.compile(r"%([0-9a-f]{4})")
_DIGEST_MARK = ":k"
_STORE_KEY = "store_key"


def store_message_id(key: str, value: Mapping[str, Any], text: str, *, max_chars: int = 256) -> str:
    """The Mnemis message id of one version of a store item: ``"<key>#<value digest>:<text digest>"``.

    Putting the same value again gives the same id (stored once); a new value gives a new id,
    so an update becomes a new message instead of a conflicting one. The text digest keeps
    apart two puts of one value that ingest different fields (``index=[...]``).

    A key the id cannot hold as it is (a control character, a lone surrogate, or longer than
    ``max_chars`` less the 20 characters of digests) gives ``"<key digest>#<value digest>:<text
    digest>:k"`` instead, and its message carries the key in :func:`store_message_metadata`.

    Examples:
        >>> store_message_id("k1", {"text": "hi"}, "hi") == store_message_id("k1", {"text": "hi"}, "hi")
        True
        >>> store_message_id("k1", {"text": "hi"}, "hi") == store_message_id("k1", {"text": "bye"}, "bye")
        False
        >>> store_message_id("line\\nbreak", {"text": "hi"}, "hi").endswith(":k")
        True
    """
    text_digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:6]
    digests = f"{value_digest(value)}:{text_digest}"
    if len(key) + 1 + len(digests) <= max_chars and id_characters_problem(key) is None:
        return f"{key}#{digests}"
    return f"{_key_digest(key)}#{digests}{_DIGEST_MARK}"


def store_message_metadata(key: str, message_id: str) -> dict[str, str]:
    """The metadata of a store message: the key, escaped, when its id names the key by digest only.

    Examples:
        >>> store_message_metadata("k1", store_message_id("k1", {"t": 1}, "t: 1"))
        {}
        >>> store_message_metadata("50%\\n", store_message_id("50%\\n", {"t": 1}, "t: 1"))
        {'store_key': '50%0025\\n'}
    """
    if not message_id.endswith(_DIGEST_MARK):
        return {}
    return {_STORE_KEY: _NOT_IN_METADATA.sub(lambda m: f"%{ord(m.group()):04x}", key)}


def _key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


_ID_SUFFIX_RE = re.compile(r"^([0-9a-f]{12}):[0-9a-f]{6}(:k)?$")


def parse_store_message_id(
    message_id: str, metadata: Mapping[str, Any] | None = None
) -> tuple[str, str] | None:
    """Split a store message id into ``(key, value digest)``; ``None`` for ids the store did not make.

    An id that names its key by digest needs the message's ``metadata`` to give the key back.

    Examples:
        >>> parse_store_message_id("a#b#0123456789ab:abcdef")
        ('a#b', '0123456789ab')
        >>> parse_store_message_id("chat-17") is None
        True
    """
    stem, sep, suffix = message_id.rpartition("#")
    match = _ID_SUFFIX_RE.match(suffix) if sep else None
    if match is None:
        return None
    if not match.group(2):
        return stem, match.group(1)
    escaped = (metadata or {}).get(_STORE_KEY)
    if not isinstance(escaped, str):
        return None
    key = _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), escaped)
    return (key, match.group(1)) if _key_digest(key) == stem else None


def value_to_text(value: Mapping[str, Any], fields: Sequence[str] | None = None) -> str:
    """The text Mnemis ingests for a stored value.

    With ``fields``, the text of those top-level fields, in order, one per line. Without, every
    top-level field: a string as it is, a list of strings joined by ``", "``, anything else as
    ``"key: <compact JSON>"``. Key names of text fields are left out, so that items sharing a
    schema (``{"text": ..., "kind": ...}``) do not all look alike to the embedder.

    Examples:
        >>> value_to_text({"text": "I like green tea", "kind": "preference"})
        'I like green tea\\npreference'
        >>> value_to_text({"food": "pizza", "n": 2, "tags": ["a", "b"]})
        'pizza\\nn: 2\\na, b'
        >>> value_to_text({"a": "x", "b": "y"}, fields=["b"])
        'y'
    """
    keys = list(value) if fields is None else [f for f in fields if f in value]
    lines = []
    for key in keys:
        v = value[key]
        if v is None or v == "" or v == []:
            continue
        if isinstance(v, str):
            lines.append(v)
        elif isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
            lines.append(", ".join(v))
        else:
            lines.append(f"{key}: {_scalar_text(v)}")
    return "\n".join(lines)


def _scalar_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False, default=str, separators=(",", ":"))


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether a stored value passes a LangGraph ``search(filter=...)``.

    The same rules as LangGraph's stores: every key must match; a plain value means equality,
    a nested dict matches nested fields, and ``{"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": x}``
    compares.

    Examples:
        >>> matches_filter({"kind": "pref", "n": 3}, {"kind": "pref", "n": {"$gte": 2}})
        True
        >>> matches_filter({"kind": "pref"}, {"kind": "fact"})
        False
    """
    if not filter:
        return True
    return all(_compare(value.get(k), v) for k, v in filter.items())


_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _compare(item: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(item, op, arg) for op, arg in wanted.items())
        if not isinstance(item, Mapping):
            return False
        return all(_compare(item.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(item, (list, tuple))
            and len(item) == len(wanted)
            and all(_compare(i, w) for i, w in zip(item, wanted, strict=True))
        )
    return item == wanted


def _apply(item: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return item == arg
    if op == "$ne":
        return item != arg
    if op not in _OPERATORS:
        raise ValueError(f"unsupported filter operator {op!r}; use one of {', '.join(_OPERATORS)}")
    if item is None:
        return False
    a, b = float(item), float(arg)
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def keys_in_recall_order(
    hits: Iterable[MemoryHit],
) -> list[tuple[str, str, str, MemoryHit]]:
    """``(key, digest, message id, best hit)`` for every store item a recall touches, best first, no repeats.

    A hit covers the messages in its ``source_ids``; each store message id names a key and
    the version (digest) of its value. A key first seen in a better hit keeps that hit.
    Ids the store did not make are skipped.
    """
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str, str, MemoryHit]] = []
    for hit in hits:
        for mid in hit.source_ids:
            parsed = parse_store_message_id(mid, hit.message_metadata.get(mid))
            if parsed is None or parsed in seen:
                continue
            seen.add(parsed)
            out.append((parsed[0], parsed[1], mid, hit))
    return out


def stale_message_ids(
    stored: Iterable[tuple[str, Mapping[str, Any]]], latest: Mapping[str, str | None]
) -> list[str]:
    """Store message ids of the keys in ``latest`` other than each key's latest message id.

    ``stored`` holds ``(message id, metadata)`` of every message of the namespace. ``latest``
    maps a written key to the id of its new message, or ``None`` when it has none (deleted, or
    put without ingesting): every earlier version of those keys is stale.

    Examples:
        >>> old = store_message_id("tea", {"t": "green"}, "green")
        >>> new = store_message_id("tea", {"t": "oolong"}, "oolong")
        >>> other = store_message_id("rex", {"t": "beagle"}, "beagle")
        >>> stored = [(old, {}), (new, {}), (other, {}), ("chat-1", {})]
        >>> stale_message_ids(stored, {"tea": new}) == [old]
        True
        >>> stale_message_ids(stored, {"rex": None}) == [other]
        True
    """
    out = []
    for mid, metadata in stored:
        # Cheap first: a store scans every id of a namespace per write.
        if mid.rpartition("#")[0] not in latest and not mid.endswith(_DIGEST_MARK):
            continue
        parsed = parse_store_message_id(mid, metadata)
        if parsed is not None and parsed[0] in latest and latest[parsed[0]] != mid:
            out.append(mid)
    return out


# ---------------------------------------------------------------------------------------------
# Chat messages
# ---------------------------------------------------------------------------------------------

_ROLE_TO_SPEAKER = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
# A streamed message is a chunk (``RunnableWithMessageHistory`` hands a streamed reply to the history
# as one ``AIMessageChunk``): its type names the chunk class, its speaker is the role's.
_ROLE_TO_SPEAKER |= {
    "HumanMessageChunk": "user",
    "AIMessageChunk": "assistant",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
}
_SPEAKER_TO_ROLE = {"user": "human", "human": "human", "assistant": "ai", "ai": "ai", "system": "system"}


def speaker_for_role(role: str) -> str:
    """Mnemis speaker name for a LangChain message type (``"human"`` -> ``"user"``).

    Examples:
        >>> speaker_for_role("human"), speaker_for_role("ai"), speaker_for_role("critic")
        ('user', 'assistant', 'critic')
        >>> speaker_for_role("AIMessageChunk")
        'assistant'
    """
    return _ROLE_TO_SPEAKER.get(role, role)


def role_for_speaker(speaker: str) -> str:
    """LangChain message type for a Mnemis speaker; unknown speakers read as ``"human"``."""
    return _SPEAKER_TO_ROLE.get(speaker.lower(), "human")


def message_record(
    *, message_id: str, role: str, text: str, timestamp: datetime | str | None = None
) -> dict[str, Any]:
    """The dict :meth:`MnemisMemory.add_messages` takes, for one chat message."""
    return {"id": message_id, "speaker": speaker_for_role(role), "text": text, "timestamp": timestamp}


def last_turn(roles: Sequence[str]) -> int:
    """Index where the latest turn starts: the last ``"human"`` message (0 if there is none).

    Examples:
        >>> last_turn(["human", "ai", "human", "ai", "tool", "ai"])
        2
        >>> last_turn(["ai"])
        0
    """
    for i in range(len(roles) - 1, -1, -1):
        if roles[i] == "human":
            return i
    return 0
