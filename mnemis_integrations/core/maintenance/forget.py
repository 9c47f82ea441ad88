"""Forgetting for privacy: remove messages everywhere, unlike archiving.

Only the part of the graph that held a forgotten message is touched, so forgetting one message
costs about as much as adding one, whatever the size of the namespace:

- every fragment that held it (its fragment, the overview that compacted it, the originals an
  overview stands for) loses it; a fragment left empty goes, and so does a parent left empty;
  the others get keywords, summary, headline, label and ``mentions`` derived again from the
  messages that remain;
- an entity no remaining fragment mentions goes with its relations; a relation read from a
  forgotten sentence goes too, and so does an alias only forgotten messages said; an entity whose
  label only they said is named by an alias still said, under the id that name gives, and the
  summaries that quoted its label are derived again;
- a node whose id was made from a forgotten message id gets a fresh random id;
- parents that changed get their labels and summaries derived again; a fact that a removed
  fragment had superseded is current again when nothing else supersedes it.

Everything else — compaction overviews, review renames, hand edits — stays as it was. The
engine then writes the change and purges the store, so no byte of the text remains.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, replace

from ..builder.entities import extract_entities
from ..builder.relation_sources import (
    RELATIONS_READ,
    RelationsFed,
    fed_by,
    records_sources,
    sources_after,
    strip_records,
)
from ..builder.summarise import (
    TOPIC_WORDS,
    fragment_label,
    headline,
    keywords_for,
    summary_line,
    topic_words,
    topic_words_of,
)
from ..config import BuildConfig
from ..graph import MemoryGraph, edge_key
from ..indexes.entities import entity_keys
from ..model import Edge, EdgeKind, Message, Node, NodeKind, Status
from ..state import NamespaceState
from ..temporal import ARCHIVED_FROM, ARCHIVED_IN, OVERVIEW_OF, is_overview
from ..text import normalise_name, says_name
from .compaction import refresh_overview
from .health import SPLIT_FROM
from .supersede import REPLACED, REPLACED_BY

__all__ = ["ForgetReport", "forget_messages", "split_forgotten"]


@dataclass(frozen=True)
class ForgetReport:
    """What one ``forget`` call did."""

    namespace: str
    forgotten: int
    not_found: tuple[str, ...] = ()
    namespace_deleted: bool = False


def split_forgotten(stored: Collection[str], ids: Iterable[str]) -> tuple[list[str], list[str]]:
    """(ids to forget, ids asked for that were not stored), each once, in the order asked.

    >>> split_forgotten({"a", "b"}, ["b", "zz", "b"])
    (['b'], ['zz'])
    """
    wanted = list(dict.fromkeys(ids))
    return [i for i in wanted if i in stored], [i for i in wanted if i not in stored]


def forget_messages(
    st: NamespaceState, gone: list[str], cfg: BuildConfig, relabel: Callable[[NamespaceState, set[str]], None]
) -> None:
    """Remove the messages ``gone`` (all stored in ``st``) from ``st``: graph and every index.

    ``relabel(st, node_ids)`` derives the labels of changed subtopics and concepts again (the
    builder's rule). The graph's change journal then holds exactly what the store must write.
    """
    g = st.graph
    drop = set(gone)
    messages = [st.messages[m] for m in gone]
    texts = [m.text for m in messages]
    index = st.build_index()
    n_fragments = index.fragment_count(st)  # builds it first if it is not built yet: then it is followed
    # every fragment holding a forgotten message: its own, the overview that compacted it, its originals
    holders = {f for m in gone for f in index.holders(st, m)}
    before = index.before_forget(st, holders)
    reactivated: list[str] = []
    old_tokens = {f: st.fragment_words(f) for f in holders}
    entities = {e.dst for f in holders for e in g.out_edges(f, EdgeKind.MENTIONS)}
    fed = fed_by([g.get(f) for f in holders], drop)  # read before an emptied fragment goes
    parents: set[str] = set()
    for fid in holders:
        node = g.get(fid)
        node.source_ids = [m for m in node.source_ids if m not in drop]
        strip_records(g, node, drop)
        parents.update(p.id for p in g.ancestors(fid))
    for m in gone:
        st.messages.pop(m, None)
        st.msg_fragment.pop(m, None)
    st.msg_vectors.remove(gone)
    st.passage_vectors.remove(st.passages_of(gone))  # the store's row held them: they go with it
    st.lexical.remove(gone)
    for tokens in old_tokens.values():
        st.df.subtract(tokens)

    for fid in sorted(holders, key=lambda f: is_overview(g.get(f))):  # originals before their overviews
        node = g.get(fid)
        if not node.source_ids:
            parents.update(_remove_fragment(st, fid, reactivated))
        elif is_overview(node):
            refresh_overview(g, node)
            # it took its originals' mentions when made: an entity only forgotten messages named
            # would stay mentioned, its name with it
            _drop_unsaid_mentions(st, node.id, st.fragment_messages(node.id))
        else:
            _rederive_fragment(st, node, cfg, n_fragments)
    _drop_links_through(st, holders, drop, reactivated)
    _drop_relations_from(st, texts, drop, entities, fed)
    names = {e: entity_keys(g.get(e)) for e in entities if g.has(e)}  # read before they go
    removed_entities = _drop_unmentioned_entities(st, entities)
    _drop_forgotten_aliases(st, entities, messages)
    renamed_entities = _rename_entities_only_forgotten_named(st, entities, messages)
    for old, (new, label) in renamed_entities.items():
        names[new] = names.pop(old)
        parents.update(p.id for f in _summaries_quoting(st, old, new, label, cfg) for p in g.ancestors(f))
    for fid in holders:
        if g.has(fid):
            st.df.update(st.fragment_words(fid))
    for t in set().union(*old_tokens.values()):
        if st.df.get(t, 1) <= 0:
            del st.df[t]
    # a parent founded by a forgotten message's fragment may no longer hold it (a review moved it)
    named = {f"{prefix}:{m}" for m in drop for prefix in ("s", "c", "a:s")}
    # nor do the subtopics rebalance split off such a parent (s:<id>~1), nor their archives
    split = _split_off(g, {f"s:{m}" for m in drop})
    renamed = _rename_ids_made_from(
        st, {f for f in holders if g.has(f)} | {p for p in parents | named if g.has(p)}, drop, split
    )
    _follow_split_from(g, {renamed.get(n, n) for n in split}, renamed)
    alive = {renamed.get(p, p) for p in parents if g.has(renamed.get(p, p))}
    _drop_model_names(g, alive)
    index.forgotten(st, messages, before, renamed, removed_entities, reactivated)
    for old, (new, _) in renamed_entities.items():
        index.entity_renamed(old, new)
    relabel(st, alive)
    # the subtopic's summary quotes its archive's, which named the label derived before
    relabel(st, _refresh_archives(g, alive))
    moved = alive | set(renamed.values())  # a renamed node's vector went with its old id
    st.refresh_vectors([renamed.get(f, f) for f in holders if g.has(renamed.get(f, f))])
    st.refresh_vectors([p for p in moved if g.get(p).kind in (NodeKind.SUBTOPIC, NodeKind.ARCHIVE)])
    st.refresh_vectors([p for p in moved if g.get(p).kind == NodeKind.CONCEPT])
    _index_names_held_elsewhere(st, names)
    # The memos and paths key on the version, which the write moves, so no search would read them;
    # they are dropped all the same, as forget empties the text caches: until the next search they
    # held what was forgotten (a name only it said as an entity id, its speaker, its words).
    st.memo.clear()
    st.path_cache = None


def _rederive_fragment(st: NamespaceState, frag: Node, cfg: BuildConfig, n_fragments: int) -> None:
    g = st.graph
    msgs = st.fragment_messages(frag.id)
    _drop_unsaid_mentions(st, frag.id, msgs)
    frag.created_at = msgs[0].timestamp or frag.created_at
    frag.event_time = msgs[-1].timestamp or frag.event_time
    frag.keywords = keywords_for([m.text for m in msgs], st.df, n_fragments, cfg.keywords_per_fragment)
    if TOPIC_WORDS in frag.properties:
        frag.properties[TOPIC_WORDS] = topic_words(
            [m.text for m in msgs], st.df, n_fragments, cfg.keywords_per_fragment
        )
        g.touch(frag.id)
    labels = [g.get(e.dst).label for e in g.out_edges(frag.id, EdgeKind.MENTIONS)]
    frag.summary = summary_line(msgs, labels, frag.keywords)
    if "headline" in frag.properties:
        frag.properties["headline"] = headline(frag.summary, cfg.headline_terms)
        g.touch(frag.id)
    frag.label = fragment_label(topic_words_of(frag), frag.created_at)


def _drop_unsaid_mentions(st: NamespaceState, fid: str, msgs: list[Message]) -> None:
    """Remove the ``mentions`` of fragment ``fid`` that none of ``msgs`` (what it holds now) names."""
    mentioned = _mentioned_entities(st, msgs)
    for e in st.graph.out_edges(fid, EdgeKind.MENTIONS):
        if e.dst not in mentioned:
            st.graph.remove_edge(e.src, e.dst, EdgeKind.MENTIONS)


def _mentioned_entities(st: NamespaceState, msgs: list[Message]) -> set[str]:
    """Entity ids named by ``msgs`` (speakers and the names in their text)."""
    out = set()
    for m, ments in zip(
        msgs, extract_entities([m.text for m in msgs], known=st.entities.keys()), strict=True
    ):
        for name in [m.speaker.strip(), *(em.name for em in ments)]:
            eid = st.entities.get(name) if name else None
            if eid is not None:
                out.add(eid)
    return out


def _remove_fragment(st: NamespaceState, fid: str, reactivated: list[str]) -> set[str]:
    """Remove an emptied fragment; a fact it had superseded is current again if nothing else
    supersedes it; parents left empty go too. Returns the ids of the parents that remain."""
    g = st.graph
    node = g.get(fid)
    olds = [e.dst for e in g.out_edges(fid, EdgeKind.UPDATES)]
    overview = node.properties.get(ARCHIVED_IN)
    if overview and g.has(overview):
        ov = g.get(overview)
        ov.properties[OVERVIEW_OF] = [m for m in ov.properties.get(OVERVIEW_OF, []) if m != fid]
        g.touch(overview)
    ancestors = [p.id for p in g.ancestors(fid)]
    g.remove_node(fid)
    st.node_vectors.remove([fid])
    for old in olds:
        _current_again_if_unreplaced(g, old, reactivated)
    st.remove_emptied(ancestors)  # an emptied subtopic, archive or concept
    return {pid for pid in ancestors if g.has(pid)}


def _drop_model_names(g: MemoryGraph, parents: set[str]) -> None:
    """A name the model gave a parent was read from its messages, the forgotten ones perhaps: the
    parent is named again from what remains, as the offline builder names it (a reviewer's name,
    written by a person, stays)."""
    for pid in parents:
        node = g.get(pid)
        if node.properties.get("named_by") == "llm":
            del node.properties["named_by"]
            g.touch(pid)


def _current_again_if_unreplaced(g: MemoryGraph, old: str, reactivated: list[str]) -> None:
    if g.has(old) and not g.successors_of(old):
        o = g.get(old)
        o.valid_until = None
        if o.status == Status.SUPERSEDED:
            o.status = Status.ACTIVE
            reactivated.append(old)


def _drop_links_through(
    st: NamespaceState, holders: set[str], drop: set[str], reactivated: list[str]
) -> None:
    """Forgotten ids leave the ``updates`` links that name them; a link left with no replaced or
    no replacing message goes, and what it had superseded is current again if nothing else
    supersedes it."""
    g = st.graph
    for fid in holders:
        if not g.has(fid):
            continue
        for e in [*g.in_edges(fid, EdgeKind.UPDATES), *g.out_edges(fid, EdgeKind.UPDATES)]:
            named = (e.properties.get(REPLACED, []), e.properties.get(REPLACED_BY, []))
            if drop.isdisjoint(named[0]) and drop.isdisjoint(named[1]):
                continue  # a whole-fragment link names no message: it stays too
            replaced, by = ([m for m in ids if m not in drop] for ids in named)
            g.remove_edge(e.src, e.dst, EdgeKind.UPDATES)
            if replaced and by:
                g.add_edge(replace(e, properties={**e.properties, REPLACED: replaced, REPLACED_BY: by}))
            else:
                _current_again_if_unreplaced(g, e.dst, reactivated)


def _drop_relations_from(
    st: NamespaceState, texts: list[str], gone: set[str], mentioned: set[str], fed: RelationsFed
) -> None:
    """Remove entity relations read from the forgotten messages: those a relation counts (``fed``,
    from the records of the fragments that held them) or lists (``READ_FROM``, written before
    records) go from it, and it goes with the last; one that records none (written before
    relations did) goes when its label quotes a forgotten sentence."""
    g = st.graph
    named = extract_entities(texts, known=st.entities.keys())
    ids = {st.entities.get(em.name) for ments in named for em in ments} - {None}
    lowered = [t.lower() for t in texts]
    # A relation joins two entities a forgotten message named: looked up pair by pair, as a
    # speaker's entity may hold a relation for most messages of the namespace. Those a record
    # names are looked up too (a model may relate entities its fragment does not mention); one an
    # entity merge moved is found by the pair it joins now, when the forgotten messages name or
    # their fragments mention its ends.
    ends = sorted(eid for eid in ids | mentioned if g.has(eid))
    pairs = [(a, b) for a in ends for b in ends if a != b]
    found = {edge_key(e): e for a, b in pairs for e in g.edges_between(a, b, EdgeKind.RELATION)}
    for src, dst, label in fed.keys:
        e = g.edge(src, dst, EdgeKind.RELATION, label) if g.has(src) and g.has(dst) else None
        if e is not None:
            found.setdefault(edge_key(e), e)
    for e in found.values():
        if not records_sources(e.properties):
            if e.src in ids and e.dst in ids and any(e.label.lower() in t for t in lowered):
                g.remove_edge(e.src, e.dst, EdgeKind.RELATION, e.label)
            continue
        after = sources_after(e.properties, gone, fed.counts)
        if after is None:
            g.remove_edge(e.src, e.dst, EdgeKind.RELATION, e.label)
        elif after != e.properties:
            g.add_edge(replace(e, properties=after))


def _drop_unmentioned_entities(st: NamespaceState, candidates: set[str]) -> list[str]:
    g, key = st.graph, EdgeKind.MENTIONS.value
    removed = []
    for eid in candidates:
        # stop at the first mention: a speaker's entity is mentioned by most fragments
        if g.has(eid) and not any(key in keyed for keyed in g.g._pred[eid].values()):
            g.remove_node(eid)
            st.entities.remove_node(eid)
            removed.append(eid)
    return removed


def _index_names_held_elsewhere(st: NamespaceState, names: dict[str, tuple[str, ...]]) -> None:
    """A name an entity lost here (``names``: each one's keys before) may be another's too: a
    duplicate made by hand or through the LlamaIndex store. The index named it by the lost one and
    dropped it with it, and the other was no longer found by that name until the namespace was read
    again. Built again, it names each as a reopened store's does: the last holder in the graph's
    order, Chinese names ranked in that order."""
    g = st.graph
    lost = [k for e, keys in names.items() for k in keys if not g.has(e) or k not in entity_keys(g.get(e))]
    if lost and g.nodes_keyed(entity_keys, lost, each=True):
        st.index_entities()


def _drop_forgotten_aliases(st: NamespaceState, candidates: set[str], messages: list[Message]) -> None:
    """An alias a kept entity took from a merged duplicate (``rebalance``) goes when only forgotten
    messages said it: the entity stays for its other mentions, the spelling was the forgotten text's."""
    g = st.graph
    for eid in candidates:
        if not g.has(eid):
            continue
        node = g.get(eid)
        said = {a for a in node.aliases if any(_said_by(m, a) for m in messages)}
        if not said:
            continue
        gone = set(said)  # those no remaining message says: one walk, stopped once every one is heard
        for m in _mentioning_messages(st, eid):
            gone -= {a for a in gone if _said_by(m, a)}
            if not gone:
                break
        if gone:
            node.aliases = [a for a in node.aliases if a not in gone]
            g.touch(eid)
            names = {normalise_name(n) for n in [node.label, *node.aliases]}
            for a in gone:
                if normalise_name(a) not in names:
                    st.entities.discard(a, eid)


def _rename_entities_only_forgotten_named(
    st: NamespaceState, candidates: set[str], messages: list[Message]
) -> dict[str, tuple[str, str]]:
    """An entity kept for its other mentions whose label only forgotten messages said (``rebalance``
    merged a duplicate spelled another way, which the remaining messages say) is named by the first
    alias they still say, under the id that name gives (a fresh one if another node holds it): the
    label and the id made from it were the forgotten text's. Returns old id -> (new id, old label)."""
    g = st.graph
    renamed: dict[str, tuple[str, str]] = {}
    for eid in sorted(candidates):
        if not g.has(eid):
            continue
        node = g.get(eid)
        if not any(_said_by(m, node.label) for m in messages):
            continue
        if any(_said_by(m, node.label) for m in _mentioning_messages(st, eid)):
            continue
        # No remaining message says the label, so every one was read: list them once for the aliases.
        remaining = list(_mentioning_messages(st, eid))
        still = next((a for a in node.aliases if any(_said_by(m, a) for m in remaining)), None)
        if still is None:
            continue  # mentioned for a name no message says (a hand edit's): nothing to name it by
        new = f"e:{normalise_name(still)}"
        if g.has(new):
            new = f"e:{uuid.uuid4().hex[:12]}"
        renamed[eid] = (new, node.label)
        st.entities.remove_node(eid)
        _rename(st, eid, new)
        node.label, node.aliases = still, [a for a in node.aliases if a != still]
        g.touch(new)
        for name in (node.label, *node.aliases):
            st.entities.add(name, new)
    return renamed


def _mentioning_messages(st: NamespaceState, eid: str) -> Iterator[Message]:
    """The remaining messages of the fragments that mention entity ``eid``, read one fragment at a time:
    a name is usually said by one of the first, and a speaker's entity is mentioned by thousands of
    fragments in a large namespace (reading them all cost a forget at 100,000 messages 50 ms)."""
    for e in st.graph.iter_in_edges(eid, EdgeKind.MENTIONS):
        yield from st.fragment_messages(e.src)


def _said_by(m: Message, name: str) -> bool:
    return name.lower() == m.speaker.lower() or says_name(m.text, name)


def _summaries_quoting(st: NamespaceState, old: str, new: str, label: str, cfg: BuildConfig) -> list[str]:
    """Derive again the summaries that quote ``label``, the old name of the entity renamed ``old`` ->
    ``new``, of the fragments mentioning it (a model-written one too: the offline rule's line replaces
    it) and move their relation records to the new id (they named the old one, and ``forget`` finds
    a relation by the ids its records name); returns the fragments whose summary changed, whose
    parents' summaries quote it."""
    g = st.graph
    changed = []
    for e in g.in_edges(new, EdgeKind.MENTIONS):
        frag = g.get(e.src)
        if frag.kind != NodeKind.FRAGMENT:
            continue
        records = frag.properties.get(RELATIONS_READ)
        if records and any(old in r[:2] for rs in records.values() for r in rs):
            # a new dict: a copy of the state may share the old one
            frag.properties[RELATIONS_READ] = {
                mid: [[new if x == old else x for x in r[:2]] + list(r[2:]) for r in rs]
                for mid, rs in records.items()
            }
            g.touch(frag.id)
        if is_overview(frag) or not says_name(frag.summary, label):
            continue  # an overview's summary names no entity
        labels = [g.get(m.dst).label for m in g.out_edges(frag.id, EdgeKind.MENTIONS)]
        summary = summary_line(st.fragment_messages(frag.id), labels, frag.keywords)
        if summary != frag.summary:
            frag.summary = summary
            if "headline" in frag.properties:
                frag.properties["headline"] = headline(summary, cfg.headline_terms)
            g.touch(frag.id)
            changed.append(frag.id)
    return changed


def _made_from(node_id: str, gone: Collection[str]) -> str | None:
    """The prefix of ``node_id`` if it was made from one of the message ids ``gone`` (``f:<id>``,
    ``s:<id>``, ``c:<id>``, ``o:f:<id>``, ``a:s:<id>``), else None. A message id may hold ``:``
    itself (a LangGraph store's does), so every cut is tried.

    >>> [_made_from(n, {"k#1:2"}) for n in ("o:f:k#1:2", "s:k#1:2", "f:2", "f:k#1:2x", "s:k#1:2~1")]
    ['o:f', 's', None, None, None]
    """
    for i, ch in enumerate(node_id):
        if ch == ":" and node_id[i + 1 :] in gone:
            return node_id[:i]
    return None


def _split_off(g: MemoryGraph, roots: set[str]) -> dict[str, str]:
    """The subtopics ``rebalance`` split off one of ``roots`` (by ``split_from``, splits of splits
    too), and their archives, each with its kind's prefix. Their ids extend their root's
    (``s:<id>~1``), but a message's own id may too (``m~1``): only the recorded split says which.
    Found through the graph's index of ``split_from`` (kept as the graph changes), so a forget
    reads the subtopics split off its own, not every subtopic of the namespace."""
    reached, found = set(roots), {}
    frontier = list(roots)
    while frontier:
        more = [n.id for n in g.nodes_keyed(_split_off_from, frontier) if n.id not in reached]
        reached.update(more)
        found.update(dict.fromkeys(more, "s"))
        frontier = more
    for sub in list(found):
        if g.has(f"a:{sub}"):
            found[f"a:{sub}"] = "a:s"
    return found


def _split_off_from(node: Node) -> str | None:
    """The subtopic ``node`` was split off, if it is a subtopic ``rebalance`` made (a value that is
    no id, a list a hand edit left say, splits off nothing, and a list could key no index)."""
    was = node.properties.get(SPLIT_FROM) if node.kind == NodeKind.SUBTOPIC else None
    return was if isinstance(was, str) else None


def _follow_split_from(g: MemoryGraph, split: set[str], renamed: dict[str, str]) -> None:
    """A split subtopic's ``split_from`` names the subtopic it left: by its new id once renamed, or
    none once that one is gone."""
    for nid in split:
        node = g.get(nid) if g.has(nid) else None
        was = node.properties.get(SPLIT_FROM) if node is not None else None
        if was is None or (was not in renamed and g.has(was)):
            continue
        if g.has(renamed.get(was, "")):
            node.properties[SPLIT_FROM] = renamed[was]
        else:
            del node.properties[SPLIT_FROM]
        g.touch(nid)


def _rename_ids_made_from(
    st: NamespaceState, candidates: set[str], gone: set[str], split: dict[str, str]
) -> dict[str, str]:
    """Give a fresh id to every candidate whose id was made from a forgotten message id
    (:func:`_made_from`), and to every subtopic split off one (``split``: id -> its kind's prefix),
    keeping its kind's prefix; returns old -> new."""
    renamed: dict[str, str] = {}
    for nid in sorted(candidates | {s for s in split if st.graph.has(s)}):
        prefix = _made_from(nid, gone) or split.get(nid)
        if prefix is not None and st.graph.get(nid).kind != NodeKind.ENTITY:
            renamed[nid] = f"{prefix}:{uuid.uuid4().hex[:12]}"
    for old, new in renamed.items():
        _rename(st, old, new)
    return renamed


def _referrers(g: MemoryGraph, node: Node) -> list[Node]:
    """Nodes whose compaction properties name ``node``: its overview, its archived members, and
    the originals archived from it (a subtopic)."""
    ids = [*node.properties.get(OVERVIEW_OF, []), node.properties.get(ARCHIVED_IN)]
    ids += [o.id for a in g.children(node.id) if a.kind == NodeKind.ARCHIVE for o in g.children(a.id)]
    return [g.get(i) for i in ids if i and g.has(i)]


def _rename(st: NamespaceState, old: str, new: str) -> None:
    g = st.graph
    node = g.get(old)
    edges = [*g.out_edges(old), *g.in_edges(old)]
    referrers = _referrers(g, node)
    g.remove_node(old)
    node.id = new
    g.add_node(node)
    for e in edges:
        src, dst = (new if e.src == old else e.src), (new if e.dst == old else e.dst)
        g.add_edge(
            Edge(
                src,
                dst,
                e.kind,
                label=e.label,
                weight=e.weight,
                created_at=e.created_at,
                properties=dict(e.properties),
            )
        )
    for other in referrers:
        props = other.properties
        for key in (ARCHIVED_IN, ARCHIVED_FROM):
            if props.get(key) == old:
                props[key] = new
        if old in props.get(OVERVIEW_OF, []):
            props[OVERVIEW_OF] = [new if m == old else m for m in props[OVERVIEW_OF]]
        g.touch(other.id)
    for mid in node.source_ids:
        if st.msg_fragment.get(mid) == old:
            st.msg_fragment[mid] = new
    st.node_vectors.remove([old])


def _refresh_archives(g: MemoryGraph, parents: set[str]) -> set[str]:
    """An archive node's summary names its subtopic: follow the subtopic's new label. Returns the
    subtopics whose archive's summary changed."""
    changed = set()
    for pid in parents:
        if g.has(pid) and g.get(pid).kind == NodeKind.SUBTOPIC:
            for child in g.children(pid):
                summary = f"archived fragments of {g.get(pid).label}"
                if child.kind == NodeKind.ARCHIVE and child.summary != summary:
                    child.summary = summary
                    changed.add(pid)
    return changed
