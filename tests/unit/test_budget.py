"""Fitting hits into a reader's token budget, rank order kept: messages by value (``ranked``) or
breadth first, then depth (``passes``)."""

from dataclasses import replace

import pytest

from mnemis_integrations import ContextConfig, InvalidQueryError, MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.recipes import DEFAULT
from mnemis_integrations.core.retrieval.budget import fit_to_budget
from mnemis_integrations.core.retrieval.results import MemoryHit
from mnemis_integrations.core.tokens import count_tokens

WORDS = len  # one token per character keeps the arithmetic of these tests visible


def hit(name: str, messages: dict[str, str], focus: str, kind: str = "fragment") -> MemoryHit:
    """A hit whose text is a 1-character headline plus one line per message, in id order."""
    ids = tuple(sorted(messages))
    return MemoryHit(
        node_id=name,
        kind=kind,
        text="h" + "".join(messages[i] for i in ids),
        source_ids=ids,
        score=1.0,
        semantic_score=1.0,
        relation_score=0.0,
        via=("semantic",),
        path=(name,),
        time=None,
        status="active",
        focus=tuple(focus) if kind == "fragment" else (),
    )


def rerender_from(table: dict[str, dict[str, str]]):
    """Renders a hit narrowed to ``ids``; a message in ``cut`` shows as its first ``cut[id]`` characters."""

    def rerender(h: MemoryHit, ids, cut=None) -> MemoryHit:
        cut = cut or {}
        shown = tuple(i for i in sorted(table[h.node_id]) if i in set(ids))
        text = "h" + "".join(
            table[h.node_id][i][: cut[i]] if i in cut else table[h.node_id][i] for i in shown
        )
        return replace(h, text=text, source_ids=shown, excerpted=tuple(i for i in shown if i in cut))

    return rerender


TABLE = {
    "A": {"a": "aaaa", "b": "bbbb", "c": "cccc"},  # best message: c, then a
    "B": {"d": "dddd", "e": "eeee", "f": "ffff"},  # best: e
    "C": {"g": "gggg", "h": "hhhh"},
}
HITS = [hit("A", TABLE["A"], "cab"), hit("B", TABLE["B"], "edf"), hit("C", TABLE["C"], "hg")]


def fit(budget, messages=1, hits=2):
    cfg = ContextConfig(strategy="passes", breadth_messages=messages, breadth_hits=hits)
    return fit_to_budget(HITS, budget, cfg, rerender_from(TABLE), WORDS)


def fit_ranked(budget, hits=HITS, **settings):
    cfg = ContextConfig(strategy="ranked", **settings)
    return [(h.node_id, h.source_ids) for h in fit_to_budget(hits, budget, cfg, rerender_from(TABLE), WORDS)]


def test_ranked_takes_messages_by_hit_rank_and_place_in_the_hit():
    # Values (c = 3, decay 0.7): A's c 1, B's e .75, A's a .7, C's h .6, B's d .525, A's b .49, ...
    assert fit_ranked(10) == [("A", ("c",)), ("B", ("e",))]  # A{c} 5 + B{e} 5
    # A's second message (.7) before C's best (.6), and C's best before B's second (.525)
    assert fit_ranked(14) == [("A", ("a", "c")), ("B", ("e",))]
    assert fit_ranked(19) == [("A", ("a", "c")), ("B", ("e",)), ("C", ("h",))]
    assert fit_ranked(23) == [("A", ("a", "c")), ("B", ("d", "e")), ("C", ("h",))]
    assert fit_ranked(35) == [(h.node_id, h.source_ids) for h in HITS]


def test_ranked_values_hits_by_score_and_keeps_the_order_they_are_read_in():
    # Search may read the first hits in another order than their scores (the end state first):
    # what each shows follows the scores, the order is kept.
    scored = [replace(h, score=s) for h, s in zip(HITS, (0.9, 0.8, 0.7), strict=True)]
    read = [scored[1], scored[0], scored[2]]
    assert fit_ranked(14, hits=read) == [("B", ("e",)), ("A", ("a", "c"))]
    assert dict(fit_ranked(19, hits=read)) == dict(fit_ranked(19, hits=scored))


def test_a_hit_placed_above_better_scored_hits_shows_its_best_message_first():
    # C, the third by score, is read first (a rule placed the state in force there). By score alone a
    # 6-character budget goes to A's best message; valued at its place, C's best message comes first.
    scored = [replace(h, score=s) for h, s in zip(HITS, (0.9, 0.8, 0.7), strict=True)]
    read = [scored[2], scored[0], scored[1]]
    assert fit_ranked(6, hits=read, placed_first_message=False) == [("A", ("c",))]
    assert fit_ranked(6, hits=read) == [("C", ("h",))]
    # its further messages keep its rank by score: the room left goes to A's best, then B's, not to C's second
    widened = fit_ranked(16, hits=read)
    assert widened == [("C", ("h",)), ("A", ("c",)), ("B", ("e",))]
    # a list in score order is fitted the same either way
    assert fit_ranked(19, hits=scored) == fit_ranked(19, hits=scored, placed_first_message=False)


def test_ranked_breaks_equal_values_by_score_rank_not_by_the_order_hits_are_read_in():
    scored = [replace(h, score=s) for h, s in zip(HITS, (0.9, 0.8, 0.7), strict=True)]
    read = [scored[1], scored[0], scored[2]]
    # c = 1, decay 0.5: A's second message and B's first are both worth 0.5; the better-scored hit's goes
    # first, wherever the hits are read (B read first would otherwise have its best message valued at its
    # place: placed_first_message, below)
    settings = {"rank_discount": 1.0, "message_decay": 0.5, "placed_first_message": False}
    assert dict(fit_ranked(10, hits=scored, **settings)) == {"A": ("a", "c")}
    assert dict(fit_ranked(10, hits=read, **settings)) == {"A": ("a", "c")}


def test_ranked_settings_trade_places_for_depth():
    # A steep rank discount keeps the budget on the best hit; a steep message decay spreads it.
    assert fit_ranked(18) == [("A", ("a", "c")), ("B", ("d", "e"))]
    assert fit_ranked(18, rank_discount=0.5) == [("A", ("a", "b", "c")), ("B", ("e",))]
    assert fit_ranked(18, message_decay=0.1) == [("A", ("c",)), ("B", ("e",)), ("C", ("h",))]


def test_ranked_passes_over_a_hit_whose_best_message_does_not_fit_and_fills_on_with_later_ones():
    table = {**TABLE, "L": {"x": "x" * 30, "y": "yy"}}
    too_long = hit("L", table["L"], "xy")
    out = fit_to_budget([too_long, *HITS], 12, ContextConfig(), rerender_from(table), WORDS)
    assert [(h.node_id, h.source_ids) for h in out] == [("A", ("c",)), ("B", ("e",))]


@pytest.mark.parametrize("strategy", ["ranked", "passes"])
def test_a_message_too_long_for_the_room_left_is_shown_as_an_excerpt_when_excerpts_are_on(strategy):
    table = {**TABLE, "L": {"x": "x" * 30, "y": "yy"}}
    too_long = hit("L", table["L"], "xy")
    cfg = ContextConfig(strategy=strategy, excerpt_tokens=10)
    out = fit_to_budget([too_long, *HITS], 12, cfg, rerender_from(table), WORDS, excerpts=True)
    assert out[0].node_id == "L" and out[0].text == "h" + "x" * 10 and out[0].excerpted == ("x",)
    assert sum(len(h.text) for h in out) <= 12
    # room for less than a whole excerpt: one of half the size
    small = fit_to_budget([too_long, *HITS], 8, cfg, rerender_from(table), WORDS, excerpts=True)
    assert small[0].text == "h" + "x" * 5 + "yy" and small[0].excerpted == ("x",)
    # off: passed over as before; a message within excerpt_tokens is never cut
    off = fit_to_budget([too_long, *HITS], 12, cfg, rerender_from(table), WORDS)
    assert "L" not in [h.node_id for h in off]
    short = fit_to_budget(
        [too_long, *HITS],
        12,
        cfg.model_copy(update={"excerpt_tokens": 40}),
        rerender_from(table),
        WORDS,
        excerpts=True,
    )
    assert "L" not in [h.node_id for h in short] and not any(h.excerpted for h in short)


def test_narrowed_hits_are_measured_by_their_text_and_built_once_at_the_end():
    built, measured = [], []
    rerender = rerender_from(TABLE)

    def build(h, ids, cut):
        built.append(h.node_id)
        return rerender(h, ids, cut)

    def text_of(h, ids, cut):
        measured.append(h.node_id)
        return rerender(h, ids, cut).text

    for strategy in ("ranked", "passes"):
        built.clear()
        out = fit_to_budget(HITS, 23, ContextConfig(strategy=strategy), build, WORDS, text_of)
        narrowed = [h.node_id for h in out if len(h.source_ids) < len(TABLE[h.node_id])]
        assert sorted(built) == sorted(narrowed) and len(measured) > len(built)
        assert out == fit_to_budget(HITS, 23, ContextConfig(strategy=strategy), rerender, WORDS)


def test_ranked_summaries_take_the_room_the_fragments_leave():
    summary = hit("S", {"s": "s" * 8}, "", kind="subtopic")
    hits = [HITS[0], summary, HITS[1], HITS[2]]
    assert fit_ranked(32, hits=hits) == [("A", ("a", "b", "c")), ("B", ("d", "e")), ("C", ("g", "h"))]
    assert fit_ranked(44, hits=hits) == [(h.node_id, h.source_ids) for h in hits]
    undeferred = fit_ranked(32, hits=hits, defer_summaries=False)
    assert ("S", ("s",)) in undeferred


def test_a_small_budget_shows_the_best_message_of_more_hits_instead_of_one_whole_hit():
    out = fit(10)  # whole, A alone costs 13; narrowed, A and B cost 5 each
    assert [(h.node_id, h.source_ids) for h in out] == [("A", ("c",)), ("B", ("e",))]
    assert all(h.text == "h" + "".join(TABLE[h.node_id][i] for i in h.source_ids) for h in out)


def test_room_left_widens_hits_round_by_round_best_hit_first_then_adds_more_hits():
    # Breadth: A{c} + B{e} = 10. Round 1: A{c,a} 14, B{e,d} 18. Round 2: A whole 22, B whole 26.
    # Then C narrowed to {h} would cost 31 > 28: not added.
    out = fit(28)
    assert [(h.node_id, h.source_ids) for h in out] == [("A", ("a", "b", "c")), ("B", ("d", "e", "f"))]
    out = fit(33)  # C{h} fits (31); C whole would cost 35
    assert [(h.node_id, h.source_ids) for h in out] == [
        ("A", ("a", "b", "c")),
        ("B", ("d", "e", "f")),
        ("C", ("h",)),
    ]


def test_room_left_after_every_hit_is_shown_gives_the_later_hits_their_messages_back():
    out = fit(35)
    assert [(h.node_id, h.source_ids) for h in out] == [
        ("A", ("a", "b", "c")),
        ("B", ("d", "e", "f")),
        ("C", ("g", "h")),
    ]
    assert [h.text for h in out] == [h.text for h in HITS]  # nothing narrowed: the hits as searched


@pytest.mark.parametrize("strategy", ["ranked", "passes"])
def test_fitted_hits_never_exceed_the_budget_and_keep_rank_order(strategy):
    cfg = ContextConfig(strategy=strategy, breadth_messages=2, breadth_hits=1)
    for budget in range(1, 60):
        out = fit_to_budget(HITS, budget, cfg, rerender_from(TABLE), WORDS)
        assert sum(WORDS(h.text) for h in out) <= budget
        assert [h.node_id for h in out] == ["A", "B", "C"][: len(out)]
        assert all(h.text == "h" + "".join(TABLE[h.node_id][i] for i in h.source_ids) for h in out)


def test_a_hit_that_does_not_fit_stops_the_adding_of_later_hits():
    big = hit("X", {"x": "x" * 50}, "x", kind="subtopic")  # no messages to narrow: shown whole or not at all
    out = fit_to_budget(
        [big, *HITS],
        20,
        ContextConfig(strategy="passes", breadth_messages=1, breadth_hits=4),
        rerender_from(TABLE),
        WORDS,
    )
    assert out == []


def test_a_hit_too_long_with_its_best_messages_is_shown_with_its_best_one():
    """Before: a first hit whose two best messages overran the budget ended the fitting, and a
    small budget came back empty."""
    out = fit(6, messages=2, hits=2)  # A narrowed to c, a costs 9; to c alone 5
    assert [(h.node_id, h.source_ids) for h in out] == [("A", ("c",))]


def test_later_summaries_wait_until_the_later_fragments_have_their_messages_back():
    """A subtopic summary ranked among the later hits holds no message: with ``defer_summaries``
    the later fragments are shown and widened first, the summary takes what room is left."""
    summary = hit("S", {"s": "s" * 8}, "", kind="subtopic")
    hits = [HITS[0], summary, HITS[1], HITS[2]]

    def ids(defer: bool, budget: int) -> list:
        cfg = ContextConfig(
            strategy="passes", breadth_messages=1, breadth_hits=1, later_messages=1, defer_summaries=defer
        )
        return [
            (h.node_id, h.source_ids) for h in fit_to_budget(hits, budget, cfg, rerender_from(TABLE), WORDS)
        ]

    # A whole (13), then in rank order S (9) and B{e}, C{h} (5 + 5) leave 0 to widen with; deferred,
    # B{e} and C{h} (23) widen round by round to B{d,e}, C{g,h} (31) and S no longer fits.
    assert ids(False, 32) == [("A", ("a", "b", "c")), ("S", ("s",)), ("B", ("e",)), ("C", ("h",))]
    assert ids(True, 32) == [("A", ("a", "b", "c")), ("B", ("d", "e")), ("C", ("g", "h"))]
    assert ids(True, 60) == [("A", ("a", "b", "c")), ("S", ("s",)), ("B", ("d", "e", "f")), ("C", ("g", "h"))]


# ------------------------------------------------------------------ through MnemisMemory

CHAT = [
    {"id": f"m{i}", "speaker": "ann", "text": t, "timestamp": f"2025-03-0{1 + i // 4}T09:0{i % 4}:00"}
    for i, t in enumerate(
        [
            "The refund for order 42 timed out at the bank callback.",
            "We also talked about the weather being rainy all week.",
            "My cousin is visiting next month from Porto.",
            "The bank says the refund callback is fixed now.",
            "Acme wants the pricing plan v2 draft by Friday.",
            "Lunch at the noodle place was great again.",
            "The printer on floor two is out of toner.",
            "Acme confirmed the pricing plan v2 with seats.",
        ]
    )
]


@pytest.fixture(scope="module")
def memory():
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(CHAT, namespace="u1")
    return mem


def test_search_with_max_tokens_fits_and_keeps_text_and_sources_in_agreement(memory):
    full = memory.search("refund bank callback", k=10, namespace="u1")
    assert sum(count_tokens(h.text) for h in full) > 60
    fitted = memory.search("refund bank callback", k=10, namespace="u1", max_tokens=60)
    assert 0 < sum(count_tokens(h.text) for h in fitted) <= 60
    rank = [h.node_id for h in full]
    places = [rank.index(h.node_id) for h in fitted]
    assert places == sorted(places) and places[0] == 0  # rank order kept, the best hit shown
    for h in fitted:
        for m in CHAT:
            assert (m["text"] in h.text) == (m["id"] in h.source_ids)


def test_focus_puts_the_matching_message_first_and_a_narrowed_fragment_shows_it(memory):
    top = memory.search("refund bank callback", k=3, namespace="u1")[0]
    assert top.kind == "fragment" and sorted(top.focus) == sorted(top.source_ids)
    assert top.focus[0] in {"m0", "m3"}
    narrowed = memory.fit_to_budget(
        [top], count_tokens(top.text) - 1, config=memory.config.with_(context={"breadth_messages": 1})
    )
    assert narrowed and top.focus[0] in narrowed[0].source_ids
    assert len(narrowed[0].source_ids) < len(top.source_ids)


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "100"])
def test_bad_budget_is_refused(memory, bad):
    with pytest.raises(InvalidQueryError, match="max_tokens"):
        memory.search("refund", k=3, namespace="u1", max_tokens=bad)


def test_a_speaker_named_by_the_query_has_their_own_messages_kept_first():
    # The margin off: the named speaker's own first, however much better another's lines match.
    mem = MnemisMemory(embedder=HashingEmbedder(), config=DEFAULT.with_(context={"speaker_margin": 1.0}))
    mem.add_messages(
        [
            {"id": "q", "speaker": "Tim", "text": "John, which books have you been reading lately?"},
            {"id": "a", "speaker": "John", "text": "Mostly Dune, and a book on habits."},
            {"id": "r", "speaker": "Tim", "text": "Books are great, I love reading books about books."},
        ],
        namespace="u1",
    )

    def fragment(query):
        return next(h for h in mem.search(query, k=3, namespace="u1") if h.kind == "fragment")

    top = fragment("What books has John read?")
    assert set(top.source_ids) == {"q", "a", "r"}
    assert top.focus[0] == "a"  # John's own answer, though Tim's lines match "books" better
    assert fragment("what books are great?").focus[0] != "a"


def test_a_named_speakers_own_question_takes_no_precedence():
    # The margin off, so only the rule acts: Melanie's question says nothing of her; the answer leads.
    mem = MnemisMemory(embedder=HashingEmbedder(), config=DEFAULT.with_(context={"speaker_margin": 1.0}))
    said = [
        ("ask", "Melanie", "Wow, that agency looks great! What made you pick it?"),
        ("why", "Caroline", "I chose the adoption agency since they support LGBTQ+ folks."),
        ("bye", "Melanie", "Good luck with the adoption agency!"),
    ]
    mem.add_messages([{"id": i, "speaker": who, "text": text} for i, who, text in said], namespace="u1")
    hits = mem.search("Why did Melanie choose the adoption agency?", k=3, namespace="u1")
    focus = next(h for h in hits if h.kind == "fragment").focus
    assert focus[0] == "bye"  # what Melanie states still comes first
    assert focus.index("why") < focus.index("ask")


def _two_speakers(margin: float | None = None) -> MnemisMemory:
    config = DEFAULT if margin is None else DEFAULT.with_(context={"speaker_margin": margin})
    mem = MnemisMemory(embedder=HashingEmbedder(), config=config)
    mem.add_messages(
        [
            {"id": "cake", "speaker": "Tim", "text": "I baked a lemon cake for the party on Saturday."},
            {"id": "nice", "speaker": "John", "text": "Nice, I missed it, I was at work."},
            {"id": "pie", "speaker": "John", "text": "Next time I bake a pie for the party."},
        ],
        namespace="u1",
    )
    return mem


def _focus_of(mem: MnemisMemory, query: str) -> tuple[str, ...]:
    return next(h for h in mem.search(query, k=3, namespace="u1") if h.kind == "fragment").focus


def test_another_speakers_far_better_match_leads_when_the_query_names_the_wrong_person():
    # "What did John say about the lemon cake?": Tim baked it; John's own lines hardly match.
    assert _focus_of(_two_speakers(), "Did John bake a lemon cake on Saturday?")[0] == "cake"
    assert _focus_of(_two_speakers(margin=1.0), "Did John bake a lemon cake on Saturday?")[0] == "pie"


def test_a_named_speakers_close_match_keeps_the_lead():
    # Tim's cake matches "a cake for the party" a little better than John's pie: within the margin.
    assert _focus_of(_two_speakers(), "Will John bake a cake for the party?")[0] == "pie"
    assert _focus_of(_two_speakers(margin=0.0), "Will John bake a cake for the party?")[0] == "cake"


def _venue_chat(reply_speaker: str, reply_hits: int = 1) -> MnemisMemory:
    mem = MnemisMemory(embedder=HashingEmbedder(), config=DEFAULT.with_(context={"reply_hits": reply_hits}))
    said = [
        ("ask", "Ann", "Which venue did you book for the team dinner?"),
        ("reply", reply_speaker, "The Harbour Room, for forty people."),
        ("ideas", "Ann", "Team dinner venue ideas are welcome, the dinner venue matters."),
    ]
    mem.add_messages([{"id": i, "speaker": who, "text": text} for i, who, text in said], namespace="u1")
    return mem


def test_a_question_in_the_first_hits_focus_is_followed_by_its_reply():
    # The question matches best but holds no answer; its reply hardly matches and would come last.
    query = "Which venue was booked for the team dinner?"
    assert _focus_of(_venue_chat("Bob"), query)[:2] == ("ask", "reply")
    # Off (reply_hits 0), or the next message is by the one who asked: each keeps its place by match.
    assert _focus_of(_venue_chat("Bob", reply_hits=0), query).index("ideas") < 2
    focus = _focus_of(_venue_chat("Ann"), query)
    assert focus.index("ideas") < focus.index("reply")


REPORT = (
    "The team met on Monday to go over the agenda for the quarter. " * 12
    + "Revenue in the Berlin office grew by 14 percent, driven by two new enterprise customers. "
    + "Costs in Madrid fell after the office move. "
    + "Everyone agreed to meet again next month to review the hiring plan. " * 12
)


def test_a_long_message_is_shown_by_its_matching_sentences_when_the_budget_has_no_room_for_it():
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(
        [
            {"id": "doc", "speaker": "tool", "text": REPORT},
            {"id": "q", "speaker": "user", "text": "Can you check the quarterly report?"},
        ],
        namespace="u1",
    )
    assert count_tokens(REPORT) > 300
    query = "How much did revenue in Berlin grow?"
    hits = mem.search(query, k=5, namespace="u1", max_tokens=200)
    shown = [h for h in hits if "doc" in h.source_ids]
    assert shown and shown[0].excerpted == ("doc",)
    assert "Berlin office grew by 14 percent" in shown[0].text and "agenda" not in shown[0].text
    assert sum(count_tokens(h.text) for h in hits) <= 200
    # the whole report without a budget; without the query the fitter cannot cut it, so leaves it out
    whole = mem.search(query, k=5, namespace="u1")
    assert any(REPORT.strip() in h.text and not h.excerpted for h in whole)
    assert not any("doc" in h.source_ids for h in mem.fit_to_budget(whole, 200))
