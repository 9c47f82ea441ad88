"""Every retrieval and building knob, in one frozen config tree.

Change a value per call with ``recipes.DEFAULT.model_copy(update=...)`` or
:meth:`MemoryConfig.with_` (which also reaches into the nested sections); a
shared recipe is never mutated.

Similarity thresholds are not constants: e5-style embedders compress cosines
(unrelated ~0.80, related ~0.83) while others spread them over [-1, 1]. Any
threshold left as ``None`` here is taken from the embedder's
:class:`~mnemis_integrations.core.embedders.EmbedderProfile`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .model import EdgeKind

__all__ = [
    "BuildConfig",
    "ContextConfig",
    "FusionConfig",
    "LimitsConfig",
    "MemoryConfig",
    "RelationConfig",
    "SemanticConfig",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*")
    @classmethod
    def _not_nan(cls, value: Any) -> Any:
        # Every comparison with NaN is false: a NaN threshold would pass the bounds, then keep no
        # node, cut no segment and score every message NaN.
        if isinstance(value, float) and math.isnan(value):
            raise ValueError("must be a number, not NaN")
        return value


class BuildConfig(_Frozen):
    """Offline builder: segmentation, clustering, update detection."""

    max_segment_messages: int = Field(6, ge=1, description="A segment never grows past this many messages.")
    max_segment_tokens: int | None = Field(
        140,
        ge=1,
        description="A segment is also closed once its messages hold this many cl100k tokens, so fragments "
        "stay small enough for a reader's context budget whatever the message length; None: no cap.",
    )
    passage_tokens: int = Field(
        200,
        ge=0,
        description="A message over twice this many cl100k tokens (a pasted document, a tool's output) also "
        "gets one vector per window of at most this many (core/passages.py); search reads its match as its "
        "best window's. An embedder reads a bounded window (e5: 512 of its tokens). 0: one vector a message.",
    )
    min_segment_messages: int = Field(
        2, ge=1, description="Topic cuts are not made before this many messages."
    )
    time_gap_minutes: float = Field(
        45.0, gt=0, description="A silence this long between two messages always starts a new segment."
    )
    drift_threshold: float | None = Field(
        None,
        description="Cut when a message's similarity to the segment falls below this; "
        "None: embedder profile.",
    )
    subtopic_threshold: float | None = Field(
        None, description="A fragment joins the nearest subtopic at or above this similarity; None: profile."
    )
    concept_threshold: float | None = Field(
        None, description="A subtopic joins the nearest concept at or above this similarity; None: profile."
    )
    centred_placement: bool | None = Field(
        None,
        description="Compare placement similarities from the namespace's mean message vector; None: embedder "
        "profile (on for e5). Set both thresholds with it: centred and raw cosines differ in scale.",
    )
    place_again_until_words: int = Field(
        0,
        ge=0,
        description="A fragment that grows is placed again, with all its messages, while the messages it "
        "held before held fewer than this many distinct content words: 3 places a fragment opened by a "
        "greeting by what follows it; a large value places every fragment of a stream where one batch "
        "holding its messages places it (the same hierarchy, however the messages were batched). 0: a "
        "fragment stays where its first messages placed it (BENCHMARKS.md, seventeenth round).",
    )
    update_min_score: float = Field(
        -1.0,
        description="A new message supersedes the fragment of its best-scoring earlier message at or above "
        "this log-odds (builder/updates.py); higher: fewer, surer links. Chosen on the scenario suite's "
        "tune split.",
    )
    update_links: Literal["fragment", "message"] = Field(
        "fragment",
        description='How far the offline builder links what its update judge finds. "fragment": a '
        "replaced message's fragment is superseded once, by one newer fragment, and a message replaced "
        'already is not replaced again (its newest state is). "message": every replacing message is '
        "linked to what it replaces, into a fragment superseded already for another of its messages too, so "
        "a fragment holding two matters gets a link for each. Only for a judge that is right message by "
        "message: with the annotation as the judge (`benchmarks/search_sweep.py --links annotated`) it puts "
        "the current state first on .928 of the held-out questions against .912 (evolution .961 / .940), "
        "budgets up; with the offline judge, link precision falls .509 -> .463 on the tune split "
        "(BENCHMARKS.md, forty-fifth round). An LLMBuilder with the model's update step asks it message by "
        "message for this mode.",
    )
    max_subtopic_fragments: int = Field(12, ge=2, description="A full subtopic takes no more fragments.")
    max_concept_subtopics: int = Field(8, ge=2, description="A full concept takes no more subtopics.")
    summary_words: int = Field(18, ge=4, description="Extractive summaries are cut to this many words.")
    keywords_per_fragment: int = Field(4, ge=1)
    headline_terms: int = Field(
        0,
        ge=0,
        description="Topic terms in the dated line above a fragment's raw messages in search results (0: the "
        "date alone; the messages follow with every name). Each term costs tokens on every hit: 0 instead of "
        "2 added 2.2 points of 512-token recall on the scenario tune split, 0.8 on LoCoMo dev; the full "
        "summary line cost 11.",
    )
    references_per_fragment: int = Field(
        3,
        ge=0,
        description="Cross-topic `references` edges added per new fragment, to fragments sharing entities.",
    )


class SemanticConfig(_Frozen):
    """Path 1: score every level, keep what passes the threshold, expand along the hierarchy."""

    threshold: float | None = Field(
        None, description="Minimum similarity to keep a node; None: embedder profile."
    )
    lexical_weight: float = Field(
        0.35,
        ge=0,
        le=1,
        description="Share of BM25 (normalised) mixed into the fragment score; exact names and numbers "
        "that embeddings blur still count.",
    )
    message_weight: float = Field(
        0.75,
        ge=0,
        le=1,
        description="A fragment's similarity mixes its best single message (this share) with its centroid.",
    )
    combine: Literal["linear", "rrf"] = Field(
        "linear",
        description="How a fragment's dense and BM25 evidence combine: a weighted sum of normalised scores, "
        "or reciprocal-rank fusion (k=60) weighted by lexical_weight.",
    )
    speaker_boost: float = Field(
        0.0,
        ge=0,
        description="Messages said by a person the query names gain this many standard deviations of the "
        "query's message similarities (scale-free, so it holds for any embedder).",
    )
    topic_smoothing: float = Field(
        0.35,
        ge=0,
        le=1,
        description="A fragment's score mixes in this share of its subtopic's score: a fragment in a topic "
        "that matches the query as a whole rises (cluster-based smoothing).",
    )
    expand: bool = Field(True, description="Add each hit's parent and children.")
    expansion_decay: float = Field(
        0.5, ge=0, le=1, description="An expanded node scores this share of its origin."
    )
    max_expansions: int = Field(12, ge=0, description="At most this many nodes enter by expansion.")


class RelationConfig(_Frozen):
    """Path 2: entities in the query, then a bounded traversal scored 1/(1+d)."""

    max_hops: int = Field(
        2,
        ge=1,
        le=3,
        description="How far the traversal walks from a query's entities: at most 3 hops (SPEC: bounded to "
        "2-3), so far leftovers do not fill the results.",
    )
    edge_kinds: tuple[EdgeKind, ...] = Field(
        (EdgeKind.MENTIONS, EdgeKind.RELATION, EdgeKind.UPDATES, EdgeKind.REFERENCES, EdgeKind.BELONGS_TO),
        description="Edge kinds the traversal may walk; the rest are skipped.",
    )
    decay: Literal["inverse", "exponential", "none"] = "inverse"
    fuzzy_min_ratio: float = Field(
        0.88, ge=0, le=1, description="Fuzzy entity match needs this similarity ratio."
    )
    max_entity_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="An entity mentioned by more than this share of fragments is too common to steer "
        "the path.",
    )
    min_hits: int = Field(
        2, ge=0, description="Fewer relation hits than this triggers the semantic fallback."
    )
    scale: Literal["absolute", "normalised"] = Field(
        "absolute",
        description="'absolute': 1 means every query entity, at distance 1, each as specific as an entity "
        "can be (seed weights are idf / max idf), so a common entity lifts its fragments only a little; "
        "'normalised': the fusion normaliser rescales relation scores like semantic ones.",
    )
    decay_half_life_days: float | None = Field(
        None,
        gt=0,
        description="Forgetting curve (off when None): what a node gains on the relation path halves "
        "every this many days of age, counted back from the newest event in the namespace.",
    )
    match_weight: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Share of a relation hit's score that depends on how well the node matches the query "
        "(see match_by): hits at the same hop distance from the same entities are graded, not tied. "
        "Measured on the scenario suite's tune split (incremental): 0.5 with 'terms' added 0.7 points of "
        "R@256 and 0.9 of R@512 over 0 (ungraded); 0.3 and 0.8 scored within 0.2 points of 0.5.",
    )
    bridge_weight: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Entities of the first `bridge_hits` fragment hits lead one step further: a fragment "
        "mentioning one of them (an entity in at most `bridge_max_fragments` fragments) scores up to "
        "w x that hit's score + (1 - w) x its own, never above the hits that lent the entity. So a question "
        "about 'the sibling who helped with the van' also reaches the other messages about her. 0: off. "
        "Scenario suite (incremental), off -> 0.5: R@256 / 512 / 1,024 tune .752 / .905 / .970 -> .762 / "
        ".907 / .971, holdout .723 / .907 / .959 -> .724 / .925 / .966 (BENCHMARKS.md, eighth round).",
    )
    bridge_hits: int = Field(3, ge=0, description="How many first fragment hits lend their entities.")
    bridge_max_fragments: int = Field(
        4, ge=1, description="An entity in more fragments than this is too common to lead anywhere."
    )
    match_by: Literal["semantic", "terms"] = Field(
        "terms",
        description="'terms': the share of the query's content words the node's text holds, nodes holding as "
        "many ordered by their similarity to the query (a thousandth's weight: it only breaks their tie); "
        "'semantic': the node's similarity to the query, min-max scaled over the relation hits (measured 0.3 "
        "points of R@512 below 'terms' on the scenario tune split).",
    )


class FusionConfig(_Frozen):
    """Combining the two paths."""

    normaliser: Literal["minmax", "zscore", "rank"] = "minmax"
    alpha_rule: Literal["design", "relation_favoured", "fixed"] = Field(
        "design",
        description="'design': alpha = min(0.5 + 0.3*min(ratio,1), 0.8) weights the semantic path; "
        "'relation_favoured': the same alpha weights the relation path; 'fixed': fixed_alpha.",
    )
    fixed_alpha: float = Field(0.5, ge=0, le=1)
    semantic_floor: float = Field(
        0.9,
        ge=0,
        le=1,
        description="The relation path lifts, never buries: where the query names entities, a node's fused "
        "score is at least this share of its semantic score, so a node the semantic path matches best is "
        "not pushed under the nodes merely near a named entity. 0: off (plain alpha-weighted fusion). "
        "Scenario suite, incremental, 0 -> 0.9: R@256 / 512 tune +.006 / +.005, held-out (136) +.005 / "
        "+.002, MRR tune +.012, current state first tune +.005, held-out -.003 (within luck); LoCoMo dev "
        "R@256 +.005, R@2,048 -.0003 (BENCHMARKS.md, fifty-first round).",
    )
    recency_weight: float = Field(
        0.2,
        ge=0,
        le=1,
        description="In fallback, how much recency may lift a node; scaled down by each specific term of the "
        "query (see retrieval.search._vagueness).",
    )
    period_weight: float = Field(
        0.35,
        ge=0,
        le=1,
        description="When the query names a period with its year ('in July 2022', 'on 8 May 2023', "
        "'2022年7月', 'between August 11 and August 15 2023'), how far a fragment said in it (or up to "
        "`period_slack_days` after it) is lifted: each score s becomes (1 - w) s + w for those, (1 - w) s "
        "for the others. 0: off. "
        "LoCoMo dev, R@256 / 512 / 1,024 / 2,048: .641 / .757 / .820 / .886 -> .655 / .776 / .838 / "
        ".898 (0.2), .663 / .780 / .839 / .899 (0.35, picked by R@512 on each leave-one-conversation-out "
        "fold), .662 / .779 / .839 / .899 (0.5); no question of the scenario suite names a year: unchanged.",
    )
    period_slack_days: int = Field(
        7,
        ge=0,
        description="A thing done in a period is often told a few days after it: the days after the named "
        "period that still count as in it.",
    )
    min_results: int | None = Field(
        None,
        ge=0,
        description="Top up to at least this many results when memory holds them, from the semantic "
        "backup (nodes below the similarity threshold, best first). None: k, so a search returns k hits "
        "and a token budget is filled: scenario R@2048 0.987 -> 0.999 (tune), 0.995 -> 1.000 (holdout), "
        "LoCoMo dev unchanged. Use score_threshold to drop weak hits.",
    )
    candidate_factor: int = Field(4, ge=1, description="Over-fetch this many times k before fusion.")
    collapse_overlap: bool = Field(
        True, description="Drop a hit whose messages are all shown by a better hit."
    )
    diversity: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Maximal-marginal-relevance weight: a candidate loses this share of its (centred) cosine "
        "to the closest hit already chosen, so evidence spread over topics is not crowded out by one topic.",
    )
    attach_successors: bool = True
    successor_lead_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="A superseded hit's successor goes before it when the update is about what the "
        "query matched: the message it replaced is the hit's best match to the query, or the successor "
        "itself scores at least this share of the hit's score. Otherwise the link concerns another matter "
        "the fragment also holds, and the successor keeps its own rank (after the ranked hits when it is "
        "not one): LoCoMo dev R@256 / 512 .638 / .749 -> .642 / .753, scenario R@512 +0.4 (tune) / +0.3 "
        "(holdout), current state first unchanged. 0: every successor leads.",
    )
    successor_lead_judge: float | None = Field(
        -0.5,
        description="A successor that leads by its score alone, scoring under `successor_lead_judge_below` x "
        "the superseded hit's, leads only when the offline update judge scores its link's own message pair "
        "at least this high (log-odds; a link naming no messages, an LLM's, is trusted). None: off. "
        "Thirtieth round: in that band, 1 of the 10 tune links the judge scores under -0.45 is right, 30 of "
        "the 43 above; off -> -0.5: scenario suite (incremental) R@256 / 512 / 1,024 / 2,048 .6976 / .8569 / "
        ".9423 / .9906 -> .6985 / .8576 / .9430 / .9911 (tune), .5649 / .7571 / .8832 / .9734 -> .5649 / "
        ".7575 / .8836 / .9734 (held-out), current state first unchanged, MRR .8062 -> .8074 / .7765 -> "
        ".7771; LoCoMo dev and a fresh pair unchanged. Judging every weak link instead (no band) cost R@256.",
    )
    successor_lead_judge_below: float = Field(
        0.7,
        ge=0,
        le=1,
        description="Above this share of the superseded hit's score a successor leads unjudged.",
    )
    newer_first: float = Field(
        0.3,
        ge=0,
        le=1,
        description="A fragment hit moves above an older fragment hit of its own subtopic when it states a "
        "change to it (a change cue, or other values), both hold one of the query's words, and its score is "
        "within this share of the older one's; not when the query asks only about the past. 0: off. Catches "
        "updates the builder did not link: current state first 0.783 -> 0.819 on the scenario tune split.",
    )
    newer_first_anywhere: bool = Field(
        True,
        description="When the query asks for the end state ('in the end', 'now', '最后'), newer-first also "
        "moves a newer hit of another subtopic that states a change or a decision ('confirmed', '签了'). "
        "With successors free to move: current state first 0.819 -> 0.831 (tune), 0.784 -> 0.824 (holdout).",
    )
    end_state_head: int = Field(
        4,
        ge=0,
        description="When the query asks for the end state ('in the end', 'now', 'currently', '最后'), also "
        "beside the past ('and what was it at first?'), the fragment hits among the first this many read "
        "newest first, each keeping its score (a budget, which follows scores, shows the same messages). 0 "
        "or 1: off. Scenario suite "
        "(incremental), off -> 3: current state first .821 -> .869 (tune), .824 -> .843 (holdout), budget "
        "recall unchanged, MRR .826 -> .799; 6: .881 / .863; 10: .893 / .863. A hit already placed as the "
        "newer word (a successor, a restatement) keeps its place there: MRR .797 -> .804 / .827 -> .835, "
        "current state first unchanged (fourteenth round). 3 -> 4 (twentieth round, chosen on the tune split "
        "among 4 / 6 / 10, checked once on the held-out part): current state first .879 -> .900 (tune), "
        ".750 -> .756 (held-out, twelve conversations), budget recall unchanged, MRR .798 -> .797 / .806 -> "
        ".794; LoCoMo dev recall unchanged, MRR .644 -> .643.",
    )
    end_state_holds_placed: Literal["always", "asked_decisions"] = Field(
        "asked_decisions",
        description="For an end-state question, which hits placed as the newer word (a successor whose link "
        "replaced what the query matched, a restatement lifted with a change) keep their place among the "
        "first `end_state_head` hits, passed only by a newer placed hit on their matter (`held_pass_held`): "
        "'always' every one; 'asked_decisions' only one that states a decision, where the question names "
        "a decision too ('Which plan did they confirm in the end?': the signed contract before the go-live "
        "note). The others read newest first with the rest: a link from an older state places the middle "
        "one, and the state in force, newer and unlinked, read after it. 'always' -> 'asked_decisions' "
        "(thirty-ninth round, each rule written before its run): tune (31 conversations) current state first "
        ".8739 -> .8769 (evolution .891 -> .897), MRR .8074 -> .7977, R@5 -.0005, budget recall -.0004 at "
        "256 tokens, else unchanged; held-out and the fresh tests: BENCHMARKS.md, thirty-ninth round.",
    )
    asker_prefix: bool = Field(
        True,
        description="A query that comes as a line of the chat, 'Name: ...' (or 'Name：'), where Name is a "
        "speaker of the namespace, is searched without the name: it says who asks, not what about "
        "(`retrieval.asker`). Scenario suite (sixtieth round, the only questions it moves): tune, six of "
        "one conversation's nine such questions, R@512 +.700 and R@1,024 +.692 summed over them, current "
        "state first the same; held-out, 50 questions in six conversations, R@256 / 512 / 1,024 / 2,048 "
        "+2.84 / +3.92 / +4.37 / +2.50 summed, current state first +3; LoCoMo dev: no question comes so.",
    )
    held_pass_held: bool = Field(
        True,
        description="For an end-state question, a placed hit (a successor whose link replaced what the "
        "query matched, a restatement lifted with a change) that keeps its place "
        "(`end_state_holds_placed`) is passed by a newer placed hit on the same matter (a specific entity in "
        "common, or judged to replace it at `present_state_judge`): both claim the state in force, the "
        "newer likelier. Scenario suite, tune: current state first .8623 -> .8785, MRR .8101 -> .8121; "
        "held-out (66): current state first unchanged, MRR .7854 -> .7831.",
    )
    amount_head: int = Field(
        10,
        ge=0,
        description="When the query asks for the end state and for an amount or a count ('how many are "
        "coming now?', '每桌最后谈到多少？'), after the passes above, the newest fragment hit among the "
        "first this many that states a number goes just before the first older one above it that states one "
        "(not one placed as the newer word); the others keep their places and every hit its score. At most "
        "`end_state_head` or `present_state_head`: off. Scenario suite, tune (thirty-eighth round): "
        "current state first .8989 -> .9101 (evolution .935 -> .957), budget recall unchanged, MRR "
        ".8210 -> .8147, R@5 .7609 -> .7599 (moving every such hit newest first instead: R@5 -.0185); "
        "held-out (84): current state first .7762 -> .7845 (8 up, 0 down), MRR +.0008, R@5 -.0018; LoCoMo "
        "dev: no question asks both.",
    )
    present_state_head: int = Field(
        6,
        ge=0,
        description="For a question that neither asks for the end state nor about the past ('How many guests "
        "are we expecting?'), a newer fragment among the first this many hits goes before the first older "
        "one naming a specific entity it names too (in at most `relation.bridge_max_fragments` fragments), "
        "when it scores at least (1 - `present_state_margin`) x that one; each keeps its score. 0 or 1: off. "
        "Scenario suite (incremental), off -> 6: current state first .893 -> .905 (tune), .843 -> .863 "
        "(holdout; evolution .875 -> .917), budget recall unchanged, MRR .798 -> .797 / .827 -> .827; LoCoMo "
        "dev MRR .649 -> .646 (BENCHMARKS.md, fourteenth round).",
    )
    present_state_margin: float = Field(
        0.2,
        ge=0,
        le=1,
        description="How far under an older hit a newer one naming the same entity may score and still go "
        "before it (`present_state_head`): 0.1 / 0.2 / 0.3 / 0.5 cost LoCoMo dev MRR 0.3 / 0.6 / 1.5 / 2.1 "
        "points for the same gain on the scenario suite's tune split (fourteenth round). 0.1 -> 0.2 "
        "(twentieth round, chosen on the tune split by a rule fixed before the run, checked once on the "
        "held-out part): current state first .900 -> .907 (tune), .756 -> .769 (held-out), budget recall "
        "unchanged, MRR .797 -> .799 / .794 -> .793; LoCoMo dev recall unchanged, MRR .643 -> .641.",
    )
    present_state_judge: float | None = Field(
        -3.0,
        description="Also for the newer hit of `present_state_head`: it goes before an older one it names no "
        "entity in common with when the offline update judge, asked at search time, scores one of its "
        "messages as replacing one of the older hit's at least this high (log-odds; the builder links at "
        "`build.update_min_score`, -1.0, so these are the pairs it judged too unsure to link, now read only "
        "where one question meets both). None: off. Scenario suite (incremental, twenty-sixth round, chosen "
        "on the tune split among -2.0 / -2.5 / -3.0): current state first .834 -> .845 (tune), .746 -> .755 "
        "(held-out), budget recall unchanged, MRR .814 -> .820 / .802 -> .803; LoCoMo dev recall unchanged, "
        "MRR .641 -> .640.",
    )
    present_state_restated: bool = Field(
        True,
        description="Also for the newer hit of `present_state_head`: it goes before an older one when both "
        "hold a word of the query and it states a change to that one (a change cue or other values: 'Farah "
        "says 6 stands, not 8' after 'yes to 8 stands'). Scenario suite, incremental, sixty-fifth round "
        "(tune, 101 conversations): alone, current state first .8402 -> .8447 (6 up, 1 down), R@256 -.0012, "
        "MRR -.0007; with the round's further end-state cues (RP): .8402 -> .8492 (tune), .8113 -> .8189 "
        "(held-out, 266), budget recall within .0012, MRR -.0018 / -.0020 (BENCHMARKS.md, sixty-fifth "
        "round).",
    )
    judged_successor_floor: float | None = Field(
        -1.5,
        description="A successor the builder did not link, found at search time: for a question that "
        "asks for the end state (`judged_successor_questions`), each active fragment among the first "
        "`judged_successor_head` hits is preceded, as by an `updates` link, by the fragment holding the "
        "later message the offline update judge scores highest as replacing the hit's best match to the "
        "query, when at least this high (log-odds; the builder links at `build.update_min_score`). Each "
        "hit keeps its score, so budget recall is unchanged. None: off. Twenty-eighth round, scenario "
        "suite incremental, at -1.0: for end-state questions, current state first .860 -> .865 (tune), "
        ".772 -> .774 (held-out), MRR .812 -> .812 / .798 -> .798, LoCoMo dev unchanged (MRR .640); such "
        "a search takes about 1.3x as long, others the same. For every question not about the past: the "
        "same gains, MRR .810 / .799, LoCoMo dev MRR .632, and every search 1.7-2.2x as long. Twenty-ninth "
        "round, -1.0 -> -2.0 (and a judged successor no longer makes a builder link's messages lead a "
        "hit's focus): current state first .865 -> .881 (tune), .769 -> .779 (held-out), MRR .812 -> .809 / "
        ".796 -> .791, budget recall the same but one held-out question's R@512, higher; -3.0 gave .891 on "
        "tune but MRR .801. Thirty-sixth round, -2.0 -> -1.5 with `judged_successor_chain` (which see).",
    )
    judged_successor_head: int = Field(
        6, ge=0, description="How many of the first hits `judged_successor_floor` looks behind."
    )
    judged_successor_chain: bool = Field(
        True,
        description="`judged_successor_floor` follows a value that changed more than once to its end: a "
        "later message judged to replace what the hit's best match itself replaces counts as its successor "
        "too, and the newest successor found is taken, not the highest scored (48, then 56, then 63: the "
        "judge reads 63 against 48, not 56). Thirty-sixth round, with the floor -2.0 -> -1.5, scenario suite "
        "(incremental), tune: current state first .8866 -> .8947, MRR .8121 -> .8130, R@5 .7613 -> .7659, "
        "budget recall unchanged; held-out (72): current state first the same (.7753, 5 up, 5 down), MRR "
        ".7822 -> .7842; LoCoMo dev and a fresh pair unchanged.",
    )
    judged_successor_nearest_floor: float | None = Field(
        -4.0,
        description="A lower `judged_successor_floor` for the first of the replaced message's later "
        "neighbours (`builder.updates.later_neighbours`: the nearest by vector, or by word overlap when no "
        "later message is among its vector neighbours), its likeliest successor; such a successor is placed "
        "only if it matches the query nearly as well as the hit (`judged_successor_nearest_share`). None: "
        "the same floor for every later message. Sixty-first round (NLS), scenario suite incremental, one "
        "build: tune (81) current state first .849 -> .852 (3 gained, none lost), MRR .790 -> .792, budget "
        "recall summed over the four budgets up; held-out (250) .792 -> .795 (11 gained, 2 lost), MRR "
        "unchanged. Without the share (-3.0 / -4.0 alone) tune gained 8 / 14 but lost MRR .005 / .010.",
    )
    judged_successor_nearest_share: float = Field(
        0.9,
        ge=0.0,
        description="A successor let in only by `judged_successor_nearest_floor` is placed only if its fused "
        "score is at least this share of the hit's it would go before: a weakly judged one that holds no "
        "answer otherwise goes first (sixty-first round: at .8, tune gained more but lost budget recall).",
    )
    judged_successor_questions: Literal["end_state", "not_past"] = Field(
        "end_state",
        description="Which questions `judged_successor_floor` serves: those that ask for the end state "
        "('now', 'in the end', '最后'), so that only they pay its cost; or every question not about the "
        "past.",
    )
    link_focus_hits: int = Field(
        10,
        ge=0,
        description="Among the first this many hits, a superseded hit and the successor placed before it "
        "show first the messages their link names (the statement replaced, the one replacing it) when that "
        "message is one of the hit's two best matches, so a budget that keeps one message of each shows the "
        "change itself. 0: off. Scenario R@256 / 512 / 1,024: tune .743 / .888 / .950 -> .745 / .892 / .952, "
        "holdout .697 / .892 / .952 -> .701 / .899 / .960; LoCoMo dev R@2,048 .876 -> .875.",
    )
    continuation_weight: float = Field(
        0.3,
        ge=0,
        le=1,
        description="A fragment hit whose best-matching message is among its last `continuation_tail` was "
        "cut off while the conversation went on (the reply, the rest of the answer): the next fragment in "
        "time scores up to this share of the hit's score plus the rest of its own, never above the hits "
        "that lend. 0: off. Measured in BENCHMARKS.md ('The conversation's next stretch').",
    )
    continuation_hits: int = Field(
        3, ge=0, description="How many first fragment hits lend to the fragment that follows them."
    )
    continuation_tail: int = Field(
        2,
        ge=1,
        description="A hit lends only when its best-matching message is among its last this many: a match "
        "early in a fragment has its own turns after it.",
    )
    parent_weight: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Concept and subtopic hits score this share of their fused score: they give context, "
        "fragments give facts. Their text holds no raw message, so under a small budget they only cost room: "
        "0.3 instead of 0.6 added 0.7 points of R@512 and 0.5 of R@1024 on the scenario tune split.",
    )


class ContextConfig(_Frozen):
    """How ``search(..., max_tokens=N)`` fits its hits into a reader's token budget.

    A fragment shows its headline and its messages; under a budget it shows only some of them, those
    that match the query best first (``MemoryHit.focus``), so that evidence spread over many places
    fits. ``strategy`` says how the budget is shared between places and depth
    (``retrieval/budget.py``): ``ranked`` gives each message a value falling with its hit's rank and
    its place in the hit, and takes the most valuable first; ``passes`` shows the first
    ``breadth_hits`` hits narrowed to ``breadth_messages``, widens them round after round, then adds
    further hits narrowed to ``later_messages``.
    """

    strategy: Literal["ranked", "passes"] = Field(
        "ranked",
        description="Measured against `passes` on the same hits (BENCHMARKS.md, 'Budget fitting by value'): "
        "scenario suite, incremental, R@256 / 512 / 1,024 tune +0.7 / +1.3 / +1.8 points, holdout +2.2 / "
        "+0.8 / -0.1; LoCoMo dev +1.7 / +1.4 / -0.2, 2,048 equal (leave-one-conversation-out over the "
        "settings tried: +2.7 / +1.2 / -0.2 / -0.1).",
    )
    # Tried (same sweep): c 1.5 / 2 / 4 / 5, decay 0.6 / 0.65 / 0.75 / 0.8, and c growing with the budget
    # (x sqrt(B / 512), x B / 512): each better in some cells and worse in others; c = 3, decay 0.7 has
    # the smallest worst loss over the tune split's and LoCoMo's overall and multi-hop cells (0.4
    # points, multi-hop at 1,024).
    rank_discount: float = Field(
        3.0,
        gt=0,
        description="`ranked`: a hit's value is c / (rank + c), rank from 0; a larger c spreads the budget "
        "over more hits.",
    )
    message_decay: float = Field(
        0.7,
        gt=0,
        le=1,
        description="`ranked`: each further message of a hit is worth this much of the one before it.",
    )
    placed_first_message: bool = Field(
        True,
        description="`ranked`: a hit's best message is valued by the better of its rank by score and its "
        "place in the list, so a hit a rule placed above better-scored hits (the state in force first) shows "
        "it under a small budget; its further messages keep the value of its rank by score. Scenario suite, "
        "incremental, off -> on: current state first on what a 256-token budget shows, held-out .750 -> "
        ".796, tune .804 -> .849; budget recall within luck (BENCHMARKS.md, forty-eighth round).",
    )
    # Tried on the scenario suite (`passes`): 1 message a hit, 3 + 4 hits per 1k tokens of budget:
    # scenario tune split +3.9 points of R@256, +1.4 of R@1024, but LoCoMo dev R@1024 -1.5 (multi-hop
    # -1.9) and holdout R@256 -0.2: not kept.
    breadth_messages: int = Field(
        2, ge=1, description="`passes`: messages a fragment shows before any is widened."
    )
    breadth_hits: int = Field(
        5, ge=1, description="`passes`: hits shown narrowly before the widening rounds."
    )
    later_messages: int = Field(
        1, ge=1, description="`passes`: messages each hit after the widened ones shows."
    )
    excerpt_tokens: int = Field(
        200,
        ge=1,
        description="A message that alone adds more than this many tokens and does not fit the room left "
        "(a pasted document, a tool's output) is shown as an excerpt of at most this many: its passages "
        "sharing the most query terms. Searches with `max_tokens` make excerpts; `fit_to_budget` does "
        "when given the query. Measured (benchmarks/long_messages.py, chosen on three LoCoMo "
        "conversations stored as documents, checked on the other two): against 120, evidence turns shown "
        "whole +3.1 / +9.9 / +4.1 / +2.3 points at 256 / 512 / 1,024 / 2,048 tokens on the checked half, "
        "evidence sentences -2.5 at 256 and up above.",
    )
    speaker_margin: float = Field(
        0.3,
        ge=0,
        description="A fragment shows what a speaker the query names states first (their questions take no "
        "precedence), unless another speaker's best message matches the query better by more than this "
        "(messages' matches run from 0 to 1 over the query's scored messages): then that message leads. "
        "The question may name the wrong person, or the named one only asked and the other answered. 1: "
        "the named speaker's statements always first. Measured in BENCHMARKS.md ('A named speaker first, "
        "unless another matches far better').",
    )
    reply_hits: int = Field(
        1,
        ge=0,
        description="In the first this many fragment hits, a message that asks is followed directly by the "
        "fragment's next message when another speaker said it (its reply), wherever its match put it: a "
        "question matches a query but holds no answer, and a budget that keeps the one without the other "
        "shows what was asked, not what was said. Lower hits keep their messages in match order: there a "
        "long reply took the room a higher hit's next match needed. 0: off. Measured in BENCHMARKS.md "
        "(thirty-third round).",
    )
    defer_summaries: bool = Field(
        True,
        description="Concept / subtopic summaries (they hold no message of their own) take only the room "
        "the fragments leave (`passes`: among the later hits). Measured: scenario suite R@1024 / R@2048 "
        "+1.1 / +1.9 points (tune), +0.4 / +1.0 (holdout), 256 and 512 unchanged; LoCoMo dev unchanged.",
    )


class LimitsConfig(_Frozen):
    max_message_chars: int = Field(1_000_000, ge=1, description="Longer message texts are refused.")
    max_id_chars: int = Field(
        256, ge=1, description="Longer message ids are refused (they become keys and node ids)."
    )
    max_batch_messages: int = Field(100_000, ge=1, description="Larger add_messages batches are refused.")
    max_query_chars: int = Field(10_000, ge=1)
    max_k: int = Field(1_000, ge=1)
    max_metadata_keys: int = Field(64, ge=1, description="Messages with more metadata keys are refused.")
    max_metadata_chars: int = Field(4_096, ge=1, description="Longer metadata string values are refused.")


class MemoryConfig(_Frozen):
    """The whole configuration of a :class:`MnemisMemory`."""

    build: BuildConfig = BuildConfig()
    semantic: SemanticConfig = SemanticConfig()
    relation: RelationConfig = RelationConfig()
    fusion: FusionConfig = FusionConfig()
    context: ContextConfig = ContextConfig()
    limits: LimitsConfig = LimitsConfig()

    def with_(self, **sections: dict) -> MemoryConfig:
        """Copy with nested updates, e.g. ``cfg.with_(fusion={"alpha_rule": "fixed"})``.

        Validated as a new config is: a misspelt section or setting, or a value out of range,
        raises ``ValueError`` instead of being silently ignored.

        >>> MemoryConfig().with_(fusion={"alpha_rul": "fixed"})
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for FusionConfig
        alpha_rul
          Extra inputs are not permitted ...
        """
        unknown = sorted(set(sections) - set(type(self).model_fields))
        if unknown:
            raise ValueError(
                f"unknown config section(s) {unknown}; sections: {sorted(type(self).model_fields)}"
            )
        update = {}
        for name, values in sections.items():
            current = getattr(self, name)
            update[name] = (
                type(current).model_validate({**current.model_dump(), **values})
                if isinstance(values, dict)
                else values
            )
        return type(self).model_validate({**self.model_dump(), **update})
