"""Issue #14: ``search(..., filter=...)`` over message metadata, on every backend.

A fragment hit is kept when one of its messages matches and shows only those; a concept or
subtopic hit only when a matching fragment lies beneath it; the filter narrows what is ranked,
so ``k`` hits still come back when that many match."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from _memories import backend  # noqa: F401  (fixture)
from _over_time import WEEKS

from mnemis_integrations import InvalidQueryError
from mnemis_integrations.core.filters import MetadataFilter
from mnemis_integrations.core.model import NodeKind
from mnemis_integrations.core.retrieval import cache as rcache
from mnemis_integrations.core.retrieval import semantic

TEAM = {
    **{f"m{i}": "sales" for i in (1, 2, 3, 4, 11)},
    **{f"m{i}": "ops" for i in range(5, 11)},
    "m12": "security",
}


def _metadata(m: dict) -> dict:
    i = int(m["id"][1:])
    md = {"priority": i % 3, "day": m["timestamp"].astimezone(timezone(timedelta(hours=-5))).isoformat()}
    if m["id"] in TEAM:
        md["team"] = TEAM[m["id"]]
    if i in (1, 9):
        md["vip"] = True
    return md


TAGGED = [m | {"metadata": _metadata(m)} for m in WEEKS]
BY_ID = {m["id"]: m for m in TAGGED}


@pytest.fixture
def tagged(backend):  # noqa: F811
    backend.open().add_messages(TAGGED, namespace="u1")
    return backend.open()


def _matching(flt: dict) -> set[str]:
    f = MetadataFilter.parse(flt)
    return {m["id"] for m in TAGGED if f.matches(m["metadata"])}


def _below(mem, node_id: str) -> set[str]:
    """Message ids of every fragment beneath (or at) a node."""
    g = mem.graph("u1")
    out, stack = set(), [node_id]
    while stack:
        n = g.get(stack.pop())
        if n.kind == NodeKind.FRAGMENT:
            out |= set(n.source_ids)
        stack += [c.id for c in g.children(n.id)]
    return out


# ------------------------------------------------------------------ the language
T = "2025-03-05T00:00:00+00:00"


@pytest.mark.parametrize(
    "flt, metadata, expected",
    [
        ({"team": "ops"}, {"team": "ops"}, True),
        ({"team": "ops"}, {"team": "sales"}, False),
        ({"team": "ops"}, {}, False),
        ({"team": {"$eq": "ops"}}, {"team": "ops"}, True),
        ({"team": {"$ne": "ops"}}, {"team": "sales"}, True),
        ({"team": {"$ne": "ops"}}, {}, True),  # a missing key is "not equal", as in MongoDB
        ({"team": {"$in": ["ops", "security"]}}, {"team": "security"}, True),
        ({"team": {"$in": ["ops", "security"]}}, {}, False),
        ({"team": {"$nin": ["ops"]}}, {"team": "sales"}, True),
        ({"team": {"$nin": ["ops"]}}, {"team": "ops"}, False),
        ({"priority": 2}, {"priority": 2.0}, True),
        ({"priority": 1}, {"priority": True}, False),  # types are kept apart
        ({"vip": True}, {"vip": 1}, False),
        ({"priority": "2"}, {"priority": 2}, False),
        ({"priority": {"$gte": 1, "$lte": 2}}, {"priority": 2}, True),
        ({"priority": {"$gte": 1, "$lte": 2}}, {"priority": 0}, False),
        ({"priority": {"$gt": 1}}, {"priority": "5"}, False),
        ({"priority": {"$lt": 1}}, {}, False),
        # ISO-8601 strings compare as times, whatever their offset
        ({"day": {"$gte": T}}, {"day": "2025-03-04T20:30:00-05:00"}, True),
        ({"day": {"$gte": "2025-03-05"}}, {"day": "2025-03-04T23:30:00+00:00"}, False),
        (
            {"day": {"$lte": datetime(2025, 3, 5, tzinfo=timezone.utc)}},
            {"day": "2025-03-04T20:30:00-05:00"},
            False,
        ),
        ({"day": {"$lt": datetime(2025, 3, 5)}}, {"day": "2025-03-04T18:59:00-05:00"}, True),  # naive = UTC
        ({"day": {"$gte": T}}, {"day": "soon"}, False),
        ({"day": datetime(2025, 3, 5, tzinfo=timezone.utc)}, {"day": "2025-03-04T19:00:00-05:00"}, True),
        ({"day": T}, {"day": "2025-03-04T19:00:00-05:00"}, False),  # a plain string matches exactly
        ({"name": {"$gte": "b"}}, {"name": "bob"}, True),  # other strings: code-point order
        ({"$or": [{"team": "ops"}, {"vip": True}]}, {"team": "sales", "vip": True}, True),
        ({"$and": [{"team": "ops"}, {"vip": True}]}, {"team": "ops"}, False),
        ({"team": "ops", "vip": True}, {"team": "ops", "vip": True}, True),
    ],
)
def test_the_filter_language(flt, metadata, expected):
    assert MetadataFilter.parse(flt).matches(metadata) is expected


@pytest.mark.parametrize(
    "flt, says",
    [
        (["team", "ops"], "must be a dict"),
        ({"team": {"$regex": "o.*"}}, "unknown filter operator '$regex'"),
        ({"$not": {"team": "ops"}}, "valid there: $and, $or"),
        ({"team": {"name": "ops"}}, "metadata is flat"),
        ({"team": {}}, "empty dict"),
        ({"team": ["ops", "sales"]}, "not list"),
        ({"team": None}, "not NoneType"),
        ({"team": {"$in": "ops"}}, "takes a list"),
        ({"team": {"$in": [["ops"]]}}, "not list"),
        ({"priority": {"$gte": True}}, "compares with a number"),
        ({"priority": {"$gte": None}}, "compares with a number"),
        ({"priority": {"$lte": float("inf")}}, "finite"),
        ({"$and": []}, "non-empty list"),
        ({"$or": {"team": "ops"}}, "non-empty list"),
        ({3: "x"}, "non-empty strings"),
    ],
)
def test_a_malformed_filter_is_refused_before_any_search_work(memory, monkeypatch, flt, says):
    memory.add_messages(TAGGED, namespace="u1")

    def no_embedding(_texts):
        raise AssertionError("embedded a query for a search that had to be refused")

    monkeypatch.setattr(memory.embedder, "embed_queries", no_embedding)
    with pytest.raises(InvalidQueryError) as err:
        memory.search("hosting", namespace="u1", filter=flt)
    assert says in str(err.value)


# ------------------------------------------------------------------ search, on every backend
@pytest.mark.parametrize(
    "flt",
    [
        {"team": "ops"},
        {"team": {"$in": ["sales", "security"]}},
        {"priority": {"$gte": 2}},
        {"day": {"$lt": "2025-03-05"}},
        {"$or": [{"vip": True}, {"team": "security"}]},
    ],
    ids=["eq", "in", "gte", "time", "or"],
)
def test_a_filtered_search_shows_only_matching_messages(tagged, flt):
    wanted = _matching(flt)
    hits = tagged.search(
        "refund bank callback hosting migration plan server", k=8, namespace="u1", filter=flt
    )
    assert hits
    for h in hits:
        if h.kind == "fragment":
            assert h.source_ids and set(h.source_ids) <= wanted
            others = set(_below(tagged, h.node_id)) - wanted
            assert not any(BY_ID[m]["text"] in h.text for m in others)
            assert set(h.message_metadata) == set(h.source_ids)
            assert all(h.message_metadata[m] == BY_ID[m]["metadata"] for m in h.source_ids)
        else:  # a concept or subtopic comes back only with a matching fragment beneath it
            assert _below(tagged, h.node_id) & wanted, h


def test_k_hits_come_back_when_the_filter_matches_that_many(tagged):
    """The filter narrows what is ranked: applied to the ranked hits afterwards it would leave
    nothing, since every unfiltered hit is about refunds."""
    query = "refund for order 42 timed out at the bank callback"
    plain = tagged.search(query, k=3, namespace="u1")
    assert not any(set(h.source_ids) & _matching({"team": "ops"}) for h in plain)
    hits = tagged.search(query, k=3, namespace="u1", filter={"team": "ops"})
    assert len(hits) == 3
    assert all(_below(tagged, h.node_id) & _matching({"team": "ops"}) for h in hits)


def test_a_filter_that_matches_nothing_gives_no_hits(tagged):
    assert tagged.search("refund", k=5, namespace="u1", filter={"team": "legal"}) == []


def test_no_filter_and_an_empty_filter_search_as_before(tagged):
    query = "what happened with the hosting migration plan"
    plain = [h.to_dict() for h in tagged.search(query, k=6, namespace="u1")]
    assert [h.to_dict() for h in tagged.search(query, k=6, namespace="u1", filter=None)] == plain
    assert [h.to_dict() for h in tagged.search(query, k=6, namespace="u1", filter={})] == plain


def test_a_filter_with_as_of_shows_only_what_matched_and_was_said_by_then(tagged):
    as_of = BY_ID["m8"]["timestamp"]  # before plan B (m9, m10) was said
    hits = tagged.search("hosting migration plan", k=8, namespace="u1", filter={"team": "ops"}, as_of=as_of)
    shown = {m for h in hits for m in h.source_ids}
    assert shown and shown <= {"m5", "m6", "m7", "m8"}


def test_budget_fitting_keeps_a_filtered_hit_to_its_matching_messages(tagged):
    flt = {"priority": {"$gte": 1}}
    hits = tagged.search("refund bank callback", k=6, namespace="u1", filter=flt, max_tokens=120)
    assert hits
    for h in hits:
        assert set(h.source_ids) <= _matching(flt)
        assert set(h.message_metadata) == set(h.source_ids)


def test_the_funnel_finds_matching_nodes_the_global_nearest_would_miss(tagged, monkeypatch):
    """On a large graph the funnel proposes the nearest nodes and messages first; with a filter it
    must propose the nearest *inside the filter*, or the answer depends on what lies outside."""
    query, flt = "refund for order 42 timed out at the bank callback", {"team": "ops"}
    exact = [h.node_id for h in tagged.search(query, k=3, namespace="u1", filter=flt)]
    monkeypatch.setattr(rcache, "FUNNEL_MIN_NODES", 1)
    for name, value in (
        ("FUNNEL_NODES", 2),
        ("FUNNEL_MESSAGES", 2),
        ("FUNNEL_LEXICAL", 2),
        ("FUNNEL_FLOOR_SAMPLE", 0),
    ):
        monkeypatch.setattr(semantic, name, value)
    st = tagged._state("u1")
    assert rcache.is_large(st)
    assert [h.node_id for h in tagged.search(query, k=3, namespace="u1", filter=flt)] == exact
    assert st.memo["scope"]  # the scope is computed once per write version


# ------------------------------------------------------------------ score threshold
def test_score_threshold_drops_hits_below_it(tagged):
    hits = tagged.search("refund bank callback", k=8, namespace="u1")
    cut = hits[2].score
    kept = tagged.search("refund bank callback", k=8, namespace="u1", score_threshold=cut)
    assert [h.node_id for h in kept] == [h.node_id for h in hits if h.score >= cut]
    assert len(kept) < len(hits)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.5", True])
def test_a_score_threshold_outside_zero_to_one_is_refused(tagged, bad):
    with pytest.raises(InvalidQueryError, match="score_threshold"):
        tagged.search("refund", namespace="u1", score_threshold=bad)
