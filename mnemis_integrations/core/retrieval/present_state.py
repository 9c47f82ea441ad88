"""The current state first: the rules that reorder ranked hits so that a reader meets what holds now
before what it replaced (SPEC §4: superseded facts come with their successors).

:func:`current_state_first` is search's fifth stage (``search.dual_path_search``): a newer hit that
restates an older one above it with a change goes before it (``_newer_first``); a superseded hit is
preceded by the nodes that replace it when the update is about what the query matched, else they keep
their own rank; for a question that asks for the end state the first few fragment hits read newest
first (only those on its matter, when it just asks how a matter is going; and, when it asks how many or
how much, the newest hit stating a number further down before the older ones), and for any other question
not about the past a newer hit on the same matter as an older one goes before it
(``_state_in_force_first``, each keeping its score); successors the builder was too unsure to link,
judged at search time, go before the hit they replace (``_judged_successors``).
Scores stay non-increasing, a placed hit's run stepped down after it (``_spread_placed``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime

from ..builder.updates import candidate_scores, gate_passed, later_neighbours
from ..changes import has_change_cue, names_decision, states_change, states_decision, states_number
from ..maintenance.supersede import REPLACED, REPLACED_BY, replaces
from ..model import Edge, EdgeKind, NodeKind, Status, time_order
from ..state import NamespaceState
from ..temporal import visible_successors
from ..text import content_words
from .cache import memo
from .fusion import place_successors, steps_under
from .relation import node_words, specific_entities
from .stages import Fused, Query, Ranking

__all__ = ["asks_for_the_end", "current_state_first"]


# A question about an earlier state ("what was the first plan?") wants the older hit where it ranks.
_ASKS_ABOUT_THE_PAST = re.compile(
    r"\b(?:first|originally|original|initially|initial|before|previous|previously|earlier|used to|"
    r"old|start|started|beginning)\b|最初|原来|一开始|之前|以前|起初|本来",
    re.IGNORECASE,
)


# A question that asks for the end state names it: then the newest restatement wins wherever the
# hierarchy placed it (a signed contract filed under billing, the kick-off under the customer).
# "Actually" / "到底" ask for the value that held in the end, after a quote, an estimate or a misreading
# ("What did Dev's first order actually cost?": there "first" names the order, not an earlier state).
_NAMES_THE_END = re.compile(
    r"\b(?:in the end|end(?:s|ed|ing)? up|eventually|finally|final|now|currently|at the moment|these days|"
    r"latest|by now|actually|at this point|at the minute|as things stand|as it stands)\b|"
    r"最后|最终|现在|目前|如今|后来|到头来|到底|实际|眼下|这会儿",
    re.IGNORECASE,
)
# A change the asker knows of ("has that changed?", "it's moved a few times", "好像变过", "有啥变动吗") asks
# where the matter ended, as a named end does (sixty-fifth round, RP, below `_REMEMBERS_A_VALUE`).
_NAMES_A_CHANGE = re.compile(
    r"\b(?:has|have) (?:that|it|this) changed\b|\bmoved a few times\b|变过|变动|改过|变了吗|改了吗",
    re.IGNORECASE,
)
# What was decided is the decision in force ("what did facilities decide?", "队服颜色定的啥？"); 定 read alone
# only where it closes no other word (预定 booked, 一定 surely, 规定 a rule, 肯定 certainly).
_ASKS_WHAT_WAS_DECIDED = re.compile(
    r"\b(?:decides?|decided|decision|settled)\b|"
    r"决定|敲定|定下|确定了|(?<![预一固规约指稳肯否制设认鉴判限])定[了的]",
    re.IGNORECASE,
)
# But why a decision was made asks for its reason, said when it was made, not for what holds now ("Why did
# Gina decide to start her own clothing store?").
_ASKS_WHY = re.compile(r"\bwhy\b|为什么|为啥|为何|怎么会", re.IGNORECASE)


# How a matter is going, so far, its news, whether it still holds or is done yet ("how are registrations
# going?", "婚庆那边谈得怎么样了？", "训练最近什么情况？", "Are we still over on the money?",
# "安排妥了没？") asks where it stands now too, but names no end: the newest hit may be another matter
# ("Any news on the refund for order 42?" asked after a trip was planned). A week named ("this week",
# 这周) is not among them: it asks what that week holds ("这周六几点训练？"), maybe an older plan.
_PROGRESS_CUES = (
    r"\b(?:so far|any news|update on|still|yet)\b|"
    r"怎么样了|咋样了|如何了|进展|最近|情况|了没"
)
_ASKS_HOW_IT_GOES = re.compile(_PROGRESS_CUES + r"|\bhow(?:'s| is| are)\b.*\bgoing\b", re.IGNORECASE)
# Its words, taken out of the question to leave the words that name the matter ("how ... going" is
# taken word by word: removed whole, it would take the matter between them with it).
_HOW_IT_GOES_WORDS = re.compile(_PROGRESS_CUES + r"|\b(?:how(?:'s| is| are)|going)\b", re.IGNORECASE)


# An amount or a count asked for ("how many are coming now?", "每桌最后谈到多少？", "现在一共几个人？"):
# 几 only with a measure word, since 几点 and 几号 ask for a time or a date.
_ASKS_HOW_MUCH = re.compile(
    r"\bhow (?:many|much)\b|多少|几(?:个|位|桌|人|名|间|辆|家|支|条|套|件|张|队|次)", re.IGNORECASE
)


# A value the asker remembers, named to ask whether it still holds ("搬家是哪天？不是说5号吗",
# "I had Friday evening down", "I thought it was Huw on the Saturday", "之前是不是说开到八点？"):
# the question asks for the end state, though it may say "before" or 之前, and the value it
# names is likely the one replaced. No progress cue ("where are we with"): read as asking for
# the end, those cost the fifty-fifth round's PC its MRR. Sixty-fourth round (RM), scenario
# suite incremental: current state first .8383 -> .8439 (tune), .8032 -> .8113 (held-out),
# budget recall within .0014, MRR -.0017 / -.0022; LoCoMo dev unchanged. The sixty-fifth round's RP
# adds the forms the tune split's misses showed ("I thought Margaret said 20", "wasn't it Workington?",
# "who's only coming for one night again?", "几点来着", "是周六吧", "我咋记得"), the end named "at this
# point" or 眼下, a change the asker knows of (`_NAMES_A_CHANGE`) and the present-state pass's restated
# values (`fusion.present_state_restated`): BENCHMARKS.md, sixty-fifth round.
_REMEMBERS_A_VALUE = re.compile(
    r"\bI thought\b(?! (?:about|of)\b)|"
    r"\bI (?:had|have|'ve got|’ve got|got)\b[^.?!]{0,40}\bdown\b|"
    r"\bin my (?:head|diary|calendar)\b|\bon the calendar\b|"
    r"\bthat(?:'s|’s) what I (?:wrote|had|heard)\b|\bwas it always\b|\bdidn'?t we say\b|"
    r"\bI remember (?:a different|it being|us saying)\b|"
    r"\b(?:wasn'?t|wasn’t|isn'?t|isn’t) it\b|\bwas it not\b|\b(?:right|correct|yeah)\?|\bagain\?|"
    r"不是说|是不是说|不是[^，。！？,.!?]{1,12}[吗么嘛]|记得|我以为|还以为|来着|对吧|没错吧|是[^，。！？,.!?]{1,12}吧",
    re.IGNORECASE,
)


def _names_the_end(text: str) -> bool:
    """Does the question name the end state ("in the end", "now", "最后") or a change it knows of ("has
    that changed?"), or ask what was decided, but not why?"""
    return (
        bool(_NAMES_THE_END.search(text))
        or bool(_NAMES_A_CHANGE.search(text))
        or (bool(_ASKS_WHAT_WAS_DECIDED.search(text)) and not _ASKS_WHY.search(text))
    )


def asks_for_the_end(text: str) -> bool:
    """Does the question ask for the end state: name it, ask how the matter is going, or name a value the
    asker remembers?

    >>> asks_for_the_end("Which plan did they take in the end?"), asks_for_the_end("How is the move going?")
    (True, True)
    >>> asks_for_the_end("搬家是哪天？不是说5号吗"), asks_for_the_end("When is the call? I had Friday down")
    (True, True)
    >>> asks_for_the_end("Why did Gina decide to open a store?")
    False
    """
    return (
        _names_the_end(text) or bool(_ASKS_HOW_IT_GOES.search(text)) or bool(_REMEMBERS_A_VALUE.search(text))
    )


def _matter_words(text: str) -> frozenset[str] | None:
    """The words that name a question's matter where it only asks how the matter is going (its content
    words, the cue's own removed: "registrations" in "how are registrations going?"); ``None`` for any
    other question."""
    if _names_the_end(text) or not _ASKS_HOW_IT_GOES.search(text):
        return None
    return frozenset(content_words(_HOW_IT_GOES_WORDS.sub(" ", text)))


def _asks_only_about_the_past(text: str) -> bool:
    """A question about an earlier state that does not also ask where it ended ("what was the first
    plan?", not "what is the date now, and what was it before?": that one wants the state in force
    read first, the earlier one after it)."""
    return bool(_ASKS_ABOUT_THE_PAST.search(text)) and not asks_for_the_end(text)


def _newer_first(
    q: Query,
    ranked: list[str],
    scores: dict[str, float],
    superseded: set[str] | frozenset[str] = frozenset(),
) -> tuple[list[str], set[str]]:
    """Each fragment hit that restates an older fragment hit above it with a change goes just
    before it: the current state first, also where the builder linked no update. Returns the new
    order and the hits moved.

    "Restates with a change": newer, a query word in both, only within ``fusion.newer_first`` of
    the older one's score (a weak hit is not lifted over a strong one), and either in the same
    subtopic with a stated change to the older (:func:`~..changes.states_change`), or, when the
    query asks for the end state ("in the end", "now", "最后") and ``fusion.newer_first_anywhere``
    is on, in any subtopic with a change cue or a decision of its own ("confirmed", "签了"). Hits in
    ``superseded`` (those with a successor to show) are not moved: their link places them, after this.
    """
    margin = q.config.fusion.newer_first
    if margin <= 0 or _asks_only_about_the_past(q.text):
        return ranked, set()
    anywhere = q.config.fusion.newer_first_anywhere and asks_for_the_end(q.text)
    st, out = q.st, list(ranked)
    query_words = frozenset(content_words(q.text))
    # Each hit's subtopic, time and words are read once: the pairs to compare grow as k squared.
    placed: dict[str, tuple[str | None, datetime]] = {}  # fragment hit -> (its subtopic, its time)
    for nid in out:
        node = st.node(nid)
        if node.kind == NodeKind.FRAGMENT and node.event_time is not None:
            up = st.graph.parent(nid)
            placed[nid] = (up.id if up is not None else None, node.event_time)
    held: dict[str, frozenset[str]] = {}
    texts: dict[str, str] = {}

    def words(nid: str) -> frozenset[str]:
        if nid not in held:
            held[nid] = query_words & node_words(st, nid)
        return held[nid]

    def text(nid: str) -> str:
        if nid not in texts:
            texts[nid] = st.fragment_text(nid)
        return texts[nid]

    def restates(new: str, old: str) -> bool:
        where, when = placed[new]
        older = placed.get(old)
        if older is None or not (anywhere or older[0] == where):
            return False
        if not (older[1] < when and scores.get(new, 0.0) >= (1 - margin) * scores.get(old, 0.0)):
            return False
        if not words(new) & words(old):
            return False
        if older[0] == where:
            return states_change(text(new), text(old))
        # Across subtopics other values are often other things: only a stated change or decision counts.
        return has_change_cue(text(new)) or states_decision(text(new))

    return _pass_up(out, restates, movable=lambda nid: nid not in superseded and nid in placed)


def _state_in_force_first(
    q: Query, ranked: list[str], scores: Mapping[str, float], placed: set[str] | frozenset[str] = frozenset()
) -> tuple[list[str], set[str]]:
    """Among the first hits, the newer word on a matter before the older, unless the query asks about
    the past ("first", "之前"). Returns the new order and the hits that moved up (their ``via`` says
    ``newer``).

    When the query asks for the end state ("in the end", "now", "最后"), the fragment hits among the
    first ``fusion.end_state_head`` read newest first, save those ``placed`` already as the newer word
    (a successor whose link replaced what the query matched, a restatement with a change:
    ``current_state_first``) that keep their place (``_kept_in_head``), which no newer hit passes but a
    newer placed one on the same matter (``fusion.held_pass_held``: both claim the state in force): for
    such a question the newest of them is the likeliest to hold the state in force, linked by the
    builder or not; where the question only asks how a matter is going ("any news on the refund?"), a
    newer hit passes an older one only when both hold a word of the matter. Then a newer hit among the
    first ``fusion.present_state_head`` on the same matter as an older one above it (as told below) goes
    before it, placed hits held the same way; where it also asks for an amount or a count ("how many are
    coming now?"), the newest hit among the first ``fusion.amount_head`` that states a number goes before
    the first older one that states one (``_newest_amount_up``). Any other
    question ("How many guests are we expecting?") is read as asking for what holds now too, but only
    a newer hit on the same matter as an older one (naming the same specific thing, judged to
    replace it, or holding a word of the question it holds too with a stated change:
    ``_newer_before``, ``fusion.present_state_restated``) goes before it (among the first
    ``fusion.present_state_head``, within ``fusion.present_state_margin``). Only the
    order they are read in changes: each hit keeps its score, and a token budget, which follows the
    scores, shows the same messages of them as without the rule.
    """
    fcfg = q.config.fusion
    if _asks_only_about_the_past(q.text):
        return ranked, set()
    asks_end = asks_for_the_end(q.text)
    head = fcfg.end_state_head if asks_end else fcfg.present_state_head
    if head < 2:
        return ranked, set()
    first = ranked[:head]
    if asks_end:
        reordered = _newer_before(
            q,
            first,
            scores,
            1.0,
            same_entity=False,
            hold=placed,
            kept=_kept_in_head(q, placed),
            matter=_matter_words(q.text),
        )
        # The current state often ranks just below the head: a newer hit among the first
        # present_state_head on the same matter as an older one above it goes before it too.
        reach = max(head, fcfg.present_state_head)
        first = ranked[:reach]
        reordered = _newer_before(
            q, reordered + ranked[head:reach], scores, 1.0, same_entity=True, hold=placed
        )
        # A count that creeps up is restated in many messages, the newest often further down still.
        amount_head = fcfg.amount_head
        if amount_head > reach and _ASKS_HOW_MUCH.search(q.text):
            first = ranked[:amount_head]
            reordered = _newest_amount_up(q, reordered + ranked[reach:amount_head], placed)
    else:
        # Here a placed hit may be passed: holding them lost every question this rule gains (a
        # successor placed by a wrong link is often what the newer hit corrects). A superseded hit lifted
        # past its own successor goes back behind it (`_successors_kept_before`).
        restated = frozenset(content_words(q.text)) if fcfg.present_state_restated else None
        reordered = _newer_before(
            q, first, scores, fcfg.present_state_margin, same_entity=True, restated=restated
        )
    lifted = {i for n, i in enumerate(reordered) if n < first.index(i)}
    return reordered + ranked[len(first) :], lifted


def _newer_before(
    q: Query,
    first: list[str],
    scores: Mapping[str, float],
    margin: float,
    *,
    same_entity: bool,
    hold: set[str] | frozenset[str] = frozenset(),
    kept: set[str] | frozenset[str] | None = None,
    matter: frozenset[str] | None = None,
    restated: frozenset[str] | None = None,
) -> list[str]:
    """Each dated fragment of ``first`` goes before the first older fragment there that is not in
    ``hold``, or is but not in ``kept`` (default: all of ``hold``), or is, when both are held and on the
    same matter, with ``fusion.held_pass_held``,
    outscores it by no more than ``margin`` (its score at least (1 - ``margin``) x that
    one's) and, with ``same_entity``, is on the same matter: it names a specific entity it names too
    (one in at most ``relation.bridge_max_fragments`` fragments: "Highland", not a speaker), or the
    update judge scores one of its messages as replacing one of the older's at least
    ``fusion.present_state_judge`` (a pair the builder found too unsure to link: "Ok. £15 a plot from
    the April renewal" after "the water charge stays at £12 a plot"). Other hits keep their places;
    with ``margin`` 1 and nothing held, the fragments read newest first. With ``matter``, a newer
    fragment passes only an older one that holds a word of it that it holds too (the question only asks
    how its matter is going: ``_matter_words``). With ``restated`` (the query's words), the same matter
    is also a word of them held by both, where the newer states a change to the older (a change cue or
    other values: "Farah says 6 stands, not 8" after "Upton Stitchers: yes to 8 stands").

    A subtopic in common is no matter in common: a long conversation's subtopics gather a dozen
    stretches, and ordering those by time cost LoCoMo dev 6 points of MRR (BENCHMARKS.md, fourteenth
    round).
    """
    st = q.st
    dated = [i for i in first if st.node(i).kind == NodeKind.FRAGMENT and st.node(i).event_time is not None]
    cap = q.config.relation.bridge_max_fragments
    pass_held = q.config.fusion.held_pass_held and bool(hold)
    keeps = hold if kept is None else kept
    named = {i: frozenset(specific_entities(st, i, cap)) for i in dated} if (same_entity or pass_held) else {}
    judge_floor = q.config.fusion.present_state_judge

    def same_matter(new: str, old: str) -> bool:
        if named[new] & named[old]:
            return True
        if judge_floor is not None and _judged_to_replace(st, new, old, judge_floor):
            return True
        return bool(
            restated
            and restated & node_words(st, new) & node_words(st, old)
            and states_change(st.fragment_text(new), st.fragment_text(old))
        )

    def goes_before(new: str, old: str) -> bool:
        return (
            (matter is None or bool(matter & node_words(st, new) & node_words(st, old)))
            and (old not in keeps or (pass_held and new in hold and same_matter(new, old)))
            and st.node(old).event_time < st.node(new).event_time
            and scores.get(new, 0.0) >= (1 - margin) * scores.get(old, 0.0)
            and (not same_entity or same_matter(new, old))
        )

    out, _ = _pass_up(dated, goes_before)
    fragments, in_order = set(dated), iter(out)
    return [next(in_order) if i in fragments else i for i in first]


def _kept_in_head(q: Query, placed: set[str] | frozenset[str]) -> set[str] | frozenset[str]:
    """The ``placed`` hits that keep their place in the end-state head (``fusion.end_state_holds_placed``):
    with "asked_decisions", where the question names a decision ("Which plan did they confirm in the
    end?"), those that state one (the signed contract, not the go-live note after it); elsewhere none,
    since a link from an older state places the middle one, and the state in force, newer and unlinked,
    read after it ("提车...最后是哪天？": the dealer chosen with the first date, before the date that
    held)."""
    if q.config.fusion.end_state_holds_placed == "always":
        return placed
    if not names_decision(q.text):
        return frozenset()
    st = q.st
    return {i for i in placed if states_decision(st.fragment_text(i))}


def _newest_amount_up(q: Query, first: list[str], hold: set[str] | frozenset[str]) -> list[str]:
    """The newest dated fragment of ``first`` that states a number goes just before the first older one
    above it that states a number too and is not in ``hold``; every other hit keeps its place (moving
    each older count as well pushed earlier states, evidence of how the value changed, out of the
    first five)."""
    st = q.st
    amounts = [
        i
        for i in first
        if st.node(i).kind == NodeKind.FRAGMENT
        and st.node(i).event_time is not None
        and any(states_number(m.text) for m in st.fragment_messages(i))
    ]
    if not amounts:
        return first
    newest = max(amounts, key=lambda i: (st.node(i).event_time, -first.index(i)))
    when = st.node(newest).event_time
    above = next(
        (i for i in amounts[: amounts.index(newest)] if i not in hold and st.node(i).event_time < when), None
    )
    if above is None:
        return first
    out = [i for i in first if i != newest]
    out.insert(out.index(above), newest)
    return out


def _judged_to_replace(st: NamespaceState, new: str, old: str, floor: float) -> bool:
    """Does the offline update judge score a message of fragment ``new`` as replacing one of ``old``'s
    at least ``floor``?"""
    return _judged_any(st, (m.id for m in st.fragment_messages(new)), set(st.node(old).source_ids), floor)


def _judged_any(st: NamespaceState, news: Iterable[str], olds: set[str], floor: float) -> bool:
    """Does the offline update judge score one of the messages ``news`` as replacing one of ``olds`` at
    least ``floor``?"""
    return any(score >= floor for m in news for o, score in _judged_candidates(st, m).items() if o in olds)


def _judged_candidates(st: NamespaceState, mid: str) -> dict[str, float]:
    """The earlier messages the offline update judge scores message ``mid`` as replacing, with their
    log-odds (``candidate_scores``): judged once per write version, whichever search rule asks."""
    judged = memo(st, "judged_candidates", None, dict)
    if mid not in judged:
        judged[mid] = dict(candidate_scores(st, st.messages[mid]))
    return judged[mid]


def _pass_up(
    order: list[str], passes: Callable[[str, str], bool], movable: Callable[[str], bool] = lambda _: True
) -> tuple[list[str], set[str]]:
    """An insertion pass, top down: each ``movable`` hit goes just before the first hit above it that
    it ``passes`` (``passes(hit, above)``); the others keep their order. Returns the new order and the
    hits that moved."""
    out, moved = list(order), set()
    for j in range(1, len(out)):
        nid = out[j]
        if not movable(nid):
            continue
        above = next((i for i in range(j) if passes(nid, out[i])), None)
        if above is not None:
            out.insert(above, out.pop(j))
            moved.add(nid)
    return out, moved


def _replaced_best_match(
    q: Query, old: str, message_scores: Mapping[str, float], links: Sequence[Edge] | None = None
) -> bool:
    """Is the superseded hit's best match to the query a message its ``updates`` links (or ``links``, some
    of them) replaced? A link that names no message (the whole node replaced, as an LLM judges) counts as
    yes, and so does a hit none of whose messages was scored (a large graph's funnel scores only its
    candidates)."""
    scored = [m for m in q.st.node(old).source_ids if m in message_scores]
    if not scored:
        return True
    best = max(scored, key=lambda m: message_scores[m])
    links = q.st.graph.in_edges(old, EdgeKind.UPDATES) if links is None else links
    return any(replaces(e, best) for e in links)


def _branch(q: Query, new: str, links: Sequence[Edge]) -> list[Edge]:
    """Those of ``links`` (into one hit) whose chain reaches ``new`` (``new`` itself or one of its newest
    states)."""
    g = q.st.graph
    return [e for e in links if e.src == new or new in visible_successors(g, e.src, q.allowed)]


def current_state_first(
    q: Query,
    ranked: list[str],
    fused: Fused,
    supplemented: list[str],
    message_scores: Mapping[str, float] | None = None,
) -> Ranking:
    """``message_scores``: each message's match to the query, to tell whether an update is about what a
    superseded hit matched (``fusion.successor_lead_share``); ``None``: every successor leads."""
    successors: dict[str, list[str]] = {}
    if q.config.fusion.attach_successors:
        for nid in ranked:
            if q.status.get(nid) == Status.SUPERSEDED:
                succ = visible_successors(q.st.graph, nid, q.allowed)  # issue #7: newest state shown at as_of
                if succ:
                    successors[nid] = succ
    # A superseded hit stays behind its successor, where its link places it, after this.
    ranked, lifted = _newer_first(q, ranked, fused.scores, set(successors))
    share = q.config.fusion.successor_lead_share

    trust_floor, trusted = q.config.fusion.successor_lead_judge, q.config.fusion.successor_lead_judge_below

    about: dict[str, bool] = {}

    def about_the_match(old: str, links: Sequence[Edge] | None = None) -> bool:
        # A fragment holds several matters; its link may concern another than the one the query matched
        # ("keys pushed to 31 May" replacing a line of the fragment a question about the van hit). Asked
        # by both `leads` and the hold below, once per superseded hit; ``links``: its links, read already.
        if old not in about:
            about[old] = message_scores is None or _replaced_best_match(q, old, message_scores, links)
        return about[old]

    def leads(new: str, old: str) -> bool:
        # A hit linked once per message (`build.update_links` "message") holding two matters has a branch
        # for each: only the successor's own branch says whether it is the update of what the query matched.
        # By any branch, the newest state of the other matter led the hit and took a place in the budget.
        links = q.st.graph.in_edges(old, EdgeKind.UPDATES) if message_scores is not None else []
        if len(links) > 1:
            own = _branch(q, new, links)
            if own:
                return _replaced_best_match(q, old, message_scores, own)
        if about_the_match(old, links):  # without message scores it reads no links
            return True
        new_score, old_score = fused.scores.get(new, 0.0), fused.scores.get(old, 0.0)
        if new_score < share * old_score:
            return False
        return (
            trust_floor is None
            or new_score >= trusted * old_score
            or _link_judged_at_least(q.st, new, old, trust_floor)
        )

    before = set(ranked)
    ranked, moved = place_successors(ranked, successors, leads)
    attached = {nid for nid in ranked if nid not in before and nid not in moved}

    # A hit placed by rule before one that outscored it (a successor before the hit it replaces, a
    # newer statement before the older one) is shown with that hit: it takes the hit's score when its
    # own is lower. Otherwise one weak placed hit near the top capped every score below it (scores
    # stay non-increasing), and the top hits of many evolution questions all read the same.
    own = [float(fused.scores.get(nid, 0.0)) for nid in ranked]
    shown_score = list(own)
    for i in range(len(ranked) - 2, -1, -1):
        if (ranked[i] in moved or ranked[i] in lifted) and shown_score[i] < shown_score[i + 1]:
            shown_score[i] = shown_score[i + 1]
    for i in range(1, len(shown_score)):  # top-ups too are placed by rule: scores stay non-increasing
        shown_score[i] = min(shown_score[i], shown_score[i - 1])
    # The hits a placement made equal then step down after the first, so the scores rank them.
    shown_score = _spread_placed(shown_score, own)
    # After the scores: each hit keeps its own, so a budget still goes by relevance (retrieval.budget).
    shown = dict(zip(ranked, shown_score, strict=True))
    before_rule = {nid: i for i, nid in enumerate(ranked)}
    # Only a successor whose link replaced what the query matched holds its place against a newer hit: one
    # that leads by its score alone may be linked for another matter of its fragment (a venue changed in a
    # message beside a head count, for a question about the head count).
    held = {new for old, succ in successors.items() for new in succ if new in moved and about_the_match(old)}
    ranked, newest = _state_in_force_first(q, ranked, fused.scores, held | lifted)
    ranked = _successors_kept_before(ranked, successors, moved, leads)
    # `via` says "newer" only of a hit still read before where it ranked (one put back behind its own
    # successor may have ended where it began).
    newest = {nid for nid in newest if ranked.index(nid) < before_rule[nid]}
    # Successors judged at search time go before the hit they replace, each hit keeping its score (one
    # new to the hits enters with its own): a budget, which follows scores, shows the same messages.
    judged = _judged_successors(q, ranked, message_scores or {}, fused.scores)
    placed: set[str] = set()
    if judged:
        ranked, placed = place_successors(ranked, judged)
        for nid in placed:
            shown.setdefault(nid, float(fused.scores.get(nid, 0.0)))
    scores = [shown[i] for i in ranked]
    return Ranking(
        ranked, scores, supplemented, moved | placed, lifted | newest, attached, judged=placed - moved
    )


def _link_judged_at_least(st: NamespaceState, new: str, old: str, floor: float) -> bool:
    """Does the offline update judge score the ``updates`` link new -> old, on the messages it names,
    at least ``floor``? A link naming none (an LLM's, the whole node replaced) is trusted."""
    edge = st.graph.edge(new, old, EdgeKind.UPDATES)
    if edge is None or REPLACED not in edge.properties:
        return True
    replacing = (m for m in edge.properties.get(REPLACED_BY, ()) if m in st.messages)
    return _judged_any(st, replacing, set(edge.properties[REPLACED]), floor)


def _successors_kept_before(
    ranked: list[str], successors: Mapping[str, list[str]], moved: set[str], leads: Callable[[str, str], bool]
) -> list[str]:
    """``ranked`` with each successor shown before a superseded hit as its link's (``moved``, and it
    ``leads``) put back before it where a later rule lifted that hit above it. The state-in-force rules lift a
    superseded hit as the newer word (often rightly: its link may be wrong), and it may then pass the
    hit its successor was placed before, ending above the state that replaced it.

    >>> _successors_kept_before(["old", "x", "new"], {"old": ["new"]}, {"new"}, lambda s, o: True)
    ['new', 'old', 'x']
    """
    out = list(ranked)
    for old, succ in successors.items():
        for new in succ:
            if (
                new in moved
                and old in out
                and new in out
                and out.index(new) > out.index(old)
                and leads(new, old)
            ):
                out.remove(new)
                out.insert(out.index(old), new)
    return out


def _judged_successors(
    q: Query, ranked: list[str], message_scores: Mapping[str, float], scores: Mapping[str, float]
) -> dict[str, list[str]]:
    """Successors the builder was too unsure to link, read where a query meets them: for each active
    dated fragment among the first ``fusion.judged_successor_head`` hits, the active fragment holding
    the later message the offline update judge scores highest as replacing the hit's best match to the
    query, when at least ``fusion.judged_successor_floor``. Not for a question about the past, and with
    ``fusion.judged_successor_questions`` "end_state" only for one that asks for the end state. Returns
    hit -> [its successor], as ``place_successors`` takes them.

    With ``fusion.judged_successor_chain`` a value that changed more than once is followed to its end: a
    later message judged to replace a statement that the best match itself is judged to replace counts
    too (48, then 56, then 63: the judge reads 63 against 48, not against 56), and of all those found the
    newest is taken, the state in force, not the highest scored.

    The replaced message's nearest later message by vector needs only
    ``fusion.judged_successor_nearest_floor``, if its fragment's fused score is at least
    ``judged_successor_nearest_share`` of the hit's.

    Bounded whatever the namespace's size: the later messages looked at are the replaced message's
    nearest by vector and by word overlap (``builder.updates.later_neighbours``), each judged once per
    write version.
    """
    fcfg = q.config.fusion
    floor = fcfg.judged_successor_floor
    if floor is None or fcfg.judged_successor_head < 1 or _asks_only_about_the_past(q.text):
        return {}
    if fcfg.judged_successor_questions == "end_state" and not asks_for_the_end(q.text):
        return {}
    st, chain, share = q.st, fcfg.judged_successor_chain, fcfg.judged_successor_nearest_share
    out: dict[str, list[str]] = {}
    for nid in ranked[: fcfg.judged_successor_head]:
        node = st.node(nid)
        if node.kind != NodeKind.FRAGMENT or node.event_time is None or q.status.get(nid) != Status.ACTIVE:
            continue
        own = set(node.source_ids)
        scored = [m for m in node.source_ids if m in message_scores]
        olds = [max(scored, key=lambda m: (message_scores[m], m))] if scored else list(node.source_ids)
        best: tuple | None = None
        for o in olds:
            said = time_order(st.messages[o])
            replaced = [o]
            if chain:
                replaced += [p for p, s in _judged_candidates(st, o).items() if s >= floor]
            for k, s in _later_replacing(q, replaced, said, own, floor):
                # One let in by the nearest neighbour's lower floor must also match the query nearly as
                # well as the hit it would go before.
                if s < floor and scores.get(st.msg_fragment[k], 0.0) < share * scores.get(nid, 0.0):
                    continue
                key = (time_order(st.messages[k]), k) if chain else (s, k)
                if best is None or key > best:
                    best = key
        if best is None:
            continue
        succ = st.msg_fragment[best[1]]
        if q.status.get(succ) == Status.SUPERSEDED:
            newest = visible_successors(st.graph, succ, q.allowed)
            succ = newest[0] if newest else succ
        if succ != nid and q.status.get(succ) == Status.ACTIVE:
            out[nid] = [succ]
    return out


def _later_replacing(
    q: Query, replaced: Iterable[str], said: tuple, own: set[str], floor: float
) -> Iterator[tuple[str, float]]:
    """The messages said after ``said``, outside ``own``, visible to the query (by its ``as_of`` and its
    allowed nodes), that the offline update judge scores as replacing one of the messages ``replaced``
    at least ``floor``, with that score: looked for among each one's later neighbours."""
    st = q.st

    def visible_later(k: str) -> bool:
        other = st.messages.get(k)
        return (
            other is not None
            and k not in own
            and time_order(other) > said
            and (q.as_of is None or other.timestamp is None or other.timestamp <= q.as_of)
            and st.msg_fragment.get(k) in q.allowed
        )

    # The later message nearest the replaced one by vector is its likeliest successor: the judge's doubt
    # counts less there.
    nearest_floor = q.config.fusion.judged_successor_nearest_floor
    nearest_bar = floor if nearest_floor is None else min(nearest_floor, floor)
    for o in replaced:
        for i, k in enumerate(later_neighbours(st, o, visible_later)):
            if not gate_passed(st.messages[k].text, st.messages[o].text):
                continue
            score = _judged_candidates(st, k).get(o)
            if score is not None and score >= (nearest_bar if i == 0 else floor):
                yield k, score


def _spread_placed(shown: list[float], own: list[float]) -> list[float]:
    """Shown scores, non-increasing, with each run of equal ones that a placement made (a member shown
    at another score than its own) stepped down after its first (``steps_under``, above the next
    lower score): a placed hit and the hit it goes before read in their order, not as one score.
    Scores that are equal on their own stay equal.

    >>> [round(x, 3) for x in _spread_placed([0.8, 0.8, 0.8, 0.5], [0.1, 0.8, 0.8, 0.5])]
    [0.8, 0.79, 0.78, 0.5]
    >>> _spread_placed([0.8, 0.8, 0.5], [0.8, 0.8, 0.5])
    [0.8, 0.8, 0.5]
    """
    out, start = list(shown), 0
    while start < len(out):
        end = start
        while end + 1 < len(out) and out[end + 1] == out[start]:
            end += 1
        if end > start and any(own[i] != shown[i] for i in range(start, end + 1)):
            floor = out[end + 1] if end + 1 < len(out) else 0.0
            out[start + 1 : end + 1] = steps_under(out[start], floor, end - start)
        start = end + 1
    return out
