"""How well a built memory graph matches a scenario's annotations: updates and topics.

Read after a scenario is fully ingested, from the graph of its namespace
(:class:`~mnemis_integrations.core.graph.MemoryGraph`):

* **update precision / recall**: an ``updates`` edge runs from the newer fragment to the one
  it supersedes (:func:`~mnemis_integrations.core.maintenance.supersede.supersede`). It is
  *correct* when some annotated supersession has its ``new`` message among the newer
  fragment's ``source_ids`` and one of its ``old`` messages among the older one's. Precision is
  correct edges over all fragment-to-fragment update edges; recall is the share of annotated
  supersessions covered by at least one correct edge. A *false demotion* is a fragment marked
  superseded that holds no annotated ``old`` message.
* **purity** against the annotated message topics: for each subtopic (and each concept), the
  share of its messages (through its fragments' ``source_ids``) that carry its majority
  topic, summed over groups and weighted by messages. One group per message would be perfectly
  pure, so the report also gives the number of groups and the *inverse* purity: for each
  topic, the share of its messages inside the single group holding most of them.

Scenarios without a ``supersessions`` key get no update figures, and those without any
message topic no purity; :func:`combine` sums per-scenario counts into micro-averages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.graph import MemoryGraph
from ..core.model import EdgeKind, Node, NodeKind, Status
from .scenario_data import Scenario, Supersession

__all__ = [
    "combine",
    "fragments_under",
    "hierarchy_counts",
    "inspector",
    "scenario_structure",
    "topic_purity",
    "update_accuracy",
]


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def fragments_under(graph: MemoryGraph, node_id: str) -> list[Node]:
    """Fragments at or under ``node_id`` in the hierarchy (archived ones left out)."""
    out, seen, todo = [], {node_id}, [node_id]
    while todo:
        node = graph.get(todo.pop())
        if node.kind == NodeKind.FRAGMENT and node.status != Status.ARCHIVED:
            out.append(node)
        for child in graph.children(node.id):
            if child.id not in seen:
                seen.add(child.id)
                todo.append(child.id)
    return out


def _correct(new_ids: set[str], old_ids: set[str], supersessions: Sequence[Supersession]) -> list[int]:
    """Indexes of the supersessions an update edge between these fragments stands for."""
    return [i for i, s in enumerate(supersessions) if s.new in new_ids and old_ids.intersection(s.old)]


def update_accuracy(graph: MemoryGraph, supersessions: Sequence[Supersession]) -> dict[str, Any]:
    """Update edges between fragments scored against annotated supersessions.

    Returns:
        ``edges`` (fragment-to-fragment update edges), ``correct``, ``precision``,
        ``annotated``, ``covered``, ``recall``, ``superseded_fragments``, ``false_demotions``,
        ``other_update_edges`` (update edges with a non-fragment end, not scored) and
        ``within_fragment``: annotated supersessions whose new message one fragment holds with an
        old one (archived fragments aside). No edge between fragments can stand for those, so
        recall cannot reach them; they are counted apart, not taken out of ``annotated``.
    """
    edges = correct = other = 0
    covered: set[int] = set()
    for e in graph.edges(EdgeKind.UPDATES):
        new, old = graph.get(e.src), graph.get(e.dst)
        if new.kind != NodeKind.FRAGMENT or old.kind != NodeKind.FRAGMENT:
            other += 1
            continue
        edges += 1
        hits = _correct(set(new.source_ids), set(old.source_ids), supersessions)
        correct += bool(hits)
        covered.update(hits)
    old_messages = {m for s in supersessions for m in s.old}
    fragments = graph.nodes(NodeKind.FRAGMENT)
    demoted = [n for n in fragments if n.status == Status.SUPERSEDED]
    false = sum(1 for n in demoted if not old_messages.intersection(n.source_ids))
    # An edge from a fragment to itself would stand for them: the test an edge's ends get.
    within: set[int] = set()
    for n in fragments:
        if n.status != Status.ARCHIVED:
            ids = set(n.source_ids)
            within.update(_correct(ids, ids, supersessions))
    return {
        "edges": edges,
        "correct": correct,
        "precision": _ratio(correct, edges),
        "annotated": len(supersessions),
        "covered": len(covered),
        "recall": _ratio(len(covered), len(supersessions)),
        "superseded_fragments": len(demoted),
        "false_demotions": false,
        "other_update_edges": other,
        "within_fragment": len(within),
    }


def _groups(graph: MemoryGraph, kind: NodeKind) -> list[tuple[str, set[str]]]:
    """(node id, message ids under it) for every node of ``kind`` (archived ones left out)."""
    return [
        (n.id, {m for f in fragments_under(graph, n.id) for m in f.source_ids})
        for n in graph.nodes(kind)
        if n.status != Status.ARCHIVED
    ]


def _purity_counts(groups: Sequence[tuple[str, set[str]]], topics: Mapping[str, str]) -> dict[str, Any]:
    majority = total = n_groups = 0
    by_topic: dict[str, Counter[str]] = {}
    for gid, ids in groups:
        tags = Counter(topics[m] for m in ids if m in topics)
        if not tags:
            continue
        n_groups += 1
        majority += tags.most_common(1)[0][1]
        total += sum(tags.values())
        for tag, n in tags.items():
            by_topic.setdefault(tag, Counter())[gid] += n
    placed = {m for _, ids in groups for m in ids if m in topics}
    topic_size = Counter(topics[m] for m in placed)
    inverse_num = sum(max(c.values()) for c in by_topic.values())
    inverse_den = sum(topic_size.values())
    return {
        "groups": n_groups,
        "majority": majority,
        "messages": total,
        "purity": _ratio(majority, total),
        "inverse_majority": inverse_num,
        "inverse_messages": inverse_den,
        "inverse_purity": _ratio(inverse_num, inverse_den),
    }


def topic_purity(graph: MemoryGraph, topics: Mapping[str, str]) -> dict[str, Any]:
    """Subtopic- and concept-level purity against message topics (see the module doc).

    Args:
        graph: a namespace's memory graph.
        topics: message id -> annotated topic (messages without one are left out).

    Returns:
        ``{"subtopic": {...}, "concept": {...}}``, each with ``groups`` (nodes holding an
        annotated message), ``majority``, ``messages``, ``purity`` and the ``inverse_*`` figures.
    """
    groups = [_groups(graph, kind) for kind in (NodeKind.SUBTOPIC, NodeKind.CONCEPT)]
    return {
        "subtopic": _purity_counts(groups[0], topics),
        "concept": _purity_counts(groups[1], topics),
    }


def hierarchy_counts(graph: MemoryGraph) -> dict[str, int]:
    """Concepts, subtopics and fragments of the graph (archived ones left out)."""
    return {
        name: sum(1 for n in graph.nodes(kind) if n.status != Status.ARCHIVED)
        for name, kind in (
            ("concepts", NodeKind.CONCEPT),
            ("subtopics", NodeKind.SUBTOPIC),
            ("fragments", NodeKind.FRAGMENT),
        )
    }


def scenario_structure(graph: MemoryGraph, scenario: Scenario) -> dict[str, Any]:
    """Every structure figure of one scenario's graph; ``updates``/``purity`` are ``None`` when
    the scenario lacks the annotation they need."""
    topics = scenario.topics
    return {
        "scenario": scenario.id,
        "split": scenario.split,
        "language": scenario.language,
        "source": scenario.source,
        **hierarchy_counts(graph),
        "messages": len(scenario.messages),
        "topic_annotated_messages": len(topics),
        "updates": None if scenario.supersessions is None else update_accuracy(graph, scenario.supersessions),
        "purity": topic_purity(graph, topics) if topics else None,
    }


def _sum(blocks: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, int]:
    return {k: sum(int(b[k]) for b in blocks) for k in keys}


def combine(per_scenario: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Micro-averages over scenarios: counts summed, then the ratios taken again.

    Returns:
        ``scenarios``, mean ``concepts``/``subtopics``/``fragments`` per scenario, and
        ``updates`` and ``purity`` (``None`` when no scenario had the annotation), each
        naming how many scenarios it covers.
    """
    n = len(per_scenario)
    out: dict[str, Any] = {"scenarios": n}
    for key in ("concepts", "subtopics", "fragments"):
        out[key] = sum(s[key] for s in per_scenario) / n if n else None
    upd = [s["updates"] for s in per_scenario if s.get("updates") is not None]
    out["updates"] = None
    if upd:
        keys = ("edges", "correct", "annotated", "covered", "superseded_fragments", "false_demotions")
        total = _sum(upd, keys + ("other_update_edges", "within_fragment"))
        total["precision"] = _ratio(total["correct"], total["edges"])
        total["recall"] = _ratio(total["covered"], total["annotated"])
        out["updates"] = {"scenarios": len(upd), **total}
    pur = [s["purity"] for s in per_scenario if s.get("purity") is not None]
    out["purity"] = None
    if pur:
        out["purity"] = {"scenarios": len(pur)}
        for level in ("subtopic", "concept"):
            keys = ("groups", "majority", "messages", "inverse_majority", "inverse_messages")
            total = _sum([p[level] for p in pur], keys)
            total["purity"] = _ratio(total["majority"], total["messages"])
            total["inverse_purity"] = _ratio(total["inverse_majority"], total["inverse_messages"])
            out["purity"][level] = total
    return out


def inspector(scenarios: Iterable[Scenario]) -> Any:
    """A runner ``inspect`` hook: the structure of each scenario's graph, for systems with a graph.

    It applies to systems that expose ``memory.graph(namespace)`` (the runner's Mnemis
    adapter) and to conversations named after a scenario (protocols ``incremental`` and
    ``full``; ``ask_at_time`` steps are partial memories and are skipped).
    """
    by_id = {s.id: s for s in scenarios}

    def inspect(name: str, system: Any, conv: Any) -> dict[str, Any] | None:
        scenario = by_id.get(conv.id)
        memory = getattr(system, "memory", None)
        if scenario is None or memory is None or not hasattr(memory, "graph"):
            return None
        return scenario_structure(memory.graph(conv.id), scenario)

    return inspect
